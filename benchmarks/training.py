"""A co-evolution training step against a bare TRL GRPO step on the same model and batch,
measured in the same run.

coevo: `coevo_code.training.train` on the plumbing run (the random tiny model, the bundled problems,
4 problems x (4 solutions + 4 tests) = 32 rows per step, 64-token completions): paired sampler,
parsing, the sandbox, CURE rewards, row masking, metrics lines, checkpoints off.
baseline: `trl.GRPOTrainer` with the same model, the same 32 prompts per step, the same
generation length, optimiser and seed, and a constant reward: TRL's own step cost.

Two workloads: `generate` (the model writes the completions; a random model writes text that
parses to nothing, so the sandbox idles) and `scripted` (TRL's rollout_func returns the tests'
scripted completions: references, wrong programs, garbage, correct and wrong tests; the sandbox
judges every one). Prints median step times (first step dropped), the ratio coevo/baseline and
coevo's phase split. `--device cuda` runs both in bf16 on a GPU.

    python benchmarks/training.py [--steps 10] [--device cpu|cuda] [--workload generate|scripted|both]
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


def _timer():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times, self._t = [], None

        def on_step_begin(self, args, state, control, **kw):
            self._t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self._t)

    return StepTimer()


def _device_overrides(device: str) -> dict:
    if device == "cuda":
        return {"use_cpu": False, "bf16": True, "torch_threads": None}
    return {}


def run_coevo(workdir: Path, steps: int, device: str, scripted: bool):
    from training_helpers import PLUMBING, bundled, scripted_rollout, tiny_config

    from coevo_code.training import train
    tasks = bundled()
    cfg = tiny_config(workdir / "coevo", max_steps=steps, **_device_overrides(device))
    timer = _timer()
    train(cfg, PLUMBING, tasks=tasks, callbacks=[timer],
          rollout_func=scripted_rollout(tasks, 4) if scripted else None)
    lines = [json.loads(x) for x in (workdir / "coevo" / "metrics.jsonl").read_text().splitlines()]
    return timer.times, lines


def run_baseline(workdir: Path, steps: int, device: str, scripted: bool):
    import datasets
    from training_helpers import PLUMBING, bundled, scripted_rollout, tiny_config
    from trl import GRPOTrainer

    from coevo_code.training.data import paired_rows
    from coevo_code.generation.tiny import save_tiny
    tasks = bundled()
    cfg = tiny_config(workdir / "trl", max_steps=steps, **_device_overrides(device))
    model = save_tiny(workdir / "trl-model", seed=cfg.seed, name=PLUMBING.model_name_or_path)
    rows = [{"prompt": r["prompt"]} for r in paired_rows(tasks, "train", 1)]
    cfg.model_init_kwargs = {"dtype": "float32"}
    timer = _timer()

    def constant(completions, **kw):
        return [0.0] * len(completions)

    trainer = GRPOTrainer(model=str(model), reward_funcs=[constant], args=cfg,
                          train_dataset=datasets.Dataset.from_list(rows), callbacks=[timer],
                          rollout_func=scripted_rollout(tasks, 4) if scripted else None)
    trainer.train()
    return timer.times


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--workload", choices=["generate", "scripted", "both"], default="both")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    workloads = ["generate", "scripted"] if args.workload == "both" else [args.workload]
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("training.py: --device cuda but torch sees no CUDA device")
    report = {"device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
              "steps": args.steps}
    for w in workloads:
        with tempfile.TemporaryDirectory() as d:
            base = run_baseline(Path(d), args.steps, args.device, w == "scripted")
            times, lines = run_coevo(Path(d), args.steps, args.device, w == "scripted")
        mb, mc = statistics.median(base[1:]), statistics.median(times[1:])
        phases = {k: statistics.median(x[f"time_{k}"] for x in lines[1:])
                  for k in ("generation", "execution", "rewards", "update")}
        cells = [x["exec_cells_per_s"] for x in lines[1:] if x["exec_cells_per_s"]]
        report[w] = {"coevo_step_s": mc, "trl_step_s": mb, "ratio": mc / mb, "phases_s": phases,
                     "exec_cells_per_step": statistics.median(x["exec_cells"] for x in lines[1:]),
                     "exec_cells_per_s": statistics.median(cells) if cells else None}
        print(f"[{w}] coevo step {mc:.3f} s, bare TRL step {mb:.3f} s, ratio {mc / mb:.2f}x "
              f"(medians of {len(times) - 1} steps)")
        print(f"[{w}] coevo phases (median s): " + ", ".join(f"{k} {v:.3f}" for k, v in
                                                             phases.items())
              + f"; sandbox cells/step {report[w]['exec_cells_per_step']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
