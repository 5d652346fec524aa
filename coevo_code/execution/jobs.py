"""The job and result schema of ``coevo execute`` and ``Executor.run`` (see docs/EXECUTION.md).

A job is one problem: n programs and t tests. Its result is the n x t pass matrix with the outcome
of every cell. Validation is strict and its errors name the offending field, so that a malformed
line yields one result with ``error`` and never stops the other jobs.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from .fileio import file_mode_program, files_checker

DEFAULT_TIME_LIMIT_S = 1.0
DEFAULT_MEMORY_LIMIT_MB = 1024
DEFAULT_OUTPUT_LIMIT_MB = 8.0
MAX_TIME_LIMIT_S = 600.0
LANGUAGES = ("python", "cpp", "java")  # SandboxFusion's names; the sandbox's RUNNERS (native.py)
DEFAULT_COMPILE_TIME_S = 10.0  # CPU seconds per process of a C++ or Java compile
MAX_COMPILE_TIME_S = 120.0


class JobError(ValueError):
    """A job that cannot run; the message names the offending field."""


@dataclass(frozen=True)
class Job:
    """One validated job. ``tests`` holds ``(input_bytes, expected_bytes)`` pairs for stdio jobs
    and code strings for functional jobs."""

    id: Any
    kind: str
    programs: list[str]
    tests: list
    setup: str = ""
    entry_point: str | None = None
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    wall_limit_s: float = 2 * DEFAULT_TIME_LIMIT_S + 1
    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB
    output_limit_mb: float = DEFAULT_OUTPUT_LIMIT_MB
    return_outputs: bool = False
    checker: str | None = None
    language: str = "python"
    compile_time_limit_s: float = DEFAULT_COMPILE_TIME_S

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.programs), len(self.tests)


def _text(value, where: str) -> str:
    if not isinstance(value, str):
        raise JobError(f"{where} must be a string, got {type(value).__name__}")
    return value


def job_seed(job: Job) -> int:
    """The seed of ``random`` and ``numpy.random`` in every cell of a job: the first 8 bytes of
    the SHA-256 of its id in JSON, so the same job draws the same numbers in every slot,
    launcher and run (a job without an id: ``null``)."""
    try:
        text = json.dumps(job.id, sort_keys=True, ensure_ascii=True)
    except (TypeError, ValueError):
        text = repr(job.id)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8],
                          "little")


def _short(v) -> str:
    if isinstance(v, int) and v.bit_length() > 100:
        return f"an int of {v.bit_length()} bits"
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _bytes(value, where: str) -> bytes:
    """A stdio text as the bytes a program reads or must print: UTF-8, with the bytes that a
    file read with surrogateescape carried kept as they were. A lone surrogate that stands for
    no byte (JSON's "\\ud800") is this job's error, not the run's."""
    text = _text(value, where)
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as e:
        raise JobError(f"{where} holds {text[e.start:e.end]!r} at character {e.start}, which is "
                       "not text (a lone surrogate)") from None


def _number(d: dict, key: str, default, lo: float, hi: float, integer=False):
    if key not in d or d[key] is None:
        return default
    v = d[key]
    if isinstance(v, int) and not isinstance(v, bool) and not lo < v <= hi:
        # before any float(): an int of 400 digits has no float
        raise JobError(f"'{key}' must be in ({lo}, {hi}], got {_short(v)}")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise JobError(f"'{key}' must be a finite number, got {_short(v)}")
    if not lo < v <= hi:
        raise JobError(f"'{key}' must be in ({lo}, {hi}], got {v!r}")
    return int(v) if integer else float(v)


def parse_job(d: Any) -> Job:
    """Validate one job dict; raise :class:`JobError` naming the bad field."""
    if not isinstance(d, dict):
        raise JobError(f"a job must be a JSON object, got {type(d).__name__}")
    kind = d.get("kind", "stdio")
    if kind not in ("stdio", "functional"):
        raise JobError(f"'kind' must be 'stdio' or 'functional', got {kind!r}")
    language = d.get("language", "python")
    if language is None:
        language = "python"
    if not isinstance(language, str) or language not in LANGUAGES:
        raise JobError(f"'language' must be one of {', '.join(LANGUAGES)}, got {_short(language)}")
    if language != "python" and kind != "stdio":
        raise JobError(f"'language' {language!r} runs stdio jobs only; 'kind' {kind!r} needs "
                       "Python")
    programs = d.get("programs")
    if not isinstance(programs, list):
        raise JobError("'programs' must be a list of strings")
    programs = [_text(p, f"programs[{i}]") for i, p in enumerate(programs)]
    raw_tests = d.get("tests", [])
    if not isinstance(raw_tests, list):
        raise JobError("'tests' must be a list")
    tests: list = []
    for i, t in enumerate(raw_tests):
        if kind == "stdio":
            if not isinstance(t, dict) or "input" not in t or "output" not in t:
                raise JobError(f"tests[{i}] of a stdio job must be an object with 'input' and "
                               "'output'")
            tests.append((_bytes(t["input"], f"tests[{i}].input"),
                          _bytes(t["output"], f"tests[{i}].output")))
        else:
            if isinstance(t, str):
                tests.append(t)
            elif isinstance(t, dict) and "code" in t:
                tests.append(_text(t["code"], f"tests[{i}].code"))
            else:
                raise JobError(f"tests[{i}] of a functional job must be an object with 'code'")
    time_limit = _number(d, "time_limit_s", DEFAULT_TIME_LIMIT_S, 0.0, MAX_TIME_LIMIT_S)
    wall = _number(d, "wall_limit_s", 2 * time_limit + 1, 0.0, 4 * MAX_TIME_LIMIT_S)
    memory = _number(d, "memory_limit_mb", DEFAULT_MEMORY_LIMIT_MB, 16, 1 << 20, integer=True)
    output = _number(d, "output_limit_mb", DEFAULT_OUTPUT_LIMIT_MB, 0.0, 4096)
    checker = d.get("checker")
    if checker is not None:
        checker = _text(checker, "'checker'")
        if kind != "stdio":
            raise JobError("'checker' applies to stdio jobs only")
    convention = d.get("checker_convention", "check")
    if convention not in ("check", "files"):
        raise JobError(f"'checker_convention' must be 'check' or 'files', got {convention!r}")
    if convention == "files":
        if checker is None:
            raise JobError("'checker_convention' 'files' needs a 'checker'")
        checker = files_checker(checker)
    input_mode = d.get("input_mode", "stdio")
    if input_mode not in ("stdio", "file"):
        raise JobError(f"'input_mode' must be 'stdio' or 'file', got {input_mode!r}")
    if input_mode == "file":
        if kind != "stdio":
            raise JobError("'input_mode' 'file' applies to stdio jobs only")
        if language != "python":
            raise JobError(f"'input_mode' 'file' applies to Python programs only, not "
                           f"{language!r}")
        programs = [file_mode_program(p) for p in programs]
    setup = d.get("setup") or ""
    setup = _text(setup, "'setup'")
    entry = d.get("entry_point")
    if entry is not None:
        entry = _text(entry, "'entry_point'")
    ret = d.get("return_outputs", False)
    if not isinstance(ret, bool):
        raise JobError("'return_outputs' must be true or false")
    compile_time = _number(d, "compile_time_limit_s", DEFAULT_COMPILE_TIME_S, 0.0,
                           MAX_COMPILE_TIME_S)
    return Job(id=d.get("id"), kind=kind, programs=programs, tests=tests, setup=setup,
               entry_point=entry, time_limit_s=time_limit, wall_limit_s=wall,
               memory_limit_mb=memory, output_limit_mb=output, return_outputs=ret,
               checker=checker, language=language, compile_time_limit_s=compile_time)
