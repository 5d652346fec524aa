"""One training run: load problems, build the paired datasets, the reward callable and the trainer,
train (or resume), save. The ``coevo train`` command and the tests call :func:`train`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..labels import label_source
from ..tasks import LoaderError, load_tasks
from ..tasks.model import Task, seeded_sample
from .config import CoevoConfig
from .rundir import last_complete_checkpoint, refuse_existing_run, set_aside, truncate_jsonl
from .scoring import RewardOptions


def reward_funcs(names) -> list:
    """The extra reward functions of ``--reward_funcs``: TRL's by name (its ``grpo`` script's
    registry) or any callable by dotted import path."""
    import importlib
    registry = {"accuracy_reward": "trl.rewards.accuracy_reward",
                "reasoning_accuracy_reward": "trl.rewards.reasoning_accuracy_reward",
                "think_format_reward": "trl.rewards.think_format_reward"}
    funcs = []
    for name in names or []:
        if name == "get_soft_overlong_punishment":  # TRL's script's setting of it
            from trl.rewards import get_soft_overlong_punishment
            funcs.append(get_soft_overlong_punishment(max_completion_len=1280,
                                                      soft_punish_cache=256))
            continue
        path = registry.get(name, name)
        module, _, attr = path.rpartition(".")
        try:
            fn = getattr(importlib.import_module(module), attr, None) if module else None
        except ImportError as e:
            raise LoaderError(f"--reward_funcs {name}: cannot import {module} ({e})") from None
        if not callable(fn):
            raise LoaderError(f"--reward_funcs {name}: not a TRL reward ("
                              f"{', '.join(registry)}, get_soft_overlong_punishment) or a "
                              f"dotted path to a callable")
        funcs.append(fn)
    return funcs


def _card(config: CoevoConfig, name, tasks, eval_tasks) -> dict:
    """What the model card says of the run's inputs."""
    def data(source, split, n):
        return f"{source or 'problems given to train()'}" + (f", split {split}" if split else "") \
            + f" ({n} problems)"
    return {"base_model": name or "tiny", "agent": config.agent_name or None,
            "data": data(config.tasks, config.tasks_split, len(tasks)),
            "eval_data": data(config.eval_tasks, config.eval_tasks_split, len(eval_tasks))
            if eval_tasks else None}


@dataclass
class RunResult:
    output_dir: Path
    global_step: int
    resumed_from: Path | None
    final_dir: Path | None
    trainer: object = None  # the CoevoTrainer (closed), for inspection


def _load(name, path, split, limit, seed, what, need_gold: bool = True,
          **selection) -> list[Task]:
    """``selection``: the loader's own options (livecodebench: release, start_date, end_date,
    platform), those set only."""
    options = {k: v for k, v in selection.items() if v not in (None, "", False)}
    if split:
        options["split"] = split
    try:
        ts = load_tasks(name, path, **options)
    except LoaderError as e:
        raise LoaderError(f"{what}: {e}") from None
    if ts.skipped:  # the rest loads; the run says what it left out
        print(f"{what}: {ts.summary()}", file=sys.stderr)
    tasks = [t for t in ts if t.tests or not need_gold]
    if not tasks:
        raise LoaderError(f"{what}: {ts.summary()}: no problem has a gold test")
    return seeded_sample(tasks, limit, seed)


def _selection(config: CoevoConfig, prefix: str) -> dict:
    """The benchmark selection fields of one data set (``tasks_release`` ... ``tasks_platform``,
    ``tasks_examples``) as loader options."""
    return {**{k: getattr(config, f"{prefix}_{k}", None)
               for k in ("release", "start_date", "end_date", "platform", "examples")},
            "strict": config.tasks_strict}


def shown_tasks(tasks: list[Task], problem_field: str | None) -> list[Task]:
    """The problems as this agent's prompts show them: with ``problem_field``, that metadata field
    (e.g. a rephrased statement) replaces the statement; parsing and tests are unchanged."""
    if not problem_field:
        return tasks
    out = []
    for t in tasks:
        text = t.metadata.get(problem_field)
        if not isinstance(text, str) or not text.strip():
            raise LoaderError(f"--problem_field {problem_field}: problem {t.id} has no such text "
                              f"in its metadata")
        out.append(dataclasses.replace(t, prompt=text))
    return out


