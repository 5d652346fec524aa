"""Scoring one generation batch with the gold tests: pure functions from completions and pass
matrices to rewards. No torch, no executor: the step (``step.py``) runs the job this module builds
and hands the matrix back.

Per problem (CURE, arXiv:2506.03136, Sec. 3; the core's ``rewards`` module):

- the k code completions are parsed into programs, the k test completions into test cases; a
  completion that parses to nothing is not executed: its row (program) or column (test) is all
  False;
- one executor job runs the parsed programs against the first ``max_gold_tests`` gold tests, then
  the parsed generated tests (gold columns first, as the core's contract says);
- code rewards: share of gold tests passed (``cure_code_rewards``; ``all_passed`` variant);
- the correct set C: solutions passing every gold test; test rewards: ``cure_test_rewards``
  (Eq. 4 / |W|, the per-test share of mu), with W the wrong *programs* (``wrong_programs_only``,
  on by default: a completion that is not a program, ``matrix.program_rows``, gives no credit
  to the tests that fail it; the step's p01/p00/mu are counted the same way); with
  ``known_wrong`` (off by default), up to that many of the problem's known wrong programs (the
  task world's mutants, a dataset's published incorrect solutions) run against the same tests in
  a job of their own and, once a gold test fails them, join W for the test rewards only (a
  deviation from CURE's formula, docs/CORE.md "Known wrong programs"): without them, when every
  sampled solution is correct, a test that catches nothing earns what a test that catches a
  mistake earns;
- decided edge cases: a completion that parses to nothing gets the lowest reward of its role
  (code 0, test -1); a problem with no gold test gives its code rows no reward (None); a problem
  whose gold tests no solution passes gives its test rows no reward (None): the trainer drops those
  rows from the loss, as CURE drops them from its batch;
- cells the harness lost (``sandbox_error`` after the executor's re-run on a fresh judge: a
  judge, container or node lost twice) are no verdict: the rows whose reward one of them could
  have changed get None, and every other row exactly what it would get had nothing been lost
  (:func:`lost_rows`); the metrics leave those cells out, and count them
  (``ProblemScore.sandbox_errors``, ``code_masked``, ``test_masked``);
- optional CURE length shaping (long chain-of-thought): the raw rewards of each (problem, role)
  group are group-normalised with CURE's ``normalize_reward`` (all-ones groups kept) and
  ``cure_length_shaping`` is applied; the values returned are then CURE's advantages, which TRL
  passes through unchanged with ``scale_rewards="none"`` (they have mean zero).

The step's other concepts have their own modules: label-free joint scoring
(:mod:`.joint`), the control runs and trained roles (:mod:`.controls`), and the step metrics pooled
over a batch (:mod:`.step_metrics`); :class:`ProblemScore`, the per-problem record they share,
is here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .. import labels as L
from ..argv import option
from ..metrics import TestCounts, best_of_n_accuracy, test_counts
from ..rewards import (correct_from_gold, cure_code_rewards, cure_length_shaping,
                       cure_test_rewards, group_normalize)
from ..matrix import (JobRefused, ProblemBatch, full_matrix, known_matrix, known_wrong,
                      lost_matrix, program_rows, with_known_wrong)
from ..matrix import prepare as prepare_job
from ..roles import CODE, TEST
from ..tasks.model import Task

LOWEST = {CODE: 0.0, TEST: -1.0}  # the reward of a completion that parses to nothing


@dataclass
class RewardOptions:
    """The co-evolution fields of the config that scoring reads, declared once: the training
    config (:class:`~coevo_code.training.config.CoevoConfig`) is a RewardOptions, so each default
    and help text is written here only."""

    max_gold_tests: int = option(8, "gold tests used per problem (CURE: 8)")
    post_stage: bool = option(False, "CURE's post-stage test reward")
    wrong_programs_only: bool = option(
        True, "test rewards: only real programs are wrong solutions; a completion that is not "
              "a program (nothing parsed, not compiled) gives no credit to the tests that fail "
              "it (false: CURE's formula, every row; docs/CORE.md)")
    code_all_passed: bool = option(False, "code reward: 1 if every gold test passes (else the "
                                          "share)")
    length_shaping: bool = option(False, "CURE's length shaping for long chain-of-thought models")
    min_len: int = option(1000, "length shaping: lower clip of the target length (tokens)")
    max_len: int = option(8000, "length shaping: upper clip of the target length (tokens)")
    known_wrong: int = option(
        0, "test rewards: up to this many of a problem's known wrong programs (its mutants, or a "
           "dataset's published incorrect solutions) join the wrong solutions a test is credited "
           "for catching, once a gold test fails them (0: CURE's formula, the sampled solutions "
           "only; gold labels only; docs/CORE.md)")
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
    refused: str | None = None                # the executor refused its job: why (no reward)
    # cells the harness lost (sandbox_error after the executor's re-run) and what they mask
    sandbox_errors: int = 0                   # such cells in this problem's jobs
    lost: np.ndarray | None = None            # gold runs: those cells, as the full matrix
    code_masked: list = field(default_factory=list)  # bool per code completion: reward withheld
    test_masked: list = field(default_factory=list)  # bool per test completion: reward withheld
    known: tuple = (0, 0)  # (caught by an accurate test, confirmed wrong): known wrong programs

    @property
    def rows_masked(self) -> int:
        return int(sum(self.code_masked) + sum(self.test_masked))


def prepare(task: Task, code_texts: Sequence[str], test_texts: Sequence[str],
            options: RewardOptions, code_lengths=(), test_lengths=()) -> ProblemBatch:
    """Parse the completions and build the executor job (see :func:`coevo_code.matrix.prepare`),
    and, with ``known_wrong``, the job of the problem's known wrong programs
    (``ProblemBatch.known_job``)."""
    batch = prepare_job(task, code_texts, test_texts, options.max_gold_tests, code_lengths,
                        test_lengths)
    return with_known_wrong(batch, known_wrong(task, options.known_wrong))


def shape_rewards(values: list, lengths: list[int], options: RewardOptions) -> list:
    """CURE length shaping of one group's raw rewards; None stays None, and the others are
    shaped as a group of their own (a row masked for a lost cell is out of its group)."""
    if not options.length_shaping:
        return values
    keep = [i for i, v in enumerate(values) if v is not None]
    if not keep:
        return values
    if len(keep) < len(values):
        part = shape_rewards([values[i] for i in keep], [lengths[i] for i in keep], options)
        out = list(values)
        for i, v in zip(keep, part):
            out[i] = v
        return out
    normalized = group_normalize(values, keep_all_ones=True)
    if normalized is None:
        return [0.0] * len(values)
    shaped = cure_length_shaping(normalized, lengths, options.min_len, options.max_len)
    if shaped is None:
        return [0.0] * len(values)
    return [float(x) for x in shaped]


def lost_rows(gold: np.ndarray, lost: np.ndarray,
              all_passed: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which rows' rewards (CURE, gold tests) a lost cell could have changed: ``gold`` is the
    n x t gold part of the full matrix (lost cells False), ``lost`` the n x (t + m) cells the
    harness lost. Returns (code rows masked, test rows masked, solutions undecided):

    - a solution with a lost gold cell: its code reward (the share passed) is unknown, unless
      ``all_passed`` and a gold test it ran fails it (0 either way);
    - it is *undecided* when no gold test it ran fails it: it may be correct or wrong, and every
      test's reward depends on which (Eq. 4: accuracy against the correct ones, catches among the
      wrong ones), so every test row is masked;
    - a test with a lost cell in its column: its reward is unknown.

    Every other row's reward is exactly what it would be had nothing been lost."""
    t = gold.shape[1]
    lost_gold, lost_gen = lost[:, :t], lost[:, t:]
    touched = lost_gold.any(axis=1)
    failed = (~gold & ~lost_gold).any(axis=1)
    undecided = touched & ~failed
    code_masked = touched & ~failed if all_passed else touched
    test_masked = lost_gen.any(axis=0)
    if undecided.any():
        test_masked = np.ones_like(test_masked)
    return code_masked, test_masked, undecided


