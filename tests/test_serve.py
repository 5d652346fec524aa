"""``coevo serve`` over real HTTP on 127.0.0.1: the native jobs, SandboxFusion's official client,
OpenRLHF-shaped reward requests (the same numbers as TesterReward in-process), the tester as a
reward model, health and metrics, the token, the limits and the queue."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from coevo_code.execution import Executor
from coevo_code.serve.process import ServeProcess
from coevo_code.tasks import load_tasks
from coevo_code.training.tester_reward import TesterReward

sandbox_fusion = pytest.importorskip("sandbox_fusion")
from sandbox_fusion import (RunCodeRequest, RunStatus, SummaryMapping,
                            run_code, summary_run_code_result)

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("COEVO_SHARED_DATA", REPO.parent / "shared" / "data"))
HUMANEVAL = SHARED_DATA / "humaneval" / "HumanEval.jsonl.gz"
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def server():
    args = ["--slots", "2", "--problems", "bundled"]
    if HUMANEVAL.is_file():
        args += ["--problems", f"humaneval={HUMANEVAL}"]
    with ServeProcess(args) as s:
        yield s


@pytest.fixture(scope="module")
def local():
    with Executor(slots=2) as ex:
        yield ex


def _strip(results):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in results]


def test_execute_gives_the_in_process_matrices(server, local):
    jobs = [json.loads(x) for x in (REPO / "coevo_code" / "examples" / "jobs.jsonl").read_text(
        ).splitlines() if x.strip()]
    for job in jobs:  # the example's loops: a quarter second each, not a second
        job["time_limit_s"] = 0.25
    jobs += [
        {"id": "copies", "programs": ["print(int(input()) + 1)"] * 3 + ["print(0)"],
         "tests": [{"input": f"{i}\n", "output": f"{i + 1}\n"} for i in range(11)],
         "return_outputs": True},
        {"id": "loop", "programs": ["while True: pass", "print(1)"],
         "tests": [{"input": "", "output": "1"}], "time_limit_s": 0.3},
        {"id": "bad", "programs": "print(1)"},
        {"id": "empty", "programs": ["print(1)"], "tests": []},
    ]
    r = httpx.post(server.url + "/execute", json={"jobs": jobs}, timeout=60)
    assert r.status_code == 200, r.text
    got = r.json()["results"]
    assert _strip(got) == _strip(local.run(jobs))
    assert got[-2]["error"] == "'programs' must be a list of strings"
    # a bare list and a single job are taken too
    assert _strip(httpx.post(server.url + "/execute", json=jobs[1:3], timeout=60
                             ).json()["results"]) == _strip(got[1:3])
    assert _strip(httpx.post(server.url + "/execute", json=jobs[1], timeout=60
                             ).json()["results"]) == _strip(got[1:2])


def test_sandbox_fusion_client_runs_python(server):
    ep = server.url

    def run(**kw):
        return run_code(RunCodeRequest(language="python", **kw), endpoint=ep, max_attempts=1,
                        client_timeout=30)

    r = run(code="name = input()\nprint('hello', name)", stdin="coevo\n")
    assert r.status == RunStatus.Success and r.compile_result is None
    assert r.run_result.stdout == "hello coevo\n" and r.run_result.return_code == 0
    assert r.run_result.status == "Finished" and r.run_result.execution_time >= 0
    assert summary_run_code_result(r, SummaryMapping()) == "Success"

    r = run(code="import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(4)")
    assert r.status == RunStatus.Failed
    assert (r.run_result.stdout, r.run_result.stderr, r.run_result.return_code) == (
        "out\n", "err\n", 4)

    r = run(code="def f():\n    raise KeyError('k')\nf()")
    assert r.run_result.return_code == 1 and "KeyError: 'k'" in r.run_result.stderr
    assert 'File "main.py", line 2, in f' in r.run_result.stderr

    r = run(code="while True:\n    pass", run_timeout=0.5)
    assert r.status == RunStatus.Failed and r.run_result.status == "TimeLimitExceeded"
    assert summary_run_code_result(r, SummaryMapping(RunTimeout="TLE")) == "TLE"

    data = base64.b64encode(b"3 4\n").decode()
    r = run(code="a, b = map(int, open('in/nums.txt').read().split())\n"
                 "open('sum.txt', 'w').write(str(a + b))\nprint(__name__)",
            files={"in/nums.txt": data}, fetch_files=["sum.txt", "absent.txt"])
    assert r.status == RunStatus.Success and r.run_result.stdout == "__main__\n"
    assert r.files == {"sum.txt": base64.b64encode(b"7").decode()}

    r = run(code="def f(:\n  pass")
    assert r.status == RunStatus.Failed and "SyntaxError" in r.run_result.stderr

    # nothing of one request is visible to the next: its files are gone
    r = run(code="open('left.txt', 'w').write('secret')\ntry:\n    open('/tmp/left.txt', 'w')"
                 ".write('s')\nexcept OSError:\n    pass")
    assert r.status == RunStatus.Success
    r = run(code="import os\nprint(sorted(os.listdir('.')), os.path.exists('/tmp/left.txt'))")
    assert r.run_result.stdout == "[] False\n", r.run_result

    # the sandbox still holds: no network, no host secrets
    r = run(code="import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)")
    assert r.status == RunStatus.Failed and r.run_result.return_code != 0


def test_sandbox_fusion_client_runs_cpp_and_java(server):
    def run(language, code, **kw):
        return run_code(RunCodeRequest(language=language, code=code, **kw), endpoint=server.url,
                        max_attempts=1, client_timeout=60)

    cpp = '#include <bits/stdc++.h>\nint main(){std::string s; std::cin>>s; std::cout<<"hi "<<s<<"\\n";}'
    r = run("cpp", cpp, stdin="coevo\n")
    assert r.status == RunStatus.Success, r
    assert r.compile_result.status == "Finished" and r.compile_result.return_code == 0
    assert r.run_result.stdout == "hi coevo\n" and r.run_result.return_code == 0
    assert summary_run_code_result(r, SummaryMapping()) == "Success"
    r = run("cpp", "int main() { return undefined_name; }")
    assert r.status == RunStatus.Failed and r.run_result is None
    assert r.compile_result.return_code == 1 and "undefined_name" in r.compile_result.stderr
    assert summary_run_code_result(r, SummaryMapping(CompileFailed="CE")) == "CE"
    r = run("cpp", "int main(){ for(;;){} }", run_timeout=0.5)
    assert r.status == RunStatus.Failed and r.run_result.status == "TimeLimitExceeded"
    assert summary_run_code_result(r, SummaryMapping(RunTimeout="TLE")) == "TLE"
    r = run("cpp", "int main(){ volatile int* p = nullptr; *p = 1; }")
    assert r.status == RunStatus.Failed and r.run_result.return_code == 1

    java = ("import java.util.*;\npublic class Main { public static void main(String[] a) {"
            " System.out.println(new Scanner(System.in).nextInt() * 2); } }")
    r = run("java", java, stdin="21\n")
    assert r.status == RunStatus.Success and r.run_result.stdout == "42\n", r
    r = run("java", "public class Main { void f() { int x = } }")
    assert r.status == RunStatus.Failed and r.run_result is None
    assert "error" in r.compile_result.stderr
    # /execute speaks the languages too: its compile errors come back with the compiler's text
    d = httpx.post(server.url + "/execute", timeout=60, json={"jobs": [
        {"id": "c", "language": "cpp", "programs": [cpp, "int main( {"],
         "tests": [{"input": "x\n", "output": "hi x\n"}, {"input": "y\n", "output": "hi z\n"}]}]}
    ).json()["results"][0]
    assert d["outcomes"] == [["ok", "wrong_answer"], ["compile_error", "compile_error"]], d
    assert d["compile_output"][0] == "" and "error" in d["compile_output"][1]


def test_sandbox_fusion_other_language_and_bad_requests(server):
    # a language it does not run is refused at once: the official client does not retry it
    t0 = time.monotonic()
    r = run_code(RunCodeRequest(language="python2", code="print 1"), endpoint=server.url,
                 max_attempts=5, client_timeout=30)
    assert time.monotonic() - t0 < 5
    assert r.status == RunStatus.Failed and r.run_result is None and r.compile_result is None
    assert "runs languages python, cpp and java; got 'python2'" in r.message
    d = httpx.post(server.url + "/run_code", json={"code": "x", "language": "rust"}).json()
    assert d["status"] == "Failed" and d["run_result"] is None and "'rust'" in d["message"]
    for body, reason in (({"language": "python"}, "'code' must be a string"),
                         ({"code": "1", "run_timeout": "x"}, "'run_timeout' must be a finite"),
                         ({"code": "1", "files": {"../x": "AA=="}}, "relative path"),
                         ({"code": "1", "files": {"a": "!!"}}, "not valid base64"),
                         ({"code": "1", "language": "cpp", "files": {"a": "AA=="}},
                          "language 'python' only")):
        r = httpx.post(server.url + "/run_code", json=body)
        assert r.status_code == 400 and reason in r.json()["error"], r.text
    assert httpx.get(server.url + "/v1/ping").text == "pong"


def _openrlhf_payload(items):
    """What OpenRLHF's SingleTurnAgentExecutor posts: the decoded prompt + response as the query,
    the prompt, and the dataset's label."""
    prompts = [f"<|im_start|>user\nSolve {i}<|im_end|>\n<|im_start|>assistant\n"
               for i in range(len(items))]
    return {"query": [p + c + "<|im_end|>" for p, (c, _) in zip(prompts, items)],
            "prompts": prompts, "labels": [label for _, label in items]}


