"""Evaluation in repair turns: after the first turn (the ordinary evaluation), each
solution that fails its feedback tests is revised by the model, shown at most k failing
feedback tests (:func:`coevo_code.repair.feedback_message`), up to ``turns - 1`` more times; its
episode ends when its feedback tests pass (or there are none) or after ``turns`` turns. Every
turn's solutions are judged on the gold tests for the per-turn figures
(:func:`coevo_code.repair.turn_metrics`).

Two jobs per problem and turn keep the gold tests away from the prompts: the feedback job
(solutions x feedback tests, with their outputs), the only one a message is built from, and
the gold job (solutions x gold tests, verdicts only). Revisions go through the generation cache
as ``code#turn{t}`` (one entry per solution, null where its episode had ended), so an
interrupted run resumes without generating again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..repair import (FIELD_CHARS, MAX_FAILING, FeedbackResult, agreed_tests, feedback_message,
                      feedback_tests, repair_messages, take_tests)
from ..roles import CODE, TEST, coder_messages, parse_program, parse_test
from ..sandbox.protocol import HARNESS, OK
from ..tasks.model import Task


@dataclass
class Episode:
    """One solution's episode: its conversation so far, its last answer and program."""

    messages: list[dict]
    answer: str
    program: object  # ParsedProgram
    done: bool = False
    turns: int = 1


@dataclass
class ProblemEpisodes:
    task: Task
    feedback: list  # TestCase: the feedback tests (never gold)
    episodes: list[Episode]
    correct: np.ndarray  # n x T, 1.0 / 0.0 / NaN (undecided)
    transcript: list = field(default_factory=list)


def gold_verdict(result: dict | None, i: int) -> float:
    """Solution row ``i`` of a gold job's result: 1.0 all passed, 0.0 a decided failure, NaN
    when a lost cell (or a refused job) leaves it undecided."""
    if not result or "outcomes" not in result:
        return float("nan")
    row = result["outcomes"][i]
    if all(o == OK for o in row):
        return 1.0
    if any(o != OK and o not in HARNESS for o in row):
        return 0.0
    return float("nan")


def agree(result: dict | None, n_tests: int, at_least: int) -> tuple[list[int], dict | None]:
    """The feedback tests a feedback job's solutions agree on (:func:`coevo_code.repair.
    agreed_tests` of its pass matrix) and the job's ``result`` on those tests only; a refused
    job (or none) is no row: no test agreed on, and None."""
    ok = result is not None and "outcomes" in result
    passed = np.asarray([[o == OK for o in r] for r in result["outcomes"]] if ok else [],
                        dtype=bool).reshape(-1, n_tests)
    keep = agreed_tests(passed, at_least)
    return keep, (take_tests(result, keep) if ok else None)


def _feedback_results(tests, result: dict | None, i: int) -> list[FeedbackResult] | None:
    """Row ``i`` of a feedback job as FeedbackResults (None: the job was refused)."""
    if not result or "outcomes" not in result:
        return None
    outs = (result.get("outputs") or [[None] * len(tests)])[i]
    return [FeedbackResult(t, o, out) for t, o, out in zip(tests, result["outcomes"][i], outs)]


