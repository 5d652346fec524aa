"""Isolation layers: what is reported, fallbacks, privilege dropping, restarts, clean shutdown."""

from __future__ import annotations

import json
import logging
import os
import signal
import time

import pytest

from coevo_code.execution import Executor
from conftest import executor_fixture, launchers, owned_processes

executor = executor_fixture(docker=True)  # every launcher here, the container too

from pathlib import Path

from coevo_code.sandbox import landlock, seccomp, server

ONE = [{"input": "", "output": "ok"}]
needs_landlock = pytest.mark.skipif(landlock.abi() < 1, reason="kernel without Landlock")


@needs_landlock
def test_layers_are_reported_active(executor):
    layers = executor.isolation["layers"]
    for name in ("seccomp", "landlock", "rlimits", "subreaper"):
        assert layers[name][0], (name, layers[name])
    if executor.isolation["launcher"] == "bwrap":
        assert layers["bubblewrap"][0]
        if os.geteuid() == 0:
            assert layers["uid"][0]


def test_fallback_is_layer_by_layer_and_says_so(caplog):
    with caplog.at_level(logging.WARNING):
        with Executor(slots=1, launcher="direct", disable=("landlock",)) as ex:
            layers = ex.isolation["layers"]
            assert not layers["landlock"][0] and "disabled" in layers["landlock"][1]
            assert layers["seccomp"][0]
            # seccomp still holds what it holds
            res = ex.run([{"programs": ["import os\nos.fork()\nprint('ok')",
                                        "import socket\nsocket.socket()\nprint('ok')"],
                           "tests": ONE}])[0]
            assert res["outcomes"] == [["runtime_error"], ["runtime_error"]]
    assert "landlock" in caplog.text


@pytest.mark.skipif(os.geteuid() != 0, reason="per-slot uids need root")
def test_children_hold_no_privilege(executor):
    probe = ("import os\nprint(os.getuid(), os.getgid())\n"
             "os.chown('.', 12345, 12345)\nprint('ok')")  # needs CAP_CHOWN
    res = executor.run([{"programs": [probe], "tests": ONE, "return_outputs": True}])[0]
    assert res["outcomes"] == [["runtime_error"]]
    uid = int(res["outputs"][0][0].split()[0]) if res["outputs"][0][0] else None
    if executor.isolation["layers"]["uid"][0]:
        assert uid is None or uid >= 61000


def test_work_dir_is_private_and_removed(executor):
    prog = ("import os\nopen('mine.txt', 'w').write('x')\nos.mkdir('sub')\n"
            "open('sub/deep.txt', 'w').write('y')\nprint(sorted(os.listdir('.')))")
    res = executor.run([{"programs": [prog] * 3, "tests": ONE * 3, "return_outputs": True}])[0]
    # every cell starts in an empty directory of its own
    assert {o for row in res["outputs"] for o in row} == {"['mine.txt', 'sub']\n"}
    if executor.isolation["launcher"] == "direct":
        for slot in executor.slots:
            # the program's, the test's and the compiles' work dirs, emptied after every cell
            left = sorted(p.name for p in Path(slot.cfg["workdir"]).rglob("*"))
            assert left == ["c", "p", "t"]


def test_a_dead_server_is_replaced(tmp_path):
    with Executor(slots=1, launcher="direct") as ex:
        pid = ex.server_pids()[0]
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        res = ex.run([{"programs": ["print(input())"], "tests": [{"input": "7", "output": "7"}] * 3}])
        assert res[0]["outcomes"] == [["ok"] * 3]
        assert ex.server_pids()[0] != pid


def test_close_leaves_no_process():
    ex = Executor(slots=2, launcher="auto")
    ex.run([{"programs": ["import numpy\nprint(1)", "print(1)"], "tests": ONE}])
    assert owned_processes(ex)  # servers, numpy sub-servers
    ex.close()
    deadline = time.time() + 5
    while owned_processes(ex) and time.time() < deadline:
        time.sleep(0.05)
    assert owned_processes(ex) == []


def test_numpy_programs_run_in_the_heavy_sub_server(executor):
    code = compile("import numpy as np\nprint(np.zeros(2).sum())", "m", "exec")
    assert server.uses_modules(code, {"numpy"})
    assert server.uses_modules(compile("__import__('numpy.linalg')", "m", "exec"), {"numpy"})
    assert not server.uses_modules(compile("import math\nnp = 1", "m", "exec"), {"numpy"})
    res = executor.run([{"programs": ["import numpy as np\nprint(np.arange(4).sum())"],
                         "tests": [{"input": "", "output": "6"}] * 3}])[0]
    assert res["outcomes"] == [["ok"] * 3]
    assert "numpy" in executor.isolation["preloaded"]


def test_seccomp_filter_shape():
    prog, arr, _, _ = seccomp.build_filter([41, 59], enosys=[435], check_clone=True)
    ins = [(arr[i].code, arr[i].jt, arr[i].jf, arr[i].k) for i in range(prog.len)]
    assert ins[1][3] == seccomp.AUDIT_ARCH_X86_64 and ins[2][3] == seccomp.SECCOMP_RET_KILL_PROCESS
    for i, (code, jt, jf, k) in enumerate(ins):  # every jump lands inside the program
        if code in (0x15, 0x35, 0x45):
            assert i + 1 + jt < len(ins) and i + 1 + jf < len(ins)


