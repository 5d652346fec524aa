"""The Ray backend: the local executor's slots, inside Ray actors on the nodes of a cluster.

``RayExecutor`` has the local :class:`~coevo_code.execution.executor.Executor`'s interface and
returns the same result dicts, cell for cell. Its workers are Ray actors, one per node that offers
the custom resource ``coevo_sandbox`` (start CPU nodes with ``ray start ...
--resources='{"coevo_sandbox": 1}'``), or, where no node offers it (a plain local ``ray.init()``),
one actor on the driver's node. Each actor builds a local ``Executor`` on its node, with that
node's own slot configuration (work dirs, uids, launcher, interpreter; nothing of the driver's
paths travels), and requests ``num_cpus`` equal to its slots plus one unit of ``coevo_sandbox``,
so that sandbox slots land on the CPU pool and never on GPU nodes.

The driver parses the jobs (a malformed one gives the local backend's ``{"id", "error"}``), cuts
them into units (a few programs x all tests, or one program x a chunk of tests; about
``unit_cells`` cells, fewer on small batches so that every slot gets work), keeps a bounded number
of units in flight (``units_in_flight``, default two per slot: one running, one queued), writes each
unit's outcomes into its job's matrices as it finishes, and calls ``progress(cells)``. On a node,
a unit holds one slot and runs its cells there with the local executor's own unit code (the same
server requests, budgets and retry), so a slow row never holds up the node's other slots.

Failures. A node counts as dead when Ray reports its actor dead (a node removed or drained: at
once; its raylet or the actor's process killed: about 2 s on the test cluster; a machine that
vanished: when Ray's health checks give up on it, tens of seconds with Ray's defaults), when its
actor answers no ping for ``node_timeout_s`` (default 30 s; pings go to busy nodes that have been
quiet for a third of that), or when it finishes no unit for longer than the largest time budget
of its units in flight (the local executor's budget for those cells, doubled for its own retry,
plus ``node_timeout_s``). Its actor is killed and its units in flight are retried on the other
nodes, each unit up to ``max_retries`` times (default 2), after which its cells become
``sandbox_error``. Every cell is written exactly once: a unit's result is
taken only from the attempt in flight, and a dead node's actor is killed, so late answers never
arrive. Where no node is left, the remaining cells are ``sandbox_error`` too; the next ``run``
starts actors on nodes that offer the resource again.

An executor holds every sandbox node's ``coevo_sandbox`` while it lives, so a second one is
refused (after a few seconds) unless both pass ``share`` (each then takes that part of every
node's resource and CPUs): the processes of a distributed run that all execute pass ``1/N``.

Ctrl-C during ``run`` cancels the queued units (``ray.cancel``; a unit already running on a slot
finishes there, bounded by its limits) and re-raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import queue
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .backends import ExecutorBase
from .executor import _JobState, finish_batch, start_batch
from .jobs import Job

log = logging.getLogger(__name__)

RESOURCE = "coevo_sandbox"
INSTALL_HINT = "the ray backend needs Ray: pip install -e '.[ray]'"
# test chunks at least this large travel once through the object store, not with every unit
SHARE_TESTS_BYTES = 64 * 1024


class RayMissingError(ImportError):
    """Ray is not installed here."""


class RayBackendError(RuntimeError):
    """The cluster cannot run the sandbox (no node, a version mismatch, an actor that failed)."""


def _import_ray():
    try:
        import ray
    except ImportError:
        raise RayMissingError(INSTALL_HINT) from None
    return ray


def _package_version() -> str:
    from .. import version
    return str(version.__version__)


# ---- the actor -----------------------------------------------------------------------------------
class _SandboxWorker:
    """The body of a node's actor: a local Executor and a pool of its free slots.

    Runs in the actor's process on its node. ``run_unit`` calls run in the ``units`` concurrency
    group (as many threads as slots), the rest in ``control`` so that pings are answered while
    every slot is busy.
    """

    def __init__(self, driver_version: str, slots: int, options: dict):
        import ray

        ctx = ray.get_runtime_context()
        self.node = {"node_id": ctx.get_node_id(), "ip": ray.util.get_node_ip_address(),
                     "hostname": socket.gethostname(), "pid": os.getpid()}
        self.version = _package_version()
        self.error: tuple[str, str] | None = None
        self.ex = None
        self._free: queue.Queue = queue.Queue()
        self._cells: dict[int, int] = {}
        self._lock = threading.Lock()
        self._closing = False
        if self.version != driver_version:
            self.error = ("version", f"coevo-code {self.version} is installed on node "
                                     f"{self.node['ip']} ({self.node['hostname']}), "
                                     f"{driver_version} on the driver: install the same version "
                                     "on every node")
            return
        from .executor import Executor, IsolationError
        try:
            self.ex = Executor(slots=slots, **options)
        except IsolationError as e:
            self.error = ("isolation", str(e))
            return
        except Exception as e:  # noqa: BLE001 - reported to the driver, which raises
            self.error = ("start", f"{type(e).__name__}: {e}")
            return
        for s in self.ex.slots:
            self._free.put(s)
            self._cells[s.index] = 0

    def hello(self) -> dict:
        return {"node": dict(self.node, sandbox_dir=self.ex._base if self.ex else None),
                "version": self.version, "error": self.error,
                "slots": len(self.ex.slots) if self.ex else 0,
                "isolation": self.ex.isolation if self.ex else None}

    def ping(self) -> bool:
        return True

    def run_unit(self, job: Job, tests=None):
        """Run one unit (a sub-job: some programs x some tests) on one free slot; returns its
        outcomes and outputs (``None`` unless asked). ``tests``, when given, replaces the
        job's (the driver puts large test chunks in the object store once, for every program)."""
        ex = self.ex
        if tests is not None:
            job = dataclasses.replace(job, tests=tests)
        slot = self._free.get()
        if self._closing:  # a unit queued behind shutdown(): its slots are gone
            self._free.put(slot)
            raise RuntimeError("this sandbox actor is shutting down")
        try:
            n, t = job.shape
            st = _JobState(job, [[None] * t for _ in range(n)],
                           [[""] * t for _ in range(n)] if job.return_outputs else None)
            for unit in ex._units(0, job, st, ex.chunk_tests):
                ex._run_unit(slot, unit, st)
            if slot.channel is not None:  # the server's fork counter, for stats()
                try:
                    cells = slot.call({"op": "stats"}, 10.0).get("cells", 0)
                    with self._lock:
                        self._cells[slot.index] = cells
                except Exception:  # noqa: BLE001 - a server in doubt is replaced next unit
                    slot.close()
            return st.outcomes, st.outputs
        finally:
            self._free.put(slot)

    def stats(self) -> dict:
        with self._lock:
            return {"cells": sum(self._cells.values())}

    def shutdown(self, wait_s: float = 20.0) -> bool:
        """Close the slots once the units running on them finish (at most ``wait_s``): a
        judge killed under a running unit would be restarted by it."""
        self._closing = True
        if self.ex is not None:
            deadline = time.monotonic() + wait_s
            for _ in self.ex.slots:
                try:
                    self._free.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
            self.ex.close()
        return True