def test_openrlhf_rewards_equal_tester_reward_in_process(server, local):
    tasks = list(load_tasks("bundled"))
    byid = {t.id: t for t in tasks}
    items = []
    for t in tasks[::3]:
        ref = t.references[0]
        items.append((f"Here:\n```python\n{ref}\n```", t.id))
        items.append(("```python\nprint(42)\n```" if t.kind == "stdio" else
                      f"```python\ndef {t.entry_point}(*a):\n    return 0\n```",
                      json.dumps({"benchmark": "bundled", "task_id": t.id})))
        items.append(("no code at all", t.id))
    # a partly right one: passes some tests, not all
    items.append(("```python\nprint(int(input()) * 0 + 3)\n```", "stdio/sum-two"))
    r = httpx.post(server.url + "/reward", json=_openrlhf_payload(items), timeout=120)
    assert r.status_code == 200, r.text
    got = r.json()
    want = TesterReward.from_gold(tasks, max_tests=10 ** 6, executor=local)(
        completions=[c for c, _ in items],
        task_id=[json.loads(lab)["task_id"] if lab.startswith("{") else lab for _, lab in items])
    assert got["rewards"] == [float(w) for w in want]
    assert got["scores"] == got["rewards"]
    assert {0.0, 1.0} <= set(want) and any(0 < w < 1 for w in want)
    # OpenRLHF's serve_rm path answers the same
    r2 = httpx.post(server.url + "/get_reward", json=_openrlhf_payload(items), timeout=120)
    assert r2.json()["rewards"] == got["rewards"]
    # and so do one-sample requests sent all at once, as OpenRLHF's agents send them
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(16) as pool:
        singles = list(pool.map(lambda it: httpx.post(
            server.url + "/reward", json=_openrlhf_payload([it]), timeout=120).json()["rewards"],
            items))
    assert [x for one in singles for x in one] == got["rewards"]
    assert byid  # the labels named real problems


