"""``coevo report RUN_DIR``: the training curves of a run as PNG files in its directory.

For a pair or ring (a directory whose ``config.yaml`` lists ``agents``) each agent's curves go into
its subfolder, and the run directory gets the cross-agent views: ``pair.png`` (per agent: gold code
accuracy, pseudo-label accuracy, label agreement with the peer, Cohen's kappa of the errors, code
reward std (collapse shows as it going to zero), share of problems labelled),
``cross_bon.png`` (best-of-N of each agent's solutions ranked by each agent's tests) and, where the
problems name their task family, ``labels_by_family.png`` (each agent's pseudo-label accuracy per
family, first and second half of the run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

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
          ("time_rewards", "rewards"), ("time_exchange", "waiting for other agents"),
          ("time_update", "update"))


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


PAIR_PANELS = (("code_acc", "code accuracy (gold, logged only)"),
               ("pseudo_label_acc", "pseudo-label accuracy (vs gold)"),
               ("pseudo_label_kappa", "pseudo-label kappa (vs gold)"),
               ("agreement", "label agreement with the peer"),
               ("kappa", "Cohen's kappa of errors (with the peer)"),
               ("reward_code_std", "code reward std (collapse -> 0)"),
               ("labelled", "problems labelled"))


def label_counts_by_family(lines: list[dict]) -> dict:
    """``pseudo_label_by_family`` summed over metrics lines: per family, the 2 x 2 counts (numpy,
    ``M[i, j]``: pseudo-label says wrong (i = 1), gold says wrong (j = 1)). Lines without it
    (gold runs, nothing labelled) add nothing."""
    pooled: dict = {}
    for line in lines:
        for fam, m in (line.get("pseudo_label_by_family") or {}).items():
            pooled[fam] = pooled.get(fam, 0) + np.asarray(m, dtype=int)
    return dict(sorted(pooled.items()))


def label_accuracy_by_family(lines: list[dict]) -> dict[str, tuple[int, int]]:
    """Per family, (pseudo-labels equal to the gold verdict, solutions judged), over ``lines``."""
    return {f: (int(np.trace(m)), int(m.sum())) for f, m in label_counts_by_family(lines).items()}


def _agents(run_dir: Path) -> list[str]:
    import yaml
    try:
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return []
    if not isinstance(cfg, dict) or not isinstance(cfg.get("agents"), list):
        return []
    return [a["name"] for a in cfg["agents"] if isinstance(a, dict) and "name" in a]


def draw_report(run_dir: Path) -> list[Path]:
    """Draw the curves; returns the PNG paths."""
    run_dir = Path(run_dir)
    agents = _agents(run_dir)
    if agents:
        return draw_pair_report(run_dir, agents)
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

    if any(isinstance(x.get("step"), int) for x in evals):
        out += _heldout(plt, run_dir, lines, [x for x in evals if isinstance(x.get("step"), int)])

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
    if any(x.get("vllm_sync_agree") is not None for x in lines):
        out.append(_vllm_sync(plt, run_dir, lines))
    return out


def _vllm_sync(plt, run_dir: Path, lines: list) -> Path:
    """``vllm_sync.png`` (runs with ``use_vllm``): the weight-sync check of every checked step,
    the share of probes that agree (left axis) and the log-probability differences (right axis,
    log scale)."""
    from matplotlib.ticker import MaxNLocator

    from ..plots import save
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    xs, ys = _series(lines, "vllm_sync_agree")
    ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, ms=3, color="C0",
            label="probes that agree")
    ax.set(title="vLLM weight-sync check", xlabel="step", ylabel="share of probes", ylim=(-0.02,
                                                                                          1.05))
    right = ax.twinx()
    for key, label, color in (("vllm_sync_logprob_diff", "mean |delta log p|", "C1"),
                              ("vllm_sync_logprob_diff_max", "largest |delta log p|", "C2")):
        xs, ys = _series(lines, key)
        right.plot(xs, [max(y, 1e-9) for y in ys], color=color, lw=1, label=label)
    right.set_yscale("log")
    right.set_ylabel("log-probability difference")
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="lower left", fontsize=8)
    ax.grid(alpha=0.3)
    return save(fig, run_dir / "vllm_sync.png", legend=False)


HELDOUT = (("code_acc", "code accuracy (T=1)"), ("code_acc_greedy", "code accuracy (greedy)"),
           ("pass_at_4", "pass@4"), ("ut_acc", "unit-test accuracy (reference-judged)"),
           ("bon_acc", "best-of-4x4 (generated tests)"))


def _heldout(plt, run_dir: Path, lines: list, evals: list) -> list[Path]:
    """``heldout.png``: the training batches' curves beside the held-out ones;
    ``heldout_families.png``: held-out code and unit-test accuracy per family, first evaluation
    against the last."""
    from matplotlib.ticker import MaxNLocator

    from ..plots import save
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for key, label in PANELS["accuracy.png"][1]:
        xs, ys = _series(lines, key)
        if xs:
            left.plot(xs, ys, label=label, alpha=0.8)
    for key, label in HELDOUT:
        xs, ys = _series(evals, key)
        if xs:
            right.plot(xs, ys, marker="o", ms=4, label=label)
    left.set(title="Training batches (train split)", xlabel="step", ylim=(-0.02, 1.02))
    right.set(title="Held-out problems (step 0: before training)", xlabel="step")
    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    out = [save(fig, run_dir / "heldout.png", legend=False)]
    first, last = evals[0].get("by_family") or {}, evals[-1].get("by_family") or {}
    fams = sorted(set(first) & set(last))
    if fams and len(evals) > 1:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
        x = np.arange(len(fams))
        for ax, key in zip(axes, ("code_acc", "ut_acc")):
            for off, (rec, step) in zip((-0.2, 0.2), ((first, evals[0]["step"]),
                                                      (last, evals[-1]["step"]))):
                ys = [rec[f].get(key) if isinstance(rec[f].get(key), (int, float)) else 0.0
                      for f in fams]
                ax.bar(x + off, ys, width=0.4, label=f"step {step}")
            ax.set_xticks(x, fams, rotation=40, ha="right", fontsize=8)
            ax.set(title=f"held-out {key} by family", ylim=(0, 1.02))
            ax.grid(alpha=0.3, axis="y")
            ax.legend(fontsize=8)
        out.append(save(fig, run_dir / "heldout_families.png", legend=False))
    return out


def draw_pair_report(run_dir: Path, agents: list[str]) -> list[Path]:
    """Every agent's own report, then the cross-agent panels in the run directory."""
    from matplotlib.ticker import MaxNLocator

    from ..plots import pyplot, save
    out, lines = [], {}
    for name in agents:
        out += draw_report(run_dir / name)
        lines[name] = [x for x in read_jsonl(run_dir / name / "metrics.jsonl")
                       if isinstance(x.get("step"), int)]
    plt = pyplot()
    fig, axes = plt.subplots(2, 4, figsize=(17, 7), squeeze=False)
    for ax in axes.ravel()[len(PAIR_PANELS):]:
        ax.axis("off")
    for ax, (key, title) in zip(axes.ravel(), PAIR_PANELS):
        drawn = 0
        for name in agents:
            xs, ys = _series(lines[name], key)
            if xs:
                ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, ms=3, label=name)
                drawn += 1
        if not drawn:
            ax.text(0.5, 0.5, "undefined so far\n(nothing labelled, or no gold)", ha="center",
                    va="center", transform=ax.transAxes, color="gray", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.set_ylim(-1.02 if "kappa" in key else -0.02, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=7)
    fig.suptitle(f"{' x '.join(agents)}: labels and errors across agents")
    out.append(save(fig, run_dir / "pair.png", legend=False))

    mats = [np.array(x["cross_bon"], dtype=float) for x in lines[agents[0]]
            if isinstance(x.get("cross_bon"), list)]
    fig, ax = plt.subplots(figsize=(4.8, 4))
    if mats:
        stack = np.stack(mats)  # JSON nulls read as NaN
        with np.errstate(all="ignore"):
            mean = np.nanmean(stack, axis=0)
        im = ax.imshow(mean, vmin=0, vmax=1, cmap="viridis")
        for i in range(mean.shape[0]):
            for j in range(mean.shape[1]):
                v = mean[i, j]
                ax.text(j, i, "-" if np.isnan(v) else f"{v:.2f}", ha="center", va="center",
                        color="k" if not np.isnan(v) and v > 0.6 else "w")
        fig.colorbar(im, ax=ax)
    else:
        ax.text(0.5, 0.5, "no gold tests: undefined", ha="center", va="center",
                transform=ax.transAxes, color="gray")
    ax.set_xticks(range(len(agents)), agents)
    ax.set_yticks(range(len(agents)), agents)
    ax.set(title="Best-of-N: solutions (rows) ranked by tests (cols)", xlabel="tests of",
           ylabel="solutions of")
    out.append(save(fig, run_dir / "cross_bon.png", legend=False))

    halves = {name: (label_accuracy_by_family(ls[:len(ls) // 2]),
                     label_accuracy_by_family(ls[len(ls) // 2:])) for name, ls in lines.items()}
    families = sorted({f for h in halves.values() for part in h for f in part})
    if families:
        fig, axes = plt.subplots(len(agents), 1, figsize=(max(6.4, 0.8 * len(families) + 2),
                                                          2.6 * len(agents)), squeeze=False)
        x = np.arange(len(families))
        for ax, name in zip(axes[:, 0], agents):
            for k, (part, label) in enumerate(zip(halves[name], ("first half", "second half"))):
                judged = [part.get(f, (0, 0))[1] for f in families]
                acc = [part[f][0] / n if n else np.nan for f, n in zip(families, judged)]
                xs = x + (k - 0.5) * 0.4
                ax.bar(xs, acc, 0.4, label=label)
                for xi, a, n in zip(xs, acc, judged):  # how many solutions; "-": none labelled
                    ax.text(xi, 0.02 if np.isnan(a) else a + 0.02, str(n) if n else "-",
                            ha="center", va="bottom", fontsize=6)
            ax.axhline(0.5, color="gray", lw=0.8, ls=":")
            ax.set_xticks(x, families, rotation=30, ha="right", fontsize=7)
            ax.set(ylim=(0, 1.12), ylabel="labels right")
            ax.set_title(f"{name}: share of its solutions whose pseudo-label equals the gold "
                         f"verdict (numbers: solutions labelled)", fontsize=9)
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        out.append(save(fig, run_dir / "labels_by_family.png", legend=False))
    return out
