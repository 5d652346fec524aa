"""Scoring one generation batch: pure functions from completions and pass matrices to rewards and
step metrics. No torch, no executor: the reward callable (``reward.py``) runs the job this module
builds and hands the matrix back.

Per problem (CURE, arXiv:2506.03136, Sec. 3; the core's ``rewards`` module):

- the k code completions are parsed into programs, the k test completions into test cases; a
  completion that parses to nothing is not executed: its row (program) or column (test) is all
  False;
- one executor job runs the parsed programs against the first ``max_gold_tests`` gold tests, then
  the parsed generated tests (gold columns first, as the core's contract says);
- code rewards: share of gold tests passed (``cure_code_rewards``; ``all_passed`` variant);
- the correct set C: solutions passing every gold test; test rewards: ``cure_test_rewards``
  (Eq. 4 / |W|, the per-test share of mu);
- decided edge cases: a completion that parses to nothing gets the lowest reward of its role
  (code 0, test -1); a problem with no gold test gives its code rows no reward (None); a problem
  whose gold tests no solution passes gives its test rows no reward (None): the trainer drops those
  rows from the loss, as CURE drops them from its batch;
- optional CURE length shaping (long chain-of-thought): the raw rewards of each (problem, role)
  group are group-normalised with CURE's ``normalize_reward`` (all-ones groups kept) and
  ``cure_length_shaping`` is applied; the values returned are then CURE's advantages, which TRL
  passes through unchanged with ``scale_rewards="none"`` (they have mean zero).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..metrics import TestCounts, best_of_n_accuracy, test_counts
from ..rewards import (correct_from_gold, cure_code_rewards, cure_length_shaping,
                       cure_test_rewards, group_normalize)
from ..matrix import ProblemBatch, full_matrix
from ..matrix import prepare as prepare_job
from ..tasks.model import Task

CODE, TEST = "code", "test"
LOWEST = {CODE: 0.0, TEST: -1.0}  # the reward of a completion that parses to nothing


@dataclass
class RewardOptions:
    """The co-evolution fields of the config that scoring reads."""

    max_gold_tests: int = 8
    post_stage: bool = False
    code_all_passed: bool = False
    length_shaping: bool = False
    min_len: int = 1000
    max_len: int = 8000
    bon_n: int = 4
    bon_m: int = 4
    label_source: str = "gold"


@dataclass
class ProblemScore:
    """Rewards and the counts behind the step metrics, for one problem."""

    task_id: str
    code_rewards: list       # float | None per code completion, in order
    test_rewards: list       # float | None per test completion
    n_solutions: int
    n_correct: int | None    # None: no gold test
    counts: TestCounts
    bon: float               # best-of-N(bon_n, bon_m) correctness; NaN if undefined
    code_parse_failures: int
    test_parse_failures: int
    code_lengths: list[int]
    test_lengths: list[int]
    cells: int


def prepare(task: Task, code_texts: Sequence[str], test_texts: Sequence[str],
            options: RewardOptions, code_lengths=(), test_lengths=()) -> ProblemBatch:
    """Parse the completions and build the executor job (see :func:`coevo_code.matrix.prepare`)."""
    if options.label_source != "gold":
        raise ValueError(f"label_source {options.label_source!r} is not available yet; use 'gold'")
    return prepare_job(task, code_texts, test_texts, options.max_gold_tests, code_lengths,
                       test_lengths)


def _shape(values: list, lengths: list[int], options: RewardOptions) -> list:
    """CURE length shaping of one group's raw rewards (None stays None)."""
    if not options.length_shaping or any(v is None for v in values):
        return values
    normalized = group_normalize(values, keep_all_ones=True)
    if normalized is None:
        return [0.0] * len(values)
    shaped = cure_length_shaping(normalized, lengths, options.min_len, options.max_len)
    if shaped is None:
        return [0.0] * len(values)
    return [float(x) for x in shaped]


