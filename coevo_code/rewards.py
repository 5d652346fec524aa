"""Rewards: pure functions of pass matrices (numpy boolean arrays), as the papers define them.

Conventions: a pass matrix is ``passed[n, t + m]`` (n solutions; t gold tests first, then m
generated ones); ``gold = passed[:, :t]`` and ``generated = passed[:, t:]``. ``correct`` is a
boolean mask over the n solutions (from gold tests, a partner, or an execution majority: the
votes and labels themselves live in :mod:`coevo_code.labels`).

References:
- CURE: Wang et al., "Co-Evolving LLM Coder and Unit Tester via Reinforcement Learning",
  arXiv:2506.03136 (2025), Sec. 3, Eq. 4 and Theorem 3.1; its published ``optimization/reward.py``.
- Co-RL: :func:`pseudo_gold_code_rewards`, CURE's code reward with a labeller's accurate tests as
  the gold ones (the labeller's vote: :func:`coevo_code.labels.execution_majority`).
"""

from __future__ import annotations

import numpy as np

DEFAULT_MIN_LEN = 1000  # CURE optimization_config.min_len_threshold
DEFAULT_MAX_LEN = 8000  # CURE optimization_config.max_len_threshold


def _bool2d(a, name: str) -> np.ndarray:
    a = np.asarray(a, dtype=bool)
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D boolean array (solutions x tests), got shape "
                         f"{a.shape}")
    return a


def _mask(correct, n: int) -> np.ndarray:
    correct = np.asarray(correct, dtype=bool)
    if correct.shape != (n,):
        raise ValueError(f"correct has shape {correct.shape}, expected ({n},)")
    return correct


def cure_code_rewards(gold, all_passed: bool = False) -> np.ndarray:
    """Reward of each solution from the gold tests (CURE Sec. 3.2; ``reward.py``):

        r_i = (1/t) * sum_j gold[i, j]            (default: share of gold tests passed)
        r_i = 1[all_j gold[i, j]]                  (``all_passed=True``)

    With no gold test (t = 0) the reward is undefined: NaN for every solution, which
    :func:`group_normalize` turns into "no signal".
    """
    gold = _bool2d(gold, "gold")
    n, t = gold.shape
    if t == 0:
        return np.full(n, np.nan)
    if all_passed:
        return gold.all(axis=1).astype(float)
    return gold.mean(axis=1)


def correct_from_gold(gold) -> np.ndarray:
    """The correct set C: solutions passing every gold test. No gold test: nobody is known
    correct (all False), so no test reward can be computed."""
    gold = _bool2d(gold, "gold")
    if gold.shape[1] == 0:
        return np.zeros(gold.shape[0], dtype=bool)
    return gold.all(axis=1)


def accurate_tests(generated, correct) -> np.ndarray:
    """A generated test is accurate iff every solution in C passes it (C must be non-empty)."""
    generated = _bool2d(generated, "generated")
    correct = _mask(correct, generated.shape[0])
    if not correct.any():
        raise ValueError("accuracy of a test is undefined without a correct solution")
    return generated[correct].all(axis=0)


def program_mask(program, n: int) -> np.ndarray:
    """``program`` as a boolean mask over n solutions (None: every row is a program)."""
    if program is None:
        return np.ones(n, dtype=bool)
    program = np.asarray(program, dtype=bool)
    if program.shape != (n,):
        raise ValueError(f"program has shape {program.shape}, expected ({n},)")
    return program


def cure_test_rewards(generated, correct, post_stage: bool = False,
                      program=None) -> np.ndarray | None:
    """Reward of each generated test (CURE Eq. 4 divided by |W|; ``reward.py``).

    With C the correct solutions and W the others, test j is accurate iff every solution in C
    passes it; ``sign_j = +1`` if accurate else ``-1``. Then

        W empty:            r_j = sign_j
        accurate test:      r_j = + (1/|W|) sum_{w in W} 1[w fails j]       (post_stage: 1[no w passes j])
        inaccurate test:    r_j = - (1/|W|) sum_{w in W} 1[w passes j]      (post_stage: 1[some w passes j])

    i.e. the per-test share of mu = p_u (1 - p01) - (1 - p_u) p00 (Theorem 3.1): a test earns
    credit for being right *and* for catching wrong solutions, and loses it for being wrong in a
    way wrong solutions agree with. Returns None when C is empty (no signal); an empty array for
    m = 0.

    ``program`` (a boolean mask over the n solutions; None: all True, CURE as published) marks
    the rows that are programs. A row that is not one (nothing parsed, or a text the judge could
    not compile: ``coevo_code.matrix.program_rows``) fails every test whatever the test checks,
    so it is neither correct nor wrong here: W is the wrong *programs*, and p01 and p00 are
    estimated over them. Where every solution outside C is such a row (W empty only because of
    them), there is nothing to catch: an accurate test gets 0, not CURE's +1, and an inaccurate
    one -1, so that a test never earns more beside prose than beside real wrong programs
    (a deviation from CURE's formula, docs/CORE.md "Only real programs are wrong solutions").
    With any mask, no test's reward is higher than with every row counted as a program.
    """
    generated = _bool2d(generated, "generated")
    n = generated.shape[0]
    correct = _mask(correct, n)
    program = program_mask(program, n)
    if not correct.any():
        return None
    accurate = accurate_tests(generated, correct)
    sign = np.where(accurate, 1.0, -1.0)
    wrong = ~correct & program
    if not wrong.any():
        # every solution is correct (CURE: the sign), or the rest are not programs (no credit)
        return sign if correct.all() else np.minimum(sign, 0.0)
    gw = generated[wrong]
    if post_stage:
        scale = np.where(accurate, ~gw.any(axis=0), gw.any(axis=0)).astype(float)
    else:
        scale = np.where(accurate, (~gw).mean(axis=0), gw.mean(axis=0))
    return sign * scale


