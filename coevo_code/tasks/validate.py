"""``coevo tasks validate``: drop the CodeContests generated tests the dataset's own correct
solutions disagree with, deciding by the agreement of several of them, in any language.

CodeContests' generated tests were made by mutating test inputs and kept when the correct
solutions agreed on the output; some mutated inputs are outside the statement's constraints
(``1060_A``: leading-digit counts above the allowed ``n``), where correct solutions may answer
differently from the recorded output. For each row:

1. its correct solutions in the chosen ``languages`` (Python 3, C++, Java; all, or the first
   ``references`` of each; identical sources run once) run on its public, private and generated
   tests, C++ and Java as the sandbox's native programs;
2. the *trusted* ones pass every public and private test (the tests written by the problem
   setters) without memorizing them: a solution whose string literals hold a line of a public or
   private input of at least :data:`MEMO_MIN` characters verbatim (``1060_A``'s Python solution
   398 compares the input with eight private inputs and prints their answers) is not trusted;
3. each trusted reference's verdict on a generated test is a vote: ``ok`` *confirms* the
   recorded output, ``wrong_answer`` *disputes* it (the reference ran to the end and printed
   something else), and a crash, timeout or memory verdict is evidence about the reference, not
   about the test: it *abstains* (an honest recursive solution that overflows its stack on a
   large valid input says nothing about that input's output);
4. an *outlier*, a trusted reference that disputes or crashes on more than half of the generated
   tests that more of the other trusted references confirm than dispute or crash on, has no vote
   (a reference that answers the setters' tests from a table of their digests passes them and is
   wrong on everything else; two such references do not vouch for each other);
5. a generated test is dropped when at least ``min_dispute`` (default 2) voting references
   dispute it, or when none confirms it and at least ``min_dispute`` dispute it or crash on it
   (an input no correct solution can read). One reference never drops a test: with a single
   voter, or a single dissenter, the test is kept and counted as *contested*.

Why keep rather than drop when in doubt: a kept invalid test fails every solution alike (the
problem gives no reward signal), while a dropped valid test lets wrong solutions earn the reward.

Rows with no solution in the chosen languages, none trusted, or no generated test are written
unchanged and reported as not validated (with the reason). The cleaned file has the same schema
(every field kept, ``generated_tests`` filtered) plus ``coevo_validation``; the loader and the
trainer read it as they read the original (``--path CLEANED``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .codecontests import (NATIVE_CODES, PYTHON2, PYTHON3, parse_languages, parse_references,
                           reference_cap, solutions)
from .loaders import _io_pairs
from .model import LoaderError
from .rows import iter_rows

CONFIRM, DISPUTE, CRASH = "ok", "wrong_answer", "runtime_error"
ABSTAIN = ("timeout", "memory_limit", "output_limit")  # the output is unknown: counted as slow
MEMO_MIN = 16
MIN_DISPUTE = 2
CODES = {"python": PYTHON3, **NATIVE_CODES}
# a C/C++/Java string literal (the native languages' memorization rule reads these)
_C_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def _literals(source: str, language: str) -> list[str]:
    if language != "python":
        return [m.group(0)[1:-1].replace("\\n", "\n") for m in _C_STRING.finditer(source)]
    import ast
    try:
        return [n.value for n in ast.walk(ast.parse(source))
                if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []


def memorizes(source: str, inputs: list[str], language: str = "python") -> bool:
    """Whether a string literal of ``source`` holds a line of one of ``inputs`` (at least
    :data:`MEMO_MIN` characters, stripped) verbatim. Comments do not count (solutions often keep
    the examples they tried in comments)."""
    literals = _literals(source, language)
    if not literals:
        return False
    lines = {x.strip() for text in inputs for x in text.splitlines()}
    lines = [x for x in lines if len(x) >= MEMO_MIN]
    return any(line in lit for lit in literals for line in lines)


@dataclass(frozen=True)
class Decision:
    """What the trusted references' votes decide about a row's generated tests
    (:func:`decide`). Indexes are generated tests; ``outliers`` index the voters given."""

    dropped: list[int]
    contested: list[int]  # kept although a reference disputes or crashes on it
    disputes: dict[int, int]  # test -> voting references disputing (wrong_answer)
    crashes: dict[int, int]  # test -> voting references crashing on it
    slow: dict[int, int]  # test -> voting references timing out or over a limit
    outliers: list[int]


def decide(votes, min_dispute: int = MIN_DISPUTE) -> Decision:
    """Steps 3 to 5 of the module docstring, on ``votes``: one row per trusted reference (its
    outcome on each generated test). Pure."""
    v = np.empty((len(votes), len(votes[0]) if len(votes) else 0), dtype=object)
    for r, row in enumerate(votes):  # filled row by row: numpy never splits an outcome string
        v[r, :] = list(row)
    n, t = v.shape
    confirm, dispute, crash = v == CONFIRM, v == DISPUTE, v == CRASH
    against = dispute | crash
    # each reference against the others' totals (all minus its own row): n x t, one pass
    settled = (confirm.sum(0) - confirm) > (against.sum(0) - against)
    n_settled, n_against = settled.sum(1), (against & settled).sum(1)
    outliers = ([int(r) for r in np.flatnonzero((n_settled > 0) & (n_against * 2 > n_settled))]
                if n > 1 else [])
    voting = np.ones(n, bool)
    voting[outliers] = False
    conf, disp = confirm[voting].sum(0), dispute[voting].sum(0)
    crashed = crash[voting].sum(0)
    slow = np.isin(v[voting], ABSTAIN).sum(0)
    drop = (disp >= min_dispute) | ((conf == 0) & (disp + crashed >= min_dispute))
    contested = ~drop & (disp + crashed > 0)
    nz = lambda a: {int(j): int(a[j]) for j in np.flatnonzero(a)}  # noqa: E731
    return Decision(dropped=[int(j) for j in np.flatnonzero(drop)],
                    contested=[int(j) for j in np.flatnonzero(contested)],
                    disputes=nz(disp), crashes=nz(crashed), slow=nz(slow), outliers=outliers)


@dataclass
class RowValidation:
    name: str
    generated: int = 0
    references: int = 0
    trusted: int = 0
    memorizing: list = field(default_factory=list)  # solutions holding test inputs
    outliers: list = field(default_factory=list)  # trusted, but without a vote
    dropped: list[int] = field(default_factory=list)
    disagreeing: dict[int, int] = field(default_factory=dict)  # test -> voters disputing
    crashing: dict[int, int] = field(default_factory=dict)  # test -> voters crashing
    contested: list[int] = field(default_factory=list)
    slow: dict[int, int] = field(default_factory=dict)  # test -> voters timing out
    # language -> {references, trusted, voting}; test -> {language: voters disputing}
    languages: dict[str, dict] = field(default_factory=dict)
    disputed_by: dict[int, dict[str, int]] = field(default_factory=dict)
    min_dispute: int = MIN_DISPUTE
    skipped: str | None = None

    def deciding(self) -> list[str]:
        """The languages with a voting reference."""
        return [lang for lang, c in self.languages.items() if c.get("voting")]

    def line(self) -> str:
        if self.skipped:
            return f"{self.name}: not validated ({self.skipped})"
        langs = ", ".join(f"{lang} {c['voting']}/{c['references']}"
                          for lang, c in self.languages.items())
        s = (f"{self.name}: {len(self.dropped)} of {self.generated} generated tests dropped "
             f"({self.trusted} of {self.references} references pass every public and private "
             f"test; voting: {langs})")
        s += "; passing all tests before -> after: " + ", ".join(
            f"{lang} {c['passing_before']} -> {c['passing_after']}"
            for lang, c in self.languages.items() if c["references"])
        if self.memorizing:
            s += (f"; {len(self.memorizing)} solutions hold public/private inputs verbatim "
                  f"and do not decide ({', '.join(map(str, self.memorizing[:10]))})")
        if self.outliers:
            s += (f"; {len(self.outliers)} outliers without a vote "
                  f"({', '.join(map(str, self.outliers[:10]))})")
        if self.dropped:
            s += "; dropped (references disputing): " + ", ".join(
                f"{j} ({_by(self.disputed_by.get(j)) or f'{self.crashing.get(j, 0)} crash'})"
                for j in self.dropped[:30]) + (" ..." if len(self.dropped) > 30 else "")
        if self.contested:
            s += (f"; {len(self.contested)} contested, kept: under {self.min_dispute} "
                  f"disputing ({', '.join(map(str, self.contested[:10]))}"
                  + (" ..." if len(self.contested) > 10 else "") + ")")
        if self.slow:
            s += f"; {len(self.slow)} tests had timeouts or memory limits"
        return s

    def record(self) -> dict:
        return {"references": self.references, "trusted": self.trusted,
                "memorizing": self.memorizing, "outliers": self.outliers,
                "languages": self.languages, "decided_by": self.deciding(),
                "generated_before": self.generated, "dropped": self.dropped,
                "disagreeing": {str(k): v for k, v in self.disagreeing.items()},
                "crashing": {str(k): v for k, v in self.crashing.items()},
                "disputed_by": {str(k): v for k, v in self.disputed_by.items()},
                "contested": self.contested,
                "slow": {str(k): v for k, v in self.slow.items()}}


def _by(counts) -> str:
    return ", ".join(f"{lang} {n}" for lang, n in (counts or {}).items())


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


@dataclass
class _Plan:
    """One row's references, by language: (language, index among its language's, source)."""

    refs: list[tuple[str, int, str]]
    n_setters: int  # public + private tests, first in every job
    jobs: list[dict] = field(default_factory=list)  # one per language, in order


def _plan(row: dict, languages, references, where, time_s, mem_mb, v) -> _Plan | None:
    setters = (_io_pairs(row.get("public_tests"), where + " public_tests")
               + _io_pairs(row.get("private_tests"), where + " private_tests"))
    generated = _io_pairs(row.get("generated_tests"), where + " generated_tests")
    tests = [t.to_job() for t in setters + generated]
    inputs = [t.input for t in setters]
    plan = _Plan([], len(setters))
    for lang in languages:
        seen, mine = set(), []
        for i, src in enumerate(solutions(row, "solutions", CODES[lang])
                                [:reference_cap(references, lang)]):
            if src.strip() in seen:
                continue  # the same program again: one vote
            seen.add(src.strip())
            if memorizes(src, inputs, lang):
                v.memorizing.append(_name(lang, i))
                continue
            mine.append((lang, i, src))
        v.languages[lang] = {"references": len(mine), "trusted": 0, "voting": 0,
                             "passing_before": 0, "passing_after": 0}
        if not mine:
            continue
        v.references += len(mine)
        job = {"id": f"{where} {lang}", "kind": "stdio", "programs": [s for _, _, s in mine],
               "tests": tests, "time_limit_s": time_s, "memory_limit_mb": mem_mb}
        if lang != "python":
            job["language"] = lang
        plan.refs += mine
        plan.jobs.append(job)
    return plan if plan.jobs else None


def _name(lang: str, i: int):
    return i if lang == "python" else f"{lang} {i}"


def _decide(v: RowValidation, plan: _Plan, results: list[dict], min_dispute: int) -> None:
    rows = []
    for r in results:
        if not r.get("outcomes"):
            v.skipped = f"executor error: {r.get('error', 'no result')}"
            return
        rows += r["outcomes"]
    n = plan.n_setters
    trusted = [(ref, outs[n:]) for ref, outs in zip(plan.refs, rows)
               if all(o == CONFIRM for o in outs[:n])]
    v.trusted = len(trusted)
    for (lang, _, _), _ in trusted:
        v.languages[lang]["trusted"] += 1
    if not trusted:
        v.skipped = (f"none of its {v.references} references passes every public and private "
                     "test without holding their inputs")
        return
    d = decide([outs for _, outs in trusted], min_dispute)
    v.outliers = [_name(trusted[r][0][0], trusted[r][0][1]) for r in d.outliers]
    voting = [ref for k, (ref, _) in enumerate(trusted) if k not in set(d.outliers)]
    for lang, _, _ in voting:
        v.languages[lang]["voting"] += 1
    v.dropped, v.contested = d.dropped, d.contested
    kept = [j for j in range(v.generated) if j not in set(d.dropped)]
    for (lang, _, _), outs in zip(plan.refs, rows):  # every reference run, trusted or not
        v.languages[lang]["passing_before"] += all(o == CONFIRM for o in outs)
        v.languages[lang]["passing_after"] += all(o == CONFIRM for o in outs[:n]) and all(
            outs[n + j] == CONFIRM for j in kept)
    v.disagreeing, v.crashing, v.slow = d.disputes, d.crashes, d.slow
    for j in d.disputes:
        by = Counter(ref[0] for k, (ref, outs) in enumerate(trusted)
                     if k not in set(d.outliers) and outs[j] == DISPUTE)
        v.disputed_by[j] = dict(by)


def _not_run(row: dict, languages) -> str:
    langs = Counter((row.get("solutions") or {}).get("language") or [])
    if langs[PYTHON2] and not any(langs[CODES[lang]] for lang in CODES):
        return "Python 2 solutions only"
    have = [lang for lang in CODES if langs[CODES[lang]]]
    return (f"no {' / '.join(languages)} solution"
            + (f" (it has {', '.join(have)}: --languages)" if have else ""))


def validate_codecontests(source, out_path, executor, references: int | None = None,
                          batch: int = 8, progress=None, languages="python",
                          min_dispute: int = MIN_DISPUTE) -> list[RowValidation]:
    """Write the cleaned copy of ``source`` to ``out_path`` (jsonl); return one record per
    row. ``languages``: whose correct solutions decide (``python``, ``cpp``, ``java``,
    comma-separated); ``references``: the first N of each language. Rows are read, run and
    written ``batch`` at a time."""
    from .codecontests import FALLBACK_MEMORY_MB, FALLBACK_TIME_LIMIT_S, limits
    languages = parse_languages(languages)
    references = parse_references(references)
    if min_dispute < 1:
        raise LoaderError(f"tasks validate: --min_dispute must be at least 1, got {min_dispute}")
    rows, _, _ = iter_rows(source, "codecontests")
    out_path = Path(out_path)
    if out_path.resolve() == Path(source).resolve():
        raise LoaderError(f"tasks validate: -o {out_path} is the input file; write elsewhere")
    report: list[RowValidation] = []
    with open(out_path, "w", encoding="utf-8") as out:
        pending: list[tuple[dict, RowValidation, _Plan | None]] = []

        def flush():
            jobs = [job for _, _, plan in pending if plan for job in plan.jobs]
            it = iter(executor.run(jobs, progress=progress) if jobs else [])
            for row, v, plan in pending:
                if plan:
                    _decide(v, plan, [next(it) for _ in plan.jobs], min_dispute)
                out.write(json.dumps(_clean_row(row, v)) + "\n")
                report.append(v)
            pending.clear()

        for k, row, _ in rows:
            name = str(row.get("name", k))
            where = f"codecontests record {k} ({name})"
            v = RowValidation(name, generated=len((row.get("generated_tests") or {})
                                                   .get("input") or []), min_dispute=min_dispute)
            plan = None
            if not v.generated:
                v.skipped = "no generated tests"
            else:
                seconds, mb = limits(row)
                plan = _plan(row, languages, references, where,
                             seconds or FALLBACK_TIME_LIMIT_S, mb or FALLBACK_MEMORY_MB, v)
                if plan is None:
                    v.skipped = (_not_run(row, languages) if not v.memorizing else
                                 "every solution holds public/private inputs verbatim")
            pending.append((row, v, plan))
            if len(pending) >= batch:
                flush()
        flush()
    return report