def run_repair(tasks: Sequence[Task], generations: dict, first_correct: dict, k_code: int,
               k_test: int, engine, executor, turns: int, mode: str, cache=None,
               k: int = MAX_FAILING, limit: int = FIELD_CHARS,
               examples: dict | None = None, agreement: int = 0) -> dict[str, ProblemEpisodes]:
    """The episodes of every task in ``first_correct`` (task id -> its k_code turn-1 gold
    verdicts, 1.0/0.0/NaN) over ``turns`` turns; ``generations`` the turn-1 completions as
    :func:`~coevo_code.generation.cache.generate_all` returns them. ``engine.generate`` writes
    one revision per conversation; ``cache`` (a GenerationCache) keeps them. ``examples``
    (task id -> tests): the public feedback tests of tasks whose prompts hide their examples.
    ``agreement``: after the first turn, each problem keeps only the feedback tests that many of
    its first-turn solutions pass (:func:`coevo_code.repair.agreed_tests`; 0: all of them)."""
    agreed_tests([], agreement)  # a clear error before any generation
    probs: dict[str, ProblemEpisodes] = {}
    for t in tasks:
        if t.id not in first_correct:
            continue
        answers = generations.get((t.id, CODE), [])[:k_code]
        parsed = [parse_test(c, t) for c in generations.get((t.id, TEST), [])[:k_test]]
        eps = [Episode(coder_messages(t), a, parse_program(a, t)) for a in answers]
        correct = np.full((len(eps), turns), np.nan)
        correct[:, 0] = np.asarray(first_correct[t.id], dtype=float)[:len(eps)]
        fb = (list(examples[t.id]) if mode == "public" and examples is not None else
              feedback_tests(t, mode, parsed))
        probs[t.id] = ProblemEpisodes(t, fb, eps, correct)

    for turn in range(1, turns):  # turn + 1 is the turn being written
        for pe in probs.values():  # an episode that ended keeps its last verdict
            pe.correct[:, turn] = pe.correct[:, turn - 1]
        # 1. the feedback of every open episode, from its feedback tests only
        jobs, where = [], []
        for pid, pe in probs.items():
            rows = [i for i, e in enumerate(pe.episodes) if not e.done and e.program.ok]
            if rows and pe.feedback:
                jobs.append(pe.task.job([pe.episodes[i].program.code for i in rows], pe.feedback,
                                        return_outputs=True, id=f"{pid}#feedback{turn}"))
                where.append((pid, rows))
        ran = executor.run(jobs) if jobs else []
        results = {pid: (rows, res) for (pid, rows), res in zip(where, ran)}
        if turn == 1 and agreement:
            for pid, pe in probs.items():
                if not pe.feedback:
                    continue
                rows, res = results.get(pid, ([], None))
                keep, res = agree(res, len(pe.feedback), agreement)
                pe.feedback = [pe.feedback[j] for j in keep]
                if res is not None:
                    results[pid] = (rows, res)
        todo: list[tuple[str, int, list[dict]]] = []
        for pid, pe in probs.items():
            rows, res = results.get(pid, ([], None))
            for i, e in enumerate(pe.episodes):
                if e.done:
                    continue
                if not e.program.ok:
                    msg = feedback_message([], k, limit, program_ok=False)
                elif not pe.feedback:
                    msg = None  # nothing to check the solution against: the episode ends
                else:
                    fb = _feedback_results(pe.feedback, res, rows.index(i))
                    msg = None if fb is None else feedback_message(fb, k, limit)
                if msg is None:
                    e.done = True
                    continue
                todo.append((pid, i, repair_messages(e.messages, e.answer, msg)))
        if not todo:  # every episode has ended: the later turns keep the last verdicts
            for pe in probs.values():
                pe.correct[:, turn:] = pe.correct[:, [turn - 1]]
            break
        # 2. the revisions (from the cache where present)
        role = f"{CODE}#turn{turn + 1}"
        revised: dict[tuple[str, int], str] = {}
        need = []
        for pid, i, conv in todo:
            got = cache.get(pid, role, len(probs[pid].episodes)) if cache is not None else None
            if got is not None and got[i] is not None:
                revised[(pid, i)] = got[i]
            else:
                need.append((pid, i, conv))
        if need:
            texts = engine.generate([c for _, _, c in need], 1)
            for (pid, i, _), out in zip(need, texts):
                revised[(pid, i)] = out[0] if out else ""
        for pid, i, conv in todo:
            pe = probs[pid]
            pe.episodes[i] = Episode(conv, revised[(pid, i)],
                                     parse_program(revised[(pid, i)], pe.task), turns=turn + 1)
        if cache is not None:
            for pid in dict.fromkeys(p for p, _, _ in need):
                cache.put(pid, role, [revised.get((pid, i))
                                      for i in range(len(probs[pid].episodes))])
        # 3. the revised solutions on the gold tests (verdicts only: nothing here is shown)
        gjobs, gwhere = [], []
        for pid in dict.fromkeys(p for p, _, _ in todo):
            pe = probs[pid]
            rows = [i for p, i, _ in todo if p == pid]
            ok = [i for i in rows if pe.episodes[i].program.ok]
            for i in rows:
                if not pe.episodes[i].program.ok:
                    pe.correct[i, turn] = 0.0
            if ok and pe.task.tests:
                gjobs.append(pe.task.job([pe.episodes[i].program.code for i in ok],
                                         id=f"{pid}#gold{turn + 1}"))
                gwhere.append((pe, ok))
            elif ok:
                pe.correct[ok, turn] = 0.0
        for (pe, ok), res in zip(gwhere, executor.run(gjobs) if gjobs else []):
            for r, i in enumerate(ok):
                pe.correct[i, turn] = gold_verdict(res, r)
    return probs
