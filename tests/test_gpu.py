"""The GPU path (marker ``gpu``): run by ``scripts/gpu-check.sh`` on a machine with a CUDA device;
each test skips with the reason where torch sees none (here, CI).

- a CURE step in bf16 on CUDA (the plumbing model, scripted completions, the real sandbox);
- checkpoint on CUDA and resume from it;
- ``TesterReward`` with a tester generating on CUDA;
- the transformers engine on CUDA against CPU under greedy decoding, for the warm-started tiny
  models: the share of identical completions is asserted and written (``$COEVO_GPU_FIGURES``);
- a pair of agents (two processes) sharing one GPU.

``COEVO_GPU_TESTS_ON_CPU=1`` runs the same bodies on CPU in fp32 (CPU against CPU for the engine):
how the tests themselves are checked where no GPU is. It proves nothing about CUDA.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ON_CPU = os.environ.get("COEVO_GPU_TESTS_ON_CPU") == "1"
DEVICE = "cpu" if ON_CPU else "cuda"

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not ON_CPU and not torch.cuda.is_available(),
    reason="gpu: torch sees no CUDA device (scripts/gpu-check.sh runs these on a GPU machine)")]


def _device_fields() -> dict:
    """The config fields that put a run on the GPU in bf16 (the recipes' setting)."""
    if ON_CPU:
        return {"use_cpu": True, "bf16": False}
    return {"use_cpu": False, "bf16": True, "torch_threads": None}


def _figures(name: str, value) -> None:
    out = os.environ.get("COEVO_GPU_FIGURES")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.json").write_text(json.dumps(value, indent=1))


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _state(path: Path) -> dict:
    from safetensors.torch import load_file
    return load_file(str(path / "model.safetensors"))


def test_cure_step_in_bf16_on_cuda(tmp_path):
    """Two CURE steps of the plumbing model on the GPU under bf16 autocast: the model sits on the
    device, the rewards are the sandbox's (scripted completions: references, wrong programs,
    garbage), the loss is finite, and the weights moved."""
    from training_helpers import PLUMBING, bundled, scripted_rollout, tiny_config

    from coevo_code.training import train
    tasks = bundled(8)
    cfg = tiny_config(tmp_path / "run", max_steps=2, **_device_fields())
    res = train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    model = res.trainer.model
    assert next(model.parameters()).device.type == DEVICE
    assert res.trainer.accelerator.mixed_precision == ("no" if ON_CPU else "bf16")
    lines = _lines(tmp_path / "run" / "metrics.jsonl")
    assert [x["step"] for x in lines] == [1, 2]
    for x in lines:
        assert x["exec_cells"] > 0 and 0 < x["code_acc"] < 1
        assert x["loss"] is not None and math.isfinite(x["loss"]) and x["grad_norm"] > 0
    before, after = _state(tmp_path / "run" / "initial-model"), _state(res.final_dir)
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k].float(), after[k].float()) for k in before)


