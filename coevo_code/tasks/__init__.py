"""Tasks: the problem model and one loader per benchmark (see ``docs/CORE.md``)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from .codecontests import load_codecontests
from .codeforces import load_codeforces
from .evalplus import load_humanevalplus, load_mbppplus
from .loaders import HUB_IDS, LOADERS, decode_lcb_tests, read_records
from .model import LoaderError, Task, TaskSet, TestCase
from .native import load_bundled, load_native
from .world import load_world

LOADERS = {**LOADERS, "codecontests": load_codecontests, "codeforces": load_codeforces,
           "humanevalplus": load_humanevalplus, "mbppplus": load_mbppplus,
           "native": load_native, "bundled": load_bundled, "world": load_world}


def load_tasks(name: str, source=None, **options) -> TaskSet:
    """Load benchmark ``name`` from ``source`` (a local file or a hub id; default: the public
    source). Options: ``split`` (mbpp, hub sets), ``start_date``/``end_date`` (livecodebench),
    ``gold`` (codecontests), ``limit``/``seed``/``executor`` (humanevalplus, mbppplus)."""
    key = name.lower().replace("-", "").replace("_", "")
    if key not in LOADERS:
        raise LoaderError(f"unknown dataset {name!r}; choose from {', '.join(sorted(LOADERS))}")
    loader = LOADERS[key]
    takes = [p for p in inspect.signature(loader).parameters if p != "source"]
    wrong = sorted(set(options) - set(takes))
    if wrong:
        raise LoaderError(f"{key} does not take option(s) {', '.join(wrong)}; it takes: "
                          f"{', '.join(takes) or 'none'}")
    return loader(source, **options)


@dataclass
class CheckReport:
    """How many problems' reference solutions pass their own gold tests."""

    name: str
    problems: int
    checked: int
    passed: int
    failed: list[str] = field(default_factory=list)
    no_reference: list[str] = field(default_factory=list)

    def summary(self) -> str:
        s = (f"{self.name}: {self.passed}/{self.checked} reference solutions pass all their gold "
             f"tests ({self.problems} problems")
        if self.no_reference:
            s += f", {len(self.no_reference)} without a reference"
        s += ")"
        if self.failed:
            s += "; failing: " + ", ".join(self.failed[:20]) + (" ..." if len(self.failed) > 20 else "")
        return s


def check_tasks(taskset: TaskSet, executor, progress=None) -> CheckReport:
    """Run each problem's first reference solution through the executor against its gold tests."""
    jobs, ids, missing = [], [], []
    for t in taskset:
        if not t.references or not t.tests:
            missing.append(t.id)
            continue
        jobs.append(t.job(t.references[:1]))
        ids.append(t.id)
    results = executor.run(jobs, progress=progress)
    failed = [i for i, r in zip(ids, results) if not (r.get("passed") and all(r["passed"][0]))]
    return CheckReport(taskset.name, len(taskset), len(jobs), len(jobs) - len(failed), failed,
                       missing)


__all__ = ["Task", "TestCase", "TaskSet", "LoaderError", "load_tasks", "check_tasks",
           "CheckReport", "LOADERS", "HUB_IDS", "decode_lcb_tests", "read_records"]
