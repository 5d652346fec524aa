"""Where the rows of a generation batch are scored when training runs on several processes.

When every process's batch (``per_device_train_batch_size x steps_per_generation``) is a multiple
of 2k, the sampler keeps every problem's 2k rows inside one process and each process scores its
own rows; the per-problem scores are then gathered so the step metrics are exact. Otherwise (and
always for label-free training batches, whose exchange with the other agents runs on the main
process) the batch is gathered (``accelerate.utils.gather_object``), scored once on the main
process, and each process takes its slice back, with the run-wide lockstep state (curriculum
estimates, early stopping) the main process learned. An error on any process reaches every
process, so none hangs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence


class Sharding:
    """``score(items, split, fn)`` -> ``fn``'s :class:`~coevo_code.training.step.ScoredRows`
    with the rewards of this process's rows and every problem's scores, where ``fn(rows)`` is
    the step's scoring of a list of rows."""

    def __init__(self, accelerator=None, local_batch: dict[str, int] | None = None,
                 k: dict[str, int] | None = None):
        self.accelerator = accelerator
        self.local_batch = dict(local_batch or {})
        self.k = dict(k or {})

    @property
    def world(self) -> int:
        return self.accelerator.num_processes if self.accelerator is not None else 1

    def local_ok(self, split: str, whole: bool = False) -> bool:
        """Whether every process holds whole problems (a static property of the config);
        ``whole``: the batch must be scored in one place (label-free training)."""
        if whole:
            return self.world == 1
        size, k = self.local_batch.get(split), self.k.get(split)
        return self.world == 1 or (size is not None and k is not None and size % (2 * k) == 0)

    def score(self, items: Sequence, split: str, fn: Callable, whole: bool = False,
              lockstep=None):
        if self.world == 1:
            return fn(items)
        if not self.local_ok(split, whole):
            return self._gathered(items, fn, lockstep)
        from accelerate.utils import gather_object
        scored = None
        try:
            scored = fn(items)
            failed = None
        except Exception as e:  # noqa: BLE001 - every process must learn of it, or hang
            failed = e
        errors = [x for x in gather_object([None if failed is None else
                                            f"{type(failed).__name__}: {failed}"]) if x]
        if errors:
            raise failed if failed is not None else RuntimeError(
                f"another process could not score its batch: {errors[0]}")
        return replace(scored, scores=gather_object(scored.scores),
                       phases={k: max(gather_object([v])) for k, v in scored.phases.items()})

    def _gathered(self, items, fn, lockstep):
        from accelerate.utils import broadcast_object_list, gather_object
        acc = self.accelerator
        per_process = gather_object([list(items)])
        flat = [x for chunk in per_process for x in chunk]
        payload = [None]
        if acc.is_main_process:
            try:
                payload = [fn(flat)]
            except Exception as e:  # noqa: BLE001 - every process must learn of it
                payload = [e]
        broadcast_object_list(payload, from_process=0)
        if isinstance(payload[0], Exception):
            raise payload[0]
        scored = payload[0]
        if lockstep is not None:
            lockstep.adopt(scored.shared, main=acc.is_main_process)
        start = sum(len(c) for c in per_process[:acc.process_index])
        return replace(scored, rewards=scored.rewards[start:start + len(items)])
