"""Repair turns, the pure core: the feedback a coder is shown after a turn whose
solution failed its *feedback tests*, the conversation of the next turn, and the per-turn
metrics. Plain values in, plain values out; running programs and generating live at the edges
(:mod:`coevo_code.evaluation.repair`).

What a feedback message may show is decided by what it is given: :func:`feedback_message`
receives the feedback tests and their results only (never a :class:`~coevo_code.tasks.model.Task`),
so the gold and hidden tests of a problem cannot reach a prompt through it. The feedback tests
are the benchmark's public examples (``public``: what the statement shows already) or the
model's own generated tests (``self``), chosen by :func:`feedback_tests`, which reads a task's
``examples`` and never its ``tests``.

The message lists at most ``k`` failing tests (default :data:`MAX_FAILING` = 2, as rLLM's code
agent), in the order given; for each: the input (stdio) or the call (functional), the expected
output, and what the program did: its output, or the outcome (timeout, runtime error...).
Every shown field is cut to :data:`FIELD_CHARS` characters (a marker says how many were left
out).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .tasks.model import Task, TestCase

MAX_FAILING = 2      # failing tests shown per feedback message
FIELD_CHARS = 400    # characters of each shown field (input, expected, actual)
FEEDBACK_MODES = ("public", "self")  # tester:MODEL: "self" with that model's tests (coevo eval)

# how an outcome reads in a feedback message (the judge's codes, coevo_code.sandbox.protocol)
OUTCOME_TEXT = {
    "wrong_answer": "wrong answer",
    "runtime_error": "runtime error (the program raised an exception or exited non-zero)",
    "timeout": "time limit exceeded",
    "memory_limit": "memory limit exceeded",
    "output_limit": "output limit exceeded",
    "syntax_error": "the program does not compile",
    "compile_error": "the program does not compile",
    "sandbox_error": "not judged (the sandbox failed)",
}

NO_PROGRAM = ("Your previous answer did not contain a complete Python program in a ```python "
              "code block. Write the complete solution in one ```python code block at the end.")
HEADER = ("Your solution failed {n} of {total} test{s} it was checked against. "
          "{shown}Fix the program, think first, then put the complete corrected program in one "
          "```python code block at the end.")


def truncate(text: str | None, limit: int = FIELD_CHARS) -> str:
    """``text`` (its final newlines dropped) cut to at most ``limit`` characters plus a marker
    naming how many were cut (``None`` is the empty string)."""
    text = "" if text is None else str(text).rstrip("\n")
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit} more characters]"


@dataclass(frozen=True)
class FeedbackResult:
    """One feedback test and what the program did on it: the judge's outcome (``ok``,
    ``wrong_answer``, ``timeout``...) and the output it returned (stdio: what the program
    printed; functional: what the judge sent back, may be empty)."""

    test: TestCase
    outcome: str
    output: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == "ok"


def _functional_parts(code: str) -> tuple[str, str | None]:
    """``assert CALL == EXPECTED`` as (CALL, EXPECTED); any other test as (code, None)."""
    try:
        tree = ast.parse(code.strip())
        node = tree.body[0] if len(tree.body) == 1 else None
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and \
                len(node.test.ops) == 1 and isinstance(node.test.ops[0], (ast.Eq, ast.Is)):
            a = ast.get_source_segment(code.strip(), node.test.left)
            b = ast.get_source_segment(code.strip(), node.test.comparators[0])
            if a is not None and b is not None:
                return a, b
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    return code.strip(), None


def describe_failure(r: FeedbackResult, limit: int = FIELD_CHARS) -> str:
    """One failing test as shown to the coder, every field cut to ``limit`` characters."""
    what = OUTCOME_TEXT.get(r.outcome, r.outcome)
    if r.test.kind == "stdio":
        lines = [f"Input:\n{truncate(r.test.input, limit)}",
                 f"Expected output:\n{truncate(r.test.output, limit)}"]
        if r.outcome == "wrong_answer":
            lines.append(f"Your output:\n{truncate(r.output, limit)}")
        else:
            lines.append(f"Result: {what}")
            if r.output:
                lines.append(f"Your output before that:\n{truncate(r.output, limit)}")
        return "\n".join(lines)
    call, expected = _functional_parts(r.test.code or "")
    if expected is None:
        lines = [f"Test:\n{truncate(call, limit)}"]
    else:
        lines = [f"Call:\n{truncate(call, limit)}", f"Expected:\n{truncate(expected, limit)}"]
    lines.append("Result: " + ("the assertion failed (wrong result)" if r.outcome == "wrong_answer"
                               else what))
    if r.output:
        lines.append(f"Output:\n{truncate(r.output, limit)}")
    return "\n".join(lines)


def feedback_message(results: Sequence[FeedbackResult], k: int = MAX_FAILING,
                     limit: int = FIELD_CHARS, program_ok: bool = True) -> str | None:
    """The user message of the next turn, or None when there is nothing to repair (every
    feedback test passed, or there is none). ``results``: the feedback tests (only those) and
    what the solution did on each; at most ``k`` failing ones are shown, in order. A solution
    with no program (``program_ok=False``) is told so, whatever the tests."""
    if not program_ok:
        return NO_PROGRAM
    failing = [r for r in results if not r.passed]
    if not failing:
        return None
    shown = failing[:max(0, k)]
    n, total = len(failing), len(results)
    intro = ""
    if shown:
        intro = ("Here " + ("is the failing test" if len(shown) == 1 else
                            f"are {len(shown)} of the failing tests") + ".\n\n" +
                 "\n\n".join(f"Test {i}:\n{describe_failure(r, limit)}"
                             for i, r in enumerate(shown, 1)) + "\n\n")
    return HEADER.format(n=n, total=total, s="" if total == 1 else "s", shown=intro)


def repair_messages(previous: list[dict], answer: str, feedback: str) -> list[dict]:
    """The conversation of the next turn: the previous one (the coder's prompt,
    :func:`coevo_code.roles.coder_messages`, and any earlier turns), the model's answer, and
    the feedback as a user message. ``previous`` is not changed."""
    return [*previous, {"role": "assistant", "content": answer},
            {"role": "user", "content": feedback}]


def feedback_tests(task: Task, mode: str, generated: Sequence = ()) -> list[TestCase]:
    """The tests a solution of ``task`` is checked against between turns: ``public``, the
    task's examples; ``self``, the parsed generated tests ``generated`` (ParsedTest, those that
    parsed). Never the task's gold tests."""
    if mode == "public":
        return list(task.examples)
    if mode == "self":
        return [p.test for p in generated if p.ok]
    raise ValueError(f"feedback tests {mode!r} are not built (choose from "
                     f"{', '.join(FEEDBACK_MODES)})")