def score(batch: ProblemBatch, result: dict | None, options: RewardOptions) -> ProblemScore:
    """Rewards and metric counts of one problem from its executor result."""
    full = full_matrix(batch, result)
    t = batch.n_gold
    gold, generated = full[:, :t], full[:, t:]
    code_ok = np.array([p.ok for p in batch.programs], dtype=bool)
    test_ok = np.array([x.ok for x in batch.tests], dtype=bool)

    if t == 0:
        code_rewards: list = [None] * len(batch.programs)
        correct = np.zeros(len(batch.programs), dtype=bool)
        n_correct = None
    else:
        raw = cure_code_rewards(gold, all_passed=options.code_all_passed)
        code_rewards = [float(r) if ok else LOWEST[CODE] for r, ok in zip(raw, code_ok)]
        correct = correct_from_gold(gold)
        n_correct = int(correct.sum())

    tr = cure_test_rewards(generated, correct, post_stage=options.post_stage) if len(test_ok) \
        else np.zeros(0)
    if tr is None:
        test_rewards: list = [None] * len(batch.tests)
    else:
        test_rewards = [float(r) if ok else LOWEST[TEST] for r, ok in zip(tr, test_ok)]

    code_rewards = _shape(code_rewards, batch.code_lengths, options)
    test_rewards = _shape(test_rewards, batch.test_lengths, options)
    bon = (best_of_n_accuracy(correct, generated, options.bon_n, options.bon_m)
           if n_correct is not None and len(batch.programs) else float("nan"))
    cells = 0 if batch.job is None else len(batch.job["programs"]) * len(batch.job["tests"])
    return ProblemScore(
        task_id=batch.task.id, code_rewards=code_rewards, test_rewards=test_rewards,
        n_solutions=len(batch.programs), n_correct=n_correct,
        counts=test_counts(generated, correct), bon=bon,
        code_parse_failures=int((~code_ok).sum()), test_parse_failures=int((~test_ok).sum()),
        code_lengths=batch.code_lengths, test_lengths=batch.test_lengths, cells=cells)


# ---- step metrics -------------------------------------------------------------------------------
METRIC_KEYS = (
    "code_acc", "ut_acc", "p01", "p00", "mu", "bon_acc",
    "reward_code_mean", "reward_code_std", "reward_test_mean", "reward_test_std",
    "parse_fail_code", "parse_fail_test", "len_code_mean", "len_test_mean",
    "test_rows_no_signal", "problems", "exec_cells", "exec_cells_per_s")


def _mean_std(values) -> tuple[float | None, float | None]:
    v = [x for x in values if x is not None]
    if not v:
        return None, None
    a = np.asarray(v, dtype=float)
    return float(a.mean()), float(a.std())


def _num(x) -> float | None:
    """A finite float, or None (JSON null) where the metric is undefined."""
    if x is None or isinstance(x, int):
        return x
    x = float(x)
    return x if math.isfinite(x) else None


def batch_metrics(scores: Sequence[ProblemScore], exec_seconds: float = 0.0) -> dict:
    """Step metrics pooled over the problems of a batch (every key of :data:`METRIC_KEYS`,
    a finite float or None where undefined):

    code_acc: share of all solutions passing every gold test; ut_acc, p01, p00, mu: pooled over
    problems with a correct solution (CURE Sec. 3.1, Theorem 3.1); bon_acc: best-of-N(n, m) with
    the generated tests (CURE's (4, 4) by default), mean over problems with gold tests.
    """
    counts = TestCounts()
    for s in scores:
        counts = counts + s.counts
    labelled = [s for s in scores if s.n_correct is not None]
    solutions = sum(s.n_solutions for s in labelled)
    code_acc = sum(s.n_correct for s in labelled) / solutions if solutions else None
    bons = [s.bon for s in labelled if not math.isnan(s.bon)]
    codes = [r for s in scores for r in s.code_rewards]
    tests = [r for s in scores for r in s.test_rewards]
    cm, cs = _mean_std(codes)
    tm, ts = _mean_std(tests)
    n_code = sum(len(s.code_rewards) for s in scores)
    n_test = sum(len(s.test_rewards) for s in scores)
    code_len = [x for s in scores for x in s.code_lengths]
    test_len = [x for s in scores for x in s.test_lengths]
    cells = sum(s.cells for s in scores)
    out = {
        "code_acc": code_acc, "ut_acc": counts.unit_test_accuracy, "p01": counts.p01,
        "p00": counts.p00, "mu": counts.mu, "bon_acc": float(np.mean(bons)) if bons else None,
        "reward_code_mean": cm, "reward_code_std": cs,
        "reward_test_mean": tm, "reward_test_std": ts,
        "parse_fail_code": sum(s.code_parse_failures for s in scores) / n_code if n_code else None,
        "parse_fail_test": sum(s.test_parse_failures for s in scores) / n_test if n_test else None,
        "len_code_mean": float(np.mean(code_len)) if code_len else None,
        "len_test_mean": float(np.mean(test_len)) if test_len else None,
        "test_rows_no_signal": (sum(r is None for r in tests) / n_test) if n_test else None,
        "problems": len(scores), "exec_cells": cells,
        "exec_cells_per_s": cells / exec_seconds if cells and exec_seconds > 0 else None,
    }
    return {k: _num(out[k]) for k in METRIC_KEYS}