def test_docker_launcher_runs_a_job_where_an_engine_answers():
    from coevo_code.execution.launchers import DockerLauncher
    ok, why = DockerLauncher().available()
    if not ok:
        pytest.skip(f"docker launcher unavailable here: {why}")
    with Executor(slots=1, launcher="docker") as ex:
        res = ex.run([{"programs": ["print(input())", "import os\nos.fork()"],
                       "tests": [{"input": "7", "output": "7"}]}])[0]
        assert res["outcomes"] == [["ok"], ["runtime_error"]]
        assert ex.isolation["layers"]["container"][0]


def test_concurrent_runs_from_threads_do_not_mix(executor):
    import threading
    results = {}

    def go(k):
        job = {"id": k, "programs": [f"print(int(input()) + {k})"] * 3,
               "tests": [{"input": str(i), "output": str(i + k)} for i in range(6)]}
        results[k] = executor.run([job])[0]

    threads = [threading.Thread(target=go, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        assert results[k]["id"] == k and results[k]["passed"] == [[True] * 6] * 3


# Not under docker: these are about the host interpreter's path, and the container runs its own.
@pytest.mark.parametrize("launcher", launchers(docker=False))
def test_an_interpreter_under_tmp_runs_programs(launcher):
    """A virtual environment made under /tmp (as a CI clone there makes one): the bwrap launcher
    masks /tmp with a private tmpfs and must bind the interpreter back over it, not hide it."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        os.chmod(d, 0o755)
        venv = Path(d) / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        code = ("import json, sys\n"
                "from coevo_code.execution import Executor\n"
                f"with Executor(slots=1, launcher={launcher!r}) as ex:\n"
                "    [r] = ex.run([{'programs': ['print(int(input()) * 2)'],\n"
                "                   'tests': [{'input': '21', 'output': '42'}]}])\n"
                "print(json.dumps([sys.prefix, ex.isolation['launcher'], r['passed']]))\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        r = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                           text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        prefix, used, passed = json.loads(r.stdout.strip().splitlines()[-1])
        assert prefix == str(venv) and used == launcher and passed == [[True]]


def test_outcome_codes_inside_equal_the_hosts():
    from coevo_code.execution import OUTCOMES
    from coevo_code.sandbox import protocol
    assert protocol.OUTCOMES == OUTCOMES


def test_a_launcher_that_cannot_start_the_server_is_reported_with_the_fallback(monkeypatch):
    """auto picks bubblewrap where it works; if the server then does not start under it, the
    executor says why and falls back to the direct launcher instead of crashing."""
    from coevo_code.execution.launchers import BwrapLauncher
    monkeypatch.setattr(BwrapLauncher, "available", lambda self: (True, ""))
    monkeypatch.setattr(BwrapLauncher, "command", lambda self, cfg: ["/bin/false"])
    with Executor(slots=1, launcher="auto") as ex:
        assert ex.isolation["launcher"] == "direct"
        on, why = ex.isolation["layers"]["bubblewrap"]
        assert not on and "did not start under it" in why and "fell back" in why
        assert ex.run([{"programs": ["print(2)"], "tests": [{"input": "", "output": "2"}]}]
                      )[0]["passed"] == [[True]]


def test_seccomp_refuses_resource_calls_on_other_processes_and_memfds(executor):
    prog = ("import os, resource\nout = []\n"
            "for name, call in [('prlimit_parent', lambda: resource.prlimit(os.getppid(), resource.RLIMIT_CORE)),\n"
            "                   ('setpriority_parent', lambda: os.setpriority(os.PRIO_PROCESS, os.getppid(), 1)),\n"
            "                   ('affinity_parent', lambda: os.sched_setaffinity(os.getppid(), {0})),\n"
            "                   ('memfd', lambda: os.memfd_create('x')),\n"
            "                   ('prlimit_self', lambda: resource.prlimit(0, resource.RLIMIT_CORE)),\n"
            "                   ('setrlimit_self', lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))]:\n"
            "    try:\n        call()\n        out.append(name + '=ok')\n"
            "    except OSError as e:\n        out.append(name + '=' + str(e.errno))\n"
            "print(' '.join(out))")
    res = executor.run([{"programs": [prog], "tests": [{"input": "", "output": ""}],
                         "return_outputs": True}])[0]
    got = dict(x.split("=") for x in res["outputs"][0][0].split())
    if not executor.isolation["layers"]["seccomp"][0]:
        pytest.skip("seccomp is off here")
    assert got["prlimit_self"] == "ok" and got["setrlimit_self"] == "ok"
    for name in ("prlimit_parent", "setpriority_parent", "affinity_parent", "memfd"):
        assert got[name] == "1", (name, got)  # EPERM


@pytest.mark.parametrize("launcher", launchers(docker=False))  # the host interpreter's path
def test_an_interpreter_named_through_dot_dot_runs_programs(launcher, tmp_path):
    """``cd tests && ../.venv/bin/python ...``: the interpreter's path names directories that
    bubblewrap does not bind; the launcher runs it by its normalised path."""
    import subprocess
    import sys
    odd = os.path.relpath(sys.executable, tmp_path)  # ../../.. through a dir bwrap hides
    code = ("from coevo_code.execution import Executor\n"
            f"with Executor(slots=1, launcher={launcher!r}) as ex:\n"
            "    print(ex.run([{'programs': ['print(7)'], 'tests': [{'input': '', 'output': '7'}]}])"
            "[0]['passed'])\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([odd, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "[[True]]"
