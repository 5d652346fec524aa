"""From completions to a pass matrix over *all* of them: parse, build one executor job per
problem (gold tests first, then the generated tests), and put the executor's matrix back in place
with all-False rows and columns for what did not parse. Pure but for the parsers; shared by
training and evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .roles import parse_program, parse_test
from .sandbox.protocol import HARNESS
from .tasks.model import Task

NOT_RUN = "syntax_error"  # the judge's outcome for a program it could not compile (none ran)


class JobRefused(RuntimeError):
    """The executor answered one problem's job with an error instead of a matrix (a test text
    no program can read, such as a lone surrogate; a limit it refuses): that problem has no
    verdicts, and the batch, the evaluation or the training step goes on without it, counting
    it. The message is one line naming the problem."""

    def __init__(self, problem: str, why: str):
        super().__init__(f"the executor refused the job of problem {problem}: {why}")
        self.problem, self.why = problem, why


@dataclass
class ProblemBatch:
    """One problem's k code and k test completions, parsed, and the job that judges them."""

    task: Task
    programs: list  # ParsedProgram
    tests: list     # ParsedTest
    n_gold: int
    job: dict | None  # None: nothing to run (no parsed program, or no test at all)
    code_lengths: list[int] = field(default_factory=list)
    test_lengths: list[int] = field(default_factory=list)
    # the problem's known wrong programs (mutants, published incorrect solutions) against the same
    # gold and generated tests: a job of their own, rows of their own (:func:`known_matrix`)
    known_job: dict | None = None


def prepare(task: Task, code_texts: Sequence[str], test_texts: Sequence[str],
            max_gold_tests: int | None = None, code_lengths=(), test_lengths=()) -> ProblemBatch:
    """Parse the completions and build the executor job: the parsed programs against the first
    ``max_gold_tests`` gold tests (all with None), then the parsed generated tests. Unparsed
    programs and tests are left out of the job (their row / column of :func:`full_matrix` is
    all False)."""
    programs = [parse_program(c, task) for c in code_texts]
    tests = [parse_test(c, task) for c in test_texts]
    gold = list(task.tests if max_gold_tests is None else task.tests[:max_gold_tests])
    run_programs = [p.code for p in programs if p.ok]
    run_tests = gold + [t.test for t in tests if t.ok]
    job = task.job(run_programs, run_tests) if run_programs and run_tests else None
    return ProblemBatch(task, programs, tests, len(gold), job, list(code_lengths),
                        list(test_lengths))


def full_matrix(batch: ProblemBatch, result: dict | None) -> np.ndarray:
    """The n x (t + m) pass matrix over *all* completions (unparsed rows/columns all False);
    :class:`JobRefused` where the executor answered the job with an error."""
    n, t, m = len(batch.programs), batch.n_gold, len(batch.tests)
    full = np.zeros((n, t + m), dtype=bool)
    if batch.job is None:
        return full
    if result is None or "passed" not in result:
        raise JobRefused(batch.task.id, (result or {}).get("error", "no result"))
    shape = (sum(p.ok for p in batch.programs), t + sum(x.ok for x in batch.tests))
    ran = np.asarray(result["passed"], dtype=bool)
    if ran.shape != shape:
        raise RuntimeError(f"the executor's matrix for problem {batch.task.id} has shape "
                           f"{ran.shape}, expected {shape}")
    rows = [i for i, p in enumerate(batch.programs) if p.ok]
    cols = list(range(t)) + [t + j for j, x in enumerate(batch.tests) if x.ok]
    full[np.ix_(rows, cols)] = ran
    return full


