"""``coevo tasks check`` and ``coevo tasks validate``: load a dataset, say what was loaded, run
its own solutions against its own tests (check), drop the generated tests its correct
solutions disagree with (validate, CodeContests)."""

from __future__ import annotations

import json
import sys

from .base import PLUS, CLIError, Command, make_executor, sandbox_flags
from .evaluate import benchmark_flags, benchmark_options

from ..tasks import LOADERS

DATASETS = f"one of {', '.join(LOADERS)}"


class TasksCommand(Command):
    name = "tasks"
    help = "datasets: load, check and validate them"

    def register(self, sub) -> None:
        t = sub.add_parser(self.name, help=self.help)
        tsub = t.add_subparsers(dest="tasks_cmd", required=True)
        c = self.add_parser(tsub, "check",
                            help="run a dataset's reference (and incorrect) solutions through the "
                                 "sandbox, per problem")
        c.add_argument("name", help=DATASETS)
        _dataset_flags(c)
        benchmark_flags(c)
        c.add_argument("--references", type=int, default=None, metavar="N",
                       help="run the first N references (and N incorrect solutions) of each "
                            "problem (default: all)")
        c.add_argument("--no-incorrect", action="store_true",
                       help="do not run the incorrect solutions a dataset publishes")
        c.add_argument("--limit", type=int, help="humanevalplus/mbppplus: check a seeded sample")
        c.add_argument("--seed", type=int, default=0)
        c.add_argument("--report", metavar="FILE", help="write the per-problem report (JSON)")
        c.add_argument("-v", "--verbose", action="store_true",
                       help="one line per problem (its failing tests by outcome)")
        c.add_argument("--markdown", action="store_true",
                       help="print the per-problem counts as a markdown table")
        _run_flags(c)

        v = self.add_parser(tsub, "validate",
                            help="codecontests: drop generated tests the dataset's correct "
                                 "Python 3 solutions disagree with; write the cleaned file")
        v.add_argument("name", choices=["codecontests"])
        v.add_argument("--path", required=True, help="the local file to validate (.jsonl, "
                                                     ".jsonl.gz, .json, .parquet)")
        v.add_argument("-o", "--output", required=True, help="the cleaned file (.jsonl)")
        v.add_argument("--references", type=int, default=None, metavar="N",
                       help="decide with the first N Python 3 solutions (default: all)")
        v.add_argument("--report", metavar="FILE", help="write the per-row report (JSON)")
        _run_flags(v)

    def run(self, args, argv: list[str]) -> int:
        if args.tasks_cmd == "validate":
            return self.validate(args)
        return self.check(args)

    def check(self, args) -> int:
        from tqdm import tqdm

        from ..tasks import LoaderError, check_tasks, load_tasks

        if args.references is not None and args.references < 1:
            raise CLIError(f"--references must be at least 1, got {args.references}")
        options = dataset_options(args)
        options.update(benchmark_options(args))
        if args.limit is not None:
            if args.name.lower() not in PLUS:
                raise CLIError("--limit applies to humanevalplus and mbppplus")
            options.update(limit=args.limit, seed=args.seed)
        ex = make_executor(args)
        try:
            if args.name.lower() in PLUS:
                options["executor"] = ex
            try:
                ts = load_tasks(args.name, args.path, **options)
            except LoaderError as e:
                raise CLIError(str(e))
            print(ts.summary())
            if not len(ts):
                raise CLIError(f"{args.name}: no problem left to check")
            cells = sum(len(t.tests) * min(len(t.references), args.references or 1 << 62)
                        for t in ts)  # the references' cells (incorrect solutions come after)
            with tqdm(total=cells, unit="cell", disable=args.quiet, file=sys.stderr) as bar:
                report = check_tasks(ts, ex, progress=bar.update, references=args.references,
                                     incorrect=not args.no_incorrect)
        finally:
            ex.close()
        if args.verbose:
            for p in report.per_problem:
                print("  " + p.line())
        if args.markdown:
            print(report.table())
        print(report.summary())
        if args.report:
            with open(args.report, "w", encoding="utf-8") as f:
                json.dump({"summary": report.summary(), "load": ts.summary(),
                           "problems": [p.to_dict() for p in report.per_problem]}, f, indent=1)
        return 0 if not report.failed else 1

    def validate(self, args) -> int:
        from tqdm import tqdm

        from ..tasks import LoaderError
        from ..tasks.validate import validate_codecontests

        if args.references is not None and args.references < 1:
            raise CLIError(f"--references must be at least 1, got {args.references}")
        ex = make_executor(args)
        try:
            with tqdm(unit="cell", disable=args.quiet, file=sys.stderr) as bar:
                rows = validate_codecontests(args.path, args.output, ex,
                                             references=args.references, progress=bar.update)
        except LoaderError as e:
            raise CLIError(str(e))
        finally:
            ex.close()
        for r in rows:
            print(r.line())
        dropped = sum(len(r.dropped) for r in rows)
        generated = sum(r.generated for r in rows if not r.skipped)
        skipped = sum(1 for r in rows if r.skipped)
        print(f"codecontests: {dropped} of {generated} generated tests dropped in "
              f"{len(rows) - skipped} validated rows ({skipped} not validated); cleaned file: "
              f"{args.output}")
        if args.report:
            with open(args.report, "w", encoding="utf-8") as f:
                json.dump([{"name": r.name, "skipped": r.skipped, **r.record()} for r in rows],
                          f, indent=1)
        return 0


def _dataset_flags(p) -> None:
    p.add_argument("--path", help="a local file (default: the public source: hub id or package)")
    p.add_argument("--split", help="split (mbpp: prompt/test/validation/train; hub sets)")
    p.add_argument("--gold-tests", metavar="KINDS",
                   help="codecontests: which tests are gold, comma-separated among public, "
                        "private, generated (default: all three, docs/DATASETS.md)")
    p.add_argument("--config", choices=["default", "verifiable"],
                   help="codeforces: the dataset configuration (default: default)")
    p.add_argument("--strict", action="store_true",
                   help="codecontests/codeforces: a row the loader would refuse (interactive, "
                        "no tests) is an error instead")


def _run_flags(p) -> None:
    p.add_argument("--slots", type=int, default=None)
    p.add_argument("--allow-unsafe", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true")
    sandbox_flags(p)


def dataset_options(args) -> dict:
    """Loader options from the dataset flags; a flag that does not apply is a one-line error."""
    name = args.name.lower().replace("-", "").replace("_", "")
    options = {}
    if args.split:
        options["split"] = args.split
    if args.gold_tests is not None:
        if name != "codecontests":
            raise CLIError("--gold-tests applies to codecontests")
        options["gold"] = args.gold_tests
    if args.config is not None:
        if name != "codeforces":
            raise CLIError("--config applies to codeforces")
        options["config"] = args.config
    if args.strict:
        if name not in ("codecontests", "codeforces"):
            raise CLIError("--strict applies to codecontests and codeforces")
        options["strict"] = True
    return options
