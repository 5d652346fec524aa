"""Metrics: pure functions of pass matrices and verdict arrays.

Per-problem functions return NaN where a quantity is undefined (an empty denominator). The
``pooled_*`` functions pool *counts* over problems (micro-averages), as CURE does when it reports
p01 / p00 / unit-test accuracy over a dataset: every (solution, test) pair weighs the same,
whichever problem it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from .rewards import _bool2d, _mask, accurate_tests, mu, program_mask


def _share(num: float, den: float) -> float:
    return float(num) / den if den else float("nan")


def code_accuracy(gold) -> float:
    """Share of solutions passing every gold test (NaN with no solution or no gold test)."""
    gold = _bool2d(gold, "gold")
    if gold.shape[0] == 0 or gold.shape[1] == 0:
        return float("nan")
    return float(gold.all(axis=1).mean())


@dataclass(frozen=True)
class TestCounts:
    """Counts behind unit-test accuracy, p01 and p00 for one problem (or pooled)."""

    __test__ = False  # not a pytest class

    tests: int = 0             # generated tests judged (problems with a correct solution only)
    accurate: int = 0          # of which accurate
    wrong_x_accurate: int = 0  # (wrong solution, accurate test) pairs
    wrong_pass_accurate: int = 0
    wrong_x_inaccurate: int = 0
    wrong_pass_inaccurate: int = 0

    def __add__(self, o: "TestCounts") -> "TestCounts":
        return TestCounts(*(a + b for a, b in zip(self.astuple(), o.astuple())))

    def astuple(self):
        return (self.tests, self.accurate, self.wrong_x_accurate, self.wrong_pass_accurate,
                self.wrong_x_inaccurate, self.wrong_pass_inaccurate)

    @property
    def unit_test_accuracy(self) -> float:
        """p_u: share of generated tests that are accurate."""
        return _share(self.accurate, self.tests)

    @property
    def p01(self) -> float:
        """P(a wrong solution passes an accurate test)."""
        return _share(self.wrong_pass_accurate, self.wrong_x_accurate)

    @property
    def p00(self) -> float:
        """P(a wrong solution passes an inaccurate test)."""
        return _share(self.wrong_pass_inaccurate, self.wrong_x_inaccurate)

    @property
    def mu(self) -> float:
        """CURE Theorem 3.1: mu = p_u (1 - p01) - (1 - p_u) p00."""
        return mu(self.unit_test_accuracy, self.p01, self.p00)


def test_counts(generated, correct, program=None) -> TestCounts:
    """Counts for one problem: a test is accurate iff every correct solution passes it; with no
    correct solution nothing can be judged (all counts 0). ``program`` (a mask over the
    solutions; None: all) leaves the rows that are not programs out of the wrong solutions, as
    :func:`coevo_code.rewards.cure_test_rewards` does with it."""
    generated = _bool2d(generated, "generated")
    correct = _mask(correct, generated.shape[0])
    program = program_mask(program, generated.shape[0])
    if not correct.any():
        return TestCounts()
    acc = accurate_tests(generated, correct)
    gw = generated[~correct & program]
    nw = gw.shape[0]
    return TestCounts(tests=int(acc.size), accurate=int(acc.sum()),
                      wrong_x_accurate=nw * int(acc.sum()),
                      wrong_pass_accurate=int(gw[:, acc].sum()),
                      wrong_x_inaccurate=nw * int((~acc).sum()),
                      wrong_pass_inaccurate=int(gw[:, ~acc].sum()))


test_counts.__test__ = False  # not a pytest test when imported into one


def unit_test_accuracy(generated, correct) -> float:
    return test_counts(generated, correct).unit_test_accuracy


def p01(generated, correct) -> float:
    return test_counts(generated, correct).p01


def p00(generated, correct) -> float:
    return test_counts(generated, correct).p00


def mu_estimate(generated, correct) -> float:
    return test_counts(generated, correct).mu


def pooled_test_counts(problems: Iterable[tuple]) -> TestCounts:
    """Counts pooled over ``(generated, correct)`` pairs, one per problem."""
    total = TestCounts()
    for generated, correct in problems:
        total = total + test_counts(generated, correct)
    return total


def pooled_code_accuracy(golds: Iterable) -> float:
    """Share of all solutions, over all problems, that pass every gold test of their problem
    (problems without gold tests are left out)."""
    correct = total = 0
    for gold in golds:
        gold = _bool2d(gold, "gold")
        if gold.shape[1] == 0:
            continue
        correct += int(gold.all(axis=1).sum())
        total += gold.shape[0]
    return _share(correct, total)


def pooled_best_of_n(problems: Iterable[tuple], n: int, m: int,
                     select: Callable[[np.ndarray], int] | None = None) -> float:
    """Best-of-N accuracy over ``(correct, generated)`` problems: the mean over problems (each
    problem picks one solution), skipping problems without solutions."""
    scores = [best_of_n_accuracy(c, g, n, m, select) for c, g in problems]
    scores = [x for x in scores if not np.isnan(x)]
    return float(np.mean(scores)) if scores else float("nan")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021, Eq. 1): 1 - C(n - c, k) / C(n, k), computed as a stable
    product. Needs 0 <= c <= n and 1 <= k <= n."""
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def best_of_n_accuracy(correct, generated, n: int, m: int,
                       select: Callable[[np.ndarray], int] | None = None) -> float:
    """Best-of-N with generated tests for one problem: among the first n solutions and the first
    m generated tests (as CURE's ``scale_tuple_list`` settings), pick one with ``select``
    (default :func:`coevo_code.ranking.cure_select`); 1.0 if it is correct, else 0.0."""
    from .ranking import cure_select
    correct = np.asarray(correct, dtype=bool)
    generated = _bool2d(generated, "generated")
    if n < 1 or m < 0:
        raise ValueError(f"best-of-N needs n >= 1 and m >= 0, got ({n}, {m})")
    sub = generated[:n, :m]
    if sub.shape[0] == 0:
        return float("nan")
    pick = (select or cure_select)(sub)
    return float(correct[pick])


