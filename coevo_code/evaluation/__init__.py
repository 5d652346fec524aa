"""Evaluation: a model as coder and tester on a benchmark, scoring existing samples, ranking,
and the model scored on held-out problems during training. See ``docs/EVALUATION.md``.

The engines and the generation cache live in :mod:`coevo_code.generation` (re-exported here);
:class:`TesterReward`, a training reward, in :mod:`coevo_code.training.tester_reward` (public as
``coevo_code.TesterReward``).
"""

from ..generation import (Engine, EngineError, GenerationCache, OpenAIEngine, Sampling,
                          TransformersEngine, generate_all, make_engine)
from .harness import RANKERS, judge, parse_bon, summarize
from .samples import SampleError, read_samples, score_samples

__all__ = ["Engine", "EngineError", "OpenAIEngine", "Sampling", "TransformersEngine", "make_engine",
           "RANKERS", "GenerationCache", "generate_all", "judge", "parse_bon", "summarize",
           "SampleError", "read_samples", "score_samples"]

