"""The task model: a problem, its gold tests kept in their native form, and how to run them.

Stdio tests are ``{input, output}`` pairs; functional tests are code (run after the program and
the task's ``setup`` in one namespace, pass = no exception). Nothing is rewritten across kinds:
CURE's conversion of functional tasks into stdio loses information on some inputs.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence


class LoaderError(ValueError):
    """A dataset that cannot be loaded; the message names the record or the way out."""


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def unreadable_json(e: ValueError) -> str:
    """Why ``json.loads`` refused a text with a ValueError that is no JSONDecodeError: a number
    past Python's integer digit limit, or bytes that are not text."""
    if "integer string conversion" in str(e):
        import sys
        limit = sys.get_int_max_str_digits()
        return f"it holds an integer of more than {limit} digits (Python's limit for reading one)"
    return one_line(e, 160)


def read_json(text, where: str):
    """``json.loads``; every failure a one-line LoaderError naming ``where``: not JSON, nested
    too deeply, a number past Python's integer digit limit (4,300 digits by default), bytes
    that are not UTF-8."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise LoaderError(f"{where} is not valid JSON ({e.msg})") from None
    except RecursionError:
        raise LoaderError(f"{where} is JSON nested too deeply to read") from None
    except ValueError as e:  # the digit limit; an undecodable byte
        raise LoaderError(f"{where} cannot be read: {unreadable_json(e)}") from None


class Unreadable:
    """A record a reader could not read (a line that is not JSON, or holds a number past the
    digit limit), in the place of that record: the loader's :meth:`RowErrors.row` turns it into
    that row's one-line error, and the rows around it load."""

    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why


# what a malformed row raises while a loader reads it (anything else is a bug, and propagates)
ROW_FAULTS = (LoaderError, ValueError, TypeError, KeyError, IndexError, AttributeError,
              RecursionError)


class RowErrors:
    """The rows a loader cannot use. Each is one line naming the record; with ``strict`` the
    first ends the load (a LoaderError), otherwise the row is skipped and counted, and the load
    report (:meth:`TaskSet.summary`) says how many and why (``TaskSet.skipped``)::

        errors = RowErrors("livecodebench", strict)
        for k, r in errors.readable(rows):
            with errors.row(k, r):
                tasks.append(make_task(k, r))
        return TaskSet(..., skipped=errors.lines)
    """

    def __init__(self, name: str, strict: bool = False):
        self.name, self.strict = name, strict
        self.lines: list[str] = []

    def readable(self, items):
        """``items`` (tuples whose second member is the record) without the records a reader
        could not read (:class:`Unreadable`), each refused with its reason."""
        for item in items:
            if isinstance(item[1], Unreadable):
                self.refuse(item[1].why)
                continue
            yield item

    @contextmanager
    def row(self, k: int, rec=None):
        try:
            yield
        except LoaderError as e:  # named already, or by the task it would have made
            why = str(e)
            self.refuse(why if f"record {k}" in why else f"{self._label(k, rec)}: {why}")
        except ROW_FAULTS as e:
            self.refuse(f"{self._label(k, rec)}: {type(e).__name__}: {one_line(e, 160)}")

    def _label(self, k: int, rec) -> str:
        rid = None
        if isinstance(rec, dict):
            rid = next((rec.get(key) for key in ("task_id", "question_id", "name", "id")
                        if isinstance(rec.get(key), (str, int))), None)
        return f"{self.name} record {k}" + (f" ({rid})" if rid is not None else "")

    def refuse(self, why: str) -> None:
        line = one_line(why)
        if self.strict:
            raise LoaderError(line) from None
        self.lines.append(line)


def unrunnable_text(value: str | None) -> int | None:
    """Where ``value`` holds a character no program could read or print (a lone surrogate, as
    JSON's ``"\\ud800"`` gives; the executor refuses such a test's job): its index, else None.
    Surrogates that stand for bytes (``surrogateescape``) are bytes, and fine."""
    if not isinstance(value, str) or value.isascii():
        return None
    try:
        value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as e:
        return e.start
    return None


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
        # (tests a loader decodes only when used, ``rows.RowField``, are checked by their loader,
        # and the executor refuses what they hold that no program could read: scoring counts it)
        for i, t in enumerate(self.tests if isinstance(self.tests, list) else ()):
            if t.kind != self.kind:
                raise LoaderError(f"task {self.id}: a {t.kind} test in a {self.kind} task")
            for part in ("input", "output", "code"):
                at = unrunnable_text(getattr(t, part))
                if at is not None:
                    raise LoaderError(f"task {self.id}: test {i} {part} holds a lone "
                                      f"surrogate at character {at}, which no program can read "
                                      f"or print")

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
    skipped: list[str] = field(default_factory=list)  # rows not loaded, one line each

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
        text = (f"{self.name}: {len(self.tasks)} problems, {self.n_tests} gold tests "
                f"({'/'.join(kinds) or 'none'}{extra}) from {self.origin}")
        if self.skipped:
            more = len(self.skipped) - 1
            text += (f"; {len(self.skipped)} row{'s' if more else ''} skipped (--strict: an "
                     f"error): {self.skipped[0]}" + (f"; ... {more} more" if more else ""))
        return text

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self):
        return iter(self.tasks)

    def __getitem__(self, i):
        return self.tasks[i]
