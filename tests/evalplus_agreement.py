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


# Honest-valued adversarial samples: the canonical answer in another form (empty, wrapped, as a
# bool or an int, reordered, as a float, a tuple, numpy, nearly equal), or the canonical answer
# from a program that mutates its arguments or hands back an argument object.
_ORIG = "\n\n_coevo_orig = {e}\n\ndef {e}(*args, **kwargs):\n    r = _coevo_orig(*args, **kwargs)\n"
ADVERSARIAL = {
    "empty_list": "\n\ndef {e}(*args, **kwargs):\n    return []\n",
    "wrapped_float": _ORIG + "    return [r] if isinstance(r, float) else r\n",
    "wrapped": _ORIG + "    return [r]\n",
    "as_bool": _ORIG + ("    if r is None or isinstance(r, bool) or type(r).__name__ == 'Match':\n"
                        "        return r is not None and r is not False\n    return r\n"),
    "bool_as_int": _ORIG + "    return int(r) if isinstance(r, bool) else r\n",
    "reordered": _ORIG + ("    if isinstance(r, dict):\n        return dict(reversed(list(r.items())))\n"
                          "    if isinstance(r, set):\n        return set(sorted(r, key=repr, reverse=True))\n"
                          "    return r\n"),
    "int_as_float": _ORIG + "    return float(r) if type(r) is int and abs(r) < 2 ** 53 else r\n",
    "list_as_tuple": _ORIG + "    return tuple(r) if isinstance(r, list) else r\n",
    "float_near": _ORIG + "    return r + 1e-9 if type(r) is float else r\n",
    "float_far": _ORIG + "    return r + 1e-3 if type(r) is float else r\n",
    "numpy": _ORIG + ("    import numpy\n    if type(r) is float:\n        return numpy.float64(r)\n"
                      "    if type(r) is list and r and all(type(x) is float for x in r):\n"
                      "        return numpy.array(r)\n    return r\n"),
    "mutates_args": _ORIG + ("    for a in args:\n        if isinstance(a, (list, dict, set)):\n"
                             "            a.clear()\n    return r\n"),
    "returns_the_argument": _ORIG + ("    for a in args:\n"
                                     "        if type(a) is type(r) and a == r:\n"
                                     "            return a\n    return r\n"),
}


def write_adversarial(recs: list[dict], kind: str, dest: Path, kinds=None) -> list[tuple[str, str]]:
    """Every adversarial sample (``kinds``, default all) for every task, in (task, kind) order;
    returns that order."""
    order = []
    with open(dest, "w", encoding="utf-8") as f:
        for r in recs:
            sol = (r["prompt"] + r["canonical_solution"]) if kind == "humaneval" \
                else r["canonical_solution"]
            for k in (kinds or ADVERSARIAL):
                f.write(json.dumps({"task_id": r["task_id"],
                                    "solution": sol + ADVERSARIAL[k].format(e=r["entry_point"])})
                        + "\n")
                order.append((r["task_id"], k))
    return order


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


def evalplus_verdicts(kind: str, data: Path, samples: Path, cache: Path,
                      every: bool = False) -> dict:
    """task_id -> (base passed, base+plus passed) of its first sample (``every``: a list, one
    per sample in the file's order) by evalplus 0.3.1 itself."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "TOKENIZERS_PARALLELISM": "false"}
    p = subprocess.run([sys.executable, "-c", EVALPLUS, kind, str(data), str(samples)], env=env,
                       capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"evalplus failed: {p.stderr[-2000:]}")
    res = json.loads(Path(str(samples).replace(".jsonl", "_eval_results.json")).read_text())
    out = {}
    for tid, rows in res["eval"].items():
        out[tid] = [(r["base_status"] == "pass",
                     r["base_status"] == "pass" and r["plus_status"] == "pass") for r in rows]
    return out if every else {tid: v[0] for tid, v in out.items()}


def coevo_verdicts(name: str, data: Path, samples: Path, out: Path,
                   every: bool = False) -> tuple[dict, dict]:
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "eval", "--benchmark", name,
                        "--data", str(data), "--samples", str(samples), "-o", str(out), "-q"],
                       capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"coevo eval failed: {p.stderr[-2000:]}")
    res = json.loads((out / "results.json").read_text())
    if every:
        return {tid: list(zip(v["base"], v["plus"])) for tid, v in res["per_task"].items()}, res
    return {tid: (v["base"][0], v["plus"][0]) for tid, v in res["per_task"].items()}, res
