"""Label-free labels for code: who labels whom, the labeller's vote, and the rewards it gives.

Pure functions on numpy arrays; the trainer (``training/joint.py``), the theory simulation
(``theory.py``) and the tests call the same ones.

Sources (``label_source``; one :class:`LabelSource` record each, in :data:`SOURCES`):

- ``gold``: the gold tests (CURE); nothing here.
- ``partner`` (Co-RL, two agents of different families): agent i is labelled by agent 1 - i.
- ``ring`` (Co-RL's ring, n >= 2 agents): agent i is labelled by its predecessor (i - 1) mod n.
- ``self_majority`` (SRT / TTRL majority vote): each agent labels itself.
- ``frozen`` (SRT's stabiliser): a fixed labeller whose completions were sampled once and stored.

The labeller's pseudo-label of a problem (:func:`vote`): its solutions are clustered by their
outputs on the inputs of *its own* tests (:func:`execution_majority`, the SRT/TTRL vote, MBR-exec
clustering by :func:`cluster_by_outputs`); the largest cluster is the pseudo-correct set C,
provided its share ``|C| / n`` reaches ``threshold`` (else the problem is *unlabelled*). The
labeller's *accurate* tests are those every solution of C passes ("the partner's tests, filtered
by the partner's own agreement").

Rewards of agent i labelled by j (:func:`agent_rewards`):

- code, ``partner``/``ring``/``frozen``, judged by ``tests`` (``label_judge``, the default): the
  share of j's accurate tests my solution passes (the pseudo-gold tests; ``all_passed``: 1 if it
  passes every one), as CURE's code reward on gold tests (arXiv:2506.03136, Sec. 3.1) with j's
  accurate tests as the gold ones;
- code, judged by ``answers``: the same share, with the pseudo-gold tests made of j's *answers*
  instead of j's tests' expected outputs: j votes on the inputs of every generated test of the
  problem, mine and its own alike (:func:`block_labels` with ``all_inputs``), and on each input
  the output j's C gives is the answer (:func:`answer_key`; an input where C's solutions fail is
  left out). A labeller whose answers are right but whose tests' inputs are too simple to tell
  the learner's mistake apart (one word, where a program that forgets to reverse the words is
  right) still labels the mistake wrong wherever some test's input shows it. Co-RL's pA is the
  labeller's answer accuracy, and this is the reward that uses it. Under ``answers`` every
  block's vote runs on every input (``self_majority`` and ``frozen`` too), so which problems are
  labelled, and the curriculum's estimate, follow it as well; stdio outputs reach these functions
  as the stdio pass rule reads them, whitespace-separated tokens (``training/joint.py``);
- code, ``self_majority``: 1 if my solution is in my own C, else 0 (SRT, arXiv:2505.21444; TTRL,
  arXiv:2504.16084: reward 1 for the majority answer);
- tests: CURE's test reward (``cure_test_rewards``: Eq. 4 / |W|) of my tests run by j's
  solutions, with j's C as the correct set: j's solutions decide which of my tests are accurate;
  j's rows that are not programs (``program``: nothing parsed, not compiled) are no wrong
  solutions my tests get credit for catching (``wrong_programs_only``, the trainer's default);
- decided edge cases: an unlabelled problem (no vote, a tie, agreement below the threshold) gives
  no reward (None) to both roles, so the trainer gives it zero advantage and counts it; a label
  with no accurate test (``tests``) or no answered input (``answers``) gives the code role no
  reward; a label whose C is every solution of j gives the tests their accuracy only (no wrong
  solution to catch, as in CURE).

Layout of the joint arrays of one problem: rows are the solutions of every block (agents, then the
frozen labeller), columns the generated tests of every block; ``passed[s, t]`` whether solution s
passes test t; ``outputs[s, t]``/``errored[s, t]`` solution s's output on test t's input (stdio:
the cell's stdout; functional: the value of the test's call, see :func:`probe_code`), ``errored``
where that run failed. ``row_owner``/``col_owner`` give each row's / column's block.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .rewards import _bool2d, accurate_tests, cure_test_rewards, pseudo_gold_code_rewards

JUDGES = ("tests", "answers")  # what a labeller's label judges code by (``label_judge``)
FROZEN = -1  # the labeller index of the frozen source (its block is the last)


# ---- the label sources ---------------------------------------------------------------------------
@dataclass(frozen=True)
class LabelSource:
    """One label source (``label_source``): everything the config, the step, the model card and
    the CLI need to know about it. Adding a source is one :func:`register` call below.

    ``labeller(agent, n_agents)`` is the block that labels ``agent``: an agent index,
    :data:`FROZEN`, or None (the gold tests). ``min_agents`` / ``max_agents`` bound the agents of
    the run (None: no bound). ``needs_gold``: the rewards come from the gold tests (the tasks must
    carry them); ``needs_frozen``: a frozen labeller's completions (``frozen_labels`` or
    ``frozen_model``). ``code_by_own_vote``: the code reward is membership of the labeller's
    pseudo-correct set, not the labeller's tests (SRT/TTRL). ``method``: the model card's Method
    paragraph, required and non-empty."""

    name: str
    method: str
    labeller: Callable[[int, int], int | None]
    min_agents: int = 1
    max_agents: int | None = None
    needs_gold: bool = False
    needs_frozen: bool = False
    code_by_own_vote: bool = False

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"a label source needs a name, got {self.name!r}")
        if not isinstance(self.method, str) or not self.method.strip():
            raise ValueError(f"label source {self.name!r} needs its model card's method text")
        if self.min_agents < 1 or (self.max_agents is not None
                                   and self.max_agents < self.min_agents):
            raise ValueError(f"label source {self.name!r}: agents must be 1 <= min <= max, got "
                             f"{self.min_agents}..{self.max_agents}")

    @property
    def label_free(self) -> bool:
        """No gold test enters a reward."""
        return not self.needs_gold

    def admits(self, n_agents: int) -> bool:
        return self.min_agents <= n_agents and (self.max_agents is None
                                                or n_agents <= self.max_agents)

    def agents_error(self, n_agents: int) -> str | None:
        """Why ``n_agents`` agents cannot use this source (None: they can)."""
        if self.admits(n_agents):
            return None
        if self.min_agents == self.max_agents:
            need = f"exactly {self.min_agents} agent{'s' if self.min_agents > 1 else ''}"
        elif n_agents < self.min_agents:
            need = f"at least {self.min_agents} agents"
        else:
            need = f"at most {self.max_agents} agents"
        other = [s.name for s in SOURCES.values()
                 if s is not self and s.admits(n_agents) and s.min_agents > 1]
        return (f"label_source {self.name} needs {need}, got {n_agents}"
                + (f" (use {' or '.join(other)})" if other else ""))


SOURCES: dict[str, LabelSource] = {}  # every label source by name, in the order registered


def register(source: LabelSource) -> LabelSource:
    """Add a label source; a name is registered once."""
    if source.name in SOURCES:
        raise ValueError(f"label source {source.name!r} is registered already")
    SOURCES[source.name] = source
    return source


def label_source(name: str) -> LabelSource:
    """The record of ``name``; a clear error naming the choices otherwise."""
    try:
        return SOURCES[name]
    except (KeyError, TypeError):
        raise ValueError(f"label_source must be one of {', '.join(SOURCES)}, got "
                         f"{name!r}") from None


CURE = ("CURE (Wang et al., *Co-Evolving LLM Coder and Unit Tester via Reinforcement Learning*, "
        "[arXiv:2506.03136](https://arxiv.org/abs/2506.03136))")
SRT = ("SRT (Shafayat et al., [arXiv:2505.21444](https://arxiv.org/abs/2505.21444)) / TTRL (Zuo "
       "et al., [arXiv:2504.16084](https://arxiv.org/abs/2504.16084))")

register(LabelSource(
    "gold", labeller=lambda agent, n: None, needs_gold=True,
    method=f"{CURE}: one policy writes k solutions and k unit tests per problem; a solution is "
           "rewarded by the share of gold tests it passes, a test by CURE's estimated mu "
           "(Eq. 4: credit for being right and for catching wrong solutions); GRPO (TRL)."))
register(LabelSource(
    "partner", labeller=lambda agent, n: 1 - agent, min_agents=2, max_agents=2,
    method="Co-RL, label-free, with a partner of another model family: this agent's solutions "
           "are judged by the partner's tests that the partner's own execution-majority vote "
           f"accepts, its tests by the partner's solutions (CURE's test reward, {CURE}); no "
           "gold test or reference solution enters a reward; GRPO (TRL)."))
register(LabelSource(
    "ring", labeller=lambda agent, n: (agent - 1) % n, min_agents=2,
    method="Co-RL, label-free, in a ring of agents: each agent is labelled by its predecessor's "
           "tests and vote, as with a partner; no gold test enters a reward; GRPO (TRL)."))
register(LabelSource(
    "self_majority", labeller=lambda agent, n: agent, code_by_own_vote=True,
    method=f"Self-rewarding by majority vote, {SRT}: each solution is rewarded 1 when it is in "
           "the largest cluster of the model's own solutions by their outputs; no gold test "
           "enters a reward; GRPO (TRL)."))
register(LabelSource(
    "frozen", labeller=lambda agent, n: FROZEN, needs_frozen=True,
    method="Label-free with a frozen labeller (SRT's stabiliser): a fixed model's stored tests "
           "and vote label every problem; no gold test enters a reward; GRPO (TRL)."))


def supervisor(source: str, agent: int, n_agents: int) -> int | None:
    """The block that labels ``agent``: an agent index, :data:`FROZEN`, or None (gold)."""
    rec = label_source(source)
    if not 0 <= agent < n_agents:
        raise ValueError(f"agent {agent} outside 0..{n_agents - 1}")
    err = rec.agents_error(n_agents)
    if err:
        raise ValueError(err)
    return rec.labeller(agent, n_agents)


def peer(agent: int, n_agents: int) -> int | None:
    """The agent whose labels and errors the cross-agent diagnostics compare with ``agent``'s:
    its predecessor in the ring (the other agent of a pair); None when alone."""
    return None if n_agents < 2 else (agent - 1) % n_agents


def probe_code(test_code: str) -> str | None:
    """The input-only form of a functional test, whose value the vote clusters on: the left side
    of ``assert f(x) == y`` (``f(x)``), or the whole asserted expression when it is not a
    comparison. None when the test has no ``assert`` to take it from."""
    try:
        tree = ast.parse(test_code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    asserts = [s for s in tree.body if isinstance(s, ast.Assert)]
    if not asserts:
        return None
    last = asserts[-1]
    expr = last.test.left if isinstance(last.test, ast.Compare) else last.test
    prefix = [s for s in tree.body if s is not last and not isinstance(s, ast.Assert)]
    try:
        body = [ast.unparse(s) for s in prefix] + [ast.unparse(expr)]
    except (ValueError, RecursionError):
        return None
    return "\n".join(body)


# ---- the execution-majority vote -----------------------------------------------------------------
def cluster_by_outputs(outputs, errored=None) -> np.ndarray:
    """Cluster solutions by their output vectors (MBR-exec's exact-match equivalence, Shi et al.
    2022, arXiv:2204.11454; the SRT / TTRL vote's answer classes).

    ``outputs[i][j]``: solution i's output on input j (``return_outputs`` of the executor);
    ``errored[i][j]``: whether that run failed (its output then compares as an error marker, so a
    partial error is part of the vector). Returns each solution's cluster id (0, 1, ... in order of
    first appearance), or -1 for a solution that errored on every input (with no input: every
    solution). Raises ValueError when a solution lacks an output for some input or ``errored`` is
    not n x m."""
    n = len(outputs)
    if n == 0:
        return np.zeros(0, dtype=int)
    m = len(outputs[0])
    if any(len(row) != m for row in outputs):
        raise ValueError("every solution needs an output for every input")
    cluster = np.full(n, -1)
    if m == 0:
        return cluster
    err = (np.zeros((n, m), dtype=bool) if errored is None
           else _bool2d(errored, "errored"))
    if err.shape != (n, m):
        raise ValueError(f"errored has shape {err.shape}, expected {(n, m)}")
    keys: dict[tuple, int] = {}
    for i in range(n):
        if err[i].all():
            continue
        key = tuple(None if err[i, j] else outputs[i][j] for j in range(m))
        cluster[i] = keys.setdefault(key, len(keys))
    return cluster


@dataclass(frozen=True)
class MajorityLabel:
    """The pseudo-correct set found by execution majority.

    correct: boolean mask over solutions (the largest cluster); agreement: |C| / n;
    cluster: the cluster index of each solution (-1: errored on every input, joins none).
    """

    correct: np.ndarray
    agreement: float
    cluster: np.ndarray


def execution_majority(outputs, errored=None, threshold: float = 0.0) -> MajorityLabel | None:
    """Execution majority (SRT, arXiv:2505.21444 / TTRL, arXiv:2504.16084 majority vote; MBR-exec
    clustering): cluster solutions by their output vectors on the generated test inputs
    (:func:`cluster_by_outputs`); the largest cluster is C.

    ``outputs[i][j]``: solution i's output on input j (``return_outputs`` of the executor);
    ``errored[i][j]``: whether that run failed (its output then counts as an error marker). A
    solution that errors on every input joins no cluster. ``agreement = |C| / n`` over all n
    solutions. None (unlabelled) when there is no input, no cluster, a tie for the largest
    cluster, or agreement below ``threshold`` (default 0: plurality).
    """
    n = len(outputs)
    if n == 0:
        return None
    cluster = cluster_by_outputs(outputs, errored)
    joined = cluster[cluster >= 0]
    if joined.size == 0:
        return None
    sizes = np.bincount(joined)
    best = sizes.max()
    if (sizes == best).sum() > 1:
        return None
    agreement = best / n
    if agreement < threshold:
        return None
    return MajorityLabel(correct=cluster == int(sizes.argmax()), agreement=float(agreement),
                         cluster=cluster)


# ---- the labeller's pseudo-label and the rewards it gives ----------------------------------------
@dataclass(frozen=True)
class PseudoLabel:
    """A labeller's pseudo-label of one problem.

    correct: the pseudo-correct set C over the labeller's solutions; accurate: over the labeller's
    tests, passed by every solution of C; agreement: |C| / n, the vote's share."""

    correct: np.ndarray
    accurate: np.ndarray
    agreement: float


