"""``coevo train --config RECIPE --smoke``: a GPU recipe rehearsed here, on CPU, in minutes.

One table (:data:`SMOKE`) says what is replaced: only what cannot run on a CPU machine without a
network (the hub models and datasets, half precision, GPU-only kernels and stacks, the sizes).
Everything the recipe is about is kept: ``use_vllm`` and ``vllm_mode``, the LoRA settings, the
loss, ``beta``, the temperature, length shaping, the label source, the curriculum, ``post_stage``,
``keep_best``, gradient checkpointing, the learning rate. The table is applied to the recipe's
values before the command line's ``--field value`` overrides, so those still win. ``coevo train
--smoke --help`` prints it.

A recipe's dataset is replaced by the task world unless it needs no network (``bundled``,
``world``) or the command line names its file (``--tasks_path`` / ``--eval_tasks_path``): then
the recipe's own dataset is read from that file (the real MBPP test problems of the TTRL recipe,
say). A pair's agents become ``tiny`` and ``tiny-llama`` in turn (two families, as the recipe's
Qwen and Llama), one process each.

This module needs neither torch nor TRL: the pair launcher applies it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..generation.tiny import is_tiny

LOCAL_TASKS = ("bundled", "world")  # datasets that need no network and no file
AGENT_MODELS = ("tiny", "tiny-llama")  # a pair's agents in turn: two families, two tokenizers
UNSET = object()  # the field is removed: its default applies


@dataclass(frozen=True)
class Override:
    fields: tuple[str, ...]
    value: Callable  # (recipe, processes) -> tuple of values, one per field (UNSET: removed)
    shown: str       # the values, as the table prints them
    when: str        # the recipes it applies to, as the table prints it
    applies: Callable  # (recipe, given) -> bool; given: the fields the command line sets
    why: str


def _always(recipe, given) -> bool:
    return True


def _set(*names):
    return lambda recipe, given: any(n in recipe for n in names)


def _evaluates(recipe, given) -> bool:
    return bool(recipe.get("eval_tasks"))


def _needs_network(prefix):
    def applies(recipe, given) -> bool:
        name = recipe.get(f"{prefix}tasks")
        if prefix == "" and name is None:
            name = "bundled"  # CoevoConfig's default
        if not name or str(name).lower() in LOCAL_TASKS:
            return False
        return f"{prefix}tasks_path" not in given
    return applies


def _const(*values):
    return lambda recipe, processes: values


def _problems(processes: int) -> int:
    return max(2, processes)  # at least one whole problem per process


def _batch(recipe, processes):
    k = 4
    problems = _problems(processes)
    return (k, problems, 2 * k * problems // processes, 1, UNSET, UNSET)


SMOKE: tuple[Override, ...] = (
    Override(("model_name_or_path",), _const("tiny"), "tiny", "a model that is not a shipped "
             "tiny one (a pair: its agents get tiny, tiny-llama in turn)",
             lambda recipe, given: not is_tiny(recipe.get("model_name_or_path", "tiny")),
             "the 1.5B-7B hub models need a network and GPU memory; the shipped tiny models "
             "(coevo_code/assets, Qwen2- and Llama-style) load offline in a second"),
    Override(("dtype", "bf16"), _const("float32", False), "float32, false",
             "every recipe", _always,
             "bf16 is a GPU's precision: on CPU the policy trains in fp32 (and the vLLM "
             "weight-sync check takes its fp32 thresholds)"),
    Override(("use_cpu",), _const(True), "true", "every recipe", _always,
             "no CUDA device here; several processes talk over gloo instead of NCCL"),
    Override(("fp16", "attn_implementation", "load_in_4bit", "load_in_8bit", "use_liger_kernel",
              "deepspeed"), _const(False, UNSET, False, False, False, UNSET),
             "false, unset, false, false, false, unset", "where the recipe sets one", _set(
                 "fp16", "attn_implementation", "load_in_4bit", "load_in_8bit",
                 "use_liger_kernel", "deepspeed"),
             "fp16, flash attention, bitsandbytes, Liger kernels and DeepSpeed are GPU stacks"),
    Override(("tasks", "tasks_split", "tasks_path", "tasks_limit"),
             _const("world", "train", UNSET, UNSET), "world, train, unset, unset",
             "a dataset that needs the network (cure, codecontests, mbpp, ...) unless "
             "--tasks_path names its file", _needs_network(""),
             "the hub sets need a network; the task world is generated here, with gold tests"),
    Override(("eval_tasks", "eval_tasks_split", "eval_tasks_path"),
             _const("world", "heldout", UNSET), "world, heldout, unset",
             "an evaluation set that needs the network, unless --eval_tasks_path names its file",
             _needs_network("eval_"),
             "the world's held-out split: parameter tuples no training problem has"),
    Override(("eval_tasks_limit", "eval_steps", "num_generations_eval",
              "per_device_eval_batch_size"), _const(2, 2, 2, 4), "2, 2, 2, 4",
             "every recipe that evaluates", _evaluates,
             "one evaluation of 2 problems, at the last step (best/ and early stopping run); "
             "4 rows = one whole problem per process"),
    Override(("num_generations", "problems_per_generation", "per_device_train_batch_size",
              "gradient_accumulation_steps", "generation_batch_size", "steps_per_generation"),
             _batch, "4, max(2, processes), 8 x problems / processes, 1, unset, unset",
             "every recipe", _always,
             "k = 4 solutions and 4 tests per problem; the generation batch is one optimiser "
             "step, whole problems on every process (training/config.py's batch rules)"),
    Override(("max_steps", "max_completion_length"), _const(2, 32), "2, 32", "every recipe",
             _always, "two steps: the first weight sync and one after an update"),
    Override(("min_len", "max_len"), _const(8, 32), "8, 32", "where length_shaping is on",
             lambda recipe, given: bool(recipe.get("length_shaping")),
             "CURE's length window scaled to the 32-token completions, so the shaping still "
             "ranks lengths"),
    Override(("report_to", "torch_threads"), _const("none", 1), "none, 1", "every recipe",
             _always, "no tensorboard files; one torch thread per process on a small CPU"),
)

# a pair's agents: what each agent's launch block becomes
LAUNCH = {"num_processes": 1}
LAUNCH_WHY = ("a pair's agents: one process each, no devices, no accelerate_config, env kept "
              "(the recipe: 4 GPUs each); the multi-process path is the one the 8-GPU "
              "single-policy recipes rehearse")

KEPT = ("use_vllm", "vllm_mode", "vllm_gpu_memory_utilization (CPU ignores it)", "use_peft and "
        "lora_*", "loss_type", "beta", "temperature", "learning_rate", "length_shaping",
        "scale_rewards", "label_source", "label_threshold", "curriculum", "post_stage",
        "keep_best", "early_stopping_patience", "gradient_checkpointing", "max_gold_tests",
        "p_give_example", "seed", "save_steps")


def apply(recipe: dict, processes: int = 1, given=()) -> dict:
    """The recipe's fields with :data:`SMOKE` applied (a new dict). ``processes``: the run's
    process count (the batch is split over them); ``given``: the fields the command line sets
    (a ``--tasks_path`` keeps the recipe's dataset, read from that file)."""
    out = dict(recipe)
    given = set(given)
    for o in SMOKE:
        if not o.applies(recipe, given):
            continue
        for name, value in zip(o.fields, o.value(recipe, processes)):
            if value is UNSET:
                out.pop(name, None)
            else:
                out[name] = value
    return out


def apply_pair(config: dict, given=()) -> dict:
    """A pair config with :data:`SMOKE` applied to its shared fields and to every agent's own,
    each agent's model the next of :data:`AGENT_MODELS`, its launch block one process."""
    common = apply({k: v for k, v in config.items() if k != "agents"}, 1, given)
    if "model_name_or_path" not in config:
        common.pop("model_name_or_path", None)  # each agent names its own
    agents = []
    for i, agent in enumerate(config.get("agents") or []):
        if not isinstance(agent, dict):
            agents.append(agent)  # load_pair names the bad entry
            continue
        own = {k: v for k, v in agent.items() if k not in ("name", "launch")}
        touched = {f for o in SMOKE for f in o.fields}
        smoked = apply({**config, **own}, 1, given)
        new = {"name": agent.get("name")}
        for k in own:
            if k in touched:
                if k in smoked:
                    new[k] = smoked[k]
            else:
                new[k] = own[k]
        if not is_tiny(own.get("model_name_or_path", config.get("model_name_or_path"))):
            new["model_name_or_path"] = AGENT_MODELS[i % len(AGENT_MODELS)]
        launch = agent.get("launch") if isinstance(agent.get("launch"), dict) else {}
        env = launch.get("env")
        new["launch"] = {**({"env": env} if env else {}), **LAUNCH}
        agents.append(new)
    return {**common, "agents": agents}


def table() -> str:
    """The overrides as ``coevo train --smoke --help`` prints them."""
    lines = ["coevo train --config RECIPE --smoke: the recipe, shrunk to run here (CPU, no "
             "network, minutes). Applied before the command line's --field overrides, which "
             "still win.", "", "field(s) -> value  [where]  why"]
    for o in SMOKE:
        lines.append(f"  {', '.join(o.fields)} -> {o.shown}  [{o.when}]  {o.why}")
    lines.append(f"  agents[i].model_name_or_path -> {', '.join(AGENT_MODELS)} in turn, "
                 f"launch -> one process  [pair configs]  {LAUNCH_WHY}")
    lines += ["", "kept as the recipe sets them: " + ", ".join(KEPT) + ".",
              "Several processes: torchrun --nproc_per_node 2 (or accelerate launch --multi_gpu "
              "--num_processes 2; accelerate's --cpu starts one process) -m coevo_code.cli train "
              "--config RECIPE --smoke --output_dir DIR: plain DDP over gloo in place of "
              "DeepSpeed ZeRO-3. docs/TRAINING.md (Recipes) says what only a GPU can check."]
    return "\n".join(lines)
