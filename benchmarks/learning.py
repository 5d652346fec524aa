"""Does the default run learn, and does the reward cause it? ``coevo train`` with no arguments,
over seeds, against its two controls, each run as a new user runs it (a fresh process).

    python benchmarks/learning.py default [--seeds 0 1 2] [--out runs/learning] [--max_steps N]

For every seed: the real run, the same run trained on rewards shuffled within each batch
(``--reward_control shuffle``: each role's rewards permuted over its rows) and on negated rewards
(``--reward_control flip``). From each run's ``eval.jsonl`` (held-out problems, before the first
step and after): code accuracy at temperature 1 and greedy, pass@4, reference-judged unit-test
accuracy and best-of-4x4, first and last. Prints one table (per run and the median over seeds),
the claims with PASS or FAIL:

- the real run's held-out ``code_acc`` rises by >= 0.15 and ``ut_acc`` by >= 0.10 (median over
  seeds), every seed rising; wall time <= 300 s each on 2 cores, >= 5,000 sandbox cells;
- the shuffled run's rise is less than a third of the real run's (median);
- the flipped run's ``code_acc`` falls (median);

and writes ``summary.json`` and ``learning.png`` (held-out curves, every run) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTROLS = ("none", "shuffle", "flip")
FIGS = ("code_acc", "code_acc_greedy", "pass_at_4", "ut_acc", "bon_acc")


def run_one(out: Path, seed: int, control: str, extra: list[str]) -> dict:
    """One ``coevo train`` in a fresh process; wall time and peak memory (max RSS of the trainer
    process, and of the largest sandbox process) from the kernel's accounting."""
    run = out / f"{control}-seed{seed}"
    if (run / "final").is_dir() and (run / "bench.json").is_file():
        return json.loads((run / "bench.json").read_text())  # done already: resumable
    if run.exists():
        import shutil
        shutil.rmtree(run)
    # torch's threads as the run's config sets them (the default run: two), as a user runs it
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    cmd = [sys.executable, "-m", "coevo_code.cli", "train", "--output_dir", str(run), "--seed",
           str(seed), "--reward_control", control, *extra]
    t0 = time.perf_counter()
    log = open(out / f"{control}-seed{seed}.log", "w")
    p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    log.close()
    if status != 0:
        raise SystemExit(f"learning: {' '.join(cmd)} failed (see {log.name})")
    evals = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines() if x.strip()]
    steps = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()
             if x.strip()]
    train_cells = sum(int(s.get("exec_cells") or 0) for s in steps)
    rec = {"seed": seed, "control": control, "wall_s": round(wall, 1),
           "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "evals": evals,
           "cells_train": train_cells, "cells_eval": sum(int(e.get("cells") or 0) for e in evals)}
    (run / "bench.json").write_text(json.dumps(rec))
    return rec


def _rise(rec: dict, key: str) -> float | None:
    first, last = rec["evals"][0].get(key), rec["evals"][-1].get(key)
    return None if first is None or last is None else last - first


def table(records: list[dict]) -> str:
    head = (f"{'run':<16}{'wall s':>7}{'RSS MB':>8}{'cells':>7}  " + "  ".join(
        f"{k:>21}" for k in FIGS))
    lines = [head, "-" * len(head)]
    for r in records:
        e0, e1 = r["evals"][0], r["evals"][-1]
        cells = "  ".join(f"{_fmt(e0.get(k))} -> {_fmt(e1.get(k))} ({_sgn(_rise(r, k))})"
                          for k in FIGS)
        lines.append(f"{r['control'] + '/' + str(r['seed']):<16}{r['wall_s']:>7.0f}"
                     f"{r['peak_rss_mb']:>8.0f}{r['cells_train'] + r['cells_eval']:>7}  {cells}")
    for c in CONTROLS:
        rs = [r for r in records if r["control"] == c]
        if rs:
            meds = "  ".join(f"{'median rise':>13} {_sgn(_median([_rise(r, k) for r in rs]))}"
                             for k in FIGS)
            lines.append(f"{c + '/median':<16}{_median([r['wall_s'] for r in rs]):>7.0f}"
                         f"{_median([r['peak_rss_mb'] for r in rs]):>8.0f}{'':>7}  {meds}")
    return "\n".join(lines)


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _fmt(x):
    return "  - " if x is None else f"{x:.2f}"