def agreed_tests(passed, at_least: int) -> list[int]:
    """The feedback tests that at least ``at_least`` of the problem's first-turn solutions pass:
    the columns of ``passed`` (solutions x feedback tests, bool; one row per solution that ran).
    A generated test no solution agrees with is more often a wrong test than a found bug (CodeT's
    dual agreement, Chen et al. 2023, Sec. 2), and shown to a right solution it sends it into a
    revision that can only break it; the filter keeps label-free feedback label-free (the pass
    matrix is the policy's own). ``at_least`` 0: every test; no row and ``at_least`` >= 1:
    none."""
    if at_least < 0:
        raise ValueError(f"feedback agreement {at_least}: at least 0 solutions")
    passed = np.asarray(passed, dtype=bool)
    if not at_least:
        return list(range(passed.shape[1])) if passed.ndim == 2 else []
    if passed.ndim != 2 or not passed.shape[0]:
        return []
    return [int(j) for j in np.flatnonzero(passed.sum(axis=0) >= at_least)]


def take_tests(result: dict, columns: Sequence[int]) -> dict:
    """A solutions x tests job's ``result`` (``outcomes``, ``passed``, ``outputs`` where present)
    on the tests ``columns`` only, in that order; ``result`` is not changed."""
    out = dict(result)
    for key in ("outcomes", "passed", "outputs"):
        if out.get(key) is not None:
            out[key] = [[row[j] for j in columns] for row in out[key]]
    return out


