"""Full-data agreement with evalplus: every task of the shared HumanEval+ and MBPP+ files, one
sample each (canonical for about 40%, a deliberate mutation for the rest: returns None, perturbed
output, fails on big inputs, loops on big inputs), scored by `coevo eval --samples` and by
evalplus 0.3.1 on the same local file. Prints pass@1 of the canonical-only samples, the per-task
agreement, each disagreement, and both evaluators' wall time.

With ``--adversarial``, every task (or a seeded ``--tasks N`` of them, plus the ones ``--include``
names) gets every honest-valued adversarial sample of ``tests/evalplus_agreement.py``
(``ADVERSARIAL``: empty containers, wrapped floats, bools, reordered dicts and sets, ints as
floats, tuples, numpy, nearly equal floats, programs that mutate or return their arguments); it
prints the count, how many verdicts (base, base+plus) agree with evalplus's, and every
disagreement by task and sample kind.

    python benchmarks/evalplus_agreement.py [--data ../shared/data] [--only humanevalplus]
    python benchmarks/evalplus_agreement.py --adversarial [--tasks 50] [--include Mbpp/737,...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from evalplus_agreement import (ADVERSARIAL, coevo_verdicts, evalplus_verdicts, subset,
                                write_adversarial, write_samples)

SETS = {"humanevalplus": ("humaneval", "humanevalplus/HumanEvalPlus.jsonl.gz"),
        "mbppplus": ("mbpp", "mbppplus/MbppPlus.jsonl.gz")}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--only", choices=list(SETS))
    p.add_argument("--adversarial", action="store_true",
                   help="the honest-valued adversarial samples instead of the mutations")
    p.add_argument("--tasks", type=int, help="--adversarial: a seeded sample of this many tasks")
    p.add_argument("--include", default="", help="--adversarial: task ids always included")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.adversarial:
        return adversarial(args)
    report = {}
    for name, (kind, rel) in SETS.items():
        if args.only and name != args.only:
            continue
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            data = d / "data.jsonl.gz"
            recs = subset(args.data / rel, data, None)
            canon = d / "canonical.jsonl"
            canon.write_text("".join(json.dumps({"task_id": r["task_id"], "solution": (
                r["prompt"] + r["canonical_solution"]) if kind == "humaneval"
                else r["canonical_solution"]}) + "\n" for r in recs))
            t = time.time()
            _, res = coevo_verdicts(name, data, canon, d / "canon-out")
            t_canon = time.time() - t
            samples = d / "samples.jsonl"
            chosen = write_samples(recs, kind, samples, seed=0, loops=3)
            t = time.time()
            ours, _ = coevo_verdicts(name, data, samples, d / "coevo")
            t_ours = time.time() - t
            t = time.time()
            theirs = evalplus_verdicts(kind, data, samples, d / "cache")
            t_theirs = time.time() - t
        dis = {tid: {"mutation": chosen[tid], "coevo": ours[tid], "evalplus": theirs[tid]}
               for tid in ours if ours[tid] != theirs.get(tid)}
        report[name] = {"tasks": len(recs), "canonical_pass@1": res["pass@1"],
                        "canonical_pass@1_base": res["pass@1_base"],
                        "canonical_failing": [t for t, v in res["per_task"].items()
                                              if not v["plus"][0]],
                        "mutations": {m: list(chosen.values()).count(m)
                                      for m in sorted(set(chosen.values()))},
                        "agree": len(ours) - len(dis), "disagree": dis,
                        "seconds": {"coevo_canonical": round(t_canon, 1),
                                    "coevo": round(t_ours, 1), "evalplus": round(t_theirs, 1)}}
        print(json.dumps({name: report[name]}, indent=1), flush=True)


def adversarial(args) -> None:
    include = {x for x in args.include.split(",") if x}
    for name, (kind, rel) in SETS.items():
        if args.only and name != args.only:
            continue
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            data = d / "data.jsonl.gz"
            recs = subset(args.data / rel, data, args.tasks, args.seed, include=include)
            samples = d / "adversarial.jsonl"
            order = write_adversarial(recs, kind, samples)
            t = time.time()
            ours, _ = coevo_verdicts(name, data, samples, d / "coevo", every=True)
            t_ours = time.time() - t
            t = time.time()
            theirs = evalplus_verdicts(kind, data, samples, d / "cache", every=True)
            t_theirs = time.time() - t
        seen: dict = {}
        dis = []
        by_kind = {k: [0, 0, 0] for k in ADVERSARIAL}  # samples, agree, pass (both)
        for tid, k in order:
            i = seen[tid] = seen.get(tid, -1) + 1
            a, b = tuple(ours[tid][i]), tuple(theirs[tid][i])
            by_kind[k][0] += 1
            by_kind[k][1] += a == b
            by_kind[k][2] += a == b == (True, True)
            if a != b:
                dis.append({"task": tid, "sample": k, "coevo": a, "evalplus": b})
        print(json.dumps({name: {
            "tasks": len(recs), "samples": len(order), "agree": len(order) - len(dis),
            "disagree": dis, "by_kind (samples, agree, both pass)": by_kind,
            "seconds": {"coevo": round(t_ours, 1), "evalplus": round(t_theirs, 1)}}},
            indent=1), flush=True)


if __name__ == "__main__":
    main()
