"""Training in repair turns: after the first turn of a generation batch is scored as usual,
each code row whose solution fails its *feedback tests* is revised by the policy, shown at most
``repair_max_failing`` failing tests (:func:`coevo_code.repair.feedback_message`), for up to
``repair_turns`` turns in all. The gold tests judge every turn's solutions; the credit rule
(:func:`coevo_code.repair.turn_credit`) turns those verdicts into each row's reward, and the
tester earns :func:`coevo_code.repair.credit_for_repairs` for the tests that led to a fix.

The rows of turn t (t >= 2) form, per problem with an open row, one group of ``k`` revisions
(:func:`coevo_code.repair.revision_parents`): the same problem and the same turn, so their
advantages compare like with like; with ``groups="solution"`` the ``k`` revisions of one open
row (drawn with the seeded generator), so they share one conversation. Each revision row's
prompt is the whole conversation so far (the coder's prompt, the earlier answers, the
feedback): the trainer trains on the revision's own tokens only, and feedback, being prompt, is
never in the loss.

Feedback tests: ``self``, the tests the policy wrote for the problem in this step (the tester's
tests, which then earn the repair credit), or ``public``, the problem's examples. Never the gold
tests: the feedback job holds the feedback tests only, and the gold job's verdicts are never
shown. Side effects: the executor and the trainer's ``reviser`` (generation); the rules are pure
(:mod:`coevo_code.repair`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..repair import (FIELD_CHARS, MAX_FAILING, TURN_SHARES, FeedbackResult, agreed_tests,
                      feedback_message, repair_messages, revision_parents, credit_for_repairs,
                      turn_credit)
from ..roles import CODE, TEST, parse_program, parse_test
from ..evaluation.repair import agree, gold_verdict
from ..sandbox.protocol import OK
from ..tasks.model import Task

REPAIR_FEEDBACK = ("self", "public")
REPAIR_KEYS = ("repair_rows", "repair_open", "repair_fixed", "repair_broken",
               "repair_test_credit")


@dataclass
class Node:
    """One code row of one turn: its conversation (the prompt it was written for), its text,
    its parsed program, its gold reward and correctness, and the feedback it gets."""

    task_index: int
    prompt: list
    text: str
    program: object          # ParsedProgram
    reward: float | None     # CURE's code reward (share of gold tests passed); None: no signal
    correct: float           # 1.0 / 0.0 / NaN (undecided)
    parent: int | None = None
    message: str | None = None     # the feedback shown to its revisions (None: episode ended)
    shown: list = field(default_factory=list)  # generated tests shown (indices), self feedback


@dataclass
class TurnRows:
    """The rows of one later turn, in the order the trainer trains on them: problem by
    problem, ``k`` each; ``rewards`` after the credit rule."""

    turn: int
    task_index: list
    prompts: list
    texts: list
    rewards: list


def _correct(reward) -> float:
    return float("nan") if reward is None else float(reward == 1.0)


class RepairTurns:
    """``RepairTurns(turns, feedback, credit, test_credit, ...)``; the trainer sets
    ``reviser(conversations) -> texts`` (one completion each). :meth:`run` takes a scored
    first turn and gives the rewards of its rows after the repair credit, the rows of the later
    turns (:attr:`later`) and the figures (``REPAIR_KEYS``)."""

    def __init__(self, turns: int, feedback: str = "self", credit: str = "turn",
                 test_credit: float = 1.0, max_failing: int = MAX_FAILING,
                 field_chars: int = FIELD_CHARS, max_gold_tests: int | None = None,
                 all_passed: bool = False, time_limit_s: float | None = None,
                 groups: str = "problem", seed: int = 0, agreement: int = 0):
        if feedback not in REPAIR_FEEDBACK:
            raise ValueError(f"repair_feedback {feedback!r}: choose from "
                             f"{', '.join(REPAIR_FEEDBACK)}")
        self.turns, self.feedback, self.credit = turns, feedback, credit
        self.test_credit, self.max_failing, self.field_chars = test_credit, max_failing, field_chars
        self.max_gold_tests, self.all_passed = max_gold_tests, all_passed
        self.time_limit_s = time_limit_s
        revision_parents([], 0, groups)  # a clear error for an unknown mode, before any batch
        agreed_tests([], agreement)
        self.agreement = agreement
        self.groups, self.rng = groups, np.random.default_rng(seed)
        self.reviser: Callable[[list], list] | None = None
        self.later: list[TurnRows] = []
        self.exec_seconds = 0.0  # the last batch's time in the executor (feedback and gold jobs)

    def _run(self, executor, jobs: list) -> list:
        if not jobs:
            return []
        t = time.perf_counter()
        try:
            return executor.run(jobs)
        finally:
            self.exec_seconds += time.perf_counter() - t

    def _job(self, task: Task, programs, tests=None, **fields) -> dict:
        job = task.job(programs, tests, **fields)
        if self.time_limit_s is not None:
            job["time_limit_s"] = self.time_limit_s
        return job

    def _gold(self, task: Task) -> list:
        return list(task.tests if self.max_gold_tests is None else
                    task.tests[:self.max_gold_tests])

    # ---- one batch --------------------------------------------------------------------------------
    def run(self, items, prompts: Sequence, rewards: list, groups: dict, tasks: Sequence[Task],
            executor) -> tuple[list, dict]:
        """``items``: the batch's rows (task_index, role, text, length), ``prompts`` their
        conversations, ``rewards`` their first-turn rewards (None: no signal), ``groups`` the
        rows by problem and role. Returns the rewards after the repair credit and the figures;
        the later turns' rows are in :attr:`later`."""
        if self.reviser is None:
            raise RuntimeError("repair turns need the trainer's reviser (CoevoTrainer sets it)")
        order = list(groups)
        nodes: dict[int, list[list[Node]]] = {}
        fb_tests: dict[int, tuple[list, list]] = {}   # problem -> (feedback tests, test index)
        for ti in order:
            task, g = tasks[ti], groups[ti]
            nodes[ti] = [[Node(ti, list(prompts[p]), items[p].text,
                               parse_program(items[p].text, task), rewards[p],
                               _correct(rewards[p])) for p in g[CODE]]]
            if self.feedback == "public":
                fb_tests[ti] = (list(task.examples), [None] * len(task.examples))
            else:
                parsed = [parse_test(items[p].text, task) for p in g[TEST]]
                idx = [j for j, x in enumerate(parsed) if x.ok]
                fb_tests[ti] = ([parsed[j].test for j in idx], idx)
        k = {ti: len(groups[ti][CODE]) for ti in order}
        self.later = []
        self.exec_seconds = 0.0
        opened = 0
        live = order
        for turn in range(2, self.turns + 1):
            open_rows = self._feedback({ti: nodes[ti] for ti in live}, fb_tests, tasks, executor,
                                       first=turn == 2)
            live = [ti for ti in live if open_rows[ti]]
            if not live:
                break
            opened += sum(len(open_rows[ti]) for ti in live)
            new: list[Node] = []
            for ti in live:
                prev = nodes[ti][-1]
                pick = (int(self.rng.integers(len(open_rows[ti])))
                        if self.groups == "solution" else 0)
                for p in revision_parents(open_rows[ti], k[ti], self.groups, pick):
                    conv = repair_messages(prev[p].prompt, prev[p].text, prev[p].message)
                    new.append(Node(ti, conv, "", None, None, float("nan"), parent=p))
            texts = self.reviser([n.prompt for n in new])
            if len(texts) != len(new):
                raise RuntimeError(f"the reviser gave {len(texts)} completions for {len(new)} "
                                   f"conversations")
            for n, text in zip(new, texts):
                n.text = text
                n.program = parse_program(text, tasks[n.task_index])
            self._judge(new, tasks, executor)
            for ti in live:
                nodes[ti].append([n for n in new if n.task_index == ti])
            self.later.append(TurnRows(turn, [n.task_index for n in new],
                                       [n.prompt for n in new], [n.text for n in new], []))
        return self._credit(rewards, groups, nodes, fb_tests, order, opened)

    def _feedback(self, nodes, fb_tests, tasks, executor, first=False) -> dict[int, list[int]]:
        """Run each problem's last turn on its feedback tests (outputs returned); set each
        row's message (None: its episode ends) and the tests it shows; the open rows. After the
        first turn, with ``agreement``, each problem keeps (in ``fb_tests``, for every later
        turn) only the tests that many of its first-turn solutions pass
        (:func:`coevo_code.repair.agreed_tests`)."""
        jobs, where = [], []
        for ti, turns in nodes.items():
            last = turns[-1]
            tests = fb_tests[ti][0]
            rows = [i for i, n in enumerate(last) if n.program.ok]
            if rows and tests:
                jobs.append(self._job(tasks[ti], [last[i].program.code for i in rows], tests,
                                      return_outputs=True, id=f"{tasks[ti].id}#feedback"))
                where.append((ti, rows))
        results = dict(zip((ti for ti, _ in where),
                           zip((r for _, r in where), self._run(executor, jobs))))
        open_rows: dict[int, list[int]] = {}
        for ti, turns in nodes.items():
            rows, res = results.get(ti, ([], None))
            if first and self.agreement and fb_tests[ti][0]:
                keep, res = agree(res, len(fb_tests[ti][0]), self.agreement)
                fb_tests[ti] = ([fb_tests[ti][0][j] for j in keep],
                                [fb_tests[ti][1][j] for j in keep])
            tests, index = fb_tests[ti]
            open_rows[ti] = []
            for i, n in enumerate(turns[-1]):
                n.message, n.shown = None, []
                if not n.program.ok:
                    n.message = feedback_message([], program_ok=False)
                elif tests and res is not None and "outcomes" in res:
                    r = rows.index(i)
                    outs = (res.get("outputs") or [[None] * len(tests)])[r]
                    fb = [FeedbackResult(t, o, out) for t, o, out in
                          zip(tests, res["outcomes"][r], outs)]
                    n.message = feedback_message(fb, self.max_failing, self.field_chars)
                    failing = [j for j, x in enumerate(fb) if not x.passed]
                    n.shown = [index[j] for j in failing[:self.max_failing]
                               if index[j] is not None]
                if n.message is not None:
                    open_rows[ti].append(i)
        return open_rows

    def _judge(self, new: list[Node], tasks, executor) -> None:
        """The revisions on the gold tests: CURE's code reward and correctness (a program that
        did not parse: reward 0; a lost cell and no decided failure: no signal)."""
        jobs, where = [], []
        for ti in dict.fromkeys(n.task_index for n in new):
            rows = [n for n in new if n.task_index == ti]
            gold = self._gold(tasks[ti])
            for n in rows:
                if not n.program.ok:
                    n.reward, n.correct = 0.0, 0.0
            ok = [n for n in rows if n.program.ok]
            if ok and gold:
                jobs.append(self._job(tasks[ti], [n.program.code for n in ok], gold,
                                      id=f"{tasks[ti].id}#revision"))
                where.append(ok)
        for ok, res in zip(where, self._run(executor, jobs)):
            for r, n in enumerate(ok):
                correct = gold_verdict(res, r)  # NaN: refused, or undecided (a lost cell)
                if np.isnan(correct):
                    continue
                passed = np.array([o == OK for o in res["outcomes"][r]])
                n.correct = correct
                n.reward = float(passed.all()) if self.all_passed else float(passed.mean())

    def _credit(self, rewards, groups, nodes, fb_tests, order, opened) -> tuple[list, dict]:
        out = list(rewards)
        per_turn_rows: dict[int, list] = {}
        fixed = broken = revised_wrong = revised_right = 0.0
        credits = []
        for ti in order:
            turns = nodes[ti]
            R = [[n.reward for n in t] for t in turns]
            P = [[]] + [[n.parent for n in t] for t in turns[1:]]
            C = turn_credit(R, P, self.credit)
            for p, c in zip(groups[ti][CODE], C[0]):
                out[p] = c
            for t in range(1, len(turns)):
                per_turn_rows.setdefault(t + 1, []).extend(C[t])
            # the tester's credit (self feedback): transitions from every revised row
            shown, before, after = [], [], []
            for t in range(len(turns) - 1):
                for i, n in enumerate(turns[t]):
                    kids = [m.correct for m in turns[t + 1] if m.parent == i]
                    kids = [c for c in kids if not np.isnan(c)]
                    if not kids:
                        continue
                    a = float(np.mean(kids))
                    shown.append(n.shown)
                    before.append(None if np.isnan(n.correct) else n.correct)
                    after.append(a)
                    if n.correct == 0.0:
                        revised_wrong += 1
                        fixed += a
                    elif n.correct == 1.0:
                        revised_right += 1
                        broken += 1.0 - a
            if self.feedback == "self" and self.test_credit:
                tests = groups[ti][TEST]
                credit, _, _ = credit_for_repairs(len(tests), shown, before, after)
                for p, c in zip(tests, credit):
                    if out[p] is not None:
                        out[p] = out[p] + self.test_credit * float(c)
                        credits.append(float(c))
        for tr in self.later:
            tr.rewards = per_turn_rows.get(tr.turn, [])
        figures = {"repair_rows": sum(len(tr.texts) for tr in self.later),
                   "repair_open": opened,
                   "repair_fixed": fixed / revised_wrong if revised_wrong else None,
                   "repair_broken": broken / revised_right if revised_right else None,
                   "repair_test_credit": float(np.mean(credits)) if credits else None}
        return out, figures


def turn_keys(turns: int) -> tuple[str, ...]:
    """The held-out evaluation's columns of a run in ``turns`` turns (``eval.jsonl``)."""
    return tuple(f"code_acc_turn{t}" for t in range(1, turns + 1)) + TURN_SHARES
