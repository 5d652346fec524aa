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

Label-free sources (``partner``, ``ring``, ``self_majority``, ``frozen``; :mod:`coevo_code.labels`):
:func:`prepare_joint` puts every agent's completions of a problem (and the frozen labeller's) into
one job, gold tests first, with the solutions' outputs returned (stdio: the generated tests' cells;
functional: a second job calling each test's left-hand side, :func:`coevo_code.labels.probe_code`);
:func:`score_joint` takes this agent's rewards from its labeller's vote, and the gold metrics of
its own block from the gold tests where the data has them (logged, never used for training), plus
the cross-agent diagnostics. Each agent runs the joint job itself: nothing but text crosses over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import labels as L
from ..argv import option
from ..metrics import TestCounts, best_of_n_accuracy, joint_errors, kappa_from_joint, test_counts
from ..rewards import (correct_from_gold, cure_code_rewards, cure_length_shaping,
                       cure_test_rewards, group_normalize)
from ..matrix import ProblemBatch, full_matrix
from ..matrix import prepare as prepare_job
from ..roles import CODE, TEST  # also imported from here by training/reward.py and step.py
from ..sandbox.protocol import ANSWERED
from ..tasks.model import Task, TestCase

LOWEST = {CODE: 0.0, TEST: -1.0}  # the reward of a completion that parses to nothing


@dataclass
class RewardOptions:
    """The co-evolution fields of the config that scoring reads, declared once: the training
    config (:class:`~coevo_code.training.config.CoevoConfig`) is a RewardOptions, so each default
    and help text is written here only."""

    max_gold_tests: int = option(8, "gold tests used per problem (CURE: 8)")
    post_stage: bool = option(False, "CURE's post-stage test reward")
    code_all_passed: bool = option(False, "code reward: 1 if every gold test passes (else the "
                                          "share)")
    length_shaping: bool = option(False, "CURE's length shaping for long chain-of-thought models")
    min_len: int = option(1000, "length shaping: lower clip of the target length (tokens)")
    max_len: int = option(8000, "length shaping: upper clip of the target length (tokens)")
    bon_n: int = option(4, "best-of-N logged every step: solutions")
    bon_m: int = option(4, "best-of-N logged every step: generated tests")
    label_source: str = option("gold", "where the correct set comes from",
                               choices=list(L.SOURCES), lockstep=True)
    label_threshold: float = option(0.5, "label-free: least vote share |C|/n that labels a "
                                          "problem", lockstep=True)
    label_judge: str = option("tests", "label-free: judge a solution by the labeller's accurate "
                                       "tests or by its answers on every generated input",
                              choices=list(L.JUDGES), lockstep=True)


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
    # label-free runs (None / empty in gold runs)
    labelled: bool | None = None
    vote_agreement: float | None = None
    pass_estimate: float | None = None        # curriculum: mean vote share over the agents
    label_agree: tuple = (0, 0)               # (agreeing, compared) with the peer's label
    pseudo_hits: tuple = (0, 0)               # (pseudo-label == gold, judged) on my solutions
    pseudo_joint: np.ndarray | None = None    # 2 x 2 counts: pseudo-label wrong x gold says wrong
    joint_err: np.ndarray | None = None       # 2 x 2 gold error counts, me x peer
    cross_bon: np.ndarray | None = None       # agents x agents best-of-N (solutions x tests)
    family: str | None = None                 # the problem's task family (world), if it has one


def prepare(task: Task, code_texts: Sequence[str], test_texts: Sequence[str],
            options: RewardOptions, code_lengths=(), test_lengths=()) -> ProblemBatch:
    """Parse the completions and build the executor job (see :func:`coevo_code.matrix.prepare`)."""
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
    return score_matrix(batch, full_matrix(batch, result), options)


def score_matrix(batch: ProblemBatch, full: np.ndarray, options: RewardOptions) -> ProblemScore:
    """:func:`score` from the problem's full n x (gold + generated) matrix."""
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
        code_lengths=batch.code_lengths, test_lengths=batch.test_lengths, cells=cells,
        family=_family(batch.task))


def _family(task: Task) -> str | None:
    """The task family a problem names in its metadata (the task world's do), as a string."""
    family = task.metadata.get("family")
    return None if family is None else str(family)


# ---- label-free: every agent's completions in one matrix --------------------------------------
@dataclass
class JointBatch:
    """One problem's completions of every block (agents in order, then the frozen labeller), the
    main job (gold tests first, outputs returned for stdio) and, for functional problems, the probe
    job whose cells' values are the outputs the vote clusters on."""

    batch: ProblemBatch
    row_owner: np.ndarray
    col_owner: np.ndarray
    me: int
    n_agents: int
    my_code_lengths: list[int]
    my_test_lengths: list[int]
    probe_job: dict | None = None
    probe_cols: list[int] | None = None  # generated column of each probe test

    @property
    def jobs(self) -> list[dict]:
        return [j for j in (self.batch.job, self.probe_job) if j is not None]