def test_reward_with_tests_in_the_label(server, local):
    label = {"kind": "functional", "entry_point": "triple",
             "tests": [{"code": "assert triple(1) == 3"}, {"code": "assert triple(0) == 0"},
                       {"code": "assert triple(-2) == -6"}]}
    good = "```python\ndef triple(x):\n    return 3 * x\n```"
    half = "```python\ndef triple(x):\n    return 3 if x == 1 else x\n```"
    d = httpx.post(server.url + "/reward", json={
        "query": [good, half], "labels": [json.dumps(label), label]}).json()
    assert d["rewards"] == [1.0, pytest.approx(2 / 3)]


@pytest.mark.skipif(not HUMANEVAL.is_file(), reason=f"no {HUMANEVAL}")
def test_reward_on_real_humaneval(server, local):
    tasks = list(load_tasks("humaneval", str(HUMANEVAL)))[:8]
    comps = [t.prompt + t.references[0][len(t.prompt):] if t.references else t.prompt
             for t in tasks] + ["    return None\n" for _ in tasks]
    ids = [t.id for t in tasks] * 2
    d = httpx.post(server.url + "/reward", json={"completions": comps, "labels": ids},
                   timeout=120).json()
    want = TesterReward.from_gold(tasks, max_tests=10 ** 6, executor=local)(
        completions=comps, task_id=ids)
    assert d["rewards"] == [float(w) for w in want]


