"""The reward function TRL calls once per generation batch, per process: it reads the dataset
columns (``role``, ``task_index``, ``split``) and the completions, runs the co-evolution step
(:class:`~coevo_code.training.step.CoevoStep`) and returns one reward per row, None where the row
has no signal (the trainer masks those rows: :meth:`CoevoTrainer._mask_rows_without_signal`).

It is a TRL reward function like any other (``reward_funcs=[coevo, *others]``, weighted by
``reward_weights``); the run's state (executor, exchange, curriculum, early stopping) lives in the
step, and the trainer reads the step's metrics from ``step.last``.
"""

from __future__ import annotations

from ..roles import completion_text
from .step import CoevoStep, Row


class CoevoReward:
    """``reward_funcs=[CoevoReward(step), ...]``."""

    __name__ = "coevo"

    def __init__(self, step: CoevoStep):
        self.step = step

    def __call__(self, prompts=None, completions=None, completion_ids=None, role=None,
                 task_index=None, split=None, log_metric=None, trainer_state=None, turn=None,
                 **_) -> list:
        if completions is None or role is None or task_index is None:
            raise ValueError("the coevo reward needs the dataset columns role and task_index "
                             "(build the dataset with coevo_code.training.data.paired_rows)")
        if turn is not None and int(turn[0]) > 1:
            # the rows of a later repair turn: written and judged with the first turn's
            # (.repair_turns); their rewards are the credit the step gave them
            later = {tr.turn: tr for tr in self.step.repair.later}[int(turn[0])]
            if len(later.rewards) != len(completions):
                raise RuntimeError(f"repair turn {int(turn[0])}: {len(completions)} rows, "
                                   f"{len(later.rewards)} rewards")
            return list(later.rewards)
        lengths = ([len(x) for x in completion_ids] if completion_ids is not None
                   else [len(completion_text(c)) for c in completions])
        rows = [Row(int(ti), r, completion_text(c), n)
                for ti, r, c, n in zip(task_index, role, completions, lengths)]
        out = self.step.run(rows, split[0] if split else "train",
                            int(trainer_state.global_step) if trainer_state is not None else 0,
                            prompts=prompts)
        if log_metric is not None:
            for key, value in out.metrics.items():
                if isinstance(value, (int, float)):
                    log_metric(f"coevo/{key}", value)
        return out.rewards