def test_checkpoint_on_cuda_and_resume(tmp_path):
    """A run checkpointed on the GPU at step 2 and resumed to step 3: every step logged once, the
    resume starts from checkpoint-2, and the checkpoint loads on the CPU (device-neutral)."""
    from training_helpers import PLUMBING, bundled, scripted_rollout, tiny_config
    from transformers import AutoModelForCausalLM

    from coevo_code.training import train
    tasks = bundled(8)
    out = tmp_path / "run"
    cfg = tiny_config(out, max_steps=2, save_strategy="steps", save_steps=2, **_device_fields())
    train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    ckpt = out / "checkpoint-2"
    assert (ckpt / "trainer_state.json").exists()
    cpu_model = AutoModelForCausalLM.from_pretrained(ckpt)
    assert next(cpu_model.parameters()).device.type == "cpu"
    cfg = tiny_config(out, max_steps=3, save_strategy="steps", save_steps=2, **_device_fields())
    res = train(cfg, PLUMBING, resume=True, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    assert res.resumed_from is not None and Path(res.resumed_from).name == "checkpoint-2"
    assert res.global_step == 3
    assert [x["step"] for x in _lines(out / "metrics.jsonl")] == [1, 2, 3]
    assert next(res.trainer.model.parameters()).device.type == DEVICE


def _world(split: str, n: int):
    from coevo_code.tasks import load_tasks
    return list(load_tasks("world", split=split))[:n]


def test_tester_reward_with_the_tester_on_cuda(tmp_path):
    """The warm-started tiny model writes tests on the GPU; each solution's reward is the share
    of those tests it passes: the references earn more than a program that returns nothing."""
    from coevo_code import TesterReward
    from coevo_code.generation.engines import Sampling, TransformersEngine
    from coevo_code.training.tester_reward import coder_rows
    from training_helpers import wrong_program

    tasks = _world("train", 8)
    engine = TransformersEngine("tiny", Sampling(temperature=1.0, max_tokens=64, seed=0),
                                device=DEVICE)
    assert next(engine.model.parameters()).device.type == DEVICE
    reward = TesterReward(tasks, engine, k_tests=4, cache_path=tmp_path / "tests.jsonl")
    try:
        rows = coder_rows(tasks)
        good = [f"```python\n{t.references[0]}\n```" for t in tasks]
        bad = [f"```python\n{wrong_program(t)}```" for t in tasks]
        r = reward(prompts=[x["prompt"] for x in rows] * 2, completions=good + bad,
                   task_id=[t.id for t in tasks] * 2)
    finally:
        reward.close()
    assert len(r) == 2 * len(tasks)
    assert sum(bool(reward.tests[t.id]) for t in tasks) >= len(tasks) // 2  # tests parsed
    scored = [(g, b) for g, b in zip(r[:len(tasks)], r[len(tasks):]) if g is not None]
    assert scored
    assert sum(g for g, _ in scored) > sum(b for _, b in scored)
    assert (tmp_path / "tests.jsonl").read_text().count("\n") == len(tasks)


@pytest.mark.parametrize("name", ["tiny", "tiny-llama"])
def test_engine_greedy_on_cuda_against_cpu(name):
    """Greedy completions of a warm-started tiny model on the GPU (fp32) and on the CPU, for
    coder and tester prompts of 8 held-out problems: the share that are identical, written to
    the figures; at least 90% must be (a near-tie can flip a token where the sums' order differs)."""
    from coevo_code.generation.engines import Sampling, TransformersEngine
    from coevo_code.roles import coder_messages, tester_messages

    tasks = _world("heldout", 8)
    convs = [coder_messages(t) for t in tasks] + [tester_messages(t) for t in tasks]
    sampling = Sampling(temperature=0.0, max_tokens=64, seed=0)
    cpu = TransformersEngine(name, sampling, device="cpu").generate(convs, 1)
    gpu_engine = TransformersEngine(name, sampling, device=DEVICE)
    assert next(gpu_engine.model.parameters()).device.type == DEVICE
    gpu = gpu_engine.generate(convs, 1)
    pairs = [(a[0], b[0]) for a, b in zip(cpu, gpu)]
    same = sum(a == b for a, b in pairs)
    differ = [next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
              for a, b in pairs if a != b]
    figures = {}
    path = Path(os.environ.get("COEVO_GPU_FIGURES", "/nonexistent")) / "engine_cpu_vs_cuda.json"
    if path.exists():
        figures = json.loads(path.read_text())
    figures[name] = {"completions": len(pairs), "identical": same,
                     "first_difference_at_char": differ, "device": DEVICE}
    _figures("engine_cpu_vs_cuda", figures)
    assert all(a.strip() for a, _ in pairs[:len(tasks)])  # the warm start writes something
    assert same >= 0.9 * len(pairs), f"{name}: {same}/{len(pairs)} identical, differing at {differ}"


def _gpu_pids() -> set[int]:
    """Processes holding a context on GPU 0, as NVML lists them."""
    out = torch.cuda.list_gpu_processes(0)
    return {int(x.split()[1]) for x in out.splitlines() if x.strip().startswith("process")}


def test_a_pair_of_agents_shares_one_gpu(tmp_path):
    """The cross-family pair of random tiny models, both agents on GPU 0 (each its own process,
    the exchange between them over TCP): both finish every step, and NVML lists both agent
    processes on the device while they run."""
    import yaml
    cfg = yaml.safe_load((ROOT / "configs" / "pair-tiny-random-cpu.yaml").read_text())
    cfg.update(max_steps=3, save_steps=3, **{k: v for k, v in _device_fields().items()
                                              if v is not None})
    for agent in cfg["agents"]:
        agent["launch"] = {"devices": "0"} if not ON_CPU else {}
    path = tmp_path / "pair.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run = tmp_path / "pair"
    env = dict(os.environ, OMP_NUM_THREADS="1", TRL_EXPERIMENTAL_SILENCE="1")
    p = subprocess.Popen([sys.executable, "-m", "coevo_code.cli", "train", "--config", str(path),
                          "--output_dir", str(run)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    seen, agents = set(), {}
    deadline = time.time() + 600
    while p.poll() is None and time.time() < deadline:
        pidfile = run / "launcher.pid"
        if not agents and pidfile.exists():
            lines = pidfile.read_text().split("\n")[1:]
            agents = {n: int(x) for n, x in (line.split() for line in lines if line.strip())}
        if not ON_CPU:
            seen |= _gpu_pids()
        time.sleep(0.2)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err[-3000:]
    for name in ("qwen", "llama"):
        assert [x["step"] for x in _lines(run / name / "metrics.jsonl")] == [1, 2, 3], name
        resolved = json.loads((run / name / "resolved_config.json").read_text())
        assert resolved["use_cpu"] is ON_CPU
    if not ON_CPU:
        assert set(agents) == {"qwen", "llama"}
        assert set(agents.values()) <= seen, f"agents {agents}, on the GPU: {sorted(seen)}"
