"""Evaluating a model as a coder and as a unit tester on a benchmark.

For each problem: k_code solutions and k_test tests from the model (generated through
:mod:`coevo_code.generation.cache`, so an interrupted evaluation resumes without regenerating),
one executor job (solutions x (gold tests + generated tests)), then the core's
metrics: pass@1 (mean over problems of the share of correct solutions) and unbiased pass@k,
unit-test accuracy, p01, p00 and mu (pooled over problems with a correct solution; CURE Sec. 3),
and best-of-N accuracy for each (n, m) and each ranker (as CURE evaluates it: pick one of the
first n solutions using the first m generated tests). Every figure comes with a bootstrap 95%
interval over problems.

A cell whose judge, container or node was lost, and lost again when re-run on a fresh judge
(``sandbox_error``), is no verdict on the model: a solution it leaves undecided (a lost gold
cell, and no gold test it ran fails it) and a generated test with a lost cell are left out of
the figures, and counted apart (``sandbox_errors``, ``solutions_undecided``,
``tests_undecided``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

import numpy as np

from ..matrix import JobRefused, full_matrix, lost_matrix, prepare
from ..metrics import TestCounts, best_of_n_accuracy, pass_at_k, test_counts
from ..ranking import codet_select, cure_select
from ..rewards import correct_from_gold
from ..roles import CODE, TEST
from ..tasks.model import Task

RANKERS: dict[str, Callable] = {
    "cure": cure_select,                                   # most generated tests passed
    "codet": codet_select,                                 # CodeT, the paper's score
    "codet_sqrt": partial(codet_select, sqrt_solutions=True),  # CodeT, the authors' code
    "first": lambda generated: 0,                          # no ranking: the first sample
}


def parse_bon(text: str) -> list[tuple[int, int]]:
    """``"4x4,16x16"`` -> [(4, 4), (16, 16)]."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            n, m = (int(x) for x in part.lower().split("x"))
        except ValueError:
            raise ValueError(f"--bon: {part!r} is not NxM (e.g. 4x4,16x16)") from None
        if n < 1 or m < 0:
            raise ValueError(f"--bon: {part!r} needs N >= 1 and M >= 0")
        out.append((n, m))
    return out


@dataclass
class ProblemResult:
    task_id: str
    matrix: np.ndarray      # n x (t + m)
    n_gold: int
    correct: np.ndarray     # over solutions (all False without gold tests)
    has_gold: bool          # the problem has gold tests (not "pseudo-labelled", as in training)
    parse_fail_code: int
    parse_fail_test: int
    lost: np.ndarray | None = None  # cells the harness lost (sandbox_error), as ``matrix``

    @property
    def generated(self) -> np.ndarray:
        return self.matrix[:, self.n_gold:]

    @property
    def undecided(self) -> np.ndarray:
        """Solutions with a lost gold cell that no gold test they ran fails: their verdict is
        unknown (not wrong)."""
        if self.lost is None:
            return np.zeros(self.matrix.shape[0], dtype=bool)
        t = self.n_gold
        lost_gold = self.lost[:, :t]
        return lost_gold.any(axis=1) & ~(~self.matrix[:, :t] & ~lost_gold).any(axis=1)

    @property
    def tests_lost(self) -> np.ndarray:
        """Generated tests with a lost cell."""
        if self.lost is None:
            return np.zeros(self.matrix.shape[1] - self.n_gold, dtype=bool)
        return self.lost[:, self.n_gold:].any(axis=0)

    @property
    def known_correct(self) -> np.ndarray:
        """``correct`` over the decided solutions only."""
        return self.correct[~self.undecided]

    @property
    def known_generated(self) -> np.ndarray:
        """The generated tests without a lost cell, run by the decided solutions."""
        return self.generated[np.ix_(~self.undecided, ~self.tests_lost)]


def judge(tasks: Sequence[Task], generations: dict, k_code: int, k_test: int, executor,
          progress=None, refused: list | None = None) -> list[ProblemResult]:
    """Every problem's matrix. A problem whose job the executor refused (a test no program can
    read) is left out, and added to ``refused`` as ``{"task_id", "error"}`` (the error one line
    naming it); the others are judged as ever."""
    batches = [prepare(t, generations.get((t.id, CODE), [])[:k_code],
                       generations.get((t.id, TEST), [])[:k_test]) for t in tasks]
    jobs = [b.job for b in batches if b.job is not None]
    results = iter(executor.run(jobs, progress=progress) if jobs else [])
    out = []
    for b in batches:
        res = next(results) if b.job is not None else None
        try:
            m = full_matrix(b, res)
        except JobRefused as e:
            if refused is not None:
                refused.append({"task_id": b.task.id, "error": str(e)})
            continue
        gold = m[:, :b.n_gold]
        out.append(ProblemResult(
            b.task.id, m, b.n_gold,
            correct_from_gold(gold) if b.n_gold else np.zeros(m.shape[0], dtype=bool),
            b.n_gold > 0, sum(not p.ok for p in b.programs), sum(not x.ok for x in b.tests),
            lost_matrix(b, res)))
    return out


