"""One co-evolution step on a generation batch, top to bottom: the algorithm of CURE (gold tests)
and of Co-RL and the self-rewarding baselines (label-free), in :meth:`CoevoStep.score_rows`.

1. group the rows by problem and role (k code rows and k test rows per problem);
2. build each problem's pass-matrix job (``scoring.prepare``; label-free: every agent's
   completions of the problem in one joint job, after swapping texts with the other agents);
3. run every job on the executor;
4. label and reward each problem (``scoring.score``: gold tests, CURE's code reward and Eq. 4;
   ``joint.score_joint``: the labeller's vote, :mod:`coevo_code.labels`);
5. place the rewards back on the rows; a row without signal gets None (the trainer masks it),
   and so does a row whose reward a cell the harness lost could have changed (``sandbox_error``
   after the executor's re-run: ``scoring.lost_rows``); a control run (``reward_control``) then
   shuffles or negates what the trainer trains on;
6. the step's metrics, pooled over every problem of the batch (``step_metrics.batch_metrics``);
   past ``max_rows_masked`` of the batch's rows masked for lost cells, the run stops
   (:class:`SandboxFailure`).

:meth:`CoevoStep.run` does 1-5 on each process's rows or on the gathered batch
(:mod:`.sharding`), then 6. The formulas live in :mod:`coevo_code.rewards` and
:mod:`coevo_code.labels`; this module only sequences them and runs the executor (its one side
effect besides the exchange of a pair).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import numpy as np

from ..labels import label_source
from ..roles import CODE, TEST
from ..tasks.model import Task
from .data import Curriculum
from .controls import control_rewards, trained_roles
from .joint import prepare_joint, score_joint
from .scoring import ProblemScore, RewardOptions, prepare, score
from .step_metrics import batch_metrics
from .sharding import Sharding

log = logging.getLogger(__name__)

MAX_ROWS_MASKED = 0.1  # the default share of a step's rows masked for lost cells that stops a run


class SandboxFailure(RuntimeError):
    """More of a step's rows were masked for cells the harness lost than ``max_rows_masked``
    allows: the sandbox, not the policy, is failing. The message (one line) names the step and
    the cause; the run's checkpoints are intact, and ``coevo train --resume`` continues."""


class Row(NamedTuple):
    """One completion of a generation batch (the reward function's columns)."""

    task_index: int
    role: str        # CODE or TEST
    text: str        # the completion's text
    length: int      # in tokens (characters when TRL gives no token ids)


@dataclass
class SharedState:
    """The run-wide state a label-free step agreed with the other agents (the exchange), which
    every process adopts: the curriculum's pass-rate estimates and whether every agent stops."""

    curriculum: dict
    stop_all: bool


@dataclass
class ScoredRows:
    """Steps 1-5 on a list of rows: a reward per row (None: no signal), every problem's
    :class:`ProblemScore`, the seconds of each phase (``execution``, ``rewards``, label-free
    ``exchange``) and, label-free, the :class:`SharedState` the exchange settled."""

    rewards: list
    scores: list
    phases: dict
    shared: SharedState | None = None


@dataclass
class Lockstep:
    """What every agent of a pair or ring must share to stay in step: the curriculum's pass-rate
    estimates (the first agent's are everyone's) and early stopping (this agent's request; set
    for all once any agent asked)."""

    curriculum: Curriculum = field(default_factory=lambda: Curriculum(enabled=False))
    stop_requested: bool = False
    stop_all: bool = False

    def adopt(self, shared: SharedState | None, main: bool) -> None:
        """Take the state the main process settled (its own process holds it already, with its
        pending estimates)."""
        if not main:
            self.curriculum.adopt(shared.curriculum if shared is not None else {})
        self.stop_all = self.stop_all or bool(shared is not None and shared.stop_all)


@dataclass
class StepOutput:
    """What one call of the step gives: a reward per row of this process (None: no signal), the
    step's metrics (every key of ``step_metrics.METRIC_KEYS``) and the time of each phase."""

    split: str
    rewards: list
    metrics: dict
    phases: dict

    @property
    def no_signal(self) -> list[bool]:
        return [r is None for r in self.rewards]


