"""C++ in the sandbox against a bare compile-once-then-fork-exec baseline, measured in the same run.

Workload: 40 C++ programs x 40 stdio tests (the sum-and-max problem of ``benchmarks/executor.py``:
17 correct programs in every input style, ``<bits/stdc++.h>`` in a quarter of them, 12 wrong answers,
an ``int`` overflow among them, 10 crashes, a compile error; each program's text its own). The baseline compiles each program once with the
sandbox's own flags (``g++ -std=c++17 -O2 -DONLINE_JUDGE -pipe -static``) and runs each cell as a
plain ``fork``/``exec`` of the binary with the same CPU and address-space rlimits and wall cap,
``slots`` at a time, with no isolation at all. Each round gives every program a fresh source (a
comment naming the round), so both sides compile all 40 each round; the executor is started once.

Prints, per side, the median seconds and cells/s over the rounds, their ratio (executor /
baseline; the target is at least 0.8), the verdict agreement, and the compiles the executor
counted (``Executor.stats()["compiles"]``) for a cold round (n, not n x t) and for the same job
run again (0: every program comes from the judges' cache).

    python benchmarks/native.py [--slots 2] [--repeats 3] [--launcher auto] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from coevo_code.execution import Executor
from coevo_code.sandbox.native import RUNNERS

TIME_LIMIT = 1.0
WALL = 2 * TIME_LIMIT + 1
MEM_MB = 256
N_CELLS = 40

READ = {
    "scanf": ("#include <cstdio>\n", "int n; scanf(\"%d\", &n); std::vector<long long> xs(n); "
              "for (auto& x : xs) scanf(\"%lld\", &x);"),
    "cin": ("#include <iostream>\n", "std::ios::sync_with_stdio(false); std::cin.tie(nullptr); "
            "int n; std::cin >> n; std::vector<long long> xs(n); for (auto& x : xs) std::cin >> x;"),
    "bits": ("#include <bits/stdc++.h>\n", "int n; std::cin >> n; std::vector<long long> xs(n); "
             "for (auto& x : xs) std::cin >> x;"),
    "getchar": ("#include <cstdio>\n", "auto rd = []() { long long v = 0; int c = getchar(), s = 1; "
                "while (c != '-' && (c < '0' || c > '9')) c = getchar(); if (c == '-') { s = -1; "
                "c = getchar(); } while (c >= '0' && c <= '9') { v = v * 10 + c - '0'; "
                "c = getchar(); } return v * s; }; int n = rd(); std::vector<long long> xs(n); "
                "for (auto& x : xs) x = rd();"),
}
SUM = "long long s = 0, m = xs[0]; for (long long x : xs) { s += x; if (x > m) m = x; }"
CORRECT = ['printf("%lld %lld\\n", s, m);', 'std::printf("%lld %lld\\n", s, m);',
           'printf("%lld ", s); printf("%lld  \\n\\n", m);', 'fprintf(stdout, "%lld %lld\\n", s, m);']
WRONG = ['printf("%lld %lld\\n", s + 1, m);', 'printf("%lld\\n", s);', 'printf("%lld %lld\\n", m, s);',
         'printf("Answer: %lld %lld\\n", s, m);', 'int t = 0; for (long long x : xs) t += (int)x; '
         'printf("%d %lld\\n", t, m);', "/* no output */"]
CRASH = ['volatile int z = 0; printf("%d\\n", 1 / z);', "return 3;", "volatile int* p = nullptr; *p = 1;",
         '__builtin_trap();', "std::vector<int> v; printf(\"%d\\n\", v.at(5));"]


def programs(tag: str = "") -> list[str]:
    styles = list(READ)
    out = []

    def make(style, body):
        head, read = READ[style]
        return (f"// {tag}, program {len(out)}\n{head}#include <vector>\n#include <cstdio>\n"
                f"#include <stdexcept>\nint main() {{ {read} {SUM} {body} }}\n")
    for i, body in enumerate(CORRECT * 4 + CORRECT[:1]):  # 17 correct, every style
        out.append(make(styles[i % 4], body))
    for i, body in enumerate(WRONG * 2):  # 12 wrong
        out.append(make(styles[(i + 1) % 4], body))
    for i, body in enumerate(CRASH * 2):  # 10 crashing
        out.append(make(styles[(i + 2) % 4], body))
    out.append(f"// {tag}\nint main() {{ return undefined; }}\n")  # a compile error
    assert len(out) == N_CELLS
    return out


def tests(seed: int = 0, count: int = N_CELLS, max_n: int = 2000) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(1, max_n)
        xs = [rng.randint(-10**9, 10**9) for _ in range(n)]
        out.append({"input": f"{n}\n{' '.join(map(str, xs))}\n",
                    "output": f"{sum(xs)} {max(xs)}\n"})
    return out


# ---- the baseline: compile each program once, then fork/exec the binary per cell -------------
def _limits():
    cpu = int(TIME_LIMIT) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, ((MEM_MB + 64) << 20, (MEM_MB + 64) << 20))


def compile_bare(src: str, d: str, i: int) -> str | None:
    path = os.path.join(d, f"p{i}.cpp")
    Path(path).write_text(src)
    argv = [a.replace("{src}", path) for a in RUNNERS["cpp"].compile
            if a != "coevo_runtime.cpp"]
    argv[argv.index("main")] = os.path.join(d, f"p{i}")
    r = subprocess.run(argv, capture_output=True, cwd=d)
    return os.path.join(d, f"p{i}") if r.returncode == 0 else None


def baseline_cell(binary: str | None, test: dict) -> str:
    if binary is None:
        return "compile_error"
    try:
        r = subprocess.run([binary], input=test["input"].encode(), capture_output=True,
                           timeout=WALL, preexec_fn=_limits, env={})
    except subprocess.TimeoutExpired:
        return "timeout"
    if r.returncode in (-24, -9):
        return "timeout"
    if r.returncode != 0:
        return "runtime_error"
    same = r.stdout.decode(errors="replace").split() == test["output"].split()
    return "ok" if same else "wrong_answer"


def baseline(progs: list[str], tsts: list[dict], slots: int) -> tuple[list[list[str]], float]:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(slots) as pool:
            bins = list(pool.map(lambda a: compile_bare(a[1], d, a[0]), enumerate(progs)))
            cells = [(i, j) for i in range(len(progs)) for j in range(len(tsts))]
            flat = list(pool.map(lambda c: baseline_cell(bins[c[0]], tsts[c[1]]), cells))
        dt = time.perf_counter() - t0
    it = iter(flat)
    return [[next(it) for _ in tsts] for _ in progs], dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--launcher", default="auto")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if shutil.which("g++") is None:
        print("g++ is not installed: nothing to measure")
        return 1
    tsts = tests()
    cells = N_CELLS * len(tsts)
    ours, bare, compiles, agree = [], [], [], []
    with Executor(slots=a.slots, launcher=a.launcher) as ex:
        launcher = ex.launcher.name
        for r in range(a.repeats):
            progs = programs(f"round {r}")
            c0 = ex.stats()["compiles"]
            t0 = time.perf_counter()
            [res] = ex.run([{"id": f"native{r}", "language": "cpp", "programs": progs,
                             "tests": tsts, "time_limit_s": TIME_LIMIT,
                             "memory_limit_mb": MEM_MB}])
            ours.append(time.perf_counter() - t0)
            compiles.append(ex.stats()["compiles"] - c0)
            got, dt = baseline(progs, tsts, a.slots)
            bare.append(dt)
            agree.append(sum(x == y for ra, rb in zip(res["outcomes"], got)
                             for x, y in zip(ra, rb)))
            for i, (ra, rb) in enumerate(zip(res["outcomes"], got)):
                if ra != rb and r == 0:
                    print(f"  program {i}: executor {sorted(set(ra))}, baseline {sorted(set(rb))}")
            print(f"round {r}: executor {ours[-1]:.2f} s ({compiles[-1]} compiles), "
                  f"baseline {dt:.2f} s, outcomes agree {agree[-1]}/{cells}", flush=True)
        c0 = ex.stats()["compiles"]
        t0 = time.perf_counter()
        ex.run([{"id": "again", "language": "cpp", "programs": progs, "tests": tsts,
                 "time_limit_s": TIME_LIMIT, "memory_limit_mb": MEM_MB}])
        warm = time.perf_counter() - t0
        warm_compiles = ex.stats()["compiles"] - c0
    m_ours, m_bare = statistics.median(ours), statistics.median(bare)
    out = {"launcher": launcher, "slots": a.slots, "cells": cells, "repeats": a.repeats,
           "executor_s": m_ours, "baseline_s": m_bare, "executor_cells_per_s": cells / m_ours,
           "baseline_cells_per_s": cells / m_bare, "ratio": m_bare / m_ours,
           "compiles_cold": compiles, "compiles_without_cache": N_CELLS * len(tsts),
           "warm_s": warm, "compiles_warm": warm_compiles, "agreement": agree}
    print(f"executor ({launcher}, {a.slots} slots): {m_ours:.2f} s, {cells / m_ours:.0f} cells/s "
          f"(median of {a.repeats})")
    print(f"baseline (compile once, fork/exec, no isolation): {m_bare:.2f} s, "
          f"{cells / m_bare:.0f} cells/s")
    print(f"ratio executor/baseline: {m_bare / m_ours:.2f} (target >= 0.8)")
    print(f"compiles per cold round: {compiles} for {N_CELLS} programs x {len(tsts)} tests "
          f"({N_CELLS * len(tsts)} cells: a compile per cell would be {N_CELLS * len(tsts)}); "
          f"the same job again: {warm_compiles} compiles, {warm:.2f} s")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
