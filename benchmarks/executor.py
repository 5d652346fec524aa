"""Executor throughput against a fresh-interpreter baseline, measured in the same run.

Workload: 40 programs x 40 stdio tests (correct programs in every stdin style, numpy, wrong
answers, floats for ints, extra labels, no output, crashes, EOF errors, a syntax error) and, as a
separate part, one infinite loop against the same 40 tests. The baseline starts a fresh
``python -I`` per cell with the same limits (CPU rlimit, address-space rlimit, wall-clock cap),
``slots`` at a time. Prints cells/s for each, their ratio, the verdict agreement and the
executor's peak memory.

    python benchmarks/executor.py [--slots N] [--repeats 3] [--no-loop] [--launcher auto]

``--backend ray`` measures instead the Ray backend against the local executor, in one run, on a
Ray cluster simulated on this machine (``ray.cluster_utils.Cluster``, bound to 127.0.0.1): one
node of N slots, then two nodes of N/2 slots each (the same cores: this shows what distribution
costs, not what more machines give), interleaved repeat after repeat with the local executor of
N slots. Two workloads: the one above, and a CURE-shaped batch (problems x 16 programs x 17
tests, small inputs). Prints cells/s and the ratio to local, the driver's CPU time per cell
(process time of the calling process during ``run``: for the local executor that is its whole
host side, for Ray only the coordination) and the time to the first result (the first progress
callback).

    python benchmarks/executor.py --backend ray [--slots 2] [--repeats 3] [--cure-problems 8]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from coevo_code.execution import Executor

TIME_LIMIT = 1.0
WALL = 2 * TIME_LIMIT + 1
MEM_MB = 1024

READERS = {
    "input": "n = int(input())\nxs = list(map(int, input().split()))",
    "readline": "import sys\nn = int(sys.stdin.readline())\nxs = list(map(int, sys.stdin.readline().split()))",
    "read": "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nxs = list(map(int, data[1:1 + n]))",
    "buffer": "import sys\ndata = sys.stdin.buffer.read().split()\nn = int(data[0])\nxs = [int(x) for x in data[1:1 + n]]",
    "open0": "data = open(0).read().split()\nn = int(data[0])\nxs = list(map(int, data[1:]))",
    "iter": "import sys\nlines = [l for l in sys.stdin]\nn = int(lines[0])\nxs = list(map(int, lines[1].split()))",
}
CORRECT_OUT = [
    "print(sum(xs), max(xs))",
    "s = 0\nfor x in xs:\n    s += x\nprint(s, max(xs))",
    "print(sum(xs), end=' ')\nprint(max(xs), end='  \\n\\n')",
    "import sys\nsys.stdout.write(f'{sum(xs)} {max(xs)}\\n')",
]
WRONG_OUT = [
    "print(sum(xs) + 1, max(xs))",       # wrong answer
    "print(float(sum(xs)), max(xs))",    # float for int
    "print('Answer:', sum(xs), max(xs))",  # extra label
    "pass",                              # no output
    "print(sum(xs))",                    # missing token
    "print(max(xs), sum(xs))",           # swapped
]
CRASHES = [
    "print(1 // 0)",
    "print(xs[n])",
    "input()\nprint(sum(xs), max(xs))",  # EOF error
    "import sys\nsys.exit(3)",
    "def f(k):\n    return f(k + 1)\nf(0)",
]


def programs() -> list[str]:
    out = []
    styles = list(READERS)
    for i, body in enumerate(CORRECT_OUT * 4):  # 16 correct, every style
        out.append(READERS[styles[i % len(styles)]] + "\n" + body)
    out.append("import numpy as np\nimport sys\na = np.array(sys.stdin.read().split()[1:], dtype=np.int64)\nprint(int(a.sum()), int(a.max()))")
    out.append("import numpy as np\nn = int(input())\na = np.array(input().split(), dtype=np.int64)\nprint(a.sum(), a.max())")
    for i, body in enumerate(WRONG_OUT * 2):  # 12 wrong
        out.append(READERS[styles[(i + 1) % len(styles)]] + "\n" + body)
    for i, body in enumerate(CRASHES * 2):  # 10 crashing
        out.append(READERS[styles[(i + 2) % len(styles)]] + "\n" + body)
    out = out[:39]
    out.append("n = int(input()\nprint(n)")  # syntax error
    assert len(out) == 40
    return out


def tests(seed: int = 0, count: int = 40, max_n: int = 2000) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(1, max_n)
        xs = [rng.randint(-10**9, 10**9) for _ in range(n)]
        out.append({"input": f"{n}\n{' '.join(map(str, xs))}\n", "output": f"{sum(xs)} {max(xs)}\n"})
    return out


LOOP = "n = int(input())\nwhile True:\n    n += 1"


# ---- baseline: a fresh interpreter per cell ---------------------------------------------------
def _limits():
    cpu = int(TIME_LIMIT) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (MEM_MB << 20, MEM_MB << 20))


def baseline_cell(path: str, test: dict) -> str:
    try:
        r = subprocess.run([sys.executable, "-I", path], input=test["input"].encode(),
                           capture_output=True, timeout=WALL, preexec_fn=_limits,
                           env={"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    except subprocess.TimeoutExpired:
        return "timeout"
    if r.returncode < 0 and r.returncode in (-24, -9):  # SIGXCPU / SIGKILL from the CPU rlimit
        return "timeout"
    if r.returncode != 0:
        err = r.stderr.decode(errors="replace")
        if "SyntaxError" in err:
            return "syntax_error"
        if "MemoryError" in err:
            return "memory_limit"
        return "runtime_error"
    ok = " ".join(r.stdout.decode(errors="replace").split()) == " ".join(test["output"].split())
    return "ok" if ok else "wrong_answer"


def baseline(progs: list[str], tsts: list[dict], slots: int) -> tuple[list[list[str]], float]:
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, p in enumerate(progs):
            path = os.path.join(d, f"p{i}.py")
            Path(path).write_text(p)
            paths.append(path)
        cells = [(i, j) for i in range(len(progs)) for j in range(len(tsts))]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(slots) as pool:
            flat = list(pool.map(lambda c: baseline_cell(paths[c[0]], tsts[c[1]]), cells))
        dt = time.perf_counter() - t0
    it = iter(flat)
    return [[next(it) for _ in tsts] for _ in progs], dt


def tree_peak_rss_mb(pids: list[int]) -> float:
    """Sum of VmHWM (peak resident memory) over these processes and their descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, stack = 0, list(pids)
    while stack:
        p = stack.pop()
        stack.extend(children.get(p, []))
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def agreement(a, b) -> tuple[int, int, int]:
    cells = sum(len(r) for r in a)
    passed_same = sum(x == "ok" and y == "ok" or x != "ok" and y != "ok"
                      for ra, rb in zip(a, b) for x, y in zip(ra, rb))
    outcome_same = sum(x == y for ra, rb in zip(a, b) for x, y in zip(ra, rb))
    return cells, passed_same, outcome_same


