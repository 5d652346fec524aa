"""The tiny models that ship with the package: architecture configs and byte-level BPE tokenizers
(made by ``scripts/make_tiny_model.py``). Their weights are drawn at run time from the run's
seed; nothing downloads, so the default run and the tests work offline on any machine.

- ``tiny`` (also ``coevo-tiny`` or no model at all): Qwen2-style, ChatML template
  (``coevo_code/assets/tiny/``);
- ``tiny-llama``: Llama-style, its own tokenizer and Llama-3 chat template
  (``coevo_code/assets/tiny-llama/``): the second family of CPU pair and ring runs.
"""

from __future__ import annotations

from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"
TINY_DIR = ASSETS / "tiny"
TINY_NAMES = (None, "", "tiny", "coevo-tiny")
TINY_FAMILIES = {"tiny-llama": ASSETS / "tiny-llama"}


def is_tiny(name) -> bool:
    return name in TINY_NAMES or name in TINY_FAMILIES


def tiny_dir(name=None) -> Path:
    return TINY_FAMILIES.get(name, TINY_DIR)


def tiny_tokenizer(name=None):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(tiny_dir(name))


def build_tiny_model(seed: int = 0, name=None):
    """A randomly initialised tiny causal LM (float32), reproducible from ``seed``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    config = AutoConfig.from_pretrained(tiny_dir(name))
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    finally:
        torch.random.set_rng_state(state)
    return model


def save_tiny(path: Path, seed: int = 0, name=None) -> Path:
    """Write a freshly initialised tiny model and its tokenizer to ``path`` (a model directory
    any TRL/transformers code can load, the reference model included)."""
    path = Path(path)
    if (path / "config.json").exists():
        return path
    tmp = path.with_name(path.name + ".tmp")
    build_tiny_model(seed, name).save_pretrained(tmp)
    tiny_tokenizer(name).save_pretrained(tmp)
    tmp.rename(path)
    return path
