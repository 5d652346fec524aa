"""Co-evolution training on TRL: one policy writes solutions and unit tests (CURE).

``coevo train`` is the command; :func:`train` the same in Python. See ``docs/TRAINING.md``.
"""

from __future__ import annotations

import logging


class _DroppedRowsFilter(logging.Filter):
    """TRL warns, with the whole prompt, for every row no reward function scored. For coevo such
    rows are deliberate (the tests of a problem no solution solves; CURE drops them too), so the
    warning is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "All reward functions returned None" not in str(record.msg)


logging.getLogger("trl.trainer.grpo_trainer").addFilter(_DroppedRowsFilter())

__all__ = ["CoevoConfig", "RunResult", "train"]


def __getattr__(name):  # torch, transformers and TRL load on first use, not on import
    if name == "CoevoConfig":
        from .config import CoevoConfig
        return CoevoConfig
    if name in ("RunResult", "train"):
        from . import run
        return getattr(run, name)
    raise AttributeError(name)
