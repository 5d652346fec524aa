"""The tiny model that ships with the package: a Qwen2-style architecture config and a byte-level
BPE tokenizer with a ChatML template (``coevo_code/assets/tiny/``, made by
``scripts/make_tiny_model.py``). Its weights are drawn at run time from the run's seed; nothing
downloads, so the default run and the tests work offline on any machine.
"""

from __future__ import annotations

from pathlib import Path

TINY_DIR = Path(__file__).resolve().parent.parent / "assets" / "tiny"
TINY_NAMES = (None, "", "tiny", "coevo-tiny")


def is_tiny(name) -> bool:
    return name in TINY_NAMES


def tiny_tokenizer():
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(TINY_DIR)


def build_tiny_model(seed: int = 0):
    """A randomly initialised tiny causal LM (float32), reproducible from ``seed``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    config = AutoConfig.from_pretrained(TINY_DIR)
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    finally:
        torch.random.set_rng_state(state)
    return model


def save_tiny(path: Path, seed: int = 0) -> Path:
    """Write a freshly initialised tiny model and its tokenizer to ``path`` (a model directory
    any TRL/transformers code can load, the reference model included)."""
    path = Path(path)
    if (path / "config.json").exists():
        return path
    tmp = path.with_name(path.name + ".tmp")
    build_tiny_model(seed).save_pretrained(tmp)
    tiny_tokenizer().save_pretrained(tmp)
    tmp.rename(path)
    return path
