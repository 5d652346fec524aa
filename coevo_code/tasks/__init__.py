"""Tasks: the problem model and one loader per benchmark (see ``docs/CORE.md``)."""

from __future__ import annotations

import inspect

from .check import CheckReport, ProblemCheck, check_tasks
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
    source). Options: ``split`` (mbpp, hub sets), ``release``/``start_date``/``end_date``/
    ``platform`` (livecodebench), ``livebench_date`` (livebench),
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


__all__ = ["Task", "TestCase", "TaskSet", "LoaderError", "load_tasks", "check_tasks",
           "CheckReport", "ProblemCheck", "LOADERS", "HUB_IDS", "decode_lcb_tests", "read_records"]