def _sgn(x):
    return "   -" if x is None else f"{x:+.2f}"


def claims(records: list[dict]) -> list[tuple[str, bool]]:
    by = {c: [r for r in records if r["control"] == c] for c in CONTROLS}
    real = by["none"]
    code = [_rise(r, "code_acc") for r in real]
    ut = [_rise(r, "ut_acc") for r in real]
    out = [
        (f"real: held-out code_acc rises >= 0.15 (median {_sgn(_median(code))}), every seed "
         f"rising", bool(real) and _median(code) >= 0.15 and all(x > 0 for x in code)),
        (f"real: held-out ut_acc rises >= 0.10 (median {_sgn(_median(ut))}), every seed rising",
         bool(real) and _median(ut) >= 0.10 and all(x is not None and x > 0 for x in ut)),
        (f"real: <= 300 s wall on 2 cores (max {max((r['wall_s'] for r in real), default=0):.0f}"
         f" s)", bool(real) and all(r["wall_s"] <= 300 for r in real)),
        (f"real: >= 5,000 sandbox cells in training (min "
         f"{min((r['cells_train'] for r in real), default=0)})",
         bool(real) and all(r["cells_train"] >= 5000 for r in real)),
    ]
    if by["shuffle"] and real:
        s = _median([_rise(r, "code_acc") for r in by["shuffle"]])
        out.append((f"shuffled: code_acc rise {_sgn(s)} < a third of the real "
                    f"{_sgn(_median(code))}", s < _median(code) / 3))
    if by["flip"]:
        f = _median([_rise(r, "code_acc") for r in by["flip"]])
        out.append((f"flipped: code_acc falls ({_sgn(f)})", f < 0))
    return out


def plot(records: list[dict], path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from coevo_code.plots import pyplot, save
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), sharey=True)
    colors = {"none": "tab:blue", "shuffle": "tab:gray", "flip": "tab:red"}
    for ax, key in zip(axes, ("code_acc", "code_acc_greedy", "ut_acc")):
        for r in records:
            xs = [e["step"] for e in r["evals"]]
            ys = [e.get(key) for e in r["evals"]]
            ax.plot(xs, ys, marker="o", ms=3, color=colors[r["control"]], alpha=0.8,
                    label=r["control"] if r["seed"] == records[0]["seed"] else None)
        ax.set(title=f"held-out {key}", xlabel="step", ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("coevo train (default run): real rewards against shuffled and negated ones")
    save(fig, path, legend=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["default"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--controls", nargs="+", default=list(CONTROLS), choices=CONTROLS)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "learning")
    args, extra = ap.parse_known_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    records = []
    for control in args.controls:  # the real runs first, on a quiet machine
        for seed in args.seeds:
            rec = run_one(args.out, seed, control, extra)
            records.append(rec)
            print(f"learning: {control}/seed {seed}: {rec['wall_s']:.0f} s, held-out code_acc "
                  f"{_fmt(rec['evals'][0]['code_acc'])} -> {_fmt(rec['evals'][-1]['code_acc'])}",
                  flush=True)
    print(table(records))
    results = claims(records)
    for text, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    (args.out / "summary.json").write_text(json.dumps(
        {"records": records, "claims": [{"claim": t, "ok": ok} for t, ok in results]}, indent=1))
    plot(records, args.out / "learning.png")
    print(f"learning: {args.out / 'summary.json'}, {args.out / 'learning.png'}")
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
