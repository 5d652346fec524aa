"""The ``coevo`` command. Thin: parsing, progress and files; the work lives in the library."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

EXAMPLE_JOBS = Path(__file__).resolve().parent / "examples" / "jobs.jsonl"


def _die(msg: str, code: int = 2) -> None:
    print(f"coevo: {msg}", file=sys.stderr)
    raise SystemExit(code)


def _executor(args):
    """The executor the sandbox flags ask for (``--backend``, ``--address``, ``--slots``,
    ``--launcher``...), through the one factory; a refusal is one line."""
    from .execution import IsolationError
    from .execution.backends import executor_from_args
    try:
        return executor_from_args(args)
    except (IsolationError, RuntimeError, ValueError, ImportError) as e:
        _die(str(e).splitlines()[0])


def _read_jobs(stream):
    """(line number, parsed job or an error result) for each non-empty line."""
    for k, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            job = json.loads(line)
        except json.JSONDecodeError as e:
            yield k, {"__bad_line__": f"line {k}: not valid JSON ({e.msg} at column {e.colno})"}
            continue
        if not isinstance(job, dict):
            yield k, {"__bad_line__": f"line {k}: a job must be a JSON object, got "
                                      f"{type(job).__name__} "
                                      f"({'array' if isinstance(job, list) else 'not an object'})"}
            continue
        yield k, job


def cmd_execute(args) -> int:
    """Run JOBS.jsonl through the sandbox; write one result line per job, in order, as each batch
    finishes (so nothing already computed is lost if the run is stopped)."""
    from tqdm import tqdm

    src = sys.stdin if args.jobs == "-" else None
    if src is None:
        path = Path(args.jobs)
        if not path.is_file():
            _die(f"no such jobs file: {args.jobs}")
        src = path.open(encoding="utf-8", errors="surrogateescape")
    t_start = time.monotonic()
    ex = _executor(args)  # before the output is opened: a refusal leaves no empty file behind
    t_ready = time.monotonic()
    if args.output == "-":
        out = sys.stdout
    else:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        out = open(args.output, "w", encoding="utf-8")
    show = not args.quiet and sys.stderr.isatty() or args.progress
    bar = tqdm(total=0, unit="cell", disable=not show, file=sys.stderr)
    n_jobs = n_cells = n_err = 0
    try:
        batch = []
        lines = _read_jobs(src)
        while True:
            batch = []
            for k, job in lines:
                batch.append((k, job))
                if len(batch) >= args.batch:
                    break
            if not batch:
                break
            good = [j for _, j in batch if "__bad_line__" not in j]
            cells = sum(len(j.get("programs") or []) * len(j.get("tests") or [])
                        for j in good if isinstance(j.get("programs"), list)
                        and isinstance(j.get("tests"), list))
            bar.total += cells
            bar.refresh()
            results = iter(ex.run(good, progress=bar.update))
            for k, job in batch:
                if "__bad_line__" in job:
                    res = {"id": None, "error": job["__bad_line__"]}
                else:
                    res = next(results)
                    if "error" in res:
                        res["error"] = f"line {k}: {res['error']}"
                n_jobs += 1
                n_err += "error" in res
                n_cells += sum(len(r) for r in res.get("passed", []))
                out.write(json.dumps(res) + "\n")
            out.flush()
    finally:
        bar.close()
        ex.close()
        if out is not sys.stdout:
            out.close()
    t_end = time.monotonic()
    run_s = t_end - t_ready
    print(f"coevo execute: {n_jobs} jobs ({n_err} malformed), {n_cells} cells in {run_s:.2f} s "
          f"({n_cells / run_s if run_s > 0 else 0:.0f} cells/s; start-up {t_ready - t_start:.2f} s)"
          f"; results: {args.output}", file=sys.stderr)
    return 0


def cmd_doctor(args) -> int:
    """Which isolation layers are active here, and how to enable the missing ones."""
    from .execution import Executor, IsolationError
    from .execution.launchers import BwrapLauncher, DockerLauncher

    advice = {
        "bubblewrap": "install bubblewrap (apt-get install bubblewrap) and allow user namespaces",
        "seccomp": "needs Linux with seccomp filters (x86_64); containers must not forbid prctl",
        "landlock": "needs Linux >= 5.13 with Landlock enabled (lsm=...,landlock on the kernel "
                    "command line); ABI 4 adds TCP rules, ABI 6 signal scoping",
        "uid": "run as root (the server drops each child to a private uid) with a Python "
               "installation readable by other users, or use the bwrap launcher",
        "subreaper": "needs Linux >= 3.4",
        "container": "optional: a Docker engine and the sandbox image (coevo build-image)",
        "disk": "use the bwrap or docker launcher (cells then write on a size-capped private "
                "/tmp)",
    }
    if args.backend == "ray":
        try:
            from .execution.ray_backend import doctor_report
            print(doctor_report(args.address, launcher=args.launcher, use_uid=not args.no_uid))
        except (IsolationError, RuntimeError, ValueError, ImportError) as e:
            _die(str(e).splitlines()[0])
        return 0
    try:
        ex = Executor(slots=1, launcher=args.launcher, allow_unsafe=True, use_uid=not args.no_uid)
    except (IsolationError, RuntimeError, ValueError) as e:
        _die(str(e))
    rep = ex.isolation
    ex.close()
    print(f"launcher: {rep['launcher']}   python: {rep['python']}   "
          f"preloaded: {', '.join(rep['preloaded'])}")
    ok, why = BwrapLauncher().available()
    dok, dwhy = DockerLauncher().available()
    print("available launchers: direct, " + ", ".join(
        x for x, y in (("bwrap", ok), ("docker", dok)) if y))
    width = max(len(k) for k in rep["layers"])
    bad = 0
    for name, (on, detail) in rep["layers"].items():
        mark = "on " if on else "OFF"
        print(f"  [{mark}] {name:<{width}}  {detail}")
        if not on:
            bad += 1
            if name in advice:
                print(f"        {'':<{width}}  to enable: {advice[name]}")
    if not dok:
        print(f"  [OFF] {'container':<{width}}  {dwhy}")
        print(f"        {'':<{width}}  to enable: {advice['container']}")
    protective = {k for k, (on, _) in rep["layers"].items() if on} & {
        "bubblewrap", "seccomp", "landlock", "container"}
    if not protective:
        print("NO ISOLATION: programs would run unprotected; coevo refuses unless --allow-unsafe")
        return 1
    return 0


def cmd_tasks_check(args) -> int:
    """Load a dataset, report what was loaded, run its reference solutions."""
    from tqdm import tqdm

    from .tasks import LoaderError, check_tasks, load_tasks

    ex = _executor(args)
    try:
        options = {}
        if args.split:
            options["split"] = args.split
        if args.limit is not None:
            if args.name.lower() not in ("humanevalplus", "mbppplus"):
                _die("--limit applies to humanevalplus and mbppplus")
            options.update(limit=args.limit, seed=args.seed)
        if args.name.lower() in ("humanevalplus", "mbppplus"):
            options["executor"] = ex
        try:
            ts = load_tasks(args.name, args.path, **options)
        except LoaderError as e:
            _die(str(e))
        print(ts.summary())
        cells = sum(len(t.tests) for t in ts if t.references)
        with tqdm(total=cells, unit="cell", disable=args.quiet, file=sys.stderr) as bar:
            report = check_tasks(ts, ex, progress=bar.update)
    finally:
        ex.close()
    print(report.summary())
    return 0 if not report.failed else 1


TRAIN_HELP = """usage: coevo train [--config FILE | --resume RUN_DIR] [--FIELD VALUE ...]

