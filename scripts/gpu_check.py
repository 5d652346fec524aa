"""The Python half of scripts/gpu-check.sh: what is easier to get right in Python than in bash.

    python scripts/gpu_check.py carry                 # the size of what travels to the device
    python scripts/gpu_check.py closure [--site DIR]  # every need met by the device or a wheel
    python scripts/gpu_check.py curve CPU_RUN [CUDA_RUN]   # held-out curves side by side (TSV)
    python scripts/gpu_check.py summary STEPS.tsv WORK OUTDIR  # the table; exit 1 if a step failed

Standard library only (and ``packaging``, which pip itself carries), so that it runs before
anything is installed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 64 * 2**20  # the device takes a working tree of at most 64 MiB, wheels included
WHEELS = ROOT / ".whl"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---- carry ----------------------------------------------------------------------------------
def _tree_files() -> tuple[list[Path], str]:
    """The files that travel: tracked and untracked-not-ignored (git's view, as the device's copy
    takes them), or, where this is no git checkout (the copy on the device), every file."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True).stdout
        names = [n for n in out.decode().split("\0") if n]
        return [ROOT / n for n in names], "git: tracked + untracked not ignored"
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts
                 and WHEELS not in p.parents]
        return files, "every file (no git checkout here)"


def _size(paths) -> int:
    total = 0
    for p in paths:
        try:
            total += os.lstat(p).st_size
        except OSError:  # listed by git, deleted since
            pass
    return total


def carry() -> int:
    files, how = _tree_files()
    tree = _size(files)
    wheels = sorted(WHEELS.glob("*")) if WHEELS.is_dir() else []
    wsize = _size(wheels)
    shared = ROOT / "shared"
    ssize = _size(p for p in shared.rglob("*") if p.is_file()) if shared.is_dir() else 0
    total = tree + wsize + ssize
    mib = 2**20
    print(f"carry: tree {tree / mib:.2f} MiB ({len(files)} files, {how}) + .whl "
          f"{wsize / mib:.2f} MiB ({len(wheels)} files)"
          + (f" + shared/ {ssize / mib:.2f} MiB" if ssize else "")
          + f" = {total / mib:.2f} MiB of the device's {LIMIT // mib} MiB")
    if total > LIMIT:
        biggest = sorted(files + wheels, key=lambda p: -_size([p]))[:5]
        print("carry: over the limit; the largest files: "
              + ", ".join(f"{p.relative_to(ROOT)} ({_size([p]) / mib:.1f} MiB)" for p in biggest))
        return 1
    return 0


# ---- closure --------------------------------------------------------------------------------
def _script_list(flag: str) -> list[str]:
    out = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-wheels.sh"), flag],
                         capture_output=True, text=True, check=True).stdout
    return [x.strip() for x in out.splitlines() if x.strip()]


def _project_requirements() -> list[str]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        from importlib.metadata import requires
        return [r for r in (requires("coevo-code") or []) if "extra ==" not in r]
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


