"""The step's metrics, pooled over every problem of a batch from their :class:`ProblemScore`
records: CURE's code and unit-test accuracy, best-of-N, rewards, parse failures, lengths, the
executor's throughput, and the label-free diagnostics. Pure; one line of ``metrics.jsonl`` per
optimiser step holds them."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..metrics import TestCounts, kappa_from_joint
from .scoring import ProblemScore


METRIC_KEYS = (
    "code_acc", "ut_acc", "p01", "p00", "mu", "bon_acc",
    "reward_code_mean", "reward_code_std", "reward_test_mean", "reward_test_std",
    "parse_fail_code", "parse_fail_test", "len_code_mean", "len_test_mean",
    "test_rows_no_signal", "problems", "problems_refused", "exec_cells", "exec_cells_per_s",
    "exec_sandbox_errors", "rows_masked", "known_caught",
    "labelled", "vote_agreement", "agreement", "pseudo_label_acc", "pseudo_label_kappa", "kappa")
# lists of lists and a dict, in metrics.jsonl only
MATRIX_KEYS = ("joint_errors", "cross_bon", "pseudo_label_by_family")


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


def _masks(masked: list, rewards: list) -> list:
    """A problem's per-row mask (all False where it was not recorded)."""
    return masked if len(masked) == len(rewards) else [False] * len(rewards)


def batch_metrics(scores: Sequence[ProblemScore], exec_seconds: float = 0.0) -> dict:
    """Step metrics pooled over the problems of a batch (every key of :data:`METRIC_KEYS`,
    a finite float or None where undefined):

    code_acc: share of all solutions passing every gold test; ut_acc, p01, p00, mu: pooled over
    problems with a correct solution (CURE Sec. 3.1, Theorem 3.1); bon_acc: best-of-N(n, m) with
    the generated tests (CURE's (4, 4) by default), mean over problems with gold tests;
    known_caught: share of the known wrong programs (``known_wrong``, confirmed wrong by a gold
    test) that an accurate generated test fails, over problems with a correct solution;
    problems_refused: problems whose job the executor refused (their rows have no reward);
    exec_sandbox_errors: cells whose verdict the harness lost (``sandbox_error`` after the
    executor's re-run); rows_masked: rows whose reward such a cell could have changed, withheld
    (``scoring.lost_rows``; label-free: every row of the problem), and left out of
    ``test_rows_no_signal``.
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
        "test_rows_no_signal": (sum(r is None and not m for s in scores for r, m in
                                    zip(s.test_rewards, _masks(s.test_masked, s.test_rewards)))
                                / n_test) if n_test else None,
        "problems": len(scores), "problems_refused": sum(s.refused is not None for s in scores),
        "exec_cells": cells,
        "exec_cells_per_s": cells / exec_seconds if cells and exec_seconds > 0 else None,
        "exec_sandbox_errors": sum(s.sandbox_errors for s in scores),
        "rows_masked": sum(s.rows_masked for s in scores),
        "known_caught": (sum(s.known[0] for s in scores) / sum(s.known[1] for s in scores)
                         if sum(s.known[1] for s in scores) else None),
    }
    out.update(_label_metrics(scores))
    metrics = {k: _num(out[k]) for k in METRIC_KEYS}
    metrics.update({k: out.get(k) for k in MATRIX_KEYS})
    return metrics


def _label_metrics(scores: Sequence[ProblemScore]) -> dict:
    """labelled: share of problems my labeller labelled; vote_agreement: mean vote share |C|/n
    of those; agreement: share of solutions my and my peer's labels judge alike; pseudo_label_acc:
    share of my solutions whose pseudo-label (code reward 1) equals the gold verdict;
    pseudo_label_kappa: Cohen's kappa between those pseudo-labels and the gold verdicts (agreement
    beyond what the two base rates give by chance: 0 for a labeller that calls everything right);
    kappa and
    joint_errors: Cohen's kappa and the 2 x 2 counts of my and my peer's gold errors (i-th
    solution against i-th); cross_bon: best-of-N accuracy of agent a's solutions ranked by agent
    b's tests, mean over problems; pseudo_label_by_family: per task family (problems that name
    one, as the task world's do), the 2 x 2 counts behind ``pseudo_label_kappa``, ``M[i][j]``: my
    solutions the pseudo-label calls wrong (i = 1) or right, that gold calls wrong (j = 1) or
    right (so ``M[0][1]``: wrong solutions the label passes; summed over steps, per family). None
    where undefined (gold runs: all None)."""
    lab = [s for s in scores if s.labelled is not None]
    if not lab:
        return {"labelled": None, "vote_agreement": None, "agreement": None,
                "pseudo_label_acc": None, "pseudo_label_kappa": None, "kappa": None,
                "joint_errors": None, "cross_bon": None, "pseudo_label_by_family": None}
    votes = [s.vote_agreement for s in lab if s.vote_agreement is not None]
    agree = np.sum([s.label_agree for s in lab], axis=0)
    hits = np.sum([s.pseudo_hits for s in lab], axis=0)
    joints = [s.joint_err for s in lab if s.joint_err is not None]
    pseudo = [s.pseudo_joint for s in lab if s.pseudo_joint is not None]
    joint = np.sum(joints, axis=0) if joints else None
    cbs = [s.cross_bon for s in lab if s.cross_bon is not None]
    cross = None
    if cbs:
        stack = np.stack(cbs)
        with np.errstate(all="ignore"):
            valid = (~np.isnan(stack)).sum(axis=0)
            mean = np.where(valid > 0, np.nansum(stack, axis=0) / np.maximum(valid, 1), np.nan)
        cross = [[_num(x) for x in row] for row in mean]
    by_family: dict[str, np.ndarray] = {}
    for s in lab:
        if s.family is not None and s.pseudo_joint is not None and s.pseudo_joint.sum():
            by_family[s.family] = by_family.get(s.family, 0) + np.asarray(s.pseudo_joint)
    return {
        "labelled": sum(bool(s.labelled) for s in lab) / len(lab),
        "vote_agreement": float(np.mean(votes)) if votes else None,
        "agreement": agree[0] / agree[1] if agree[1] else None,
        "pseudo_label_acc": hits[0] / hits[1] if hits[1] else None,
        "pseudo_label_kappa": kappa_from_joint(np.sum(pseudo, axis=0)) if pseudo else None,
        "kappa": kappa_from_joint(joint) if joint is not None else None,
        "joint_errors": joint.astype(int).tolist() if joint is not None else None,
        "cross_bon": cross,
        "pseudo_label_by_family": ({f: m.astype(int).tolist() for f, m in sorted(by_family.items())}
                                   if by_family else None),
    }
