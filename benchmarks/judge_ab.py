"""Interleaved A/B of two checkouts: a base (``git worktree add /tmp/base 72d467c``) and this one,
round after round (order alternating), one process each: ``benchmarks/judge.py --repeats 3``
(stdio, functional literal, functional test process, each with the legacy judge in the same run
as a noise reference) and the timed part of ``benchmarks/executor.py`` (its 40 x 40 stdio job
through ``Executor``, without the fresh-interpreter baseline, which takes minutes on a loaded
machine). Prints the median cells/s of each workload for both and their ratio.

With ``--cpu`` (root, a cgroup v1 ``cpuacct`` hierarchy), each checkout also runs the three
judge.py workloads in a cgroup of its own and reports cells per CPU-second: every process of the
run counted (the executor, its judges, zygotes and cells), so the figure holds on a machine that
other work keeps busy, where wall-clock throughput says more about the neighbours than the code;
and the cells per wall-clock second of those same runs. ``--only-cpu`` runs that part alone.

Besides the ratio of the medians, the table gives the median of the per-round ratios (both
checkouts ran back to back in a round, on the same machine state) and their quartiles: a spread
that straddles 1.00 is a difference within the noise.

    python benchmarks/judge_ab.py BASE_CHECKOUT [--rounds 5] [--cpu] [--json FILE]
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
ap.add_argument("--repeats", type=int, default=3, help="judge.py repeats per round (their median)")
ap.add_argument("--json", help="also write every run's figures here")
ap.add_argument("--cpu", action="store_true",
                help="also cells per CPU-second of each judge.py workload (cgroup v1 cpuacct)")
ap.add_argument("--only-cpu", action="store_true", help="the CPU figures alone")
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
CPU_PART = r'''
import json, os, sys, time
sys.path.insert(0, ".")
from benchmarks.judge import functional_job, stdio_job
from coevo_code.execution import Executor
usage = os.environ["COEVO_AB_CPUACCT"] + "/cpuacct.usage"
func = functional_job()
jobs = {"stdio": stdio_job(), "functional": func,
        "functional_test_process": dict(func, tests=[{"code": t["code"] + ", 'message'"}
                                                     for t in func["tests"]])}
ex = Executor(slots=2)
ex.run([{"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}])
out = {}
for kind, job in jobs.items():
    cells = len(job["programs"]) * len(job["tests"])
    ex.run([job])  # warm: the heavy zygote, the caches
    c0, t0 = int(open(usage).read()), time.perf_counter()
    for _ in range(3):
        ex.run([job])
    c1, t1 = int(open(usage).read()), time.perf_counter()
    out[kind + ", cells per CPU-second"] = 3 * cells / ((c1 - c0) / 1e9)
    out[kind + ", cells/s in the same runs"] = 3 * cells / (t1 - t0)
ex.close()
print(json.dumps(out))
'''
CPUACCT = "/sys/fs/cgroup/cpuacct"


def cpu_run(root: str, env: dict) -> dict | None:
    """CPU_PART in a fresh cpuacct cgroup (the child enters it before it execs)."""
    if not os.path.isdir(CPUACCT) or not os.access(CPUACCT, os.W_OK):
        print("--cpu: no writable cgroup v1 cpuacct hierarchy here; CPU figures skipped")
        return None
    cg = tempfile.mkdtemp(prefix="coevo-ab-", dir=CPUACCT)
    try:
        procs = cg + "/cgroup.procs"
        p = subprocess.run([sys.executable, "-c", CPU_PART], cwd=root,
                           env=dict(env, COEVO_AB_CPUACCT=cg), capture_output=True, text=True,
                           timeout=1800, preexec_fn=lambda: open(procs, "w").write(str(os.getpid())))
        if p.returncode:
            print("CPU part failed", p.stderr[-1500:], flush=True)
            return None
        return json.loads(p.stdout.strip().splitlines()[-1])
    finally:
        for _ in range(50):  # the cgroup empties once its last process is reaped
            try:
                os.rmdir(cg)
                break
            except OSError:
                import time
                time.sleep(0.1)


rows = {}
for r in range(ROUNDS):
    order = list(TREES.items()) if r % 2 == 0 else list(TREES.items())[::-1]
    for name, root in order:
        env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1")
        if ARGS.cpu or ARGS.only_cpu:
            for k, v in (cpu_run(root, env) or {}).items():
                rows.setdefault((name, f"judge.py {k}"), []).append(v)
        if ARGS.only_cpu:
            print(r, name, {k[1]: round(v[-1], 1) for k, v in rows.items() if k[0] == name},
                  flush=True)
            continue
        out = f"{TMP}/{name}-judge-{r}.json"
        p = subprocess.run([sys.executable, "benchmarks/judge.py", "--repeats", str(ARGS.repeats),
                            "--json", out], cwd=root, env=env, capture_output=True, text=True,
                           timeout=1800)
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


def quartiles(xs: list) -> tuple:
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]


# Each round runs both checkouts back to back, so a round's ratio compares runs that saw the same
# machine; the median of those ratios and their quartiles say how sure the figure is.
print("\n| workload | base: median (runs) | this checkout: median (runs) | ratio of medians "
      "| ratio per round: median [quartiles] |")
print("| --- | --- | --- | --- | --- |")
for k in sorted({k for _, k in rows}):
    a, b = rows.get(("base", k), []), rows.get(("branch", k), [])
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        lo, mid, hi = quartiles([y / x for x, y in zip(a, b)])
        print(f"| {k} | {ma:.1f} ({', '.join(f'{x:.0f}' for x in a)}) | {mb:.1f} "
              f"({', '.join(f'{x:.0f}' for x in b)}) | {mb / ma:.2f} "
              f"| {mid:.2f} [{lo:.2f}, {hi:.2f}] |")
if ARGS.json:
    Path(ARGS.json).write_text(json.dumps({f"{a}|{b}": v for (a, b), v in rows.items()}, indent=1))