def test_reward_bad_requests_get_one_line_reasons(server):
    cases = [({"query": ["x"], "labels": []}, "one label per query"),
             ({"query": "x", "labels": ["a"]}, "'query' must be a list"),
             ({"query": ["x"], "labels": ["no/such-task"]}, "labels[0]: no loaded benchmark"),
             ({"query": ["x"], "labels": ["{bad json"]}, "labels[0]: the label is not valid"),
             ({"query": ["x"], "labels": [{"benchmark": "mbpp", "task_id": "1"}]},
              "benchmark 'mbpp' is not loaded"),
             ({"query": ["x"], "labels": [{"kind": "stdio", "tests": [{"input": 1}]}]},
              "tests[0] of a stdio problem")]
    for body, reason in cases:
        r = httpx.post(server.url + "/reward", json=body)
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert reason in err and "\n" not in err


def test_malformed_requests_get_4xx_and_do_not_disturb_others(server):
    job = {"id": "ok", "programs": ["import time; time.sleep(0.3); print(1)"],
           "tests": [{"input": "", "output": "1"}]}
    out = {}
    t = threading.Thread(target=lambda: out.update(
        r=httpx.post(server.url + "/execute", json=[job], timeout=60)))
    t.start()
    for body in (b"{", b"[1, 2", b"\xff\xfe", b"42", b'{"jobs": {"a": 1}}'):
        r = httpx.post(server.url + "/execute", content=body, headers=JSON)
        assert r.status_code == 400 and "\n" not in r.json()["error"], (body, r.text)
    # nested past --max_json_depth: refused while it streams in, before any parsing
    r = httpx.post(server.url + "/execute", content=b"[" * 100_000 + b"]" * 100_000,
                   headers=JSON)
    assert r.status_code == 413 and "nests deeper than 64" in r.json()["error"], r.text
    assert httpx.get(server.url + "/execute").status_code == 405
    assert httpx.post(server.url + "/nothing", json={}).status_code == 404
    t.join()
    assert out["r"].json()["results"][0]["passed"] == [[True]]


def test_health_and_metrics(server):
    h = httpx.get(server.url + "/health").json()
    assert h["status"] == "ok" and h["slots"] == 2 and h["rewards"] is True
    httpx.post(server.url + "/execute", json=[{"programs": ["print(1)"] * 2,
                                                "tests": [{"input": "", "output": "1"}] * 3}])
    text = httpx.get(server.url + "/metrics").text
    for name in ("coevo_serve_requests_total", "coevo_serve_cells_total",
                 "coevo_serve_queue_cells", "coevo_serve_queue_requests",
                 "coevo_serve_errors_total", "coevo_serve_request_seconds_bucket"):
        assert name in text, name
    cells = [float(x.split()[-1]) for x in text.splitlines()
             if x.startswith("coevo_serve_cells_total")]
    assert cells and cells[0] >= 3  # the copies share their first program's cells
    assert 'coevo_serve_errors_total{kind="malformed"}' in text


