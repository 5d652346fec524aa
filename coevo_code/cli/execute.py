"""``coevo execute`` (jobs through the sandbox into pass matrices) and ``coevo doctor`` (which
isolation layers are active here)."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..argv import option
from ..execution.options import ExecutionOptions
from .base import CLIError, OptionsCommand, make_executor

EXAMPLE_JOBS = Path(__file__).resolve().parent.parent / "examples" / "jobs.jsonl"


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
        except (ValueError, RecursionError, MemoryError) as e:  # a 5,000-digit number, nesting
            yield k, {"__bad_line__": f"line {k}: not readable JSON ({type(e).__name__}: "
                                      f"{str(e)[:100]})"}
            continue
        if not isinstance(job, dict):
            yield k, {"__bad_line__": f"line {k}: a job must be a JSON object, got "
                                      f"{type(job).__name__} "
                                      f"({'array' if isinstance(job, list) else 'not an object'})"}
            continue
        yield k, job


@dataclass
class ExecuteOptions:
    """``coevo execute``: the jobs, where results go, and the progress shown."""

    jobs: str = option(str(EXAMPLE_JOBS), "jobs file, one JSON job per line, or - for stdin "
                                          "(default: bundled example); also the first bare word")
    output: str = option("runs/execute/matrices.jsonl", "results file, or - for stdout",
                         aliases=["-o"])
    batch: int = option(256, "jobs per batch written out at once")
    progress: bool = option(False, "show progress even when not a tty")
    quiet: bool = option(False, "no progress bar", aliases=["-q"])

    def __post_init__(self):
        if self.batch < 1:
            raise ValueError(f"--batch must be >= 1, got {self.batch}")


class ExecuteCommand(OptionsCommand):
    name = "execute"
    help = "run JOBS.jsonl in the sandbox into pass matrices"
    options = (ExecuteOptions, ExecutionOptions)
    positional = ("jobs",)

    def main(self, args: ExecuteOptions, execution: ExecutionOptions) -> int:
        """Run JOBS.jsonl through the sandbox; write one result line per job, in order, as each
        batch finishes (so nothing already computed is lost if the run is stopped)."""
        from tqdm import tqdm

        src = sys.stdin if args.jobs == "-" else None
        if src is None:
            path = Path(args.jobs)
            if not path.is_file():
                raise CLIError(f"no such jobs file: {args.jobs}")
            src = path.open(encoding="utf-8", errors="surrogateescape")
        t_start = time.monotonic()
        ex = make_executor(execution)  # before the output is opened: a refusal leaves no empty file
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
              f"({n_cells / run_s if run_s > 0 else 0:.0f} cells/s; "
              f"start-up {t_ready - t_start:.2f} s)"
              f"; results: {args.output}", file=sys.stderr)
        return 0


# how to enable each isolation layer `coevo doctor` finds off
ADVICE = {
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
    "slot-cpu": "run where coevo may create cgroups: root with a writable /sys/fs/cgroup (v1, or "
                "v2 with cpu and pids delegated; COEVO_SLOT_CGROUP names a delegated v2 cgroup), "
                "or the docker launcher (a cgroup per container)",
    "slot-pids": "as for slot-cpu, or per-slot uids (root with the bwrap launcher): "
                 "RLIMIT_NPROC then bounds each slot",
}


LANGUAGE_ADVICE = {
    "cpp": "apt-get install g++ (the bwrap and direct launchers see the host's; the docker "
           "image holds no compiler)",
    "java": "apt-get install default-jdk-headless (javac and java; not in the docker image)"}


class DoctorCommand(OptionsCommand):
    name = "doctor"
    help = "show which sandbox layers and generation engines are active, and how to fix others"
    options = (ExecutionOptions,)

    def main(self, args: ExecutionOptions) -> int:
        """Which isolation layers are active here, and how to enable the missing ones."""
        from ..execution import Executor, IsolationError
        from ..execution.launchers import BwrapLauncher, DockerLauncher
        from ..execution.registry import get_backend

        doctor = get_backend(args.exec_backend).doctor  # None: this machine's report, below
        if doctor is not None:
            try:
                print(doctor(args.exec_address, launcher=args.exec_launcher,
                             use_uid=not args.exec_no_uid))
            except (IsolationError, RuntimeError, ValueError, ImportError) as e:
                raise CLIError(str(e).splitlines()[0])
            return 0
        try:
            ex = Executor(slots=1, launcher=args.exec_launcher, allow_unsafe=True,
                          use_uid=not args.exec_no_uid)
        except (IsolationError, RuntimeError, ValueError) as e:
            raise CLIError(str(e))
        rep = ex.isolation
        languages = ex.languages()
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
                if name in ADVICE:
                    print(f"        {'':<{width}}  to enable: {ADVICE[name]}")
        if not dok:
            print(f"  [OFF] {'container':<{width}}  {dwhy}")
            print(f"        {'':<{width}}  to enable: {ADVICE['container']}")
        seeded, how = rep["hash_seed"]
        print(f"  [{'on ' if seeded else 'OFF'}] {'hash seed':<{width}}  {how}")
        print("languages: python" + "".join(f", {k}" for k, (on, _) in languages.items() if on))
        for lang, (on, detail) in languages.items():
            print(f"  [{'on ' if on else 'OFF'}] {lang:<12}  {detail}")
            if not on:
                print(f"        {'':<12}  to enable: {LANGUAGE_ADVICE.get(lang, '')}")
        from ..generation.engines import engine_report
        print("generation engines:")
        for name, on, detail in engine_report():
            print(f"  [{'on ' if on else 'OFF'}] {name:<12}  {detail}")
        protective = {k for k, (on, _) in rep["layers"].items() if on} & {
            "bubblewrap", "seccomp", "landlock", "container"}
        if not protective:
            print("NO ISOLATION: programs would run unprotected; coevo refuses unless "
                  "--exec_allow_unsafe")
            return 1
        return 0