def mu(p_u: float, p01: float, p00: float) -> float:
    """CURE Theorem 3.1: mu = p_u (1 - p01) - (1 - p_u) p00. With mu > 0 the sum of generated
    tests passed ranks a correct solution above a wrong one with probability -> 1 as m grows."""
    return p_u * (1.0 - p01) - (1.0 - p_u) * p00


# ---- group normalisation and length shaping (GRPO advantages, as CURE computes them) ----------
def group_normalize(rewards, keep_all_ones: bool = False) -> np.ndarray | None:
    """z-score within a group with the *population* std (CURE ``normalize_reward``):

        A_i = (r_i - mean(r)) / std(r)

    None (no signal) when the group is empty, holds a NaN, or has zero variance. With
    ``keep_all_ones`` (CURE's ``enable_efficient``), an all-ones group is returned unchanged so
    that length shaping can still rank its responses by length.
    """
    r = np.asarray(rewards, dtype=float)
    if r.size == 0 or np.isnan(r).any():
        return None
    if keep_all_ones and np.all(r == 1):
        return r.copy()
    std = r.std()
    if std == 0:
        return None
    return (r - r.mean()) / std


def balance_and_standardize(x) -> np.ndarray | None:
    """CURE ``normalize_balance_std``: scale the positive entries so that their mass equals the
    negative mass, then divide by the (population) std. None when either mass is zero."""
    x = np.array(x, dtype=float)
    pos, neg = x > 0, x < 0
    sum_pos, sum_neg = x[pos].sum(), abs(x[neg].sum())
    if sum_pos * sum_neg == 0:
        return None
    x[pos] *= sum_neg / sum_pos
    return x / x.std()


def cure_length_shaping(normalized, lengths, min_len: int = DEFAULT_MIN_LEN,
                        max_len: int = DEFAULT_MAX_LEN) -> np.ndarray | None:
    """CURE's length regularisation for long chain-of-thought models (``length_regularize``,
    applied to the output of :func:`group_normalize` with ``keep_all_ones=True``), exactly:

    1. positive = responses above the group mean (sign +1), negative = below (sign -1); responses
       exactly at the mean are neither and end at 0;
    2. target = median length of the positive responses; if they all have that length, return
       ``balance_and_standardize(sign)``;
    3. target clipped to [min_len, max_len];
    4. a positive response gets ``target - length``; every negative response gets the minimum of
       the array at that point, *including the zeros still standing for the negative and
       at-mean entries* (as the reference code does; so it is <= 0);
    5. ``balance_and_standardize`` (positive and negative mass balanced; None if one is zero).
    """
    r = np.asarray(normalized, dtype=float)
    lengths = np.asarray(lengths, dtype=float)
    if lengths.shape != r.shape:
        raise ValueError(f"lengths has shape {lengths.shape}, rewards {r.shape}")
    sign = np.sign(r)
    pos = np.where(sign == 1)[0]
    neg = np.where(sign == -1)[0]
    if pos.size == 0:
        return None
    pos_len = lengths[pos]
    target = float(np.median(pos_len))
    if np.sum((pos_len - target) ** 2) == 0:
        return balance_and_standardize(sign)
    target = max(min(target, max_len), min_len)
    shaped = np.zeros(r.shape, dtype=float)
    shaped[pos] = target - pos_len
    shaped[neg] = shaped.min()
    return balance_and_standardize(shaped)


# ---- label-free code reward (the labels themselves: coevo_code.labels) --------------------------
def pseudo_gold_code_rewards(passed, accurate, all_passed: bool = False):
    """CURE's code reward with a labeller's accurate tests as the gold ones: the share of the
    ``accurate`` columns of ``passed`` (solutions x the labeller's tests) each solution passes
    (``all_passed``: 1.0 if it passes every one). None when no test is accurate."""
    p = _bool2d(passed, "passed")
    accurate = np.asarray(accurate, dtype=bool)
    if p.shape[1] != accurate.shape[0]:
        raise ValueError(f"solutions x labeller tests has shape {p.shape}, but "
                         f"{accurate.shape[0]} tests are marked accurate or not")
    if not accurate.any():
        return None
    sub = p[:, accurate]
    return sub.all(axis=1).astype(float) if all_passed else sub.mean(axis=1)
