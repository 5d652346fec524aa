"""Hostile programs, each in its own test, under every launcher available here.

Every program prints ``pwned`` only once its aim is reached, and the expected output is ``pwned``:
so an ``ok`` verdict would mean the attack worked. Each test also checks the aim directly (the
directory still exists, no connection arrived, no host data came back, the servers are the same
processes), that no process of the job is left, and that the next job runs normally.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import REPO, executor_fixture, owned_processes

executor = executor_fixture(docker=True)  # every launcher here, the container too

SECRET = "coevo-test-secret-7d1f"
os.environ["COEVO_TEST_SECRET"] = SECRET  # set before any executor starts (import time)

PASSWD = Path("/etc/passwd").read_text() if Path("/etc/passwd").exists() else "root:x:0:0"

# name: (program, expected outcome). {dir} is a directory outside the sandbox holding a file;
# {port} a TCP listener of this test on 127.0.0.1; {repo} this project's source tree.
HOSTILE = {
    "infinite_loop": ("while True:\n    pass", "timeout"),
    "fork_bomb": ("import os\nwhile True:\n    os.fork()\nprint('pwned')", "runtime_error"),
    "alloc_2gb": ("x = bytearray(2 * 1024 ** 3)\nprint('pwned')", "memory_limit"),
    "output_200mb": ("import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(200):\n"
                     "    sys.stdout.write(chunk)\nprint('pwned')", "output_limit"),
    "rm_rf_os_system": ("import os\nassert os.system('rm -rf {dir}') == 0\n"
                        "assert not os.path.exists('{dir}')\nprint('pwned')", "runtime_error"),
    "rmtree": ("import shutil\nshutil.rmtree('{dir}')\nprint('pwned')", "runtime_error"),
    "subprocess_rm": ("import subprocess\nsubprocess.run(['rm', '-rf', '{dir}'], check=True)\n"
                      "print('pwned')", "runtime_error"),
    "tcp_connect": ("import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
                    "s.sendall(b'pwned')\nprint('pwned')", "runtime_error"),
    "read_passwd": ("print(open('/etc/passwd').read())\nprint('pwned')", "runtime_error"),
    "read_project_source": ("print(open('{repo}/pyproject.toml').read())\nprint('pwned')",
                            "runtime_error"),
    "list_home": ("import os\nprint(os.listdir(os.path.expanduser('~')))\nprint(os.listdir('/root'))\n"
                  "print('pwned')", "runtime_error"),
    "write_outside_workdir": ("open('{dir}/evil.txt', 'w').write('x')\nprint('pwned')",
                              "runtime_error"),
    "write_tmp": ("open('/tmp/coevo-evil.txt', 'w').write('x')\nprint('pwned')", "runtime_error"),
    "host_environment": ("import os\nprint(dict(os.environ))\n"
                         "assert 'COEVO_TEST_SECRET' in os.environ\nprint('pwned')",
                         "runtime_error"),
    "ignore_sigterm": ("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                       "while True:\n    pass", "timeout"),
    "setsid_grandchild": ("import os, time\nif os.fork() == 0:\n    os.setsid()\n"
                          "    if os.fork() == 0:\n        time.sleep(1000)\n    os._exit(0)\n"
                          "print('pwned')", "runtime_error"),
    "kill_parent": ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('pwned')",
                    "runtime_error"),
    # kill(-1) returns 0 even when every signal was refused (Linux counts EPERM targets as
    # tried), so this program always "believes" it won: what matters is that the servers and
    # the canary below are still alive, which every test checks.
    "kill_everything": ("import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('pwned')", "ok"),
    "leave_process_group": ("import os\nos.setpgid(0, 0)\nos.setsid()\nprint('pwned')",
                            "runtime_error"),
    # 400 threads hashing outside the GIL: every thread's CPU time counts against the cell's
    # limit; that the other slots' cells stay on time meanwhile is test_slot_isolation.py's
    "thread_flood": ("import hashlib, threading\nthreading.stack_size(1 << 16)\n"
                     "buf = b'x' * (1 << 24)\ndef spin():\n    while True:\n"
                     "        hashlib.sha256(buf).digest()\n"
                     "for _ in range(400):\n    threading.Thread(target=spin, daemon=True).start()\n"
                     "threading.Event().wait()\nprint('pwned')", "timeout"),
    "ptrace_parent": ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                      "assert libc.ptrace(16, os.getppid(), 0, 0) == 0\nprint('pwned')",
                      "runtime_error"),
}

# Closing stdout after a correct answer is not an attack: it must pass.
BENIGN = {
    "close_stdout_after_answer": "print('pwned')\nimport sys\nsys.stdout.close()",
    "os_close_1_after_answer": "import os, sys\nprint('pwned')\nsys.stdout.flush()\nos.close(1)",
}


def _assert_no_connection(listener):
    with pytest.raises(BlockingIOError):
        conn, _ = listener.accept()
        conn.close()


def _assert_next_job_normal(ex):
    res = ex.run([{"programs": ["a, b = map(int, input().split())\nprint(a + b)"],
                   "tests": [{"input": "2 3\n", "output": "5\n"}]}])[0]
    assert res["outcomes"] == [["ok"]]


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_program_is_contained(executor, name, precious, listener, canary):
    template, expected = HOSTILE[name]
    program = template.format(dir=precious, port=listener.getsockname()[1], repo=REPO)
    servers_before = executor.server_pids()
    procs_before = owned_processes(executor)
    res = executor.run([{"id": name, "programs": [program],
                         "tests": [{"input": "", "output": "pwned\n"}],
                         "return_outputs": True}])[0]
    assert res["outcomes"] == [[expected]], f"{name}: {res['outcomes']}"
    assert canary.poll() is None, "a host process was killed"
    # the aim was not reached
    assert precious.is_dir() and (precious / "keep.txt").read_text() == "keep me"
    assert not (precious / "evil.txt").exists()
    assert not Path("/tmp/coevo-evil.txt").exists()
    _assert_no_connection(listener)
    out = res["outputs"][0][0]
    assert "root:x:0:0" not in out and PASSWD[:40] not in out
    assert SECRET not in out
    assert "coevo-code" not in out  # pyproject.toml's content
    assert executor.server_pids() == servers_before, "a server died"
    # nothing of the job is left: the same processes as before, and none under a slot uid
    assert owned_processes(executor) == procs_before
    _assert_next_job_normal(executor)


@pytest.mark.parametrize("name", list(BENIGN))
def test_closing_stdout_after_answer_passes(executor, name):
    res = executor.run([{"programs": [BENIGN[name]],
                         "tests": [{"input": "", "output": "pwned\n"}]}])[0]
    assert res["outcomes"] == [["ok"]]


def test_hostile_functional_program_cannot_fake_a_pass(executor):
    """Exiting with status 0 before the test runs must not count as passing it."""
    progs = ["import os\nos._exit(0)", "import sys\nsys.exit(0)", "exit()", "raise SystemExit"]
    res = executor.run([{"kind": "functional", "programs": progs,
                         "tests": [{"code": "assert False"}]}])[0]
    assert res["passed"] == [[False]] * 4
    assert all(o[0] == "runtime_error" for o in res["outcomes"])


def test_program_cannot_change_test_input_for_others(executor):
    """stdin is a sealed memfd shared by the cells of a test: writing to it must fail."""
    writer = "import os\ntry:\n    os.write(0, b'999')\nexcept OSError:\n    pass\nprint(input())"
    res = executor.run([{"programs": [writer] + ["print(input())"] * 3,
                         "tests": [{"input": "7\n", "output": "7\n"}] * 2}])[0]
    assert res["outcomes"] == [["ok", "ok"]] * 4


def test_without_isolation_the_same_attacks_succeed(tmp_path, listener):
    """The checks above can fail: with every layer off, these attacks reach their aims."""
    from coevo_code.execution import Executor, IsolationError

    with pytest.raises(IsolationError, match="allow_unsafe"):
        Executor(slots=1, launcher="direct", disable=("seccomp", "landlock"), use_uid=False)
    d = tmp_path / "victim"
    d.mkdir()
    port = listener.getsockname()[1]
    progs = [HOSTILE["rmtree"][0].format(dir=d),
             HOSTILE["tcp_connect"][0].format(port=port),
             HOSTILE["read_passwd"][0]]
    with Executor(slots=1, launcher="direct", disable=("seccomp", "landlock"), use_uid=False,
                  allow_unsafe=True) as ex:
        res = ex.run([{"programs": progs, "tests": [{"input": "", "output": ""}],
                       "return_outputs": True}])[0]
    assert not d.exists()
    conn, _ = listener.accept()  # a connection arrived
    conn.close()
    assert "root:" in res["outputs"][2][0]
