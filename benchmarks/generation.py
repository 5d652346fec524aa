"""Generated tokens per second: the vllm engine against the transformers engine, in one run, on
the same prompts and sampling (vLLM's CPU build on a machine without a GPU).

The prompts are the task world's coder and tester prompts (the default run's), k completions
each at the run's temperature, as one generation batch of the default run draws them. The two
engines take turns, repeat after repeat; each engine's start-up is timed apart. Tokens are counted
with the model's tokenizer on the completions either engine returns.

    python benchmarks/generation.py [--model tiny] [--problems 8] [--k 4] [--max_tokens 64]
        [--repeats 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max_tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    import torch

    from coevo_code.generation.engines import Sampling, TransformersEngine, VLLMEngine
    from coevo_code.generation.tiny import tiny_tokenizer
    from coevo_code.roles import coder_messages, tester_messages
    from coevo_code.tasks import load_tasks
    torch.set_num_threads(1)

    tasks = list(load_tasks("world", split="train"))[:a.problems]
    conversations = [m(t) for t in tasks for m in (coder_messages, tester_messages)]
    sampling = Sampling(temperature=a.temperature, max_tokens=a.max_tokens, seed=0)
    tok = tiny_tokenizer(a.model)
    start = {}
    engines = {}
    for name, cls in (("vllm", VLLMEngine), ("transformers", TransformersEngine)):
        t = time.perf_counter()
        engines[name] = cls(a.model, sampling)
        engines[name].generate(conversations[:1], 1)  # warm-up
        start[name] = time.perf_counter() - t
    rates: dict[str, list[float]] = {n: [] for n in engines}
    for r in range(a.repeats):
        for name, engine in engines.items():
            engine.sampling = Sampling(temperature=a.temperature, max_tokens=a.max_tokens,
                                       seed=r)
            t = time.perf_counter()
            out = engine.generate(conversations, a.k)
            dt = time.perf_counter() - t
            tokens = sum(len(tok(c, add_special_tokens=False)["input_ids"])
                         for group in out for c in group)
            rates[name].append(tokens / dt)
            print(f"repeat {r}: {name:<12} {tokens} tokens in {dt:.2f} s = {tokens / dt:.0f} "
                  f"tokens/s", flush=True)
    for engine in engines.values():
        engine.close()
    med = {n: statistics.median(v) for n, v in rates.items()}
    ratios = [v / t for v, t in zip(rates["vllm"], rates["transformers"])]
    result = {"model": a.model, "prompts": len(conversations), "k": a.k,
              "max_tokens": a.max_tokens, "repeats": a.repeats,
              "tokens_per_s": med, "startup_s": start,
              "ratio_vllm_over_transformers": statistics.median(ratios),
              "ratios": ratios}
    print(f"vllm {med['vllm']:.0f} tokens/s, transformers {med['transformers']:.0f} tokens/s "
          f"(medians of {a.repeats}); ratio vllm / transformers {result['ratio_vllm_over_transformers']:.2f} "
          f"(median of per-repeat ratios, range {min(ratios):.2f} to {max(ratios):.2f}); start-up "
          f"vllm {start['vllm']:.1f} s, transformers {start['transformers']:.1f} s")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
