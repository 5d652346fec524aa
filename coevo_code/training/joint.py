"""Label-free scoring (``partner``, ``ring``, ``self_majority``, ``frozen``;
:mod:`coevo_code.labels`): pure functions from every agent's completions and the joint pass matrix to this agent's rewards.

:func:`prepare_joint` puts every agent's completions of a problem (and the frozen labeller's) into
one job, gold tests first, with the solutions' outputs returned (stdio: the generated tests' cells;
functional: a second job calling each test's left-hand side, :func:`coevo_code.labels.probe_code`);
:func:`score_joint` takes this agent's rewards from its labeller's vote, and the gold metrics of
its own block from the gold tests where the data has them (logged, never used for training), plus
the cross-agent diagnostics. Each agent runs the joint job itself: nothing but text crosses over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import labels as L
from ..matrix import JobRefused, ProblemBatch, full_matrix, lost_matrix, program_rows
from ..matrix import prepare as prepare_job
from ..metrics import best_of_n_accuracy, joint_errors
from ..rewards import correct_from_gold
from ..roles import CODE, TEST
from ..sandbox.protocol import ANSWERED, HARNESS
from ..tasks.model import Task, TestCase
from .scoring import (LOWEST, ProblemScore, RewardOptions, refused_score, score_matrix,
                      shape_rewards)


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


def joint_outputs(jb: JointBatch, result: dict | None, probe_result: dict | None):
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
        raise JobRefused(b.task.id, (res or {}).get("error", "no outputs"))
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
    try:
        full = full_matrix(b, result)
        outputs, errored = joint_outputs(jb, result, probe_result)
    except JobRefused as e:  # every agent runs the same job: each skips the problem alike
        my_rows = np.flatnonzero(jb.row_owner == jb.me)
        my_cols = np.flatnonzero(jb.col_owner == jb.me)
        mine = ProblemBatch(b.task, [b.programs[i] for i in my_rows],
                            [b.tests[j] for j in my_cols], b.n_gold, None)
        return refused_score(mine, str(e), jb.my_code_lengths, jb.my_test_lengths)
    lost = lost_matrix(b, result)
    probe_lost = sum(o in HARNESS for row in (probe_result or {}).get("outcomes") or []
                     for o in row)
    t = b.n_gold
    gen = full[:, t:]
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
    program = program_rows(b, result)
    ar = L.agent_rewards(options.label_source, me, jb.n_agents, gen, labels, jb.row_owner,
                         jb.col_owner, options.code_all_passed, options.post_stage, outputs,
                         errored, options.label_judge,
                         program if options.wrong_programs_only else None)

    # my block, judged by the gold tests (metrics only)
    my_rows = np.flatnonzero(jb.row_owner == me)
    my_cols = np.flatnonzero(jb.col_owner == me)
    mine = ProblemBatch(b.task, [b.programs[i] for i in my_rows], [b.tests[j] for j in my_cols],
                        t, None, jb.my_code_lengths, jb.my_test_lengths)
    mine_cells = np.ix_(my_rows, list(range(t)) + [t + j for j in my_cols])
    base = score_matrix(mine, full[mine_cells], options, program=program[my_rows],
                        lost=lost[mine_cells])
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
    # a cell the harness lost among the generated tests (or the probes) may change any vote,
    # hence the label and every reward it gives: this agent's rows of the problem are masked
    # (lost gold cells reach the logged gold metrics only)
    masked = bool(lost[:, t:].any()) or probe_lost > 0
    if masked:
        code_rewards, test_rewards = [None] * len(my_rows), [None] * len(my_cols)
    base.code_masked, base.test_masked = [masked] * len(my_rows), [masked] * len(my_cols)
    base.sandbox_errors = int(lost.sum()) + probe_lost
    base.code_rewards = shape_rewards(code_rewards, jb.my_code_lengths, options)
    base.test_rewards = shape_rewards(test_rewards, jb.my_test_lengths, options)

    # diagnostics
    base.cells = sum(len(j["programs"]) * len(j["tests"]) for j in jb.jobs)
    base.labelled = ar.label is not None
    base.vote_agreement = None if ar.label is None else ar.label.agreement
    shares = [0.0 if x is None else x.agreement for x in estimate[:jb.n_agents]]
    base.pass_estimate = float(np.mean(shares)) if shares and not masked else None
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
