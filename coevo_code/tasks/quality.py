"""``coevo tasks quality``: how good a set of unit tests is against a dataset's real programs.

The tests (a dataset's own, by kind, or a file of tests, such as a model's) run against every
correct solution and every incorrect one a CodeContests row publishes, per language (Python,
C++, Java). The figures are pure functions of the pass matrix (:func:`program_verdicts`,
:func:`tester_quality`):

- **wrong programs caught** (true negative rate): a wrong program is caught when at least one
  test fails it;
- **correct programs wrongly failed** (false rejection): a correct program some test fails;
- **accurate tests**: a test every correct program passes (no correct program: nothing judged);
- **p01** and **p00**: CURE's (arXiv:2506.03136, Theorem 3.1), as :class:`~coevo_code.metrics.
  TestCounts` defines them: the share of (wrong program, accurate test) pairs in which the wrong
  program passes, and of (wrong program, inaccurate test) pairs likewise.

Each share comes with the count behind it; an empty denominator is undefined (``-`` with
``n=0``): no wrong program (nothing to catch), no correct program (no test judged), and so on.
What is no verdict is counted apart, never as caught or failed: a program its compiler refused
(``compile_error``; Python's ``syntax_error``) is no program the tests tried, and a cell the
sandbox lost (``sandbox_error`` after the executor's re-run) decides nothing: a program with a
lost cell that no decided cell fails is *undecided*, and so is a test with a lost cell of a
correct program that no correct program fails (out of p01 / p00 goes every test with a lost
cell). A problem with no test is not run (nothing measures its tests); for the pure function,
an n x 0 matrix catches no wrong program.

Figures over several problems pool the counts (every program, test and pair weighs the same),
as :mod:`coevo_code.metrics` does. "All languages" is the matrix of every language's programs
together: a test is accurate there when every correct program in every language passes it.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from ..metrics import TestCounts, _share, test_counts
from ..rewards import _bool2d, _mask, program_mask
from ..sandbox.protocol import COMPILE, HARNESS, SYNTAX
from .check import _job, _why_not_run, reference_count, solutions_of, test_labels
from .model import LoaderError, TestCase, read_json, seeded_sample, unrunnable_text

NOT_COMPILED = (COMPILE, SYNTAX)  # a program none of which ran
ALL = "all"  # the row of every language together


# ---- the pure part: pass matrices -> verdicts -> counts -----------------------------------------
@dataclass(frozen=True)
class Verdicts:
    """One pass matrix's verdicts, as boolean masks (programs: n; tests: t)."""

    correct: np.ndarray       # the dataset's correct solutions (the others are wrong)
    compiled: np.ndarray      # programs that ran (not refused by their compiler)
    failed: np.ndarray        # programs a decided cell fails
    undecided: np.ndarray     # compiled programs no decided cell fails but with a lost cell
    accurate: np.ndarray      # tests judged accurate (every compiled correct program passes)
    judged: np.ndarray        # tests judged at all (a compiled correct program, no lost cell left)
    counts: TestCounts        # p01 / p00 pairs, over the tests with no lost cell
    lost_cells: int           # cells of compiled programs the sandbox lost
    catches: np.ndarray       # tests that fail some compiled wrong program (a decided cell)


def program_verdicts(passed, correct, lost=None, compiled=None) -> Verdicts:
    """The verdicts of a programs x tests matrix: ``passed[i, j]`` program i passes test j;
    ``correct`` marks the correct programs; ``lost`` the cells the sandbox lost (None: none);
    ``compiled`` the programs that ran (None: all). See the module docstring."""
    passed = _bool2d(passed, "passed")
    n, t = passed.shape
    correct = _mask(correct, n)
    compiled = program_mask(compiled, n)
    lost = np.zeros((n, t), dtype=bool) if lost is None else _bool2d(lost, "lost")
    if lost.shape != (n, t):
        raise ValueError(f"lost has shape {lost.shape}, passed {(n, t)}")
    lost = lost & compiled[:, None]
    fails = ~passed & ~lost & compiled[:, None]  # decided cells that fail
    failed = fails.any(axis=1)
    undecided = compiled & ~failed & lost.any(axis=1)
    ref = correct & compiled
    inaccurate = fails[ref].any(axis=0)
    judged = np.full(t, bool(ref.any())) & ~(~inaccurate & lost[ref].any(axis=0))
    clean = ~lost.any(axis=0)  # tests no compiled program lost a cell of
    pairs = test_counts(passed[np.ix_(compiled, clean)], correct[compiled])
    return Verdicts(correct, compiled, failed, undecided, judged & ~inaccurate, judged, pairs,
                    int(lost.sum()), fails[~correct].any(axis=0))


