"""The paired dataset and sampler: one policy, two roles, TRL's advantage groups intact.

Each problem i has four rows: (code | test) x (examples hidden | shown), at index
``4 i + 2 shown + (role == test)``. The sampler emits, for each problem of a generation batch,
its code row k times then its test row k times (k = ``num_generations``), so TRL's groups of k
consecutive rows are per (problem, role) and a generation batch holds both roles of every problem.
Whether a visit shows the public examples (``p_give_example``) is drawn once per visit and applies
to both roles. The order is a fresh seeded permutation per pass over the problems; the stream is a
pure function of the seed, and one run is one long "epoch", so a resumed run skips exactly the
batches it already trained on and sees the same data in the same order.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from torch.utils.data import Sampler

from ..roles import CODE, TEST, coder_messages, tester_messages
from ..tasks.model import LoaderError, Task, empty_output, shown_tests


def reward_tasks(tasks: list[Task], include_shown: bool = False) -> list[Task]:
    """The problems as training rewards judge them. A problem with gold tests beyond the
    examples its statement shows is rewarded on those hidden tests (``include_shown``: on every
    gold test), so that a program printing the shown answers earns nothing; a stdio test whose
    expected output is empty is left out where the problem has other tests, so that ``exit(0)``
    earns nothing either. A problem whose only tests are shown (or empty) keeps them all: the
    load report (``TaskSet.summary``) counts such problems. Prompts and examples are unchanged."""
    out = []
    for task in tasks:
        keep = list(task.tests)
        if not include_shown:
            hidden = [t for t, s in zip(keep, shown_tests(task)) if not s]
            keep = hidden or keep
        nonempty = [t for t in keep if not empty_output(t)]
        keep = nonempty or keep
        try:
            out.append(task if len(keep) == len(task.tests) else
                       dataclasses.replace(task, tests=keep))
        except LoaderError:  # a test decoded only now that no program can read: the executor
            out.append(task)  # refuses its job, and each step counts it (problems_refused)
    return out


def row_index(problem: int, role: str, shown: bool) -> int:
    return 4 * problem + 2 * int(shown) + (role == TEST)


def paired_rows(tasks: list[Task], split: str, max_input_examples: int = 1) -> list[dict]:
    """The dataset rows (conversational ``prompt`` plus the columns the reward callable reads)."""
    rows = []
    for i, task in enumerate(tasks):
        for shown in (False, True):
            t = dataclasses.replace(task, examples=task.examples[:max_input_examples] if shown
                                    else [])
            for role, messages in ((CODE, coder_messages(t)), (TEST, tester_messages(t))):
                rows.append({"prompt": messages, "role": role, "task_index": i,
                             "task_id": task.id, "split": split, "shown": shown})
    return rows


class PairedSampler(Sampler):
    """Indices for ``batches`` generation batches of ``problems_per_batch`` problems each, every
    problem as k code rows then k test rows, every batch yielded ``repeat`` times (TRL reuses one
    generation batch for ``steps_per_generation x num_iterations`` micro-steps, and the dataloader
    must hand it over that many times)."""

    def __init__(self, n_problems: int, k: int, problems_per_batch: int, batches: int,
                 repeat: int = 1, seed: int = 0, shuffle: bool = True,
                 p_give_example: float = 1.0, keep=None):
        if n_problems < 1:
            raise ValueError("no problems to sample from")
        self.n, self.k, self.ppb, self.batches = n_problems, k, problems_per_batch, batches
        self.repeat, self.seed, self.shuffle, self.p = repeat, seed, shuffle, p_give_example
        self.keep = keep  # curriculum: keep(problem) -> bool, read when the visit comes up

    def problem_stream(self):
        """(problem, shown) visits, forever: a seeded permutation per pass. With ``keep`` (the
        curriculum), a problem it rejects is passed over, unless a whole pass in a row was
        rejected (then the next one is taken: training never stalls)."""
        order_rng = np.random.default_rng([self.seed, 0])
        coin_rng = np.random.default_rng([self.seed, 1])
        rejected = 0
        while True:
            order = order_rng.permutation(self.n) if self.shuffle else np.arange(self.n)
            for i in order:
                shown = bool(coin_rng.random() < self.p) if 0 < self.p < 1 else self.p >= 1
                if self.keep is not None and rejected < self.n and not self.keep(int(i)):
                    rejected += 1
                    continue
                rejected = 0
                yield int(i), shown

    def __iter__(self):
        visits = self.problem_stream()
        for _ in range(self.batches):
            batch = []
            for _ in range(self.ppb):
                i, shown = next(visits)
                batch += [row_index(i, CODE, shown)] * self.k + [row_index(i, TEST, shown)] * self.k
            for _ in range(self.repeat):
                yield from batch

    def __len__(self) -> int:
        return self.batches * self.ppb * 2 * self.k * self.repeat


class Curriculum:
    """Pass-rate estimates per problem (vote share of its latest rollouts, no labels) and the
    window of problems :class:`PairedSampler` keeps (``keep``); unseen problems are kept.
    ``estimates`` is what the sampler reads; ``pending`` what this agent measured since
    (published with its next batch, and adopted by every agent of a pair or ring)."""

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
