"""The driver side: :class:`RayExecutor`, the executor interface over a :class:`NodePool` of
sandbox actors, on the execution core (parsing, de-duplication, result assembly)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable

from ..backends import ExecutorBase
from ..core import copy_verdicts, finish_batch, same_programs, start_batch
from ..executor import DEFAULT_HEAVY_PRELOAD, DEFAULT_PRELOAD
from .cluster import import_ray, init_ray, package_version
from .nodes import NodePool
from .scheduler import drive, plan_units


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
        ray = import_ray()
        if not isinstance(launcher, str):
            raise ValueError("the ray backend takes a launcher by name (auto, bwrap, direct, "
                             "docker): each node builds its own")
        if slots is not None and slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share}")
        self.share = float(share)
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
        self.max_retries = max(0, int(max_retries))
        self.node_timeout_s = float(node_timeout_s)
        self.start_timeout_s = float(start_timeout_s)
        self.version = package_version()
        self._closed = False
        self._run_lock = threading.Lock()
        self._cpu_s = 0.0
        self._cells = 0
        self.pool = NodePool(ray, self.version, self.options, slots, self.share,
                             self.start_timeout_s, units_in_flight)
        self._started_ray = init_ray(ray, address, ray_init)
        try:
            self.pool.spawn()
        except BaseException:
            self.close()
            raise
        self.pool.layout()

    @property
    def isolation(self) -> dict:
        """The isolation report: the local executor's, over the live nodes (``nodes``: each
        one's)."""
        return self.pool.isolation

    # ---- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        try:
            pool = getattr(self, "pool", None)
            if pool is not None:
                pool.close()
        finally:
            if self._started_ray and ray.is_initialized():
                ray.shutdown()

    def stats(self) -> dict:
        """``cells``: programs forked so far, summed over the live nodes' slots (as the local
        ``stats``); ``nodes``: the same per node; ``driver_cpu_s_per_cell``: the driver's CPU
        time in ``run`` per cell, over every run so far."""
        ray = self._ray
        live = [n for n in self.pool.nodes if n.alive]
        refs = [n.actor.stats.remote() for n in live]
        per = []
        for n, ref in zip(live, refs):
            try:
                cells = ray.get(ref, timeout=self.node_timeout_s)["cells"]
            except Exception:  # noqa: BLE001 - a node that stopped answering
                cells = None
            per.append({"node_id": n.node_id, "ip": n.ip, "slots": n.slots, "cells": cells})
        return {"cells": sum(p["cells"] or 0 for p in per), "nodes": per,
                "nodes_lost": self.pool.lost, "driver_cpu_s": round(self._cpu_s, 6),
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
        copies = [same_programs(st.job) if st is not None else {} for st in states]
        units = plan_units(states, copies, sum(n.slots for n in self.pool.live()),
                           self.unit_cells, self.options["chunk_tests"], self.node_timeout_s)
        counted[0] = sum(u.cells for u in units)
        if units:
            self.pool.refresh()
            drive(self.pool, states, units, progress, max_retries=self.max_retries,
                  node_timeout_s=self.node_timeout_s)
        copied = copy_verdicts(states, copies)
        if progress is not None and copied:
            progress(copied)  # the copies' cells are done too, as the local backend counts
        return finish_batch(results, states)
