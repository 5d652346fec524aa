"""Metrics and best-of-N selectors on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coevo_code import metrics as M
from coevo_code.ranking import codet_select, cure_select, mbr_exec_select
from test_rewards import C, G


def test_code_accuracy():
    assert M.code_accuracy([[1, 1], [1, 0], [0, 0]]) == pytest.approx(1 / 3)
    assert math.isnan(M.code_accuracy(np.zeros((2, 0), bool)))
    assert math.isnan(M.code_accuracy(np.zeros((0, 2), bool)))


def test_test_metrics_hand_computed():
    c = M.test_counts(G, C)
    assert (c.tests, c.accurate) == (4, 2)
    assert c.unit_test_accuracy == 0.5
    assert c.p01 == 0.5    # wrong rows pass accurate tests 0, 3: 1 + 1 of 4 pairs
    assert c.p00 == 0.75   # and inaccurate tests 1, 2: 2 + 1 of 4 pairs
    assert math.isclose(c.mu, 0.5 * 0.5 - 0.5 * 0.75)
    assert M.unit_test_accuracy(G, C) == 0.5 and M.p01(G, C) == 0.5 and M.p00(G, C) == 0.75


def test_test_metrics_edge_cases():
    none = M.test_counts(G, np.zeros(4, bool))
    assert none.tests == 0 and math.isnan(none.unit_test_accuracy) and math.isnan(none.mu)
    empty = M.test_counts(np.zeros((0, 3), bool), np.zeros(0, bool))  # no solutions
    assert empty.tests == 0 and math.isnan(empty.p01)
    assert math.isnan(M.best_of_n_accuracy(np.zeros(0, bool), np.zeros((0, 2), bool), 4, 2))
    allc = M.test_counts(G[:2], np.ones(2, bool))  # no wrong solution: p01, p00 undefined
    assert allc.unit_test_accuracy == 0.5 and math.isnan(allc.p01) and math.isnan(allc.p00)


def test_pooled_counts_weigh_pairs_not_problems():
    one = M.test_counts(G, C)
    pooled = M.pooled_test_counts([(G, C), (G[:, :1], C)])
    assert pooled.tests == 5 and pooled.accurate == 3
    assert pooled.p01 == (one.wrong_pass_accurate + 1) / (one.wrong_x_accurate + 2)


def test_pass_at_k():
    assert M.pass_at_k(5, 0, 1) == 0.0 and M.pass_at_k(5, 5, 3) == 1.0
    assert M.pass_at_k(5, 2, 1) == pytest.approx(0.4)
    for n, c, k in [(10, 3, 2), (20, 7, 5), (200, 13, 100)]:
        exact = 1 - math.comb(n - c, k) / math.comb(n, k)
        assert M.pass_at_k(n, c, k) == pytest.approx(exact)
    with pytest.raises(ValueError):
        M.pass_at_k(3, 4, 1)


def test_best_of_n():
    correct = np.array([False, True, False])
    gen = np.array([[1, 0, 0], [1, 1, 0], [1, 1, 1]], bool)
    assert M.best_of_n_accuracy(correct, gen, 3, 3) == 0.0   # picks row 2 (3 tests)
    assert M.best_of_n_accuracy(correct, gen, 2, 3) == 1.0   # rows 0-1 only: row 1
    assert M.best_of_n_accuracy(correct, gen, 3, 0) == 0.0   # no test: first solution


def test_verifier_errors_and_kappa():
    assert M.verifier_errors([1, 1, 0, 0], [1, 0, 1, 0]) == (0.5, 0.5)
    fa, fr = M.verifier_errors([1], [1])
    assert math.isnan(fa) and fr == 0.0
    a, b = [1, 1, 0, 0], [1, 0, 0, 0]
    assert M.joint_errors(a, b).tolist() == [[2, 0], [1, 1]]
    assert M.cohen_kappa(a, b) == pytest.approx(0.5)
    assert M.cohen_kappa(a, a) == pytest.approx(1.0)
    assert math.isnan(M.cohen_kappa([0, 0], [0, 0])) and math.isnan(M.cohen_kappa([], []))
    assert M.cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)


def test_selectors():
    gen = np.array([[1, 1, 0], [1, 1, 0], [1, 1, 1], [0, 0, 0]], bool)
    assert cure_select(gen) == 2
    assert cure_select(np.array([[1, 0], [0, 1]], bool)) == 0  # tie: lowest index
    assert codet_select(gen) == 0                          # 2 tests x 2 solutions = 4 > 3
    assert codet_select(gen, sqrt_solutions=True) == 2     # 2 x sqrt 2 = 2.83 < 3
    assert mbr_exec_select([["1"], ["2"], ["1"], ["3"]]) == 0
    assert mbr_exec_select([["1"], ["2"]]) == 0
    assert mbr_exec_select([["1"], ["e"], ["e"]], errored=[[0], [1], [1]]) == 1
    with pytest.raises(ValueError):
        cure_select(np.zeros((0, 3), bool))


def test_pooled_code_accuracy_and_best_of_n():
    golds = [np.array([[1, 1], [0, 1]], bool), np.array([[1], [1], [0]], bool),
             np.zeros((2, 0), bool)]
    assert M.pooled_code_accuracy(golds) == pytest.approx(3 / 5)  # solutions, not problems
    correct = np.array([False, True, False])
    gen = np.array([[1, 0, 0], [1, 1, 0], [1, 1, 1]], bool)
    problems = [(correct, gen), (correct[[1, 0, 2]], gen[[1, 0, 2]]), (np.zeros(0, bool), gen[:0])]
    assert M.pooled_best_of_n(problems, 2, 3) == pytest.approx(1.0)
    assert M.pooled_best_of_n(problems, 3, 3) == pytest.approx(0.0)
