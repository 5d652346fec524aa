"""How completions are drawn: the generation options of the commands that generate (``coevo
eval``, ``coevo rank --tester``). Each field is a ``--field`` of the command (its help is the
field's ``help``) or a key of its ``--config`` YAML; :meth:`GenerationOptions.sampling` and
:meth:`GenerationOptions.engine_options` are what :func:`~.engines.make_engine` takes. (Training
draws with TRL's own fields: ``temperature``, ``top_p``, ``max_completion_length``,
``use_vllm``.)"""

from __future__ import annotations

from dataclasses import dataclass

from ..argv import option
from .engines import ENGINES, Sampling


@dataclass
class GenerationOptions:
    """The engine and its sampling."""

    engine: str = option("transformers", "generation engine", choices=list(ENGINES))
    base_url: str | None = option(None, "openai: an OpenAI-compatible endpoint, e.g. "
                                        "http://127.0.0.1:8000/v1")
    api_key: str | None = option(None, "openai: bearer token (or none)")
    concurrency: int = option(8, "openai: requests in flight")
    requests_per_s: float | None = option(None, "openai: request rate cap")
    temperature: float = option(1.0, "sampling temperature")
    top_p: float = option(1.0, "nucleus sampling: the probability mass kept")
    max_tokens: int = option(1024, "new tokens per completion at most")
    batch_size: int = option(8, "transformers: prompts per batch")
    dtype: str = option("auto", "transformers and vllm: the weights' dtype (auto: the model's "
                                "own; float32 for the tiny models)",
                        choices=["auto", "float32", "bfloat16", "float16"])

    def __post_init__(self):
        if self.engine not in ENGINES:
            raise ValueError(f"--engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        for name in ("concurrency", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be >= 1, got {getattr(self, name)}")

    def sampling(self, seed: int) -> Sampling:
        return Sampling(temperature=self.temperature, top_p=self.top_p,
                        max_tokens=self.max_tokens, seed=seed)

    def engine_options(self) -> dict:
        """The keyword options of :func:`~.engines.make_engine` (beside kind, model, sampling)."""
        return {"base_url": self.base_url, "api_key": self.api_key,
                "concurrency": self.concurrency, "requests_per_s": self.requests_per_s,
                "batch_size": self.batch_size, "dtype": self.dtype}
