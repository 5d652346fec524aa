"""The ``coevo`` command: thin (parsing, progress and files; the work lives in the library).

One parser of registered commands, TRL's pattern: each :class:`~.base.Command` adds its
subparser and runs its handler. Commands: ``execute`` and ``doctor`` (:mod:`.execute`), ``tasks
check`` (:mod:`.tasks`), ``eval`` and ``rank`` (:mod:`.evaluate`), ``train`` (:mod:`.train`),
``build-image`` (:mod:`.image`), ``report`` (:mod:`.report`). A command refuses with a
:class:`CLIError`: one line ``coevo: MESSAGE`` on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import sys

from .base import CLIError, Command
from .evaluate import EvalCommand, RankCommand
from .execute import DoctorCommand, ExecuteCommand
from .image import BuildImageCommand
from .report import ReportCommand
from .serve import ServeCommand
from .tasks import TasksCommand
from .train import TrainCommand

COMMANDS: tuple[Command, ...] = (ExecuteCommand(), DoctorCommand(), TasksCommand(), EvalCommand(),
                                 RankCommand(), TrainCommand(), BuildImageCommand(),
                                 ReportCommand(), ServeCommand())

__all__ = ["COMMANDS", "CLIError", "Command", "build_parser", "main"]


def build_parser(commands=COMMANDS) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="coevo", description="Co-evolving coders and unit testers.")
    sub = p.add_subparsers(dest="cmd", required=True)
    for command in commands:
        command.register(sub)
    return p


def _run(argv: list[str]) -> int:
    for command in COMMANDS:
        if command.raw and argv[:1] == [command.name]:
            return command.run(None, argv[1:])
    args = build_parser().parse_args(argv)
    if getattr(args, "slots", None) is not None and args.slots < 1:
        raise CLIError(f"--slots must be >= 1, got {args.slots}")
    if getattr(args, "batch", 1) < 1:
        raise CLIError(f"--batch must be >= 1, got {args.batch}")
    return args.func(args, argv)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(argv)
    except CLIError as e:
        print(f"coevo: {e}", file=sys.stderr)
        return e.code