def group_rows(items: Sequence[Row], tasks: Sequence[Task], split: str) -> dict[int, dict]:
    """Rows by problem and role (``{task index: {"code": [row], "test": [row]}}``, problems in
    order of first appearance); an error naming the row or problem when a row is malformed or a
    problem lacks a role."""
    groups: dict[int, dict[str, list[int]]] = {}
    for pos, (ti, r, *_) in enumerate(items):
        if r not in (CODE, TEST):
            raise ValueError(f"row {pos}: role must be code or test, got {r!r}")
        if not 0 <= ti < len(tasks):
            raise ValueError(f"row {pos}: task_index {ti} outside the {len(tasks)} {split} "
                             f"problems")
        groups.setdefault(ti, {CODE: [], TEST: []})[r].append(pos)
    for ti, g in groups.items():
        missing = [r for r in (CODE, TEST) if not g[r]]
        if missing:
            raise RuntimeError(
                f"problem {tasks[ti].id}: the batch holds its "
                f"{', '.join(r for r in (CODE, TEST) if g[r])} rows but no {missing[0]} rows; each "
                f"generation batch must hold k code rows then k test rows of every problem (use "
                f"PairedSampler and a batch that is a multiple of 2k)")
    return groups


def place(n_rows: int, scores: Sequence[ProblemScore], groups: Sequence[dict]) -> list:
    """Each problem's rewards back on its rows; None (or NaN) stays None: no signal."""
    rewards: list = [None] * n_rows
    for s, g in zip(scores, groups):
        for p, r in zip(g[CODE], s.code_rewards):
            rewards[p] = r
        for p, r in zip(g[TEST], s.test_rewards):
            rewards[p] = r
    return [None if r is None or (isinstance(r, float) and math.isnan(r)) else r
            for r in rewards]


