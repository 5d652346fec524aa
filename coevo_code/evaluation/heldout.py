"""Held-out evaluation of a model held in memory: what a training run writes to ``eval.jsonl``
before its first step and every ``eval_steps`` after.

Per problem (public examples hidden, as CURE's ``eval_no_example``): ``k`` solutions and ``k``
tests sampled at the run's temperature, one greedy solution,
then two executor jobs: the solutions (sampled, then greedy) against the gold tests and the
generated tests, and the reference solution and the problem's mutants against the generated
tests. The figures (pure functions of those matrices, :func:`problem_eval` and :func:`summarize`):

- ``code_acc``: share of sampled solutions passing every gold test, mean over problems (pass@1 at
  the run's temperature); ``code_acc_greedy`` the same for the greedy solution; ``pass_at_4``:
  unbiased pass@4 (Chen et al. 2021, Eq. 1) over the k samples;
- ``ut_acc``: share of generated tests that are *accurate*, judged by the reference: the reference
  solution passes the test and at least one mutant fails it (a test the reference passes but no
  mutant fails, such as ``assert f(3) == f(3)``, is not accurate; a problem without mutants needs
  only the reference to pass); null when no problem has a reference; ``ut_mutants_caught``: mean,
  over the generated tests the reference passes, of the share of the problem's mutants each
  fails (a test that tests nothing, such as ``assert f(3) == f(3)``, 0; one that catches every
  mistake, 1): how strong the right tests are; null without mutants;
- ``p01``, ``p00``, ``mu``: CURE's test figures (arXiv:2506.03136, Sec. 3) over the generated
  solutions, correct by the gold tests, pooled over problems with a correct solution;
- ``bon_acc``: best-of-N with the generated tests (the first 4 solutions, the first 4 tests, CURE's
  ranker), mean over problems;
- ``by_family``: the same figures per ``metadata["family"]`` (the task world's families).

A cell whose judge, container or node was lost, and lost again on a fresh judge
(``sandbox_error``), is no verdict on the model, as in :mod:`coevo_code.evaluation.harness`: a
solution it leaves undecided (a lost gold cell, and no gold test it ran fails it) is left out of
the solution figures, a generated test with a lost cell out of ``p01``/``p00``/``mu`` and
best-of-N, a test whose reference or mutant cell was lost out of ``ut_acc``; ``sandbox_errors``
counts the lost cells (pass@4 needs four decided samples).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..matrix import JobRefused, full_matrix, lost_matrix, prepare
from ..metrics import TestCounts, best_of_n_accuracy, pass_at_k, test_counts
from ..rewards import correct_from_gold
from ..roles import coder_messages, tester_messages
from ..sandbox.protocol import HARNESS
from ..tasks.model import Task

FIGURES = ("code_acc", "code_acc_greedy", "pass_at_4", "ut_acc", "ut_mutants_caught", "bon_acc",
           "p01", "p00", "mu")
EVAL_KEYS = (("step",) + FIGURES + ("parse_fail_code", "parse_fail_test", "problems",
                                    "problems_refused", "sandbox_errors", "cells", "time_s",
                                    "by_family"))


@dataclass
class ProblemEval:
    """One problem's outcome: what :func:`summarize` pools."""

    family: str
    correct: np.ndarray          # k sampled solutions: pass every gold test
    greedy: bool | None          # the greedy solution (None: not sampled)
    generated: np.ndarray        # k solutions x m generated tests
    accurate: np.ndarray | None  # m generated tests: reference-judged (None: no reference)
    parse_fail_code: int
    parse_fail_test: int
    sandbox_errors: int = 0      # cells the harness lost (left out of the figures above)
    caught: np.ndarray | None = None  # tests the reference passes: share of mutants each fails


def problem_eval(task: Task, full: np.ndarray, n_gold: int, k: int, test_ok: Sequence[bool],
                 judged: np.ndarray | None, n_mutants: int, lost: np.ndarray | None = None,
                 judged_lost: np.ndarray | None = None) -> ProblemEval:
    """From the n x (t + m) matrix of the k sampled solutions (then the greedy one, if any) and
    the (1 + mutants) x m matrix of the reference and its mutants on the generated tests
    (``judged``; None: no reference). ``lost`` and ``judged_lost``, shaped as those two: the
    cells the harness lost, whose solutions and tests are left out (the module's rule)."""
    lost = np.zeros(full.shape, dtype=bool) if lost is None else lost
    gold = full[:, :n_gold]
    correct = correct_from_gold(gold) if n_gold else np.zeros(full.shape[0], dtype=bool)
    lost_gold = lost[:, :n_gold]
    undecided = np.isnan(first_verdicts(gold, lost_gold))
    test_lost = lost[:k, n_gold:].any(axis=0)
    greedy = bool(correct[k]) if full.shape[0] > k and not undecided[k] else None
    accurate = share = None
    if judged is not None:
        ok = np.asarray(test_ok, dtype=bool)
        ref = judged[0] if judged.shape[0] else np.zeros(judged.shape[1], dtype=bool)
        caught = (~judged[1:1 + n_mutants]).any(axis=0) if n_mutants else np.ones_like(ref)
        accurate = ok & ref & caught
        right = ok & ref
        if judged_lost is not None:
            keep = ~judged_lost.any(axis=0)
            accurate, right = accurate[keep], right[keep]
            judged = judged[:, keep]
        if n_mutants:
            share = (~judged[1:1 + n_mutants]).mean(axis=0)[right]
    decided = ~undecided[:k]
    errors = int(lost.sum()) + (int(judged_lost.sum()) if judged_lost is not None else 0)
    return ProblemEval(str(task.metadata.get("family", "all")), correct[:k][decided], greedy,
                       full[:k, n_gold:][np.ix_(decided, ~test_lost)], accurate, 0, 0, errors,
                       share)


