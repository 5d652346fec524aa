"""The reward callable TRL calls once per generation batch, per process.

It reads the dataset columns (``role``, ``task_index``, ``split``) and the completions, groups the
rows by problem, builds one executor job per problem (``scoring.prepare``), runs them all on one
:class:`~coevo_code.execution.Executor` started once for the whole run, and returns raw rewards
that TRL's per-group scaling turns into advantages (``scoring.score``).

Where the rows of a problem live: when every process's batch (``per_device_train_batch_size x
steps_per_generation``) is a multiple of 2k, the sampler keeps every problem's 2k rows inside one
process and each process scores its own rows; the per-problem counts are then gathered so the step
metrics are exact. Otherwise the batch is gathered (``accelerate.utils.gather_object``), scored
once on the main process, and each process takes its slice back. A problem missing a role even in
the gathered batch is an error that names it.

Label-free training batches (``label_source`` other than ``gold``) are always scored on the main
process: it swaps the batch's texts with the other agents (``exchange.py``) under the trainer's
global step, checks that every agent holds the same problems in the same order, builds the joint
jobs (``scoring.prepare_joint``) and scores them (``scoring.score_joint``). It also carries the
run-wide state every agent must share to stay in lockstep: the curriculum's pass-rate estimates
(the first agent's are everyone's) and an early-stopping request. Evaluation batches are always
scored on gold tests.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from typing import Sequence

import numpy as np

from ..roles import completion_text
from ..tasks.model import Task
from .scoring import (CODE, TEST, ProblemScore, RewardOptions, batch_metrics, control_rewards,
                      prepare, prepare_joint, score, score_joint)


class Curriculum:
    """Pass-rate estimates per problem (vote share of its latest rollouts, no labels) and the
    window of problems kept; unseen problems are kept. ``estimates`` is what the sampler reads;
    ``pending`` what this agent measured since (published on the next call, adopted by all)."""

    def __init__(self, window=(0.05, 0.75), enabled: bool = True):
        self.low, self.high = float(window[0]), float(window[1])
        self.enabled = enabled
        self.estimates: dict[int, float] = {}
        self.pending: dict[int, float] = {}
        self.skipped = 0

    def keep(self, problem: int) -> bool:
        e = self.estimates.get(problem)
        ok = not self.enabled or e is None or self.low <= e <= self.high
        self.skipped += not ok
        return ok

    def snapshot(self) -> dict:
        return {str(k): v for k, v in {**self.estimates, **self.pending}.items()}

    def adopt(self, shared: dict) -> None:
        self.estimates = {int(k): float(v) for k, v in shared.items()}
        self.pending = {}


class CoevoReward:
    """``reward_funcs=[CoevoReward(...)]``. After each call, ``last`` holds the step's metrics,
    phase times and which local rows got no reward."""

    __name__ = "coevo"
    KEEP_CALLS = 4  # how many recent calls ``calls`` keeps (tests raise it)

    def __init__(self, tasks: dict[str, Sequence[Task]], options: RewardOptions,
                 executor_options: dict | None = None, local_batch: dict[str, int] | None = None,
                 k: dict[str, int] | None = None, exec_time_limit_s: float | None = None,
                 exchange=None, agent_index: int = 0, n_agents: int = 1,
                 frozen: dict | None = None, curriculum: Curriculum | None = None,
                 control: str = "none", seed: int = 0):
        self.tasks = {split: list(ts) for split, ts in tasks.items()}
        self.options = options
        self.executor_options = dict(executor_options or {})
        self.local_batch = dict(local_batch or {})
        self.k = dict(k or {})
        self.exec_time_limit_s = exec_time_limit_s
        self.accelerator = None
        self._executor = None
        self.last: dict = {}
        self.calls: deque = deque(maxlen=self.KEEP_CALLS)  # recent (split, rows, rewards)
        self.eval_scores: list[ProblemScore] = []
        self.exchange = exchange
        self.agent_index, self.n_agents = agent_index, n_agents
        self.frozen = frozen or {}
        self.curriculum = curriculum or Curriculum(enabled=False)
        self.stop_requested = False  # this agent wants to stop (early stopping)
        self.stop_all = False        # some agent asked: every agent stops after this step
        self._step = 0
        self._calls_at_step: dict = {}
        self.control = control  # "shuffle" / "flip": the control runs of benchmarks/learning.py
        self._control_rng = np.random.default_rng(seed)

    @property
    def label_free(self) -> bool:
        return self.options.label_source != "gold"

    # ---- edges ----------------------------------------------------------------------------------
    def bind(self, accelerator) -> None:
        self.accelerator = accelerator

    @property
    def executor(self):
        if self._executor is None:
            from ..execution import make_executor
            opts = dict(self.executor_options)
            if opts.get("slots") is None and opts.get("backend", "local") == "local":
                local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
                opts["slots"] = max(1, (os.cpu_count() or 1) // max(1, local))
            if opts.get("backend") == "ray" and opts.get("share") is None:
                # every process of every agent opens one executor on the same Ray pool: each
                # takes an equal part of every sandbox node (and of exec_slots, its slots per
                # node for the whole run)
                drivers = int(os.environ.get("WORLD_SIZE", "1")) * max(1, self.n_agents)
                opts["share"] = 1.0 / drivers
                if opts.get("slots") is not None:
                    opts["slots"] = max(1, opts["slots"] // drivers)
            self._executor = make_executor(**opts)
        return self._executor

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    @property
    def _world(self) -> int:
        return self.accelerator.num_processes if self.accelerator is not None else 1

    def _local_ok(self, split: str) -> bool:
        """Whether every process holds whole problems (a static property of the config)."""
        size, k = self.local_batch.get(split), self.k.get(split)
        if self.label_free and split == "train":
            return self._world == 1  # the exchange runs on the main process
        return self._world == 1 or (size is not None and k is not None and size % (2 * k) == 0)

    # ---- the call -------------------------------------------------------------------------------
    def __call__(self, prompts=None, completions=None, completion_ids=None, role=None,
                 task_index=None, split=None, log_metric=None, trainer_state=None, **_) -> list:
        if completions is None or role is None or task_index is None:
            raise ValueError("the coevo reward needs the dataset columns role and task_index "
                             "(build the dataset with coevo_code.training.data.paired_rows)")
        mode = split[0] if split else "train"
        if trainer_state is not None:
            self._step = int(trainer_state.global_step)
        lengths = ([len(x) for x in completion_ids] if completion_ids is not None
                   else [len(completion_text(c)) for c in completions])
        items = [(int(ti), r, completion_text(c), n)
                 for ti, r, c, n in zip(task_index, role, completions, lengths)]
        if self._world > 1 and not self._local_ok(mode):
            rewards, scores, phases = self._gathered(items, mode)
        elif self._world == 1:
            rewards, scores, phases = self._compute(items, mode)
        else:
            from accelerate.utils import gather_object
            try:
                rewards, scores, phases = self._compute(items, mode)
                failed = None
            except Exception as e:  # noqa: BLE001 - every process must learn of it, or hang
                failed = e
            errors = [x for x in gather_object([None if failed is None else
                                                f"{type(failed).__name__}: {failed}"]) if x]
            if errors:
                raise failed if failed is not None else RuntimeError(
                    f"another process could not score its batch: {errors[0]}")
            scores = gather_object(scores)
            phases = {k: max(gather_object([v])) for k, v in phases.items()}
        phases = {k: v for k, v in phases.items() if k in ("execution", "rewards", "exchange")}
        metrics = batch_metrics(scores, phases["execution"])
        if mode == "train" and self.control != "none":
            rewards = control_rewards(rewards, [r for _, r, _, _ in items], self.control,
                                      self._control_rng)
        if mode == "eval":
            self.eval_scores.extend(scores)
        self.last = {"split": mode, "metrics": metrics, "phases": phases,
                     "no_reward": [r is None for r in rewards]}
        self.calls.append((mode, [(ti, r, text) for ti, r, text, _ in items], list(rewards)))
        if log_metric is not None:
            for key, value in metrics.items():
                if isinstance(value, (int, float)):
                    log_metric(f"coevo/{key}", value)
        return rewards

    def _gathered(self, items, mode):
        from accelerate.utils import broadcast_object_list, gather_object
        acc = self.accelerator
        per_process = gather_object([items])
        flat = [x for chunk in per_process for x in chunk]
        payload = [None]
        if acc.is_main_process:
            try:
                payload = [self._compute(flat, mode)]
            except Exception as e:  # noqa: BLE001 - every process must learn of it
                payload = [e]
        broadcast_object_list(payload, from_process=0)
        if isinstance(payload[0], Exception):
            raise payload[0]
        rewards, scores, phases = payload[0]
        if not acc.is_main_process:  # the main process holds it already (and its pending)
            self.curriculum.adopt(phases.get("curriculum", {}))
        self.stop_all = self.stop_all or bool(phases.get("stop_all", False))
        start = sum(len(c) for c in per_process[:acc.process_index])
        return rewards[start:start + len(items)], scores, phases

    def _compute(self, items, mode):
        """Score a batch (a list of (task index, role, text, length)); returns the rewards in
        item order, the per-problem scores and the phase times."""
        t0 = time.perf_counter()
        tasks = self.tasks.get(mode)
        if tasks is None:
            raise ValueError(f"rows of split {mode!r} but no such task list")
        groups: dict[int, dict[str, list[int]]] = {}
        for pos, (ti, r, _, _) in enumerate(items):
            if r not in (CODE, TEST):
                raise ValueError(f"row {pos}: role must be code or test, got {r!r}")
            if not 0 <= ti < len(tasks):
                raise ValueError(f"row {pos}: task_index {ti} outside the {len(tasks)} {mode} problems")
            groups.setdefault(ti, {CODE: [], TEST: []})[r].append(pos)
        for ti, g in groups.items():
            missing = [r for r in (CODE, TEST) if not g[r]]
            if missing:
                raise RuntimeError(
                    f"problem {tasks[ti].id}: the batch holds its {', '.join(r for r in (CODE, TEST) if g[r])} "
                    f"rows but no {missing[0]} rows; each generation batch must hold k code rows "
                    f"then k test rows of every problem (use PairedSampler and a batch that is a "
                    f"multiple of 2k)")
        if self.label_free and mode == "train":
            return self._compute_joint(items, mode, tasks, groups, t0)
        batches, where = [], []
        for ti, g in groups.items():
            b = prepare(tasks[ti], [items[p][2] for p in g[CODE]], [items[p][2] for p in g[TEST]],
                        self.options, [items[p][3] for p in g[CODE]],
                        [items[p][3] for p in g[TEST]])
            if b.job is not None and self.exec_time_limit_s is not None:
                b.job["time_limit_s"] = self.exec_time_limit_s
            batches.append(b)
            where.append(g)
        t1 = time.perf_counter()
        jobs = [b.job for b in batches if b.job is not None]
        results = self.executor.run(jobs) if jobs else []
        t2 = time.perf_counter()
        it = iter(results)
        scores = [score(b, next(it) if b.job is not None else None, self.options) for b in batches]
        return self._place(items, scores, where, t0, t1, t2)

    @staticmethod
    def _place(items, scores, where, t0, t1, t2, extra=None):
        rewards: list = [None] * len(items)
        for s, g in zip(scores, where):
            for p, r in zip(g[CODE], s.code_rewards):
                rewards[p] = r
            for p, r in zip(g[TEST], s.test_rewards):
                rewards[p] = r
        rewards = [None if r is None or (isinstance(r, float) and math.isnan(r)) else r
                   for r in rewards]
        t3 = time.perf_counter()
        return rewards, scores, {"execution": t2 - t1, "rewards": (t1 - t0) + (t3 - t2),
                                 **(extra or {})}

    def _compute_joint(self, items, mode, tasks, groups, t0):
        """Swap this batch with the other agents, then score every problem on the joint matrix."""
        order = list(groups)
        call = self._calls_at_step.get((mode, self._step), 0)
        self._calls_at_step = {(mode, self._step): call + 1}
        payload = {"problems": [tasks[ti].id for ti in order],
                   "code": [[items[p][2] for p in groups[ti][CODE]] for ti in order],
                   "test": [[items[p][2] for p in groups[ti][TEST]] for ti in order],
                   "curriculum": self.curriculum.snapshot(), "stop": self.stop_requested}
        key = f"{mode}/step-{self._step}/call-{call}"
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
        self.curriculum.adopt(payloads[0]["curriculum"])  # the first agent's: shared by all
        self.stop_all = self.stop_all or any(p.get("stop") for p in payloads)
        batches = []
        for q, ti in enumerate(order):
            blocks = [(p["code"][q], p["test"][q]) for p in payloads]
            if self.options.label_source == "frozen":
                fz = self.frozen.get(tasks[ti].id)
                if fz is None:
                    raise RuntimeError(f"problem {tasks[ti].id}: no frozen labels for it "
                                       f"(frozen_labels holds {len(self.frozen)} problems)")
                blocks.append(fz)
            jb = prepare_joint(tasks[ti], blocks, self.agent_index, self.n_agents, self.options,
                               [items[p][3] for p in groups[ti][CODE]],
                               [items[p][3] for p in groups[ti][TEST]])
            for j in jb.jobs:
                if self.exec_time_limit_s is not None:
                    j["time_limit_s"] = self.exec_time_limit_s
            batches.append(jb)
        t1 = time.perf_counter()
        jobs = [j for jb in batches for j in jb.jobs]
        results = iter(self.executor.run(jobs) if jobs else [])
        t2 = time.perf_counter()
        scores = []
        for jb in batches:
            main = next(results) if jb.batch.job is not None else None
            probe = next(results) if jb.probe_job is not None else None
            scores.append(score_joint(jb, main, probe, self.options))
        for ti, s in zip(order, scores):
            if s.pass_estimate is not None:
                self.curriculum.pending[ti] = s.pass_estimate
        extra = {"curriculum": {str(k): v for k, v in self.curriculum.estimates.items()},
                 "stop_all": self.stop_all, "exchange": waited}
        out = self._place(items, scores, [groups[ti] for ti in order], t0, t1, t2, extra)
        out[2]["rewards"] -= waited  # the swap is its own phase
        return out
