"""``coevo tasks check``: load a dataset, say what was loaded, run its reference solutions."""

from __future__ import annotations

import sys

from .base import PLUS, CLIError, Command, make_executor, sandbox_flags
from .evaluate import benchmark_flags, benchmark_options


class TasksCommand(Command):
    name = "tasks"
    help = "datasets: load and check them"

    def register(self, sub) -> None:
        t = sub.add_parser(self.name, help=self.help)
        tsub = t.add_subparsers(dest="tasks_cmd", required=True)
        c = self.add_parser(tsub, "check",
                            help="run a dataset's reference solutions through the sandbox")
        c.add_argument("name", help="humaneval, humanevalplus, mbpp, mbppplus, codecontests, "
                                    "codeforces, livecodebench, livebench, cure, bundled or native")
        c.add_argument("--path", help="a local file (default: the public source: hub id or "
                                      "package)")
        c.add_argument("--split", help="split (mbpp: prompt/test/validation/train; hub sets)")
        benchmark_flags(c)
        c.add_argument("--limit", type=int, help="humanevalplus/mbppplus: check a seeded sample")
        c.add_argument("--seed", type=int, default=0)
        c.add_argument("--slots", type=int, default=None)
        c.add_argument("--allow-unsafe", action="store_true")
        c.add_argument("-q", "--quiet", action="store_true")
        sandbox_flags(c)

    def run(self, args, argv: list[str]) -> int:
        from tqdm import tqdm

        from ..tasks import LoaderError, check_tasks, load_tasks

        ex = make_executor(args)
        try:
            options = benchmark_options(args)
            if args.split:
                options["split"] = args.split
            if args.limit is not None:
                if args.name.lower() not in PLUS:
                    raise CLIError("--limit applies to humanevalplus and mbppplus")
                options.update(limit=args.limit, seed=args.seed)
            if args.name.lower() in PLUS:
                options["executor"] = ex
            try:
                ts = load_tasks(args.name, args.path, **options)
            except LoaderError as e:
                raise CLIError(str(e))
            print(ts.summary())
            cells = sum(len(t.tests) for t in ts if t.references)
            with tqdm(total=cells, unit="cell", disable=args.quiet, file=sys.stderr) as bar:
                report = check_tasks(ts, ex, progress=bar.update)
        finally:
            ex.close()
        print(report.summary())
        return 0 if not report.failed else 1