def first_verdicts(gold: np.ndarray, lost: np.ndarray) -> np.ndarray:
    """Each solution's verdict on the gold tests: 1.0 every test passed, 0.0 a decided failure,
    NaN a lost cell and no decided failure."""
    gold, lost = np.asarray(gold, dtype=bool), np.asarray(lost, dtype=bool)
    out = gold.all(axis=1).astype(float) if gold.shape[1] else np.zeros(gold.shape[0])
    undecided = lost.any(axis=1) & ~(~gold & ~lost).any(axis=1)
    out[undecided] = np.nan
    return out


def _mean(xs) -> float | None:
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return float(np.mean(xs)) if xs else None


def _pooled_mean(arrays) -> float | None:
    n = sum(a.size for a in arrays)
    return float(sum(a.sum() for a in arrays) / n) if n else None


def _figures(evals: list[ProblemEval], bon_n: int = 4, bon_m: int = 4) -> dict:
    counts = TestCounts()
    for e in evals:
        counts = counts + test_counts(e.generated, e.correct)
    acc = [e.accurate for e in evals if e.accurate is not None]
    judged = sum(a.size for a in acc)

    def nan_none(x):
        return None if x is None or not math.isfinite(x) else float(x)

    return {
        "code_acc": _mean([e.correct.mean() if e.correct.size else 0.0 for e in evals]),
        "code_acc_greedy": _mean([float(e.greedy) for e in evals if e.greedy is not None]),
        "pass_at_4": _mean([pass_at_k(e.correct.size, int(e.correct.sum()), 4)
                            for e in evals if e.correct.size >= 4]),
        "ut_acc": (sum(int(a.sum()) for a in acc) / judged) if judged else None,
        "ut_mutants_caught": _pooled_mean([e.caught for e in evals if e.caught is not None]),
        "bon_acc": _mean([best_of_n_accuracy(e.correct, e.generated, bon_n, bon_m)
                          for e in evals if e.correct.size]),
        "p01": nan_none(counts.p01), "p00": nan_none(counts.p00), "mu": nan_none(counts.mu),
    }


def summarize(evals: list[ProblemEval], bon_n: int = 4, bon_m: int = 4) -> dict:
    """The figures over every problem, and ``by_family``: the same per family."""
    out = _figures(evals, bon_n, bon_m)
    fams: dict[str, list[ProblemEval]] = defaultdict(list)
    for e in evals:
        fams[e.family].append(e)
    out["by_family"] = {f: {**_figures(es, bon_n, bon_m), "problems": len(es)}
                        for f, es in sorted(fams.items())}
    n_code = sum(e.correct.size for e in evals)
    n_test = sum(e.generated.shape[1] for e in evals)
    out["parse_fail_code"] = sum(e.parse_fail_code for e in evals) / n_code if n_code else None
    out["parse_fail_test"] = sum(e.parse_fail_test for e in evals) / n_test if n_test else None
    out["problems"] = len(evals)
    out["sandbox_errors"] = sum(e.sandbox_errors for e in evals)
    return out


# ---- the edges: sampling from a model in memory, the executor -----------------------------------
def sample(model, tokenizer, conversations: list[list[dict]], n: int, temperature: float | None,
           max_new_tokens: int, seed: int, batch_size: int = 32) -> list[list[str]]:
    """``n`` completions per conversation (greedy when ``temperature`` is None or 0), without
    touching the caller's random state."""
    import torch

    from ..generation.engines import chat_generate
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    was_training = model.training
    model.eval()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return chat_generate(model, tokenizer, conversations, n, max_new_tokens, batch_size,
                                 temperature=temperature, top_p=None, top_k=None)
    finally:
        tokenizer.padding_side = side
        model.train(was_training)


class _ModelEngine:
    """The model in memory as a generation engine (``generate(conversations, n)``), for the
    repair turns of :func:`evaluate_model`."""

    def __init__(self, model, tokenizer, temperature, max_new_tokens, seed):
        self.args = (model, tokenizer)
        self.temperature, self.max_new_tokens, self.seed = temperature, max_new_tokens, seed
        self.calls = 0

    def generate(self, conversations, n, progress=None):
        self.calls += 1  # each turn its own draws, the same on every evaluation
        return sample(*self.args, list(conversations), n, self.temperature, self.max_new_tokens,
                      self.seed + 1 + self.calls)


