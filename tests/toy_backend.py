"""A toy executor backend, in one file: what adding a backend takes.

Its executor runs every unit of a batch one after the other on a single sandbox slot (one fork
server, the local backend's :class:`~coevo_code.execution.executor.Slot`), with nothing of its
own but the loop: parsing, de-duplication of repeated programs, unit planning, time budgets,
the slot's retry and the result dicts all come from the public execution core. Its record,
``BACKEND``, is made known by one line, ``register_backend("toy", "toy_backend:BACKEND")``.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from typing import Any, Callable, Iterable

from coevo_code.execution.backends import ExecutorBase
from coevo_code.execution.core import (
    copy_verdicts,
    finish_batch,
    plan_units,
    run_unit,
    same_programs,
    start_batch,
)
from coevo_code.execution.executor import DEFAULT_HEAVY_PRELOAD, DEFAULT_PRELOAD, Slot
from coevo_code.execution.launchers import choose_launcher
from coevo_code.execution.registry import Backend
from coevo_code.sandbox.server import DEFAULT_HASH_SEED, empty_dir


class ToyExecutor(ExecutorBase):
    """One slot, units in sequence."""

    def __init__(self, launcher: str = "auto", chunk_tests: int = 8):
        self.launcher, _ = choose_launcher(launcher)
        self.chunk_tests = chunk_tests
        self.sandbox_dir = tempfile.mkdtemp(prefix="coevo-toy-")
        os.chmod(self.sandbox_dir, 0o711)
        self.slot = Slot(self.launcher, 0, self.sandbox_dir, DEFAULT_PRELOAD, True,
                         DEFAULT_HEAVY_PRELOAD)
        self.slot.cfg.update(token=secrets.token_hex(8), hash_seed=DEFAULT_HASH_SEED)
        hello = self.slot.start()
        self.isolation = {"launcher": self.launcher.name, "slots": 1,
                          "python": hello.get("python"),
                          "layers": {k: (bool(on), d) for k, (on, d) in hello["layers"].items()}}

    def run(self, jobs: Iterable[Any], progress: Callable[[int], None] | None = None
            ) -> list[dict]:
        results, states = start_batch(jobs)
        copies = [same_programs(st.job) if st is not None else {} for st in states]
        for unit in plan_units(states, copies, 1, self.chunk_tests):
            run_unit(self.slot, unit, states[unit.job])
            if progress is not None:
                progress(unit.stop - unit.start)
        copied = copy_verdicts(states, copies)
        if progress is not None and copied:
            progress(copied)
        return finish_batch(results, states)

    def stats(self) -> dict:
        if self.slot.channel is None:
            return {"cells": 0}
        return {"cells": self.slot.call({"op": "stats"}, 10.0).get("cells", 0)}

    def close(self) -> None:
        if self.slot.channel is not None:
            self.slot.close()
        if os.path.isdir(self.sandbox_dir):
            empty_dir(self.sandbox_dir)
            os.rmdir(self.sandbox_dir)


BACKEND = Backend(name="toy", factory=ToyExecutor, options=frozenset({"launcher", "chunk_tests"}),
                  help="one slot, units in sequence (a test backend)")
