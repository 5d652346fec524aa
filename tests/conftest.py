"""Shared fixtures: executors per launcher, a way to see every process an executor owns, and what
the hostile suites (Python and native) attack: a host process, a directory, a listening socket."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from coevo_code.execution import Executor
from coevo_code.execution.launchers import BwrapLauncher, DockerLauncher

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("COEVO_SHARED_DATA", REPO.parent / "shared" / "data"))


_DOCKER: tuple[bool, str] | None = None


def docker_available() -> tuple[bool, str]:
    """Whether the docker launcher can run here (an engine answers and the image exists; CI's
    ``.ci/docker.sh`` starts one and builds the image), and why not. Asked once per session."""
    global _DOCKER
    if _DOCKER is None:
        _DOCKER = DockerLauncher().available()
    return _DOCKER


_HOST_TOOLS: dict | None = None


def host_has_toolchain(lang: str) -> bool:
    """Whether this host has ``lang``'s toolchain on the judge's PATH (``native.find_tools``).
    Where it has, every launcher's sandbox must run the language: bwrap and direct use the
    host's, and ``coevo build-image`` puts it into the docker image."""
    global _HOST_TOOLS
    if _HOST_TOOLS is None:
        from coevo_code.sandbox.native import find_tools
        _HOST_TOOLS = find_tools()[0]
    return bool(_HOST_TOOLS.get(lang, (False,))[0])


def launchers(docker: bool = True) -> list:
    """bwrap where it works here (CI installs it), docker where an engine answers and the image
    is built (a slow test: left out of the fast tier), and always the direct launcher."""
    ok, why = BwrapLauncher().available()
    out = [pytest.param("bwrap", marks=pytest.mark.skipif(not ok, reason=f"bwrap: {why}")),
           "direct"]
    if docker:
        dok, dwhy = docker_available()
        # slow: a container per slot; the fast tier checks the sandbox through bwrap and direct
        out.append(pytest.param("docker", marks=[pytest.mark.slow, pytest.mark.skipif(
            not dok, reason=f"docker: {dwhy}")]))
    return out


def executor_fixture(docker: bool):
    """The ``executor`` fixture: one warm executor per launcher, per module. The sandbox suites
    (verdicts, hostile programs, isolation) take it with docker (``executor =
    executor_fixture(docker=True)``); other modules get this file's, without docker."""
    @pytest.fixture(scope="module", params=launchers(docker=docker), name="executor")
    def _executor(request):
        with Executor(slots=2, launcher=request.param) as ex:
            ex.run([{"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}])
            yield ex
    return _executor


executor = executor_fixture(docker=False)


def owned_processes(ex: Executor) -> list[tuple[int, int]]:
    """(pid, uid) of every live process carrying the executor's token in its command line:
    its servers and anything forked from them."""
    out = []
    token = ex.token.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            if token not in cmd:
                continue
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        state = fields.get("State", "?").split()[0]
        if state == "Z":
            continue
        out.append((int(entry), int(fields["Uid"].split()[0])))
    return sorted(out)


def server_count(ex: Executor) -> int:
    """How many processes an idle executor owns (bwrap wrappers, servers, sub-servers)."""
    return len(owned_processes(ex))


def need_data(path: Path) -> None:
    """Skip, with the reason, where the shared benchmark copies are absent."""
    if not path.exists():
        pytest.skip(f"{path} is absent: set COEVO_SHARED_DATA to the folder holding the "
                    "benchmark copies (see shared/data/README.md)")


@pytest.fixture(scope="module")
def canary():
    """A host process of this test's uid that no program may signal."""
    p = subprocess.Popen(["sleep", "600"])
    yield p
    p.kill()
    p.wait()


@pytest.fixture
def precious(tmp_path):
    """A directory outside the sandbox that no program may change."""
    d = tmp_path / "precious"
    d.mkdir()
    (d / "keep.txt").write_text("keep me")
    return d


@pytest.fixture
def listener():
    """A socket listening on 127.0.0.1 that no program may reach."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    yield s
    s.close()