def frozen_labels(config: CoevoConfig, tasks: list[Task], out: Path) -> dict:
    """The frozen labeller's completions per problem: read from ``frozen_labels`` (a
    ``generations.jsonl`` of ``coevo eval``), or written there (default: the run directory) by
    ``frozen_model`` once, at the start (SRT's frozen pseudo-labels)."""
    from ..generation.cache import GenerationCache
    k = config.num_generations
    path = Path(config.frozen_labels) if config.frozen_labels else out / "frozen_labels.jsonl"
    cache = GenerationCache(path)
    missing = [t for t in tasks if cache.get(t.id, "code", k) is None
               or cache.get(t.id, "test", k) is None]
    if missing and not config.frozen_model:
        raise LoaderError(f"--frozen_labels {path}: no {k} code and test completions for problem "
                          f"{missing[0].id} ({len(missing)} problem(s) missing); give "
                          f"--frozen_model to write them")
    if missing:
        from ..generation.cache import generate_all
        from ..generation.engines import Sampling, make_engine
        print(f"coevo: frozen labeller {config.frozen_model}: writing {len(missing)} problem(s) "
              f"to {path}", file=sys.stderr)
        engine = make_engine("transformers", config.frozen_model, Sampling(
            temperature=config.temperature or 1.0, max_tokens=config.max_completion_length,
            seed=config.seed), device="cpu" if config.use_cpu else None)
        try:
            generate_all(missing, engine, k, k, cache)
        finally:
            engine.close()
    return {t.id: (cache.get(t.id, "code", k), cache.get(t.id, "test", k)) for t in tasks}


def exchange_for(config: CoevoConfig):
    """This agent's end of the pair's exchange (None when training alone)."""
    if not config.agent_names:
        return None
    from .exchange import Exchange
    address = os.environ.get("COEVO_EXCHANGE")
    if not address:
        raise ValueError(f"agent {config.agent_name!r} belongs to a pair or ring run: start the "
                         f"run with `coevo train --config PAIR.yaml` (COEVO_EXCHANGE is not set)")
    if not _is_main():
        return None
    return Exchange(address, config.agent_name, config.agent_names, config.exchange_timeout_s)


def reward_options(config: CoevoConfig) -> RewardOptions:
    """The config's fields that scoring reads: :class:`RewardOptions`' fields, by name."""
    return RewardOptions(**{f.name: getattr(config, f.name)
                            for f in dataclasses.fields(RewardOptions)})