def prepare_joint(task: Task, blocks: Sequence[tuple[Sequence[str], Sequence[str]]], me: int,
                  n_agents: int, options: RewardOptions, code_lengths=(),
                  test_lengths=()) -> JointBatch:
    """``blocks``: (code texts, test texts) of every agent, in agent order, then the frozen
    labeller's when the source is ``frozen``; ``me``: this agent's index."""
    codes = [c for cs, _ in blocks for c in cs]
    tests = [t for _, ts in blocks for t in ts]
    batch = prepare_job(task, codes, tests, options.max_gold_tests)
    rows = np.repeat(np.arange(len(blocks)), [len(cs) for cs, _ in blocks])
    cols = np.repeat(np.arange(len(blocks)), [len(ts) for _, ts in blocks])
    jb = JointBatch(batch, rows, cols, me, n_agents, list(code_lengths), list(test_lengths))
    if batch.job is None:
        return jb
    if task.kind == "stdio":
        batch.job["return_outputs"] = True
        return jb
    probes, where = [], []
    for j, x in enumerate(batch.tests):
        code = L.probe_code(x.test.code) if x.ok and x.test.code else None
        if code is not None:
            probes.append(TestCase(code=code))
            where.append(j)
    if probes:
        jb.probe_job = task.job([p.code for p in batch.programs if p.ok], probes,
                                return_outputs=True, id=f"{task.id}#probe")
        jb.probe_cols = where
    return jb


def _outputs(jb: JointBatch, result: dict | None, probe_result: dict | None):
    """Every solution's output on every generated test's input, and which of those runs
    errored (unparsed rows and columns: errored)."""
    b = jb.batch
    n, m, t = len(b.programs), len(b.tests), b.n_gold
    outputs = [[""] * m for _ in range(n)]
    errored = np.ones((n, m), dtype=bool)
    rows = [i for i, p in enumerate(b.programs) if p.ok]
    if jb.probe_job is not None:
        res, cols = probe_result, list(jb.probe_cols or [])
        offset = 0
    elif b.job is not None and b.task.kind == "stdio":
        res, cols = result, [j for j, x in enumerate(b.tests) if x.ok]
        offset = t
    else:
        return outputs, errored
    if not res or "outcomes" not in res or res.get("outputs") is None:
        why = (res or {}).get("error", "no outputs")
        raise RuntimeError(f"the executor gave no outputs for problem {b.task.id}: {why}")
    for r, i in enumerate(rows):
        outs, oks = res["outputs"][r], res["outcomes"][r]
        for c, j in enumerate(cols):
            outcome = oks[offset + c]
            if outcome in ANSWERED:
                outputs[i][j] = outs[offset + c]
                errored[i, j] = False
    return outputs, errored


