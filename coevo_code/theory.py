"""Self-reward against cross-reward in the binary model (Co-RL's argument), simulated with the
trainer's own label functions (:mod:`coevo_code.labels`).

Each agent X answers problem q correctly with probability p_X(q); every wrong answer is the same
wrong answer (the hardest case for voting: all mistakes agree). At each step each agent samples k
solutions and k tests per problem; a solution's output is its answer, a test expects its own
sampled answer, so a solution passes a test when the two answers agree. These arrays go through
exactly what the trainer runs on a real pass matrix: every agent's vote
(:func:`coevo_code.labels.block_labels`, the SRT/TTRL execution majority) and the rewards of
:func:`coevo_code.labels.agent_rewards` under ``self_majority`` (``self``) or ``partner`` / ``ring``
(``cross``: agent i labelled by agent i - 1, the other agent of a pair). GRPO advantages within the
group of code rewards (z-score; no signal when they are all equal or the problem is unlabelled);
one policy-gradient step on the logit of p (d log pi(a) / d logit = a - p).

In expectation, a self-rewarded p drifts to 1 when it starts above 1/2 and to 0 below: voting makes
a leaning model lean harder. Cross-rewarded, each agent follows its partner's majority, so the pair
goes to 1 when p_A + p_B > 1 (each one's error is corrected where the other is right). The seed
example: A right with 0.9 on half the problems and 0.2 on the other half, B the reverse;
self-reward ends near 50% accuracy, cross-reward near 100% (``tests/test_theory.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .labels import agent_rewards, block_labels


@dataclass
class Trajectory:
    mode: str
    accuracy: np.ndarray   # steps+1 x agents: mean over problems of p
    final_p: np.ndarray    # agents x problems


def binary_problem(solutions: np.ndarray, tests: np.ndarray):
    """The joint arrays of one problem in the binary model: ``solutions``/``tests`` are agents x k
    answers (1 correct, 0 the wrong answer). Returns (passed, outputs, errored, row_owner,
    col_owner) in :mod:`coevo_code.labels`' layout."""
    n, k = solutions.shape
    a, b = solutions.ravel(), tests.ravel()
    passed = a[:, None] == b[None, :]
    outputs = [[int(x)] * (n * k) for x in a]
    owner = np.repeat(np.arange(n), k)
    return passed, outputs, np.zeros(passed.shape, dtype=bool), owner, owner


def code_rewards(solutions: np.ndarray, tests: np.ndarray, source: str) -> list:
    """Each agent's code rewards on one problem (None: no label), by the trainer's functions."""
    passed, outputs, errored, rows, cols = binary_problem(solutions, tests)
    n = solutions.shape[0]
    labels = block_labels(passed, outputs, errored, rows, cols, n)
    return [agent_rewards(source, i, n, passed, labels, rows, cols).code for i in range(n)]


def _step(theta: float, answers: np.ndarray, rewards, lr: float) -> float:
    if rewards is None:
        return theta
    sd = rewards.std()
    if sd == 0:
        return theta
    p = 1.0 / (1.0 + np.exp(-theta))
    adv = (rewards - rewards.mean()) / sd
    return theta + lr * float(np.mean(adv * (answers - p)))


def simulate(p0: np.ndarray, mode: str, k: int = 8, steps: int = 300, lr: float = 0.5,
             seed: int = 0) -> Trajectory:
    """``p0``: agents x problems initial probabilities of a correct answer. ``mode``: ``self``
    (each agent labelled by its own vote) or ``cross`` (agent i by agent i - 1's: a ring; a pair
    when there are two agents)."""
    if mode not in ("self", "cross"):
        raise ValueError("mode must be self or cross")
    rng = np.random.default_rng(seed)
    p0 = np.clip(np.asarray(p0, dtype=float), 1e-6, 1 - 1e-6)
    theta = np.log(p0 / (1 - p0))
    n_agents, n_problems = theta.shape
    source = "self_majority" if mode == "self" else ("partner" if n_agents == 2 else "ring")
    acc = [(1.0 / (1.0 + np.exp(-theta))).mean(axis=1)]
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-theta))
        sols = (rng.random((n_agents, n_problems, k)) < p[..., None]).astype(int)
        tests = (rng.random((n_agents, n_problems, k)) < p[..., None]).astype(int)
        new = theta.copy()
        for q in range(n_problems):
            rewards = code_rewards(sols[:, q], tests[:, q], source)
            for i in range(n_agents):
                new[i, q] = _step(theta[i, q], sols[i, q], rewards[i], lr)
        theta = new
        acc.append((1.0 / (1.0 + np.exp(-theta))).mean(axis=1))
    return Trajectory(mode, np.asarray(acc), 1.0 / (1.0 + np.exp(-theta)))


def seed_example(problems: int = 40) -> np.ndarray:
    """A right with 0.9 on the first half of the problems and 0.2 on the second; B the reverse."""
    half = problems // 2
    a = np.r_[np.full(half, 0.9), np.full(problems - half, 0.2)]
    return np.stack([a, a[::-1]])