def verifier_errors(accepted, correct) -> tuple[float, float]:
    """A verifier's (P(accept | wrong), P(reject | correct)); NaN where undefined."""
    accepted = np.asarray(accepted, dtype=bool)
    correct = np.asarray(correct, dtype=bool)
    if accepted.shape != correct.shape:
        raise ValueError(f"accepted {accepted.shape} and correct {correct.shape} differ")
    return (_share((accepted & ~correct).sum(), (~correct).sum()),
            _share((~accepted & correct).sum(), correct.sum()))


def joint_errors(errors_a, errors_b) -> np.ndarray:
    """2 x 2 counts: ``M[i, j]`` = items where agent A erred (i = 1) or not (0) and B erred (j)."""
    a = np.asarray(errors_a, dtype=bool).ravel()
    b = np.asarray(errors_b, dtype=bool).ravel()
    if a.shape != b.shape:
        raise ValueError(f"errors_a {a.shape} and errors_b {b.shape} differ")
    m = np.zeros((2, 2), dtype=int)
    np.add.at(m, (a.astype(int), b.astype(int)), 1)
    return m


def cohen_kappa(errors_a, errors_b) -> float:
    """Cohen's kappa of two agents' error indicators (Cohen 1960):
    kappa = (p_o - p_e) / (1 - p_e), p_o the observed agreement, p_e the agreement expected from
    the marginals. NaN when undefined (no items, or p_e = 1: both constant and equal)."""
    return kappa_from_joint(joint_errors(errors_a, errors_b))


def kappa_from_joint(m) -> float:
    """Cohen's kappa from a 2 x 2 joint error matrix (:func:`joint_errors`); NaN if undefined."""
    m = np.asarray(m)
    total = m.sum()
    if total == 0:
        return float("nan")
    p_o = (m[0, 0] + m[1, 1]) / total
    pa1, pb1 = m[1].sum() / total, m[:, 1].sum() / total
    p_e = pa1 * pb1 + (1 - pa1) * (1 - pb1)
    if p_e == 1:
        return float("nan")
    return float((p_o - p_e) / (1 - p_e))
