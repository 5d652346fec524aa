"""``coevo serve`` against the in-process executor, measured in the same run, and its load test.

    python benchmarks/serve.py bench [--slots 2] [--repeats 3]
    python benchmarks/serve.py load [--requests 10000] [--concurrency 64] [--slots 2]
                                    [--kill-every S]

``bench``: a server (``coevo serve --exec_slots N``, a child process on 127.0.0.1) and an in-process
``Executor(slots=N)`` (the baseline) run the same cells, one after the other, repeat after repeat:

- throughput: 2,048 quick stdio cells (program ``k`` doubles its input, 64 jobs of 4 programs x
  8 tests, every program text distinct), in-process as one ``run`` and over HTTP from 8
  clients, one job a request; cells/s each (median over repeats) and their ratio;
- latency at 1, 8 and 64 concurrent clients, small requests (one job, 2 programs x 3 tests = 6
  cells) and large ones (one job, 16 programs x 16 tests = 256 cells): p50 and p99 of the time
  from sending a request to its answer, and the cells/s the server kept up; the in-process
  baseline is the time of one ``run`` of the same request with nothing else running, measured
  interleaved (one in-process run, one HTTP request from one client, 12 times), with the ratio.

``load``: the load test of ``coevo_code.serve.loadtest`` (valid, hostile, SandboxFusion and
malformed requests; every answer checked) against a fresh server, with the server's RSS after a
warm-up of 500 requests and at the end; ``--kill-every S`` kills a judge every S seconds.

Prints a Markdown table and the figures as JSON. The machine is shared: read ratios and medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coevo_code.execution import Executor
from coevo_code.serve.loadtest import run_load
from coevo_code.serve.process import ServeProcess


def job(i: int, programs: int, tests: int, rng: random.Random) -> dict:
    ks = [rng.randint(1, 3) for _ in range(programs)]
    xs = [rng.randint(-99, 99) for _ in range(tests)]
    # every program text distinct (a comment): the executor runs copies of a text only once
    return {"id": f"j{i}", "programs": [f"print(int(input()) * {k})  # {i}.{p}"
                                        for p, k in enumerate(ks)],
            "tests": [{"input": f"{x}\n", "output": f"{2 * x}\n"} for x in xs]}


async def _http(url: str, requests: list[list[dict]], clients: int) -> tuple[float, list[float],
                                                                              list]:
    import httpx
    lat: list[float] = [0.0] * len(requests)
    out: list = [None] * len(requests)
    todo = iter(range(len(requests)))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        async def worker():
            for i in todo:
                t0 = time.perf_counter()
                r = await client.post(url + "/execute", json={"jobs": requests[i]})
                r.raise_for_status()
                out[i] = r.json()["results"]
                lat[i] = time.perf_counter() - t0
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - t0
    return wall, lat, out


def _strip(results):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in results]


def _q(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def bench(args) -> dict:
    rng = random.Random(0)
    tp_jobs = [job(i, 4, 8, rng) for i in range(64)]
    cells_tp = sum(len(j["programs"]) * len(j["tests"]) for j in tp_jobs)
    shapes = {"small": (2, 3), "large": (16, 16)}
    figs: dict = {"slots": args.slots, "throughput": {"in_process": [], "http": []},
                  "latency": {}}
    with Executor(slots=args.slots) as ex, ServeProcess(["--exec_slots", str(args.slots)]) as srv:
        ex.run(tp_jobs[:4])
        asyncio.run(_http(srv.url, [[j] for j in tp_jobs[:8]], 4))
        for rep in range(args.repeats):
            t0 = time.perf_counter()
            local = ex.run(tp_jobs)
            figs["throughput"]["in_process"].append(cells_tp / (time.perf_counter() - t0))
            wall, _, out = asyncio.run(_http(srv.url, [[j] for j in tp_jobs], 8))
            figs["throughput"]["http"].append(cells_tp / wall)
            assert _strip([r[0] for r in out]) == _strip(local), "HTTP and in-process differ"
            print(f"repeat {rep}: in-process {figs['throughput']['in_process'][-1]:.0f} cells/s,"
                  f" HTTP {figs['throughput']['http'][-1]:.0f} cells/s", file=sys.stderr)
        for size, (n, t) in shapes.items():
            # the baseline, interleaved with the same requests over HTTP from one client: one
            # in-process run, one HTTP request, and so on (the machine's load drifts)
            base, one_http = [], []
            for i in range(12):
                one = [job(i, n, t, rng)]
                t0 = time.perf_counter()
                ex.run(one)
                base.append(time.perf_counter() - t0)
                _, lat, _ = asyncio.run(_http(srv.url, [one], 1))
                one_http.append(lat[0])
            figs["latency"][f"{size}/paired"] = {
                "in_process_p50_s": statistics.median(base),
                "http_p50_s": statistics.median(one_http),
                "ratio": statistics.median(one_http) / statistics.median(base)}
            print(f"{size}, paired with in-process: HTTP {statistics.median(one_http) * 1000:.0f}"
                  f" ms, in-process {statistics.median(base) * 1000:.0f} ms", file=sys.stderr)
            for clients in (1, 8, 64):
                count = max(2 * clients, 40 if size == "small" else 16)
                reqs = [[job(i, n, t, rng)] for i in range(count)]
                wall, lat, _ = asyncio.run(_http(srv.url, reqs, clients))
                figs["latency"][f"{size}/{clients}"] = {
                    "cells": n * t, "requests": count, "p50_s": _q(lat, 0.5),
                    "p99_s": _q(lat, 0.99), "cells_per_s": count * n * t / wall,
                    "in_process_one_s": statistics.median(base)}
                print(f"{size} x {clients} clients: p50 {_q(lat, .5) * 1000:.0f} ms, p99 "
                      f"{_q(lat, .99) * 1000:.0f} ms", file=sys.stderr)
    tp = figs["throughput"]
    tp["in_process_median"] = statistics.median(tp["in_process"])
    tp["http_median"] = statistics.median(tp["http"])
    tp["ratio"] = tp["http_median"] / tp["in_process_median"]
    print(f"\nthroughput ({cells_tp} quick cells, {args.slots} slots, median of {args.repeats}): "
          f"in-process {tp['in_process_median']:.0f} cells/s, over HTTP (8 clients, a job a "
          f"request) {tp['http_median']:.0f} cells/s, ratio {tp['ratio']:.2f}\n")
    print("| request | clients | requests | p50 | p99 | cells/s | in-process, one request alone |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for key, f in figs["latency"].items():
        size, clients = key.split("/")
        if clients == "paired":
            continue
        print(f"| {size} ({f['cells']} cells) | {clients} | {f['requests']} | "
              f"{f['p50_s'] * 1000:.0f} ms | {f['p99_s'] * 1000:.0f} ms | "
              f"{f['cells_per_s']:.0f} | {f['in_process_one_s'] * 1000:.0f} ms |")
    print("\n| request | one client, interleaved with the in-process run: HTTP p50 | in-process "
          "p50 | ratio |")
    print("| --- | --- | --- | --- |")
    for size in shapes:
        f = figs["latency"][f"{size}/paired"]
        print(f"| {size} | {f['http_p50_s'] * 1000:.0f} ms | {f['in_process_p50_s'] * 1000:.0f} ms"
              f" | {f['ratio']:.2f} |")
    return figs


def load(args) -> dict:
    import psutil
    with ServeProcess(["--exec_slots", str(args.slots)]) as srv:
        proc = psutil.Process(srv.pid)
        rss_start = proc.memory_info().rss
        warm = run_load(srv.url, requests=args.warmup, concurrency=args.concurrency, seed=1,
                        deadline_s=args.deadline)
        rss_before = proc.memory_info().rss
        samples = []
        stop = {"flag": False}

        def sample():
            while not stop["flag"]:
                samples.append(proc.memory_info().rss)
                time.sleep(2)
        kills = []

        def killer():  # a judge killed every --kill-every seconds, mid-run
            import os
            import signal
            while not stop["flag"]:
                time.sleep(args.kill_every)
                pids = srv.judges()
                if pids and not stop["flag"]:
                    os.kill(pids[len(kills) % len(pids)], signal.SIGKILL)
                    kills.append(pids[len(kills) % len(pids)])
        import threading
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        if args.kill_every:
            threading.Thread(target=killer, daemon=True).start()
        fig = run_load(srv.url, requests=args.requests, concurrency=args.concurrency, seed=2,
                       deadline_s=args.deadline)
        stop["flag"] = True
        th.join()
        rss_after = proc.memory_info().rss
        import httpx
        metrics = httpx.get(srv.url + "/metrics").text
    fig.update(judges_killed=len(kills), warmup=warm["answered"], warmup_lost=warm["lost"],
               rss_start_mib=rss_start / 2**20,
               rss_before_mib=rss_before / 2**20, rss_after_mib=rss_after / 2**20,
               rss_max_mib=max(samples or [rss_after]) / 2**20)
    errors = {line.split("{")[1].split("}")[0]: float(line.split()[-1])
              for line in metrics.splitlines() if line.startswith("coevo_serve_errors_total{")}
    fig["server_errors"] = errors
    print(f"\n| requests | concurrency | answered | lost | wrong | by kind | RSS after warm-up | "  # noqa: F541 - the table's header, one f-string with the line below
          f"RSS after | RSS max | time |")  # noqa: F541 - likewise
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    kinds = ", ".join(f"{k} {v}" for k, v in fig["by_kind"].items())
    print(f"| {fig['sent']} | {fig['concurrency']} | {fig['answered']} | {fig['lost']} | "
          f"{fig['wrong']} | {kinds} | {fig['rss_before_mib']:.1f} MiB | "
          f"{fig['rss_after_mib']:.1f} MiB | {fig['rss_max_mib']:.1f} MiB | {fig['seconds']} s |")
    print(f"server-side errors by kind: {errors}; judges killed mid-run: {len(kills)}")
    return fig


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--slots", type=int, default=2)
    b.add_argument("--repeats", type=int, default=3)
    lo = sub.add_parser("load")
    lo.add_argument("--requests", type=int, default=10_000)
    lo.add_argument("--concurrency", type=int, default=64)
    lo.add_argument("--warmup", type=int, default=500)
    lo.add_argument("--slots", type=int, default=2)
    lo.add_argument("--deadline", type=float, default=3600.0)
    lo.add_argument("--kill-every", type=float, default=0.0,
                    help="kill one judge (slot server) every S seconds during the run")
    args = p.parse_args()
    figs = bench(args) if args.cmd == "bench" else load(args)
    print(json.dumps(figs, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
