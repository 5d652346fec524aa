"""The trainers' own client code against ``coevo serve`` under load, over real HTTP on 127.0.0.1:
veRL 0.9.1's SandboxFusion reward helper and OpenRLHF 0.11.2's single-turn agent executor
(``pip install --no-deps verl==0.9.1 openrlhf==0.11.2``: their reward code needs only requests
and aiohttp; .ci/run installs them so), with the small limits under which the server used to
answer 429 (which veRL scored as failed tests and OpenRLHF turned into ``None``): 128 requests,
64 at once, one slot, 8 requests queued, 4 reward requests scored at once. Every reward must be
the right one, none an error."""

from __future__ import annotations

import httpx
import pytest

from coevo_code.serve import trainer_clients
from coevo_code.serve.process import ServeProcess

LIMITS = ["--max_pending_rewards", "4", "--queue_requests", "8", "--exec_slots", "1"]


@pytest.fixture(scope="module")
def server():
    with ServeProcess(LIMITS) as s:
        yield s


def _waited(server) -> float:
    for line in httpx.get(server.url + "/metrics").text.splitlines():
        if line.startswith("coevo_serve_waited_requests "):
            return float(line.split()[-1])
    raise AssertionError("no coevo_serve_waited_requests")


def _summary(out: dict) -> dict:
    return {k: v for k, v in out.items() if k not in ("scores", "rewards", "right")}


@pytest.mark.timeout(300)
def test_verl_sandbox_fusion_rewards_are_right_under_load(server):
    if trainer_clients.load_verl_sandbox_fusion() is None:
        pytest.skip("veRL is not installed (pip install --no-deps verl==0.9.1)")
    waited = _waited(server)
    out = trainer_clients.drive_verl(server.url + "/run_code", completions=32, tests=4,
                                     concurrency=64)
    print(_summary(out))
    assert out["requests"] == 128
    assert out["errors"] == 0 and out["wrong"] == 0, _summary(out)
    assert out["scores"] == out["right"]
    assert _waited(server) > waited + 8     # the load did exceed the limits: requests waited


@pytest.mark.timeout(300)
def test_openrlhf_agent_rewards_are_right_under_load(server):
    if trainer_clients.load_openrlhf_agent() is None:
        pytest.skip("OpenRLHF is not installed (pip install --no-deps openrlhf==0.11.2)")
    waited = _waited(server)
    out = trainer_clients.drive_openrlhf(server.url + "/reward", samples=128, concurrency=64)
    print(_summary(out))
    assert out["requests"] == 128
    assert out["errors"] == 0 and out["wrong"] == 0, _summary(out)
    assert out["rewards"] == out["right"] and None not in out["rewards"]
    assert _waited(server) > waited + 8