def lost_matrix(batch: ProblemBatch, result: dict | None) -> np.ndarray:
    """The n x (t + m) cells of :func:`full_matrix` whose verdict the harness lost: their outcome
    says the judge, its container or its node failed (``sandbox_error``, after the executor's
    re-run on a fresh judge), not the program. Those cells are False in :func:`full_matrix`, but
    unknown: nothing may count them as wrong. All False for a result without outcomes."""
    n, t, m = len(batch.programs), batch.n_gold, len(batch.tests)
    lost = np.zeros((n, t + m), dtype=bool)
    outcomes = (result or {}).get("outcomes")
    if batch.job is None or outcomes is None:
        return lost
    rows = [i for i, p in enumerate(batch.programs) if p.ok]
    cols = list(range(t)) + [t + j for j, x in enumerate(batch.tests) if x.ok]
    ran = np.array([[o in HARNESS for o in row] for row in outcomes], dtype=bool)
    if ran.shape == (len(rows), len(cols)):
        lost[np.ix_(rows, cols)] = ran
    return lost


def known_wrong(task: Task, n: int) -> list[str]:
    """Up to ``n`` programs known to be wrong for ``task``: the task world's mutants or the
    incorrect solutions a dataset publishes (CodeContests' ``incorrect_solutions``), in order."""
    if n <= 0:
        return []
    got = task.metadata.get("mutants") or task.metadata.get("incorrect") or []
    return [str(p) for p in list(got)[:n] if isinstance(p, str) and p.strip()]


def with_known_wrong(batch: ProblemBatch, programs: Sequence[str]) -> ProblemBatch:
    """``batch`` with a job that runs ``programs`` against its gold tests and its parsed
    generated tests (none where there is nothing to run)."""
    if programs and batch.job is not None and any(x.ok for x in batch.tests):
        batch.known_job = dict(batch.job, programs=list(programs), id=f"{batch.task.id}#known")
    return batch


def known_matrix(batch: ProblemBatch, result: dict | None) -> tuple[np.ndarray, np.ndarray]:
    """The known wrong programs' k_w x (t + m) pass matrix (columns as :func:`full_matrix`'s,
    unparsed tests False) and its lost cells; empty (0 rows) where there is no known job or the
    executor refused it."""
    t, m = batch.n_gold, len(batch.tests)
    job = batch.known_job
    if job is None or not result or "passed" not in result:
        return np.zeros((0, t + m), dtype=bool), np.zeros((0, t + m), dtype=bool)
    kw = len(job["programs"])
    ran = np.asarray(result["passed"], dtype=bool)
    cols = list(range(t)) + [t + j for j, x in enumerate(batch.tests) if x.ok]
    if ran.shape != (kw, len(cols)):
        raise RuntimeError(f"the executor's matrix for problem {batch.task.id}'s known wrong "
                           f"programs has shape {ran.shape}, expected {(kw, len(cols))}")
    passed = np.zeros((kw, t + m), dtype=bool)
    lost = np.zeros((kw, t + m), dtype=bool)
    passed[:, cols] = ran
    outcomes = result.get("outcomes")
    if outcomes is not None:
        lost[:, cols] = np.array([[o in HARNESS for o in row] for row in outcomes],
                                 dtype=bool).reshape(kw, len(cols))
    return passed, lost


def program_rows(batch: ProblemBatch, result: dict | None) -> np.ndarray:
    """Which of the n solutions are programs: a boolean mask over ``batch.programs`` that is
    False for a row that never ran, whatever the tests: a completion the parser found no program
    in (no code block, text that is not Python, a functional completion without its entry
    point: ``ok=False``), or one the judge could not compile (``syntax_error`` in every cell of
    its row: what ``ast.parse`` accepts and ``compile`` refuses, a ``return`` outside a
    function). A program that ran and crashed, on import or on its input, is a program: the
    judge reports both as ``runtime_error`` and cannot tell them apart, and the crash is the
    program's own (docs/CORE.md). A row that passed any cell is always a program, so a mask
    from here only ever takes credit away (``rewards.cure_test_rewards``)."""
    program = np.array([p.ok for p in batch.programs], dtype=bool)
    if batch.job is None or not result or "outcomes" not in result:
        return program
    rows = [i for i, p in enumerate(batch.programs) if p.ok]
    outcomes = result["outcomes"]
    if len(outcomes) != len(rows):
        return program
    for i, outs in zip(rows, outcomes):
        if outs and all(o == NOT_RUN for o in outs):
            program[i] = False
    return program
