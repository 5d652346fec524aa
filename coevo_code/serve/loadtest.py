"""A load test of a running ``coevo serve`` (loopback only, bounded in count and time).

``run_load(url, requests, concurrency, ...)`` sends a mix of requests from ``concurrency``
concurrent clients and checks every answer:

- ``valid``: ``/execute`` with stdio and functional jobs whose matrices are known from their
  construction (program ``k`` doubles its input only when ``k == 2``), several jobs a request;
- ``hostile``: ``/execute`` jobs whose programs loop, flood stdout, fork, allocate, read the
  host's files, or exit early: every cell must fail, nothing may pass;
- ``run_code``: SandboxFusion's ``/run_code``, stdout and return code checked;
- ``malformed``: bodies that are not JSON, not jobs, or jobs with wrong fields: a 400 with a
  one-line reason (or, for a bad job among good ones, that job's ``error`` and the others' right
  matrices).

It returns the counts: sent, answered, lost (no answer: connection error or timeout), wrong
(an answer that is not the expected one), and the answers by kind and status.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import time
from urllib.parse import urlparse

from .server import is_loopback

HOSTILE = [
    "while True: pass",
    "import sys\nsys.stdout.write('x' * (64 << 20))",
    "import os\nwhile True:\n    os.fork()",
    "x = bytearray(8 << 30)",
    "print(open('/etc/shadow').read())",
    "import os; os._exit(0)",
    "import socket; socket.create_connection(('127.0.0.1', 22)); print(2)",
]


def _valid(rng: random.Random, rid: str):
    jobs, expect = [], []
    for j in range(rng.randint(1, 3)):
        ks = [rng.randint(1, 3) for _ in range(rng.randint(1, 4))]
        xs = [rng.randint(-50, 50) for _ in range(rng.randint(1, 6))]
        if rng.random() < 0.5:
            jobs.append({"id": f"{rid}-{j}", "kind": "stdio",
                         "programs": [f"print(int(input()) * {k})" for k in ks],
                         "tests": [{"input": f"{x}\n", "output": f"{2 * x}\n"} for x in xs]})
        else:
            jobs.append({"id": f"{rid}-{j}", "kind": "functional", "entry_point": "f",
                         "programs": [f"def f(x):\n    return x * {k}" for k in ks],
                         "tests": [{"code": f"assert f({x}) == {2 * x}"} for x in xs]})
        expect.append([[k == 2 or x == 0 for x in xs] for k in ks])
    return {"jobs": jobs}, expect


def _hostile(rng: random.Random, rid: str):
    progs = rng.sample(HOSTILE, rng.randint(1, 3))
    job = {"id": f"{rid}-h", "programs": progs, "tests": [{"input": "", "output": "2\n"}],
           "time_limit_s": 0.3, "wall_limit_s": 1.0, "memory_limit_mb": 256}
    return {"jobs": [job]}, [[[False] for _ in progs]]


MALFORMED = [
    b"{not json",
    b'{"jobs": 3}',
    b'"a string"',
    b'{"jobs": [{"programs": "print(1)", "tests": []}]}',
    b'{"jobs": [{"programs": ["print(1)"], "tests": [{"input": 1}]}]}',
    b'{"jobs": [{"kind": "cobol", "programs": []}]}',
    b'{"jobs": [{"programs": ["print(1)"], "time_limit_s": "NaN"}]}',
    b"\xff\xfe\x00garbage",
]


async def _one(client, url: str, kind: str, rng: random.Random, rid: str, tally, wrong_log):
    t0 = time.perf_counter()
    try:
        if kind == "valid" or kind == "hostile":
            body, expect = (_valid if kind == "valid" else _hostile)(rng, rid)
            if kind == "valid" and rng.random() < 0.2:  # one bad job among good ones
                body["jobs"].append({"id": f"{rid}-bad", "programs": [1, 2]})
                expect.append("error")
            r = await client.post(url + "/execute", json=body)
            ok = r.status_code == 200
            if ok:
                res = r.json()["results"]
                ok = len(res) == len(expect)
                for got, want, job in zip(res, expect, body["jobs"]):
                    if want == "error":
                        ok = ok and "error" in got and got["id"] == job["id"]
                    else:
                        ok = ok and got.get("id") == job["id"] and got.get("passed") == want
        elif kind == "run_code":
            x = rng.randint(0, 10 ** 6)
            r = await client.post(url + "/run_code", json={
                "code": "import sys\nv = int(input())\nprint(v + 1)\nsys.exit(v % 3)",
                "stdin": f"{x}\n", "language": "python", "run_timeout": 5})
            ok = r.status_code == 200
            if ok:
                d = r.json()
                rr = d.get("run_result") or {}
                ok = (rr.get("stdout") == f"{x + 1}\n" and rr.get("return_code") == x % 3
                      and d.get("status") == ("Success" if x % 3 == 0 else "Failed"))
        else:
            body = rng.choice(MALFORMED)
            r = await client.post(url + "/execute", content=body,
                                  headers={"content-type": "application/json"})
            if r.status_code == 200:  # a bad job in a well-formed body: its own error
                res = r.json()["results"]
                ok = len(res) == 1 and "error" in res[0]
            else:
                err = r.json().get("error", "")
                ok = r.status_code == 400 and err and "\n" not in err
        status = r.status_code
    except Exception as e:  # noqa: BLE001 - counted as lost
        tally["lost"] += 1
        tally[f"lost:{type(e).__name__}"] += 1
        return None
    tally["answered"] += 1
    tally[f"{kind}:{status}"] += 1
    if not ok:
        tally["wrong"] += 1
        if len(wrong_log) < 5:
            wrong_log.append(f"{kind} {rid}: {status} {r.text[:300]}")
    return time.perf_counter() - t0


async def _run(url, n, concurrency, mix, seed, deadline_s, headers, timeout_s):
    import httpx

    rng = random.Random(seed)
    kinds = [k for k, w in mix.items() for _ in range(w)]
    plan = [rng.choice(kinds) for _ in range(n)]
    tally: collections.Counter = collections.Counter()
    wrong_log: list[str] = []
    latencies: list[float] = []
    next_i = iter(range(n))
    stop_at = time.monotonic() + deadline_s
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=timeout_s, limits=limits, headers=headers) as client:
        async def worker(w):
            r = random.Random(seed * 1000 + w)
            for i in next_i:
                if time.monotonic() > stop_at:
                    tally["not_sent_deadline"] += 1
                    continue
                tally["sent"] += 1
                lat = await _one(client, url, plan[i], r, f"r{i}", tally, wrong_log)
                if lat is not None:
                    latencies.append(lat)
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return tally, wrong_log, latencies


def run_load(url: str, requests: int = 300, concurrency: int = 32, seed: int = 0,
             deadline_s: float = 600.0, mix: dict | None = None, headers: dict | None = None,
             timeout_s: float = 120.0) -> dict:
    """Send ``requests`` requests from ``concurrency`` clients (stops at ``deadline_s``);
    the figures as a dict."""
    host = urlparse(url).hostname or ""
    if not is_loopback(host):
        raise ValueError(f"the load test runs against loopback only, not {host!r}")
    mix = mix or {"valid": 6, "hostile": 1, "run_code": 2, "malformed": 1}
    t0 = time.monotonic()
    tally, wrong_log, lat = asyncio.run(_run(url.rstrip("/"), requests, concurrency, mix, seed,
                                             deadline_s, headers or {}, timeout_s))
    lat.sort()
    pick = (lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))], 4)) if lat else (
        lambda q: None)
    return {"requests": requests, "concurrency": concurrency, "sent": tally["sent"],
            "answered": tally["answered"], "lost": tally["lost"], "wrong": tally["wrong"],
            "by_kind": {k: v for k, v in sorted(tally.items()) if ":" in k},
            "not_sent_deadline": tally["not_sent_deadline"],
            "seconds": round(time.monotonic() - t0, 2), "p50_s": pick(0.5), "p99_s": pick(0.99),
            "wrong_examples": wrong_log}


if __name__ == "__main__":  # pragma: no cover - python -m coevo_code.serve.loadtest URL N C
    import sys
    print(json.dumps(run_load(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])), indent=1))