@dataclass(frozen=True)
class Quality:
    """The counts behind a tester's figures on one matrix, or pooled (``+``)."""

    wrong: int = 0            # wrong programs judged (compiled, decided)
    caught: int = 0           # of which a test fails
    correct: int = 0          # correct programs judged
    rejected: int = 0         # of which a test fails
    tests: int = 0            # tests judged (a correct program ran them)
    accurate: int = 0
    pairs: TestCounts = TestCounts()
    not_compiled_correct: int = 0
    not_compiled_wrong: int = 0
    undecided_correct: int = 0
    undecided_wrong: int = 0
    undecided_tests: int = 0
    lost_cells: int = 0

    @classmethod
    def of(cls, v: Verdicts) -> "Quality":
        c, w = v.correct & v.compiled, ~v.correct & v.compiled
        decided = ~v.undecided
        return cls(wrong=int((w & decided).sum()), caught=int((w & v.failed).sum()),
                   correct=int((c & decided).sum()), rejected=int((c & v.failed).sum()),
                   tests=int(v.judged.sum()), accurate=int(v.accurate.sum()), pairs=v.counts,
                   not_compiled_correct=int((v.correct & ~v.compiled).sum()),
                   not_compiled_wrong=int((~v.correct & ~v.compiled).sum()),
                   undecided_correct=int((c & v.undecided).sum()),
                   undecided_wrong=int((w & v.undecided).sum()),
                   undecided_tests=int(v.judged.size - v.judged.sum()) if c.any() else 0,
                   lost_cells=v.lost_cells)

    def __add__(self, o: "Quality") -> "Quality":
        return Quality(*(a + b for a, b in zip(self._values(), o._values())))

    def _values(self):
        return [getattr(self, f.name) for f in fields(self)]

    @property
    def caught_share(self) -> float:
        """True negative rate: the share of wrong programs some test fails."""
        return _share(self.caught, self.wrong)

    @property
    def rejected_share(self) -> float:
        """False rejection: the share of correct programs some test fails."""
        return _share(self.rejected, self.correct)

    @property
    def accuracy(self) -> float:
        """The share of tests every correct program passes."""
        return _share(self.accurate, self.tests)

    @property
    def p01(self) -> float:
        return self.pairs.p01

    @property
    def p00(self) -> float:
        return self.pairs.p00

    def left_out(self) -> str:
        """What is no verdict, in words ('' if nothing)."""
        parts = []
        nc = self.not_compiled_correct + self.not_compiled_wrong
        if nc:
            parts.append(f"{nc} not compiled ({self.not_compiled_correct} correct, "
                         f"{self.not_compiled_wrong} wrong)")
        und = self.undecided_correct + self.undecided_wrong
        if und:
            parts.append(f"{und} programs undecided ({self.undecided_correct} correct, "
                         f"{self.undecided_wrong} wrong)")
        if self.undecided_tests:
            parts.append(f"{self.undecided_tests} tests undecided")
        if self.lost_cells:
            parts.append(f"{self.lost_cells} cells lost (sandbox_error)")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        def share(x):
            return None if np.isnan(x) else round(float(x), 6)
        p = self.pairs
        return {"wrong": self.wrong, "caught": self.caught, "caught_share": share(self.caught_share),
                "correct": self.correct, "rejected": self.rejected,
                "rejected_share": share(self.rejected_share),
                "tests": self.tests, "accurate": self.accurate, "accuracy": share(self.accuracy),
                "p01": share(self.p01), "p01_pairs": p.wrong_x_accurate,
                "p00": share(self.p00), "p00_pairs": p.wrong_x_inaccurate,
                "not_compiled_correct": self.not_compiled_correct,
                "not_compiled_wrong": self.not_compiled_wrong,
                "undecided_correct": self.undecided_correct,
                "undecided_wrong": self.undecided_wrong,
                "undecided_tests": self.undecided_tests, "lost_cells": self.lost_cells}


