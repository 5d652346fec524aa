"""The docker launcher against a real engine: the image (``coevo build-image``, built by CI's
``.ci/docker.sh``), verdicts equal to the direct launcher's, an image without toolchains that
refuses C++ and Java in one line, and containers that go away.

Skipped, with the reason, where no engine answers or the image is absent. The verdict, hostile,
isolation, reward-hack and native (C++ and Java) suites also run under docker there
(``conftest.launchers``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from coevo_code.execution import Executor
from coevo_code.execution.image import DEFAULT_TAG, build_image, image_info, max_image_mb
from coevo_code.execution.launchers import DockerLauncher
from conftest import docker_available, host_has_toolchain, owned_processes
from test_verdicts import A_PLUS_B, CHECKER, CORRECT, FAILING

ok, why = docker_available()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not ok, reason=f"docker: {why}")]  # containers


def _containers(token: str) -> list:
    import docker
    client = docker.from_env(timeout=30)
    # sparse: the list call alone, no inspect per container, which races the removal it watches
    # for (a container listed, then removed before its inspect, raised NotFound in CI)
    return client.containers.list(all=True, sparse=True,
                                  filters={"label": f"coevo.sandbox={token}"})


@pytest.fixture(scope="module")
def docker_ex():
    with Executor(slots=2, launcher="docker") as ex:
        yield ex


def test_the_image_is_small_and_holds_python_numpy_and_the_toolchains_but_no_coevo_code(
        docker_ex):
    info = image_info(DEFAULT_TAG)
    assert info is not None
    languages = info["labels"].get("coevo.languages", "python").split(",")
    assert info["size"] <= max_image_mb(languages) * 1e6, f"{info['size'] / 1e6:.1f} MB"
    assert info["labels"].get("coevo.python") == "/usr/local/bin/python3"
    # built on this host, it holds every toolchain the host has, and its judges find them
    for lang in ("cpp", "java"):
        assert (lang in languages) == host_has_toolchain(lang), (lang, languages)
        assert docker_ex.languages()[lang][0] == (lang in languages), docker_ex.languages()
    probe = ("import importlib.util, os, sys, numpy\n"
             "print(sys.executable, numpy.__version__, int(numpy.arange(5).sum()),"
             " importlib.util.find_spec('coevo_code') is None, os.path.exists('/bin/sh'))")
    res = docker_ex.run([{"programs": [probe], "tests": [{"input": "", "output": ""}],
                          "return_outputs": True}])[0]
    exe, version, total, no_coevo, shell = res["outputs"][0][0].split()
    assert exe == "/usr/local/bin/python3"
    assert version.split(".")[0].isdigit() and total == "10"
    assert no_coevo == "True"  # the sandbox modules come on the judge's command line only
    assert shell == "False"  # the toolchains came without a shell


def test_an_image_without_toolchains_refuses_cpp_and_java_in_one_line():
    """``coevo build-image --languages python``: the judges find no compiler, say so, and a C++
    or Java job gets its one-line error instead of a matrix."""
    tag = "coevo-sandbox:test-no-toolchains"
    out = build_image(tag, languages="python", force=True, log=lambda *a: None)
    try:
        assert out["languages"] == ["python"]
        assert image_info(tag)["labels"]["coevo.languages"] == "python"
        with Executor(slots=1, launcher=DockerLauncher(image=tag)) as ex:
            langs = ex.languages()
            assert not langs["cpp"][0] and "g++ not found on /usr/local/bin" in langs["cpp"][1]
            assert not langs["java"][0] and "javac, java not found" in langs["java"][1]
            res = ex.run([{"id": lang, "language": lang, "programs": ["x"],
                           "tests": [{"input": "", "output": ""}]} for lang in ("cpp", "java")])
            ok = ex.run([{"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}])
    finally:
        import docker
        docker.from_env(timeout=60).images.remove(tag, force=True)
    for r, lang in zip(res, ("cpp", "java")):
        assert "outcomes" not in r and "\n" not in r["error"], r
        assert r["error"].startswith(f"'language' {lang!r} cannot run in this sandbox: "), r
    assert ok[0]["outcomes"] == [["ok"]]


def _verdict_workload() -> list[dict]:
    """test_verdicts' programs and jobs, as one batch: stdio, functional, checker."""
    stdio = {"id": "stdio", "programs": list(CORRECT.values()) + [p for p, _ in FAILING.values()],
             "tests": A_PLUS_B}
    functional = {"id": "functional", "kind": "functional", "entry_point": "add",
                  "setup": "import math\nOFFSET = 0",
                  "programs": ["def add(a, b):\n    return a + b + OFFSET",
                               "def add(a, b):\n    return a * b",
                               "def add(a, b):\n    raise ValueError('no')",
                               "def add(a, b):\n    return a + b\nprint('noise')",
                               "x = (", "", "import os\nos._exit(0)",
                               "import numpy as np\ndef add(a, b):\n    return int(np.add(a, b))"],
                  "tests": [{"code": "assert add(1, 2) == 3"}, {"code": "assert add(2, 2) == 4"},
                            {"code": "assert math.isclose(add(0.1, 0.2), 0.3)"},
                            {"code": "assert add(2, 2) == 4, 'in a test process'"},
                            {"code": "add(5, 6)"}],
                  "return_outputs": True}
    checker = {"id": "checker", "programs": ["n = int(input())\nprint(0, n)",
                                             "n = int(input())\nprint(n, 1)", "print('x y')"],
               "tests": [{"input": "5\n", "output": "2 3\n"}], "checker": CHECKER}
    limits = {"id": "limits", "programs": ["x = bytearray(200 * 1024 * 1024)\nprint(1)",
                                           "print('x' * 3_000_000)\nprint(1)",
                                           "while True:\n    pass"],
              "tests": [{"input": "", "output": "1"}], "memory_limit_mb": 64,
              "output_limit_mb": 1, "time_limit_s": 0.3}
    return [stdio, functional, checker, limits]


