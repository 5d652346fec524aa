"""Verdicts do not depend on machine load: the same job, idle and with both cores kept busy."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROGRAMS = [
    "a, b = map(int, input().split())\nprint(a + b)",                        # fast, right
    "a, b = map(int, input().split())\nprint(a - b)",                        # fast, wrong
    "import time\ntime.sleep(1.5)\nprint(sum(map(int, input().split())))",  # sleeps 1.5 s
    # ~0.3 s of CPU: well inside 1 s, however slow the wall clock runs
    "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass\n"
    "print(sum(map(int, input().split())))",
    # ~1.6 s of CPU: over the limit, whatever the load
    "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.6:\n    pass\n"
    "print(sum(map(int, input().split())))",
    "while True:\n    pass",
]
TESTS = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}]
EXPECTED = [["ok", "ok"], ["wrong_answer", "wrong_answer"], ["ok", "ok"], ["ok", "ok"],
            ["timeout", "timeout"], ["timeout", "timeout"]]


@pytest.fixture
def hogs():
    """Two busy loops: both cores of a 2-core machine kept busy."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


@pytest.mark.slow
def test_same_matrix_idle_and_under_load(executor, hogs):
    job = {"id": "load", "programs": PROGRAMS, "tests": TESTS}
    for p in hogs:  # measure idle first
        p.send_signal(19)  # SIGSTOP
    idle = executor.run([job])[0]
    for p in hogs:
        p.send_signal(18)  # SIGCONT
    busy = executor.run([job])[0]
    assert idle["outcomes"] == EXPECTED
    assert busy["outcomes"] == idle["outcomes"]
    assert all(p.poll() is None for p in hogs)  # the load really ran throughout