def tester_quality(passed, correct, lost=None, compiled=None) -> Quality:
    """The counts of :class:`Quality` for one matrix (see :func:`program_verdicts`)."""
    return Quality.of(program_verdicts(passed, correct, lost, compiled))


tester_quality.__test__ = False  # not a pytest test when imported into one


def from_result(result: dict, n: int, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(passed, lost, compiled) of an executor's stdio result for n programs x t tests."""
    passed = np.array(result["passed"], dtype=bool).reshape(n, t)
    outcomes = result.get("outcomes") or [["ok"] * t for _ in range(n)]
    lost = np.array([[o in HARNESS for o in row] for row in outcomes], dtype=bool).reshape(n, t)
    compiled = np.array([not any(o in NOT_COMPILED for o in row) for row in outcomes],
                        dtype=bool).reshape(n)
    return passed, lost, compiled


def share_text(num: int, den: int) -> str:
    """``0.925 (37/40)``, or ``- (n=0)`` when undefined."""
    return f"{num / den:.3f} ({num}/{den})" if den else "- (n=0)"


# ---- the tests: a dataset's own, or a file --------------------------------------------------------
def problem_index(tasks) -> dict[str, object]:
    """Task by id, and by a CodeContests short name (``1060_A`` for ``1060_A. Phone Numbers``)
    where that short name is one task's."""
    by_id = {t.id: t for t in tasks}
    short = Counter(t.id.split(". ", 1)[0] for t in tasks)
    for t in tasks:
        s = t.id.split(". ", 1)[0]
        if short[s] == 1 and s not in by_id:
            by_id[s] = t
    return by_id


def read_tests_file(path, tasks) -> tuple[dict[str, list[TestCase]], dict[str, list[str]],
                                          dict[str, int]]:
    """The tests a JSONL file holds, per task id: ``{"problem", "input", "output"}`` a line (a
    test), or ``coevo eval``'s ``generations.jsonl`` lines (``{"task_id", "role": "test",
    "completions"}``: each completion parsed as the tester role's output is; ``role: code`` lines
    are passed over). Returns (tests, their labels, completions that did not parse) per task id.
    A malformed line, or one naming a problem the dataset lacks, is a one-line LoaderError naming
    the line, before anything runs."""
    from ..roles import TEST, parse_test
    index = problem_index(tasks)
    tests: dict[str, list[TestCase]] = {}
    labels: dict[str, list[str]] = {}
    unparsed: dict[str, int] = {}
    try:
        f = open(path, encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise LoaderError(f"cannot read tests file {path}: {e.strerror}") from None
    with f:
        for k, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"tests file {path} line {k}"
            rec = read_json(line, where)
            if not isinstance(rec, dict):
                raise LoaderError(f"{where}: a record must be a JSON object, got "
                                  f"{type(rec).__name__}")
            generations = "completions" in rec or "role" in rec
            key = "task_id" if generations else "problem"
            name = rec.get(key)
            if not isinstance(name, str) or not name:
                raise LoaderError(f"{where}: no {key!r} (a record is {{\"problem\", \"input\", "
                                  f"\"output\"}} or a generations.jsonl line)")
            task = index.get(name)
            if task is None:
                raise LoaderError(f"{where}: problem {name!r} is not among the {len(tasks)} "
                                  "problems loaded")
            mine, names = tests.setdefault(task.id, []), labels.setdefault(task.id, [])
            unparsed.setdefault(task.id, 0)
            if generations:
                if rec.get("role") != TEST:
                    continue
                texts = rec.get("completions")
                if not isinstance(texts, list):
                    raise LoaderError(f"{where}: 'completions' must be a list")
                for c, text in enumerate(texts):
                    parsed = parse_test(text, task)
                    if parsed.ok:
                        mine.append(parsed.test)
                        names.append(f"line {k} completion {c}")
                    else:
                        unparsed[task.id] += 1
                continue
            for part in ("input", "output"):
                if not isinstance(rec.get(part), str):
                    raise LoaderError(f"{where}: {part!r} must be a string, got "
                                      f"{type(rec.get(part)).__name__}")
                if unrunnable_text(rec[part]) is not None:
                    raise LoaderError(f"{where}: {part!r} holds a character no program can read "
                                      "or print (a lone surrogate)")
            mine.append(TestCase(input=rec["input"], output=rec["output"]))
            names.append(f"line {k}")
    return tests, labels, unparsed


# ---- running --------------------------------------------------------------------------------------
@dataclass
class ProblemQuality:
    """One problem: its tests' figures per language (and all languages together)."""

    id: str
    tests: int
    skipped: str | None = None
    quality: dict[str, Quality] = field(default_factory=dict)   # language (or "all") -> counts
    # names of what a reader wants to look at: uncaught wrong programs, failed correct ones
    # (with the outcomes failing them), inaccurate tests, programs not compiled / undecided
    detail: dict[str, dict] = field(default_factory=dict)
    unparsed: int = 0  # test completions that did not parse (a generations file)

    def line(self) -> str:
        if self.skipped:
            return f"{self.id}: not run ({self.skipped})"
        return f"{self.id}: {self.tests} tests; " + "; ".join(
            f"{lang}: caught {q.caught}/{q.wrong}, wrongly failed {q.rejected}/{q.correct}, "
            f"accurate {q.accurate}/{q.tests}" + (f" ({q.left_out()})" if q.left_out() else "")
            for lang, q in self.quality.items())

    def to_dict(self) -> dict:
        return {"id": self.id, "tests": self.tests, "skipped": self.skipped,
                **({"unparsed_tests": self.unparsed} if self.unparsed else {}),
                "quality": {k: q.to_dict() for k, q in self.quality.items()},
                "detail": self.detail}


@dataclass
class QualityReport:
    """Every problem's figures and the pooled ones, per language and all together."""

    tests: str                # where the tests came from, in words
    languages: tuple[str, ...]
    per_problem: list[ProblemQuality] = field(default_factory=list)

    @property
    def overall(self) -> dict[str, Quality]:
        out: dict[str, Quality] = {}
        for p in self.per_problem:
            for lang, q in p.quality.items():
                out[lang] = out.get(lang, Quality()) + q
        return {k: out[k] for k in (*self.languages, ALL) if k in out}

    def run(self) -> list[ProblemQuality]:
        return [p for p in self.per_problem if not p.skipped]

    def summary(self) -> str:
        run, q = self.run(), self.overall.get(ALL)
        s = f"tester quality ({self.tests}; {len(run)} problems run"
        skipped = len(self.per_problem) - len(run)
        s += f", {skipped} not run)" if skipped else ")"
        if q is None:
            return s + ": nothing run"
        s += (f": wrong programs caught {share_text(q.caught, q.wrong)}, correct programs "
              f"wrongly failed {share_text(q.rejected, q.correct)}, accurate tests "
              f"{share_text(q.accurate, q.tests)}, p01 "
              f"{share_text(q.pairs.wrong_pass_accurate, q.pairs.wrong_x_accurate)}, p00 "
              f"{share_text(q.pairs.wrong_pass_inaccurate, q.pairs.wrong_x_inaccurate)}")
        if q.left_out():
            s += f"; not counted: {q.left_out()}"
        unparsed = sum(p.unparsed for p in self.per_problem)
        if unparsed:
            s += f"; {unparsed} test completions did not parse"
        return s

    def table(self) -> str:
        """A markdown table: a row per problem and language, then the pooled rows."""
        rows = ["| problem | language | tests | wrong programs caught | correct programs wrongly "
                "failed | accurate tests | p01 | p00 | not counted |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]

        def row(name, lang, tests, q: Quality):
            p = q.pairs
            rows.append(f"| {name} | {lang} | {tests} | {share_text(q.caught, q.wrong)} | "
                        f"{share_text(q.rejected, q.correct)} | "
                        f"{share_text(q.accurate, q.tests)} | "
                        f"{share_text(p.wrong_pass_accurate, p.wrong_x_accurate)} | "
                        f"{share_text(p.wrong_pass_inaccurate, p.wrong_x_inaccurate)} | "
                        f"{q.left_out()} |")
        for p in self.run():
            for lang, q in p.quality.items():
                if lang != ALL or len(p.quality) > 2:
                    row(p.id, lang, p.tests, q)
        run = self.run()
        if len(run) > 1:
            total = sum(p.tests for p in run)
            for lang, q in self.overall.items():
                if lang != ALL or len(self.overall) > 2:
                    row(f"all {len(run)} problems", lang, total, q)
        skipped: dict[str, list[str]] = {}
        for p in self.per_problem:
            if p.skipped:
                skipped.setdefault(p.skipped, []).append(p.id)
        notes = [f"Not run ({why}): {', '.join(ids)}." for why, ids in skipped.items()]
        return "\n".join(rows + ([""] + notes if notes else []))

    def to_dict(self) -> dict:
        return {"summary": self.summary(), "tests": self.tests, "languages": list(self.languages),
                "overall": {k: q.to_dict() for k, q in self.overall.items()},
                "problems": [p.to_dict() for p in self.per_problem]}


@dataclass
class _Plan:
    """One (problem, language) job: its programs, which are correct, and their names."""

    problem: ProblemQuality
    lang: str
    programs: list[str]
    correct: np.ndarray
    names: list[str]


def pick(items, limit: int | None, seed: int, key: str) -> list[tuple[int, str]]:
    """(index, item) of a seeded sample of ``limit`` of ``items`` (all with None), in order; the
    sample depends on ``seed`` and ``key`` (problem, language, kind) only."""
    return seeded_sample(list(enumerate(items)), limit,
                         [seed, zlib.crc32(key.encode("utf-8", "surrogateescape"))])


def plan_problem(task, tests, languages, references, seed) -> tuple[ProblemQuality, list]:
    """The problem's record and its jobs' plans: per language, a seeded sample of ``references``
    correct and as many incorrect solutions (all with None)."""
    p = ProblemQuality(id=task.id, tests=len(tests))
    if not tests:
        p.skipped = "no tests"
        return p, []
    plans = []
    for lang in languages:
        refs, bad = solutions_of(task, lang, None, True)
        good = pick(refs, references, seed, f"{task.id}|{lang}|correct")
        wrong = pick(bad, references, seed, f"{task.id}|{lang}|incorrect")
        if not good and not wrong:
            continue
        plans.append(_Plan(p, lang, [s for _, s in good] + [s for _, s in wrong],
                           np.array([True] * len(good) + [False] * len(wrong)),
                           [f"{lang} {i}" for i, _ in good] +
                           [f"{lang} incorrect {i}" for i, _ in wrong]))
    if not plans:
        p.skipped = _why_not_run(task, languages)
    return p, plans


def cell_count(task, n_tests: int, languages, references: int | None) -> int:
    """How many cells :func:`measure_quality` runs for ``task`` with ``n_tests`` tests (nothing
    decoded)."""
    cap = references if references is not None else 1 << 62
    total = 0
    for lang in languages:
        bad = (task.metadata.get("incorrect") if lang == "python" else
               (task.metadata.get("native_incorrect") or {}).get(lang)) or []
        if lang != "python" and task.input_mode != "stdio":
            bad = []
        total += min(reference_count(task, lang), cap) + min(len(bad), cap)
    return total * n_tests


def measure_quality(tasks, tests_of, executor, languages=("python", "cpp", "java"),
                    references: int | None = None, seed: int = 0, progress=None,
                    labels_of=None, batch: int = 8, tests_name: str = "tests") -> QualityReport:
    """Run each task's correct and incorrect solutions in ``languages`` (a seeded sample of
    ``references`` of each kind per language; all with None) against ``tests_of(task)`` and
    compute the figures of the module docstring. ``labels_of(task)``: the tests' names (default
    :func:`~coevo_code.tasks.check.test_labels`)."""
    report = QualityReport(tests_name, tuple(languages))
    tasks = list(tasks)
    for start in range(0, len(tasks), batch):
        part = tasks[start:start + batch]
        jobs, plans = [], []
        for t in part:
            tests = list(tests_of(t))
            p, mine = plan_problem(t, tests, languages, references, seed)
            report.per_problem.append(p)
            for plan in mine:
                jobs.append(_job(t, plan.programs, plan.lang, tests=tests))
                plans.append((t, plan))
        results = executor.run(jobs, progress=progress) if jobs else []
        _score(plans, results, labels_of or test_labels)
    return report


def _score(plans, results, labels_of) -> None:
    per: dict[int, list] = {}
    for (t, plan), r in zip(plans, results):
        p = plan.problem
        if p.skipped:
            continue
        if not r.get("passed"):
            p.skipped, p.quality, p.detail = f"executor error: {r.get('error', 'no result')}", {}, {}
            continue
        passed, lost, compiled = from_result(r, len(plan.programs), p.tests)
        outcomes = r.get("outcomes") or [["ok"] * p.tests] * len(plan.programs)
        v = program_verdicts(passed, plan.correct, lost, compiled)
        p.quality[plan.lang] = Quality.of(v)
        p.detail[plan.lang] = _detail(plan, v, outcomes, labels_of(t))
        per.setdefault(id(p), [t, p, []])[2].append((plan, passed, lost, compiled))
    for t, p, parts in per.values():
        if p.skipped or len(parts) < 2:
            if not p.skipped and parts:
                p.quality[ALL] = p.quality[parts[0][0].lang]
            continue
        v = program_verdicts(np.vstack([x[1] for x in parts]),
                             np.concatenate([x[0].correct for x in parts]),
                             np.vstack([x[2] for x in parts]),
                             np.concatenate([x[3] for x in parts]))
        p.quality[ALL] = Quality.of(v)
        p.detail[ALL] = _tests_detail(v, labels_of(t))


def _tests_detail(v: Verdicts, labels) -> dict:
    """The tests judged inaccurate, and those no wrong program fails (where one ran)."""
    return {"inaccurate_tests": [labels[j] for j in np.flatnonzero(v.judged & ~v.accurate)],
            "catch_nothing": ([labels[j] for j in np.flatnonzero(~v.catches)]
                              if (~v.correct & v.compiled).any() else [])}


def _detail(plan: _Plan, v: Verdicts, outcomes, labels) -> dict:
    names, c = plan.names, plan.correct
    failing = {}
    for i in np.flatnonzero(c & v.failed):
        failing[names[i]] = dict(Counter(o for o in outcomes[i] if o not in ("ok", *HARNESS)))
    return {"uncaught_wrong": [names[i] for i in np.flatnonzero(~c & v.compiled & ~v.failed
                                                                & ~v.undecided)],
            "failed_correct": failing, **_tests_detail(v, labels),
            "not_compiled": [names[i] for i in np.flatnonzero(~v.compiled)],
            "undecided": [names[i] for i in np.flatnonzero(v.undecided)]}


def tests_description(kinds=None, path=None) -> str:
    """How the report names its tests."""
    if path is not None:
        return f"tests from {Path(path).name}"
    return f"the dataset's {'+'.join(kinds)} tests"


__all__ = ["Quality", "Verdicts", "ProblemQuality", "QualityReport", "program_verdicts",
           "tester_quality", "measure_quality", "read_tests_file", "share_text"]
