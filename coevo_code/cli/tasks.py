"""``coevo tasks check``, ``coevo tasks validate`` and ``coevo tasks quality``: load a dataset, say
what was loaded, run its own solutions against its own tests (check), drop the generated tests
its correct solutions disagree with (validate, CodeContests), measure a set of tests against the
dataset's correct and incorrect programs (quality, CodeContests)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from ..argv import option
from ..evaluation.options import BenchmarkOptions
from ..execution.options import ExecutionOptions
from .base import PLUS, CLIError, OptionsCommand, make_executor

from ..tasks import LOADERS

DATASETS = f"one of {', '.join(LOADERS)}"


@dataclass
class CheckOptions:
    """``coevo tasks check``: which dataset, which of its solutions to run, what to print."""

    name: str | None = option(None, f"the dataset: {DATASETS}; also the first bare word")
    path: str | None = option(None, "a local file (default: the public source: hub id or "
                                    "package)")
    split: str | None = option(None, "split (mbpp: prompt/test/validation/train; hub sets)")
    gold_tests: str | None = option(None, "codecontests: which tests are gold, comma-separated "
                                          "among public, private, generated (default: all "
                                          "three, docs/DATASETS.md)")
    dataset_config: str | None = option(None, "codeforces: the dataset configuration (default: "
                                              "default)", choices=["default", "verifiable"])
    references: str | None = option(None, "run the first N references (and N incorrect "
                                          "solutions) of each language of each problem; "
                                          "LANG=N caps one language, e.g. 40,java=10 "
                                          "(default: all)", metavar="N|LANG=N")
    no_incorrect: bool = option(False, "do not run the incorrect solutions a dataset publishes")
    languages: str | None = option(None, "codecontests, codeforces: whose solutions to run, "
                                         "comma-separated among python, cpp, java (default: "
                                         "python)")
    submissions: str | None = option(None, "codeforces: a file of open-r1/codeforces-"
                                           "submissions (or that hub id) whose accepted and wrong "
                                           "submissions are the problems' solutions")
    limit: int | None = option(None, "humanevalplus/mbppplus: check a seeded sample")
    seed: int = option(0, "seed of the sample")
    report: str | None = option(None, "write the per-problem report (JSON) to this file")
    verbose: bool = option(False, "one line per problem (its failing tests by outcome)",
                           aliases=["-v"])
    markdown: bool = option(False, "print the per-problem counts as a markdown table")
    quiet: bool = option(False, "no progress bar", aliases=["-q"])

    def __post_init__(self):
        if self.name is None:
            raise ValueError(f"give the dataset: {DATASETS}")
        self.references = _references(self.references)


@dataclass
class ValidateOptions:
    """``coevo tasks validate``: the CodeContests file to clean and where the cleaned one goes."""

    name: str | None = option(None, "the dataset (codecontests); also the first bare word",
                              choices=["codecontests"])
    path: str | None = option(None, "the local file to validate (.jsonl, .jsonl.gz, .json, "
                                    ".parquet); required")
    output: str | None = option(None, "the cleaned file (.jsonl); required", aliases=["-o"])
    references: str | None = option(None, "decide with the first N correct solutions of each "
                                          "language; LANG=N caps one language, e.g. java=60 "
                                          "(default: all)", metavar="N|LANG=N")
    languages: str = option("python", "whose correct solutions decide, comma-separated among "
                                      "python, cpp, java")
    min_dispute: int = option(2, "drop a generated test when at least this many trusted "
                                 "references dispute its output (1: any one, the old rule)")
    report: str | None = option(None, "write the per-row report (JSON) to this file")
    quiet: bool = option(False, "no progress bar", aliases=["-q"])

    def __post_init__(self):
        if self.min_dispute < 1:
            raise ValueError(f"--min_dispute must be at least 1, got {self.min_dispute}")
        for flag in ("name", "path", "output"):
            if getattr(self, flag) is None:
                raise ValueError(f"--{flag} is required" if flag != "name" else
                                 "give the dataset: codecontests")
        if self.name != "codecontests":
            raise ValueError(f"tasks validate: the dataset must be codecontests, got "
                             f"{self.name!r}")
        self.references = _references(self.references)


@dataclass
class QualityOptions:
    """``coevo tasks quality``: which tests, against which of the dataset's programs."""

    name: str = option("codecontests", "the dataset (codecontests); also the first bare word",
                       choices=["codecontests"])
    path: str | None = option(None, "a local file (default: the public source)")
    split: str | None = option(None, "split (hub sets)")
    tests: str | None = option(None, "the dataset's own tests to measure, comma-separated among "
                                     "public, private, generated (default: generated)")
    tests_file: str | None = option(None, "measure these tests instead: JSONL, {problem, input, "
                                          "output} a line, or `coevo eval`'s generations.jsonl "
                                          "(its tester completions, parsed)")
    languages: str = option("python,cpp,java", "whose programs run, comma-separated among "
                                               "python, cpp, java")
    references: int | None = option(None, "a seeded sample of N correct and N incorrect "
                                          "solutions per language and problem (default: all)")
    seed: int = option(0, "seed of the --references sample")
    report: str | None = option(None, "write the per-problem figures and names (JSON) here")
    verbose: bool = option(False, "one line per problem", aliases=["-v"])
    markdown: bool = option(False, "print the figures as a markdown table")
    quiet: bool = option(False, "no progress bar", aliases=["-q"])

    def __post_init__(self):
        if self.name != "codecontests":
            raise ValueError(f"tasks quality: the dataset must be codecontests, got {self.name!r}")
        if self.tests is not None and self.tests_file is not None:
            raise ValueError("give --tests (the dataset's) or --tests_file, not both")
        if self.references is not None and self.references < 1:
            raise ValueError(f"--references must be at least 1, got {self.references}")