_REMOTE_CLASSES: dict = {}


def _actor_class(ray, slots: int):
    """The remote class for an actor of ``slots`` slots (concurrency groups are fixed per class)."""
    cls = _REMOTE_CLASSES.get(slots)
    if cls is None:
        for name in ("hello", "ping", "stats", "shutdown"):
            ray.method(concurrency_group="control")(getattr(_SandboxWorker, name))
        ray.method(concurrency_group="units")(_SandboxWorker.run_unit)
        cls = ray.remote(concurrency_groups={"units": slots, "control": 2})(_SandboxWorker)
        _REMOTE_CLASSES[slots] = cls
    return cls


# ---- connecting ----------------------------------------------------------------------------------
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def _loopback_bound(ray, address: str) -> bool:
    """Whether ``address`` names a cluster bound to the loopback interface only.

    Ray rewrites a loopback address to this host's routable IP before connecting; a cluster
    bound to 127.0.0.1 (the tests', the local instance this backend starts) is not there.
    """
    host, _, port = address.rpartition(":")
    if host not in _LOOPBACK or not port.isdigit():
        return False
    ip = ray.util.get_node_ip_address()
    if ip in _LOOPBACK:
        return False
    try:
        socket.create_connection((ip, int(port)), timeout=1.0).close()
        return False
    except OSError:
        return True