def vote(own_passed, outputs, errored=None, threshold: float = 0.0) -> PseudoLabel | None:
    """The labeller's pseudo-label from its solutions x its own tests (``own_passed``) and the
    solutions' outputs on the inputs it votes on (its own tests' inputs; with ``label_judge``
    ``answers``, every generated test's); None when unlabelled (see the module doc)."""
    v = execution_majority(outputs, errored, threshold)
    if v is None:
        return None
    return PseudoLabel(v.correct, accurate_tests(own_passed, v.correct), v.agreement)


def judge(label: PseudoLabel | None, vs_labeller_tests, all_passed: bool = False):
    """Code rewards of some solutions from a label: the share of the labeller's accurate tests
    each passes (``all_passed``: 1.0 if it passes every one). None without a label or without an
    accurate test."""
    if label is None:
        return None
    return pseudo_gold_code_rewards(vs_labeller_tests, label.accurate, all_passed)


def answer_key(correct, outputs, errored) -> tuple[list, np.ndarray]:
    """The labeller's answer on each input: ``outputs[i][j]``/``errored[i, j]`` are labeller
    solution i's output on input j (every generated test of the problem); ``correct`` marks its
    pseudo-correct set C. Returns (answers, answered): input j is answered when every solution of
    C ran on it without error and all gave the same output, which is then ``answers[j]`` (None
    where unanswered)."""
    correct = np.asarray(correct, dtype=bool)
    err = _bool2d(errored, "errored")
    n, m = err.shape
    if correct.shape != (n,) or len(outputs) != n:
        raise ValueError(f"C marks {correct.size} solutions, errored has {n} rows and outputs "
                         f"{len(outputs)}")
    members = np.flatnonzero(correct)
    answers: list = [None] * m
    answered = np.zeros(m, dtype=bool)
    if members.size == 0:
        return answers, answered
    for j in range(m):
        if err[members, j].any():
            continue
        given = {outputs[i][j] for i in members}
        if len(given) == 1:
            answers[j] = given.pop()
            answered[j] = True
    return answers, answered


