"""Generation: completions from a model, shared by training and evaluation.

The engines (transformers, vLLM, an OpenAI-compatible endpoint: :mod:`.engines`), the generation
cache and :func:`generate_all` (:mod:`.cache`), and the tiny models that ship with the package
(:mod:`.tiny`). Above the core (tasks, roles) and below evaluation and training; torch and
transformers load on first use, not on import.
"""

from .cache import GenerationCache, generate_all
from .engines import (ENGINES, Engine, EngineError, OpenAIEngine, Sampling, TransformersEngine,
                      make_engine)

__all__ = ["ENGINES", "Engine", "EngineError", "OpenAIEngine", "Sampling", "TransformersEngine",
           "make_engine", "GenerationCache", "generate_all"]