@contextlib.contextmanager
def _loopback_only(on: bool):
    """Make ``ray.init`` keep 127.0.0.1 as this node's address (it binds its services there).

    Ray offers no public switch for it on Linux; its constant ``ENABLE_RAY_CLUSTER`` (False on
    macOS and Windows, where Ray stays on the loopback interface) is what decides. Where that
    constant is gone, Ray's default applies and a warning says so.
    """
    if not on:
        yield
        return
    try:
        from ray._private import ray_constants
        old = ray_constants.ENABLE_RAY_CLUSTER
    except (ImportError, AttributeError):
        log.warning("this Ray version has no loopback switch: the local Ray instance listens "
                    "on every interface")
        yield
        return
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = old


def _init_ray(ray, address: str | None, extra: dict | None) -> bool:
    """Start or connect Ray unless this process already did; True if this call did."""
    if ray.is_initialized():
        return False
    kw = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address is None:  # a new local instance of our own (ray.init() alone would join one
        # that `ray start` left running here): loopback only, no dashboard
        kw["address"] = "local"
        kw["include_dashboard"] = False
        loopback = True
    else:
        kw["address"] = address
        loopback = _loopback_bound(ray, address)
    kw.update(extra or {})
    with _loopback_only(loopback):
        ray.init(**kw)
    return True


# ---- the driver ----------------------------------------------------------------------------------
@dataclass
class _RUnit:
    job: int
    p0: int
    p1: int
    a: int
    b: int
    budget_s: float
    attempts: int = 0

    @property
    def cells(self) -> int:
        return (self.p1 - self.p0) * (self.b - self.a)


@dataclass
class _Node:
    actor: Any
    node_id: str
    ip: str
    hostname: str
    pid: int
    sandbox_dir: str | None
    slots: int
    isolation: dict
    alive: bool = True
    cap: int = 1
    inflight: dict = field(default_factory=dict)  # ref -> unit
    heard: float = 0.0        # last answer (a unit or a ping)
    progressed: float = 0.0   # last finished unit, or when it last became busy
    ping_ref: Any = None
    ping_sent: float = 0.0
    error: str = ""


