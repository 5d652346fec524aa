"""The old home of the tiny models, kept so that ``coevo_code.training.model`` imports keep
working: they live in :mod:`coevo_code.generation.tiny` (evaluation uses them too)."""

from ..generation.tiny import (ASSETS, TINY_DIR, TINY_FAMILIES, TINY_NAMES, build_tiny_model,
                               is_tiny, is_warm, load_tiny, save_tiny, tiny_dir, tiny_tokenizer)

__all__ = ["ASSETS", "TINY_DIR", "TINY_FAMILIES", "TINY_NAMES", "build_tiny_model", "is_tiny",
           "is_warm", "load_tiny", "save_tiny", "tiny_dir", "tiny_tokenizer"]