def turn_metrics(correct: Sequence[np.ndarray]) -> dict:
    """Per-turn figures from each problem's ``n x T`` verdicts (1.0 correct on the gold tests
    after that turn, 0.0 wrong, NaN undecided: a lost cell). A solution whose episode ended
    early keeps its last verdict in the later columns.

    ``code_acc_turn{t}``: the mean over problems of the share of correct decided solutions
    after turn t (turn 1 is pass@1); None when no problem has a decided solution.
    ``repaired_share``: of the solutions wrong after turn 1 (and decided after turn T), the
    share correct after turn T, pooled over problems; None when there is no wrong first attempt
    (``wrong_first`` = 0). ``repaired``: how many.
    ``broken_share``: of the solutions right after turn 1 (and decided after turn T), the share
    wrong after turn T, pooled likewise: the revisions' cost, which feedback from wrong tests
    raises; None when there is no right first attempt (``right_first`` = 0). ``broken``: how
    many. Pooled over solutions, the gap between the last turn and the first is
    ``(repaired - broken) / decided`` (the per-problem means weigh problems equally)."""
    mats = [np.asarray(c, dtype=float) for c in correct]
    T = max((m.shape[1] for m in mats if m.ndim == 2), default=0)
    out: dict = {}
    for t in range(T):
        per = [float(np.nanmean(m[:, t])) for m in mats
               if m.shape[0] and np.isfinite(m[:, t]).any()]
        out[f"code_acc_turn{t + 1}"] = float(np.mean(per)) if per else None
    wrong = repaired = right = broken = 0
    for m in mats:
        if not m.shape[0]:
            continue
        first, last = m[:, 0], m[:, -1]
        w = (first == 0.0) & np.isfinite(last)
        r = (first == 1.0) & np.isfinite(last)
        wrong += int(w.sum())
        repaired += int((w & (last == 1.0)).sum())
        right += int(r.sum())
        broken += int((r & (last == 0.0)).sum())
    out["repaired_share"] = repaired / wrong if wrong else None
    out["broken_share"] = broken / right if right else None
    out["wrong_first"] = wrong
    out["repaired"] = repaired
    out["right_first"] = right
    out["broken"] = broken
    return out


TURN_SHARES = ("repaired_share", "broken_share")


def turn_figures(metrics: dict) -> dict:
    """The figures of :func:`turn_metrics` that a summary reports (accuracy after each turn and
    the two shares), without the counts."""
    return {k: v for k, v in metrics.items() if k.startswith("code_acc_turn") or k in TURN_SHARES}



# ---- training in turns: the credit of each turn and the tester's repair credit -------------------
CREDITS = ("turn", "final", "improvement")


REVISION_GROUPS = ("problem", "solution")


def revision_parents(open_rows: Sequence[int], k: int, group: str = "problem",
                     pick: int = 0) -> list[int]:
    """Which row of the previous turn each of a problem's ``k`` rows of the next turn revises,
    from the rows still open (they failed their feedback tests). No open row: no group.

    - ``problem``: the open rows taken in turn and cycled, so every open row is revised
      ``k // len(open_rows)`` or one more times and the group holds ``k`` revisions of the same
      problem and turn;
    - ``solution``: ``k`` revisions of one open row, ``open_rows[pick % len(open_rows)]``: the
      group shares one conversation, as GRPO's group shares one prompt (Shao et al. 2024,
      eq. 3), so its advantages compare answers to the same feedback only."""
    if group not in REVISION_GROUPS:
        raise ValueError(f"repair_groups {group!r}: choose from {', '.join(REVISION_GROUPS)}")
    if not len(open_rows):
        return []
    if group == "solution":
        return [int(open_rows[pick % len(open_rows)])] * k
    return [int(open_rows[j % len(open_rows)]) for j in range(k)]