class RayExecutor(ExecutorBase):
    """Run untrusted programs against tests on the CPU nodes of a Ray cluster.

    Args:
        address: the cluster (``ray://host:10001``, ``host:6379`` or ``auto``); default: start a
            new local Ray instance, bound to 127.0.0.1, without a dashboard. If Ray is already
            initialised in this process, that connection is used (and not shut down on close).
        slots: slots per node (default: the node's ``CPU`` resource, times ``share``); each
            actor requests that many CPUs.
        launcher, allow_unsafe, use_uid, preload, heavy_preload, chunk_tests, disable: the local
            executor's options, applied on every node.
        unit_cells: cells per unit of work sent to a node (fewer on small batches).
        units_in_flight: units in flight over the whole cluster (default: 2 per slot).
        max_retries: how many times a unit lost with its node is retried on other nodes before
            its cells become ``sandbox_error`` (default 2).
        node_timeout_s: a busy node whose actor answers no ping for this long counts as dead
            (default 30 s); also the margin added to every unit's time budget.
        start_timeout_s: how long to wait for the actors to start (placement and slots).
        share: the part of every sandbox node this executor takes (default: all of it). Each
            actor requests ``share`` of the node's ``coevo_sandbox`` and, by default,
            ``share`` of its CPUs as slots, so that 1/share executors (the processes of a
            distributed training run that all execute) can use the cluster at once; with
            ``share=1`` a second executor is refused (quickly) while the first lives.
        ray_init: extra keyword arguments for ``ray.init`` (only when this executor calls it).
    """

    def __init__(self, address: str | None = None, slots: int | None = None,
                 launcher: str = "auto", allow_unsafe: bool = False, use_uid: bool = True,
                 preload: Iterable[str] | None = None, heavy_preload: Iterable[str] | None = None,
                 chunk_tests: int = 8, disable: Iterable[str] = (), unit_cells: int = 64,
                 units_in_flight: int | None = None, max_retries: int = 2,
                 node_timeout_s: float = 30.0, start_timeout_s: float = 120.0,
                 share: float = 1.0, ray_init: dict | None = None):
        ray = _import_ray()
        if not isinstance(launcher, str):
            raise ValueError("the ray backend takes a launcher by name (auto, bwrap, direct, "
                             "docker): each node builds its own")
        if slots is not None and slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share}")
        self.share = float(share)
        from .executor import DEFAULT_HEAVY_PRELOAD, DEFAULT_PRELOAD
        self._ray = ray
        self.address = address
        self.slots_per_node = slots
        self.options = {"launcher": launcher, "allow_unsafe": bool(allow_unsafe),
                        "use_uid": bool(use_uid),
                        "preload": tuple(DEFAULT_PRELOAD if preload is None else preload),
                        "heavy_preload": tuple(DEFAULT_HEAVY_PRELOAD if heavy_preload is None
                                               else heavy_preload),
                        "chunk_tests": max(1, int(chunk_tests)), "disable": tuple(disable)}
        self.unit_cells = max(1, int(unit_cells))
        self._units_in_flight = units_in_flight
        self.max_retries = max(0, int(max_retries))
        self.node_timeout_s = float(node_timeout_s)
        self.start_timeout_s = float(start_timeout_s)
        self.version = _package_version()
        self._nodes: list[_Node] = []
        self._closed = False
        self._run_lock = threading.Lock()
        self._cpu_s = 0.0
        self._cells = 0
        self._lost = 0
        self._lost_since_spawn = False
        self.isolation: dict = {}
        self._started_ray = _init_ray(ray, address, ray_init)
        self._starting: list = []
        self._last_refresh = 0.0
        self._resource_mode: bool | None = None
        try:
            self._spawn()
        except BaseException:
            self.close()
            raise
        self._layout()

    # ---- actors ----------------------------------------------------------------------------------
    def _targets(self) -> tuple[list[dict], bool]:
        """The nodes to hold actors, and whether they are the ones with ``coevo_sandbox``.
        Without such nodes at start-up, the driver's node; once the cluster had them, never
        anything else (the driver's node may be a GPU node)."""
        ray = self._ray
        alive = [n for n in ray.nodes() if n.get("Alive")]
        sandbox = [n for n in alive if n.get("Resources", {}).get(RESOURCE, 0) >= 1]
        if sandbox or self._resource_mode:
            self._resource_mode = True
            return sandbox, True
        self._resource_mode = False
        me = ray.get_runtime_context().get_node_id()
        return [n for n in alive if n["NodeID"] == me] or alive[:1], False

    def _start_actors(self) -> list:
        """Start an actor on every target node that has none (alive or starting)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._ray
        targets, use_resource = self._targets()
        have = {n.node_id for n in self._nodes if n.alive}
        have |= {s[0]["NodeID"] for s in self._starting}
        starting = []
        for node in targets:
            if node["NodeID"] in have:
                continue
            cpus = int(node.get("Resources", {}).get("CPU", 0))
            slots = self.slots_per_node or max(1, int(cpus * self.share))
            if slots < 1 or slots > cpus:
                log.warning("node %s (%s) offers %d CPUs, fewer than %d slots: no sandbox there",
                            node["NodeID"][:8], node.get("NodeManagerAddress"), cpus, slots)
                continue
            opts = {"num_cpus": slots, "max_restarts": 0, "max_task_retries": 0,
                    "scheduling_strategy": NodeAffinitySchedulingStrategy(node["NodeID"],
                                                                          soft=False)}
            if use_resource:
                opts["resources"] = {RESOURCE: self.share}
            actor = _actor_class(ray, slots).options(**opts).remote(self.version, slots,
                                                                    self.options)
            starting.append((node, slots, actor, actor.hello.remote(), time.monotonic(),
                             use_resource))
        return starting

    def _collect(self, timeout: float) -> list[tuple[str, str]]:
        """Take the actors of ``self._starting`` that said hello within ``timeout``; drop those
        that failed or outlived ``start_timeout_s``. Returns the problems (kind, message)."""
        ray = self._ray
        if not self._starting:
            return []
        refs = [s[3] for s in self._starting]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        ready = set(ready)
        problems: list[tuple[str, str]] = []
        still = []
        now = time.monotonic()
        for item in self._starting:
            node, slots, actor, ref, t0, use_resource = item
            where = f"node {node.get('NodeManagerAddress')} ({node['NodeID'][:8]})"
            if ref not in ready:
                if now - t0 < self.start_timeout_s:
                    still.append(item)
                    continue
                problems.append(("start", f"{where}: the sandbox actor was not placed within "
                                          f"{self.start_timeout_s:.0f} s (it needs {slots} CPUs"
                                          + (f" and {self.share:g} '{RESOURCE}'" if use_resource
                                             else "")
                                          + " free there: does another executor hold them?)"))
                self._kill(actor)
                continue
            try:
                hello = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - the actor could not even be built
                lines = str(e).strip().splitlines()
                problems.append(("start", f"{where}: the sandbox actor did not start "
                                          f"(is coevo-code {self.version} installed there?): "
                                          f"{type(e).__name__}: {lines[-1] if lines else ''}"))
                self._kill(actor)
                continue
            if hello["error"] is not None:
                kind, msg = hello["error"]
                problems.append((kind, f"{where}: {msg}"))
                self._kill(actor)
                continue
            info = hello["node"]
            self._nodes.append(_Node(actor, info["node_id"], info["ip"], info["hostname"],
                                     info["pid"], info.get("sandbox_dir"), hello["slots"],
                                     hello["isolation"]))
        self._starting = still
        return problems

    def _spawn(self) -> None:
        """At start-up: an actor on every sandbox node, all said hello, or an error."""
        self._starting = self._start_actors()
        if not self._starting:
            raise RayBackendError(
                "no Ray node can hold a sandbox actor (alive nodes with the resource "
                f"'{RESOURCE}' and at least {self.slots_per_node or 1} CPUs)")
        ray = self._ray
        problems: list[tuple[str, str]] = []
        t0 = time.monotonic()
        while self._starting:
            waited = time.monotonic() - t0
            if waited > self.start_timeout_s:
                break
            problems += self._collect(min(5.0, self.start_timeout_s + 0.5 - waited))
            held = self._starting and self._resource_mode and waited > 8.0 and \
                ray.available_resources().get(RESOURCE, 0) < self.share - 1e-6
            if held:  # fail fast rather than wait for a resource someone else holds
                for node, slots, actor, *_ in self._starting:
                    problems.append(("start", f"node {node.get('NodeManagerAddress')} "
                                              f"({node['NodeID'][:8]}): its '{RESOURCE}' is "
                                              "held by other executors (each takes share="
                                              f"{self.share:g} of every node)"))
                break
        for item in self._starting:  # not placed in time
            self._kill(item[2])
        self._starting = []
        if problems:
            for n in self._nodes:
                self._kill(n.actor)
            self._nodes = []
            from .executor import IsolationError
            text = "; ".join(m for _, m in problems)
            if {k for k, _ in problems} == {"isolation"}:
                raise IsolationError(text)
            raise RayBackendError(text)

    def _refresh(self) -> None:
        """Before a run: after a node was lost, start actors on sandbox nodes that have none
        (without waiting for them unless no node is left), and take those that are ready."""
        now = time.monotonic()
        live = any(n.alive for n in self._nodes)
        if not live or (self._lost_since_spawn and now - self._last_refresh > 10.0):
            self._nodes = [n for n in self._nodes if n.alive]
            self._last_refresh = now
            self._lost_since_spawn = False
            try:
                self._starting += self._start_actors()
            except Exception as e:  # noqa: BLE001 - the cluster did not answer: run on
                log.warning("ray backend: could not look for sandbox nodes: %s", e)
        if self._starting:
            wait = 0.0
            if not live:  # nothing else to run on: wait for the new actors
                wait = max(0.0, self.start_timeout_s - (now - min(s[4] for s in self._starting)))
            for _, m in self._collect(wait):
                log.warning("ray backend: %s", m)
            self._layout()

    def _kill(self, actor) -> None:
        try:
            self._ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def _layout(self) -> None:
        """Per-node caps on units in flight, and the isolation report."""
        live = [n for n in self._nodes if n.alive]
        total = sum(n.slots for n in live) or 1
        budget = self._units_in_flight or 2 * total
        for n in live:
            n.cap = max(1, round(budget * n.slots / total))
        self.isolation = self._isolation_report()

    def _isolation_report(self) -> dict:
        nodes = [n for n in self._nodes if n.alive]
        if not nodes:
            return {"launcher": None, "slots": 0, "python": None, "preloaded": [], "layers": {},
                    "nodes": []}
        first = nodes[0].isolation
        launchers = sorted({n.isolation["launcher"] for n in nodes})
        layers: dict[str, tuple[bool, str]] = {}
        for name, (on, detail) in first["layers"].items():
            ons = [bool(n.isolation["layers"].get(name, (False, ""))[0]) for n in nodes]
            if all(ons) or not any(ons):
                layers[name] = (ons[0], detail)
            else:
                layers[name] = (False, f"on {sum(ons)} of {len(ons)} nodes; {detail}")
        return {"launcher": launchers[0] if len(launchers) == 1 else "mixed: " + ", ".join(
                    launchers),
                "slots": sum(n.slots for n in nodes), "python": first.get("python"),
                "preloaded": first.get("preloaded", []), "layers": layers,
                "nodes": [{"node_id": n.node_id, "ip": n.ip, "hostname": n.hostname,
                           "actor_pid": n.pid, "sandbox_dir": n.sandbox_dir,
                           "launcher": n.isolation["launcher"], "slots": n.slots,
                           "python": n.isolation.get("python"),
                           "layers": n.isolation["layers"]} for n in nodes]}

    # ---- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        try:
            for item in getattr(self, "_starting", []):
                self._kill(item[2])
            live = [n for n in self._nodes if n.alive]
            if live and ray.is_initialized():
                refs = [n.actor.shutdown.remote() for n in live]
                ray.wait(refs, num_returns=len(refs), timeout=30)
                for n in live:
                    self._kill(n.actor)
        finally:
            self._nodes = []
            if self._started_ray and ray.is_initialized():
                ray.shutdown()

    def stats(self) -> dict:
        """``cells``: programs forked so far, summed over the live nodes' slots (as the local
        ``stats``); ``nodes``: the same per node; ``driver_cpu_s_per_cell``: the driver's CPU
        time in ``run`` per cell, over every run so far."""
        ray = self._ray
        live = [n for n in self._nodes if n.alive]
        refs = [n.actor.stats.remote() for n in live]
        per = []
        for n, ref in zip(live, refs):
            try:
                cells = ray.get(ref, timeout=self.node_timeout_s)["cells"]
            except Exception:  # noqa: BLE001 - a node that stopped answering
                cells = None
            per.append({"node_id": n.node_id, "ip": n.ip, "slots": n.slots, "cells": cells})
        return {"cells": sum(p["cells"] or 0 for p in per), "nodes": per,
                "nodes_lost": self._lost, "driver_cpu_s": round(self._cpu_s, 6),
                "driver_cpu_s_per_cell": self._cpu_s / self._cells if self._cells else 0.0}

    # ---- running ---------------------------------------------------------------------------------
    def run(self, jobs: Iterable[Any], progress: Callable[[int], None] | None = None) -> list[dict]:
        """Run every job; one result dict per job, in order, as the local ``Executor.run``.

        ``progress``, if given, is called with the number of cells finished after each unit.
        """
        with self._run_lock:
            cpu0 = time.process_time()
            cells = [0]
            try:
                return self._run(jobs, progress, cells)
            finally:
                self._cpu_s += time.process_time() - cpu0
                self._cells += cells[0]

    def _run(self, jobs, progress, counted) -> list[dict]:
        if self._closed:
            raise RuntimeError("this RayExecutor is closed")
        results, states = start_batch(jobs)
        units = self._plan(states)
        counted[0] = sum(u.cells for u in units)
        if units:
            self._refresh()
            self._drive(states, units, progress)
        return finish_batch(results, states)

    def _plan(self, states: list[_JobState | None]) -> list[_RUnit]:
        """Units of about ``unit_cells`` cells: a few programs x all tests when tests are few,
        else one program x a chunk of tests; on small batches smaller ones, so that every slot
        gets some."""
        live = sum(n.slots for n in self._nodes if n.alive) or 1
        total = sum(st.job.shape[0] * st.job.shape[1] for st in states if st is not None)
        size = max(1, min(self.unit_cells, -(-total // (4 * live))))
        chunk = self.options["chunk_tests"]
        units = []
        for i, st in enumerate(states):
            if st is None:
                continue
            job = st.job
            n, t = job.shape
            if n == 0 or t == 0:
                continue
            cell_s = job.wall_limit_s + (max(job.wall_limit_s, 5.0) if job.checker else 0.0) + 1.0
            if t >= size:
                k = -(-t // size)
                step = -(-t // k)
                spans = [(p, p + 1, a, min(t, a + step)) for p in range(n)
                         for a in range(0, t, step)]
            else:
                per = max(1, size // t)
                k = -(-n // per)
                per = -(-n // k)
                spans = [(p, min(n, p + per), 0, t) for p in range(0, n, per)]
            for p0, p1, a, b in spans:
                # the local executor's budget for these cells (its units of chunk_tests tests),
                # twice for its own retry, plus the node margin
                local_units = (p1 - p0) * -(-(b - a) // chunk)
                budget = 2 * ((p1 - p0) * (b - a) * cell_s + 10.0 * local_units)
                units.append(_RUnit(i, p0, p1, a, b, budget + self.node_timeout_s))
        return units

    def _payload(self, st: _JobState, u: _RUnit, shared: dict) -> tuple:
        """The unit's arguments: its sub-job, and its tests by reference when they are large
        (put in the object store once, for every program's unit)."""
        job = st.job
        key = (u.job, u.a, u.b)
        ref = shared.get(key)
        if ref is None:
            tests = job.tests[u.a:u.b]
            if job.kind == "stdio":
                size = sum(len(i) + len(o) for i, o in tests)
            else:
                size = sum(len(c) for c in tests)
            ref = shared[key] = self._ray.put(tests) if size >= SHARE_TESTS_BYTES else False
        if ref is False:
            return (dataclasses.replace(job, id=None, programs=job.programs[u.p0:u.p1],
                                        tests=job.tests[u.a:u.b]),)
        return dataclasses.replace(job, id=None, programs=job.programs[u.p0:u.p1], tests=[]), ref

    def _drive(self, states: list, units: list[_RUnit], progress) -> None:
        ray = self._ray
        from ray.exceptions import RayActorError

        pending = deque(units)
        inflight: dict = {}   # ref -> (node, unit)
        pings: dict = {}      # ref -> node
        shared: dict = {}     # (job, a, b) -> the tests' object ref, or False: sent inline
        now = time.monotonic()
        for n in self._nodes:
            n.inflight.clear()
            n.heard = n.progressed = now
            n.ping_ref = None

        def write(u: _RUnit, outcomes, outputs) -> None:
            st = states[u.job]
            for r in range(u.p1 - u.p0):
                st.outcomes[u.p0 + r][u.a:u.b] = outcomes[r]
                if st.outputs is not None and outputs is not None:
                    st.outputs[u.p0 + r][u.a:u.b] = outputs[r]
            st.t1 = max(st.t1, time.monotonic())
            if progress is not None:
                progress(u.cells)

        def give_up(u: _RUnit) -> None:
            write(u, [["sandbox_error"] * (u.b - u.a)] * (u.p1 - u.p0), None)

        def retry(u: _RUnit) -> None:
            u.attempts += 1
            if u.attempts > self.max_retries:
                give_up(u)
            else:
                pending.appendleft(u)

        def lose(node: _Node, why: str) -> None:
            if not node.alive:
                return
            node.alive = False
            node.error = why
            self._lost += 1
            self._lost_since_spawn = True
            lost = list(node.inflight)
            log.warning("sandbox node %s (%s) lost: %s; %d unit(s) in flight retried elsewhere",
                        node.ip, node.node_id[:8], why, len(lost))
            self._kill(node.actor)
            for ref in lost:
                _, u = inflight.pop(ref)
                retry(u)
            node.inflight.clear()
            if node.ping_ref is not None:
                pings.pop(node.ping_ref, None)
                node.ping_ref = None
            live = [n for n in self._nodes if n.alive]
            total = sum(n.slots for n in live) or 1
            budget = self._units_in_flight or 2 * total
            for n in live:  # the survivors take the lost node's share of the window
                n.cap = max(1, round(budget * n.slots / total))

        def submit() -> None:
            live = [n for n in self._nodes if n.alive]
            while pending and live:
                node = min(live, key=lambda n: len(n.inflight) / n.cap)
                if len(node.inflight) >= node.cap:
                    return
                u = pending.popleft()
                st = states[u.job]
                t = time.monotonic()
                if not st.t0:
                    st.t0 = t
                if not node.inflight:
                    node.progressed = max(node.progressed, t)
                ref = node.actor.run_unit.remote(*self._payload(st, u, shared))
                inflight[ref] = (node, u)
                node.inflight[ref] = u

        try:
            while pending or inflight:
                submit()
                if not inflight:  # no live node is left for what remains
                    log.error("ray backend: no live sandbox node; %d unit(s) become "
                              "sandbox_error", len(pending))
                    while pending:
                        give_up(pending.popleft())
                    break
                refs = list(inflight) + list(pings)
                ready, _ = ray.wait(refs, num_returns=1, timeout=1.0)
                if ready and len(refs) > 1:
                    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                now = time.monotonic()
                for ref in ready:
                    if ref in pings:
                        node = pings.pop(ref)
                        node.ping_ref = None
                        try:
                            ray.get(ref)
                            node.heard = now
                        except RayActorError as e:
                            lose(node, f"{type(e).__name__}")
                        continue
                    if ref not in inflight:  # its node was lost meanwhile
                        continue
                    node, u = inflight.pop(ref)
                    node.inflight.pop(ref, None)
                    try:
                        outcomes, outputs = ray.get(ref)
                        if len(outcomes) != u.p1 - u.p0 or any(
                                len(r) != u.b - u.a for r in outcomes):
                            raise ValueError("a result of the wrong shape")
                    except RayActorError as e:  # the node's actor is gone: retry elsewhere
                        retry(u)
                        lose(node, type(e).__name__)
                        continue
                    except Exception as e:  # noqa: BLE001 - the unit failed, the node answers
                        node.heard = node.progressed = now
                        log.error("ray backend: a unit failed on node %s: %s", node.ip,
                                  str(e).strip().splitlines()[-1] if str(e).strip() else e)
                        retry(u)
                        continue
                    node.heard = node.progressed = now
                    write(u, outcomes, outputs)
                # watchdog: pings for nodes that went quiet, and deadlines
                for node in [n for n in self._nodes if n.alive and n.inflight]:
                    quiet = now - node.heard
                    longest = max(u.budget_s for u in node.inflight.values())
                    if quiet > self.node_timeout_s:
                        lose(node, f"no answer for {quiet:.0f} s")
                    elif now - node.progressed > longest:
                        lose(node, f"no unit finished within {longest:.0f} s")
                    elif quiet > self.node_timeout_s / 3 and node.ping_ref is None:
                        node.ping_ref = node.actor.ping.remote()
                        node.ping_sent = now
                        pings[node.ping_ref] = node
            if any(not n.alive for n in self._nodes):
                self._layout()
        except KeyboardInterrupt:
            for ref in list(inflight):
                try:
                    ray.cancel(ref)
                except Exception:  # noqa: BLE001 - the task may be done or its node gone
                    pass
            raise


def doctor_report(address: str | None = None, launcher: str = "auto", use_uid: bool = True,
                  **options) -> str:
    """Each sandbox node's isolation layers, as ``coevo doctor --backend ray`` prints them."""
    ex = RayExecutor(address=address, slots=1, launcher=launcher, use_uid=use_uid,
                     allow_unsafe=True, **options)
    try:
        rep = ex.isolation
        lines = [f"ray cluster {address or '(local instance)'}: {len(rep['nodes'])} sandbox "
                 f"node(s); coevo-code {ex.version}"]
        for node in rep["nodes"]:
            lines.append(f"node {node['ip']} ({node['hostname']}, {node['node_id'][:8]}): "
                         f"launcher {node['launcher']}, python {node['python']}")
            width = max((len(k) for k in node["layers"]), default=0)
            for name, (on, detail) in node["layers"].items():
                lines.append(f"  [{'on ' if on else 'OFF'}] {name:<{width}}  {detail}")
        return "\n".join(lines)
    finally:
        ex.close()
