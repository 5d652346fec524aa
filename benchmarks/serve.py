"""``coevo serve`` against the in-process executor, measured in the same run, and its load test.

    python benchmarks/serve.py bench [--slots 2] [--repeats 3]
    python benchmarks/serve.py load [--requests 10000] [--concurrency 64] [--slots 2]
                                    [--kill-every S]
    python benchmarks/serve.py clients [--concurrency 64] [--server-src DIR]
    python benchmarks/serve.py flood [--copies 1 4] [--server-src DIR]
    python benchmarks/serve.py slowbody [--every 5] [--wait 60] [--server-src DIR]
    python benchmarks/serve.py waiting [--requests 2000]

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

``clients``: veRL 0.9.1's SandboxFusion reward helper (32 completions x 4 tests: 128 ``/run_code``
requests, 64 in flight) and OpenRLHF 0.11.2's ``SingleTurnAgentExecutor`` (128 samples, 64 at
once, one ``/reward`` request each), their own code (``coevo_code.serve.trainer_clients``;
``pip install --no-deps verl==0.9.1 openrlhf==0.11.2``), against a server with small limits
(``--max_pending_rewards 4 --queue_requests 8 --exec_slots 1``, or ``--serve-args``): wrong
rewards, errors (veRL's ``api_error`` tests, OpenRLHF's ``None``), and the server's answers by
status.

``flood``: bodies of 32.7 MB of ``[{},{},...]`` (under the 32 MiB body limit), one and then four
at once: the server's RSS before and at its peak, the slowest ``/v1/ping`` meanwhile (one every
50 ms), and how each body was answered.

``slowbody``: a client that sends an ``/execute`` body one byte every ``--every`` seconds: when
and how the server answered it, if at all within ``--wait`` seconds (the server at its defaults).

``waiting``: ``--requests`` OpenRLHF-shaped reward requests (1.7 KB each) sent at once while a
slow one holds the only reward slot (``--max_pending_rewards 1``): the server's RSS before and
with them all waiting (what a waiting request costs), then each one's answer.

``--server-src DIR`` runs the server from another checkout's source (``git archive COMMIT | tar
-x -C DIR``), for the figures before a change; the clients are this checkout's.

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


def _server(args, extra: list[str]):
    if not args.server_src:
        return ServeProcess(extra)
    src = str(Path(args.server_src).resolve())
    return ServeProcess(extra, env={"PYTHONPATH": src}, cwd=src)


def _answers(url: str) -> dict:
    import httpx
    out: dict = {}
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith("coevo_serve_requests_total{"):
            labels = dict(kv.split("=") for kv in line.split("{")[1].split("}")[0].split(","))
            key = f"{labels['endpoint'].strip(chr(34))} {labels['code'].strip(chr(34))}"
            out[key] = out.get(key, 0) + int(float(line.split()[-1]))
    return out


def clients(args) -> dict:
    from coevo_code.serve import trainer_clients
    serve_args = args.serve_args.split() if args.serve_args else [
        "--max_pending_rewards", "4", "--queue_requests", "8", "--exec_slots", "1"]
    figs = {"serve_args": serve_args, "server_src": args.server_src}
    with _server(args, serve_args) as srv:
        figs["verl"] = trainer_clients.drive_verl(srv.url + "/run_code", completions=32, tests=4,
                                                  concurrency=args.concurrency)
        figs["verl"]["answers"] = _answers(srv.url)
        figs["openrlhf"] = trainer_clients.drive_openrlhf(srv.url + "/reward", samples=128,
                                                          concurrency=args.concurrency)
        answers = _answers(srv.url)
        figs["openrlhf"]["answers"] = {k: v - figs["verl"]["answers"].get(k, 0)
                                       for k, v in answers.items()
                                       if v - figs["verl"]["answers"].get(k, 0)}
    print(f"\nserver: coevo serve {' '.join(serve_args)}"
          f"{' (from ' + args.server_src + ')' if args.server_src else ''}")
    print("| client | requests | at once | rewards wrong | errors | server answers | time |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    v, o = figs["verl"], figs["openrlhf"]
    print(f"| veRL 0.9.1 compute_score (32 completions x 4 tests) | {v['requests']} | "
          f"{v['concurrency']} | {v['wrong']} of 32 scores | {v['errors']} tests api_error | "
          f"{_fmt(v['answers'])} | {v['seconds']} s |")
    print(f"| OpenRLHF 0.11.2 SingleTurnAgentExecutor | {o['requests']} | {o['concurrency']} | "
          f"{o['wrong']} of 128 | {o['errors']} rewards None | {_fmt(o['answers'])} | "
          f"{o['seconds']} s |")
    for k in ("verl", "openrlhf"):
        figs[k].pop("right", None)
    return figs


def _fmt(answers: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(answers.items())
                     if not k.startswith(("health", "metrics")))


def flood(args) -> dict:
    import socket
    import threading

    import httpx
    import psutil
    body = b"[" + b"{}," * 10_900_000 + b"{}]"
    parts = [body[i:i + (1 << 20)] for i in range(0, len(body), 1 << 20)]

    def post(url):
        host, port = url.rsplit("/", 1)[-1].split(":")
        s = socket.create_connection((host, int(port)), timeout=300)
        s.sendall(f"POST /execute HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json"
                  f"\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        try:
            for p in parts:
                s.sendall(p)
            answer = s.recv(200)
        except OSError as e:   # refused while it streamed in: the server closed the connection
            answer = f"connection closed while sending ({type(e).__name__})".encode()
        s.close()
        return answer.split(b"\r\n")[0].decode("latin-1")

    figs = {"body_bytes": len(body), "server_src": args.server_src, "runs": []}
    with _server(args, ["--exec_slots", "1"]) as srv:
        proc = psutil.Process(srv.pid)
        for copies in args.copies:
            rss0 = proc.memory_info().rss
            peak, pings, stop = [rss0], [], threading.Event()

            def watch(stop=stop, pings=pings, peak=peak):
                with httpx.Client(timeout=600) as client:
                    while not stop.is_set():
                        t0 = time.monotonic()
                        client.get(srv.url + "/v1/ping")
                        pings.append(time.monotonic() - t0)
                        peak.append(proc.memory_info().rss)
                        time.sleep(0.05)
            w = threading.Thread(target=watch)
            w.start()
            time.sleep(0.3)
            t0 = time.monotonic()
            out: list = [None] * copies
            ts = [threading.Thread(target=lambda k=k, out=out: out.__setitem__(k, post(srv.url)))
                  for k in range(copies)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            seconds = time.monotonic() - t0
            time.sleep(0.3)
            stop.set()
            w.join()
            run = {"copies": copies, "rss_before_mib": rss0 / 2**20,
                   "rss_peak_mib": max(peak) / 2**20, "pings": len(pings),
                   "ping_slowest_s": max(pings), "ping_median_s": statistics.median(pings),
                   "answers": out, "seconds": seconds,
                   "server_answers": _answers(srv.url)}
            figs["runs"].append(run)
    print("\n| bodies at once | server RSS before / peak | /v1/ping meanwhile: slowest, median "
          "(n) | answers | time |")
    print("| --- | --- | --- | --- | --- |")
    for r in figs["runs"]:
        print(f"| {r['copies']} | {r['rss_before_mib']:.1f} / {r['rss_peak_mib']:.1f} MiB | "
              f"{r['ping_slowest_s'] * 1000:.0f} ms, {r['ping_median_s'] * 1000:.0f} ms "
              f"({r['pings']}) | {'; '.join(sorted(set(r['answers'])))} | {r['seconds']:.1f} s |")
    return figs


def slowbody(args) -> dict:
    import socket
    body = json.dumps([{"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}])
    with _server(args, ["--exec_slots", "1"]) as srv:
        host, port = srv.url.rsplit("/", 1)[-1].split(":")
        s = socket.create_connection((host, int(port)))
        s.sendall(f"POST /execute HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json"
                  f"\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        t0 = time.monotonic()
        answer, sent = b"", 0
        while time.monotonic() - t0 < args.wait and sent < len(body):
            try:
                s.sendall(body[sent:sent + 1].encode())
            except OSError:
                break
            sent += 1
            s.settimeout(args.every)
            try:
                got = s.recv(65536)
                answer += got
                if not got or b"\r\n\r\n" in answer:
                    break
            except socket.timeout:
                pass
        seconds = time.monotonic() - t0
        s.close()
    first = answer.split(b"\r\n")[0].decode("latin-1") or "no answer"
    print(f"\nbyte every {args.every:g} s: {first} after {seconds:.1f} s ({sent} bytes sent)")
    return {"every_s": args.every, "answer": first, "seconds": seconds, "bytes_sent": sent,
            "server_src": args.server_src}


def waiting(args) -> dict:
    import socket
    import threading

    import httpx
    import psutil
    label = {"kind": "stdio", "tests": [{"input": "", "output": "1\n"}]}
    slow = {"completions": ["```python\nimport time\ntime.sleep(8)\nprint(1)\n```"],
            "labels": [label]}
    prompt = "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
    body = json.dumps({"query": [prompt + "```python\nprint(1)\n```" + " " * 1500],
                       "prompts": [prompt], "labels": [json.dumps(label)]}).encode()
    with ServeProcess(["--exec_slots", "1", "--max_pending_rewards", "1",
                       "--max_wall_limit", "20"]) as srv:
        host, port = srv.url.rsplit("/", 1)[-1].split(":")
        proc = psutil.Process(srv.pid)
        t = threading.Thread(target=lambda: httpx.post(srv.url + "/reward", json=slow,
                                                       timeout=120))
        t.start()
        time.sleep(1)
        rss0 = proc.memory_info().rss
        socks = []
        for _ in range(args.requests):
            c = socket.create_connection((host, int(port)))
            c.sendall(f"POST /reward HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/"
                      f"json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            socks.append(c)
        time.sleep(2)
        counted = httpx.get(srv.url + "/health").json()["waiting_requests"]
        rss1 = proc.memory_info().rss
        t0 = time.monotonic()
        right = 0
        for c in socks:
            c.settimeout(300)
            data = b""
            while b"rewards" not in data:
                got = c.recv(4096)
                if not got:
                    break
                data += got
            right += b'"rewards":[1.0]' in data
            c.close()
        seconds = time.monotonic() - t0
        t.join()
    figs = {"requests": args.requests, "body_bytes": len(body), "waiting_counted": counted,
            "rss_before_mib": rss0 / 2**20, "rss_waiting_mib": rss1 / 2**20,
            "kib_each": (rss1 - rss0) / args.requests / 1024, "answered_right": right,
            "seconds": seconds}
    print(f"\n{args.requests} waiting ({counted} counted by /health): RSS {rss0 / 2**20:.1f} -> "
          f"{rss1 / 2**20:.1f} MiB, {figs['kib_each']:.1f} KiB each; then {right} answered "
          f"with the right reward in {seconds:.1f} s")
    return figs


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
    c = sub.add_parser("clients")
    c.add_argument("--concurrency", type=int, default=64)
    c.add_argument("--serve-args", default="", help="the server's flags (default: the small "
                   "limits of issue 51)")
    c.add_argument("--server-src", default=None, help="run the server from this source tree")
    f = sub.add_parser("flood")
    f.add_argument("--copies", type=int, nargs="+", default=[1, 4])
    f.add_argument("--server-src", default=None, help="run the server from this source tree")
    sb = sub.add_parser("slowbody")
    sb.add_argument("--every", type=float, default=5.0)
    sb.add_argument("--wait", type=float, default=90.0)
    sb.add_argument("--server-src", default=None, help="run the server from this source tree")
    wa = sub.add_parser("waiting")
    wa.add_argument("--requests", type=int, default=2000)
    args = p.parse_args()
    figs = {"bench": bench, "load": load, "clients": clients, "flood": flood,
            "slowbody": slowbody, "waiting": waiting}[args.cmd](args)
    print(json.dumps(figs, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