def evaluate_model(model, tokenizer, tasks: Sequence[Task], executor, k: int = 4,
                   temperature: float = 1.0, max_new_tokens: int = 64, seed: int = 0,
                   greedy: bool = True, bon: tuple[int, int] = (4, 4), repair_turns: int = 1,
                   repair_feedback: str = "self", repair_max_failing: int = 2,
                   repair_agreement: int = 0) -> dict:
    """Sample, run, score: the summary (:func:`summarize`) plus ``cells`` and ``time_s``.
    With ``repair_turns`` > 1, the k sampled solutions are then revised in turns against their
    feedback tests (``self``: the k tests the model wrote for the problem; ``public``: its
    examples), as ``coevo eval --repair_turns`` does (:func:`coevo_code.evaluation.repair.
    run_repair`; ``repair_agreement``: only the feedback tests that many first-turn solutions
    pass), and ``code_acc_turn1`` ... ``code_acc_turn{T}``, ``repaired_share`` and
    ``broken_share`` join the summary (:func:`coevo_code.repair.turn_metrics`)."""
    t0 = time.perf_counter()
    tasks = list(tasks)
    hidden = [dataclasses.replace(t, examples=[]) for t in tasks]  # CURE's eval_no_example
    codes = sample(model, tokenizer, [coder_messages(t) for t in hidden], k, temperature,
                   max_new_tokens, seed)
    tests = sample(model, tokenizer, [tester_messages(t) for t in hidden], k, temperature,
                   max_new_tokens, seed + 1)
    best = (sample(model, tokenizer, [coder_messages(t) for t in hidden], 1, None,
                   max_new_tokens, seed) if greedy else [[] for _ in tasks])
    batches, refs = [], []
    for t, c, x, g in zip(tasks, codes, tests, best):
        b = prepare(t, list(c) + list(g), x)
        batches.append(b)
        parsed = [p.test for p in b.tests if p.ok]
        ref = (t.job(t.references[:1] + list(t.metadata.get("mutants", [])), tests=parsed,
                     id=f"{t.id}#reference") if t.references and parsed else None)
        refs.append(ref)
    jobs = [b.job for b in batches if b.job is not None] + [r for r in refs if r is not None]
    results = executor.run(jobs) if jobs else []
    main = iter(results[:sum(b.job is not None for b in batches)])
    side = iter(results[sum(b.job is not None for b in batches):])
    evals, refused, first = [], [], {}
    for t, b, r in zip(tasks, batches, refs):
        res = next(side) if r is not None else None
        try:  # a job the executor refused leaves its problem out, counted (problems_refused)
            got = next(main) if b.job is not None else None
            full = full_matrix(b, got)
            if res is not None and "passed" not in res:
                raise JobRefused(f"{t.id}'s reference", res.get("error", "no result"))
        except JobRefused as e:
            refused.append(str(e))
            continue
        ok = [p.ok for p in b.tests]
        n_mut = len(t.metadata.get("mutants", []))
        judged = judged_lost = None
        if t.references:
            judged = np.zeros((1 + n_mut, len(ok)), dtype=bool)
            judged_lost = np.zeros_like(judged)
            if res is not None:
                cols = [j for j, y in enumerate(ok) if y]
                judged[:, cols] = np.asarray(res["passed"], dtype=bool)
                if res.get("outcomes") is not None:
                    judged_lost[:, cols] = [[o in HARNESS for o in row] for row in res["outcomes"]]
        lost = lost_matrix(b, got)
        e = problem_eval(t, full, b.n_gold, k, ok, judged, n_mut, lost, judged_lost)
        first[t.id] = first_verdicts(full[:k, :b.n_gold], lost[:k, :b.n_gold])
        e.parse_fail_code = sum(not p.ok for p in b.programs[:k])
        e.parse_fail_test = sum(not p.ok for p in b.tests)
        evals.append(e)
    out = summarize(evals, *bon)
    out["problems_refused"] = len(refused)
    out["cells"] = sum(len(j["programs"]) * len(j["tests"]) for j in jobs)
    if repair_turns > 1:
        from ..repair import turn_figures, turn_metrics
        from ..roles import CODE, TEST
        from .repair import run_repair
        gens = {}
        for t, c, x in zip(hidden, codes, tests):
            gens[(t.id, CODE)], gens[(t.id, TEST)] = list(c), list(x)
        engine = _ModelEngine(model, tokenizer, temperature, max_new_tokens, seed)
        eps = run_repair(hidden, gens, first, k, k, engine, executor, repair_turns,
                         repair_feedback, k=repair_max_failing, agreement=repair_agreement,
                         examples={t.id: list(t.examples) for t in tasks})
        out.update(turn_figures(turn_metrics([pe.correct for pe in eps.values()])))
    out["time_s"] = time.perf_counter() - t0
    return out
