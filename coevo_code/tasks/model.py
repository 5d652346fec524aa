"""The task model: a problem, its gold tests kept in their native form, and how to run them.

Stdio tests are ``{input, output}`` pairs; functional tests are code (run after the program and
the task's ``setup`` in one namespace, pass = no exception). Nothing is rewritten across kinds:
CURE's conversion of functional tasks into stdio loses information on some inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence


class LoaderError(ValueError):
    """A dataset that cannot be loaded; the message names the record or the way out."""


@dataclass(frozen=True)
class TestCase:
    """One test. Stdio: ``input`` and ``output``. Functional: ``code``."""

    __test__ = False  # not a pytest class

    input: str | None = None
    output: str | None = None
    code: str | None = None

    @property
    def kind(self) -> str:
        return "functional" if self.code is not None else "stdio"

    def to_job(self) -> dict:
        return {"code": self.code} if self.code is not None else {"input": self.input,
                                                                   "output": self.output}


@dataclass
class Task:
    """A problem of one benchmark.

    ``prompt`` is what a model is shown (statement, or signature + docstring); ``examples`` are
    the public tests a statement shows; ``tests`` the gold tests rewards and metrics use.
    """

    id: str
    source: str
    kind: str  # "stdio" | "functional"
    prompt: str
    tests: list[TestCase]
    examples: list[TestCase] = field(default_factory=list)
    entry_point: str | None = None
    setup: str = ""
    starter_code: str = ""
    program_prefix: str = ""  # prepended to a completion (HumanEval: the prompt itself)
    references: list[str] = field(default_factory=list)  # reference solutions (full programs)
    time_limit_s: float = 1.0
    memory_limit_mb: int = 1024
    checker: str | None = None
    needs_checker: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    input_mode: str = "stdio"  # "file": the program reads input.txt, writes output.txt

    def __post_init__(self):
        if self.kind not in ("stdio", "functional"):
            raise LoaderError(f"task {self.id}: kind must be stdio or functional, got {self.kind!r}")
        # (tests a loader decodes only when used, ``rows.RowField``, are checked by their loader)
        for t in self.tests if isinstance(self.tests, list) else ():
            if t.kind != self.kind:
                raise LoaderError(f"task {self.id}: a {t.kind} test in a {self.kind} task")

    def job(self, programs: Sequence[str], tests: Iterable[TestCase] | None = None,
            **fields) -> dict:
        """An executor job running ``programs`` against the gold tests (or ``tests``)."""
        tests = list(self.tests if tests is None else tests)
        job = {"id": self.id, "kind": self.kind, "programs": list(programs),
               "tests": [t.to_job() for t in tests], "time_limit_s": self.time_limit_s,
               "memory_limit_mb": self.memory_limit_mb}
        if self.kind == "functional":
            job["setup"] = self.setup
            if self.entry_point:
                job["entry_point"] = self.entry_point
        else:
            if self.checker:
                job["checker"] = self.checker
            if self.input_mode != "stdio":
                job["input_mode"] = self.input_mode
        job.update(fields)
        return job


def _key(t: TestCase) -> tuple:
    """A test's identity for "is this one of the examples": its code, or its input and its
    output's tokens (what the stdio rule compares)."""
    if t.code is not None:
        return ("code", t.code.strip())
    return ("io", (t.input or "").strip(), " ".join((t.output or "").split()))


def shown_tests(task: Task) -> list[bool]:
    """Which gold tests of ``task`` are examples its statement shows."""
    shown = {_key(e) for e in task.examples}
    return [_key(t) in shown for t in task.tests]


def empty_output(t: TestCase) -> bool:
    """A stdio test whose expected output is empty (whitespace only): any program that prints
    nothing and exits 0 passes it."""
    return t.code is None and not (t.output or "").strip()


def seeded_sample(items: list, limit: int | None, seed: int = 0) -> list:
    """``limit`` items drawn without replacement with ``seed``, in their original order (all of
    them when ``limit`` is None or not smaller)."""
    if limit is None or limit >= len(items):
        return list(items)
    import numpy as np
    pick = np.random.default_rng(seed).choice(len(items), size=limit, replace=False)
    return [items[i] for i in sorted(pick)]


@dataclass
class TaskSet:
    """Tasks loaded from one source, with the counts a user wants to see."""

    name: str
    origin: str
    tasks: list[Task]

    @property
    def n_tests(self) -> int:
        return sum(len(t.tests) for t in self.tasks)

    def summary(self) -> str:
        kinds = sorted({t.kind for t in self.tasks})
        checker = sum(t.needs_checker for t in self.tasks)
        extra = f", {checker} need a checker" if checker else ""
        skipped = sum(t.metadata.get("skipped_inputs", 0) for t in self.tasks)
        if skipped:
            extra += f", {skipped} inputs skipped (the canonical solution failed on them)"
        only_shown = sum(bool(t.tests) and all(shown_tests(t)) for t in self.tasks)
        if only_shown:
            extra += (f", {only_shown} tested only on the examples their statement shows "
                      f"(e.g. {next(t.id for t in self.tasks if t.tests and all(shown_tests(t)))})")
        empty = sum(empty_output(x) for t in self.tasks for x in t.tests)
        if empty:
            extra += (f", {empty} tests expect an empty output (e.g. problem "
                      f"{next(t.id for t in self.tasks if any(map(empty_output, t.tests)))})")
        return (f"{self.name}: {len(self.tasks)} problems, {self.n_tests} gold tests "
                f"({'/'.join(kinds) or 'none'}{extra}) from {self.origin}")

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self):
        return iter(self.tasks)

    def __getitem__(self, i):
        return self.tasks[i]
