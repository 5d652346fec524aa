"""``coevo serve`` under load and faults, over real HTTP on 127.0.0.1: many concurrent clients
with valid, malformed and hostile requests (every one answered once, with the right matrix), a
judge killed mid-run, a client that goes away, and a graceful shutdown. The 10,000-request run
with the memory figures is ``python benchmarks/serve.py load``."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time

import httpx
import psutil
import pytest

from coevo_code.serve.loadtest import run_load
from coevo_code.serve.process import ServeProcess


@pytest.fixture(scope="module")
def server():
    with ServeProcess(["--slots", "2"]) as s:
        yield s


def _metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.slow
def test_load_every_request_answered_once_and_right(server):
    rss = psutil.Process(server.pid).memory_info().rss
    warm = run_load(server.url, requests=60, concurrency=16, seed=1, deadline_s=120)
    assert warm["lost"] == 0 and warm["wrong"] == 0, warm
    rss_before = psutil.Process(server.pid).memory_info().rss
    fig = run_load(server.url, requests=240, concurrency=48, seed=2, deadline_s=240)
    rss_after = psutil.Process(server.pid).memory_info().rss
    print(f"load: {fig}; rss start {rss >> 20} MiB, before {rss_before >> 20} MiB, after "
          f"{rss_after >> 20} MiB")
    assert fig["sent"] == fig["answered"] == 240 and fig["lost"] == 0, fig
    assert fig["wrong"] == 0, fig["wrong_examples"]
    kinds = {k.split(":")[0] for k in fig["by_kind"]}
    assert kinds == {"valid", "hostile", "run_code", "malformed"}
    assert fig["by_kind"].get("malformed:400", 0) > 0
    assert rss_after - rss_before < 40 << 20  # the 10,000-request figures: benchmarks/serve.py
    assert httpx.get(server.url + "/health").json()["queue_requests"] == 0


def test_a_judge_killed_mid_run_and_the_request_still_answered(server):
    job = {"id": "k", "programs": [f"import time\ntime.sleep(0.05)\nprint(int(input()) * {k})"
                                   for k in (1, 2, 3, 2)],
           "tests": [{"input": f"{x}\n", "output": f"{2 * x}\n"} for x in range(1, 13)]}
    out = {}
    t = threading.Thread(target=lambda: out.update(
        r=httpx.post(server.url + "/execute", json=[job], timeout=120)))
    before = server.judges()
    assert len(before) == 2
    t.start()
    time.sleep(0.4)
    for pid in before[:1]:
        os.kill(pid, signal.SIGKILL)
    t.join()
    res = out["r"].json()["results"][0]
    assert res["passed"] == [[k == 2] * 12 for k in (1, 2, 3, 2)]
    assert "sandbox_error" not in {o for row in res["outcomes"] for o in row}
    after = server.judges()
    assert len(after) == 2 and before[0] not in after  # replaced


def test_cells_lost_twice_are_reported_apart_from_wrong_answers(server):
    """A cell whose judge is killed on every try (tests/lost_cells.py's killer, on the server's
    judges) is answered sandbox_error, never a wrong answer, and /metrics counts every such cell."""
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    from lost_cells import Killer
    before = _metric(server.url, "coevo_serve_sandbox_error_cells")
    job = {"id": "lost", "programs": ["print(int(input()) * 2)",
                                      "import time\ntime.sleep(0.3)\nprint(int(input()) * 2)"],
           "tests": [{"input": f"{x}\n", "output": f"{2 * x}\n"} for x in range(1, 4)]}
    with Killer(root=server.pid) as k:
        res = httpx.post(server.url + "/execute", json=[job], timeout=120).json()["results"][0]
    assert k.kills > 0
    assert res["outcomes"][0] == ["ok"] * 3 and res["passed"][0] == [True] * 3
    lost = sum(o == "sandbox_error" for o in res["outcomes"][1])
    assert lost > 0 and "wrong_answer" not in res["outcomes"][1]
    assert _metric(server.url, "coevo_serve_sandbox_error_cells") - before == lost


def test_a_client_that_goes_away_leaves_nothing_running(server):
    n = 24
    job = {"id": "slow", "programs": [f"import time\ntime.sleep(0.25)\nprint({i})"
                                      for i in range(n)],
           "tests": [{"input": "", "output": "0"}] * 4}
    cells0 = _metric(server.url, "coevo_serve_cells_total")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/execute", json=[job], timeout=0.8)
    deadline = time.monotonic() + 20
    while True:
        h = httpx.get(server.url + "/health").json()
        if h["queue_requests"] == 0 and _metric(server.url, "coevo_serve_inflight_pieces") == 0:
            break
        assert time.monotonic() < deadline, h
        time.sleep(0.05)
    done = _metric(server.url, "coevo_serve_cells_total") - cells0
    dropped = _metric(server.url, "coevo_serve_cancelled_cells")
    assert dropped > 0 and done + dropped == n * 4 and done < n * 4 / 2, (done, dropped)
    time.sleep(0.5)  # and nothing runs after: no cell judged since
    assert _metric(server.url, "coevo_serve_cells_total") - cells0 == done
    assert _metric(server.url, 'coevo_serve_errors_total{kind="client_gone"}') >= 1 or \
        'client_gone' in httpx.get(server.url + "/metrics").text


def test_graceful_shutdown_answers_in_flight_and_refuses_new():
    s = ServeProcess(["--slots", "2"]).start()
    try:
        host, port = s.url.rsplit("/", 1)[-1].split(":")
        job = {"programs": ["import time\ntime.sleep(0.6)\nprint(int(input()) + 1)"] * 1,
               "tests": [{"input": f"{x}\n", "output": f"{x + 1}\n"} for x in range(4)]}
        out = {}
        t = threading.Thread(target=lambda: out.update(
            r=httpx.post(s.url + "/execute", json=[job], timeout=60)))
        t.start()
        deadline = time.monotonic() + 10
        while httpx.get(s.url + "/health").json()["queue_requests"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        judges = s.judges()
        os.kill(s.pid, signal.SIGTERM)
        time.sleep(0.3)
        with pytest.raises(OSError):  # no new connection
            socket.create_connection((host, int(port)), timeout=2).close()
        t.join()
        assert out["r"].status_code == 200
        assert out["r"].json()["results"][0]["passed"] == [[True] * 4]
        assert s.proc.wait(60) == 0
        assert "coevo serve: stopped" in s.log()
        gone = psutil.wait_procs([psutil.Process(p) for p in judges if psutil.pid_exists(p)],
                                 timeout=10)[1]
        assert not gone  # every judge ended with the server
    finally:
        s.stop()


def test_a_large_request_does_not_starve_a_small_one(server):
    big = {"id": "big", "programs": [f"import time\ntime.sleep(0.05)\nprint({i})"
                                     for i in range(30)],
           "tests": [{"input": "", "output": "0"}] * 8}  # 240 cells, ~6 s on two slots
    out = {}

    def send_big():
        try:
            out["big"] = httpx.post(server.url + "/execute", json=[big], timeout=5)
        except httpx.ReadTimeout:
            out["big"] = "gone"  # the client leaves: the rest is dropped

    t = threading.Thread(target=send_big)
    t.start()
    deadline = time.monotonic() + 10
    while _metric(server.url, "coevo_serve_inflight_pieces") == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    small = [{"id": "small", "programs": ["print(int(input()) * 2)"],
              "tests": [{"input": "21\n", "output": "42\n"}]}]
    r = httpx.post(server.url + "/execute", json=small, timeout=30)
    assert "big" not in out  # answered while the large one still runs
    assert r.json()["results"][0]["passed"] == [[True]]
    t.join()
    deadline = time.monotonic() + 20
    while httpx.get(server.url + "/health").json()["queue_requests"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_rewards_without_loaded_problems_take_the_problem_from_the_label(server):
    label = {"kind": "stdio", "tests": [{"input": "2\n", "output": "4\n"},
                                        {"input": "0\n", "output": "0\n"}]}
    d = httpx.post(server.url + "/reward", json={
        "completions": ["```python\nprint(int(input()) * 2)\n```", "print(4)"],
        "labels": [label, json.dumps(label)]}).json()
    assert d["rewards"] == [1.0, 0.5]
    r = httpx.post(server.url + "/reward", json={"completions": ["x"], "labels": ["HumanEval/0"]})
    assert r.status_code == 400 and "(loaded: none)" in r.json()["error"]
