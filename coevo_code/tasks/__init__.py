"""Tasks: the problem model and one loader per benchmark (see ``docs/CORE.md``)."""

from __future__ import annotations

from .check import CheckReport, ProblemCheck, check_tasks
from .codecontests import load_codecontests
from .codeforces import load_codeforces
from .evalplus import load_humanevalplus, load_mbppplus
from .livebench import load_livebench
from .livecodebench import load_livecodebench
from .loaders import (HUB_IDS, Loader, decode_lcb_tests, load_cure, load_humaneval, load_mbpp,
                      loader_key, read_records)
from .model import LoaderError, Task, TaskSet, TestCase
from .native import load_bundled, load_native
from .world import load_world

LOADERS: dict[str, Loader] = {}  # every task loader by name (load_tasks, the CLI, the config)


def register_loader(loader: Loader) -> Loader:
    """Add a task loader; a name is registered once."""
    if loader.name in LOADERS:
        raise ValueError(f"task loader {loader.name!r} is registered already")
    LOADERS[loader.name] = loader
    return loader


for _loader in (
        Loader("humaneval", load_humaneval, HUB_IDS["humaneval"]),
        Loader("humanevalplus", load_humanevalplus, HUB_IDS["humanevalplus"], needs_executor=True),
        Loader("mbpp", load_mbpp, HUB_IDS["mbpp"]),
        Loader("mbppplus", load_mbppplus, HUB_IDS["mbppplus"], needs_executor=True),
        Loader("codecontests", load_codecontests, HUB_IDS["codecontests"]),
        Loader("codeforces", load_codeforces, HUB_IDS["codeforces"]),
        Loader("livecodebench", load_livecodebench, HUB_IDS["livecodebench"]),
        Loader("livebench", load_livebench, HUB_IDS["livebench"]),
        Loader("cure", load_cure, HUB_IDS["cure"]),
        Loader("native", load_native, "a native-format file (YAML, JSON or JSONL)"),
        Loader("bundled", load_bundled, "the problems bundled with the package"),
        Loader("world", load_world, "generated (the task world, coevo_code.tasks.world)")):
    register_loader(_loader)


def find_loader(name: str) -> Loader:
    """The record of dataset ``name`` (spelled with any case, ``-`` or ``_``), or a LoaderError
    naming the choices."""
    key = loader_key(name)
    if key not in LOADERS:
        raise LoaderError(f"unknown dataset {name!r}; choose from {', '.join(sorted(LOADERS))}")
    return LOADERS[key]


def load_tasks(name: str, source=None, **options) -> TaskSet:
    """Load benchmark ``name`` from ``source`` (a local file or a hub id; default: the public
    source). Options: ``split`` (mbpp, hub sets), ``release``/``start_date``/``end_date``/
    ``platform`` (livecodebench), ``livebench_date`` (livebench),
    ``gold`` (codecontests), ``limit``/``seed``/``executor`` (humanevalplus, mbppplus)."""
    loader = find_loader(name)
    wrong = sorted(set(options) - set(loader.options))
    if wrong:
        raise LoaderError(f"{loader.name} does not take option(s) {', '.join(wrong)}; it takes: "
                          f"{', '.join(loader.options) or 'none'}")
    return loader.load(source, **options)


__all__ = ["Task", "TestCase", "TaskSet", "LoaderError", "load_tasks", "check_tasks",
           "CheckReport", "ProblemCheck", "LOADERS", "Loader", "register_loader", "find_loader",
           "HUB_IDS", "decode_lcb_tests", "read_records"]