class TasksCommand(OptionsCommand):
    name = "tasks"
    help = "datasets: load, check and validate them; measure tests against their programs"
    positional = ("name",)
    SUBCOMMANDS = {"check": (CheckOptions, BenchmarkOptions, ExecutionOptions),
                   "validate": (ValidateOptions, ExecutionOptions),
                   "quality": (QualityOptions, ExecutionOptions)}
    HELP = {"check": "run a dataset's reference (and incorrect) solutions through the sandbox, "
                     "per problem",
            "validate": "codecontests: drop generated tests that several of the dataset's "
                        "correct solutions dispute; write the cleaned file",
            "quality": "codecontests: how many wrong programs a set of tests catches, how many "
                       "correct ones it fails, and its tests' accuracy, p01 and p00, per language"}

    def register(self, sub) -> None:
        t = self.add_parser(sub)
        tsub = t.add_subparsers(dest="tasks_cmd")
        for name, text in self.HELP.items():
            tsub.add_parser(name, help=text)

    def parse(self, argv, options=None, positional=None, prog=None, description=None):
        return super().parse(_old_dataset_config(argv), options, positional, prog, description)

    def run(self, args, argv: list[str]) -> int:
        if not argv or argv[0] not in self.SUBCOMMANDS:
            if argv and argv[0] in ("-h", "--help"):
                print("usage: coevo tasks {check,validate,quality} ... (`coevo tasks check "
                      "--help`)")
                return 0
            raise CLIError("tasks: choose check, validate or quality (`coevo tasks check "
                           "--help`)")
        cmd = argv[0]
        parsed = self.parse(argv[1:], self.SUBCOMMANDS[cmd], prog=f"coevo tasks {cmd}",
                            description=self.HELP[cmd])
        if parsed is None:
            return 0
        return getattr(self, cmd)(*parsed)

    def check(self, args: CheckOptions, bench: BenchmarkOptions,
              execution: ExecutionOptions) -> int:
        from tqdm import tqdm

        from ..tasks import LoaderError, check_tasks, load_tasks

        options = dataset_options(args)
        options.update(bench.loader_options())
        if args.limit is not None:
            if args.name.lower() not in PLUS:
                raise CLIError("--limit applies to humanevalplus and mbppplus")
            options.update(limit=args.limit, seed=args.seed)
        ex = make_executor(execution)
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
            from ..tasks.check import reference_count
            from ..tasks.codecontests import parse_languages, reference_cap
            try:
                languages = parse_languages(args.languages or "python")
            except LoaderError as e:
                raise CLIError(str(e))
            cells = sum(len(t.tests) * min(reference_count(t, lang),
                                           reference_cap(args.references, lang) or 1 << 62)
                        for t in ts for lang in languages)  # the references' cells
            with tqdm(total=cells, unit="cell", disable=args.quiet, file=sys.stderr) as bar:
                report = check_tasks(ts, ex, progress=bar.update, references=args.references,
                                     incorrect=not args.no_incorrect, languages=languages)
        finally:
            ex.close()
        show(args, report, lambda: {"summary": report.summary(), "load": ts.summary(),
                                    "problems": [p.to_dict() for p in report.per_problem]})
        return 0 if not report.failed else 1

    def validate(self, args: ValidateOptions, execution: ExecutionOptions) -> int:
        from tqdm import tqdm

        from ..tasks import LoaderError
        from ..tasks.validate import validate_codecontests

        ex = make_executor(execution)
        try:
            with tqdm(unit="cell", disable=args.quiet, file=sys.stderr) as bar:
                rows = validate_codecontests(args.path, args.output, ex,
                                             references=args.references, progress=bar.update,
                                             languages=args.languages,
                                             min_dispute=args.min_dispute)
        except LoaderError as e:
            raise CLIError(str(e))
        finally:
            ex.close()
        for r in rows:
            print(r.line())
        dropped = sum(len(r.dropped) for r in rows)
        generated = sum(r.generated for r in rows if not r.skipped)
        skipped = sum(1 for r in rows if r.skipped)
        contested = sum(len(r.contested) for r in rows)
        print(f"codecontests: {dropped} of {generated} generated tests dropped in "
              f"{len(rows) - skipped} validated rows ({skipped} not validated; {contested} "
              f"contested tests kept); cleaned file: {args.output}")
        if args.report:
            with open(args.report, "w", encoding="utf-8") as f:
                json.dump([{"name": r.name, "skipped": r.skipped, **r.record()} for r in rows],
                          f, indent=1)
        return 0

    def quality(self, args: QualityOptions, execution: ExecutionOptions) -> int:
        from tqdm import tqdm

        from ..tasks import LoaderError
        from ..tasks.codecontests import load_codecontests, parse_gold, parse_languages
        from ..tasks.quality import cell_count, measure_quality, read_tests_file, \
            tests_description

        try:
            languages = parse_languages(args.languages)
            kinds = parse_gold(args.tests or "generated") if args.tests_file is None else None
            ts = load_codecontests(args.path, split=args.split, languages=languages,
                                   **({"gold": kinds} if kinds else {}))
            print(ts.summary())
            if args.tests_file is not None:
                tests, labels, unparsed = read_tests_file(args.tests_file, ts.tasks)
                tasks = [t for t in ts if t.id in tests]
                tests_of, labels_of = (lambda t: tests[t.id]), (lambda t: labels[t.id])
            else:
                tasks, tests_of, labels_of, unparsed = list(ts), (lambda t: t.tests), None, {}
        except LoaderError as e:
            raise CLIError(str(e).replace("--gold_tests:", "--tests:"))
        if not tasks:
            raise CLIError("tasks quality: no problem has a test to measure")
        cells = sum(cell_count(t, len(tests_of(t)), languages, args.references) for t in tasks)
        ex = make_executor(execution)
        try:
            with tqdm(total=cells, unit="cell", disable=args.quiet, file=sys.stderr) as bar:
                report = measure_quality(tasks, tests_of, ex, languages, args.references,
                                         args.seed, progress=bar.update, labels_of=labels_of,
                                         tests_name=tests_description(kinds, args.tests_file))
        finally:
            ex.close()
        for p in report.per_problem:
            p.unparsed = unparsed.get(p.id, 0)
        show(args, report, lambda: {"load": ts.summary(), "references": args.references,
                                    "seed": args.seed, **report.to_dict()})
        return 1 if any((p.skipped or "").startswith("executor error") for p in
                        report.per_problem) else 0