def score(batch: ProblemBatch, result: dict | None, options: RewardOptions,
          known_result: dict | None = None) -> ProblemScore:
    """Rewards and metric counts of one problem from its executor result (and that of its
    known wrong programs' job, if it has one); a job the executor refused gives the problem's rows
    no reward (:func:`refused_score`), and the step goes on (a refused known job: the test
    rewards count the sampled solutions only)."""
    try:
        full = full_matrix(batch, result)
    except JobRefused as e:
        return refused_score(batch, str(e))
    known, known_lost = known_matrix(batch, known_result)
    return score_matrix(batch, full, options, program=program_rows(batch, result),
                        lost=lost_matrix(batch, result), known=known, known_lost=known_lost)


def refused_score(batch: ProblemBatch, why: str, code_lengths=None,
                  test_lengths=None) -> ProblemScore:
    """The score of a problem whose job the executor refused: every row without a reward (the
    trainer drops them, as rows without signal), nothing counted but the refusal (``why``, one
    line naming the problem) and the parse failures."""
    return ProblemScore(
        task_id=batch.task.id, code_rewards=[None] * len(batch.programs),
        test_rewards=[None] * len(batch.tests), n_solutions=len(batch.programs),
        n_correct=None, counts=TestCounts(), bon=float("nan"),
        code_parse_failures=sum(not p.ok for p in batch.programs),
        test_parse_failures=sum(not x.ok for x in batch.tests),
        code_lengths=list(batch.code_lengths if code_lengths is None else code_lengths),
        test_lengths=list(batch.test_lengths if test_lengths is None else test_lengths),
        cells=0, family=_family(batch.task), refused=why)