def closure(site: str | None) -> int:
    """Walk the project's needs: each is on the device (its own needs are the device's business),
    or pinned in gpu-wheels.sh (walk its Requires-Dist, read from ``site`` when given, else from
    this environment), or missing: an error naming it and who needs it. Also says where a carried
    wheel's need is not met by the version this environment (the device, when run there) holds."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.version import Version

    device = {_norm(x) for x in _script_list("--device")}
    pins = {_norm(p.split("==")[0]): p.split("==")[1] for p in _script_list("--list")}
    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython",
           "extra": ""}
    path = [site] if site else None

    # the carried wheels (read from ``site``) first, then this environment (the device's packages)
    found = {}
    for d in list(metadata.distributions(path=path) if path else []) + list(
            metadata.distributions()):
        found.setdefault(_norm(d.metadata["Name"] or ""), d)
    dist = found.get

    missing, unmet, used = [], [], set()
    todo = [(Requirement(r), "coevo-code") for r in _project_requirements()]
    seen = set()
    while todo:
        req, parent = todo.pop()
        if req.marker and not req.marker.evaluate(env):
            continue
        name = _norm(req.name)
        d = dist(name)
        if d is not None and req.specifier and not req.specifier.contains(
                Version(d.version), prereleases=True):
            unmet.append(f"{parent} wants {req}, found {d.version}")
        if name in seen:
            continue
        seen.add(name)
        if name in device:
            continue
        if name not in pins:
            missing.append(f"{name} (needed by {parent})")
            continue
        used.add(name)
        if d is None:
            missing.append(f"{name}=={pins[name]}: pinned but not installed here to read its "
                           f"needs (needed by {parent})")
            continue
        if d.version != pins[name]:
            unmet.append(f"{name}: pinned {pins[name]}, found {d.version}")
        todo += [(Requirement(r), name) for r in (d.requires or [])]
    unused = sorted(set(pins) - used)
    print(f"closure: {len(seen)} packages needed; carried as wheels: "
          + ", ".join(f"{n}=={pins[n]}" for n in sorted(used)))
    for u in unmet:
        print(f"closure: warning: {u}")
    if unused:
        print(f"closure: pinned but needed by nothing: {', '.join(unused)}")
    if missing:
        print("closure: neither on the device nor pinned in scripts/gpu-wheels.sh: "
              + "; ".join(missing))
    return 1 if missing or unused else 0


# ---- curve ----------------------------------------------------------------------------------
CURVE = ("code_acc", "code_acc_greedy", "pass_at_4", "ut_acc", "bon_acc")


def _eval(run: Path) -> dict[int, dict]:
    path = run / "eval.jsonl"
    if not path.exists():
        return {}
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return {r["step"]: r for r in rows}


def curve(cpu: Path, cuda: Path | None) -> int:
    runs = [("cpu", _eval(cpu))] + ([("cuda", _eval(cuda))] if cuda else [])
    steps = sorted(set().union(*(r.keys() for _, r in runs)))
    head = ["step"] + [f"{dev}:{k}" for dev, _ in runs for k in CURVE]
    print("\t".join(head))
    for s in steps:
        cells = [str(s)]
        for _, r in runs:
            row = r.get(s, {})
            cells += ["" if row.get(k) is None else f"{row[k]:.3f}" for k in CURVE]
        print("\t".join(cells))
    return 0 if all(r for _, r in runs) else 1


# ---- summary --------------------------------------------------------------------------------
def summary(steps_tsv: Path, work: Path, outdir: Path) -> int:
    rows = [line.split("\t") for line in steps_tsv.read_text().splitlines() if line.strip()]
    figures = {}
    for name in ("carry", "training", "grpo_shape", "engine_cpu_vs_cuda", "tests", "env"):
        p = work / f"{name}.json"
        if p.exists():
            try:
                figures[name] = json.loads(p.read_text())
            except ValueError as e:
                figures[name] = {"error": f"{p.name}: {e}"}
    curve_path = outdir / "cure-curve.tsv"
    if curve_path.exists():
        figures["cure_curve_tsv"] = curve_path.read_text()
    env = figures.get("env") or {}
    lines = [f"gpu-check on {env.get('gpu') or 'CPU (no CUDA device)'}"
             + (f" ({env['gpu_mem_gib']} GiB)" if env.get("gpu_mem_gib") else "")
             + f"; Python {env.get('python')}, torch {env.get('torch')}, transformers "
               f"{env.get('transformers')}", ""] if env else []
    lines += ["| step | result | seconds | note |", "| --- | --- | --- | --- |"]
    lines += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3] if len(r) > 3 else ''} |" for r in rows]
    t = figures.get("training")
    if t:
        lines += ["", f"benchmarks/training.py on {t.get('device')} ({t.get('steps')} steps; medians, "
                  "first step dropped):", "",
                  "| workload | coevo step s | bare TRL step s | ratio | generation | sandbox | "
                  "rewards | update | sandbox cells/step |", "| --- | --- | --- | --- | --- | --- "
                  "| --- | --- | --- |"]
        for w in ("generate", "scripted"):
            if w in t:
                x, ph = t[w], t[w]["phases_s"]
                lines.append(f"| {w} | {x['coevo_step_s']:.3f} | {x['trl_step_s']:.3f} | "
                             f"{x['ratio']:.2f}x | {ph['generation']:.3f} | {ph['execution']:.3f} "
                             f"| {ph['rewards']:.3f} | {ph['update']:.3f} | "
                             f"{x['exec_cells_per_step']} |")
    g = figures.get("grpo_shape")
    if g:
        lines += ["", f"GRPO step, {g.get('shape')} ({g.get('params_m')} M parameters, "
                  f"{g.get('device')}, {g.get('dtype')}; batch {g.get('rows')} rows, "
                  f"{g.get('max_completion_length')}-token completions; medians):", "",
                  "| workload | step s | generation s | sandbox s | rewards s | update s | "
                  "generated tokens/s | peak GPU memory GiB |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for w, x in g.get("workloads", {}).items():
            mem = x.get("peak_gpu_mem_gib")
            tps = x.get("gen_tokens_per_s")
            lines.append(f"| {w} | {x['step_s']:.3f} | {x['generation_s']:.3f} | "
                         f"{x['sandbox_s']:.3f} | {x['rewards_s']:.3f} | {x['update_s']:.3f} | "
                         f"{'' if tps is None else f'{tps:,.0f}'} | "
                         f"{'n/a' if mem is None else f'{mem:.2f}'} |")
    e = figures.get("engine_cpu_vs_cuda")
    if e:
        lines += ["", "transformers engine, greedy, CUDA against CPU: " + "; ".join(
            f"{m}: {v['identical']}/{v['completions']} identical" for m, v in e.items())]
    if "cure_curve_tsv" in figures:
        lines += ["", "default CURE run, held-out (cure-curve.tsv):", "", "```",
                  figures["cure_curve_tsv"].rstrip(), "```"]
    failed = [r[0] for r in rows if r[1] == "FAIL"]
    lines += ["", ("gpu-check: FAILED: " + ", ".join(failed)) if failed else
              f"gpu-check: every step passed or was skipped ({sum(r[1] == 'SKIP' for r in rows)} "
              f"skipped)"]
    text = "\n".join(lines)
    print(text)
    (outdir / "summary.txt").write_text(text + "\n")
    (outdir / "figures.json").write_text(json.dumps(figures, indent=1) + "\n")
    return 1 if failed else 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(__doc__)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "carry":
        return carry()
    if cmd == "closure":
        site = rest[rest.index("--site") + 1] if "--site" in rest else None
        return closure(site)
    if cmd == "curve":
        return curve(Path(rest[0]), Path(rest[1]) if len(rest) > 1 else None)
    if cmd == "summary":
        return summary(Path(rest[0]), Path(rest[1]), Path(rest[2]))
    print(f"gpu_check.py: unknown command {cmd!r} (carry, closure, curve, summary)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
