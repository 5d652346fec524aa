"""``coevo eval`` (a model as coder and tester on a benchmark, or existing samples scored) and
``coevo rank`` (one solution per problem chosen by a ranker): progress and files; their options
are dataclasses (:mod:`coevo_code.evaluation.options`, :mod:`coevo_code.generation.options`,
:mod:`coevo_code.execution.options`), the work lives in :mod:`coevo_code.evaluation`."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

from ..evaluation.options import BenchmarkOptions, EvalOptions, RankOptions
from ..execution.options import ExecutionOptions
from ..generation.options import GenerationOptions
from .base import PLUS, CLIError, OptionsCommand, make_executor


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


def lost_note(results: dict) -> str | None:
    """One line on the cells the harness lost (``sandbox_error``): what they left undecided,
    which no figure counts (never a failure of the model); None when there were none."""
    n = results.get("sandbox_errors")
    if not n:
        return None
    if "samples_undecided" in results:
        what = f"{results['samples_undecided']} sample(s)"
    else:
        what = (f"{results.get('solutions_undecided', 0)} solution(s) and "
                f"{results.get('tests_undecided', 0)} generated test(s)")
    return (f"{n} cell(s) ended sandbox_error (the sandbox failed, not the model, twice): {what} "
            f"left undecided and out of the figures, not counted as wrong")


def repair_line(results: dict) -> str:
    """The printed line of a repair evaluation: gold accuracy after each turn, the share of
    wrong first attempts repaired and the share of right ones a revision broke (n/a, with the
    count, when there was none)."""
    m, r = results["metrics"], results["repair"]
    parts = [f"{k}={m[k]:.3f}" if m.get(k) is not None else f"{k}=n/a"
             for k in m if k.startswith("code_acc_turn")]
    for key, n, of, what in (("repaired_share", "repaired", "wrong_first", "wrong"),
                             ("broken_share", "broken", "right_first", "right")):
        share = m.get(key)
        parts.append(f"{key}={share:.3f} ({r[n]} of {r[of]} {what} first attempts)"
                     if share is not None else f"{key}=n/a ({r[of]} {what} first attempts)")
    return "  ".join(parts)


TESTER_ROLE = "test#tester"  # the generation cache's role of a feedback tester's tests


def _tester_tests(args: EvalOptions, gen: GenerationOptions, ts, cache) -> dict:
    """``--feedback_tests tester:MODEL``: k_test tests of each problem written by MODEL (the
    tester prompt, MODEL's own sampling seed as the run's), through the generation cache."""
    from ..generation.engines import make_engine
    from ..roles import tester_messages
    model = args.feedback_tests[len("tester:"):].strip()
    out, todo = {}, []
    for t in ts:
        got = cache.get(t.id, TESTER_ROLE, args.k_test)
        if got is None:
            todo.append(t)
        else:
            out[t.id] = got
    if todo:
        engine = make_engine(gen.engine, model, gen.sampling(args.seed), **gen.engine_options())
        try:
            texts = engine.generate([tester_messages(t) for t in todo], args.k_test)
        finally:
            engine.close()
        for t, got in zip(todo, texts):
            cache.put(t.id, TESTER_ROLE, list(got))
            out[t.id] = list(got)
    return out


def _repair(args: EvalOptions, gen: GenerationOptions, ts, prompted, gens: dict, problems,
            engine, ex, cache, summary) -> dict:
    """Repair turns after the first (:mod:`coevo_code.evaluation.repair`): the per-turn figures
    go into ``summary["metrics"]``; returns the results' ``repair`` block and each problem's
    verdicts by turn. ``prompted``: the tasks as the prompts show them (``--hide_examples``:
    without their examples, which stay the public feedback)."""
    import numpy as np

    from ..evaluation.repair import run_repair
    from ..generation.engines import EngineError
    from ..repair import FIELD_CHARS, MAX_FAILING, turn_figures, turn_metrics
    from ..roles import TEST
    first = {p.task_id: [float("nan") if u else float(c) for c, u in zip(p.correct, p.undecided)]
             for p in problems if p.has_gold}
    mode = args.feedback_tests
    try:
        if mode.startswith("tester:"):  # the tester's tests stand in for the model's own
            tester = _tester_tests(args, gen, prompted, cache)
            gens = {**gens, **{(tid, TEST): texts for tid, texts in tester.items()}}
            mode = "self"
        eps = run_repair(list(prompted), gens, first, args.k_code, args.k_test, engine, ex,
                         args.repair_turns, mode, cache=cache,
                         examples={t.id: list(t.examples) for t in ts},
                         agreement=args.feedback_agreement)
    except EngineError as e:
        raise CLIError(f"{e} (generations so far are kept in {cache.path})")
    finally:
        engine.close()
    tm = turn_metrics([pe.correct for pe in eps.values()])
    summary["metrics"].update(turn_figures(tm))
    turns_used = [e.turns for pe in eps.values() for e in pe.episodes]
    block = {"turns": args.repair_turns, "feedback_tests": args.feedback_tests,
             "feedback_agreement": args.feedback_agreement,
             "max_failing_shown": MAX_FAILING, "field_chars": FIELD_CHARS,
             "wrong_first": tm["wrong_first"], "repaired": tm["repaired"],
             "right_first": tm["right_first"], "broken": tm["broken"],
             "solutions_by_turns_used": {str(t): turns_used.count(t)
                                         for t in range(1, args.repair_turns + 1)}}
    per_task = {tid: [[None if np.isnan(x) else bool(x) for x in row] for row in pe.correct]
                for tid, pe in eps.items()}
    return {"summary": block, "per_task": per_task}


def _load(args: EvalOptions, bench: BenchmarkOptions, executor, for_samples: bool):
    from ..tasks import LoaderError, load_tasks
    from ..tasks.model import seeded_sample
    name = args.benchmark.lower().replace("-", "").replace("_", "")
    options = {"split": args.split} if args.split else {}
    options.update(bench.loader_options())
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


def evaluate(args: EvalOptions, bench: BenchmarkOptions, gen: GenerationOptions,
             execution: ExecutionOptions) -> int:
    from tqdm import tqdm

    from ..evaluation.harness import RANKERS, judge, parse_bon, summarize
    from ..evaluation.report import write_results
    from ..evaluation.samples import SampleError, per_task, read_samples, score_samples
    from ..generation.cache import GenerationCache, generate_all
    from ..generation.engines import EngineError, make_engine

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
    if args.repair_turns > 1 and args.samples:
        raise CLIError("--repair_turns needs a model to revise solutions: not with --samples")
    if args.repair_turns > 1 and args.feedback_tests != "public" and not args.k_test:
        raise CLIError(f"--feedback_tests {args.feedback_tests} checks solutions with k_test "
                       f"generated tests of each problem: give --k_test >= 1")
    ex = make_executor(execution)
    t0 = time.time()
    try:
        ts = _load(args, bench, ex, for_samples=bool(args.samples))
        if not args.quiet:
            print(ts.summary(), file=sys.stderr)
        prompted = ([dataclasses.replace(t, examples=[]) for t in ts] if args.hide_examples
                    else list(ts))
        if args.samples:
            try:
                samples = read_samples(Path(args.samples), ts)
            except SampleError as e:
                raise CLIError(str(e))
            cells = sum(len(v) * len(t.tests) for t in ts for v in [samples.get(t.id, [])])
            with tqdm(total=cells, unit="cell", disable=args.quiet, file=sys.stderr) as bar:
                summary, verdicts = score_samples(ts, samples, ex, progress=bar.update)
            for r in summary.get("tasks_refused", []):
                print(f"warning: {r['error']} (left out)", file=sys.stderr)
            results = {**summary, "samples_file": str(args.samples), "per_task": per_task(verdicts)}
        else:
            sampling = gen.sampling(args.seed)
            try:
                engine = make_engine(gen.engine, args.model, sampling, **gen.engine_options())
                cache = GenerationCache(out / "generations.jsonl")
                total = len(ts) * ((args.k_code > 0) + (args.k_test > 0))
                with tqdm(total=total, unit="prompt", desc="generate", disable=args.quiet,
                          file=sys.stderr) as bar:
                    gens = generate_all(prompted, engine, args.k_code, args.k_test, cache,
                                        progress=bar.update)
                if args.repair_turns <= 1:
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
                refused: list = []
                problems = judge(list(ts), gens, args.k_code, args.k_test, ex, progress=grow,
                                 refused=refused)
            for r in refused:  # left out of every figure; the others are scored
                print(f"warning: {r['error']} (left out)", file=sys.stderr)
            summary = summarize(problems, bon, rankers, bootstrap=args.bootstrap, seed=args.seed)
            repair = None
            if args.repair_turns > 1:
                repair = _repair(args, gen, ts, prompted, gens, problems, engine, ex, cache,
                                 summary)
            if refused:
                summary["problems_refused"] = refused
            if ts.skipped:
                summary["rows_skipped"] = list(ts.skipped)
            results = {"benchmark": ts.name, "source": ts.origin, "model": args.model,
                       "engine": gen.engine, "k_code": args.k_code, "k_test": args.k_test,
                       "bon": [f"{n}x{m}" for n, m in bon], "rankers": rankers,
                       **({"notes": bon_notes} if bon_notes else {}),
                       "sampling": vars(sampling),
                       **({"hide_examples": True} if args.hide_examples else {}), **summary,
                       "per_task": {p.task_id: {"correct": [None if u else bool(c) for c, u
                                                            in zip(p.correct, p.undecided)],
                                                "matrix": p.matrix.astype(int).tolist(),
                                                "n_gold": p.n_gold} for p in problems}}
            if repair is not None:
                results["repair"] = repair["summary"]
                for tid, rows in repair["per_task"].items():
                    results["per_task"][tid]["correct_by_turn"] = rows
    finally:
        ex.close()
    lost = lost_note(results)
    if lost:
        results.setdefault("notes", []).append(lost)
        print(f"note: {lost}", file=sys.stderr)
    results["seconds"] = round(time.time() - t0, 2)
    paths = write_results(out, results)
    shown = results.get("metrics") or {k: v for k, v in results.items() if k.startswith("pass@")}
    print("  ".join(f"{k}={v:.3f}" for k, v in list(shown.items())[:8] if v is not None))
    if results.get("repair"):
        print(repair_line(results))
    for p in paths:
        print(p)
    return 0


def rank(args: RankOptions, selection: BenchmarkOptions, gen: GenerationOptions,
         execution: ExecutionOptions) -> int:
    from ..evaluation.rank import ALL_RANKERS, dumps, prepare_records, rank_items
    from ..generation.engines import EngineError, make_engine
    from ..tasks import LoaderError, load_tasks

    if args.ranker not in ALL_RANKERS:
        raise CLIError(f"--ranker: unknown {args.ranker!r}; choose from {', '.join(ALL_RANKERS)}")
    if args.tester and not args.benchmark:
        raise CLIError("--tester writes tests from the problem statements: give --benchmark too")
    if args.input is None:
        raise CLIError("give the input JSONL (a file, or - for stdin)")
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
                               **selection.loader_options())
        except LoaderError as e:
            raise CLIError(str(e))
    try:
        engine = (make_engine(gen.engine, args.tester, gen.sampling(args.seed),
                              **gen.engine_options()) if args.tester else None)
        items = prepare_records(records, bench, engine, args.k_test)
    except EngineError as e:
        raise CLIError(str(e))
    for it, (k, rec) in zip(items, records):
        if isinstance(rec, dict) and "__bad__" in rec:
            it.clear()
            it.update({"k": k, "id": str(k), "error": rec["__bad__"]})
    ex = make_executor(execution)
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


class EvalCommand(OptionsCommand):
    name = "eval"
    help = "evaluate a model (coder and tester) on a benchmark, or score existing samples"
    options = (EvalOptions, BenchmarkOptions, GenerationOptions, ExecutionOptions)

    def main(self, *options) -> int:
        return evaluate(*options)


class RankCommand(OptionsCommand):
    name = "rank"
    help = "choose one solution per problem with a ranker (JSONL in/out)"
    options = (RankOptions, BenchmarkOptions, GenerationOptions, ExecutionOptions)
    positional = ("input",)

    def main(self, *options) -> int:
        return rank(*options)
