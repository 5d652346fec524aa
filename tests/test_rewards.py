"""Rewards on hand-computed matrices, edge cases included."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coevo_code import labels as L
from coevo_code import rewards as R
from coevo_code.metrics import mu_estimate

# 2 correct solutions (rows 0, 1) and 2 wrong ones (rows 2, 3) x 4 generated tests.
G = np.array([[1, 1, 0, 1],
              [1, 0, 0, 1],
              [0, 1, 1, 1],
              [1, 1, 0, 0]], dtype=bool)
C = np.array([True, True, False, False])


def test_code_rewards():
    gold = np.array([[1, 1, 0], [0, 0, 0], [1, 1, 1]], dtype=bool)
    assert np.allclose(R.cure_code_rewards(gold), [2 / 3, 0, 1])
    assert np.array_equal(R.cure_code_rewards(gold, all_passed=True), [0, 0, 1])
    assert np.isnan(R.cure_code_rewards(np.zeros((3, 0), bool))).all()
    assert R.cure_code_rewards(np.zeros((0, 2), bool)).shape == (0,)
    assert np.array_equal(R.correct_from_gold(gold), [False, False, True])
    assert not R.correct_from_gold(np.zeros((2, 0), bool)).any()


def test_test_rewards_hand_computed():
    # accurate: tests 0 and 3 (both correct rows pass); W = rows 2, 3
    # test 0: W fails 1/2 -> +0.5; test 1: W passes 2/2 -> -1; test 2: 1/2 -> -0.5; test 3: +0.5
    assert np.allclose(R.cure_test_rewards(G, C), [0.5, -1.0, -0.5, 0.5])
    assert np.allclose(R.cure_test_rewards(G, C, post_stage=True), [0.0, -1.0, -1.0, 0.0])
    # the mean test reward is the estimated mu (Theorem 3.1 read per test)
    assert math.isclose(R.cure_test_rewards(G, C).mean(), mu_estimate(G, C))


def test_test_rewards_edge_cases():
    assert R.cure_test_rewards(G, np.zeros(4, bool)) is None  # no correct solution: no signal
    # W empty: the sign alone (rows 0-1 pass tests 0 and 3 together)
    assert np.array_equal(R.cure_test_rewards(G[:2], np.ones(2, bool)), [1, -1, -1, 1])
    assert np.array_equal(R.cure_test_rewards(G, np.ones(4, bool)), [-1, -1, -1, -1])
    assert R.cure_test_rewards(np.zeros((4, 0), bool), C).shape == (0,)
    # empty rows: no solution at all gives no signal
    assert R.cure_test_rewards(np.zeros((0, 3), bool), np.zeros(0, bool)) is None
    assert R.group_normalize(R.cure_code_rewards(np.zeros((0, 2), bool))) is None
    one = R.cure_test_rewards(G[:, :1], C)
    assert np.allclose(one, [0.5])
    with pytest.raises(ValueError, match="correct has shape"):
        R.cure_test_rewards(G, [True, False])
    with pytest.raises(ValueError, match="2-D"):
        R.cure_test_rewards([1, 0], [True, False])


def test_mu():
    assert math.isclose(R.mu(0.6, 0.2, 0.3), 0.36)
    assert math.isclose(R.mu(0.3, 0.2, 0.5), -0.11)


def test_group_normalize():
    assert np.allclose(R.group_normalize([1, 0, 0, 1]), [1, -1, -1, 1])
    assert R.group_normalize([0.5, 0.5]) is None
    assert R.group_normalize([]) is None
    assert R.group_normalize([1, float("nan")]) is None
    assert np.array_equal(R.group_normalize([1, 1, 1], keep_all_ones=True), [1, 1, 1])
    assert R.group_normalize([1, 1, 1]) is None
    assert R.group_normalize([0, 0], keep_all_ones=True) is None
    x = R.group_normalize([3.0, 1.0, 2.0])
    assert math.isclose(x.mean(), 0, abs_tol=1e-12) and math.isclose(x.std(), 1)


def test_balance_and_standardize():
    out = R.balance_and_standardize([1, 1, -1])
    assert np.allclose(out, np.array([0.5, 0.5, -1.0]) / np.std([0.5, 0.5, -1.0]))
    assert R.balance_and_standardize([1, 2]) is None
    assert R.balance_and_standardize([0, -1]) is None


def test_length_shaping_hand_computed():
    # positives: lengths 100, 300 -> target = median 200 -> +100, -100; negatives get the
    # minimum (-100); balance: positive mass 100 -> 300; divide by std sqrt(30000)
    out = R.cure_length_shaping([1, 1, -1, -1], [100, 300, 50, 60], min_len=0, max_len=10 ** 6)
    assert np.allclose(out, np.array([300, -100, -100, -100]) / math.sqrt(30000))


def test_length_shaping_clips_target_and_keeps_reference_quirk():
    # target 200 clipped up to min_len 1000: positives get +900, +700; negatives get the min of
    # [900, 700, 0, 0] = 0, so there is no negative mass and no signal (as CURE's code does)
    assert R.cure_length_shaping([1, 1, -1, -1], [100, 300, 50, 60]) is None
    # clipped down to max_len: target 8000 for positives of 9000 and 20000 (median 14500)
    out = R.cure_length_shaping([1, 1, -1], [9000, 20000, 10], min_len=1000, max_len=8000)
    raw = np.array([-1000.0, -12000.0, -12000.0])  # no positive mass at all
    assert out is None and (raw > 0).sum() == 0


def test_length_shaping_equal_positive_lengths_and_all_ones():
    out = R.cure_length_shaping([1, 1, -1], [5, 5, 9])
    assert np.allclose(out, np.array([0.5, 0.5, -1]) / np.std([0.5, 0.5, -1]))
    kept = R.group_normalize([1, 1, 1], keep_all_ones=True)
    out = R.cure_length_shaping(kept, [100, 200, 300], min_len=0)
    assert np.allclose(out, np.array([100, 0, -100]) / np.std([100, 0, -100]))
    assert R.cure_length_shaping([-1, -1], [1, 2]) is None  # no positive response
    with pytest.raises(ValueError, match="lengths"):
        R.cure_length_shaping([1, -1], [1, 2, 3])


def test_execution_majority():
    outs = [["1", "2"], ["1", "2"], ["1", "3"], ["x", "x"]]
    err = [[0, 0], [0, 0], [0, 0], [1, 1]]
    lab = L.execution_majority(outs, err)
    assert np.array_equal(lab.correct, [True, True, False, False])
    assert lab.agreement == 0.5 and lab.cluster[3] == -1
    assert L.execution_majority(outs, err, threshold=0.6) is None
    assert L.execution_majority([["1"], ["2"]]) is None  # tie for largest
    assert L.execution_majority([[], []]) is None        # no generated input
    assert L.execution_majority([["a"], ["b"]], [[1], [1]]) is None  # nobody ran
    # a partial error is part of the output vector
    lab = L.execution_majority([["1", "e"], ["1", "e"], ["1", "2"]], [[0, 1], [0, 1], [0, 0]])
    assert np.array_equal(lab.correct, [True, True, False])
    with pytest.raises(ValueError, match="every input"):
        L.execution_majority([["1"], ["1", "2"]])


def test_partner_rewards():
    # partner: 3 solutions x 2 of its own tests; its C = rows 0, 1 (majority)
    partner_own = np.array([[1, 0], [1, 0], [0, 1]], bool)  # test 0 accurate, test 1 not
    partner_c = np.array([True, True, False])
    mine_vs_partner = np.array([[1, 1], [0, 1]], bool)      # my 2 solutions on partner tests
    partner_vs_mine = np.array([[1, 1, 0], [1, 0, 0], [0, 1, 1]], bool)  # partner sols x my tests
    # the joint matrix: me (agent 0: 2 solutions, 3 tests), then the partner (agent 1)
    passed = np.block([[np.zeros((2, 3), bool), mine_vs_partner],
                       [partner_vs_mine, partner_own]])
    rows, cols = np.repeat([0, 1], [2, 3]), np.repeat([0, 1], [3, 2])
    label = L.PseudoLabel(partner_c, R.accurate_tests(partner_own, partner_c), 2 / 3)
    r = L.agent_rewards("partner", 0, 2, passed, [None, label], rows, cols)
    code, tests = r.code, r.test
    assert np.array_equal(code, [1.0, 0.0])  # scored on the partner's accurate test 0 only
    assert np.allclose(tests, R.cure_test_rewards(partner_vs_mine, partner_c))
    assert np.allclose(tests, [1.0, -1.0, -1.0])
    # no partner C (the partner's vote left the problem unlabelled): no signal for either role
    none = L.agent_rewards("partner", 0, 2, passed, [None, None], rows, cols)
    assert none.code is None and none.test is None


# ---- only real programs are wrong solutions (docs/CORE.md) ------------------------------------
# row 0 correct; row 1 a wrong program; rows 2, 3 not programs (nothing parsed: they pass nothing)
NP_G = np.array([[1, 1, 0],
                 [0, 1, 0],
                 [0, 0, 0],
                 [0, 0, 0]], dtype=bool)
NP_C = np.array([True, False, False, False])
NP_P = np.array([True, True, False, False])


def test_rows_that_are_not_programs_give_no_credit_to_the_tests_that_fail_them():
    # CURE as published: W = rows 1-3; test 0 catches all three, test 1 only the two non-programs
    # (a test the wrong program passes), test 2 fails the correct solution and no one passes it
    assert np.allclose(R.cure_test_rewards(NP_G, NP_C), [1.0, 2 / 3, 0.0])
    # W = the wrong programs (row 1): test 1 caught nothing real, and earns nothing
    assert np.allclose(R.cure_test_rewards(NP_G, NP_C, program=NP_P), [1.0, 0.0, 0.0])
    assert np.allclose(R.cure_test_rewards(NP_G, NP_C, post_stage=True, program=NP_P),
                       [1.0, 0.0, 0.0])
    # the counts behind p01 / p00 / mu leave them out too, and the mean is still the mu estimate
    from coevo_code.metrics import test_counts
    c = test_counts(NP_G, NP_C, NP_P)
    assert (c.wrong_x_accurate, c.wrong_pass_accurate) == (2, 1)
    assert math.isclose(R.cure_test_rewards(NP_G, NP_C, program=NP_P).mean(), c.mu)
    assert test_counts(NP_G, NP_C).wrong_x_accurate == 6


def test_not_programs_edge_cases_decided():
    correct_and_prose = NP_G[[0, 2, 3]]
    c, p = np.array([True, False, False]), np.array([True, False, False])
    # every solution outside C is not a program: nothing to catch. An accurate test gets 0 (CURE:
    # +1 for "catching" the prose), an inaccurate one -1 (CURE: 0)
    assert np.array_equal(R.cure_test_rewards(correct_and_prose, c), [1.0, 1.0, 0.0])
    assert np.array_equal(R.cure_test_rewards(correct_and_prose, c, program=p), [0.0, 0.0, -1.0])
    assert np.array_equal(R.cure_test_rewards(correct_and_prose, c, True, p), [0.0, 0.0, -1.0])
    # every solution correct (no row left out): CURE's sign, mask or not
    assert np.array_equal(R.cure_test_rewards(NP_G[:1], [True], program=[True]), [1, 1, -1])
    # no correct solution, or every row not a program: no signal, as before
    assert R.cure_test_rewards(NP_G, np.zeros(4, bool), program=NP_P) is None
    assert R.cure_test_rewards(NP_G[2:], np.zeros(2, bool), program=[False, False]) is None
    assert R.cure_test_rewards(np.zeros((2, 0), bool), [True, False], program=[True, False]
                               ).shape == (0,)
    with pytest.raises(ValueError, match="program has shape"):
        R.cure_test_rewards(NP_G, NP_C, program=[True, False])


@pytest.mark.parametrize("post_stage", [False, True])
def test_leaving_non_programs_out_never_raises_a_test_reward(post_stage):
    """The mask only takes credit away: over random matrices, every test earns at most what it
    earns with the rows that pass nothing counted as wrong programs (CURE's formula)."""
    rng = np.random.default_rng(0)
    seen_lower = 0
    for _ in range(2000):
        n, m = rng.integers(1, 7), rng.integers(1, 6)
        g = rng.random((n, m)) < 0.6
        program = rng.random(n) < 0.6
        g[~program] = False  # a row that is not a program passes nothing
        correct = rng.random(n) < 0.4
        correct &= program  # a correct solution passed every gold test: a program
        plain = R.cure_test_rewards(g, correct, post_stage)
        masked = R.cure_test_rewards(g, correct, post_stage, program)
        if plain is None:
            assert masked is None
            continue
        assert (masked <= plain + 1e-12).all(), (g, correct, program)
        seen_lower += bool((masked < plain - 1e-12).any())
    assert seen_lower > 100
