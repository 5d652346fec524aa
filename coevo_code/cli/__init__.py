"""The ``coevo`` command: thin (parsing, progress and files; the work lives in the library).

One parser of registered commands, TRL's pattern: each :class:`~.base.Command` adds its
subparser and runs its handler. Every command's options are dataclasses read the same way
(:class:`~.base.OptionsCommand`, :func:`coevo_code.argv.parse_options`; ``train``: TRL's parser
over the training config): ``--config FILE`` (YAML of field: value) and ``--field value``
overrides, in the training config's spelling (``--k_code``, ``--exec_slots``); an old spelling
(``--k-code``, ``--slots``) works for one release, with a one-line warning naming the new one.

Commands: ``execute`` and ``doctor`` (:mod:`.execute`), ``tasks check`` and ``tasks validate``
(:mod:`.tasks`), ``eval`` and ``rank`` (:mod:`.evaluate`), ``train`` (:mod:`.train`), ``serve``
(:mod:`.serve`), ``build-image`` (:mod:`.image`), ``report`` (:mod:`.report`). A command refuses
with a :class:`CLIError`: one line ``coevo: MESSAGE`` on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from ..argv import RenamedFlagWarning
from .base import CLIError, Command, OptionsCommand
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

__all__ = ["COMMANDS", "CLIError", "Command", "OptionsCommand", "build_parser", "main"]


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
    return args.func(args, argv)


def _one_line(message, category, filename, lineno, file=None, line=None):
    """An old spelling's warning as one line (``warning: coevo eval: --k-code is now
    --k_code ...``); any other warning as Python shows it."""
    if issubclass(category, RenamedFlagWarning):
        print(f"warning: {message}", file=sys.stderr if file is None else file)
    else:
        _show(message, category, filename, lineno, file, line)


_show = warnings.showwarning


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    with warnings.catch_warnings():
        warnings.showwarning = _one_line
        warnings.simplefilter("always", RenamedFlagWarning)
        try:
            return _run(argv)
        except CLIError as e:
            print(f"coevo: {e}", file=sys.stderr)
            return e.code