def _num(x) -> float:
    return float("nan") if x is None else float(x)


def turn_credit(rewards: Sequence[Sequence], parents: Sequence[Sequence[int]],
                mode: str = "turn") -> list[list]:
    """Each row's reward under a credit rule. ``rewards[t][j]``: the reward of row j of turn
    t + 1 judged by the gold tests (None: no signal); ``parents[t][j]``: the row of turn t it
    revises (``parents[0]`` is empty). The rules (docs/TRAINING.md, "Repair turns"):

    - ``turn``: a row earns its own solution's reward: a turn is an action judged by what it
      wrote; the first turn's rewards are the single-turn run's;
    - ``final``: a row earns the reward of the episode's end (RLEF's terminal reward, given to
      every turn): a row with revisions earns the mean of its revisions' credits, a row without
      (its feedback tests passed, or the last turn) its own reward;
    - ``improvement``: a row earns its reward minus the reward of the row it revises (the first
      turn: its own reward).

    None stays None, and a credit that needs a None is None (``final``: revisions without
    signal are left out of the mean; all of them without signal gives None)."""
    if mode not in CREDITS:
        raise ValueError(f"repair credit {mode!r}: choose from {', '.join(CREDITS)}")
    R = [[None if r is None else float(r) for r in turn] for turn in rewards]
    if mode == "turn":
        return R
    if mode == "improvement":
        out = [list(R[0])]
        for t in range(1, len(R)):
            out.append([None if r is None or R[t - 1][p] is None else r - R[t - 1][p]
                        for r, p in zip(R[t], parents[t])])
        return out
    out = [list(turn) for turn in R]
    for t in range(len(R) - 2, -1, -1):  # from the last turn back: a row takes its revisions'
        kids: dict[int, list] = {}
        for j, p in enumerate(parents[t + 1]):
            kids.setdefault(p, []).append(out[t + 1][j])
        for i, got in kids.items():
            vals = [v for v in got if v is not None]
            out[t][i] = float(np.mean(vals)) if vals else None
    return out


def credit_for_repairs(n_tests: int, shown: Sequence[Sequence[int]], before: Sequence,
                         after: Sequence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tester's credit for repairs, one value per generated test (``n_tests``), from the
    revised rows of a problem: ``shown[e]`` the generated tests the feedback of row e showed,
    ``before[e]`` whether row e was correct by the gold tests (1.0 / 0.0 / None undecided),
    ``after[e]`` the share of its revisions that are correct (None: none decided).

    A test shown to a wrong solution earns that solution's share of correct revisions: it
    failed a wrong program and the revision then passed the gold tests. A test shown to a
    right solution whose revisions are not all right sent a right solution into a wrong
    revision: it earns no repair credit at all. The credit is divided by the number of rows
    revised (so it lies in [0, 1]); returns (credit, fixed, broken), the last two per test
    (the summed shares and the count of right solutions sent wrong)."""
    fixed = np.zeros(n_tests)
    broken = np.zeros(n_tests, dtype=int)
    rows = 0
    for s, b, a in zip(shown, before, after):
        if b is None or a is None or (isinstance(b, float) and np.isnan(b)) or \
                (isinstance(a, float) and np.isnan(a)):
            continue
        rows += 1
        for j in s:
            if b == 0.0:
                fixed[j] += a
            elif a < 1.0:
                broken[j] += 1
    credit = np.where(broken > 0, 0.0, fixed / rows if rows else 0.0)
    return credit, fixed, broken
