"""A coevo GRPO step of a randomly initialised model of Qwen2.5-0.5B's shape, at the default batch.

The model is built in code from Qwen2.5-0.5B's published configuration (24 layers, hidden 896,
MLP 4864, 14 query and 2 key/value heads, vocabulary 151,936, tied embeddings: 494 M parameters;
no weights are downloaded: they are drawn from the seed), with the shipped tiny model's tokenizer
(1,047 tokens: ids the random model draws above that decode to nothing). It trains with
`coevo_code.training.train` at the embedded default's batch (8 problems x (4 solutions + 4
tests) = 64 rows, 64-token completions, learning rate 7e-4, beta 0), every row in the update
(``skip_zero_advantage`` off, so the update's cost is the full batch's even where the random
model earns no reward), in bf16 autocast over fp32 weights (TRL's default on a GPU).

Two workloads: ``generate`` (the model writes every completion: generated tokens/s; a random
model's text parses to nothing, so the sandbox idles) and ``scripted`` (TRL's rollout_func returns
the tests' scripted completions: references, wrong programs, garbage, right and wrong tests, so
the sandbox and the rewards do real work; the update runs on those rows). Reports the median step
time (first step dropped where there are more) split into generation, sandbox, rewards and
update, generated tokens per second, and the peak GPU memory.

    python benchmarks/grpo_shape.py --device cuda [--steps 3] [--json FILE]
    python benchmarks/grpo_shape.py --device cpu --reduced --steps 1   # the dry run's size

``--reduced`` keeps the architecture but not the size (2 layers, hidden 64, the tokenizer's
vocabulary): the CPU dry run of scripts/gpu-check.sh, which only proves the script runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

# Qwen/Qwen2.5-0.5B's config.json (the values that set the shape and the arithmetic)
QWEN25_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                  num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                  max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                  tie_word_embeddings=True, hidden_act="silu", use_sliding_window=False,
                  sliding_window=32768, max_window_layers=24, attention_dropout=0.0)
REDUCED = dict(QWEN25_05B, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_window_layers=2)


def build_model(directory: Path, reduced: bool, device: str, seed: int) -> dict:
    """Write the random model (fp32 safetensors) and the tiny tokenizer to ``directory``."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from coevo_code.generation.tiny import tiny_dir
    tok = AutoTokenizer.from_pretrained(tiny_dir("tiny"))
    values = dict(REDUCED, vocab_size=len(tok)) if reduced else dict(QWEN25_05B)
    rope_theta = values.pop("rope_theta")
    cfg = Qwen2Config(**values, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    cfg.rope_parameters = {"rope_type": "default", "rope_theta": rope_theta}
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.device(device):  # draw the weights where they will run: seconds, not minutes
        model = Qwen2ForCausalLM(cfg)
    n = sum(p.numel() for p in model.parameters())
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"params_m": round(n / 1e6, 1), "build_s": round(time.perf_counter() - t0, 1),
            "shape": ("reduced Qwen2 (2 layers, hidden 64, vocabulary 1,047): NOT 0.5B's shape"
                      if reduced else "Qwen2.5-0.5B's shape, random weights")}


def run(workdir: Path, model_dir: Path, workload: str, steps: int, device: str) -> dict:
    import torch
    from training_helpers import bundled, scripted_rollout
    from transformers import TrainerCallback
    from trl import ModelConfig

    from coevo_code.training import train
    from coevo_code.training.config import CoevoConfig

    class Timer(TrainerCallback):
        def __init__(self):
            self.times, self.t = [], 0.0

        def on_step_begin(self, args, state, control, **kw):
            self.t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self.t)

    tasks = bundled()
    out = workdir / workload
    cfg = CoevoConfig(output_dir=str(out), tasks="bundled", num_generations=4,
                      problems_per_generation=8, per_device_train_batch_size=64,
                      skip_zero_advantage=False, max_steps=steps, save_strategy="no",
                      logging_steps=1, max_completion_length=64, temperature=1.0,
                      learning_rate=7e-4, beta=0.0, seed=0, report_to="none", disable_tqdm=True,
                      use_cpu=device == "cpu", bf16=device == "cuda",
                      gradient_checkpointing=False, exec_slots=min(8, os.cpu_count() or 1),
                      model_init_kwargs={"dtype": "float32"},
                      torch_threads=1 if device == "cpu" else None)
    if device == "cuda":  # the peak of this workload alone: free what the last one left
        import gc
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    timer = Timer()
    train(cfg, ModelConfig(model_name_or_path=str(model_dir)), tasks=tasks, callbacks=[timer],
          rollout_func=scripted_rollout(tasks, 4) if workload == "scripted" else None)
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    keep = lines[1:] if len(lines) > 1 else lines
    med = lambda k: statistics.median(x[k] for x in keep)
    rows = cfg.per_device_train_batch_size
    # completion tokens of a step: half the rows are solutions, half tests (mean lengths, tokens)
    tokens = [rows / 2 * ((x["len_code_mean"] or 0) + (x["len_test_mean"] or 0)) for x in keep]
    gen = [x["time_generation"] for x in keep]
    res = {"step_s": statistics.median(timer.times[1:] if len(timer.times) > 1 else timer.times),
           "generation_s": med("time_generation"), "sandbox_s": med("time_execution"),
           "rewards_s": med("time_rewards"), "update_s": med("time_update"),
           "tokens_per_step": statistics.median(tokens),
           "exec_cells_per_step": med("exec_cells"), "steps_measured": len(keep),
           "gen_tokens_per_s": (statistics.median(t / g for t, g in zip(tokens, gen) if g)
                                if workload == "generate" else None),
           "peak_gpu_mem_gib": (torch.cuda.max_memory_allocated() / 2**30
                                if device == "cuda" else None)}
    return res


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    p.add_argument("--steps", type=int, default=3, help="steps per workload (first dropped)")
    p.add_argument("--workload", choices=["generate", "scripted", "both"], default="both")
    p.add_argument("--reduced", action="store_true",
                   help="2 layers, hidden 64, the tokenizer's vocabulary (the CPU dry run)")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("grpo_shape.py: --device cuda but torch sees no CUDA device")
    if args.device == "cpu":
        torch.set_num_threads(1)
    report = {"device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
              "dtype": "bf16 autocast, fp32 weights" if args.device == "cuda" else "fp32",
              "rows": 64, "max_completion_length": 64, "steps": args.steps, "workloads": {}}
    workloads = ["generate", "scripted"] if args.workload == "both" else [args.workload]
    with tempfile.TemporaryDirectory() as d:
        report.update(build_model(Path(d) / "model", args.reduced, args.device, seed=0))
        print(f"grpo_shape: {report['shape']}, {report['params_m']} M parameters "
              f"(built and saved in {report['build_s']} s)", flush=True)
        for w in workloads:
            r = run(Path(d), Path(d) / "model", w, args.steps, args.device)
            report["workloads"][w] = r
            tps = r["gen_tokens_per_s"]
            mem = r["peak_gpu_mem_gib"]
            print(f"[{w}] step {r['step_s']:.3f} s: generation {r['generation_s']:.3f}, sandbox "
                  f"{r['sandbox_s']:.3f} ({r['exec_cells_per_step']} cells), rewards "
                  f"{r['rewards_s']:.3f}, update {r['update_s']:.3f}"
                  + (f"; {tps:,.0f} generated tokens/s" if tps else "")
                  + (f"; peak GPU memory {mem:.2f} GiB" if mem is not None else ""), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
