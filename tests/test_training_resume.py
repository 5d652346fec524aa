"""Kill a run with SIGKILL between steps, resume it: every step logged exactly once, a
half-written checkpoint skipped, and the final weights equal an uninterrupted run's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")

from coevo_code.training.rundir import checkpoint_step, last_complete_checkpoint, truncate_jsonl

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}


def _run(out: Path, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(HERE / "resume_script.py"), str(out), *extra],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _steps(out: Path) -> list[int]:
    path = out / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(x)["step"] for x in path.read_text().splitlines() if x.strip()]


def _weights(path: Path):
    from transformers import AutoModelForCausalLM
    return list(AutoModelForCausalLM.from_pretrained(path).parameters())


@pytest.mark.slow
def test_kill_and_resume(tmp_path):
    full = _run(tmp_path / "full")
    _, err = full.communicate(timeout=600)
    assert full.returncode == 0, err[-2000:]
    assert _steps(tmp_path / "full") == [1, 2, 3, 4, 5, 6]

    out = tmp_path / "killed"
    p = _run(out)
    deadline = time.time() + 300
    while len(_steps(out)) < 3 and p.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert p.poll() is None, "the run ended before it could be killed"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    ckpt, _ = last_complete_checkpoint(out)
    assert ckpt is not None
    step = checkpoint_step(ckpt)
    assert 2 <= step < 6
    # a checkpoint half-written at the kill: no trainer_state.json
    half = out / f"checkpoint-{step + 1}"
    half.mkdir(exist_ok=True)
    (half / "model.safetensors").write_bytes(b"\0" * 100)
    (half / "trainer_state.json").unlink(missing_ok=True)

    r = _run(out, "--resume")
    _, err = r.communicate(timeout=600)
    assert r.returncode == 0, err[-2000:]
    assert "half-written" in err
    assert _steps(out) == [1, 2, 3, 4, 5, 6]
    assert (out / f"incomplete-checkpoint-{step + 1}").is_dir()
    a, b = _weights(tmp_path / "full" / "final"), _weights(out / "final")
    init = _weights(out / "initial-model")
    assert max((x - y).abs().max().item() for x, y in zip(a, init)) > 1e-4  # it did learn
    diff = max((x - y).abs().max().item() for x, y in zip(a, b))
    assert diff < 1e-6, diff
    # and the metrics of the resumed steps match the uninterrupted run's
    ma = [json.loads(x) for x in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    mb = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    for x, y in zip(ma, mb):
        assert x["reward_code_mean"] == y["reward_code_mean"]
        assert x["loss"] == pytest.approx(y["loss"], abs=1e-6)


def test_truncate_drops_lines_after_the_checkpoint_and_a_torn_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, 6)) + '{"step": 6, "co')
    assert truncate_jsonl(path, 3) == 3
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [1, 2, 3]


def test_checkpoint_is_complete_only_with_its_trainer_state(tmp_path):
    good = tmp_path / "checkpoint-4"
    good.mkdir()
    (good / "trainer_state.json").write_text(json.dumps({"global_step": 4}))
    torn = tmp_path / "checkpoint-5"
    torn.mkdir()
    (torn / "trainer_state.json").write_text('{"global_st')
    wrong = tmp_path / "checkpoint-6"
    wrong.mkdir()
    (wrong / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    ckpt, later = last_complete_checkpoint(tmp_path)
    assert ckpt == good and later == [torn, wrong]
