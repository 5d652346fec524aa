"""The default run generating with vLLM (colocated, on CPU) against the same run generating with
transformers: the held-out curves side by side, the weight-sync check of every step, and the
wall and generation times of both (one run each, one after the other, on one machine).

    python benchmarks/vllm_default.py OUT [--seed 0] [--max_steps 90]   # runs both, then reports
    python benchmarks/vllm_default.py OUT --report                       # the report of OUT's runs

OUT/transformers and OUT/vllm are the two run directories; OUT/vllm-default.png the picture;
OUT/vllm-default.json the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEYS = (("code_acc", "code accuracy (T=1)"), ("code_acc_greedy", "greedy"),
        ("ut_acc", "unit-test accuracy"), ("bon_acc", "best-of-4x4"))


def run(out: Path, engine: str, seed: int, max_steps: int) -> dict:
    args = [sys.executable, "-m", "coevo_code.cli", "train", "--output_dir", str(out / engine),
            "--seed", str(seed), "--max_steps", str(max_steps)]
    if engine == "vllm":
        args += ["--use_vllm", "true", "--vllm_mode", "colocate"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.time()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": time.time() - t, "cpu_s": (after.ru_utime - before.ru_utime)
            + (after.ru_stime - before.ru_stime)}


def read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def report(out: Path) -> dict:
    from coevo_code.plots import pyplot, save
    times = json.loads((out / "times.json").read_text()) if (out / "times.json").is_file() else {}
    figures = {}
    for engine in ("transformers", "vllm"):
        lines, evals = read(out / engine / "metrics.jsonl"), read(out / engine / "eval.jsonl")
        f = {"steps": len(lines),
             "time_generation_s": sum(x["time_generation"] or 0 for x in lines),
             "time_step_s": sum(x["time_step"] or 0 for x in lines),
             "heldout": {x["step"]: {k: x.get(k) for k, _ in KEYS} for x in evals},
             **times.get(engine, {})}
        if engine == "vllm":
            agree = [x.get("vllm_sync_agree") for x in lines]
            f["sync_checked_steps"] = sum(a is not None for a in agree)
            f["sync_agree_min"] = min(a for a in agree if a is not None)
            f["sync_logprob_diff_max_mean"] = max(x["vllm_sync_logprob_diff"] for x in lines
                                                  if x.get("vllm_sync_logprob_diff") is not None)
            f["sync_logprob_diff_max"] = max(x["vllm_sync_logprob_diff_max"] for x in lines
                                             if x.get("vllm_sync_logprob_diff_max") is not None)
        figures[engine] = f
    plt = pyplot()
    fig, axes = plt.subplots(1, len(KEYS), figsize=(13, 3.4), sharey=True)
    for ax, (key, label) in zip(axes, KEYS):
        for engine, style in (("transformers", "-o"), ("vllm", "--s")):
            h = figures[engine]["heldout"]
            steps = sorted(int(s) for s in h)
            ax.plot(steps, [h[s][key] for s in steps], style, label=engine)
        ax.set(title=label, xlabel="step", ylim=(0, 1))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("held-out (60 problems)")
    save(fig, out / "vllm-default.png")
    (out / "vllm-default.json").write_text(json.dumps(figures, indent=1))
    for engine, f in figures.items():
        print(f"{engine:<12} steps {f['steps']}, generation {f['time_generation_s']:.0f} s of "
              f"{f['time_step_s']:.0f} s in steps; wall {f.get('wall_s', float('nan')):.0f} s, "
              f"CPU {f.get('cpu_s', float('nan')):.0f} s; held-out " + "; ".join(
                  f"{k} " + " -> ".join(f"{f['heldout'][s][k]:.2f}" for s in sorted(
                      f["heldout"], key=int)) for k, _ in KEYS))
    v, t = figures["vllm"], figures["transformers"]
    print(f"vllm / transformers: generation time {v['time_generation_s'] / t['time_generation_s']:.2f}"
          + (f", wall {v['wall_s'] / t['wall_s']:.2f}, CPU {v['cpu_s'] / t['cpu_s']:.2f}"
             if "wall_s" in v and "wall_s" in t else "")
          + f"; sync check on {v['sync_checked_steps']} steps, agreement at least "
          f"{v['sync_agree_min']}, mean |delta log p| at most {v['sync_logprob_diff_max_mean']:.2e}")
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max_steps", type=int, default=90)
    ap.add_argument("--report", action="store_true", help="report the runs already in OUT")
    a = ap.parse_args()
    out = Path(a.out)
    if not a.report:
        out.mkdir(parents=True, exist_ok=True)
        env_threads = os.environ.get("OMP_NUM_THREADS")
        times = {e: run(out, e, a.seed, a.max_steps) for e in ("transformers", "vllm")}
        times["omp_num_threads"] = env_threads
        (out / "times.json").write_text(json.dumps(times, indent=1))
    report(out)


if __name__ == "__main__":
    main()
