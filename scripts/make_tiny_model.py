"""Make the tiny model's files that ship with the package (``coevo_code/assets/tiny/``).

The embedded default run and the tests train a tiny, randomly initialised Qwen2-style model (its
weights are drawn from ``config.json`` at run time with the run's seed; no weights ship). This
script writes that architecture config and a small byte-level BPE tokenizer with a ChatML chat
template, trained here on the bundled problems, their role prompts, reference solutions and tests
(so that the prompts and short Python programs tokenize compactly). Deterministic: rerunning it gives the same files.

    python scripts/make_tiny_model.py            # rewrites coevo_code/assets/tiny/
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "coevo_code" / "assets" / "tiny"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


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
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--vocab-size", type=int, default=2048)
    args = p.parse_args(argv)

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None,
                                   additional_special_tokens=["<|im_start|>"])
    fast.chat_template = CHATML
    args.out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(args.out)

    config = Qwen2Config(
        vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, use_cache=True)
    config.save_pretrained(args.out)
    for f in sorted(args.out.iterdir()):
        print(f"{f}  {f.stat().st_size:,} bytes")
    print(json.dumps({"vocab": len(fast), "eos": fast.eos_token, "pad": fast.pad_token}))


if __name__ == "__main__":
    main()
