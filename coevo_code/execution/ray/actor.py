"""The node side: a sandbox actor, one per node, holding a local executor and its free slots."""

from __future__ import annotations

import dataclasses
import os
import queue
import socket
import threading
import time

from ..core import JobState, job_units, run_unit
from ..jobs import Job
from .cluster import package_version


class SandboxWorker:
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
        self.version = package_version()
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
        from ..executor import Executor, IsolationError
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
        return {"node": dict(self.node, sandbox_dir=self.ex.sandbox_dir if self.ex else None),
                "version": self.version, "error": self.error,
                "slots": len(self.ex.slots) if self.ex else 0,
                "isolation": self.ex.isolation if self.ex else None}

    def ping(self) -> bool:
        return True

    def run_unit(self, job: Job, tests=None):
        """Run one unit (a sub-job: some programs x some tests) on one free slot; returns its
        outcomes, outputs (``None`` unless asked) and, for C++ and Java, the compiler's
        diagnostics by program row (``{}`` for Python). ``tests``, when given, replaces the
        job's (the driver puts large test chunks in the object store once, for every program)."""
        ex = self.ex
        if tests is not None:
            job = dataclasses.replace(job, tests=tests)
        slot = self._free.get()
        if self._closing:  # a unit queued behind shutdown(): its slots are gone
            self._free.put(slot)
            raise RuntimeError("this sandbox actor is shutting down")
        try:
            st = JobState.empty(job)
            for unit in job_units(0, job, ex.chunk_tests):
                run_unit(slot, unit, st)
            if slot.channel is not None:  # the server's fork counter, for stats()
                try:
                    cells = slot.call({"op": "stats"}, 10.0).get("cells", 0)
                    with self._lock:
                        self._cells[slot.index] = cells
                except Exception:  # noqa: BLE001 - a server in doubt is replaced next unit
                    slot.close()
            return st.outcomes, st.outputs, st.compile_output
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


def actor_class(ray, slots: int):
    """The remote class for an actor of ``slots`` slots (concurrency groups are fixed per class)."""
    cls = _REMOTE_CLASSES.get(slots)
    if cls is None:
        for name in ("hello", "ping", "stats", "shutdown"):
            ray.method(concurrency_group="control")(getattr(SandboxWorker, name))
        ray.method(concurrency_group="units")(SandboxWorker.run_unit)
        cls = ray.remote(concurrency_groups={"units": slots, "control": 2})(SandboxWorker)
        _REMOTE_CLASSES[slots] = cls
    return cls
