"""The judge against the legacy one (verdicts decided in the program's process), in one run.

Interleaves the two executors, repeat after repeat, on the same workloads and reports the median
throughput of each and their ratio:

- ``stdio``: the 40 x 40 stdio workload of ``benchmarks/executor.py``;
- ``functional``: 40 programs x 40 tests ``assert f(x) == y`` (right, wrong, crashing): literal
  tests, which the judge decides itself with one call into the program;
- ``functional_test_process``: the same tests with an assert message, so that each runs in a
  test process of its own (the path of every test that is not literal-only);
- ``expected`` (with ``--plus``): the cold computation of HumanEval+ / MBPP+ expected outputs on a
  seeded sample of tasks (each judge with an empty cache of its own).

    python benchmarks/judge.py [--repeats 5] [--launcher bwrap] [--plus 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from benchmarks.executor import programs as stdio_programs, tests as stdio_tests
from coevo_code.execution import Executor
from coevo_code.execution.launchers import choose_launcher
from fixtures.legacy import legacy_launcher

SHARED = Path(os.environ.get("COEVO_SHARED_DATA", ROOT.parent / "shared" / "data"))

FUNC_PROGRAMS = [
    "def f(xs):\n    return sorted(xs)[len(xs) // 2]",
    "def f(xs):\n    s = sorted(xs)\n    return s[len(s) // 2]",
    "import statistics\ndef f(xs):\n    return sorted(xs)[len(xs) // 2]",
    "def f(xs):\n    return sorted(xs)[len(xs) // 2 - 1]",  # off by one
    "def f(xs):\n    return max(xs)",  # wrong
    "def f(xs):\n    return xs[len(xs)]",  # crashes
    "def f(xs):\n    return sorted(xs, reverse=True)[(len(xs) - 1) // 2]",
    "from collections import Counter\ndef f(xs):\n    c = sorted(Counter(xs).elements())\n"
    "    return c[len(c) // 2]",
]


def functional_job() -> dict:
    rng = random.Random(0)
    tests = []
    for _ in range(40):
        xs = [rng.randint(-1000, 1000) for _ in range(rng.randint(1, 60))]
        tests.append({"code": f"assert f({xs!r}) == {sorted(xs)[len(xs) // 2]!r}"})
    progs = (FUNC_PROGRAMS * 5)[:40]
    return {"id": "func", "kind": "functional", "entry_point": "f", "programs": progs,
            "tests": tests, "time_limit_s": 1.0}


def stdio_job() -> dict:
    return {"id": "stdio", "kind": "stdio", "programs": stdio_programs(), "tests": stdio_tests(),
            "time_limit_s": 1.0}


def timed(ex: Executor, job: dict) -> tuple[float, list]:
    t0 = time.perf_counter()
    res = ex.run([job])[0]
    return time.perf_counter() - t0, res["outcomes"]


def expected_cold(ex: Executor, name: str, path: Path, n: int) -> float:
    """Seconds to compute the expected outputs of a seeded sample of n tasks, cache empty."""
    from coevo_code.tasks import evalplus
    with tempfile.TemporaryDirectory() as d:
        old = os.environ.get("COEVO_CACHE_DIR")
        os.environ["COEVO_CACHE_DIR"] = d
        try:
            t0 = time.perf_counter()
            loader = evalplus.load_humanevalplus if name == "humanevalplus" else \
                evalplus.load_mbppplus
            loader(str(path), executor=ex, limit=n, seed=0)
            return time.perf_counter() - t0
        finally:
            if old is None:
                os.environ.pop("COEVO_CACHE_DIR", None)
            else:
                os.environ["COEVO_CACHE_DIR"] = old


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--slots", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--launcher", default="auto", choices=["auto", "bwrap", "direct"])
    ap.add_argument("--plus", type=int, default=0, metavar="N",
                    help="also time the cold HumanEval+/MBPP+ expected outputs on N tasks each")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    name = choose_launcher(args.launcher)[0].name
    new = Executor(slots=args.slots, launcher=name)
    old = Executor(slots=args.slots, launcher=legacy_launcher(name))
    func = functional_job()
    jobs = {"stdio": stdio_job(), "functional": func,
            "functional_test_process": dict(func, tests=[{"code": t["code"] + ", 'message'"}
                                                         for t in func["tests"]])}
    figures: dict = {"launcher": name, "slots": args.slots, "repeats": args.repeats}
    try:
        for ex in (new, old):  # warm both
            ex.run([{"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}])
        for kind, job in jobs.items():
            cells = len(job["programs"]) * len(job["tests"])
            t_new, t_old = [], []
            same = None
            for _ in range(args.repeats):
                a, out_new = timed(new, job)
                b, out_old = timed(old, job)
                t_new.append(a)
                t_old.append(b)
                same = sum(x == y for ra, rb in zip(out_new, out_old) for x, y in zip(ra, rb))
            rn, ro = cells / statistics.median(t_new), cells / statistics.median(t_old)
            figures[kind] = {"cells": cells, "new_cells_per_s": round(rn, 1),
                             "legacy_cells_per_s": round(ro, 1), "ratio": round(rn / ro, 3),
                             "new_runs_s": [round(t, 3) for t in t_new],
                             "legacy_runs_s": [round(t, 3) for t in t_old],
                             "same_outcomes": same}
            print(f"{kind:<24}: new {rn:7.1f} cells/s, legacy {ro:7.1f} cells/s, ratio "
                  f"{rn / ro:.3f} (medians of {args.repeats}; {same}/{cells} outcomes equal)")
        if args.plus:
            for bench, rel in (("humanevalplus", "humanevalplus/HumanEvalPlus.jsonl.gz"),
                               ("mbppplus", "mbppplus/MbppPlus.jsonl.gz")):
                path = SHARED / rel
                if not path.is_file():
                    print(f"{bench}: {path} not found, skipped")
                    continue
                a = expected_cold(new, bench, path, args.plus)
                b = expected_cold(old, bench, path, args.plus)
                figures[f"expected_{bench}"] = {"tasks": args.plus, "new_s": round(a, 2),
                                                "legacy_s": round(b, 2), "ratio": round(a / b, 3)}
                print(f"{bench}: cold expected outputs of {args.plus} tasks: new {a:.1f} s, "
                      f"legacy {b:.1f} s, new/legacy time {a / b:.2f}x")
    finally:
        new.close()
        old.close()
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
