"""Canonical and deliberately broken solutions for a (sampled) HumanEval+ / MBPP+ file, scored by
`coevo eval --samples` and by evalplus's own evaluator on the same local file; used by
tests/test_evaluation_evalplus.py (seeded samples) and benchmarks/evalplus_agreement.py (full).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

MUTATIONS = ("canonical", "none", "perturb", "big_inputs_fail", "loop_on_big")

WRAP = {
    "none": "\n\ndef {e}(*args, **kwargs):\n    return None\n",
    "perturb": (
        "\n\n_coevo_orig = {e}\n\ndef {e}(*args, **kwargs):\n"
        "    r = _coevo_orig(*args, **kwargs)\n"
        "    if isinstance(r, bool):\n        return not r\n"
        "    if isinstance(r, int):\n        return r + 1\n"
        "    if isinstance(r, float):\n        return r + 0.5\n"
        "    if isinstance(r, str):\n        return r + 'x'\n"
        "    if isinstance(r, (list, tuple)):\n        return r[::-1]\n"
        "    return r\n"),
    "big_inputs_fail": (
        "\n\n_coevo_orig = {e}\n\ndef {e}(*args, **kwargs):\n"
        "    if len(repr(args)) > 40:\n        raise ValueError('too big for me')\n"
        "    return _coevo_orig(*args, **kwargs)\n"),
    "loop_on_big": (
        "\n\n_coevo_orig = {e}\n\ndef {e}(*args, **kwargs):\n"
        "    if len(repr(args)) > 400:\n        while True:\n            pass\n"
        "    return _coevo_orig(*args, **kwargs)\n"),
}


def read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def subset(src: Path, dest: Path, n: int | None, seed: int = 0, include=()) -> list[dict]:
    """A seeded sample of ``n`` tasks (plus the ``include`` ids) written to ``dest``."""
    recs = read(src)
    if n is not None and n < len(recs):
        keep = set(random.Random(seed).sample(range(len(recs)), n))
        keep |= {i for i, r in enumerate(recs) if r["task_id"] in include}
        recs = [recs[i] for i in sorted(keep)]
    data = "".join(json.dumps(r) + "\n" for r in recs).encode("utf-8")
    with open(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(data)  # mtime 0: the same bytes every time, so cached expected outputs are reused
    return recs


def write_samples(recs: list[dict], kind: str, dest: Path, seed: int = 0,
                  loops: int = 1) -> dict[str, str]:
    """One sample per task: canonical for about half, a mutation for the rest (at most
    ``loops`` infinite loops, which cost a time limit each). Returns task_id -> mutation."""
    rng = random.Random(seed)
    chosen, n_loops = {}, 0
    with open(dest, "w", encoding="utf-8") as f:
        for r in recs:
            m = rng.choice(MUTATIONS[:4]) if rng.random() < 0.6 else "canonical"
            if m == "canonical" and n_loops < loops and rng.random() < 0.1:
                m, n_loops = "loop_on_big", n_loops + 1
            sol = (r["prompt"] + r["canonical_solution"]) if kind == "humaneval" \
                else r["canonical_solution"]
            if m != "canonical":
                sol += WRAP[m].format(e=r["entry_point"])
            chosen[r["task_id"]] = m
            f.write(json.dumps({"task_id": r["task_id"], "solution": sol}) + "\n")
    return chosen


EVALPLUS = r'''
import json, os, sys
kind, data, samples = sys.argv[1:4]
os.environ["HUMANEVAL_OVERRIDE_PATH" if kind == "humaneval" else "MBPP_OVERRIDE_PATH"] = data
from evalplus.evaluate import evaluate
evaluate(dataset=kind, samples=samples, parallel=2, i_just_wanna_run=True)
'''


def evalplus_verdicts(kind: str, data: Path, samples: Path, cache: Path) -> dict:
    """task_id -> (base passed, base+plus passed) by evalplus 0.3.1 itself."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "TOKENIZERS_PARALLELISM": "false"}
    p = subprocess.run([sys.executable, "-c", EVALPLUS, kind, str(data), str(samples)], env=env,
                       capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"evalplus failed: {p.stderr[-2000:]}")
    res = json.loads(Path(str(samples).replace(".jsonl", "_eval_results.json")).read_text())
    out = {}
    for tid, rows in res["eval"].items():
        r = rows[0]
        out[tid] = (r["base_status"] == "pass",
                    r["base_status"] == "pass" and r["plus_status"] == "pass")
    return out


def coevo_verdicts(name: str, data: Path, samples: Path, out: Path) -> tuple[dict, dict]:
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "eval", "--benchmark", name,
                        "--data", str(data), "--samples", str(samples), "-o", str(out), "-q"],
                       capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"coevo eval failed: {p.stderr[-2000:]}")
    res = json.loads((out / "results.json").read_text())
    return {tid: (v["base"][0], v["plus"][0]) for tid, v in res["per_task"].items()}, res