def score_joint(jb: JointBatch, result: dict | None, probe_result: dict | None,
                options: RewardOptions) -> ProblemScore:
    """This agent's rewards from its labeller (:func:`coevo_code.labels.agent_rewards`), its gold
    metrics (logged only), and the cross-agent diagnostics of one problem."""
    b = jb.batch
    full = full_matrix(b, result)
    t = b.n_gold
    gen = full[:, t:]
    outputs, errored = _outputs(jb, result, probe_result)
    if options.label_judge == "answers" and b.task.kind == "stdio":
        # an answer is a pseudo-gold test: compare stdout as the stdio pass rule does (tokens)
        outputs = [[" ".join(o.split()) for o in row] for row in outputs]
    n_blocks = int(max(jb.row_owner.max(initial=-1), jb.col_owner.max(initial=-1)) + 1)
    # every block's plurality vote (the curriculum's estimate), once; a label needs the threshold
    estimate = L.block_labels(gen, outputs, errored, jb.row_owner, jb.col_owner, n_blocks,
                              all_inputs=options.label_judge == "answers")
    labels = [x if x is not None and x.agreement >= options.label_threshold else None
              for x in estimate]
    me = jb.me
    ar = L.agent_rewards(options.label_source, me, jb.n_agents, gen, labels, jb.row_owner,
                         jb.col_owner, options.code_all_passed, options.post_stage, outputs,
                         errored, options.label_judge)

    # my block, judged by the gold tests (metrics only)
    my_rows = np.flatnonzero(jb.row_owner == me)
    my_cols = np.flatnonzero(jb.col_owner == me)
    mine = ProblemBatch(b.task, [b.programs[i] for i in my_rows], [b.tests[j] for j in my_cols],
                        t, None, jb.my_code_lengths, jb.my_test_lengths)
    base = score_matrix(mine, full[np.ix_(my_rows, list(range(t)) + [t + j for j in my_cols])],
                        options)
    code_ok = [p.ok for p in mine.programs]
    test_ok = [x.ok for x in mine.tests]
    if ar.code is None:
        code_rewards: list = [None] * len(my_rows)
    else:
        code_rewards = [float(r) if ok else LOWEST[CODE] for r, ok in zip(ar.code, code_ok)]
    if ar.label is None or ar.test is None:
        test_rewards: list = [None] * len(my_cols)
    else:
        test_rewards = [float(r) if ok else LOWEST[TEST] for r, ok in zip(ar.test, test_ok)]
    base.code_rewards = _shape(code_rewards, jb.my_code_lengths, options)
    base.test_rewards = _shape(test_rewards, jb.my_test_lengths, options)

    # diagnostics
    base.cells = sum(len(j["programs"]) * len(j["tests"]) for j in jb.jobs)
    base.labelled = ar.label is not None
    base.vote_agreement = None if ar.label is None else ar.label.agreement
    shares = [0.0 if x is None else x.agreement for x in estimate[:jb.n_agents]]
    base.pass_estimate = float(np.mean(shares)) if shares else None
    gold_ok = correct_from_gold(full[:, :t]) if t else None
    if gold_ok is not None and ar.pseudo_correct is not None:
        hits = ar.pseudo_correct == gold_ok[my_rows]
        base.pseudo_hits = (int(hits.sum()), int(hits.size))
        base.pseudo_joint = joint_errors(~ar.pseudo_correct, ~gold_ok[my_rows])
    peer = L.peer(me, jb.n_agents)
    if peer is not None:
        verdicts = []
        every = np.arange(len(jb.row_owner))
        for x in (me, peer):
            verdicts.append(L.label_verdicts(
                labels[x], every, np.flatnonzero(jb.row_owner == x),
                np.flatnonzero(jb.col_owner == x), gen, outputs, errored, options.label_judge,
                all_passed=True))
        base.label_agree = L.label_agreement(*verdicts)
        if gold_ok is not None:
            ea = ~gold_ok[my_rows]
            eb = ~gold_ok[jb.row_owner == peer]
            k = min(len(ea), len(eb))
            base.joint_err = joint_errors(ea[:k], eb[:k])
    if gold_ok is not None:
        cb = np.full((jb.n_agents, jb.n_agents), np.nan)
        for a in range(jb.n_agents):
            ra = jb.row_owner == a
            for c in range(jb.n_agents):
                sub = gen[np.ix_(ra, jb.col_owner == c)]
                if ra.any():
                    cb[a, c] = best_of_n_accuracy(gold_ok[ra], sub, options.bon_n, options.bon_m)
        base.cross_bon = cb
    return base


# ---- controls ---------------------------------------------------------------------------------
CONTROLS = ("none", "shuffle", "flip")


def control_rewards(rewards: Sequence, roles: Sequence[str], control: str,
                    rng: np.random.Generator) -> list:
    """The rewards a control run trains on (the issue's honesty checks; the logged metrics stay
    the real ones): ``shuffle`` permutes each role's rewards within the batch (the same values,
    tied to the wrong completions), ``flip`` negates them; rows without a reward (None) keep
    none. ``none`` returns them unchanged."""
    out = list(rewards)
    if control == "none":
        return out
    if control == "flip":
        return [None if r is None else -r for r in out]
    if control != "shuffle":
        raise ValueError(f"reward control must be one of {', '.join(CONTROLS)}, got {control!r}")
    for role in (CODE, TEST):
        idx = [i for i, (r, ro) in enumerate(zip(out, roles)) if ro == role and r is not None]
        vals = [out[i] for i in idx]
        for i, j in zip(idx, rng.permutation(len(idx))):
            out[i] = vals[j]
    return out


ROLES_TRAINED = ("both", "code", "test")


def trained_roles(rewards: Sequence, roles: Sequence[str], which: str) -> list:
    """The rewards of the roles a run trains (``train_roles``): ``both`` (CURE: coder and tester
    together) keeps every reward; ``code`` (a coder-only run) leaves the test rows without a
    reward, ``test`` (tester-only) the code rows, so TRL gives those rows zero advantage and the
    trainer leaves them out of the loss. The logged metrics stay those of every row."""
    if which not in ROLES_TRAINED:
        raise ValueError(f"train_roles must be one of {', '.join(ROLES_TRAINED)}, got {which!r}")
    if which == "both":
        return list(rewards)
    keep = CODE if which == "code" else TEST
    return [r if ro == keep else None for r, ro in zip(rewards, roles)]


# ---- step metrics -------------------------------------------------------------------------------
METRIC_KEYS = (
    "code_acc", "ut_acc", "p01", "p00", "mu", "bon_acc",
    "reward_code_mean", "reward_code_std", "reward_test_mean", "reward_test_std",
    "parse_fail_code", "parse_fail_test", "len_code_mean", "len_test_mean",
    "test_rows_no_signal", "problems", "exec_cells", "exec_cells_per_s",
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