def judge_answers(label: PseudoLabel | None, key: tuple[list, np.ndarray] | None, outputs,
                  errored, all_passed: bool = False):
    """Code rewards of some solutions against the labeller's answers (:func:`answer_key`): the
    share of answered inputs on which each gives the labeller's answer (a run that errors gives
    none; ``all_passed``: 1.0 if it gives every one). ``outputs``/``errored``: these solutions x
    the same inputs as the key. None without a label or without an answered input."""
    if label is None or key is None:
        return None
    answers, answered = key
    err = _bool2d(errored, "errored")
    if err.shape[1] != answered.shape[0] or len(outputs) != err.shape[0]:
        raise ValueError(f"solutions x inputs has shape {err.shape} with {len(outputs)} rows of "
                         f"outputs, but the key answers {answered.shape[0]} inputs")
    cols = np.flatnonzero(answered)
    if cols.size == 0:
        return None
    hit = np.array([[not err[i, j] and outputs[i][j] == answers[j] for j in cols]
                    for i in range(err.shape[0])], dtype=bool).reshape(err.shape[0], cols.size)
    return hit.all(axis=1).astype(float) if all_passed else hit.mean(axis=1)


@dataclass
class AgentRewards:
    """What agent i gets on one problem: rewards (None: no signal) and the label behind them.

    pseudo_correct: my solutions as the label judges them (the code reward is 1), or None."""

    labeller: int | None
    label: PseudoLabel | None
    code: np.ndarray | None
    test: np.ndarray | None
    pseudo_correct: np.ndarray | None


