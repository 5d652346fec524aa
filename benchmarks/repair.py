"""Does training in repair turns teach the coder to repair? And is a trained tester a better
source of feedback than public examples? Each run as a new user runs it (a fresh process).

    python benchmarks/repair.py [--seeds 0 1 2] [--out runs/repair] [--limit 240]

For every seed, two runs of ``configs/repair-tiny-cpu.yaml``:

- ``turns``: as written, two turns per episode (feedback: the policy's own tests);
- ``single``: the same seed with ``--repair_turns 1 --eval_repair_turns 2``: trained on single
  attempts, evaluated in two turns like the other.

From each run's ``eval.jsonl`` (held-out world problems, examples hidden): ``code_acc_turn1``,
``code_acc_turn2`` and their gap (turn 2 minus turn 1), at step 0 and at the last evaluation,
``repaired_share`` and ``broken_share``. Claims, every seed: the ``turns`` run's final gap is
larger than its step-0 gap and larger than the ``single`` run's final gap.

Then the feedback-source comparison (``coevo eval`` on ``--limit`` held-out world problems with
two of their eight gold tests as public examples, hidden from the prompts, the other six
judging; k = 4 solutions and tests): the warm start ``tiny-repair`` as the coder, its solutions
revised once against (a) the public examples, (b) its own tests, (c) the tests of the first
seed's trained ``turns`` run (``tester:RUN/final``); and the trained model as the coder with
(a) and (b). Where the runs keep only agreed feedback tests (``repair_feedback_agreement`` N,
the config's or passed on), (b) and (c) are also run with ``--feedback_agreement N``. Turn-2
accuracy, repaired share and broken share for each.

Prints both tables (markdown) and the claims with PASS or FAIL; writes ``summary.json`` to
``--out``. Finished runs are read back, so an interrupted table resumes.
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
CONFIG = ROOT / "configs" / "repair-tiny-cpu.yaml"
KINDS = {"turns": [], "single": ["--repair_turns", "1", "--eval_repair_turns", "2"]}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _launch(cmd: list[str], log: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    t0 = time.perf_counter()
    with open(log, "w") as f:
        p = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(f"repair: {' '.join(cmd)} failed (see {log})")
    return round(time.perf_counter() - t0, 1)


def run_train(out: Path, seed: int, kind: str, extra: list[str]) -> dict:
    run = out / f"{kind}-seed{seed}"
    done = run / "bench.json"
    if done.is_file():
        return json.loads(done.read_text())
    if run.exists():
        import shutil
        shutil.rmtree(run)
    wall = _launch([sys.executable, "-m", "coevo_code.cli", "train", "--config", str(CONFIG),
                    "--output_dir", str(run), "--seed", str(seed), *KINDS[kind], *extra],
                   out / f"{kind}-seed{seed}.log")
    evals = _jsonl(run / "eval.jsonl")
    steps = _jsonl(run / "metrics.jsonl")
    rec = {"seed": seed, "kind": kind, "wall_s": wall, "evals": [
        {k: e.get(k) for k in ("step", "code_acc", "code_acc_turn1", "code_acc_turn2",
                               "repaired_share", "broken_share", "ut_acc")}
        for e in evals],
        "repair_fixed_last": steps[-1].get("repair_fixed") if steps else None}
    done.write_text(json.dumps(rec))
    return rec


def gap(e: dict) -> float | None:
    a, b = e.get("code_acc_turn1"), e.get("code_acc_turn2")
    return None if a is None or b is None else b - a


def run_eval(out: Path, name: str, coder: str, feedback: str, limit: int,
             agreement: int = 0) -> dict:
    res = out / "feedback" / name
    done = res / "results.json"
    if not done.is_file():
        res.mkdir(parents=True, exist_ok=True)
        _launch([sys.executable, "-m", "coevo_code.cli", "eval", "--benchmark", "world",
                 "--split", "heldout", "--examples", "2", "--hide_examples", "--limit",
                 str(limit), "--model", coder, "--k_code", "4", "--k_test", "4",
                 "--repair_turns", "2", "--feedback_tests", feedback,
                 "--feedback_agreement", str(agreement), "--max_tokens", "64",
                 "--bootstrap", "20", "-q", "-o", str(res)], res.parent / f"{name}.log")
    r = json.loads(done.read_text())
    m, rep = r["metrics"], r["repair"]
    return {"name": name, "coder": coder, "feedback": feedback, "agreement": agreement,
            "turn1": m.get("code_acc_turn1"), "turn2": m.get("code_acc_turn2"),
            "repaired_share": m.get("repaired_share"), "wrong_first": rep["wrong_first"],
            "repaired": rep["repaired"], "broken_share": m.get("broken_share"),
            "right_first": rep.get("right_first"), "broken": rep.get("broken")}


def agreement(extra: list[str]) -> int:
    """The runs' ``repair_feedback_agreement``: the flag passed on, else the config's."""
    for i, a in enumerate(extra):
        if a == "--repair_feedback_agreement" and i + 1 < len(extra):
            return int(extra[i + 1])
        if a.startswith("--repair_feedback_agreement="):
            return int(a.split("=", 1)[1])
    import yaml
    return int((yaml.safe_load(CONFIG.read_text()) or {}).get("repair_feedback_agreement", 0))


def _f(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _s(x) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


def train_table(records: list[dict]) -> str:
    rows = ["| run | seed | wall | turn 1 (step 0 -> last) | turn 2 (step 0 -> last) | gap at "
            "step 0 | gap at last | repaired share (step 0 -> last) | broken share |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in records:
        a, b = r["evals"][0], r["evals"][-1]
        rows.append(f"| {r['kind']} | {r['seed']} | {r['wall_s']:.0f} s | "
                    f"{_f(a['code_acc_turn1'])} -> {_f(b['code_acc_turn1'])} | "
                    f"{_f(a['code_acc_turn2'])} -> {_f(b['code_acc_turn2'])} | {_s(gap(a))} | "
                    f"{_s(gap(b))} | {_f(a['repaired_share'])} -> {_f(b['repaired_share'])} | "
                    f"{_f(a.get('broken_share'))} -> {_f(b.get('broken_share'))} |")
    return "\n".join(rows)


def feedback_table(evals: list[dict]) -> str:
    rows = ["| coder | feedback tests | agreement | turn 1 | turn 2 | repaired share | "
            "broken share |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for e in evals:
        rows.append(f"| {e['coder']} | {e['feedback']} | {e['agreement']} | {_f(e['turn1'])} | "
                    f"{_f(e['turn2'])} | {_f(e['repaired_share'])} ({e['repaired']} of "
                    f"{e['wrong_first']}) | {_f(e['broken_share'])} ({e['broken']} of "
                    f"{e['right_first']}) |")
    return "\n".join(rows)


def claims(records: list[dict]) -> list[tuple[str, bool]]:
    out = []
    by = {(r["kind"], r["seed"]): r for r in records}
    for seed in sorted({r["seed"] for r in records}):
        t, s = by.get(("turns", seed)), by.get(("single", seed))
        if t is None or s is None:
            continue
        g0, g1, gs = gap(t["evals"][0]), gap(t["evals"][-1]), gap(s["evals"][-1])
        out.append((f"seed {seed}: after training in turns, turn 2 beats turn 1 by more than at "
                    f"step 0 ({_s(g1)} > {_s(g0)})", None not in (g0, g1) and g1 > g0))
        out.append((f"seed {seed}: ... and by more than the single-turn run evaluated in two "
                    f"turns ({_s(g1)} > {_s(gs)})", None not in (g1, gs) and g1 > gs))
    if records:
        gaps = [gap(r["evals"][-1]) for r in records if r["kind"] == "turns"]
        gaps = [g for g in gaps if g is not None]
        if gaps:
            print(f"repair: median final gap of the runs in turns {statistics.median(gaps):+.3f}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "repair")
    ap.add_argument("--limit", type=int, default=240, help="held-out problems of the comparison")
    ap.add_argument("--skip_feedback", action="store_true", help="the training table only")
    args, extra = ap.parse_known_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    records = []
    for seed in args.seeds:
        for kind in KINDS:
            rec = run_train(args.out, seed, kind, extra)
            records.append(rec)
            print(f"repair: {kind}/seed {seed}: {rec['wall_s']:.0f} s, gap "
                  f"{_s(gap(rec['evals'][0]))} -> {_s(gap(rec['evals'][-1]))}", flush=True)
    print(train_table(records))
    evals = []
    if not args.skip_feedback:
        trained = str(args.out / f"turns-seed{args.seeds[0]}" / "final")
        n = agreement(extra)
        plan = [("warm-public", "tiny-repair", "public", 0),
                ("warm-self", "tiny-repair", "self", 0),
                ("warm-tester", "tiny-repair", f"tester:{trained}", 0),
                ("trained-public", trained, "public", 0),
                ("trained-self", trained, "self", 0)]
        if n:  # the generated tests also as the runs use them: only the agreed ones
            plan[3:3] = [(f"warm-self-agree{n}", "tiny-repair", "self", n),
                         (f"warm-tester-agree{n}", "tiny-repair", f"tester:{trained}", n)]
            plan.append((f"trained-self-agree{n}", trained, "self", n))
        for name, coder, fb, a in plan:
            evals.append(run_eval(args.out, name, coder, fb, args.limit, a))
        print(feedback_table(evals))
    results = claims(records)
    for text, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    (args.out / "summary.json").write_text(json.dumps(
        {"records": records, "feedback": evals,
         "claims": [{"claim": t, "ok": ok} for t, ok in results]}, indent=1))
    print(f"repair: {args.out / 'summary.json'}")
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