def score_matrix(batch: ProblemBatch, full: np.ndarray, options: RewardOptions,
                 program: np.ndarray | None = None, lost: np.ndarray | None = None,
                 known: np.ndarray | None = None,
                 known_lost: np.ndarray | None = None) -> ProblemScore:
    """:func:`score` from the problem's full n x (gold + generated) matrix. ``program``: which
    solutions are programs (``matrix.program_rows``; None: those that parsed); ``lost``: the
    cells of the matrix the harness lost (``matrix.lost_matrix``, same shape; None: none), whose
    rows get no reward (:func:`lost_rows`) and which the metrics leave out.

    The two masks compose: a row that is not a program was decided without running (nothing
    parsed, or every cell ``syntax_error``), so it has no lost cell, and stays out of the wrong
    solutions; a row a lost cell masks stays masked whatever ``program`` says. A test's credit
    (and the metrics' counts) counts the wrong programs among the solutions whose verdict is
    known: an undecided solution masks every test row, and a test with a lost cell is masked.

    ``known`` (k_w x (t + m), columns as ``full``'s) and ``known_lost``: the problem's known wrong
    programs (:func:`coevo_code.matrix.known_matrix`). Those a gold test they ran fails are
    confirmed wrong and join W in the test rewards (rows after the sampled solutions, every one a
    program); the others are left out; a test with a lost cell on a confirmed one is masked. The
    code rewards and the metrics count the sampled solutions only."""
    t = batch.n_gold
    gold, generated = full[:, :t], full[:, t:]
    code_ok = np.array([p.ok for p in batch.programs], dtype=bool)
    test_ok = np.array([x.ok for x in batch.tests], dtype=bool)
    program = code_ok if program is None else np.asarray(program, dtype=bool) & code_ok
    if lost is None:
        lost = np.zeros(full.shape, dtype=bool)
    code_masked, test_masked, undecided = lost_rows(gold, lost, options.code_all_passed)
    wrong_mask = program if options.wrong_programs_only else None

    if t == 0:
        code_rewards: list = [None] * len(batch.programs)
        correct = np.zeros(len(batch.programs), dtype=bool)
        n_correct = None
    else:
        raw = cure_code_rewards(gold, all_passed=options.code_all_passed)
        code_rewards = [None if masked else float(r) if ok else LOWEST[CODE]
                        for r, ok, masked in zip(raw, code_ok, code_masked)]
        correct = correct_from_gold(gold)
        n_correct = int(correct[~undecided].sum())

    graded, graded_correct, graded_program = generated, correct, wrong_mask
    known_seen = (0, 0)
    if known is not None and len(known) and t:
        k_lost = np.zeros(known.shape, dtype=bool) if known_lost is None else known_lost
        confirmed = (~known[:, :t] & ~k_lost[:, :t]).any(axis=1)  # a gold test fails it
        extra = known[confirmed][:, t:]
        test_masked = test_masked | k_lost[confirmed][:, t:].any(axis=0)
        graded = np.vstack([generated, extra])
        graded_correct = np.concatenate([correct, np.zeros(len(extra), dtype=bool)])
        if wrong_mask is not None:
            graded_program = np.concatenate([wrong_mask, np.ones(len(extra), dtype=bool)])
        if correct.any() and len(extra):
            acc = test_ok & (generated[correct].all(axis=0))
            known_seen = (int((~extra[:, acc]).any(axis=1).sum()), len(extra))
    tr = cure_test_rewards(graded, graded_correct, post_stage=options.post_stage,
                           program=graded_program) if len(test_ok) else np.zeros(0)
    if tr is None:
        test_rewards: list = [None] * len(batch.tests)
    else:
        test_rewards = [None if masked else float(r) if ok else LOWEST[TEST]
                        for r, ok, masked in zip(tr, test_ok, test_masked)]

    code_rewards = shape_rewards(code_rewards, batch.code_lengths, options)
    test_rewards = shape_rewards(test_rewards, batch.test_lengths, options)
    # the metrics see what is known: undecided solutions and tests with a lost cell left out
    decided = ~undecided
    judged = generated[np.ix_(decided, ~lost[:, t:].any(axis=0))]
    bon = (best_of_n_accuracy(correct[decided], judged, options.bon_n, options.bon_m)
           if n_correct is not None and decided.any() else float("nan"))
    cells = sum(len(j["programs"]) * len(j["tests"]) for j in (batch.job, batch.known_job)
                if j is not None)
    return ProblemScore(
        task_id=batch.task.id, code_rewards=code_rewards, test_rewards=test_rewards,
        n_solutions=int(decided.sum()), n_correct=n_correct,
        counts=test_counts(judged, correct[decided],
                           None if wrong_mask is None else wrong_mask[decided]), bon=bon,
        code_parse_failures=int((~code_ok).sum()), test_parse_failures=int((~test_ok).sum()),
        code_lengths=batch.code_lengths, test_lengths=batch.test_lengths, cells=cells,
        family=_family(batch.task), lost=lost,
        sandbox_errors=int(lost.sum()) + (0 if known_lost is None else int(known_lost.sum())),
        code_masked=[bool(x) for x in code_masked], test_masked=[bool(x) for x in test_masked],
        known=known_seen)


def _family(task: Task) -> str | None:
    """The task family a problem names in its metadata (the task world's do), as a string."""
    family = task.metadata.get("family")
    return None if family is None else str(family)