def _blocks(owner, n_blocks):
    owner = np.asarray(owner)
    return [np.flatnonzero(owner == b) for b in range(n_blocks)]


def block_labels(passed, outputs, errored, row_owner, col_owner, n_blocks: int,
                 threshold: float = 0.0, all_inputs: bool = False) -> list[PseudoLabel | None]:
    """Every block's own vote (index b: block b's solutions clustered by their outputs on block b's
    tests' inputs; ``all_inputs``: on the inputs of every block's tests, as ``label_judge``
    ``answers`` votes). The accurate tests are always among block b's own."""
    passed = np.asarray(passed, dtype=bool)
    errored = np.asarray(errored, dtype=bool)
    rows, cols = _blocks(row_owner, n_blocks), _blocks(col_owner, n_blocks)
    every = np.arange(passed.shape[1])
    labels = []
    for r, c in zip(rows, cols):
        on = every if all_inputs else c
        if len(r) == 0 or len(on) == 0:
            labels.append(None)
            continue
        out = [[outputs[i][j] for j in on] for i in r]
        labels.append(vote(passed[np.ix_(r, c)], out, errored[np.ix_(r, on)], threshold))
    return labels


def label_verdicts(label: PseudoLabel | None, rows, lab_rows, lab_cols, passed, outputs=None,
                   errored=None, judge_by: str = "tests", all_passed: bool = False):
    """Code rewards of the solutions ``rows`` of the joint matrix from the label of the block whose
    solutions are ``lab_rows`` and tests ``lab_cols``: :func:`judge` (``tests``) or
    :func:`judge_answers` over every generated input (``answers``; needs ``outputs`` and
    ``errored``)."""
    if judge_by not in JUDGES:
        raise ValueError(f"label_judge must be one of {', '.join(JUDGES)}, got {judge_by!r}")
    passed = np.asarray(passed, dtype=bool)
    if judge_by == "tests" or label is None:
        return judge(label, passed[np.ix_(rows, lab_cols)], all_passed)
    if outputs is None or errored is None:
        raise ValueError("label_judge answers needs the solutions' outputs and errored")
    errored = np.asarray(errored, dtype=bool)
    key = answer_key(label.correct, [outputs[i] for i in lab_rows], errored[lab_rows])
    return judge_answers(label, key, [outputs[i] for i in rows], errored[rows], all_passed)


