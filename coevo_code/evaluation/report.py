"""results.json, a markdown table and plots for an evaluation directory."""

from __future__ import annotations

import json
from pathlib import Path


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def write_results(out_dir: Path, results: dict) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "results.json"]
    tmp = paths[0].with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1))
    tmp.replace(paths[0])
    md = [f"# {results.get('benchmark', '')}: {results.get('model', 'samples')}", ""]
    metrics = results.get("metrics") or {k: results[k] for k in results
                                         if k.startswith("pass@")}
    ci = results.get("ci95", {})
    md += ["| metric | value | 95% CI |", "| --- | --- | --- |"]
    for k, v in metrics.items():
        lo_hi = ci.get(k)
        md.append(f"| {k} | {_fmt(v)} | "
                  f"{'-' if not lo_hi else f'{lo_hi[0]:.3f} to {lo_hi[1]:.3f}'} |")
    extra = {k: results[k] for k in ("problems", "tasks", "samples", "tasks_without_samples",
                                      "parse_fail_code", "parse_fail_test", "sandbox_errors",
                                      "solutions_undecided", "tests_undecided",
                                      "samples_undecided", "source")
             if k in results}
    for key in ("problems_refused", "tasks_refused", "rows_skipped"):  # left out, and why
        if results.get(key):
            extra[key] = f"{len(results[key])} (results.json names each)"
    md += [""] + [f"- {k}: {v}" for k, v in extra.items()]
    md += [f"- note: {n}" for n in results.get("notes", [])]
    (out_dir / "results.md").write_text("\n".join(md) + "\n")
    paths.append(out_dir / "results.md")
    bon = {k: v for k, v in metrics.items() if k.startswith("bon_") and v is not None}
    if bon:
        from ..plots import pyplot, save
        plt = pyplot()
        settings = sorted({k.split("/")[0] for k in bon}, key=lambda s: [int(x) for x in
                                                                         s[4:].split("x")])
        rankers = sorted({k.split("/")[1] for k in bon})
        fig, ax = plt.subplots(figsize=(6.4, 4))
        width = 0.8 / max(1, len(rankers))
        for j, r in enumerate(rankers):
            xs = [i + j * width for i in range(len(settings))]
            ys = [bon.get(f"{s}/{r}", 0.0) for s in settings]
            errs = [[max(0.0, y - ci.get(f"{s}/{r}", [y, y])[0]) for s, y in zip(settings, ys)],
                    [max(0.0, ci.get(f"{s}/{r}", [y, y])[1] - y) for s, y in zip(settings, ys)]]
            ax.bar(xs, ys, width=width, yerr=errs, capsize=2, label=r)
        if metrics.get("pass@1") is not None:
            ax.axhline(metrics["pass@1"], color="gray", ls="--", label="pass@1")
        ax.set_xticks([i + width * (len(rankers) - 1) / 2 for i in range(len(settings))],
                      [s[4:] for s in settings])
        ax.set(title="Best-of-N with generated tests (n solutions x m tests)",
               ylabel="accuracy", ylim=(0, 1))
        paths.append(save(fig, out_dir / "bon.png"))
    return paths