def test_token_is_required_when_set():
    token = "s3cret-token"
    with ServeProcess(["--slots", "1", "--token", token]) as s:
        job = [{"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}]
        assert httpx.post(s.url + "/execute", json=job).status_code == 401
        assert httpx.post(s.url + "/execute", json=job,
                          headers={"Authorization": "Bearer wrong"}).status_code == 401
        r = httpx.post(s.url + "/execute", json=job,
                       headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json()["results"][0]["passed"] == [[True]]
        assert httpx.get(s.url + "/metrics").status_code == 401
        # /health: its status to anyone, the deployment's details only with the token
        assert httpx.get(s.url + "/health").json() == {"status": "ok"}
        h = httpx.get(s.url + "/health", headers={"X-Coevo-Token": token}).json()
        assert h["status"] == "ok" and h["slots"] == 1 and "launcher" in h
        # clients that send no headers put the token in the path
        r = run_code(RunCodeRequest(language="python", code="print(6 * 7)"),
                     endpoint=f"{s.url}/t/{token}", max_attempts=1)
        assert r.run_result.stdout == "42\n"
        with pytest.raises(Exception, match="401"):
            run_code(RunCodeRequest(language="python", code="print(1)"),
                     endpoint=f"{s.url}/t/nope", max_attempts=1)


def test_refuses_a_public_host_without_token():
    env = {k: v for k, v in os.environ.items() if k != "COEVO_SERVE_TOKEN"}
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "serve", "--host", "0.0.0.0",
                        "--port", "0"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith("coevo: --host 0.0.0.0 is reachable")


def test_limits_clamps_and_queue():
    args = ["--slots", "1", "--max-body-mb", "0.05", "--max-cells", "40",
            "--max-time-limit", "0.5", "--max-wall-limit", "1", "--queue-requests", "1",
            "--queue-timeout", "0.5"]
    with ServeProcess(args) as s:
        r = httpx.post(s.url + "/execute", content=b"[" + b" " * 60_000 + b"]", headers=JSON)
        assert r.status_code == 413 and "at most" in r.json()["error"]
        big = [{"programs": ["print(1)"] * 7, "tests": [{"input": "", "output": "1"}] * 6}]
        r = httpx.post(s.url + "/execute", json=big)
        assert r.status_code == 413 and "42 cells" in r.json()["error"]
        # a job asking for 100 s gets the server's 0.5 s
        t0 = time.monotonic()
        r = httpx.post(s.url + "/execute", json=[{"programs": ["while True: pass"],
                                                  "tests": [{"input": "", "output": ""}],
                                                  "time_limit_s": 100, "wall_limit_s": 300}],
                       timeout=60)
        assert r.json()["results"][0]["outcomes"] == [["timeout"]]
        assert time.monotonic() - t0 < 10
        # the queue holds one request: the next one waits its turn, and past --queue_timeout
        # with none of its cells started it is dropped and answered 503 with Retry-After
        slow = [{"programs": ["import time; time.sleep(0.8); print(1)"],
                 "tests": [{"input": "", "output": "1"}] * 2}]
        out = {}
        t = threading.Thread(target=lambda: out.update(
            r=httpx.post(s.url + "/execute", json=slow, timeout=60)))
        t.start()
        deadline = time.monotonic() + 10
        while httpx.get(s.url + "/health").json()["queue_requests"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        cells = _cells(s)
        r = httpx.post(s.url + "/execute", json=[{"programs": ["print(2)"],
                                                  "tests": [{"input": "", "output": "2"}]}])
        assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1, r.text
        assert "nothing of it ran" in r.json()["error"]
        t.join()
        assert out["r"].json()["results"][0]["passed"] == [[True, True]]
        assert _cells(s) == cells + 2      # the slow request's two cells, none of the other's
        text = httpx.get(s.url + "/metrics").text
        assert 'coevo_serve_errors_total{kind="queue_timeout"} 1.0' in text
        assert 'coevo_serve_errors_total{kind="too_large"} 2.0' in text


@pytest.mark.slow
def test_tester_as_reward_model(local, tmp_path):
    """--tester tiny: tests are written once per problem (the model for one problem, the cache
    file for another), each completion is judged against them, and the rewards are those of
    TesterReward in-process on the same tests."""
    from coevo_code.roles import TEST
    k = 2
    tasks = list(load_tasks("bundled"))
    seeded, fresh = tasks[0], tasks[14]   # stdio/sum-two: its tests in the cache already
    cache = tmp_path / "tester_tests.jsonl"
    tests = ["**Test Input:**\n```\n1 2\n```\n**Test Output:**\n```\n3\n```",
             "**Test Input:**\n```\n-4 10\n```\n**Test Output:**\n```\n6\n```"]
    # the server keys problems by benchmark:task_id, its cache file too
    cache.write_text(json.dumps({"task_id": f"bundled:{seeded.id}", "role": TEST,
                                 "completions": tests}) + "\n")
    with ServeProcess(["--slots", "1", "--problems", "bundled", "--tester", "tiny",
                       "--k-tests", str(k), "--max-tokens", "48", "--seed", "3",
                       "--tester-cache", str(cache), "--tester-max-new", "2",
                       "--tester-max-inline", "1"]) as s:
        comps = [seeded.references[0], "print(3)", "print(int(input()) - 1)",
                 fresh.references[0], "def add(a, b):\n    return a"]
        ids = [seeded.id] * 3 + [fresh.id] * 2
        d1 = httpx.post(s.url + "/reward", json={"completions": comps, "labels": ids},
                        timeout=300).json()
        assert d1["rewards"][:3] == [1.0, 0.5, 0.0]   # judged on the tester's two tests
        h = httpx.get(s.url + "/health").json()
        assert h["tester"] is True and h["tester_problems"] == 2
        assert h["tester_generated"] == 1             # the model wrote the other problem's
        written = [json.loads(x) for x in cache.read_text().splitlines()]
        assert [w["task_id"] for w in written] == [f"bundled:{seeded.id}", f"bundled:{fresh.id}"]
        assert len(written[1]["completions"]) == k
        keyed = [dataclasses.replace(t, id=f"bundled:{t.id}") for t in tasks]
        want = TesterReward(keyed, None, k_tests=k, executor=local, cache_path=cache)(
            completions=comps, task_id=[f"bundled:{i}" for i in ids])
        assert d1["rewards"] == [0.0 if w is None else float(w) for w in want]
        assert d1["extra_logs"]["no_signal"] == [w is None for w in want]
        # the same problems again: nothing generated, the same rewards
        d2 = httpx.post(s.url + "/reward", json={"completions": comps, "labels": ids}).json()
        assert d2["rewards"] == d1["rewards"]
        assert httpx.get(s.url + "/health").json()["tester_generated"] == 1
        # problems given in requests: at most 2 new ones a request, 1 kept (the oldest goes)
        inline = [{"kind": "stdio", "prompt": f"Print {i}.", "tests": [
            {"input": "", "output": f"{i}\n"}]} for i in range(3)]
        r = httpx.post(s.url + "/reward", json={"completions": ["print(0)"] * 3,
                                                "labels": inline}, timeout=300)
        assert r.status_code == 429 and "3 problems the tester has no tests" in r.json()["error"]
        assert httpx.get(s.url + "/health").json()["tester_generated"] == 1  # nothing written
        for n, i in enumerate((0, 1, 0)):
            r = httpx.post(s.url + "/reward", json={"completions": ["print(0)"],
                                                    "labels": [inline[i]]}, timeout=300)
            assert r.status_code == 200, r.text
            h = httpx.get(s.url + "/health").json()
            # 0, then 1 (0 forgotten), then 0 written again; 2 loaded problems + 1 kept
            assert h["tester_generated"] == 2 + n and h["tester_problems"] == 3, h
        # the cache file keeps the loaded benchmarks' problems only
        assert len(cache.read_text().splitlines()) == 2


def _verl_sandbox_fusion():
    """veRL's own SandboxFusion reward helper, loaded from its files (``import verl`` pulls
    veRL's DataProto, ray and tensordict, in; the helper needs only requests): an installed veRL
    or ``COEVO_VERL_DIR``."""
    from coevo_code.serve.trainer_clients import load_verl_sandbox_fusion
    return load_verl_sandbox_fusion()


def test_verl_sandbox_fusion_reward_helper(server):
    verl = _verl_sandbox_fusion()
    if verl is None:
        pytest.skip("veRL is not installed (and COEVO_VERL_DIR is not set)")
    cases = json.dumps({"inputs": ["1 2\n", "5 5\n", "-3 3\n"], "outputs": ["3\n", "10\n", "0\n"]})
    url = server.url + "/run_code"
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    half = "```python\na, b = map(int, input().split())\nprint(a + b if a > 0 else 1)\n```"
    loop = "```python\nwhile True:\n    pass\n```"
    score, meta = verl.compute_score(url, None, 512, right, cases, continuous=True, timeout=2)
    assert score == 1.0 and [m["status"] for m in meta] == ["success"] * 3
    score, meta = verl.compute_score(url, None, 512, half, cases, continuous=True, timeout=2)
    assert score == pytest.approx(2 / 3) and meta[2]["status"] == "wrong_answer"
    score, meta = verl.compute_score(url, None, 512, loop, cases, continuous=True, timeout=1)
    assert score == 0.0 and meta[0]["status"] == "timeout"


@pytest.mark.slow
def test_ray_backend_gives_the_same_matrices(local):
    """--backend ray (a local Ray instance on 127.0.0.1): one RayExecutor behind the dispatcher,
    the same matrices as the local executor."""
    pytest.importorskip("ray")
    jobs = [json.loads(x) for x in (REPO / "coevo_code" / "examples" / "jobs.jsonl").read_text(
        ).splitlines() if x.strip()]
    for job in jobs:
        job["time_limit_s"] = 0.25
    with ServeProcess(["--backend", "ray", "--slots", "2"], start_timeout=240) as s:
        assert httpx.get(s.url + "/health").json()["backend"] == "ray"
        r = httpx.post(s.url + "/execute", json=jobs, timeout=120)
        assert _strip(r.json()["results"]) == _strip(local.run(jobs))
        r = run_code(RunCodeRequest(language="python", code="print(input() * 2)", stdin="ab"),
                     endpoint=s.url, max_attempts=1)
        assert r.run_result.stdout == "abab\n"


def _cells(server) -> float:
    for line in httpx.get(server.url + "/metrics").text.splitlines():
        if line.startswith("coevo_serve_cells_total "):
            return float(line.split()[-1])
    return 0.0
