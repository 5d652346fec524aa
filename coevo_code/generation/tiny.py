"""The tiny models that ship with the package (made by ``scripts/make_tiny_model.py``); nothing
downloads, so the default run and the tests work offline on any machine.

Warm-started (weights fine-tuned on the task world's ``sft`` split, shipped in half precision and
loaded as float32):

- ``tiny`` (also ``coevo-tiny`` or no model at all): Qwen2-style, ChatML template
  (``coevo_code/assets/tiny/``);
- ``tiny-llama``: Llama-style, its own tokenizer and Llama-3 chat template
  (``coevo_code/assets/tiny-llama/``): the second family of CPU pair and ring runs.
- ``tiny-repair``: ``tiny``'s architecture and fine-tuning corpus plus repair examples (the
  second turn of a repair episode: a wrong first answer, the judge's feedback, a revision), so
  that it revises a failed solution now and then (``coevo_code/assets/tiny-repair/``).

Random (config and tokenizer only; weights drawn at run time from the run's seed): ``tiny-random``
and ``tiny-llama-random``, the smaller models of the plumbing tests.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"
TINY_DIR = ASSETS / "tiny"
TINY_NAMES = (None, "", "tiny", "coevo-tiny")
TINY_FAMILIES = {"tiny-llama": ASSETS / "tiny-llama", "tiny-random": ASSETS / "tiny-random",
                 "tiny-llama-random": ASSETS / "tiny-llama-random",
                 "tiny-repair": ASSETS / "tiny-repair"}


def is_tiny(name) -> bool:
    return name in TINY_NAMES or name in TINY_FAMILIES


def tiny_dir(name=None) -> Path:
    return TINY_FAMILIES.get(name, TINY_DIR)


def is_warm(name=None) -> bool:
    """Whether the tiny model ``name`` ships fine-tuned weights (else they are drawn at random)."""
    return (tiny_dir(name) / "model.safetensors").is_file()


def tiny_tokenizer(name=None):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(tiny_dir(name))


def build_tiny_model(seed: int = 0, name=None):
    """The tiny causal LM ``name`` in float32: the shipped weights, or (a random model) weights
    drawn from ``seed``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    if is_warm(name):
        return AutoModelForCausalLM.from_pretrained(tiny_dir(name), dtype=torch.float32)
    config = AutoConfig.from_pretrained(tiny_dir(name))
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    finally:
        torch.random.set_rng_state(state)
    return model


def load_tiny(name=None, seed: int = 0):
    """(model, tokenizer) of the tiny model ``name``."""
    return build_tiny_model(seed, name), tiny_tokenizer(name)


def save_tiny(path: Path, seed: int = 0, name=None) -> Path:
    """Write the tiny model ``name`` (float32) and its tokenizer to ``path`` (a model directory any
    TRL/transformers code can load, the reference model included)."""
    path = Path(path)
    if (path / "config.json").exists():
        return path
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    build_tiny_model(seed, name).save_pretrained(tmp)
    tiny_tokenizer(name).save_pretrained(tmp)
    tmp.rename(path)
    return path
