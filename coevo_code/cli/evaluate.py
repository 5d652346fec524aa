"""``coevo eval`` (a model as coder and tester on a benchmark, or existing samples scored) and
``coevo rank`` (one solution per problem chosen by a ranker): argument handling, progress and
files; the work lives in :mod:`coevo_code.evaluation`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..argv import given_flags
from ..generation.engines import ENGINES
from .base import PLUS, CLIError, Command, make_executor, sandbox_flags


def benchmark_flags(p) -> None:
    """The benchmark selection flags every command that takes a benchmark has."""
    p.add_argument("--release", help="livecodebench: release_v1 ... release_v6 (cumulative), "
                                     "release_latest (default), or v1 ... v6 (one release)")
    p.add_argument("--start-date", help="livecodebench: first contest date kept (YYYY-MM-DD)")
    p.add_argument("--end-date", help="livecodebench: last contest date kept (YYYY-MM-DD)")
    p.add_argument("--platform", help="livecodebench: leetcode, atcoder and/or codeforces "
                                      "(comma-separated)")
    p.add_argument("--livebench-date", help="livebench: questions as of this date (default "
                                            "today): removed ones are left out")


BENCHMARK_OPTIONS = ("release", "start_date", "end_date", "platform", "livebench_date")


def benchmark_options(args) -> dict:
    """The loader options the benchmark flags set (only those given)."""
    return {k: getattr(args, k) for k in BENCHMARK_OPTIONS
            if getattr(args, k, None) not in (None, "")}


def fit_bon(bon: list[tuple[int, int]], k_code: int, k_test: int
            ) -> tuple[list[tuple[int, int]], list[str]]:
    """Best-of-N settings at the size actually drawn: an N above ``k_code`` or an M above
    ``k_test`` is reported as ``min(N, k_code) x min(M, k_test)``, each change with a note;
    settings that become the same are reported once."""
    out, notes = [], []
    for n, m in bon:
        fit = (min(n, k_code), min(m, k_test))
        if fit != (n, m):
            notes.append(f"bon {n}x{m} asked but only {k_code} solutions and {k_test} tests "
                         f"were drawn: reported as bon_{fit[0]}x{fit[1]}")
        if fit not in out:
            out.append(fit)
    return out, notes


def add_eval_arguments(e) -> None:
    e.add_argument("--config", help="YAML of any of these flags (underscores for dashes); "
                                    "flags given on the command line win")
    e.add_argument("--benchmark", help="a dataset name (see `coevo tasks check`)")
    e.add_argument("--data", help="a local copy of the benchmark (default: its public source)")
    e.add_argument("--split", help="dataset split")
    benchmark_flags(e)
    e.add_argument("--limit", type=int, help="a seeded sample of this many problems")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--samples", help="score this JSONL of solutions (evalplus format: task_id "
                                     "plus solution or completion) instead of generating")
    e.add_argument("--model", help="local path or hub id (or `tiny`); with --engine openai: the "
                                   "served model's name")
    e.add_argument("--engine", default="transformers", choices=ENGINES)
    e.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    e.add_argument("--api-key", help="bearer token for --engine openai (or none)")
    e.add_argument("--concurrency", type=int, default=8, help="openai: requests in flight")
    e.add_argument("--requests-per-s", type=float, help="openai: request rate cap")
    e.add_argument("--k-code", type=int, default=16, help="solutions per problem")
    e.add_argument("--k-test", type=int, default=16, help="unit tests per problem")
    e.add_argument("--bon", default="4x4,16x16", help="best-of-N settings NxM, comma-separated")
    e.add_argument("--rankers", default="cure,codet,first",
                   help="comma-separated: cure, codet, codet_sqrt, first")
    e.add_argument("--temperature", type=float, default=1.0)
    e.add_argument("--top-p", type=float, default=1.0)
    e.add_argument("--max-tokens", type=int, default=1024)
    e.add_argument("--batch-size", type=int, default=8, help="transformers: prompts per batch")
    e.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the CIs")
    e.add_argument("-o", "--output", help="output directory")
    e.add_argument("--slots", type=int, default=None)
    e.add_argument("--allow-unsafe", action="store_true")
    e.add_argument("-q", "--quiet", action="store_true")
    sandbox_flags(e)


def _apply_config(args, path: Path, argv: list[str]) -> None:
    """Set the flags a YAML file names, except those given on the command line ``argv``."""
    import yaml
    if not path.is_file():
        raise CLIError(f"--config: no such file {path}")
    try:
        cfg = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise CLIError(f"--config {path}: not valid YAML ({str(e).splitlines()[0]})")
    if not isinstance(cfg, dict):
        raise CLIError(f"--config {path}: must hold a mapping of flag: value")
    given = given_flags(argv) | ({"output"} if "-o" in argv else set())
    for key, value in cfg.items():
        name = str(key).replace("-", "_")
        if not hasattr(args, name) or name in ("func", "config"):
            raise CLIError(f"--config {path}: unknown flag {key!r}")
        if name not in given:
            setattr(args, name, value)


def _load(args, executor, for_samples: bool):
    from ..tasks import LoaderError, load_tasks
    from ..tasks.model import seeded_sample
    name = args.benchmark.lower().replace("-", "").replace("_", "")
    options = {"split": args.split} if args.split else {}
    options.update(benchmark_options(args))
    if name in PLUS:
        options.update(executor=executor, chunk=None if for_samples else 50)
        if for_samples:  # expected outputs only for the tasks that have samples
            from ..evaluation.samples import sample_task_ids
            ids = sample_task_ids(Path(args.samples))
            if ids is not None:
                options.update(task_ids=ids)
        if args.limit is not None:
            options.update(limit=args.limit, seed=args.seed)
    try:
        ts = load_tasks(args.benchmark, args.data, **options)
    except LoaderError as e:
        raise CLIError(str(e))
    if name not in PLUS:  # the "+" loaders sample before computing expected outputs
        ts.tasks = seeded_sample(ts.tasks, args.limit, args.seed)
    return ts


def evaluate(args, argv: list[str]) -> int:
    from tqdm import tqdm

    from ..evaluation.harness import RANKERS, judge, parse_bon, summarize
    from ..evaluation.report import write_results
    from ..evaluation.samples import SampleError, per_task, read_samples, score_samples
    from ..generation.cache import GenerationCache, generate_all
    from ..generation.engines import EngineError, Sampling, make_engine

    if args.config:
        _apply_config(args, Path(args.config), argv)
    for flag in ("benchmark", "output"):
        if not getattr(args, flag):
            raise CLIError(f"--{flag} is required (on the command line or in --config)")
    out = Path(args.output)
    try:
        bon = parse_bon(args.bon)
    except ValueError as e:
        raise CLIError(str(e))
    rankers = [r.strip() for r in args.rankers.split(",") if r.strip()]
    bad = [r for r in rankers if r not in RANKERS]
    if bad:
        raise CLIError(f"--rankers: unknown {', '.join(bad)}; choose from {', '.join(RANKERS)}")
    bon_notes: list[str] = []
    if not args.samples:
        bon, bon_notes = fit_bon(bon, args.k_code, args.k_test)
        for note in bon_notes:
            print(f"note: {note}", file=sys.stderr)
    if not args.samples and not args.model:
        raise CLIError("give --model (to generate) or --samples (to score existing solutions)")
    for flag in ("k_code", "k_test", "limit", "concurrency", "batch_size"):
        v, least = getattr(args, flag), 1 if flag != "k_test" else 0
        if v is not None and v < least:
            raise CLIError(f"--{flag.replace('_', '-')} must be >= {least}, got {v}")
    ex = make_executor(args)
    t0 = time.time()
    try:
        ts = _load(args, ex, for_samples=bool(args.samples))
        if not args.quiet:
            print(ts.summary(), file=sys.stderr)
        if args.samples:
            try:
                samples = read_samples(Path(args.samples), ts)
            except SampleError as e:
                raise CLIError(str(e))
            cells = sum(len(v) * len(t.tests) for t in ts for v in [samples.get(t.id, [])])
            with tqdm(total=cells, unit="cell", disable=args.quiet, file=sys.stderr) as bar:
                summary, verdicts = score_samples(ts, samples, ex, progress=bar.update)
            results = {**summary, "samples_file": str(args.samples), "per_task": per_task(verdicts)}
        else:
            sampling = Sampling(temperature=args.temperature, top_p=args.top_p,
                                max_tokens=args.max_tokens, seed=args.seed)
            try:
                engine = make_engine(args.engine, args.model, sampling, base_url=args.base_url,
                                     api_key=args.api_key, concurrency=args.concurrency,
                                     requests_per_s=args.requests_per_s,
                                     batch_size=args.batch_size)
                cache = GenerationCache(out / "generations.jsonl")
                total = len(ts) * ((args.k_code > 0) + (args.k_test > 0))
                with tqdm(total=total, unit="prompt", desc="generate", disable=args.quiet,
                          file=sys.stderr) as bar:
                    gens = generate_all(list(ts), engine, args.k_code, args.k_test, cache,
                                        progress=bar.update)
                engine.close()
            except EngineError as e:
                kept = out / "generations.jsonl"
                raise CLIError(f"{e} (generations so far are kept in {kept})" if kept.exists()
                               else str(e))
            with tqdm(total=0, unit="cell", desc="execute", disable=args.quiet,
                      file=sys.stderr) as bar:
                def grow(n):
                    bar.total = max(bar.total or 0, bar.n + n)
                    bar.update(n)
                problems = judge(list(ts), gens, args.k_code, args.k_test, ex, progress=grow)
            summary = summarize(problems, bon, rankers, bootstrap=args.bootstrap, seed=args.seed)
            results = {"benchmark": ts.name, "source": ts.origin, "model": args.model,
                       "engine": args.engine, "k_code": args.k_code, "k_test": args.k_test,
                       "bon": [f"{n}x{m}" for n, m in bon], "rankers": rankers,
                       **({"notes": bon_notes} if bon_notes else {}),
                       "sampling": vars(sampling), **summary,
                       "per_task": {p.task_id: {"correct": p.correct.tolist(),
                                                "matrix": p.matrix.astype(int).tolist(),
                                                "n_gold": p.n_gold} for p in problems}}
    finally:
        ex.close()
    results["seconds"] = round(time.time() - t0, 2)
    paths = write_results(out, results)
    shown = results.get("metrics") or {k: v for k, v in results.items() if k.startswith("pass@")}
    print("  ".join(f"{k}={v:.3f}" for k, v in list(shown.items())[:8] if v is not None))
    for p in paths:
        print(p)
    return 0


def add_rank_arguments(r) -> None:
    r.add_argument("input", help="JSONL: {id, kind, solutions, tests} per line (see docs)")
    r.add_argument("-o", "--output", default="-", help="JSONL out (default: stdout)")
    r.add_argument("--ranker", default="cure", help="cure, codet, codet_sqrt, mbr or first")
    r.add_argument("--benchmark", help="problems by task_id from this dataset")
    r.add_argument("--data", help="a local copy of the benchmark")
    r.add_argument("--split")
    benchmark_flags(r)
    r.add_argument("--tester", help="a tester model writing the tests (with --benchmark)")
    r.add_argument("--engine", default="transformers", choices=ENGINES)
    r.add_argument("--base-url")
    r.add_argument("--api-key")
    r.add_argument("--k-test", type=int, default=8)
    r.add_argument("--max-tokens", type=int, default=1024)
    r.add_argument("--temperature", type=float, default=1.0)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--slots", type=int, default=None)
    r.add_argument("--allow-unsafe", action="store_true")
    sandbox_flags(r)


def rank(args) -> int:
    from ..evaluation.rank import ALL_RANKERS, dumps, prepare_records, rank_items
    from ..generation.engines import EngineError, Sampling, make_engine
    from ..tasks import LoaderError, load_tasks

    if args.ranker not in ALL_RANKERS:
        raise CLIError(f"--ranker: unknown {args.ranker!r}; choose from {', '.join(ALL_RANKERS)}")
    if args.tester and not args.benchmark:
        raise CLIError("--tester writes tests from the problem statements: give --benchmark too")
    src = sys.stdin if args.input == "-" else None
    if src is None:
        if not Path(args.input).is_file():
            raise CLIError(f"no such input file: {args.input}")
        src = open(args.input, encoding="utf-8")
    records = []
    for k, line in enumerate(src, 1):
        if line.strip():
            try:
                records.append((k, json.loads(line)))
            except json.JSONDecodeError as e:
                records.append((k, {"__bad__": f"line {k}: not valid JSON ({e.msg})"}))
    bench = None
    if args.benchmark:
        try:
            bench = load_tasks(args.benchmark, args.data,
                               **({"split": args.split} if args.split else {}),
                               **benchmark_options(args))
        except LoaderError as e:
            raise CLIError(str(e))
    try:
        engine = (make_engine(args.engine, args.tester, Sampling(
            temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed),
            base_url=args.base_url, api_key=args.api_key) if args.tester else None)
        items = prepare_records(records, bench, engine, args.k_test)
    except EngineError as e:
        raise CLIError(str(e))
    for it, (k, rec) in zip(items, records):
        if isinstance(rec, dict) and "__bad__" in rec:
            it.clear()
            it.update({"k": k, "id": str(k), "error": rec["__bad__"]})
    ex = make_executor(args)
    try:
        rows = rank_items(items, ex, args.ranker)
    finally:
        ex.close()
    text = dumps(rows)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
        print(f"{sum('error' not in r for r in rows)} of {len(rows)} ranked -> {args.output}",
              file=sys.stderr)
    return 0 if all("error" not in r for r in rows) else 1


class EvalCommand(Command):
    name = "eval"
    help = "evaluate a model (coder and tester) on a benchmark, or score existing samples"

    def register(self, sub) -> None:
        add_eval_arguments(self.add_parser(sub))

    def run(self, args, argv: list[str]) -> int:
        return evaluate(args, argv)


class RankCommand(Command):
    name = "rank"
    help = "choose one solution per problem with a ranker (JSONL in/out)"

    def register(self, sub) -> None:
        add_rank_arguments(self.add_parser(sub))

    def run(self, args, argv: list[str]) -> int:
        return rank(args)
