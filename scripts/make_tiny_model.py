"""Make the tiny models' files that ship with the package (``coevo_code/assets/tiny/`` and
``coevo_code/assets/tiny-llama/``).

The embedded default run and the tests train a tiny, randomly initialised Qwen2-style model (its
weights are drawn from ``config.json`` at run time with the run's seed; no weights ship). This
script writes that architecture config and a small byte-level BPE tokenizer with a ChatML chat
template, trained here on the bundled problems, their role prompts, reference solutions and tests
(so that the prompts and short Python programs tokenize compactly). Deterministic: rerunning it gives the same files.

    python scripts/make_tiny_model.py            # rewrites coevo_code/assets/tiny/
    python scripts/make_tiny_model.py --arch llama   # rewrites coevo_code/assets/tiny-llama/

The second family, for pair and ring runs on CPU (a Qwen2-style and a Llama-style agent must
differ in architecture *and* tokenizer, as cross-family partners do): a Llama-style config (no
tied embeddings, no attention bias, its own rope base) and a tokenizer trained with a different
vocabulary size, a prefix space, and Llama-3 chat tokens and template.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "coevo_code" / "assets"
OUT = ASSETS / "tiny"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                 "<|end_header_id|>", "<|eot_id|>", "<|finetune_right_pad_id|>"]
LLAMA3 = (
    "{{ '<|begin_of_text|>' }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content']"
    " + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")


def corpus() -> list[str]:
    from coevo_code import roles
    from coevo_code.tasks import load_tasks
    texts = []
    for task in load_tasks("bundled"):
        for messages in (roles.coder_messages(task), roles.tester_messages(task)):
            texts.append("\n".join(m["content"] for m in messages))
        texts.extend(f"```python\n{r}```" for r in task.references)
        for t in task.tests:
            texts.append(t.code if t.code else
                         f"**Test Input:**\n```{t.input}```\n\n**Test Output:**\n```{t.output}```")
    return texts


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", choices=("qwen2", "llama"), default="qwen2")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--vocab-size", type=int, default=None)
    args = p.parse_args(argv)
    llama = args.arch == "llama"
    out = args.out or (ASSETS / "tiny-llama" if llama else OUT)
    vocab = args.vocab_size or (1536 if llama else 2048)

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, PreTrainedTokenizerFast, Qwen2Config

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=llama)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=LLAMA_SPECIAL if llama
                                  else SPECIAL, min_frequency=3 if llama else 0,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    if llama:
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>",
                                       eos_token="<|eot_id|>",
                                       pad_token="<|finetune_right_pad_id|>", unk_token=None,
                                       additional_special_tokens=["<|start_header_id|>",
                                                                  "<|end_header_id|>"])
        fast.chat_template = LLAMA3
    else:
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                       pad_token="<|endoftext|>", unk_token=None,
                                       additional_special_tokens=["<|im_start|>"])
        fast.chat_template = CHATML
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out)

    if llama:
        config = LlamaConfig(
            vocab_size=len(fast), hidden_size=64, intermediate_size=160, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
            tie_word_embeddings=False, rope_theta=500000.0, bos_token_id=fast.bos_token_id,
            eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, use_cache=True)
    else:
        config = Qwen2Config(
            vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
            tie_word_embeddings=True, bos_token_id=None, eos_token_id=fast.eos_token_id,
            pad_token_id=fast.pad_token_id, use_cache=True)
    config.save_pretrained(out)
    args.out = out
    for f in sorted(args.out.iterdir()):
        print(f"{f}  {f.stat().st_size:,} bytes")
    print(json.dumps({"vocab": len(fast), "eos": fast.eos_token, "pad": fast.pad_token}))


if __name__ == "__main__":
    main()
