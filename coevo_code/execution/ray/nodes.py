"""The nodes of one Ray executor: a sandbox actor on every node that offers ``coevo_sandbox``
(or, on a plain local instance, on the driver's node), started, said hello, lost and replaced."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from .actor import actor_class
from .cluster import RESOURCE, RayBackendError

log = logging.getLogger(__name__)


@dataclass
class Node:
    """A node's sandbox actor, what it said in hello, and the driver's bookkeeping of it."""
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


class NodePool:
    """The sandbox actors of one executor, one per node.

    ``nodes`` are the actors that said hello (``alive`` until lost); ``starting`` those still
    being placed; ``lost`` counts nodes lost so far; ``isolation`` is the executor's isolation
    report over the live nodes; each live node's ``cap`` is its part of ``units_in_flight``
    (default two per slot), in proportion to its slots.
    """

    def __init__(self, ray, version: str, options: dict, slots_per_node: int | None,
                 share: float, start_timeout_s: float, units_in_flight: int | None):
        self.ray = ray
        self.version = version
        self.options = options
        self.slots_per_node = slots_per_node
        self.share = share
        self.start_timeout_s = start_timeout_s
        self.units_in_flight = units_in_flight
        self.nodes: list[Node] = []
        self.starting: list = []
        self.lost = 0
        self.lost_since_spawn = False
        self.last_refresh = 0.0
        self.resource_mode: bool | None = None
        self.isolation: dict = {}

    def live(self) -> list[Node]:
        return [n for n in self.nodes if n.alive]

    def targets(self) -> tuple[list[dict], bool]:
        """The nodes to hold actors, and whether they are the ones with ``coevo_sandbox``.
        Without such nodes at start-up, the driver's node; once the cluster had them, never
        anything else (the driver's node may be a GPU node)."""
        ray = self.ray
        alive = [n for n in ray.nodes() if n.get("Alive")]
        sandbox = [n for n in alive if n.get("Resources", {}).get(RESOURCE, 0) >= 1]
        if sandbox or self.resource_mode:
            self.resource_mode = True
            return sandbox, True
        self.resource_mode = False
        me = ray.get_runtime_context().get_node_id()
        return [n for n in alive if n["NodeID"] == me] or alive[:1], False

    def start_actors(self) -> list:
        """Start an actor on every target node that has none (alive or starting)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray
        targets, use_resource = self.targets()
        have = {n.node_id for n in self.nodes if n.alive}
        have |= {s[0]["NodeID"] for s in self.starting}
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
            actor = actor_class(ray, slots).options(**opts).remote(self.version, slots,
                                                                    self.options)
            starting.append((node, slots, actor, actor.hello.remote(), time.monotonic(),
                             use_resource))
        return starting

    def collect(self, timeout: float) -> list[tuple[str, str]]:
        """Take the actors of ``self.starting`` that said hello within ``timeout``; drop those
        that failed or outlived ``start_timeout_s``. Returns the problems (kind, message)."""
        ray = self.ray
        if not self.starting:
            return []
        refs = [s[3] for s in self.starting]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        ready = set(ready)
        problems: list[tuple[str, str]] = []
        still = []
        now = time.monotonic()
        for item in self.starting:
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
                self.kill(actor)
                continue
            try:
                hello = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - the actor could not even be built
                lines = str(e).strip().splitlines()
                problems.append(("start", f"{where}: the sandbox actor did not start "
                                          f"(is coevo-code {self.version} installed there?): "
                                          f"{type(e).__name__}: {lines[-1] if lines else ''}"))
                self.kill(actor)
                continue
            if hello["error"] is not None:
                kind, msg = hello["error"]
                problems.append((kind, f"{where}: {msg}"))
                self.kill(actor)
                continue
            info = hello["node"]
            self.nodes.append(Node(actor, info["node_id"], info["ip"], info["hostname"],
                                     info["pid"], info.get("sandbox_dir"), hello["slots"],
                                     hello["isolation"]))
        self.starting = still
        return problems

    def spawn(self) -> None:
        """At start-up: an actor on every sandbox node, all said hello, or an error."""
        self.starting = self.start_actors()
        if not self.starting:
            raise RayBackendError(
                "no Ray node can hold a sandbox actor (alive nodes with the resource "
                f"'{RESOURCE}' and at least {self.slots_per_node or 1} CPUs)")
        ray = self.ray
        problems: list[tuple[str, str]] = []
        t0 = time.monotonic()
        while self.starting:
            waited = time.monotonic() - t0
            if waited > self.start_timeout_s:
                break
            problems += self.collect(min(5.0, self.start_timeout_s + 0.5 - waited))
            held = self.starting and self.resource_mode and waited > 8.0 and \
                ray.available_resources().get(RESOURCE, 0) < self.share - 1e-6
            if held:  # fail fast rather than wait for a resource someone else holds
                for node, slots, actor, *_ in self.starting:
                    problems.append(("start", f"node {node.get('NodeManagerAddress')} "
                                              f"({node['NodeID'][:8]}): its '{RESOURCE}' is "
                                              "held by other executors (each takes share="
                                              f"{self.share:g} of every node)"))
                break
        for item in self.starting:  # not placed in time
            self.kill(item[2])
        self.starting = []
        if problems:
            for n in self.nodes:
                self.kill(n.actor)
            self.nodes = []
            from ..executor import IsolationError
            text = "; ".join(m for _, m in problems)
            if {k for k, _ in problems} == {"isolation"}:
                raise IsolationError(text)
            raise RayBackendError(text)

    def refresh(self) -> None:
        """Before a run: after a node was lost, start actors on sandbox nodes that have none
        (without waiting for them unless no node is left), and take those that are ready."""
        now = time.monotonic()
        live = any(n.alive for n in self.nodes)
        if not live or (self.lost_since_spawn and now - self.last_refresh > 10.0):
            self.nodes = [n for n in self.nodes if n.alive]
            self.last_refresh = now
            self.lost_since_spawn = False
            try:
                self.starting += self.start_actors()
            except Exception as e:  # noqa: BLE001 - the cluster did not answer: run on
                log.warning("ray backend: could not look for sandbox nodes: %s", e)
        if self.starting:
            wait = 0.0
            if not live:  # nothing else to run on: wait for the new actors
                wait = max(0.0, self.start_timeout_s - (now - min(s[4] for s in self.starting)))
            for _, m in self.collect(wait):
                log.warning("ray backend: %s", m)
            self.layout()

    def kill(self, actor) -> None:
        try:
            self.ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def layout(self) -> None:
        """Per-node caps on units in flight, and the isolation report."""
        self.caps()
        self.isolation = self.isolation_report()

    def isolation_report(self) -> dict:
        nodes = [n for n in self.nodes if n.alive]
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


    def lose(self, node: Node, why: str) -> list:
        """Count ``node`` lost (its actor killed) and give its share of the window to the
        survivors; returns the refs of its units in flight, for the caller to retry."""
        if not node.alive:
            return []
        node.alive = False
        node.error = why
        self.lost += 1
        self.lost_since_spawn = True
        lost = list(node.inflight)
        log.warning("sandbox node %s (%s) lost: %s; %d unit(s) in flight retried elsewhere",
                    node.ip, node.node_id[:8], why, len(lost))
        self.kill(node.actor)
        node.inflight.clear()
        self.caps()
        return lost

    def caps(self) -> None:
        """Each live node's cap on units in flight: its slots' part of the window."""
        live = self.live()
        total = sum(n.slots for n in live) or 1
        budget = self.units_in_flight or 2 * total
        for n in live:
            n.cap = max(1, round(budget * n.slots / total))

    def close(self) -> None:
        """Kill the actors still starting; shut the live ones down (their running units
        finish first, at most 30 s) and kill them."""
        ray = self.ray
        try:
            for item in self.starting:
                self.kill(item[2])
            live = self.live()
            if live and ray.is_initialized():
                refs = [n.actor.shutdown.remote() for n in live]
                ray.wait(refs, num_returns=len(refs), timeout=30)
                for n in live:
                    self.kill(n.actor)
        finally:
            self.starting = []
            self.nodes = []