def test_docker_gives_the_direct_launchers_matrices_cell_for_cell(docker_ex):
    jobs = _verdict_workload()
    with Executor(slots=2, launcher="direct") as direct:
        want = direct.run(jobs)
    got = docker_ex.run(jobs)
    for w, g in zip(want, got):
        assert g["id"] == w["id"]
        assert g["outcomes"] == w["outcomes"], g["id"]
        assert g["passed"] == w["passed"], g["id"]
        if "outputs" in w:
            assert g["outputs"] == w["outputs"], g["id"]
    # and the workload is not trivial: both verdicts of every kind are there
    seen = {o for r in got for row in r["outcomes"] for o in row}
    assert {"ok", "wrong_answer", "runtime_error", "syntax_error", "timeout", "memory_limit",
            "output_limit"} <= seen


def test_the_isolation_report_names_the_container_and_every_server_layer(docker_ex):
    layers = docker_ex.isolation["layers"]
    assert docker_ex.isolation["launcher"] == "docker"
    assert layers["container"][0] and "--network none" in layers["container"][1]
    assert layers["disk"][0]
    # the judge is root inside its container, whoever runs the host side: slot uids always
    assert layers["uid"][0], layers["uid"]
    assert layers["seccomp"][0], layers["seccomp"]
    # the servers are host processes of their own (the containers' first processes)
    assert all(p > 0 for p in docker_ex.server_pids())


def test_close_removes_the_containers_and_their_processes():
    ex = Executor(slots=2, launcher="docker")
    ex.run([{"programs": ["import numpy\nprint(1)", "print(1)"],
             "tests": [{"input": "", "output": "1"}]}])
    assert len(_containers(ex.token)) == 2
    assert owned_processes(ex)  # judges, zygotes: seen from the host
    ex.close()
    deadline = time.time() + 10
    while (owned_processes(ex) or _containers(ex.token)) and time.time() < deadline:
        time.sleep(0.1)
    assert owned_processes(ex) == []
    assert _containers(ex.token) == []


def test_a_host_that_dies_leaves_no_container():
    """The judge's stdin closes when the host's attachment goes (StdinOnce): it exits, and the
    engine removes its container (auto_remove), though nobody called close()."""
    code = ("import os, sys\nfrom coevo_code.execution import Executor\n"
            "ex = Executor(slots=1, launcher='docker')\n"
            "print(ex.token, flush=True)\nos._exit(0)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    token = r.stdout.strip().splitlines()[-1]
    deadline = time.time() + 20
    while _containers(token) and time.time() < deadline:
        time.sleep(0.2)
    assert _containers(token) == []


def test_a_killed_container_is_replaced_and_its_unit_retried(docker_ex):
    import docker
    victim = docker_ex.slots[0].channel
    docker.from_env(timeout=30).api.kill(victim.cid)
    time.sleep(0.3)
    res = docker_ex.run([{"programs": ["print(int(input()) * 2)"] * 2,
                          "tests": [{"input": "4", "output": "8"}] * 4}])[0]
    assert res["outcomes"] == [["ok"] * 4] * 2
    assert docker_ex.slots[0].channel is not victim