def agent_rewards(source: str, agent: int, n_agents: int, passed, labels, row_owner, col_owner,
                  all_passed: bool = False, post_stage: bool = False, outputs=None, errored=None,
                  judge_by: str = "tests", program=None) -> AgentRewards:
    """Rewards of ``agent``'s solutions and tests on one problem (see the module doc), from the
    joint pass matrix and every block's label (:func:`block_labels`; the frozen labeller is the
    last block); ``judge_by`` ``answers`` needs the joint ``outputs`` and ``errored``.
    ``program``: a mask over the joint rows, False where a row is not a program; the labeller's
    such rows are no wrong solutions for my tests to catch (``cure_test_rewards``; None: every
    row counts, CURE as published)."""
    j = supervisor(source, agent, n_agents)
    if j is None:
        raise ValueError("gold labels come from the gold tests, not from agent_rewards")
    n_blocks = len(labels)
    jb = n_blocks - 1 if j == FROZEN else j
    if jb >= n_blocks:
        raise ValueError(f"no block for labeller {j} (got {n_blocks} blocks)")
    passed = np.asarray(passed, dtype=bool)
    rows, cols = _blocks(row_owner, n_blocks), _blocks(col_owner, n_blocks)
    label = labels[jb]
    mine_r, mine_c, lab_r, lab_c = rows[agent], cols[agent], rows[jb], cols[jb]
    if label is None:
        return AgentRewards(j, None, None, None, None)
    if label_source(source).code_by_own_vote:
        code = label.correct.astype(float)
    else:
        code = label_verdicts(label, mine_r, lab_r, lab_c, passed, outputs, errored, judge_by,
                              all_passed)
    lab_program = None if program is None else np.asarray(program, dtype=bool)[lab_r]
    test = cure_test_rewards(passed[np.ix_(lab_r, mine_c)], label.correct, post_stage,
                             lab_program) if len(mine_c) else np.zeros(0)
    pseudo = None if code is None else code >= 1.0
    return AgentRewards(j, label, code, test, pseudo)


def label_agreement(judged_a, judged_b) -> tuple[int, int]:
    """(agreeing, compared): how many solutions two labels judge alike (pseudo-correct or not);
    ``judged_*`` are booleans over the same solutions, or None where a label gives no verdict."""
    if judged_a is None or judged_b is None:
        return 0, 0
    a, b = np.asarray(judged_a, dtype=bool), np.asarray(judged_b, dtype=bool)
    return int((a == b).sum()), int(a.size)
