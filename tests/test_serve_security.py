"""``coevo serve`` against the security review's findings, over real HTTP on 127.0.0.1: each test
is the finding's reproduction, answered as it must be now (docs/SERVICE.md, "Security")."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import threading
import time

import httpx
import pytest

from coevo_code.serve.process import ServeProcess
from coevo_code.serve.rewards import Rewards

JSON = {"content-type": "application/json"}
PRINT1 = {"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # a second benchmark whose task id is one of the bundled ones, with other tests (a * b)
    other = tmp_path_factory.mktemp("bench") / "other.json"
    other.write_text(json.dumps([{"id": "stdio/sum-two", "kind": "stdio", "prompt": "a * b",
                                  "tests": [{"input": "2 3\n", "output": "6\n"},
                                            {"input": "1 1\n", "output": "1\n"}]}]))
    with ServeProcess(["--slots", "2", "--problems", "bundled", "--problems", f"native={other}",
                       "--max-query-chars", "200000", "--max-jobs", "20",
                       "--max-response-mb", "1", "--max-pending-rewards", "1",
                       "--max-time-limit", "0.5", "--max-connections", "8"]) as s:
        yield s


@pytest.mark.timeout(60)
def test_end_marks_are_stripped_in_linear_time():
    # quadratic stripping (a copy per mark) takes minutes on this; one pass takes a second
    q = "x = 1" + "</s>" * 2_000_000 + " <|im_end|>\n"
    assert Rewards.completion(q, None) == "x = 1"
    assert Rewards.completion("p</s>code</s> </s>", "p</s>") == "code"
    assert Rewards.completion("</s>", "</s>") == ""


def test_a_long_query_is_refused_and_health_stays_up(server):
    r = httpx.post(server.url + "/reward", json={"query": ["</s>" * 50_001],
                                                 "labels": ["stdio/max-of-list"]}, timeout=30)
    assert r.status_code == 400 and "query[0] has 200004 characters" in r.json()["error"]
    assert httpx.get(server.url + "/health", timeout=5).json()["status"] == "ok"


def test_a_prompt_that_does_not_begin_the_query_is_not_scored(server):
    code = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    prompt = f"<|im_start|>user\nLike this: {code}<|im_end|>\n<|im_start|>assistant\n"
    decoded = prompt.replace("user\n", "user \n")   # the trainer's decoding differs a little
    r = httpx.post(server.url + "/reward", json={
        "query": [decoded + "no code<|im_end|>", prompt + code + "<|im_end|>",
                  decoded.replace("<|im_start|>assistant\n", "") + "none"],
        "prompts": [prompt] * 3,
        "labels": [{"kind": "stdio", "tests": [{"input": "1 2\n", "output": "3\n"}]}] * 3}).json()
    # the prompt's code is not the completion's: 0, flagged; a matching prompt is cut as before
    assert r["rewards"] == [0.0, 1.0, 0.0]
    assert r["extra_logs"]["prompt_mismatch"] == [True, False, True]
    # no assistant mark: the query past as many characters as the prompt has
    assert Rewards.split("Xyz" + "print(1)", "xyz") == ("print(1)", True)


def test_benchmarks_sharing_task_ids_keep_their_own_tests(server):
    add = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    r = httpx.post(server.url + "/reward", json={
        "completions": [add, add, add],
        "labels": ["bundled:stdio/sum-two", {"benchmark": "native", "task_id": "stdio/sum-two"},
                   "native:stdio/sum-two"]}, timeout=60)
    assert r.status_code == 200, r.text
    # the sum passes every bundled test; of the product's tests, none (5 != 6, 2 != 1)
    assert r.json()["rewards"] == [1.0, 0.0, 0.0]
    r = httpx.post(server.url + "/reward", json={"completions": [add],
                                                 "labels": ["stdio/sum-two"]})
    assert r.status_code == 400 and "several loaded benchmarks" in r.json()["error"]


def test_jobs_and_returned_outputs_are_capped(server):
    loud = {"programs": ["import sys; sys.stdout.write('x' * 65536)"],
            "tests": [{"input": "", "output": ""}] * 17, "return_outputs": True}
    r = httpx.post(server.url + "/execute", json=[loud], timeout=60)
    assert r.status_code == 413 and "outputs back for 17 cells" in r.json()["error"], r.text
    r = httpx.post(server.url + "/execute", json=[{}] * 21)   # malformed jobs count too
    assert r.status_code == 413 and "21 jobs" in r.json()["error"], r.text
    loud["tests"] = loud["tests"][:16]   # 16 x 64 Ki = the 1 MiB allowed
    r = httpx.post(server.url + "/execute", json=[loud], timeout=60)
    assert r.status_code == 200 and len(r.json()["results"][0]["outputs"][0]) == 16


def test_limits_above_the_servers_are_clamped_not_refused(server):
    job = {"programs": ["while True: pass"], "tests": [{"input": "", "output": ""}],
           "time_limit_s": 10 ** 6, "wall_limit_s": 10 ** 7, "memory_limit_mb": 10 ** 9,
           "output_limit_mb": 10 ** 5}
    r = httpx.post(server.url + "/execute", json=[job], timeout=60)
    assert r.status_code == 200 and r.json()["results"][0]["outcomes"] == [["timeout"]], r.text


def test_browser_requests_are_refused(server):
    mark = "ran-" + base64.b32encode(os.urandom(5)).decode()
    code = {"code": f"print({mark!r})", "language": "python"}
    cells0 = _cells(server)
    # a page's fetch carries Origin; a form posts text/plain; DNS rebinding sends its own Host
    r = httpx.post(server.url + "/run_code", json=code, headers={"Origin": "http://evil.test"})
    assert r.status_code == 403 and "Origin" in r.json()["error"]
    r = httpx.post(server.url + "/run_code", content=json.dumps(code),
                   headers={"content-type": "text/plain"})
    assert r.status_code == 415 and "application/json" in r.json()["error"]
    r = httpx.post(server.url + "/run_code", json=code,
                   headers={"Host": "rebind.attacker.example:8080"})
    assert r.status_code == 403 and "loopback host name" in r.json()["error"]
    assert _cells(server) == cells0   # none of them ran
    port = server.url.rsplit(":", 1)[1]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        r = httpx.post(server.url + "/run_code", json=code, headers={"Host": host})
        assert r.json()["run_result"]["stdout"] == mark + "\n"


def test_run_code_files_that_cannot_be_written_fail(server):
    data = base64.b64encode(b"hi").decode()
    for name in ("a/", ".", "./", "b/./"):
        r = httpx.post(server.url + "/run_code", json={"code": "print(1)", "files": {name: data}})
        assert r.status_code == 400 and "must name a file" in r.json()["error"], (name, r.text)
    # 'x' a file, then 'x/y' below it: the wrapper cannot write it and the code never runs
    r = httpx.post(server.url + "/run_code", json={"code": "print('user code ran')",
                                                   "files": {"x": data, "x/y": data}}).json()
    assert r["status"] == "Failed" and r["run_result"]["return_code"] == 1, r
    assert r["run_result"]["stdout"] == "" and "could not be written" in r["run_result"]["stderr"]


def test_a_forged_trailer_is_not_a_500(server):
    for forged in ('{"rc": "x"}', '[1]', '{"rc": 0, "files": {"a": 1}}'):
        code = ("import sys, os\nk = sys._getframe(1).f_globals['_K']\n"
                f"sys.stdout.write('out' + k + {forged!r})\nsys.stdout.flush()\nos._exit(0)")
        r = httpx.post(server.url + "/run_code", json={"code": code})
        assert r.status_code == 200, r.text
        rr = r.json()["run_result"]
        assert rr["return_code"] == 0 and rr["stdout"] == "out" and r.json()["files"] == {}


def test_reward_requests_scored_at_once_are_bounded(server):
    """--max_pending_rewards 1: a second reward request waits for the first one's slot (its body
    unread) instead of being refused, and is scored when the slot frees."""
    label = {"kind": "stdio", "tests": [{"input": "", "output": "1\n"}]}
    slow = "```python\nimport time\ntime.sleep(1.0)\nprint(1)\n```"
    out = {}

    def post(key, text):
        out[key] = httpx.post(server.url + "/reward", json={"completions": [text],
                                                            "labels": [label]}, timeout=60)

    t = threading.Thread(target=post, args=("slow", slow))
    t.start()
    deadline = time.monotonic() + 20
    while httpx.get(server.url + "/health").json()["queue_requests"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    t2 = threading.Thread(target=post, args=("next", "print(1)"))
    t2.start()
    while (h := httpx.get(server.url + "/health").json())["waiting_requests"] < 1:
        assert time.monotonic() < deadline and "next" not in out, h
        time.sleep(0.02)
    assert h["pending_rewards"] == 1     # the second one waits; one is scored at a time
    t.join()
    t2.join()
    assert out["slow"].json()["rewards"] == [1.0]
    assert out["next"].json()["rewards"] == [1.0]
    assert httpx.get(server.url + "/health").json()["pending_rewards"] == 0


def test_open_connections_are_bounded(server):
    host, port = server.url.rsplit("/", 1)[-1].split(":")
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(8)]
    try:
        deadline = time.monotonic() + 10
        while (r := httpx.get(server.url + "/health")).status_code != 503:
            assert time.monotonic() < deadline, r   # the server accepts them in a moment
            time.sleep(0.05)
    finally:
        for c in idle:
            c.close()
    deadline = time.monotonic() + 10
    while (r := httpx.get(server.url + "/health")).status_code != 200:
        assert time.monotonic() < deadline, r
        time.sleep(0.05)


@pytest.mark.slow
def test_shutdown_refuses_new_requests_at_the_signal_and_keeps_to_the_grace():
    """SIGTERM with --grace 2 while a 6 s request runs: a request arriving on an open connection
    after the signal gets 503; the running one is answered 503 (not a 500 with a traceback) when
    the grace runs out, its cells dropped; the server exits soon after, with status 0."""
    with ServeProcess(["--slots", "1", "--grace", "2"]) as s:
        host, port = s.url.rsplit("/", 1)[-1].split(":")
        long_job = {"programs": [f"import time\ntime.sleep(0.5)\nprint({i})" for i in range(12)],
                    "tests": [{"input": "", "output": "0"}]}
        out = {}
        t = threading.Thread(target=lambda: out.update(
            r=httpx.post(s.url + "/execute", json=[long_job], timeout=60)))
        t.start()
        deadline = time.monotonic() + 20
        while httpx.get(s.url + "/health").json()["queue_requests"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        # a second client has sent its request's head, not yet its body
        body = json.dumps([PRINT1]).encode()
        late = socket.create_connection((host, int(port)), timeout=30)
        late.sendall(f"POST /execute HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json"
                     f"\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        time.sleep(0.3)
        t0 = time.monotonic()
        os.kill(s.pid, signal.SIGTERM)
        time.sleep(0.3)
        late.sendall(body)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = late.recv(65536)
            if not chunk:
                break
            answer += chunk
        late.close()
        head, _, rest = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503"), answer
        assert json.loads(rest)["error"] == "the server is shutting down"
        t.join()
        r = out["r"]
        assert r.status_code == 503 and "shut down before" in r.json()["error"], r.text
        assert s.proc.wait(30) == 0
        print(f"answered 503 {r.elapsed.total_seconds():.2f} s after sending; exited "
              f"{time.monotonic() - t0:.2f} s after SIGTERM")
        # the grace is 2 s: what was left (about 4 s of sleeping cells) was not waited for
        assert time.monotonic() - t0 < 2 + 4, time.monotonic() - t0


def _cells(server) -> float:
    for line in httpx.get(server.url + "/metrics").text.splitlines():
        if line.startswith("coevo_serve_cells_total "):
            return float(line.split()[-1])
    return 0.0


def test_a_cancelled_handler_cancels_its_request():
    """uvicorn cancels the handlers still running when its shutdown timeout runs out: the
    request's cells must not stay queued. Driven through the ASGI application (over HTTP the
    grace's own 503 comes first), the cancellation being the one uvicorn makes."""
    import asyncio

    from coevo_code.execution import Executor
    from coevo_code.serve.app import create_app
    from coevo_code.serve.dispatcher import Dispatcher

    # 40 cells: more than the worker's first batch (16), so some wait when the cancel comes
    job = {"programs": [f"import time\ntime.sleep(0.1)\nprint({i})" for i in range(40)],
           "tests": [{"input": "", "output": ""}]}
    body = json.dumps([job]).encode()
    with Executor(slots=1) as ex:
        d = Dispatcher([ex])
        try:
            app = create_app(d)

            async def main():
                msgs = [{"type": "http.request", "body": body, "more_body": False}]
                never = asyncio.Event()

                async def receive():
                    if msgs:
                        return msgs.pop(0)
                    await never.wait()

                async def send(message):
                    pass

                scope = {"type": "http", "method": "POST", "path": "/execute",
                         "raw_path": b"/execute", "query_string": b"", "root_path": "",
                         "headers": [(b"host", b"127.0.0.1"),
                                     (b"content-type", b"application/json")],
                         "http_version": "1.1", "scheme": "http",
                         "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 40000)}
                task = asyncio.ensure_future(app(scope, receive, send))
                while d.queued_requests < 1:
                    await asyncio.sleep(0.01)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

            asyncio.run(main())
            assert d.cancelled_cells > 0
            assert d.wait_idle(10) and d.queued_requests == 0
        finally:
            d.close()
