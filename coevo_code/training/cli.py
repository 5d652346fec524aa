"""``coevo train``: TRL-style arguments (``--config FILE`` YAML, ``--field value`` overrides),
resume, and the run directory's ``config.yaml`` (the inputs that reproduce the run)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path

import yaml
from trl import ModelConfig, TrlParser

from ..argv import pop_flag
from .config import CoevoConfig

TINY_YAML = Path(__file__).resolve().parent / "tiny.yaml"


class _Parser(TrlParser):
    """TrlParser whose errors are exceptions with one line (not a multi-kilobyte usage dump)."""

    def error(self, message):
        raise ValueError(message)


@dataclass
class TrainArgs:
    config: CoevoConfig
    model: ModelConfig
    resume: bool
    inputs: dict  # what config.yaml records


def _parser() -> _Parser:
    return _Parser((CoevoConfig, ModelConfig))


def _plain(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return getattr(v, "value", str(v))


def _given(argv: list[str]) -> set[str]:
    """The fields a command line sets (``--field value``, ``--field=value``, ``--no_field``)."""
    return {a[2:].split("=")[0].replace("-", "_") for a in argv if a.startswith("--")}


def parse_train_args(argv: list[str], smoke: bool = False) -> TrainArgs:
    """``smoke``: the recipe shrunk to run here (:mod:`.smoke`), before the command line's
    overrides."""
    resume_dir, argv = pop_flag(argv, "--resume")
    config_file, argv = pop_flag(argv, "--config")
    if resume_dir is not None:
        if config_file is not None:
            raise ValueError("--resume takes the run's own config.yaml; do not also pass --config")
        if smoke:
            raise ValueError("--resume takes the run's own config.yaml (a --smoke run's is shrunk "
                             "already); do not also pass --smoke")
        run = Path(resume_dir)
        config_file = str(run / "config.yaml")
        if not Path(config_file).is_file():
            raise FileNotFoundError(f"--resume {resume_dir}: no config.yaml there (not a coevo run "
                                    f"directory?)")
        argv += ["--output_dir", str(run)]
    elif config_file is None:
        config_file = str(TINY_YAML)
    elif not Path(config_file).is_file():
        raise FileNotFoundError(f"--config: no such file {config_file}")
    try:
        base = yaml.safe_load(Path(config_file).read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"--config {config_file}: not valid YAML ({str(e).splitlines()[0]})")
    if not isinstance(base, dict):
        raise ValueError(f"--config {config_file}: must hold a mapping of field: value")
    known = {f.name for dc in (CoevoConfig, ModelConfig) for f in fields(dc)}
    unknown = sorted(set(base) - known - {"env"})
    if unknown:
        raise ValueError(f"--config {config_file}: unknown field(s) {', '.join(unknown)}")

    if smoke:
        from .smoke import apply
        base = apply(base, int(os.environ.get("WORLD_SIZE", "1")), _given(argv))
    parser = _parser()
    parser.set_defaults_with_config(**{k: v for k, v in base.items() if k != "env"})
    for a in argv:
        name = a[2:].split("=")[0].replace("-", "_")
        if a.startswith("--") and name not in known and not (
                name.startswith("no_") and name[3:] in known):
            raise ValueError(f"unknown flag {a.split('=')[0]} (see `coevo train --help-fields`)")
    ns_default, _ = parser.parse_known_args([])
    ns, rest = parser.parse_known_args(argv)
    if rest:
        raise ValueError(f"unexpected argument(s): {' '.join(rest)}")
    overrides = {k: v for k, v in vars(ns).items() if getattr(ns_default, k, None) != v}
    # as TRL's parse_args_and_config reads --config FILE (its `env:` set, its values the
    # defaults, the command line over them), from the values read above (--smoke's applied)
    env = base.get("env") or {}
    if not isinstance(env, dict):
        raise ValueError(f"--config {config_file}: `env` must be a mapping of NAME: value")
    for key, value in env.items():
        os.environ[key] = str(value)
    final = _parser()
    final.set_defaults_with_config(**{k: v for k, v in base.items() if k != "env"})
    config, model = final.parse_args_into_dataclasses(args=argv)
    inputs = {**{k: v for k, v in base.items()}, **{k: _plain(v) for k, v in overrides.items()}}
    inputs["output_dir"] = config.output_dir
    return TrainArgs(config, model, resume_dir is not None, inputs)


def run_train(a: TrainArgs) -> int:
    from transformers.utils import logging as hf_logging

    from ..tasks import LoaderError
    from .exchange import PartnerError
    from .step import SandboxFailure
    from .rundir import refuse_existing_run
    from .run import end_worker, train
    from .vllm_sync import WeightSyncError

    hf_logging.disable_progress_bar()  # shard-writing bars; the training bar stays

    out = Path(a.config.output_dir)
    main = a.config.process_index == 0
    if main:
        print(f"coevo: run directory {out}", file=sys.stderr, flush=True)
    t0 = time.time()
    try:
        if main:
            out.mkdir(parents=True, exist_ok=True)
            if not a.resume:
                refuse_existing_run(out)  # before config.yaml is written over the old one's
            (out / "config.yaml").write_text(yaml.safe_dump(a.inputs, sort_keys=False))
        result = train(a.config, a.model, resume=a.resume)
    except (LoaderError, FileExistsError, FileNotFoundError, ValueError, WeightSyncError) as e:
        if os.environ.get("COEVO_DEBUG"):
            raise
        print(f"coevo: {str(e).splitlines()[0]} (COEVO_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 2
    except PartnerError as e:
        print(f"coevo: {e}", file=sys.stderr)
        return 3
    except SandboxFailure as e:
        if main:
            print(f"coevo: {e}; check the sandbox (coevo doctor), then `coevo train --resume "
                  f"{out}` continues from the last checkpoint", file=sys.stderr)
        return 4
    if main:
        print(f"coevo: {result.global_step} steps in {time.time() - t0:.0f} s; metrics "
              f"{out / 'metrics.jsonl'}; weights {result.final_dir}; curves: coevo report {out}",
              file=sys.stderr)
    end_worker(0)  # a torchrun worker leaves here; a single process returns
    return 0


def field_help() -> str:
    lines = []
    for dc in (CoevoConfig, ModelConfig):
        lines.append(f"# {dc.__name__}")
        for f in fields(dc):
            if not f.init:
                continue
            h = (f.metadata.get("help") or "").replace("\n", " ")
            default = f.default if not callable(getattr(f, "default_factory", None)) else "[]"
            lines.append(f"--{f.name} (default {default!r}): {h[:160]}")
    return "\n".join(lines)
