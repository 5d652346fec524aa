"""CURE Theorem 3.1, checked by simulation.

Each generated test is accurate with probability p_u; a correct solution passes exactly the
accurate tests; a wrong solution passes an accurate test with probability p01 and an inaccurate one
with p00. With mu = p_u (1 - p01) - (1 - p_u) p00 > 0 the sum rule (most generated tests passed)
ranks a correct solution above a wrong one with probability rising toward 1 as m grows; with
mu < 0 that probability falls.
"""

from __future__ import annotations

import numpy as np
import pytest

from coevo_code.metrics import pooled_test_counts
from coevo_code.ranking import cure_select
from coevo_code.rewards import mu

MS = (1, 4, 16, 64)
TRIALS = 3000


def simulate(rng, m, p_u, p01, p00, n_wrong=1, n_correct=1):
    """One problem's generated-test matrix: correct rows first, then wrong ones."""
    accurate = rng.random(m) < p_u
    correct = np.tile(accurate, (n_correct, 1))
    u = rng.random((n_wrong, m))
    wrong = np.where(accurate, u < p01, u < p00)
    return np.vstack([correct, wrong]), accurate


def p_correct_ranked_above(m, p_u, p01, p00, seed):
    """P(the sum rule ranks the correct solution above the wrong one), ties broken at random
    (as a selector must break them): P(above) + P(tie) / 2."""
    rng = np.random.default_rng(seed)
    wins = 0.0
    for _ in range(TRIALS):
        g, _ = simulate(rng, m, p_u, p01, p00)
        s = g.sum(axis=1)
        wins += (s[0] > s[1]) + 0.5 * (s[0] == s[1])
    return wins / TRIALS


@pytest.mark.parametrize("p_u, p01, p00, rising", [(0.6, 0.2, 0.3, True), (0.3, 0.2, 0.5, False)])
def test_ranking_probability_follows_the_sign_of_mu(p_u, p01, p00, rising):
    assert (mu(p_u, p01, p00) > 0) == rising
    probs = [p_correct_ranked_above(m, p_u, p01, p00, seed=m) for m in MS]
    diffs = np.diff(probs)
    if rising:
        assert (diffs > 0).all(), probs
        assert probs[-1] > 0.99
    else:
        assert (diffs < 0).all(), probs
        assert probs[-1] < 0.2  # ~0.13 at m = 64, on its way to 0
    # at m = 1: it wins when the one test is accurate and the wrong solution fails it, and ties
    # when the wrong solution agrees with it on that test
    above = p_u * (1 - p01)
    tie = p_u * p01 + (1 - p_u) * (1 - p00)
    assert probs[0] == pytest.approx(above + tie / 2, abs=0.03)


def test_sum_rule_selector_uses_the_same_rule():
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(500):
        g, _ = simulate(rng, 64, 0.6, 0.2, 0.3, n_wrong=3)
        hits += cure_select(g) == 0
    assert hits / 500 > 0.97


def test_metrics_recover_the_simulation_parameters():
    rng = np.random.default_rng(11)
    p_u, p01, p00 = 0.6, 0.2, 0.3
    problems = []
    for _ in range(400):
        g, _ = simulate(rng, 16, p_u, p01, p00, n_wrong=4, n_correct=2)
        problems.append((g, np.array([True, True, False, False, False, False])))
    c = pooled_test_counts(problems)
    se = lambda p, k: 4 * np.sqrt(p * (1 - p) / k)  # four standard errors
    assert abs(c.unit_test_accuracy - p_u) < se(p_u, c.tests)
    assert abs(c.p01 - p01) < se(p01, c.wrong_x_accurate)
    assert abs(c.p00 - p00) < se(p00, c.wrong_x_inaccurate)
    assert abs(c.mu - mu(p_u, p01, p00)) < 0.03