def end_worker(code: int = 0) -> None:
    """End a multi-process run's worker (torchrun sets ``WORLD_SIZE`` > 1) with exit status
    ``code``, once its last collective is done; in a single process, return and do nothing.

    Destroying the default process group is not enough on its own: objects that still hold it
    (the DDP-wrapped model) are torn down during interpreter finalization, and there Gloo can
    abort a worker that finished its work (SIGABRT, "terminate called without an active
    exception", no Python frame left on the stack; about 1 two-process run in 10 of
    ``tests/dist_train_script.py`` on 2 cores). So the worker destroys the group, runs the
    atexit functions (logging's flush among them) and flushes the standard streams while the
    interpreter is whole, then leaves with ``os._exit``, before finalization."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return
    import atexit

    import torch.distributed as dist
    vllm_state = sys.modules.get("vllm.distributed.parallel_state")
    if (vllm_state is not None and vllm_state.model_parallel_is_initialized()
            and dist.is_available() and dist.is_initialized()):
        # a colocated vLLM engine (use_vllm) made sub-groups of this process group; its exit
        # hook destroys them, which fails once the default group is gone ("Invalid process
        # group specified", a traceback after every multi-process vLLM run). vLLM's own
        # teardown destroys its groups, then the default group; its hook then finds none
        vllm_state.cleanup_dist_env_and_memory()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or its reader gone: nothing left to keep
            pass
    os._exit(code)


def _is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def prepare_resume(output_dir: Path) -> Path | None:
    """Pick the last complete checkpoint, set later half-written ones aside, drop the metrics
    lines written after it. Returns the checkpoint (None: start from scratch)."""
    ckpt, later = last_complete_checkpoint(output_dir)
    step = 0
    if ckpt is not None:
        step = int(ckpt.name.split("-")[1])
    if _is_main():
        for p in set_aside(later):
            print(f"coevo: {p.name}: half-written at the interruption, set aside", file=sys.stderr)
        for name in ("metrics.jsonl", "eval.jsonl"):
            dropped = truncate_jsonl(output_dir / name, step)
            if dropped:
                print(f"coevo: {name}: dropped {dropped} line(s) after step {step}", file=sys.stderr)
    return ckpt


def train(config: CoevoConfig, model_args=None, resume: bool = False, tasks=None,
          eval_tasks=None, callbacks=None, rollout_func=None) -> RunResult:
    """Train (or, with ``resume``, continue the run in ``config.output_dir``).

    ``tasks``/``eval_tasks`` replace the configured datasets; ``callbacks`` are transformers
    ``TrainerCallback``s; ``rollout_func`` is TRL's custom-rollout hook (agents, scripted
    completions in tests)."""
    import datasets
    import torch
    from trl import get_peft_config

    from .data import Curriculum, paired_rows, reward_tasks
    from ..generation.tiny import is_tiny, save_tiny
    from .sharding import Sharding
    from .step import CoevoStep, Lockstep
    from .trainer import CoevoTrainer

    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    out = Path(config.output_dir)
    if resume:
        if not out.is_dir():
            raise FileNotFoundError(f"--resume: no run directory {out}")
        ckpt = prepare_resume(out)
    else:
        refuse_existing_run(out)
        ckpt = None
    if ckpt is not None:
        config.eval_on_start = False  # the run's step-0 evaluation is in eval.jsonl already
    out.mkdir(parents=True, exist_ok=True)

    extra_rewards = reward_funcs(config.reward_funcs)  # a bad name fails before any work
    if tasks is None:
        tasks = _load(config.tasks, config.tasks_path, config.tasks_split, config.tasks_limit,
                      config.seed, "--tasks",
                      need_gold=label_source(config.label_source).needs_gold,
                      **_selection(config, "tasks"))
    if eval_tasks is None and config.eval_tasks:
        # the same evaluation problems whatever the run's seed: seeds compare on one set
        eval_tasks = _load(config.eval_tasks, config.eval_tasks_path, config.eval_tasks_split,
                           config.eval_tasks_limit, 0, "--eval_tasks",
                           **_selection(config, "eval_tasks"))
    eval_tasks = list(eval_tasks or [])

    name = getattr(model_args, "model_name_or_path", None)
    init = dict(config.model_init_kwargs or {})
    if is_tiny(name):
        model = str(out / "initial-model")
        if _is_main():
            save_tiny(Path(model), seed=config.seed, name=name)
        init.setdefault("dtype", "float32")
    else:
        model = name
        if getattr(model_args, "dtype", None):
            init.setdefault("dtype", model_args.dtype)
        if getattr(model_args, "attn_implementation", None):
            init.setdefault("attn_implementation", model_args.attn_implementation)
        if getattr(model_args, "model_revision", None) not in (None, "main"):
            init.setdefault("revision", model_args.model_revision)
    config.model_init_kwargs = init
    if config.world_size > 1:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            dist.barrier()  # the main process wrote the tiny model

    if config.max_steps is None or config.max_steps <= 0:
        # one long "epoch" for the sampler (fresh order per pass, resumable): express
        # num_train_epochs as steps; each generation batch serves
        # num_iterations x steps_per_generation / gradient_accumulation_steps optimiser steps
        import math
        gens = math.ceil(config.num_train_epochs * len(tasks) / config.problems_per_batch)
        config.max_steps = math.ceil(gens * config.num_iterations * config.steps_per_generation
                                     / config.gradient_accumulation_steps)
    # the main process scores label-free batches (reward.py), so only it reads the labeller
    frozen = (frozen_labels(config, tasks, out)
              if label_source(config.label_source).needs_frozen and _is_main() else None)
    exchange = exchange_for(config)
    rows = paired_rows(shown_tasks(tasks, config.problem_field), "train",
                       config.max_input_examples)
    train_ds = datasets.Dataset.from_list(rows)
    eval_ds = (datasets.Dataset.from_list(paired_rows(eval_tasks, "eval", 0))
               if eval_tasks else None)
    k = config.num_generations
    repair = None
    if config.repair_turns > 1:
        from .repair_turns import RepairTurns
        repair = RepairTurns(config.repair_turns, config.repair_feedback, config.repair_credit,
                             config.repair_test_credit, config.repair_max_failing,
                             max_gold_tests=config.max_gold_tests,
                             all_passed=config.code_all_passed,
                             time_limit_s=config.exec_time_limit_s,
                             groups=config.repair_groups, seed=config.seed,
                             agreement=config.repair_feedback_agreement)
    step = CoevoStep(
        {"train": reward_tasks(tasks, config.reward_shown_tests), "eval": eval_tasks},
        reward_options(config),
        executor_options=config.executor_options(),
        exec_time_limit_s=config.exec_time_limit_s,
        sharding=Sharding(local_batch={
            "train": config.per_device_train_batch_size * config.steps_per_generation,
            "eval": config.per_device_eval_batch_size},
            k={"train": k, "eval": config.num_generations_eval or k}),
        exchange=exchange,
        agent_index=config.agent_names.index(config.agent_name) if config.agent_names else 0,
        n_agents=max(1, len(config.agent_names)), frozen=frozen,
        lockstep=Lockstep(Curriculum(config.curriculum_window, enabled=config.curriculum)),
        control=config.reward_control, seed=config.seed, train_roles=config.train_roles,
        max_rows_masked=config.max_rows_masked, repair=repair)
    peft = get_peft_config(model_args) if model_args is not None else None
    trainer = CoevoTrainer(model=model, args=config, train_dataset=train_ds, eval_dataset=eval_ds,
                           peft_config=peft, coevo_step=step, n_train=len(tasks),
                           callbacks=callbacks,
                           reward_funcs=extra_rewards,
                           rollout_func=rollout_func, card=_card(config, name, tasks, eval_tasks))
    try:
        if trainer.is_world_process_zero():
            resolved = {k: v for k, v in config.to_dict().items()}
            (out / "resolved_config.json").write_text(json.dumps(resolved, indent=1, default=str))
        if ckpt:
            trainer.load_coevo_state(ckpt)
        trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        final = out / "final"
        trainer.save_model(str(final))
        trainer.write_model_card(final / "README.md", weights=str(final))
    finally:
        trainer.close()
    return RunResult(out, trainer.state.global_step, ckpt, final, trainer)
