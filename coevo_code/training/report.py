"""``coevo report RUN_DIR``: the training curves of a run as PNG files in its directory."""

from __future__ import annotations

from pathlib import Path

from .rundir import read_jsonl

PANELS = {
    "rewards.png": ("Rewards (mean per role)", [("reward_code_mean", "code"),
                                                ("reward_test_mean", "test")]),
    "accuracy.png": ("Accuracy", [("code_acc", "code accuracy"), ("ut_acc", "unit-test accuracy"),
                                  ("bon_acc", "best-of-N (generated tests)")]),
    "p01_p00.png": ("Wrong solutions passing generated tests",
                    [("p01", "p01: accurate tests"), ("p00", "p00: inaccurate tests"),
                     ("mu", "mu")]),
    "parsing.png": ("Completions that parse to nothing", [("parse_fail_code", "code"),
                                                          ("parse_fail_test", "test")]),
}
PHASES = (("time_generation", "generation"), ("time_execution", "execution"),
          ("time_rewards", "rewards"), ("time_update", "update"))


class ReportError(ValueError):
    pass


def _series(lines, key):
    xs, ys = [], []
    for line in lines:
        v = line.get(key)
        if isinstance(v, (int, float)):
            xs.append(line["step"])
            ys.append(v)
    return xs, ys


def draw_report(run_dir: Path) -> list[Path]:
    """Draw the curves; returns the PNG paths."""
    run_dir = Path(run_dir)
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise ReportError(f"{run_dir}: no metrics.jsonl (not a coevo run directory?)")
    try:
        lines = [x for x in read_jsonl(path) if isinstance(x.get("step"), int)]
    except ValueError as e:
        raise ReportError(str(e)) from None
    if not lines:
        raise ReportError(f"{path}: no step recorded yet")
    evals = read_jsonl(run_dir / "eval.jsonl") if (run_dir / "eval.jsonl").is_file() else []

    from matplotlib.ticker import MaxNLocator

    from ..plots import pyplot, save
    plt = pyplot()

    out = []
    for name, (title, keys) in PANELS.items():
        fig, ax = plt.subplots(figsize=(6.4, 4))
        drawn = 0
        for key, label in keys:
            xs, ys = _series(lines, key)
            if xs:
                ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, ms=3, label=label)
                drawn += 1
            if name == "accuracy.png" and evals:
                ex, ey = _series(evals, key)
                if ex:
                    ax.plot(ex, ey, ls="--", marker="s", ms=4, label=f"eval: {label}")
        if not drawn:
            ax.text(0.5, 0.5, "undefined on every step so far\n(e.g. no correct solution yet)",
                    ha="center", va="center", transform=ax.transAxes, color="gray")
        ax.set(title=title, xlabel="step")
        if name != "rewards.png":  # shares and probabilities (mu can dip below 0)
            ax.set_ylim(-1.02 if name == "p01_p00.png" else -0.02, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        out.append(save(fig, run_dir / name))

    fig, ax = plt.subplots(figsize=(6.4, 4))
    steps = [x["step"] for x in lines]
    bottom = [0.0] * len(lines)
    for key, label in PHASES:
        ys = [float(x.get(key) or 0.0) for x in lines]
        ax.bar(steps, ys, bottom=bottom, label=label, width=0.8)
        bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set(title="Time per step by phase", xlabel="step", ylabel="seconds")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    out.append(save(fig, run_dir / "phases.png"))
    return out