# ---- the Ray backend against the local executor -------------------------------------------------
def cure_jobs(problems: int) -> list[dict]:
    """CURE's shape: per problem 16 programs (correct, wrong, crashing: the pool above) x 16
    generated tests + 1 gold, with small inputs."""
    pool = programs()
    rng = random.Random(1)
    return [{"id": f"cure{p}", "kind": "stdio", "programs": rng.sample(pool, 16),
             "tests": tests(seed=100 + p, count=17, max_n=50), "time_limit_s": TIME_LIMIT,
             "memory_limit_mb": MEM_MB} for p in range(problems)]


def timed_run(ex, jobs: list[dict]) -> dict:
    first: list[float] = []
    t0, c0 = time.perf_counter(), time.process_time()
    res = ex.run(jobs, progress=lambda n: first or first.append(time.perf_counter()))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    cells = sum(len(r) for j in res for r in j["outcomes"])
    return {"wall": wall, "cpu": cpu, "first": (first[0] - t0) if first else wall,
            "cells": cells, "outcomes": [j["outcomes"] for j in res]}


def ray_main(args) -> int:
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError:
        print("--backend ray needs Ray: pip install -e '.[ray]'", file=sys.stderr)
        return 2
    from coevo_code.execution.ray import RESOURCE, RayExecutor, init_ray

    slots = args.slots
    workloads = {
        "bench": [{"id": "bench", "kind": "stdio", "programs": programs(), "tests": tests(),
                   "time_limit_s": TIME_LIMIT, "memory_limit_mb": MEM_MB}],
        "cure": cure_jobs(args.cure_problems),
    }
    opts = {"launcher": args.launcher}
    if args.unit_cells:
        opts["unit_cells"] = args.unit_cells
    local = Executor(slots=slots, launcher=args.launcher)
    node = {"num_cpus": slots, "resources": {RESOURCE: 1}, "node_ip_address": "127.0.0.1"}
    t0 = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    init_ray(ray, cluster.address, None)
    cluster_s = time.perf_counter() - t0
    rows: dict[str, dict] = {}
    configs = [("ray, 1 node", 1, slots), ("ray, 2 nodes", 2, max(1, slots // 2))]
    try:
        for name, nodes, per_node in configs:
            if nodes == 2:
                cluster.add_node(**node)
                cluster.wait_for_nodes()
            t0 = time.perf_counter()
            rex = RayExecutor(address=cluster.address, slots=per_node, **opts)
            startup = time.perf_counter() - t0
            warm = [{"id": "warm", "programs": programs()[:4], "tests": tests(count=8)}]
            local.run(warm)
            rex.run(warm)
            for r in range(args.repeats):
                for wl, jobs in workloads.items():
                    for label, ex in (("local", local), (name, rex)):
                        m = timed_run(ex, jobs)
                        key = f"{label}|{wl}" if label != "local" else f"local ({name})|{wl}"
                        rows.setdefault(key, {"runs": []})["runs"].append(m)
            per_node_cells = [p["cells"] for p in rex.stats()["nodes"]]
            rows[f"{name}|startup"] = {"startup_s": startup, "nodes": len(rex.isolation["nodes"]),
                                       "slots": rex.isolation["slots"],
                                       "cells_per_node": per_node_cells}
            rex.close()
    finally:
        local.close()
        ray.shutdown()
        cluster.shutdown()

    def med(runs, key):
        return statistics.median(x[key] for x in runs)

    figures: dict = {"slots": slots, "repeats": args.repeats,
                     "cluster_start_s": round(cluster_s, 2),
                     "workloads": {k: sum(len(j["programs"]) * len(j["tests"]) for j in v)
                                   for k, v in workloads.items()}, "configs": {}}
    print(f"workloads: bench = 40 programs x 40 tests ({figures['workloads']['bench']} cells), "
          f"cure = {args.cure_problems} problems x 16 programs x 17 tests "
          f"({figures['workloads']['cure']} cells); {slots} slots in every configuration; "
          f"median of {args.repeats}, interleaved with the local executor")
    head = (f"{'configuration':<22}{'workload':<8}{'cells/s':>9}{'x local':>9}{'paired':>8}"
            f"{'driver CPU/cell':>17}{'first result':>14}{'verdicts':>10}")
    print(head)
    print("-" * len(head))
    for name, nodes, per_node in configs:
        info = rows[f"{name}|startup"]
        fig = {"nodes": info["nodes"], "slots_per_node": per_node, "startup_s": round(
            info["startup_s"], 2), "cells_per_node": info["cells_per_node"]}
        for wl in workloads:
            loc, rr = rows[f"local ({name})|{wl}"]["runs"], rows[f"{name}|{wl}"]["runs"]
            cells = loc[0]["cells"]
            l_rate, r_rate = cells / med(loc, "wall"), cells / med(rr, "wall")
            diffs = sum(a != b for x, y in zip(loc, rr)
                        for ja, jb in zip(x["outcomes"], y["outcomes"])
                        for ra, rb in zip(ja, jb) for a, b in zip(ra, rb))
            paired = statistics.median(x["wall"] / y["wall"] for x, y in zip(loc, rr))
            fig[wl] = {"local_cells_per_s": round(l_rate, 1), "ray_cells_per_s": round(r_rate, 1),
                       "ratio": round(r_rate / l_rate, 3), "paired_ratio": round(paired, 3),
                       "local_driver_cpu_us_per_cell": round(med(loc, "cpu") / cells * 1e6, 1),
                       "ray_driver_cpu_us_per_cell": round(med(rr, "cpu") / cells * 1e6, 1),
                       "local_first_result_ms": round(med(loc, "first") * 1e3, 1),
                       "ray_first_result_ms": round(med(rr, "first") * 1e3, 1),
                       "outcome_disagreements": diffs}
            f = fig[wl]
            print(f"{'local':<22}{wl:<8}{l_rate:>9.1f}{1.0:>9.2f}{'':>8}"
                  f"{f['local_driver_cpu_us_per_cell']:>14.1f} us"
                  f"{f['local_first_result_ms']:>11.1f} ms"
                  f"{'':>10}")
            print(f"{name + f' ({nodes}x{per_node})':<22}{wl:<8}{r_rate:>9.1f}"
                  f"{r_rate / l_rate:>9.2f}{paired:>8.2f}"
                  f"{f['ray_driver_cpu_us_per_cell']:>14.1f} us{f['ray_first_result_ms']:>11.1f} ms"
                  f"{diffs:>10}")
        figures["configs"][name] = fig
        print(f"  {name}: actors started in {fig['startup_s']:.1f} s; cells per node "
              f"{fig['cells_per_node']}")
    print(f"cluster start-up (head node): {cluster_s:.1f} s, not counted. x local: ratio of the "
          "median rates; paired: median over repeats of local time / ray time (robust to a "
          "drifting load); verdicts: cells whose outcome differs from the local run's")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--launcher", default="auto")
    ap.add_argument("--no-loop", action="store_true", help="skip the infinite-loop part")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--backend", choices=("local", "ray"), default="local",
                    help="ray: the Ray backend against the local executor on a simulated "
                         "cluster (see above) instead of the fresh-interpreter baseline")
    ap.add_argument("--cure-problems", type=int, default=8,
                    help="--backend ray: problems in the CURE-shaped workload")
    ap.add_argument("--unit-cells", type=int, default=None,
                    help="--backend ray: cells per unit (default: the backend's)")
    args = ap.parse_args()
    if args.backend == "ray":
        return ray_main(args)

    progs, tsts = programs(), tests()
    job = {"id": "bench", "kind": "stdio", "programs": progs, "tests": tsts,
           "time_limit_s": TIME_LIMIT, "memory_limit_mb": MEM_MB}
    cells = len(progs) * len(tsts)

    t0 = time.perf_counter()
    ex = Executor(slots=args.slots, launcher=args.launcher)
    startup = time.perf_counter() - t0
    ex.run([{"id": "warm", "programs": progs[:2], "tests": tsts[:4]}])
    times, result = [], None
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        result = ex.run([job])[0]
        times.append(time.perf_counter() - t0)
    ex_s = statistics.median(times)
    loop_s = loop_res = None
    if not args.no_loop:
        t0 = time.perf_counter()
        loop_res = ex.run([{**job, "programs": [LOOP]}])[0]
        loop_s = time.perf_counter() - t0
    peak = tree_peak_rss_mb([os.getpid()])
    iso = ex.isolation
    ex.close()

    base, base_s = baseline(progs, tsts, args.slots)
    n, same_pass, same_outcome = agreement(result["outcomes"], base)
    loop_base_s = None
    if not args.no_loop:
        lb, loop_base_s = baseline([LOOP], tsts, args.slots)

    ex_rate, base_rate = cells / ex_s, cells / base_s
    figures = {
        "cells": cells, "slots": args.slots, "launcher": iso["launcher"],
        "layers_on": [k for k, (on, _) in iso["layers"].items() if on],
        "executor_cells_per_s": round(ex_rate, 1),
        "executor_runs_s": [round(t, 3) for t in times],
        "baseline_cells_per_s": round(base_rate, 1),
        "ratio": round(ex_rate / base_rate, 2),
        "pass_fail_disagreements": n - same_pass,
        "outcome_disagreements": n - same_outcome,
        "executor_startup_s": round(startup, 3),
        "executor_peak_rss_mb": round(peak, 1),
        "ok_cells": sum(map(sum, result["passed"])),
    }
    if loop_s is not None:
        figures.update({"loop_executor_s": round(loop_s, 2), "loop_baseline_s": round(loop_base_s, 2),
                        "loop_outcomes": sorted(set(loop_res["outcomes"][0]))})
    print(f"workload: {len(progs)} programs x {len(tsts)} stdio tests = {cells} cells; "
          f"{args.slots} slots; launcher {iso['launcher']} ({', '.join(figures['layers_on'])})")
    print(f"executor : {ex_rate:8.1f} cells/s  (median of {args.repeats}: "
          f"{', '.join(f'{t:.2f}' for t in times)} s; start-up {startup:.2f} s, not counted)")
    print(f"baseline : {base_rate:8.1f} cells/s  (fresh python -I per cell, same limits)")
    print(f"ratio    : {ex_rate / base_rate:8.2f} x")
    print(f"verdicts : {n - same_pass} pass/fail disagreements, {n - same_outcome} outcome "
          f"disagreements of {n} cells; {figures['ok_cells']} cells pass")
    print(f"memory   : executor peak RSS {peak:.0f} MiB (host process + slot servers)")
    if loop_s is not None:
        print(f"loop part: 1 infinite loop x {len(tsts)} tests: executor {loop_s:.1f} s, "
              f"baseline {loop_base_s:.1f} s; outcomes {figures['loop_outcomes']}")
    if n - same_outcome:
        for i, (ra, rb) in enumerate(zip(result["outcomes"], base)):
            diffs = [(j, x, y) for j, (x, y) in enumerate(zip(ra, rb)) if x != y]
            if diffs:
                print(f"  program {i}: {diffs[:3]} (executor, baseline)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
