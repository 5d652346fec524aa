"""Scoring solutions that already exist: a JSONL of samples in evalplus's format
(``task_id`` plus ``solution``, a whole program, or ``completion``, appended to the task's
prompt), judged on a benchmark's gold tests.

``pass@1`` is evalplus's: the mean over tasks of the share of that task's samples that pass. On
the "+" benchmarks a sample passes when it passes the base *and* the plus inputs (evalplus's
"base + extra tests" figure) and ``pass@1_base`` is the base-input figure; each set of inputs runs
as one cell that stops at the first failing input. With n samples per task, ``pass@k`` (unbiased,
Chen et al. 2021 Eq. 1) is reported for every k in (1, 10, 100) not above the smallest n.

A sample whose verdict the harness lost (a ``sandbox_error`` cell, after the executor's re-run on
a fresh judge, and no other input failing it) is *undecided*, not wrong: it is left out of its
task's figures, ``None`` in ``per_task``, and counted apart (``sandbox_errors``,
``samples_undecided``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..metrics import pass_at_k
from ..sandbox.protocol import HARNESS
from ..tasks.model import TaskSet


class SampleError(ValueError):
    """A samples file that cannot be scored; the message names the line."""


@dataclass
class SampleVerdicts:
    task_id: str
    base: list[bool] = field(default_factory=list)
    plus: list[bool] = field(default_factory=list)
    outcomes: list[list[str]] = field(default_factory=list)
    # the harness lost a cell and no other input fails the sample: its verdict is unknown
    undecided_base: list[bool] = field(default_factory=list)
    undecided: list[bool] = field(default_factory=list)
    sandbox_errors: int = 0

    def decided(self, which: str) -> list[bool]:
        """The verdicts (``base`` or ``plus``) of the decided samples."""
        und = self.undecided_base if which == "base" else self.undecided
        und = und or [False] * len(getattr(self, which))
        return [v for v, u in zip(getattr(self, which), und) if not u]


def sample_task_ids(path: Path) -> set[str] | None:
    """The task ids a samples file names (None if it cannot be read: ``read_samples`` then says
    why, naming the line)."""
    ids = set()
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line) if line.strip() else None
                except json.JSONDecodeError:
                    return None
                if isinstance(rec, dict) and "task_id" in rec:
                    ids.add(str(rec["task_id"]))
    except OSError:
        return None
    return ids


def read_samples(path: Path, taskset: TaskSet) -> dict[str, list[str]]:
    """task_id -> programs, in file order. A line naming a task the benchmark lacks, or with
    neither ``solution`` nor ``completion``, is an error naming the line (before anything runs)."""
    tasks = {t.id: t for t in taskset}
    out: dict[str, list[str]] = {}
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise SampleError(f"cannot read samples {path}: {e.strerror}") from None
    with f:
        for k, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise SampleError(f"{path} line {k}: not valid JSON ({e.msg})") from None
            if not isinstance(rec, dict) or "task_id" not in rec:
                raise SampleError(f"{path} line {k}: no task_id")
            tid = str(rec["task_id"])
            if tid not in tasks:
                raise SampleError(f"{path} line {k}: task {tid!r} is not in {taskset.name} "
                                  f"({len(tasks)} tasks, e.g. {next(iter(tasks), '-')!r})")
            if isinstance(rec.get("solution"), str):
                program = rec["solution"]
            elif isinstance(rec.get("completion"), str):
                task = tasks[tid]
                program = (task.program_prefix or task.prompt) + rec["completion"]
            else:
                raise SampleError(f"{path} line {k} ({tid}): needs a 'solution' or 'completion' string")
            out.setdefault(tid, []).append(program)
    if not out:
        raise SampleError(f"{path}: no samples")
    return out


def score_samples(taskset: TaskSet, samples: dict[str, list[str]], executor,
                  progress=None) -> tuple[dict, list[SampleVerdicts]]:
    """Run every sample against its task's gold tests; returns (summary, per-task verdicts)."""
    tasks = {t.id: t for t in taskset}
    order = [t.id for t in taskset if t.id in samples]
    jobs = [tasks[tid].job(samples[tid]) for tid in order]
    results = executor.run(jobs, progress=progress)
    verdicts, refused = [], []
    for tid, res in zip(order, results):
        if "passed" not in res:  # left out and counted; the other tasks are scored
            refused.append({"task_id": tid, "error": f"the executor refused the job of problem "
                                                     f"{tid}: {res.get('error', 'no result')}"})
            continue
        m = np.asarray(res["passed"], dtype=bool).reshape(len(samples[tid]), -1)
        nb = tasks[tid].metadata.get("base_tests", m.shape[1])
        base = m[:, :nb].all(axis=1) if nb else np.ones(m.shape[0], dtype=bool)
        outcomes = res.get("outcomes", [])
        lost = np.array([[o in HARNESS for o in row] for row in outcomes],
                        dtype=bool).reshape(m.shape) if outcomes else np.zeros(m.shape, bool)
        failed = ~m & ~lost
        verdicts.append(SampleVerdicts(
            tid, base.tolist(), m.all(axis=1).tolist(), outcomes,
            undecided_base=(lost[:, :nb].any(axis=1) & ~failed[:, :nb].any(axis=1)).tolist(),
            undecided=(lost.any(axis=1) & ~failed.any(axis=1)).tolist(),
            sandbox_errors=int(lost.sum())))
    return summarize(taskset, verdicts, refused), verdicts