# ---- metrics with bootstrap intervals ---------------------------------------------------------
def _pass_k(p: ProblemResult, k: int) -> float:
    c = p.known_correct
    return pass_at_k(len(c), int(c.sum()), k) if len(c) >= k else float("nan")


def _pass_1(p: ProblemResult) -> float:
    """The share of correct solutions among the decided ones (0.0 without a solution; NaN when
    the harness left every one undecided)."""
    if not p.matrix.shape[0]:
        return 0.0
    c = p.known_correct
    return float(c.mean()) if len(c) else float("nan")


def _bon(p: ProblemResult, n: int, m: int, ranker: str) -> float:
    if not p.matrix.shape[0]:
        return 0.0
    c = p.known_correct
    return best_of_n_accuracy(c, p.known_generated, n, m, RANKERS[ranker]) if len(c) \
        else float("nan")


def _per_problem(problems: list[ProblemResult], bon, rankers) -> dict[str, np.ndarray]:
    """A value per problem for every metric that is a mean over problems (NaN: undefined)."""
    with_gold = [p for p in problems if p.has_gold]
    n_min = min((p.matrix.shape[0] for p in with_gold), default=0)
    cols: dict[str, list[float]] = {"pass@1": [_pass_1(p) for p in with_gold]}
    for k in sorted({k for k in (5, 10, 16, 100) if 1 < k <= n_min} | {n for n, _ in bon
                                                                       if 1 < n <= n_min}):
        cols[f"pass@{k}"] = [_pass_k(p, k) for p in with_gold]
    for n, m in bon:
        for name in rankers:
            cols[f"bon_{n}x{m}/{name}"] = [_bon(p, n, m, name) for p in with_gold]
    return {k: np.asarray(v, dtype=float) for k, v in cols.items()}


def _pooled(counts: np.ndarray) -> dict[str, float]:
    """Unit-test figures from per-problem counts (rows of ``TestCounts.astuple()``)."""
    total = TestCounts(*(int(x) for x in counts.sum(axis=0))) if len(counts) else TestCounts()
    return {"ut_acc": total.unit_test_accuracy, "p01": total.p01, "p00": total.p00,
            "mu": total.mu}


def summarize(problems: list[ProblemResult], bon: list[tuple[int, int]],
              rankers: Sequence[str], bootstrap: int = 1000, seed: int = 0) -> dict:
    """Point estimates and bootstrap 95% intervals (resampling problems with replacement)."""
    with_gold = [p for p in problems if p.has_gold]
    per = _per_problem(problems, bon, rankers)
    counts = np.array([test_counts(p.known_generated, p.known_correct).astuple()
                       for p in with_gold],
                      dtype=np.int64).reshape(len(with_gold), 6)
    point = {k: float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
             for k, v in per.items()}
    point.update(_pooled(counts))
    ci: dict[str, list[float]] = {}
    if bootstrap and with_gold:
        rng = np.random.default_rng(seed)
        draws: dict[str, list[float]] = {k: [] for k in point}
        idx_all = np.arange(len(with_gold))
        for _ in range(bootstrap):
            idx = rng.choice(idx_all, size=len(idx_all), replace=True)
            for k, v in per.items():
                sub = v[idx]
                draws[k].append(float(np.nanmean(sub)) if np.isfinite(sub).any() else math.nan)
            for k, v in _pooled(counts[idx]).items():
                draws[k].append(v)
        for k, vals in draws.items():
            a = np.asarray(vals, dtype=float)
            a = a[np.isfinite(a)]
            if a.size:
                ci[k] = [float(np.percentile(a, 2.5)), float(np.percentile(a, 97.5))]
    n_sol = sum(p.matrix.shape[0] for p in problems)
    n_test = sum(p.matrix.shape[1] - p.n_gold for p in problems)
    return {
        # "labelled" (the output key, kept): how many problems have gold tests
        "problems": len(problems), "labelled": len(with_gold),
        "metrics": {k: (None if v is None or not math.isfinite(v) else v) for k, v in point.items()},
        "ci95": ci,
        "parse_fail_code": (sum(p.parse_fail_code for p in problems) / n_sol) if n_sol else None,
        "parse_fail_test": (sum(p.parse_fail_test for p in problems) / n_test) if n_test else None,
        # the harness's failures, apart from the model's: left out of every figure above
        "sandbox_errors": int(sum(p.lost.sum() for p in problems if p.lost is not None)),
        "solutions_undecided": int(sum(p.undecided.sum() for p in with_gold)),
        "tests_undecided": int(sum(p.tests_lost.sum() for p in problems)),
        "bootstrap": bootstrap,
    }
