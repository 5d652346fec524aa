"""The old home of :class:`TesterReward`, kept so that ``coevo_code.evaluation.tester_reward``
imports (docs/EVALUATION.md) keep working: a training reward, it lives in
:mod:`coevo_code.training.tester_reward`. The one import from evaluation up into training, and
the pyproject's import contract names it."""

from ..training.tester_reward import TesterReward, coder_rows

__all__ = ["TesterReward", "coder_rows"]