def summarize(taskset: TaskSet, verdicts: list[SampleVerdicts], refused=()) -> dict:
    """pass@1 (and pass@10, @100 where every task has that many samples) over the tasks scored;
    ``tasks_refused``: the tasks whose job the executor refused (left out, each with its
    one-line error); ``rows_skipped``: the rows the loader could not use; ``sandbox_errors`` and
    ``samples_undecided``: the cells the harness lost and the samples they leave undecided (left
    out of the figures)."""
    plus_set = any("base_tests" in t.metadata for t in taskset)
    ns = np.array([len(v.plus) for v in verdicts])
    out = {"benchmark": taskset.name, "source": taskset.origin, "tasks": len(verdicts),
           "tasks_without_samples": len(taskset) - len(verdicts) - len(refused),
           "samples": int(ns.sum()),
           # the harness's failures, apart from the model's: left out of the figures below
           "sandbox_errors": sum(v.sandbox_errors for v in verdicts),
           "samples_undecided": sum(sum(v.undecided) for v in verdicts)}
    if refused:
        out["tasks_refused"] = list(refused)
    if taskset.skipped:
        out["rows_skipped"] = list(taskset.skipped)
    if not verdicts:
        return out
    for key, field_ in (("pass@1", "plus"), ("pass@1_base", "base")):
        if key == "pass@1_base" and not plus_set:
            continue
        decided = [v.decided(field_) for v in verdicts]
        out[key] = _mean([np.mean(d) if d else None for d in decided])
        for k in (10, 100):
            if ns.min() >= k:
                name = key.replace("@1", f"@{k}")
                out[name] = _mean([pass_at_k(len(d), int(np.sum(d)), k) if len(d) >= k
                                   else None for d in decided])
    return out


def _mean(values: list) -> float | None:
    """The mean of the values a task has (None: every sample of the task undecided)."""
    kept = [x for x in values if x is not None]
    return float(np.mean(kept)) if kept else None


def per_task(verdicts: list[SampleVerdicts]) -> dict:
    """Each task's verdicts; None for a sample the harness left undecided."""
    def mark(values, undecided):
        return [None if u else v for v, u in zip(values, undecided or [False] * len(values))]
    return {v.task_id: {"base": mark(v.base, v.undecided_base), "plus": mark(v.plus, v.undecided)}
            for v in verdicts}
