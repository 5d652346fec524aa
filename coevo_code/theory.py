"""Self-reward against cross-reward in the binary model (Co-RL's argument), simulated with the
core's label function.

Each agent X answers problem q correctly with probability p_X(q); every wrong answer is the same
wrong answer (the hardest case for voting: all mistakes agree). At each step each agent samples k
answers per problem; the pseudo-label is the execution majority
(:func:`coevo_code.rewards.execution_majority`, the SRT/TTRL vote) of the agent's own answers
(``self``) or of its partner's (``cross``). An answer equal to the label earns 1, others 0; GRPO
advantages within the group (z-score; no signal when all rewards are equal or the vote ties); one
policy-gradient step on the logit of p (d log pi(a) / d logit = a - p).

In expectation, a self-rewarded p drifts to 1 when it starts above 1/2 and to 0 below: voting makes
a leaning model lean harder. Cross-rewarded, each agent follows its partner's majority, so the pair
goes to 1 when p_A + p_B > 1 (each one's error is corrected where the other is right). The seed
example: A right with 0.9 on half the problems and 0.2 on the other half, B the reverse;
self-reward ends near 50% accuracy, cross-reward near 100% (``tests/test_theory.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rewards import execution_majority


@dataclass
class Trajectory:
    mode: str
    accuracy: np.ndarray   # steps+1 x agents: mean over problems of p
    final_p: np.ndarray    # agents x problems


def _label(answers: np.ndarray):
    """The majority answer of one group (None: a tie), through the core's vote."""
    vote = execution_majority([[int(a)] for a in answers])
    if vote is None:
        return None
    return int(answers[np.argmax(vote.correct)])


def _step(theta: np.ndarray, answers: np.ndarray, labels: list, lr: float) -> np.ndarray:
    p = 1.0 / (1.0 + np.exp(-theta))
    new = theta.copy()
    for q, label in enumerate(labels):
        if label is None:
            continue
        a = answers[q]
        r = (a == label).astype(float)
        sd = r.std()
        if sd == 0:
            continue
        adv = (r - r.mean()) / sd
        new[q] += lr * float(np.mean(adv * (a - p[q])))
    return new


def simulate(p0: np.ndarray, mode: str, k: int = 8, steps: int = 300, lr: float = 0.5,
             seed: int = 0) -> Trajectory:
    """``p0``: agents x problems initial probabilities of a correct answer. ``mode``: ``self``
    (each agent labelled by its own vote) or ``cross`` (agent i by agent i+1's vote, a ring; a
    pair when there are two agents)."""
    if mode not in ("self", "cross"):
        raise ValueError("mode must be self or cross")
    rng = np.random.default_rng(seed)
    p0 = np.clip(np.asarray(p0, dtype=float), 1e-6, 1 - 1e-6)
    theta = np.log(p0 / (1 - p0))
    n_agents = theta.shape[0]
    acc = [(1.0 / (1.0 + np.exp(-theta))).mean(axis=1)]
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-theta))
        answers = (rng.random((n_agents, p.shape[1], k)) < p[..., None]).astype(int)
        votes = [[_label(answers[i, q]) for q in range(p.shape[1])] for i in range(n_agents)]
        theta = np.stack([
            _step(theta[i], answers[i], votes[i if mode == "self" else (i + 1) % n_agents], lr)
            for i in range(n_agents)])
        acc.append((1.0 / (1.0 + np.exp(-theta))).mean(axis=1))
    return Trajectory(mode, np.asarray(acc), 1.0 / (1.0 + np.exp(-theta)))


def seed_example(problems: int = 40) -> np.ndarray:
    """A right with 0.9 on the first half of the problems and 0.2 on the second; B the reverse."""
    half = problems // 2
    a = np.r_[np.full(half, 0.9), np.full(problems - half, 0.2)]
    return np.stack([a, a[::-1]])
