"""``coevo tasks validate``: drop the CodeContests generated tests the dataset's own correct
solutions disagree with.

CodeContests' generated tests were made by mutating test inputs and kept when the correct
solutions agreed on the output; some mutated inputs are outside the statement's constraints
(``1060_A``: leading-digit counts above the allowed ``n``), where correct solutions may answer
differently from the recorded output. For each row:

1. its Python 3 solutions (all, or the first ``references``) run on its public, private and
   generated tests;
2. the *trusted* ones are those passing every public and private test (the tests written by
   the problem setters) without memorizing them: a solution whose source holds a line of a public
   or private input of at least :data:`MEMO_MIN` characters verbatim (``1060_A``'s solution 398
   compares the input with eight private inputs and prints their answers, and ``n // 11``
   otherwise) is not trusted;
3. a generated test is dropped when a trusted solution gets ``wrong_answer`` or
   ``runtime_error`` on it: the correct solutions disagree with its expected output.
   A timeout or memory-limit verdict says nothing about the output and drops nothing; such tests
   are counted in the report.

Rows with no Python 3 solution, none trusted, or no generated test are written unchanged and
reported as not validated (with the reason). The cleaned file has the same schema (every field
kept, ``generated_tests`` filtered) plus ``coevo_validation``; the loader and the trainer read
it as they read the original (``--path CLEANED``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .codecontests import solutions
from .loaders import _io_pairs
from .model import LoaderError
from .rows import iter_rows

DISAGREE = ("wrong_answer", "runtime_error")
MEMO_MIN = 16


def memorizes(source: str, inputs: list[str]) -> bool:
    """Whether a string literal of ``source`` holds a line of one of ``inputs`` (at least
    :data:`MEMO_MIN` characters, stripped) verbatim. Comments do not count (solutions often keep
    the examples they tried in comments)."""
    import ast
    try:
        literals = [n.value for n in ast.walk(ast.parse(source))
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if not literals:
        return False
    lines = {x.strip() for text in inputs for x in text.splitlines()}
    lines = [x for x in lines if len(x) >= MEMO_MIN]
    return any(line in lit for lit in literals for line in lines)


@dataclass
class RowValidation:
    name: str
    generated: int = 0
    references: int = 0
    trusted: int = 0
    memorizing: list[int] = field(default_factory=list)  # solutions holding test inputs
    dropped: list[int] = field(default_factory=list)
    disagreeing: dict[int, int] = field(default_factory=dict)  # test -> trusted refs failing
    slow: dict[int, int] = field(default_factory=dict)  # test -> trusted refs timing out
    skipped: str | None = None

    def line(self) -> str:
        if self.skipped:
            return f"{self.name}: not validated ({self.skipped})"
        s = (f"{self.name}: {len(self.dropped)} of {self.generated} generated tests dropped "
             f"({self.trusted} of {self.references} Python 3 solutions pass every public and "
             f"private test and decide)")
        if self.memorizing:
            s += (f"; {len(self.memorizing)} solutions hold public/private inputs verbatim "
                  f"and do not decide ({', '.join(map(str, self.memorizing[:10]))})")
        if self.dropped:
            s += "; dropped (trusted solutions disagreeing): " + ", ".join(
                f"{j} ({self.disagreeing[j]})" for j in self.dropped[:30]) + (
                " ..." if len(self.dropped) > 30 else "")
        if self.slow:
            s += f"; {len(self.slow)} kept tests had timeouts or memory limits"
        return s

    def record(self) -> dict:
        return {"references": self.references, "trusted": self.trusted,
                "memorizing": self.memorizing,
                "generated_before": self.generated, "dropped": self.dropped,
                "disagreeing": {str(k): v for k, v in self.disagreeing.items()},
                "slow": {str(k): v for k, v in self.slow.items()}}


def _clean_row(row: dict, v: RowValidation) -> dict:
    if v.skipped or not v.dropped:
        out = dict(row)
    else:
        drop = set(v.dropped)
        g = row.get("generated_tests") or {}
        out = dict(row, generated_tests={
            "input": [x for j, x in enumerate(g.get("input") or []) if j not in drop],
            "output": [x for j, x in enumerate(g.get("output") or []) if j not in drop]})
    out["coevo_validation"] = (v.record() if not v.skipped else {"skipped": v.skipped})
    return out


def _job(row: dict, refs: list[str], where: str, time_s: float, mem_mb: int,
         v: RowValidation) -> tuple[dict, int]:
    trusted_tests = (_io_pairs(row.get("public_tests"), where + " public_tests")
                     + _io_pairs(row.get("private_tests"), where + " private_tests"))
    inputs = [t.input for t in trusted_tests]
    v.memorizing = [i for i, src in enumerate(refs) if memorizes(src, inputs)]
    generated = _io_pairs(row.get("generated_tests"), where + " generated_tests")
    job = {"id": where, "kind": "stdio", "programs": refs,
           "tests": [t.to_job() for t in trusted_tests + generated],
           "time_limit_s": time_s, "memory_limit_mb": mem_mb}
    return job, len(trusted_tests)


def _decide(v: RowValidation, result: dict, n_trusted_tests: int) -> None:
    if not result.get("outcomes"):
        v.skipped = f"executor error: {result.get('error', 'no result')}"
        return
    memo = set(v.memorizing)
    trusted = [outs for i, outs in enumerate(result["outcomes"])
               if i not in memo and all(o == "ok" for o in outs[:n_trusted_tests])]
    v.trusted = len(trusted)
    if not trusted:
        v.skipped = (f"none of its {v.references} Python 3 solutions passes every public and "
                     "private test without holding their inputs")
        return
    for j in range(v.generated):
        outs = Counter(row[n_trusted_tests + j] for row in trusted)
        bad = sum(outs[o] for o in DISAGREE)
        if bad:
            v.disagreeing[j] = bad
            v.dropped.append(j)
        slow = sum(n for o, n in outs.items() if o not in DISAGREE and o != "ok")
        if slow:
            v.slow[j] = slow


def validate_codecontests(source, out_path, executor, references: int | None = None,
                          batch: int = 8, progress=None) -> list[RowValidation]:
    """Write the cleaned copy of ``source`` to ``out_path`` (jsonl); return one record per
    row. Rows are read, run and written ``batch`` at a time."""
    from .codecontests import FALLBACK_MEMORY_MB, FALLBACK_TIME_LIMIT_S, limits
    rows, _, _ = iter_rows(source, "codecontests")
    out_path = Path(out_path)
    if out_path.resolve() == Path(source).resolve():
        raise LoaderError(f"tasks validate: -o {out_path} is the input file; write elsewhere")
    report: list[RowValidation] = []
    with open(out_path, "w", encoding="utf-8") as out:
        pending: list[tuple[dict, RowValidation, int]] = []
        jobs: list[dict] = []

        def flush():
            results = executor.run(jobs, progress=progress) if jobs else []
            it = iter(results)
            for row, v, n_trusted_tests in pending:
                if n_trusted_tests >= 0:
                    _decide(v, next(it), n_trusted_tests)
                out.write(json.dumps(_clean_row(row, v)) + "\n")
                report.append(v)
            pending.clear()
            jobs.clear()

        for k, row, _ in rows:
            name = str(row.get("name", k))
            where = f"codecontests record {k} ({name})"
            refs = solutions(row, "solutions")
            if references is not None:
                refs = refs[:references]
            v = RowValidation(name, generated=len((row.get("generated_tests") or {})
                                                   .get("input") or []), references=len(refs))
            n = -1
            if not v.generated:
                v.skipped = "no generated tests"
            elif not refs:
                langs = Counter((row.get("solutions") or {}).get("language") or [])
                v.skipped = ("Python 2 solutions only" if langs[1]
                             else "no Python 3 solution")
            else:
                seconds, mb = limits(row)
                job, n = _job(row, refs, where, seconds or FALLBACK_TIME_LIMIT_S,
                              mb or FALLBACK_MEMORY_MB, v)
                jobs.append(job)
            pending.append((row, v, n))
            if len(pending) >= batch:
                flush()
        flush()
    return report