Train one policy to write solutions and unit tests (CURE) on TRL's GRPOTrainer.
With no --config: the embedded default run: the warm-started tiny model as coder and tester on
the task world (held-out problems scored before, during and after), on CPU, in minutes.
A config with an `agents:` list trains a pair or ring (Co-RL): one trainer process per agent,
one run directory with a subfolder per agent (see configs/pair-tiny-cpu.yaml).
Every field of CoevoConfig (TRL's GRPOConfig plus the co-evolution fields) and of TRL's
ModelConfig can be set in the YAML file or on the command line, e.g. --max_steps 12 --save_steps 1.
--resume RUN_DIR continues a run from its last complete checkpoint, same data order.
`coevo train --help-fields` lists every field."""


def cmd_train(argv: list[str]) -> int:
    """Parse the TRL-style arguments and run :func:`coevo_code.training.train`."""
    if argv and argv[0] in ("-h", "--help"):
        print(TRAIN_HELP)
        return 0
    try:
        from .training.cli import parse_train_args, run_train
    except ImportError as e:
        _die(f"training needs torch, transformers and trl ({e}); pip install -e .")
    if argv and argv[0] == "--help-fields":
        from .training.cli import field_help
        print(field_help())
        return 0
    from .training.pair import is_pair_config
    pair_file, resume = _pair_config(argv)
    if pair_file is not None and is_pair_config(pair_file):
        from .training.pair import PairError, launch, load_pair
        rest = _without(argv, "--config" if not resume else "--resume")
        try:
            return launch(load_pair(pair_file, rest), resume=resume)
        except (PairError, FileExistsError) as e:
            _die(str(e).splitlines()[0])
    try:
        parsed = parse_train_args(argv)
    except (ValueError, FileNotFoundError) as e:
        _die(str(e).splitlines()[0] if str(e) else type(e).__name__)
    return run_train(parsed)


def _pair_config(argv: list[str]) -> tuple[str | None, bool]:
    """The config file a pair run would come from: ``--config F``, or ``--resume DIR``'s
    ``config.yaml``; and whether this is a resume."""
    for i, a in enumerate(argv):
        for flag in ("--config", "--resume"):
            value = None
            if a == flag and i + 1 < len(argv):
                value = argv[i + 1]
            elif a.startswith(flag + "="):
                value = a.split("=", 1)[1]
            if value is not None:
                return (value if flag == "--config" else str(Path(value) / "config.yaml"),
                        flag == "--resume")
    return None, False


def _without(argv: list[str], flag: str) -> list[str]:
    out, skip = [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a == flag:
            skip = True
            continue
        if a.startswith(flag + "="):
            continue
        out.append(a)
    return out


def cmd_report(args) -> int:
    """Draw a run's training curves as PNG files in the run directory."""
    from .training.report import ReportError, draw_report
    try:
        paths = draw_report(Path(args.run_dir))
    except ReportError as e:
        _die(str(e))
    for p in paths:
        print(p)
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "train":
        return cmd_train(argv[1:])
    if argv and argv[0] == "build-image":
        from .execution.image import main as build_image_main
        return build_image_main(argv[1:])
    from .execution.backends import add_backend_arguments
    from .execution.launchers import LAUNCHER_CHOICES

    p = argparse.ArgumentParser(prog="coevo", description="Co-evolving coders and unit testers.")
    sub = p.add_subparsers(dest="cmd", required=True)

    def sandbox_flags(q):
        q.add_argument("--launcher", default="auto", choices=LAUNCHER_CHOICES,
                       help="how slot servers are isolated (auto: bubblewrap if it works here)")
        q.add_argument("--no-uid", action="store_true",
                       help="do not drop children to a per-slot uid when root")
        add_backend_arguments(q)

    e = sub.add_parser("execute", help="run JOBS.jsonl in the sandbox into pass matrices")
    e.add_argument("jobs", nargs="?", default=str(EXAMPLE_JOBS),
                   help="jobs file, one JSON job per line, or - for stdin (default: bundled example)")
    e.add_argument("-o", "--output", default="runs/execute/matrices.jsonl",
                   help="results file, or - for stdout (default: %(default)s)")
    e.add_argument("--slots", type=int, default=None, help="fork servers (default: CPU cores)")
    e.add_argument("--batch", type=int, default=256, help="jobs per batch written out at once")
    e.add_argument("--allow-unsafe", action="store_true",
                   help="run even where no isolation layer is available (unprotected!)")
    e.add_argument("--progress", action="store_true", help="show progress even when not a tty")
    e.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    sandbox_flags(e)
    e.set_defaults(func=cmd_execute)

    d = sub.add_parser("doctor", help="show which sandbox layers are active and how to fix others")
    sandbox_flags(d)
    d.set_defaults(func=cmd_doctor)

    t = sub.add_parser("tasks", help="datasets: load and check them")
    tsub = t.add_subparsers(dest="tasks_cmd", required=True)
    c = tsub.add_parser("check", help="run a dataset's reference solutions through the sandbox")
    c.add_argument("name", help="humaneval, humanevalplus, mbpp, mbppplus, codecontests, "
                                "codeforces, livecodebench, livebench, cure, bundled or native")
    c.add_argument("--path", help="a local file (default: the public source: hub id or package)")
    c.add_argument("--split", help="split (mbpp: prompt/test/validation/train; hub sets)")
    c.add_argument("--limit", type=int, help="humanevalplus/mbppplus: check a seeded sample")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--slots", type=int, default=None)
    c.add_argument("--allow-unsafe", action="store_true")
    c.add_argument("-q", "--quiet", action="store_true")
    sandbox_flags(c)
    c.set_defaults(func=cmd_tasks_check)

    from .evaluation.cli import add_eval_parser, add_rank_parser
    add_eval_parser(sub, sandbox_flags)
    add_rank_parser(sub, sandbox_flags)

    sub.add_parser("train", help="train a coder + unit tester (CURE) on TRL; "
                                 "`coevo train --help` for its flags")
    sub.add_parser("build-image", help="build the docker launcher's sandbox image offline, from "
                                       "this host's Python; `coevo build-image --help`")
    r = sub.add_parser("report", help="draw a run's training curves (PNG) into its directory")
    r.add_argument("run_dir", help="a run directory written by `coevo train`")
    r.set_defaults(func=cmd_report)

    args = p.parse_args(argv)
    if getattr(args, "slots", None) is not None and args.slots < 1:
        _die(f"--slots must be >= 1, got {args.slots}")
    if getattr(args, "batch", 1) < 1:
        _die(f"--batch must be >= 1, got {args.batch}")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
