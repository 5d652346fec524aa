"""``coevo train``: one policy as coder and tester (CURE) on TRL, or a pair or ring of agents
(Co-RL) when the config lists ``agents:``. TRL's parser reads the arguments
(:mod:`coevo_code.training.cli`); this command only tells a pair config from a single run's."""

from __future__ import annotations

from pathlib import Path

from ..argv import flag_value, without_flag
from .base import CLIError, Command

TRAIN_HELP = """usage: coevo train [--config FILE | --resume RUN_DIR] [--FIELD VALUE ...]

Train one policy to write solutions and unit tests (CURE) on TRL's GRPOTrainer.
With no --config: the embedded default run: the warm-started tiny model as coder and tester on
the task world (held-out problems scored before, during and after), on CPU, in minutes.
A config with an `agents:` list trains a pair or ring (Co-RL): one trainer process per agent,
one run directory with a subfolder per agent (see configs/pair-tiny-cpu.yaml).
Every field of CoevoConfig (TRL's GRPOConfig plus the co-evolution fields) and of TRL's
ModelConfig can be set in the YAML file or on the command line, e.g. --max_steps 12 --save_steps 1.
--resume RUN_DIR continues a run from its last complete checkpoint, same data order.
--smoke shrinks a GPU recipe to run here (tiny models, fp32, CPU, the task world, 2 steps) and
keeps what the recipe is about (vLLM, LoRA, the loss, the rewards); `coevo train --smoke --help`
prints its table.
`coevo train --help-fields` lists every field."""


def _pair_config(argv: list[str]) -> tuple[str | None, bool]:
    """The config file a pair run would come from: ``--config F``, or ``--resume DIR``'s
    ``config.yaml``; and whether this is a resume. (None, False) when neither is given, or both,
    or one without a value: :func:`~coevo_code.training.cli.parse_train_args` refuses those."""
    try:
        config, resume = flag_value(argv, "--config"), flag_value(argv, "--resume")
    except ValueError:
        return None, False
    if (config is None) == (resume is None):
        return None, False
    return (config, False) if resume is None else (str(Path(resume) / "config.yaml"), True)


class TrainCommand(Command):
    name = "train"
    help = "train a coder + unit tester (CURE) on TRL; `coevo train --help` for its flags"
    raw = True

    def run(self, args, argv: list[str]) -> int:
        """Parse the TRL-style arguments and run :func:`coevo_code.training.train` (or launch a
        pair's agents)."""
        smoke = "--smoke" in argv
        argv = [a for a in argv if a != "--smoke"]
        if smoke and any(a in ("-h", "--help") for a in argv):
            from ..training.smoke import table
            print(table())
            return 0
        if argv and argv[0] in ("-h", "--help"):
            print(TRAIN_HELP)
            return 0
        try:
            from ..training.cli import parse_train_args, run_train
        except ImportError as e:
            raise CLIError(f"training needs torch, transformers and trl ({e}); "
                           f"pip install -e .")
        if argv and argv[0] == "--help-fields":
            from ..training.cli import field_help
            print(field_help())
            return 0
        from ..training.pair import is_pair_config
        pair_file, resume = _pair_config(argv)
        if pair_file is not None and is_pair_config(pair_file):
            from ..training.pair import PairError, launch, load_pair
            rest = without_flag(argv, "--config" if not resume else "--resume")
            try:
                if smoke and resume:
                    raise PairError("--resume takes the run's own config.yaml (a --smoke run's "
                                    "is shrunk already); do not also pass --smoke")
                return launch(load_pair(pair_file, rest, smoke=smoke), resume=resume)
            except (PairError, FileExistsError) as e:
                raise CLIError(str(e).splitlines()[0])
        try:
            parsed = parse_train_args(argv, smoke=smoke)
        except (ValueError, FileNotFoundError) as e:
            raise CLIError(str(e).splitlines()[0] if str(e) else type(e).__name__)
        return run_train(parsed)