class CoevoStep:
    """The algorithm's state for one run: the problems of each split, the reward options, the
    executor (opened on first use), and, for label-free training, the exchange with the other
    agents, the frozen labeller's completions and the :class:`Lockstep` state.

    ``calls`` keeps the last ``KEEP_CALLS`` calls' (split, rows, rewards) for inspection, and
    ``scored`` their problems' :class:`ProblemScore` records (split, scores)."""

    KEEP_CALLS = 4

    def __init__(self, tasks: dict[str, Sequence[Task]], options: RewardOptions,
                 executor_options: dict | None = None, exec_time_limit_s: float | None = None,
                 sharding: Sharding | None = None, exchange=None, agent_index: int = 0,
                 n_agents: int = 1, frozen: dict | None = None,
                 lockstep: Lockstep | None = None, control: str = "none", seed: int = 0,
                 train_roles: str = "both", max_rows_masked: float = MAX_ROWS_MASKED,
                 repair=None):
        self.tasks = {split: list(ts) for split, ts in tasks.items()}
        self.options = options
        self.executor_options = dict(executor_options or {})
        self.exec_time_limit_s = exec_time_limit_s
        self.sharding = sharding or Sharding()
        self.exchange = exchange
        self.agent_index, self.n_agents = agent_index, n_agents
        self.frozen = frozen or {}
        self.lockstep = lockstep or Lockstep()
        self.control = control  # "shuffle" / "flip": the control runs of benchmarks/learning.py
        self.train_roles = train_roles  # "both", or "code" / "test": one role trained
        self.max_rows_masked = max_rows_masked  # share of a step's rows; past it, SandboxFailure
        self.repair = repair  # RepairTurns: later turns of the training batches (None: one turn)
        self._control_rng = np.random.default_rng(seed)
        self.last: StepOutput | None = None
        self.calls: deque = deque(maxlen=self.KEEP_CALLS)
        self.scored: deque = deque(maxlen=self.KEEP_CALLS)
        self._executor = None
        self._calls_at_step: dict = {}
        self._refused: set = set()  # problems whose refused job was reported already

    @property
    def label_free(self) -> bool:
        return label_source(self.options.label_source).label_free

    # ---- the step -------------------------------------------------------------------------------
    def run(self, items: Sequence[Row], split: str, global_step: int = 0,
            prompts: Sequence | None = None) -> StepOutput:
        """Score this process's rows (steps 1-5 here or on the gathered batch), then pool the
        metrics (6). With repair turns (training batches), the later turns are written and
        judged after 5 (:mod:`.repair_turns`; ``prompts``: each row's conversation), and the
        first turn's rewards take their credit."""
        items = [Row(*x) for x in items]
        joint = self.label_free and split == "train"
        scored = self.sharding.score(
            items, split, lambda rows: self.score_rows(rows, split, global_step),
            whole=joint, lockstep=self.lockstep)
        rewards, scores, phases = scored.rewards, scored.scores, dict(scored.phases)
        matrix_s = phases["execution"]  # the pass matrix's seconds (exec_cells_per_s)
        repaired = None
        if self.repair is not None and split == "train":
            if prompts is None:
                raise ValueError("repair turns need each row's prompt")
            rewards, repaired = self.repair.run(items, prompts, rewards,
                                                group_rows(items, self.tasks[split], split),
                                                self.tasks[split], self.executor)
            # its generation counts as generation (the trainer's), its jobs as execution
            phases["execution"] = phases.get("execution", 0.0) + self.repair.exec_seconds
        for s in scores:  # the step goes on without them; each is named once per run
            if s.refused is not None and s.task_id not in self._refused:
                self._refused.add(s.task_id)
                log.warning("%s (its rows get no reward; problems_refused counts it)", s.refused)
        if split == "train":  # the logged metrics stay the real ones
            roles = [x.role for x in items]
            rewards = trained_roles(rewards, roles, self.train_roles)
            if self.control != "none":
                rewards = control_rewards(rewards, roles, self.control, self._control_rng)
        out = StepOutput(split, rewards, batch_metrics(scores, matrix_s), phases)
        if repaired is not None:
            out.metrics.update(repaired)
        self.last = out
        self.calls.append((split, [(x.task_index, x.role, x.text) for x in items],
                           list(rewards)))
        self.scored.append((split, scores))
        if split == "train":
            self._check_lost(scores, out.metrics, global_step)
        return out

    def _check_lost(self, scores, metrics: dict, global_step: int) -> None:
        """Say on the terminal when cells were lost, and stop the run (:class:`SandboxFailure`)
        when more than ``max_rows_masked`` of the step's rows were masked for them."""
        errors, masked = metrics.get("exec_sandbox_errors") or 0, metrics.get("rows_masked") or 0
        if not errors:
            return
        rows = sum(len(s.code_rewards) + len(s.test_rewards) for s in scores)
        step = global_step + 1
        log.warning("step %d: %d cell(s) ended sandbox_error (the harness failed, not the "
                    "program): %d of %d rows masked (no reward, out of their group's baseline)",
                    step, errors, masked, rows)
        if rows and masked / rows > self.max_rows_masked:
            raise SandboxFailure(
                f"step {step}: {masked} of {rows} rows ({masked / rows:.0%}) masked because "
                f"{errors} sandbox cell(s) failed twice (a judge, container or node lost, then "
                f"lost again on a fresh one), above --max_rows_masked {self.max_rows_masked:g}")

    def score_rows(self, items: Sequence[Row], split: str, global_step: int = 0) -> ScoredRows:
        """Steps 1-5 on a list of rows."""
        t0 = time.perf_counter()
        tasks = self.tasks.get(split)
        if tasks is None:
            raise ValueError(f"rows of split {split!r} but no such task list")
        groups = group_rows(items, tasks, split)                            # 1
        order = list(groups)
        waited, shared = 0.0, None
        if self.label_free and split == "train":                            # 2 (label-free)
            batches, waited = self._joint_jobs(items, split, tasks, groups, global_step)
            shared = SharedState({str(k): v for k, v in
                                  self.lockstep.curriculum.estimates.items()},
                                 self.lockstep.stop_all)
            jobs = [j for jb in batches for j in jb.jobs]
        else:                                                               # 2 (gold tests)
            batches = [self._job(tasks[ti], items, groups[ti]) for ti in order]
            jobs = [j for b in batches for j in (b.job, b.known_job) if j is not None]
        t1 = time.perf_counter()
        results = iter(self.executor.run(jobs) if jobs else [])            # 3
        t2 = time.perf_counter()
        if self.label_free and split == "train":                            # 4
            scores = [score_joint(jb, next(results) if jb.batch.job is not None else None,
                                  next(results) if jb.probe_job is not None else None,
                                  self.options) for jb in batches]
            for ti, s in zip(order, scores):
                if s.pass_estimate is not None:
                    self.lockstep.curriculum.pending[ti] = s.pass_estimate
        else:
            scores = [score(b, next(results) if b.job is not None else None, self.options,
                            next(results) if b.known_job is not None else None)
                      for b in batches]
        rewards = place(len(items), scores, [groups[ti] for ti in order])  # 5
        t3 = time.perf_counter()
        phases = {"execution": t2 - t1, "rewards": (t1 - t0) + (t3 - t2) - waited}
        if shared is not None:
            phases["exchange"] = waited
        return ScoredRows(rewards, scores, phases, shared)

    def _job(self, task: Task, items, group: dict):
        b = prepare(task, [items[p].text for p in group[CODE]],
                    [items[p].text for p in group[TEST]], self.options,
                    [items[p].length for p in group[CODE]], [items[p].length for p in group[TEST]])
        for j in (b.job, b.known_job):
            if j is not None and self.exec_time_limit_s is not None:
                j["time_limit_s"] = self.exec_time_limit_s
        return b

    def _joint_jobs(self, items, split, tasks, groups, global_step):
        """Swap this batch's texts with the other agents (the run-wide lockstep state travels
        with them), then build every problem's joint job; returns (jobs, seconds waited)."""
        order = list(groups)
        call = self._calls_at_step.get((split, global_step), 0)
        self._calls_at_step = {(split, global_step): call + 1}
        ls = self.lockstep
        payload = {"problems": [tasks[ti].id for ti in order],
                   "code": [[items[p].text for p in groups[ti][CODE]] for ti in order],
                   "test": [[items[p].text for p in groups[ti][TEST]] for ti in order],
                   "curriculum": ls.curriculum.snapshot(), "stop": ls.stop_requested}
        key = f"{split}/step-{global_step}/call-{call}"
        tx = time.perf_counter()
        payloads = self.exchange.swap(key, payload) if self.exchange is not None else [payload]
        waited = time.perf_counter() - tx
        names = self.exchange.agents if self.exchange is not None else ["this agent"]
        for name, got in zip(names, payloads):
            if got["problems"] != payload["problems"]:
                raise RuntimeError(
                    f"agents out of step at {key}: agent {name!r} holds problems "
                    f"{got['problems'][:4]}... and this one {payload['problems'][:4]}...; every "
                    f"agent needs the same tasks, seed and batch shape")
        ls.curriculum.adopt(payloads[0]["curriculum"])  # the first agent's: shared by all
        ls.stop_all = ls.stop_all or any(p.get("stop") for p in payloads)
        batches = []
        for q, ti in enumerate(order):
            blocks = [(p["code"][q], p["test"][q]) for p in payloads]
            if label_source(self.options.label_source).needs_frozen:
                fz = self.frozen.get(tasks[ti].id)
                if fz is None:
                    raise RuntimeError(f"problem {tasks[ti].id}: no frozen labels for it "
                                       f"(frozen_labels holds {len(self.frozen)} problems)")
                blocks.append(fz)
            jb = prepare_joint(tasks[ti], blocks, self.agent_index, self.n_agents, self.options,
                               [items[p].length for p in groups[ti][CODE]],
                               [items[p].length for p in groups[ti][TEST]])
            for j in jb.jobs:
                if self.exec_time_limit_s is not None:
                    j["time_limit_s"] = self.exec_time_limit_s
            batches.append(jb)
        return batches, waited

    # ---- the executor (an edge) -----------------------------------------------------------------
    @property
    def executor(self):
        if self._executor is None:
            from ..execution import make_executor
            from ..execution.registry import Processes, share_options
            # each process of each agent opens one executor: the backend's share arithmetic
            opts = share_options(self.executor_options, Processes(
                int(os.environ.get("WORLD_SIZE", "1")),
                int(os.environ.get("LOCAL_WORLD_SIZE", "1")), max(1, self.n_agents)))
            self._executor = make_executor(**opts)
        return self._executor

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close()
            self._executor = None
