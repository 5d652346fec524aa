"""Interleaved A/B of two checkouts: a base (``git worktree add /tmp/base 72d467c``) and this one,
round after round (order alternating), one process each: ``benchmarks/judge.py --repeats 1``
(stdio, functional literal, functional test process, each with the legacy judge in the same run
as a noise reference) and the timed part of ``benchmarks/executor.py`` (its 40 x 40 stdio job
through ``Executor``, without the fresh-interpreter baseline, which takes minutes on a loaded
machine). Prints the median cells/s of each workload for both and their ratio.

    python benchmarks/judge_ab.py BASE_CHECKOUT [--rounds 5] [--json FILE]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ap = argparse.ArgumentParser(description="judge.py and executor.py: a base checkout against this")
ap.add_argument("base")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--json", help="also write every run's figures here")
ARGS = ap.parse_args()
TREES = {"base": str(Path(ARGS.base).resolve()), "branch": str(Path(__file__).resolve().parents[1])}
ROUNDS = ARGS.rounds
TMP = tempfile.mkdtemp(prefix="judge-ab-")
EXEC_PART = r'''
import json, statistics, sys, time
sys.path.insert(0, ".")
from benchmarks.executor import programs, tests, TIME_LIMIT, MEM_MB
from coevo_code.execution import Executor
progs, tsts = programs(), tests()
job = {"id": "bench", "kind": "stdio", "programs": progs, "tests": tsts,
       "time_limit_s": TIME_LIMIT, "memory_limit_mb": MEM_MB}
ex = Executor()
ex.run([{"id": "warm", "programs": progs[:2], "tests": tsts[:4]}])
times = []
for _ in range(2):
    t0 = time.perf_counter(); ex.run([job]); times.append(time.perf_counter() - t0)
ex.close()
print(json.dumps({"executor_cells_per_s": len(progs) * len(tsts) / statistics.median(times)}))
'''
rows = {}
for r in range(ROUNDS):
    order = list(TREES.items()) if r % 2 == 0 else list(TREES.items())[::-1]
    for name, root in order:
        env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1")
        out = f"{TMP}/{name}-judge-{r}.json"
        p = subprocess.run([sys.executable, "benchmarks/judge.py", "--repeats", "1", "--json", out],
                           cwd=root, env=env, capture_output=True, text=True, timeout=1800)
        if p.returncode == 0:
            fig = json.load(open(out))
            for k in ("stdio", "functional", "functional_test_process"):
                rows.setdefault((name, f"judge.py {k}"), []).append(fig[k]["new_cells_per_s"])
                rows.setdefault((name, f"judge.py {k}: legacy judge, same run"), []).append(
                    fig[k]["legacy_cells_per_s"])
        else:
            print(name, "judge.py failed", p.stderr[-1500:], flush=True)
        p = subprocess.run([sys.executable, "-c", EXEC_PART], cwd=root, env=env,
                           capture_output=True, text=True, timeout=1800)
        if p.returncode == 0:
            rows.setdefault((name, "executor.py stdio 40x40 (timed part)"), []).append(
                json.loads(p.stdout.strip().splitlines()[-1])["executor_cells_per_s"])
        else:
            print(name, "executor part failed", p.stderr[-1500:], flush=True)
        print(r, name, {k[1]: round(v[-1], 1) for k, v in rows.items() if k[0] == name}, flush=True)
print("\n| workload | base: median cells/s (runs) | this checkout: median cells/s (runs) | ratio |")
print("| --- | --- | --- | --- |")
for k in sorted({k for _, k in rows}):
    a, b = rows.get(("base", k), []), rows.get(("branch", k), [])
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {k} | {ma:.1f} ({', '.join(f'{x:.0f}' for x in a)}) | {mb:.1f} "
              f"({', '.join(f'{x:.0f}' for x in b)}) | {mb / ma:.2f} |")
if ARGS.json:
    Path(ARGS.json).write_text(json.dumps({f"{a}|{b}": v for (a, b), v in rows.items()}, indent=1))
