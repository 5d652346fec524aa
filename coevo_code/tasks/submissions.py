"""Codeforces submissions (``open-r1/codeforces-submissions``) as the references and incorrect
solutions of CodeForces problems, so that ``coevo tasks check`` and ``coevo tasks quality`` run
them as they run CodeContests' (``load_codeforces(..., submissions=PATH, languages=...)``).

The problem rows of ``open-r1/codeforces`` hold no solutions; the submissions are a dataset of
their own, one row a submission: ``submission_id, source, contestId, problem_index,
programmingLanguage, verdict, testset, passedTestCount, timeConsumedMillis,
memoryConsumedBytes, creationTimeSeconds, problem_id`` (its configurations ``default``,
``selected_accepted``, ``selected_incorrect``). Read here:

- ``problem_id`` (else ``contestId/problem_index``), matched with the problem's ``id``;
- ``programmingLanguage``, Codeforces' compiler name, mapped to the sandbox's languages by
  :func:`run_language` (``GNU C++17`` and every other C++ compiler: ``cpp``; ``Java 8``/``11``/
  ``21``: ``java``; ``Python 3``, ``PyPy 3``, ``PyPy 3-64``: ``python``); the other languages
  (C, Kotlin, C#, Rust, Python 2, ...) are not run and are counted;
- ``verdict``: ``OK`` a reference; ``WRONG_ANSWER``, ``TIME_LIMIT_EXCEEDED``,
  ``MEMORY_LIMIT_EXCEEDED``, ``RUNTIME_ERROR`` an incorrect solution (Codeforces judged it wrong
  on its own tests); anything else (``COMPILATION_ERROR``, ``SKIPPED``, ``CHALLENGED``,
  ``IDLENESS_LIMIT_EXCEEDED``, ...) is left out and counted.

At most ``per_problem`` submissions of each problem, language and kind are kept (in the file's
order), so that the 12.6 million rows of the full dataset can be streamed into the memory of the
problems loaded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .model import LoaderError, RowErrors
from .rows import iter_rows

HUB_ID = "open-r1/codeforces-submissions"
INCORRECT = ("WRONG_ANSWER", "TIME_LIMIT_EXCEEDED", "MEMORY_LIMIT_EXCEEDED", "RUNTIME_ERROR")
PER_PROBLEM = 200


def run_language(name: str) -> str | None:
    """The sandbox's language of a Codeforces compiler name, None where it runs none."""
    n = (name or "").strip().lower()
    if "c++" in n or n.startswith(("g++", "msvc")):
        return "cpp"
    if n.startswith("java"):
        return "java"
    if n.startswith(("python 3", "pypy 3")):
        return "python"
    return None


@dataclass
class Submissions:
    """Per problem id: {language: [sources]} of references and of incorrect solutions; what
    was left out, counted by reason."""

    references: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    incorrect: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    left_out: Counter = field(default_factory=Counter)
    skipped: list[str] = field(default_factory=list)

    def of(self, pid: str, kind: str, lang: str) -> list[str]:
        return (getattr(self, kind).get(pid) or {}).get(lang) or []


def read_submissions(source, problems, languages, per_problem: int = PER_PROBLEM,
                     strict: bool = False, split: str | None = "train") -> Submissions:
    """The submissions of ``problems`` (ids) in ``languages`` from a local file in the public
    schema or the hub (:data:`HUB_ID`), streamed (see the module docstring)."""
    if per_problem < 1:
        raise LoaderError(f"submissions: per_problem must be at least 1, got {per_problem}")
    name = "codeforces-submissions"
    rows, _, _ = iter_rows(source or HUB_ID, name, split)
    wanted, langs = set(problems), set(languages)
    out, errors = Submissions(), RowErrors(name, strict)
    for k, r, _ in errors.readable(rows):
        with errors.row(k, r):
            if not isinstance(r, dict):
                raise LoaderError(f"{name} record {k}: not a mapping")
            pid = r.get("problem_id") or (f"{r.get('contestId')}/{r.get('problem_index')}"
                                           if r.get("contestId") else None)
            if not pid:
                raise LoaderError(f"{name} record {k}: no problem_id (nor contestId and "
                                  "problem_index)")
            if pid not in wanted:
                continue
            src, verdict = r.get("source"), (r.get("verdict") or "").upper()
            if not isinstance(src, str) or not src.strip():
                raise LoaderError(f"{name} record {k} ({r.get('submission_id')}): no source")
            lang = run_language(r.get("programmingLanguage") or "")
            if lang is None:
                out.left_out[f"language {r.get('programmingLanguage')!r} not run"] += 1
                continue
            if lang not in langs:
                out.left_out[f"{lang} not asked for (--languages)"] += 1
                continue
            kind = ("references" if verdict == "OK" else
                    "incorrect" if verdict in INCORRECT else None)
            if kind is None:
                out.left_out[f"verdict {verdict or 'none'}"] += 1
                continue
            bucket = getattr(out, kind).setdefault(pid, {}).setdefault(lang, [])
            if len(bucket) >= per_problem:
                out.left_out[f"over {per_problem} of a problem, language and kind"] += 1
                continue
            bucket.append(src)
    out.skipped = errors.lines
    return out
