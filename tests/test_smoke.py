"""``coevo train --smoke``: the table that shrinks a GPU recipe to run here (training/smoke.py),
checked on the recipes' values without training (tests/test_recipes.py runs them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from coevo_code.training import smoke

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
# the recipes that target GPUs (tests/test_recipes.py runs each): every config not set to CPU
GPU_RECIPES = {"cure-qwen2.5-7b": 2, "cure-qwen3-4b-long-cot": 2, "lora-one-gpu": 1,
               "pair-qwen2.5-3b-llama3.2-3b": 1, "ttrl-qwen2.5-coder-1.5b-mbpp": 1}


def recipe(name: str) -> dict:
    return yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())


def test_every_gpu_recipe_is_rehearsed():
    gpu = {p.stem for p in CONFIGS.glob("*.yaml") if not yaml.safe_load(p.read_text()).get(
        "use_cpu")}
    assert gpu == set(GPU_RECIPES)


@pytest.mark.parametrize("name", [n for n in GPU_RECIPES if not n.startswith("pair-")])
@pytest.mark.parametrize("processes", [1, 2, 3])
def test_smoke_replaces_only_what_cannot_run_here(name, processes):
    r = recipe(name)
    s = smoke.apply(r, processes)
    assert s["model_name_or_path"] == "tiny" and s["dtype"] == "float32" and s["bf16"] is False
    assert s["use_cpu"] is True and s["max_steps"] == 2 and s["report_to"] == "none"
    assert s["tasks"] == "world" and s["tasks_split"] == "train"
    if r.get("eval_tasks"):
        assert (s["eval_tasks"], s["eval_tasks_split"], s["eval_tasks_limit"]) == (
            "world", "heldout", 2)
    # the batch rules of training/config.py: whole problems (2k rows) on every process, the
    # generation batch one optimiser step
    k, problems = s["num_generations"], s["problems_per_generation"]
    rows = problems * 2 * k
    assert s["per_device_train_batch_size"] * processes == rows
    assert s["per_device_train_batch_size"] % (2 * k) == 0 and s["gradient_accumulation_steps"] == 1
    if "per_device_eval_batch_size" in s:
        assert s["per_device_eval_batch_size"] % (2 * s["num_generations_eval"]) == 0
    touched = {f for o in smoke.SMOKE for f in o.fields}
    # everything else is the recipe's: vLLM, LoRA, the loss, beta, the rewards...
    assert {f: v for f, v in r.items() if f not in touched} == {
        f: v for f, v in s.items() if f not in touched}
    for f in ("use_vllm", "vllm_mode", "loss_type", "beta", "length_shaping", "label_source",
              "use_peft", "lora_r", "lora_target_modules", "post_stage", "temperature"):
        assert s.get(f) == r.get(f)
    if r.get("length_shaping"):
        assert s["min_len"] < s["max_len"] <= s["max_completion_length"]


def test_smoke_keeps_a_dataset_whose_file_is_given_and_what_runs_here():
    r = recipe("ttrl-qwen2.5-coder-1.5b-mbpp")
    s = smoke.apply(r, 1, given={"tasks_path"})
    assert (s["tasks"], s["tasks_split"]) == ("mbpp", "test")  # read from the given file
    assert (s["eval_tasks"], s["eval_tasks_split"]) == ("world", "heldout")
    cpu = recipe("pair-tiny-cpu")
    s = smoke.apply_pair(cpu)
    assert s["tasks"] == "world" and s["eval_tasks_split"] == "heldout"
    assert [a["model_name_or_path"] for a in s["agents"]] == ["tiny", "tiny-llama"]


def test_smoke_pair_agents():
    r = recipe("pair-qwen2.5-3b-llama3.2-3b")
    s = smoke.apply_pair(r)
    assert [(a["name"], a["model_name_or_path"], a["launch"]) for a in s["agents"]] == [
        ("qwen", "tiny", {"num_processes": 1}), ("llama", "tiny-llama", {"num_processes": 1})]
    assert "model_name_or_path" not in s  # each agent names its own
    assert (s["tasks"], s["eval_tasks"], s["label_source"], s["curriculum"]) == (
        "world", "world", "partner", True)
    assert s["per_device_train_batch_size"] == 2 * s["num_generations"] * s[
        "problems_per_generation"]
    # an agent's own field in the table is shrunk too; its others stay
    r["agents"][1].update(per_device_train_batch_size=64, learning_rate=5e-4)
    a = smoke.apply_pair(r)["agents"][1]
    assert a["per_device_train_batch_size"] == 16 and a["learning_rate"] == 5e-4


def test_smoke_through_the_parser_command_line_wins(tmp_path):
    pytest.importorskip("trl")
    from coevo_code.training.cli import parse_train_args
    a = parse_train_args(["--config", str(CONFIGS / "lora-one-gpu.yaml"), "--output_dir",
                          str(tmp_path / "run"), "--max_completion_length", "48"], smoke=True)
    c, m = a.config, a.model
    assert (m.model_name_or_path, m.dtype, c.bf16, c.use_cpu) == ("tiny", "float32", False, True)
    assert (m.use_peft, m.lora_r, c.use_vllm, c.vllm_mode) == (True, 64, True, "colocate")
    assert c.max_completion_length == 48 and c.max_steps == 2  # the command line over the table
    assert (c.generation_batch_size, c.per_device_train_batch_size, c.steps_per_generation) == (
        16, 16, 1)
    # config.yaml (what --resume reads) records the shrunk run
    assert a.inputs["model_name_or_path"] == "tiny" and a.inputs["max_completion_length"] == 48
    with pytest.raises(ValueError, match="--smoke"):
        parse_train_args(["--resume", str(tmp_path)], smoke=True)


def test_smoke_help_prints_the_table():
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "train", "--smoke", "--help"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr
    for o in smoke.SMOKE:
        assert ", ".join(o.fields) in p.stdout
    assert "kept as the recipe sets them" in p.stdout
