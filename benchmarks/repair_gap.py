"""Did the gap between repair turns change, beyond the sampling noise? Compares ``coevo eval
--repair_turns T`` results on the same problems (same ``--benchmark``, ``--split``, ``--limit``
and ``--seed``), each against a reference (the warm start, say):

    python benchmarks/repair_gap.py REF_DIR DIR [DIR ...] [--draws 4000]

For each result: turn-1 and turn-T accuracy, their gap, the repaired and broken counts, and the
change of the gap against REF's with a 95% bootstrap interval: the problems both results decided
are resampled with replacement (paired: one draw serves both), and a problem's gap is the mean,
over its solutions decided at every turn, of the last turn's verdict minus the first's. An
interval that excludes 0 is a change that the problems drawn do not explain.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def problem_gaps(per_task: dict) -> dict[str, float]:
    """Each problem's gap (last turn minus first, mean over its solutions decided at every
    turn) from a results.json ``per_task`` block; problems with no such solution are left out."""
    out = {}
    for tid, v in per_task.items():
        rows = [r for r in v.get("correct_by_turn") or [] if r and None not in r]
        if rows:
            a = np.asarray(rows, dtype=float)
            out[tid] = float(np.mean(a[:, -1] - a[:, 0]))
    return out


def paired_change(gaps: dict[str, float], ref: dict[str, float], draws: int = 4000,
                  seed: int = 0) -> tuple[float, float, float, int]:
    """Mean gap minus the reference's over the problems both decided, and its 95% bootstrap
    interval (percentiles); the number of problems."""
    ids = sorted(set(gaps) & set(ref))
    if not ids:
        raise ValueError("no problem decided in both results: were they run on the same problems?")
    d = np.array([gaps[i] - ref[i] for i in ids])
    rng = np.random.default_rng(seed)
    boot = d[rng.integers(len(d), size=(draws, len(d)))].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(d.mean()), float(lo), float(hi), len(ids)


def load(path: Path) -> dict:
    f = path / "results.json" if path.is_dir() else path
    if not f.is_file():
        raise SystemExit(f"repair_gap: {f} not found (a `coevo eval -o` folder or its results.json)")
    r = json.loads(f.read_text())
    if not r.get("repair") or "per_task" not in r:
        raise SystemExit(f"repair_gap: {f} is not a `coevo eval --repair_turns` result")
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref", type=Path)
    ap.add_argument("results", type=Path, nargs="+")
    ap.add_argument("--draws", type=int, default=4000)
    args = ap.parse_args(argv)
    ref = load(args.ref)
    ref_gaps = problem_gaps(ref["per_task"])
    print("| result | turn 1 | last turn | gap | repaired | broken | gap minus the reference's "
          "(95% interval) | problems |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in [args.ref, *args.results]:
        r = ref if path == args.ref else load(path)
        m, rep = r["metrics"], r["repair"]
        t = rep["turns"]
        a, b = m.get("code_acc_turn1"), m.get(f"code_acc_turn{t}")
        gap = "n/a" if a is None or b is None else f"{b - a:+.3f}"
        change, lo, hi, n = paired_change(problem_gaps(r["per_task"]), ref_gaps, args.draws)
        vs = "reference" if path == args.ref else f"{change:+.3f} ({lo:+.3f}, {hi:+.3f})"
        print(f"| {path.name} | {a:.3f} | {b:.3f} | {gap} | {rep['repaired']} of "
              f"{rep['wrong_first']} | {rep.get('broken', 'n/a')} of "
              f"{rep.get('right_first', 'n/a')} | {vs} | {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
