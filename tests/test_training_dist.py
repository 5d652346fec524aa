"""Two processes (``torchrun --nproc_per_node 2`` on CPU, gloo): the reward routing holds when
each process holds whole problems (scored locally) and when a problem is split between them
(gathered, scored once, sliced back); the weights equal a one-process run's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from coevo_code.execution import Executor
from coevo_code.training import train
from coevo_code.training.run import reward_options
from training_helpers import PLUMBING, bundled, expected_rewards, scripted_rollout, tiny_config

pytestmark = pytest.mark.slow  # two torchrun processes each

HERE = Path(__file__).resolve().parent


def _torchrun(out: Path, mode: str) -> list[dict]:
    torchrun = shutil.which("torchrun") or ""
    cmd = ([torchrun] if torchrun else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--standalone", "--nproc_per_node", "2", str(HERE / "dist_train_script.py"),
        str(out), mode]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.parametrize("mode, per_process", [("local", 16), ("gather", 12)])
def test_two_processes(tmp_path, mode, per_process):
    ranks = _torchrun(tmp_path / "dist", mode)
    assert [r["world"] for r in ranks] == [2, 2]
    assert [r["local_ok"] for r in ranks] == [mode == "local"] * 2
    assert [r["steps"] for r in ranks] == [2, 2]
    tasks = bundled(6)
    cfg = tiny_config(tmp_path / "x")  # the reward options (defaults) the runs used
    with Executor(slots=1) as ex:
        for c0, c1 in zip(ranks[0]["calls"], ranks[1]["calls"]):
            rows = [tuple(x) for x in c0[1] + c1[1]]
            assert len(c0[1]) == len(c1[1]) == per_process
            # the global batch: k code rows then k test rows per problem, groups intact
            for g in range(0, len(rows), 8):
                assert [r for _, r, _ in rows[g:g + 8]] == ["code"] * 4 + ["test"] * 4
                assert len({ti for ti, _, _ in rows[g:g + 8]}) == 1
            want = expected_rewards(tasks, rows, reward_options(cfg), ex)
            assert c0[2] + c1[2] == pytest.approx(want)
    # both processes log the same, exact metrics of the whole batch
    assert ranks[0]["metrics"] == ranks[1]["metrics"]
    lines = (tmp_path / "dist" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2]

    # the same run in one process: the same weights
    from transformers import AutoModelForCausalLM
    one = train(tiny_config(tmp_path / "one", max_steps=2,
                            problems_per_generation=4 if mode == "local" else 3,
                            per_device_train_batch_size=32 if mode == "local" else 24),
                PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    a = AutoModelForCausalLM.from_pretrained(one.final_dir)
    b = AutoModelForCausalLM.from_pretrained(tmp_path / "dist" / "final")
    init = AutoModelForCausalLM.from_pretrained(tmp_path / "dist" / "initial-model")
    moved = max((pb - pi).abs().max().item() for pb, pi in zip(b.parameters(), init.parameters()))
    diff = max((pa - pb).abs().max().item() for pa, pb in zip(a.parameters(), b.parameters()))
    assert moved > 1e-4 and diff < 1e-5, (moved, diff)


END_WORKER = """
import atexit, os, sys
import torch.distributed as dist
from coevo_code.training.run import end_worker
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
def record():
    with open(sys.argv[1], "w") as f:
        f.write(f"group alive at exit: {dist.is_initialized()}")
atexit.register(record)
sys.stdout.write("written, not flushed")
end_worker(3)
print(" and returned")
"""


@pytest.mark.parametrize("world_size", ["2", None])
def test_end_worker_leaves_a_torchrun_worker_with_its_code(tmp_path, world_size):
    """A worker (WORLD_SIZE > 1) leaves from end_worker with the code given, its group destroyed
    before the atexit functions run and its buffered output kept; a single process returns."""
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    if world_size:
        env["WORLD_SIZE"] = world_size
    marker = tmp_path / "atexit.txt"
    p = subprocess.run([sys.executable, "-c", END_WORKER, str(marker)], env=env,
                       capture_output=True, text=True, timeout=300)
    if world_size:
        assert (p.returncode, p.stdout) == (3, "written, not flushed"), p.stderr[-2000:]
        assert marker.read_text() == "group alive at exit: False"
    else:
        assert (p.returncode, p.stdout) == (0, "written, not flushed and returned\n"), p.stderr
        assert marker.read_text() == "group alive at exit: True"
