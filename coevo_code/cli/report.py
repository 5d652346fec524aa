"""``coevo report``: a run's training curves, drawn as PNG files into its directory."""

from __future__ import annotations

from pathlib import Path

from .base import CLIError, Command


class ReportCommand(Command):
    name = "report"
    help = "draw a run's training curves (PNG) into its directory"

    def register(self, sub) -> None:
        self.add_parser(sub).add_argument("run_dir",
                                          help="a run directory written by `coevo train`")

    def run(self, args, argv: list[str]) -> int:
        from ..training.report import ReportError, draw_report
        try:
            paths = draw_report(Path(args.run_dir))
        except ReportError as e:
            raise CLIError(str(e))
        for p in paths:
            print(p)
        return 0
