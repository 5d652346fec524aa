"""The tester as a reward model: a reward function for TRL's ``GRPOTrainer`` that scores a
policy's solutions by unit tests a *frozen* tester model wrote, with no gold labels (CURE's
label-free RL with a trained tester as the reward model).

For each problem the tester writes ``k_tests`` tests once (cached in memory and, with
``cache_path``, on disk); every solution the policy writes for it runs against the parsed tests on
the executor; its reward is the share it passes: CURE's code reward (arXiv:2506.03136) with the
tester's tests as the gold ones, :func:`coevo_code.rewards.pseudo_gold_code_rewards`. Every parsed
test counts as accurate (an all-True ``accurate`` mask): no vote filters the tester's tests,
unlike a co-evolving partner's (:mod:`coevo_code.labels`). A solution that parses to nothing gets
0; a problem for which the tester wrote no parseable test gives no reward (None: TRL gives the row
zero advantage), and so does a solution with a cell the sandbox lost (``sandbox_error`` after the
executor's re-run on a fresh judge: its share is unknown, not low). The executor is the one
given, or the one
:func:`~coevo_code.execution.make_executor` builds from ``executor_options`` (``{"backend":
"ray", "address": ...}`` runs the solutions on a Ray cluster).

    reward = TesterReward(tasks, engine=TransformersEngine("path/to/tester", Sampling()))
    GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=coder_rows(tasks), ...)
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..rewards import pseudo_gold_code_rewards
from ..roles import TEST, completion_text, parse_program, parse_test, tester_messages
from ..sandbox.protocol import HARNESS
from ..tasks.model import Task


def coder_rows(tasks: Sequence[Task]) -> list[dict]:
    """Dataset rows for a coder-only run: the coder prompt and the ``task_id`` column."""
    from ..roles import coder_messages
    return [{"prompt": coder_messages(t), "task_id": t.id} for t in tasks]


class TesterReward:
    __name__ = "tester"
    __test__ = False  # not a pytest class

    def __init__(self, tasks: Sequence[Task], engine, k_tests: int = 8, executor=None,
                 cache_path: str | Path | None = None, batch: int = 8,
                 executor_options: dict | None = None):
        from ..generation.cache import GenerationCache
        self.tasks = {t.id: t for t in tasks}
        self.engine, self.k_tests, self.batch = engine, k_tests, batch
        self._executor, self._own = executor, executor is None
        self.executor_options = dict(executor_options or {})
        self.cache = GenerationCache(Path(cache_path)) if cache_path else None
        self.tests: dict[str, list] = {}
        self.calls = 0

    @classmethod
    def from_gold(cls, tasks: Sequence[Task], max_tests: int = 8, **kw) -> "TesterReward":
        """The same reward with each problem's first ``max_tests`` gold tests in the tester's
        place: the labelled upper bound a tester reward is measured against."""
        reward = cls(tasks, engine=None, k_tests=max_tests, **kw)
        for t in tasks:
            reward.tests[t.id] = list(t.tests[:max_tests])
        return reward

    @property
    def executor(self):
        if self._executor is None:
            from ..execution import make_executor
            self._executor = make_executor(**self.executor_options)
        return self._executor

    def close(self) -> None:
        if self._own and self._executor is not None:
            self._executor.close()
            self._executor = None

    def tests_for(self, ids: Sequence[str]) -> None:
        """Have the tester write tests for the problems that have none yet."""
        todo = []
        for tid in dict.fromkeys(ids):
            if tid in self.tests:
                continue
            got = self.cache.get(tid, TEST, self.k_tests) if self.cache else None
            if got is not None:
                self._keep(tid, got)
            else:
                todo.append(tid)
        for a in range(0, len(todo), self.batch):
            part = todo[a:a + self.batch]
            texts = self.engine.generate([tester_messages(self.tasks[t]) for t in part],
                                         self.k_tests)
            for tid, completions in zip(part, texts):
                if self.cache:
                    self.cache.put(tid, TEST, completions)
                self._keep(tid, completions)

    def _keep(self, tid: str, completions: list[str]) -> None:
        task = self.tasks[tid]
        self.tests[tid] = [p.test for p in (parse_test(c, task) for c in completions) if p.ok]

    def __call__(self, prompts=None, completions=None, task_id=None, **_) -> list:
        if completions is None or task_id is None:
            raise ValueError("TesterReward needs the dataset column task_id (see coder_rows)")
        unknown = sorted({t for t in task_id if t not in self.tasks})
        if unknown:
            raise ValueError(f"TesterReward: task_id {unknown[0]!r} is not among its problems")
        self.calls += 1
        self.tests_for(task_id)
        texts = [completion_text(c) for c in completions]
        programs = [parse_program(x, self.tasks[t]) for x, t in zip(texts, task_id)]
        rewards: list = [None] * len(texts)
        jobs, where = [], []
        for tid in dict.fromkeys(task_id):
            rows = [i for i, t in enumerate(task_id) if t == tid]
            tests = self.tests[tid]
            if not tests:
                continue  # the tester wrote nothing usable: no signal
            for i in rows:
                rewards[i] = 0.0
            ok = [i for i in rows if programs[i].ok]
            if ok:
                jobs.append(self.tasks[tid].job([programs[i].code for i in ok], tests))
                where.append(ok)
        for rows, res in zip(where, self.executor.run(jobs) if jobs else []):
            passed = res.get("passed") or []  # none: the job failed, its rows keep 0
            if passed and passed[0]:
                every = np.ones(len(passed[0]), dtype=bool)  # all the tester's tests count
                lost = [any(o in HARNESS for o in row) for row in res.get("outcomes") or []]
                for k, (i, r) in enumerate(zip(rows, pseudo_gold_code_rewards(passed, every))):
                    rewards[i] = None if k < len(lost) and lost[k] else float(r)
        return rewards
