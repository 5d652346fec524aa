"""The old home of the generation engines, kept so that ``coevo_code.evaluation.engines``
imports (docs/EVALUATION.md) keep working: they live in :mod:`coevo_code.generation.engines`."""

from ..generation.engines import (ENGINES, Engine, EngineError, OpenAIEngine, Sampling,
                                  TransformersEngine, VLLMEngine, chat_generate, make_engine)

__all__ = ["ENGINES", "Engine", "EngineError", "OpenAIEngine", "Sampling", "TransformersEngine",
           "VLLMEngine", "chat_generate", "make_engine"]