def show(args, report, record) -> None:
    """What ``check`` and ``quality`` print: a line per problem (``-v``), the markdown table
    (``--markdown``), the summary; ``record()`` goes to ``--report`` as JSON."""
    if args.verbose:
        for p in report.per_problem:
            print("  " + p.line())
    if args.markdown:
        print(report.table())
    print(report.summary())
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump(record(), f, indent=1)


def _references(spec):
    """``--references`` checked when parsed (a bad count or language is the flag's error)."""
    from ..tasks import LoaderError
    from ..tasks.codecontests import parse_references
    try:
        return parse_references(spec)
    except LoaderError as e:
        raise ValueError(str(e)) from None


def _old_dataset_config(argv: list[str]) -> list[str]:
    """``--config default|verifiable`` (codeforces, the old spelling of ``--dataset_config``)
    as the new one, with the warning; any other ``--config`` is the options' YAML file."""
    import warnings

    from ..argv import RenamedFlagWarning, flag_value, pop_flag
    try:
        value = flag_value(argv, "--config")
    except ValueError:
        return argv
    if value not in ("default", "verifiable"):
        return argv
    warnings.warn("coevo tasks check: --config default|verifiable is now --dataset_config (the "
                  "old spelling works until the next release)", RenamedFlagWarning, stacklevel=2)
    _, rest = pop_flag(argv, "--config")
    return rest + [f"--dataset_config={value}"]


def dataset_options(args) -> dict:
    """Loader options from the dataset flags; a flag that does not apply is a one-line error."""
    name = args.name.lower().replace("-", "").replace("_", "")
    options = {}
    if args.split:
        options["split"] = args.split
    if args.gold_tests is not None:
        if name != "codecontests":
            raise CLIError("--gold_tests applies to codecontests")
        options["gold"] = args.gold_tests
    if args.dataset_config is not None:
        if name != "codeforces":
            raise CLIError("--dataset_config applies to codeforces")
        options["config"] = args.dataset_config
    if getattr(args, "languages", None) is not None:
        if name not in ("codecontests", "codeforces"):
            raise CLIError("--languages applies to codecontests and codeforces")
        options["languages"] = args.languages
    if getattr(args, "submissions", None) is not None:
        if name != "codeforces":
            raise CLIError("--submissions applies to codeforces")
        options["submissions"] = args.submissions
    return options
