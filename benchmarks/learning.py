"""Does the default run learn, and does the reward cause it? Does a cross-family pair learn
without labels where self-labelling does not? Each run as a new user runs it (a fresh process).

    python benchmarks/learning.py default [--seeds 0 1 2] [--out runs/learning] [--max_steps N]
    python benchmarks/learning.py pair [--seeds 0 1 2] [--out runs/learning-pair]
    python benchmarks/learning.py table [--quick] [--out runs/learning-pair]
    python benchmarks/learning.py warmstart [--from RUN]

``pair``: for every seed, ``configs/pair-tiny-cpu.yaml`` (the warm-started ``tiny`` and
``tiny-llama`` labelling each other, ``label_source: partner``) and its control
``configs/pair-tiny-cpu-self.yaml`` (each agent labelled by its own majority vote). Per agent:
held-out figures first and last, the mean ``pseudo_label_kappa`` and ``labelled`` over the second
half of the run, the share of the labels it trains on that equal the gold verdict over the second
half on its weak and on its strong families (``right w/s``, from ``pseudo_label_by_family``),
and the final held-out accuracy on the agent's weak families (the five its warm
start was fine-tuned to get wrong, ``WEAK`` in ``scripts/make_tiny_model.py``). Claims: each
partner agent's kappa >= 0.3 with labelled >= 0.5 and held-out ``code_acc`` rising >= 0.15, each
run <= 360 s wall on 2 cores; under self-labelling each agent's weak-family accuracy is >= 0.05
lower than under partner labels, every seed. Writes ``summary.json`` and ``pair.png``.

``table [--quick]``: the comparisons, each row's final held-out figures (60 ``heldout``
problems: code accuracy at temperature 1 and greedy, reference-judged unit-test accuracy,
best-of-4x4; mean and min-max over seeds) in one table, and ``table.png``:

- (a) CURE with gold tests, the default run: coder and tester trained together
  (``--train_roles both``), coder only (``code``: test rewards off), tester only (``test``);
- (b) label-free pairs (``configs/pair-tiny-cpu.yaml``): ``partner``, ``self_majority``,
  ``frozen`` (both agents labelled by ``tiny-llama``'s warm start, frozen) and ``gold`` (each
  agent on the gold tests: the upper bound);
- (c) self-majority run long (150 steps; ``--quick``: 90; the first seed only), scored every
  tenth of the run on 24 labelled ``train`` problems with ``best/`` kept (``--keep_best``): does
  it collapse, does the checkpoint the validation set picks hold up on the held-out problems
  (``best/`` against ``final/``), and where would early stopping with a patience of 3
  evaluations stop, keeping which step;
- (d) the tester as a reward model: ``tiny-llama``'s warm start trained by TRL's GRPOTrainer on the
  tests of the (a) ``cure`` run's final model, frozen (``TesterReward``), against the same coder
  on the gold tests through the same reward (``TesterReward.from_gold``).

Seeds 0 1 2 (``--quick``: the first only; (c): the first); every run's wall time is printed and
kept in ``table.json``; finished runs are read back, so an interrupted table resumes.

``warmstart``: the two warm starts' per-family starting figures on ``train`` problems (the ones
RL labels): ``--samples`` solutions per problem at temperature 1, ``--per_family`` problems of each
family; per family, the share of samples that pass the gold tests and the share of problems whose
majority answer (the largest cluster of samples by their outputs on the gold tests' inputs, the
vote's clustering; a tie is no majority) is not a right one. Claim: on each model's weak families
its majority answer is wrong on >= 60% of the problems, while >= 10% of its samples are right.
``warmstart --from RUN``: the same figures for a pair run's trained weights (``RUN/qwen/final``,
``RUN/llama/final``) on the same problems: what training changed where the parameter values are
ones the models were trained on (``heldout`` has values no ``train`` problem has).

``default``:
For every seed: the real run, the same run trained on rewards shuffled within each batch
(``--reward_control shuffle``: each role's rewards permuted over its rows) and on negated rewards
(``--reward_control flip``). From each run's ``eval.jsonl`` (held-out problems, before the first
step and after): code accuracy at temperature 1 and greedy, pass@4, reference-judged unit-test
accuracy and best-of-4x4, first and last. Prints one table (per run and the median over seeds),
the claims with PASS or FAIL:

- the real run's held-out ``code_acc`` rises by >= 0.20 and ``ut_acc`` by >= 0.15 (median over
  seeds), every seed rising; wall time <= 300 s each on 2 cores, >= 5,000 sandbox cells;
- the shuffled run's rise is less than a third of the real run's (median);
- the flipped run's ``code_acc`` falls (median);

and writes ``summary.json`` and ``learning.png`` (held-out curves, every run) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTROLS = ("none", "shuffle", "flip")
PAIR_CONFIGS = {"partner": ROOT / "configs" / "pair-tiny-cpu.yaml",
                "self_majority": ROOT / "configs" / "pair-tiny-cpu-self.yaml"}
AGENT_ARCH = {"qwen": "qwen2", "llama": "llama"}  # pair-tiny-cpu.yaml's agents: tiny, tiny-llama
FIGS = ("code_acc", "code_acc_greedy", "pass_at_4", "ut_acc", "bon_acc")


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _launch(run: Path, cmd: list[str]) -> tuple[float, float]:
    """``cmd`` in a fresh process (its log beside ``run``); wall seconds and the peak RSS in MB
    of the largest process of its tree (the kernel's accounting of the waited-for children)."""
    if run.exists():
        import shutil
        shutil.rmtree(run)
    # torch's threads as the run's config sets them, as a user runs it
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    t0 = time.perf_counter()
    with open(run.parent / f"{run.name}.log", "w") as log:
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"learning: {' '.join(cmd)} failed (see {log.name})")
    return round(wall, 1), round(usage.ru_maxrss / 1024, 1)


def _cells(steps: list[dict], evals: list[dict]) -> dict:
    return {"cells_train": sum(int(s.get("exec_cells") or 0) for s in steps),
            "cells_eval": sum(int(e.get("cells") or 0) for e in evals)}


def run_one(out: Path, seed: int, control: str, extra: list[str]) -> dict:
    """One default ``coevo train`` in a fresh process: its held-out evaluations, wall time and
    peak memory."""
    run = out / f"{control}-seed{seed}"
    if (run / "final").is_dir() and (run / "bench.json").is_file():
        return json.loads((run / "bench.json").read_text())  # done already: resumable
    wall, rss = _launch(run, [sys.executable, "-m", "coevo_code.cli", "train", "--output_dir",
                              str(run), "--seed", str(seed), "--reward_control", control, *extra])
    evals = _jsonl(run / "eval.jsonl")
    rec = {"seed": seed, "control": control, "wall_s": wall, "peak_rss_mb": rss, "evals": evals,
           **_cells(_jsonl(run / "metrics.jsonl"), evals)}
    (run / "bench.json").write_text(json.dumps(rec))
    return rec


def _make_tiny_model():
    """scripts/make_tiny_model.py, which says how the warm starts were made."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_tiny_model",
                                                  ROOT / "scripts" / "make_tiny_model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def weak_families() -> dict[str, tuple[str, ...]]:
    """Each pair agent's weak families, as its warm start was made (scripts/make_tiny_model.py)."""
    mod = _make_tiny_model()
    return {agent: tuple(mod.WEAK[arch]) for agent, arch in AGENT_ARCH.items()}


def dominant_program(task, mtm) -> str | None:
    """The program of a world problem's dominant mistake: the commonest answer of a warm start
    weak on its family (``mtm``: scripts/make_tiny_model.py, whose ``dominant_index`` says which
    mutant)."""
    mutants = task.metadata.get("mutants") or []
    if not mutants:
        return None
    return mutants[mtm.dominant_index(task.metadata["family"], len(mutants))]


def family_acc(ev: dict, families) -> float | None:
    """Held-out code accuracy over the problems of ``families`` (weighted by problems)."""
    parts = [(f["code_acc"], f["problems"]) for name, f in ev.get("by_family", {}).items()
             if name in families and f.get("code_acc") is not None]
    n = sum(p for _, p in parts)
    return sum(a * p for a, p in parts) / n if n else None


def labels_right(counts: dict, weak, on_weak: bool) -> float | None:
    """Share of the agent's solutions whose pseudo-label equals the gold verdict, from the
    per-family 2 x 2 ``counts`` (``label_counts_by_family``), over the problems of its weak
    families (``on_weak``) or of its strong ones; a composition counts as its outer family,
    whose mistakes the warm start's corpus gives it."""
    pooled = [m for f, m in counts.items() if (f.split("+")[-1] in weak) == on_weak]
    judged = sum(int(m.sum()) for m in pooled)
    return sum(int(m.trace()) for m in pooled) / judged if judged else None


def second_half(steps: list[dict], key: str) -> float | None:
    xs = [s.get(key) for s in steps[len(steps) // 2:]]
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def run_pair(out: Path, seed: int, source: str, extra: list[str], config: Path | None = None,
             flags: tuple = (), name: str | None = None) -> dict:
    """One pair ``coevo train --config`` in a fresh process (``config``, default the source's
    own, with ``flags``; its folder ``<name or source>-seed<seed>``): per agent, its evaluations,
    the second half's label figures and its weak families' accuracy."""
    run = out / f"{name or source}-seed{seed}"
    if (run / "bench.json").is_file():
        return json.loads((run / "bench.json").read_text())  # done already: resumable
    wall, rss = _launch(run, [sys.executable, "-m", "coevo_code.cli", "train", "--config",
                              str(config or PAIR_CONFIGS[source]), "--output_dir", str(run),
                              "--seed", str(seed), *flags, *extra])
    sys.path.insert(0, str(ROOT))
    from coevo_code.training.report import label_counts_by_family
    weak = weak_families()
    agents = {}
    for name in AGENT_ARCH:
        evals, steps = _jsonl(run / name / "eval.jsonl"), _jsonl(run / name / "metrics.jsonl")
        counts = label_counts_by_family(steps[len(steps) // 2:])
        agents[name] = {
            "evals": evals, "steps": len(steps), **_cells(steps, evals),
            "kappa_2nd_half": second_half(steps, "pseudo_label_kappa"),
            "labelled_2nd_half": second_half(steps, "labelled"),
            "pseudo_label_acc_2nd_half": second_half(steps, "pseudo_label_acc"),
            "weak_first": family_acc(evals[0], weak[name]),
            "weak_last": family_acc(evals[-1], weak[name]),
            # the labels this agent trains on, right on its weak / its strong families
            "labels_right_weak_2nd_half": labels_right(counts, weak[name], True),
            "labels_right_strong_2nd_half": labels_right(counts, weak[name], False),
            "label_counts_2nd_half": {f: m.tolist() for f, m in counts.items()}}
    rec = {"seed": seed, "source": source, "wall_s": wall, "peak_rss_mb": rss, "agents": agents}
    (run / "bench.json").write_text(json.dumps(rec))
    return rec


def pair_table(records: list[dict]) -> str:
    head = (f"{'run':<20}{'wall s':>7}{'kappa':>7}{'labelled':>9}{'right w/s':>11}"
            f"{'weak fams':>16}  "
            + "  ".join(f"{k:>21}" for k in FIGS))
    lines = [head, "-" * len(head)]
    for r in records:
        for name, a in r["agents"].items():
            e0, e1 = a["evals"][0], a["evals"][-1]
            cells = "  ".join(f"{_fmt(e0.get(k))} -> {_fmt(e1.get(k))} "
                              f"({_sgn(_diff(e0.get(k), e1.get(k)))})" for k in FIGS)
            lines.append(f"{r['source'][:7] + '/' + str(r['seed']) + '/' + name:<20}"
                         f"{r['wall_s']:>7.0f}{_fmt(a['kappa_2nd_half']):>7}"
                         f"{_fmt(a['labelled_2nd_half']):>9}"
                         f"{_fmt(a.get('labels_right_weak_2nd_half')) + '/':>6}"
                         f"{_fmt(a.get('labels_right_strong_2nd_half')):<5}"
                         f"{_fmt(a['weak_first']) + ' -> ' + _fmt(a['weak_last']):>16}  {cells}")
    return "\n".join(lines)


def _diff(a, b):
    return None if a is None or b is None else b - a


def pair_claims(records: list[dict]) -> list[tuple[str, bool]]:
    out = []
    partner = [r for r in records if r["source"] == "partner"]
    selfs = {r["seed"]: r for r in records if r["source"] == "self_majority"}
    for name in AGENT_ARCH:
        ks = [r["agents"][name]["kappa_2nd_half"] for r in partner]
        ls = [r["agents"][name]["labelled_2nd_half"] for r in partner]
        rise = [_rise(r["agents"][name], "code_acc") for r in partner]
        out.append((f"partner/{name}: 2nd-half pseudo_label_kappa >= 0.3 and labelled >= 0.5, "
                    f"every seed (kappa {', '.join(_fmt(k) for k in ks)}; labelled "
                    f"{', '.join(_fmt(x) for x in ls)})",
                    bool(partner) and all(k is not None and k >= 0.3 for k in ks)
                    and all(x is not None and x >= 0.5 for x in ls)))
        out.append((f"partner/{name}: held-out code_acc rises >= 0.15, every seed "
                    f"({', '.join(_sgn(x) for x in rise)})",
                    bool(partner) and all(x is not None and x >= 0.15 for x in rise)))
        gaps = [(r["agents"][name]["weak_last"], selfs[r["seed"]]["agents"][name]["weak_last"])
                for r in partner if r["seed"] in selfs]
        out.append((f"self_majority/{name}: final weak-family accuracy >= 0.05 below partner's, "
                    f"every seed ({', '.join(f'{_fmt(s)} vs {_fmt(p)}' for p, s in gaps)})",
                    bool(gaps) and all(p is not None and s is not None and p - s >= 0.05
                                       for p, s in gaps)))
    out.append((f"partner: <= 360 s wall on 2 cores (max "
                f"{max((r['wall_s'] for r in partner), default=0):.0f} s)",
                bool(partner) and all(r["wall_s"] <= 360 for r in partner)))
    return out


def plot_pair(records: list[dict], path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from coevo_code.plots import pyplot, save
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    colors = {"partner": "tab:blue", "self_majority": "tab:red"}
    styles = {"qwen": "-", "llama": "--"}
    run_dirs = {}
    for r in records:
        for name, a in r["agents"].items():
            lab = f"{r['source']} {name}" if r["seed"] == records[0]["seed"] else None
            xs = [e["step"] for e in a["evals"]]
            axes[0].plot(xs, [e.get("code_acc") for e in a["evals"]], styles[name], marker="o",
                         ms=3, color=colors[r["source"]], alpha=0.8, label=lab)
            axes[1].plot([0, 1], [a["weak_first"], a["weak_last"]], styles[name], marker="o",
                         ms=3, color=colors[r["source"]], alpha=0.8, label=lab)
            run_dirs.setdefault((r["source"], name), []).append(a)
    for (source, name), runs in run_dirs.items():
        axes[2].bar(f"{source[:4]}\n{name}", statistics.fmean(
            a["kappa_2nd_half"] or 0.0 for a in runs), color=colors[source], alpha=0.8)
    axes[0].set(title="held-out code_acc", xlabel="step", ylim=(-0.02, 1.02))
    axes[1].set(title="held-out code_acc on the agent's weak families", xticks=[0, 1],
                xticklabels=["start", "end"], ylim=(-0.02, 1.02))
    axes[2].axhline(0.3, color="gray", lw=0.8, ls=":")
    axes[2].set(title="pseudo_label_kappa, 2nd half (mean over seeds)")
    for ax in axes[:2]:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("cross-family pair: partner labels against self-majority labels")
    save(fig, path, legend=False)


def _rise(rec: dict, key: str) -> float | None:
    first, last = rec["evals"][0].get(key), rec["evals"][-1].get(key)
    return None if first is None or last is None else last - first


def table(records: list[dict]) -> str:
    head = (f"{'run':<16}{'wall s':>7}{'RSS MB':>8}{'cells':>7}  " + "  ".join(
        f"{k:>21}" for k in FIGS))
    lines = [head, "-" * len(head)]
    for r in records:
        e0, e1 = r["evals"][0], r["evals"][-1]
        cells = "  ".join(f"{_fmt(e0.get(k))} -> {_fmt(e1.get(k))} ({_sgn(_rise(r, k))})"
                          for k in FIGS)
        lines.append(f"{r['control'] + '/' + str(r['seed']):<16}{r['wall_s']:>7.0f}"
                     f"{r['peak_rss_mb']:>8.0f}{r['cells_train'] + r['cells_eval']:>7}  {cells}")
    for c in CONTROLS:
        rs = [r for r in records if r["control"] == c]
        if rs:
            meds = "  ".join(f"{'median rise':>13} {_sgn(_median([_rise(r, k) for r in rs]))}"
                             for k in FIGS)
            lines.append(f"{c + '/median':<16}{_median([r['wall_s'] for r in rs]):>7.0f}"
                         f"{_median([r['peak_rss_mb'] for r in rs]):>8.0f}{'':>7}  {meds}")
    return "\n".join(lines)


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _fmt(x):
    return "  - " if x is None else f"{x:.2f}"


def _sgn(x):
    return "   -" if x is None else f"{x:+.2f}"


def claims(records: list[dict]) -> list[tuple[str, bool]]:
    by = {c: [r for r in records if r["control"] == c] for c in CONTROLS}
    real = by["none"]
    code = [_rise(r, "code_acc") for r in real]
    ut = [_rise(r, "ut_acc") for r in real]
    out = [
        (f"real: held-out code_acc rises >= 0.20 (median {_sgn(_median(code))}), every seed "
         f"rising", bool(real) and _median(code) >= 0.20 and all(x > 0 for x in code)),
        (f"real: held-out ut_acc rises >= 0.15 (median {_sgn(_median(ut))}), every seed rising",
         bool(real) and _median(ut) >= 0.15 and all(x is not None and x > 0 for x in ut)),
        (f"real: <= 300 s wall on 2 cores (max {max((r['wall_s'] for r in real), default=0):.0f}"
         f" s)", bool(real) and all(r["wall_s"] <= 300 for r in real)),
        (f"real: >= 5,000 sandbox cells in training (min "
         f"{min((r['cells_train'] for r in real), default=0)})",
         bool(real) and all(r["cells_train"] >= 5000 for r in real)),
    ]
    if by["shuffle"] and real:
        s = _median([_rise(r, "code_acc") for r in by["shuffle"]])
        out.append((f"shuffled: code_acc rise {_sgn(s)} < a third of the real "
                    f"{_sgn(_median(code))}", s < _median(code) / 3))
    if by["flip"]:
        f = _median([_rise(r, "code_acc") for r in by["flip"]])
        out.append((f"flipped: code_acc falls ({_sgn(f)})", f < 0))
    return out


def plot(records: list[dict], path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from coevo_code.plots import pyplot, save
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), sharey=True)
    colors = {"none": "tab:blue", "shuffle": "tab:gray", "flip": "tab:red"}
    for ax, key in zip(axes, ("code_acc", "code_acc_greedy", "ut_acc")):
        for r in records:
            xs = [e["step"] for e in r["evals"]]
            ys = [e.get(key) for e in r["evals"]]
            ax.plot(xs, ys, marker="o", ms=3, color=colors[r["control"]], alpha=0.8,
                    label=r["control"] if r["seed"] == records[0]["seed"] else None)
        ax.set(title=f"held-out {key}", xlabel="step", ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("coevo train (default run): real rewards against shuffled and negated ones")
    save(fig, path, legend=False)


def warmstart(model_name: str, per_family: int, samples: int, seed: int, executor) -> dict:
    """Per family: right share of samples, share of problems whose majority answer is wrong; as a
    tester (as many tests as solutions): the share of its tests that are right (the reference
    passes them) and the share of those that catch the family's dominant mistake (its program
    fails them): the tests it gives a partner weak on the family."""
    sys.path.insert(0, str(ROOT))
    import dataclasses

    from coevo_code import labels as L
    from coevo_code.evaluation.heldout import sample
    from coevo_code.matrix import full_matrix
    from coevo_code.rewards import correct_from_gold
    from coevo_code.roles import coder_messages, tester_messages
    from coevo_code.tasks import load_tasks
    from coevo_code.training.joint import joint_outputs, prepare_joint
    from coevo_code.training.scoring import RewardOptions

    by_family: dict[str, list] = {}
    for t in load_tasks("world", split="train", seed=0):
        if len(by_family.setdefault(t.metadata["family"], [])) < per_family:
            by_family[t.metadata["family"]].append(t)
    tasks = [t for ts in by_family.values() for t in ts]
    model, tok = load_model(model_name)
    codes = sample(model, tok, [coder_messages(dataclasses.replace(t, examples=[]))
                                for t in tasks], samples, 1.0, 64, seed)

    def as_text(t, case):  # a gold test as a tester completion: the vote clusters on its input
        if case.code is not None:
            return f"```python\n{case.code}\n```"
        return f"**Test Input:**\n```\n{case.input}```\n\n**Test Output:**\n```\n{case.output}```"

    opts = RewardOptions(label_source="self_majority")
    jbs = [prepare_joint(t, [(c, [as_text(t, g) for g in t.tests])], 0, 1, opts)
           for t, c in zip(tasks, codes)]
    results = iter(executor.run([j for jb in jbs for j in jb.jobs]))
    out: dict[str, dict] = {}
    for t, jb in zip(tasks, jbs):
        res = next(results) if jb.batch.job is not None else None
        probe = next(results) if jb.probe_job is not None else None
        full = full_matrix(jb.batch, res)
        right = correct_from_gold(full[:, :jb.batch.n_gold])
        outputs, errored = joint_outputs(jb, res, probe)
        major = L.execution_majority(outputs, errored)
        major_right = major is not None and bool(right[major.correct].all())
        f = out.setdefault(t.metadata["family"], {"right": [], "majority_wrong": []})
        f["right"].append(float(right.mean()))
        f["majority_wrong"].append(0.0 if major_right else 1.0)

    tests = sample(model, tok, [tester_messages(dataclasses.replace(t, examples=[]))
                                for t in tasks], samples, 1.0, 64, seed)
    as_tester = tester_figures(tasks, tests, _make_tiny_model(), executor)
    return {fam: {"right": statistics.fmean(v["right"]),
                  "majority_wrong": statistics.fmean(v["majority_wrong"]),
                  **as_tester[fam], "problems": len(v["right"])} for fam, v in out.items()}


def load_model(name: str):
    """(model, tokenizer): a tiny model's name (``tiny``, ``tiny-llama``), or a saved model's
    folder (a run's ``<agent>/final``)."""
    sys.path.insert(0, str(ROOT))
    if Path(name).is_dir():
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        return (AutoModelForCausalLM.from_pretrained(name, dtype=torch.float32),
                AutoTokenizer.from_pretrained(name))
    from coevo_code.generation.tiny import load_tiny
    return load_tiny(name)


def tester_figures(tasks, test_texts, mtm, executor) -> dict:
    """Per family, of the tester completions ``test_texts[i]`` written for ``tasks[i]``: the
    share that are right (the reference passes them; an unparsed one is not) and, of those, the
    share that catch the family's dominant mistake (its program fails them). Both run in the
    sandbox."""
    import numpy as np

    from coevo_code.roles import parse_test
    jobs = []
    for t, texts in zip(tasks, test_texts):
        parsed = [p.test for p in (parse_test(x, t) for x in texts) if p.ok]
        wrong = dominant_program(t, mtm)
        jobs.append(t.job(t.references[:1] + ([wrong] if wrong else []), tests=parsed)
                    if parsed else None)
    ran = iter(executor.run([j for j in jobs if j is not None]))
    counts: dict[str, list[int]] = {}
    for t, texts, job in zip(tasks, test_texts, jobs):
        c = counts.setdefault(t.metadata["family"], [0, 0, 0])  # tests, right, right and catch
        c[0] += len(texts)
        if job is None:
            continue
        passed = np.array(next(ran)["passed"], dtype=bool)
        c[1] += int(passed[0].sum())
        if len(passed) > 1:
            c[2] += int((passed[0] & ~passed[1]).sum())
    return {fam: {"tests_right": right / n if n else None,
                  "right_tests_catch_dominant": catch / right if right else None}
            for fam, (n, right, catch) in counts.items()}


def main_warmstart(args) -> int:
    sys.path.insert(0, str(ROOT))
    from coevo_code.execution import Executor
    weak = weak_families()
    models = {"qwen": "tiny", "llama": "tiny-llama"}
    if args.trained:  # a pair run's final weights, on the same problems and samples
        models = {a: str(args.trained / a / "final") for a in models}
        missing = [m for m in models.values() if not Path(m).is_dir()]
        if missing:
            raise SystemExit(f"learning.py warmstart --from {args.trained}: no {missing[0]}")
    records, results = {}, []
    with Executor() as ex:
        for agent, model in models.items():
            records[model] = warmstart(model, args.per_family, args.samples, args.seeds[0], ex)
    fams = sorted(next(iter(records.values())))
    print(f"{'family':<18}" + "".join(f"{(a if args.trained else m) + ' right':>22}"
                                      f"{'majority wrong':>16}"
                                      f"{'tests right':>13}{'catch dominant':>16}"
                                      for a, m in models.items()))
    for fam in fams:
        print(f"{fam:<18}" + "".join(
            f"{records[m][fam]['right']:>21.2f}{'*' if fam in weak[a] else ' '}"
            f"{records[m][fam]['majority_wrong']:>16.2f}{_fmt(records[m][fam]['tests_right']):>13}"
            f"{_fmt(records[m][fam]['right_tests_catch_dominant']):>16}"
            for a, m in models.items()))
    print("(* a weak family of that model; catch dominant: the share of its right tests that "
          "the family's dominant mistake fails)")
    for agent, model in models.items():
        right = {w: statistics.fmean(v["right"] for f, v in records[model].items()
                                     if "+" not in f and (f in weak[agent]) == w)
                 for w in (True, False)}
        print(f"{agent}: samples right, mean over its weak families {right[True]:.2f}, "
              f"over its strong families {right[False]:.2f}")
    for agent, model in (() if args.trained else models.items()):  # item 1: the warm starts
        w = [records[model][f] for f in weak[agent]]
        wrong = statistics.fmean(x["majority_wrong"] for x in w)
        right = min(x["right"] for x in w)
        results.append((f"{model}: majority answer wrong on >= 60% of its weak families' problems "
                        f"({wrong:.0%}), right answer >= 10% of samples on each (min "
                        f"{right:.0%})", wrong >= 0.6 and right >= 0.1))
    for text, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    name = "warmstart-trained.json" if args.trained else "warmstart.json"
    (args.out / name).write_text(json.dumps(
        {"samples": args.samples, "per_family": args.per_family, "families": records,
         "claims": [{"claim": t, "ok": ok} for t, ok in results]}, indent=1))
    return 0 if all(ok for _, ok in results) else 1


# ---- the comparisons table ----------------------------------------------------------------------
SINGLE = {"cure": "both", "coder_only": "code", "tester_only": "test"}
LABEL_FREE = {"partner": (PAIR_CONFIGS["partner"], ()),
              "self_majority": (PAIR_CONFIGS["self_majority"], ()),
              # the frozen labeller (tiny-llama's warm start) writes its completions for every
              # training problem at the start: 480 of them, as many as 60 steps visit
              "frozen": (PAIR_CONFIGS["partner"], ("--label_source", "frozen",
                                                   "--frozen_model", "tiny-llama",
                                                   "--tasks_limit", "480")),
              "gold": (PAIR_CONFIGS["partner"], ("--label_source", "gold"))}
TABLE_FIGS = ("code_acc", "code_acc_greedy", "ut_acc", "bon_acc")
HELDOUT = 60  # the held-out problems every run is scored on (the configs' eval_tasks_limit)


def heldout_eval(model_dir: Path, seed: int = 0) -> dict:
    """A saved model scored as the runs score themselves: 60 ``heldout`` problems (the same
    seeded sample), 4 samples at temperature 1 and one greedy; cached beside the weights."""
    cache = model_dir / "heldout.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    sys.path.insert(0, str(ROOT))
    import torch

    from coevo_code.evaluation.heldout import evaluate_model
    from coevo_code.execution import Executor
    from coevo_code.tasks import load_tasks
    from coevo_code.tasks.model import seeded_sample
    torch.set_num_threads(2)
    tasks = seeded_sample(list(load_tasks("world", split="heldout")), HELDOUT, 0)
    model, tok = load_model(str(model_dir))
    with Executor(slots=2) as ex:
        res = evaluate_model(model, tok, tasks, ex, k=4, temperature=1.0, max_new_tokens=64,
                             seed=seed)
    cache.write_text(json.dumps(res))
    return res


def run_single(out: Path, seed: int, row: str, extra: list[str]) -> dict:
    """(a) The default run (one model, gold tests) training both roles, the coder only or the
    tester only (``--train_roles``)."""
    run = out / f"{row}-seed{seed}"
    if (run / "bench.json").is_file():
        return json.loads((run / "bench.json").read_text())
    wall, rss = _launch(run, [sys.executable, "-m", "coevo_code.cli", "train", "--output_dir",
                              str(run), "--seed", str(seed), "--train_roles", SINGLE[row],
                              *extra])
    rec = {"group": "a", "row": row, "seed": seed, "wall_s": wall, "peak_rss_mb": rss,
           "agents": {"tiny": {"evals": _jsonl(run / "eval.jsonl")}}}
    (run / "bench.json").write_text(json.dumps(rec))
    return rec


def stop_step(evals: list[dict], patience: int) -> int | None:
    """The step at which early stopping with ``patience`` evaluations stops (None: never)."""
    best, since = None, 0
    for e in evals:
        if best is None or e["code_acc"] > best:
            best, since = e["code_acc"], 0
        else:
            since += 1
            if since >= patience:
                return e["step"]
    return None


def kept_step(evals: list[dict], stop: int | None) -> int:
    """The step whose checkpoint early stopping that stops at ``stop`` keeps: the best
    validation score up to there (the first of equals, as ``keep_best`` keeps it)."""
    seen = [e for e in evals if stop is None or e["step"] <= stop]
    return max(seen, key=lambda e: (e["code_acc"], -e["step"]))["step"]


def run_long(out: Path, seed: int, steps: int, extra: list[str]) -> dict:
    """(c) The self-majority pair run long, scored every ``steps // 10`` steps on 24 labelled
    ``train`` problems (the small validation set; labels never reach a reward), ``best/`` kept;
    then each agent's ``best/`` and ``final/`` scored on the held-out problems."""
    flags = ("--max_steps", str(steps), "--eval_steps", str(steps // 10), "--save_steps",
             str(steps), "--eval_tasks_split", "train", "--eval_tasks_limit", "24",
             "--keep_best")
    rec = run_pair(out, seed, "self_long", extra, PAIR_CONFIGS["self_majority"], flags,
                   name=f"self_long{steps}")
    run = out / f"self_long{steps}-seed{seed}"
    for name, a in rec["agents"].items():
        stop = stop_step(a["evals"], 3)
        a.update(stop_step=stop, kept_step=kept_step(a["evals"], stop))
        if "best_heldout" not in a:
            best = json.loads((run / name / "best" / "best.json").read_text())
            a.update(best_step=best["step"],
                     best_heldout=heldout_eval(run / name / "best", seed),
                     final_heldout=heldout_eval(run / name / "final", seed))
    rec.update(group="c", row="self_long")
    (run / "bench.json").write_text(json.dumps(rec))
    return rec


def run_tester_reward(out: Path, seed: int, which: str, tester: Path, steps: int) -> dict:
    """(d) A fresh coder (``tiny-llama``'s warm start) trained by TRL's GRPOTrainer on a frozen
    trained tester's tests (``TesterReward``; the tester: the ``cure`` row's final model) or on
    the gold tests through the same reward (``TesterReward.from_gold``)."""
    run = out / f"tester_reward_{which}-seed{seed}"
    if (run / "bench.json").is_file():
        return json.loads((run / "bench.json").read_text())
    wall, rss = _launch(run, [
        sys.executable, str(ROOT / "examples" / "train_with_tester_reward.py"),
        "--model_name_or_path", "tiny-llama",
        "--tester_model", str(tester) if which == "tester" else "gold", "--tester_k", "4",
        "--tester_max_tokens", "64", "--tasks", "world", "--tasks_split", "train",
        "--num_generations", "4", "--per_device_train_batch_size", "32", "--max_steps",
        str(steps), "--max_completion_length", "64", "--learning_rate", "7e-4", "--beta", "0",
        "--temperature", "1.0", "--use_cpu", "true", "--bf16", "false",
        "--gradient_checkpointing", "false", "--report_to", "none", "--save_strategy", "no",
        "--logging_steps", "1", "--torch_threads", "2", "--seed", str(seed), "--output_dir",
        str(run)])
    first = heldout_eval(run / "initial-model", seed)
    last = heldout_eval(run / "final", seed)
    rec = {"group": "d", "row": f"tester_reward_{which}", "seed": seed, "wall_s": wall,
           "peak_rss_mb": rss, "agents": {"llama": {"evals": [{"step": 0, **first},
                                                              {"step": steps, **last}]}}}
    (run / "bench.json").write_text(json.dumps(rec))
    return rec


def _spread(xs) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    m = statistics.fmean(xs)
    return f"{m:.2f}" if len(xs) == 1 else f"{m:.2f} ({min(xs):.2f}-{max(xs):.2f})"


def comparisons(records: list[dict]) -> str:
    """One table: per row and agent, the final held-out figures (mean, and min-max over seeds),
    and the row's wall time; the long run's validation curve and held-out best/ vs final/."""
    head = (f"{'row':<28}{'agent':<7}{'seeds':>6}{'wall s':>8}  "
            + "".join(f"{k:>20}" for k in TABLE_FIGS))
    lines = [head, "-" * len(head)]
    rows: dict[tuple, list] = {}
    for r in records:
        if r["group"] == "c":
            continue
        for name, a in r["agents"].items():
            rows.setdefault((r["group"], r["row"], name), []).append((r, a))
    starts = {}  # each model's first evaluation; (d)'s own, scored after the run
    for (group, row, name), got in rows.items():
        starts.setdefault(f"{name} (d)" if group == "d" else name, got[0][1]["evals"][0])
        lines.append(f"({group}) {row:<24}{name:<7}{len(got):>6}"
                     f"{statistics.fmean(r['wall_s'] for r, _ in got):>8.0f}  " + "".join(
                         f"{_spread([a['evals'][-1].get(k) for _, a in got]):>20}"
                         for k in TABLE_FIGS))
    for name, e in starts.items():
        lines.append(f"{'(start) warm start':<28}{name:<11}{'':>2}{'':>8}  "
                     + "".join(f"{_fmt(e.get(k)):>20}" for k in TABLE_FIGS))
    for r in records:
        if r["group"] != "c":
            continue
        lines.append("")
        lines.append(f"(c) self-majority for {r['agents']['qwen']['steps']} steps, seed "
                     f"{r['seed']} ({r['wall_s']:.0f} s): validation code_acc (24 labelled "
                     f"train problems) by step; held-out best/ (the step kept) vs final/")
        for name, a in r["agents"].items():
            curve = " ".join(f"{e['step']}:{e['code_acc']:.2f}" for e in a["evals"])
            lines.append(f"    {name:<6} {curve}")
            b, f = a["best_heldout"], a["final_heldout"]
            stop = ("would not stop" if a["stop_step"] is None else
                    f"would stop at step {a['stop_step']}, keeping step {a['kept_step']}")
            lines.append(f"    {name:<6} best/ (step {a['best_step']}; patience 3 {stop}): "
                         + ", ".join(f"{k} {_fmt(b.get(k))}" for k in TABLE_FIGS)
                         + "; final/: " + ", ".join(f"{k} {_fmt(f.get(k))}" for k in TABLE_FIGS))
    return "\n".join(lines)


def plot_table(records: list[dict], path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from coevo_code.plots import pyplot, save
    plt = pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(15, 4.5), gridspec_kw={"width_ratios": [3, 1]})
    rows: dict[tuple, list] = {}
    for r in records:
        if r["group"] != "c":
            for name, a in r["agents"].items():
                rows.setdefault((r["group"], r["row"], name), []).append(
                    a["evals"][-1].get("code_acc"))
    colors = {"a": "tab:blue", "b": "tab:green", "d": "tab:purple"}
    for i, ((group, row, name), xs) in enumerate(rows.items()):
        xs = [x for x in xs if x is not None]
        m = statistics.fmean(xs)
        ax.bar(i, m, color=colors[group], alpha=0.8,
               yerr=[[m - min(xs)], [max(xs) - m]], capsize=3)
    ax.set_xticks(range(len(rows)), [f"{row.replace('tester_reward_', 'reward: ')}\n{name}"
                                    for _, row, name in rows], fontsize=7)
    ax.set(title="final held-out code_acc (mean, min-max over seeds): (a) CURE ablations, "
                 "(b) label sources, (d) tester as reward", ylim=(0, 1))
    ax.grid(alpha=0.3, axis="y")
    for r in records:
        if r["group"] == "c":
            for name, a in r["agents"].items():
                ax2.plot([e["step"] for e in a["evals"]], [e["code_acc"] for e in a["evals"]],
                         marker="o", ms=3, label=f"{name} (best step {a['best_step']})")
    ax2.set(title="(c) self-majority, long: validation code_acc", xlabel="step", ylim=(0, 1))
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7)
    save(fig, path, legend=False)


def main_table(args, extra) -> int:
    seeds = [args.seeds[0]] if args.quick else args.seeds
    long_steps = 90 if args.quick else 150
    records, t0 = [], time.perf_counter()

    def keep(rec, what):
        records.append(rec)
        print(f"learning: {what}/seed {rec['seed']}: {rec['wall_s']:.0f} s", flush=True)

    for seed in seeds:
        for row in SINGLE:
            keep(run_single(args.out, seed, row, extra), row)
        for source, (config, flags) in LABEL_FREE.items():
            rec = run_pair(args.out, seed, source, extra, config, flags)
            rec.update(group="b", row=source)
            keep(rec, source)
        tester = args.out / f"cure-seed{seed}" / "final"
        for which in ("tester", "gold"):
            keep(run_tester_reward(args.out, seed, which, tester, 90), f"tester_reward_{which}")
    keep(run_long(args.out, seeds[0], long_steps, extra), "self_long")
    print(comparisons(records))
    print(f"learning: the table took {time.perf_counter() - t0:.0f} s here (runs already done "
          f"are read back)")
    return report(args.out, records, [], plot_table, "table.png", "table.json")


def main_pair(args, extra) -> int:
    records = []
    for seed in args.seeds:
        for source in PAIR_CONFIGS:
            rec = run_pair(args.out, seed, source, extra)
            records.append(rec)
            print(f"learning: {source}/seed {seed}: {rec['wall_s']:.0f} s, held-out code_acc "
                  + ", ".join(f"{n} {_fmt(a['evals'][0]['code_acc'])} -> "
                              f"{_fmt(a['evals'][-1]['code_acc'])}"
                              for n, a in rec["agents"].items()), flush=True)
    print(pair_table(records))
    return report(args.out, records, pair_claims(records), plot_pair, "pair.png")


def report(out: Path, records: list[dict], results: list[tuple[str, bool]], draw,
           png: str, summary: str = "summary.json") -> int:
    """Print the claims with PASS or FAIL, write ``summary`` (``pair`` and ``table`` share a
    folder, each its own file) and the plot; the exit code."""
    for text, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    (out / summary).write_text(json.dumps(
        {"records": records, "claims": [{"claim": t, "ok": ok} for t, ok in results]}, indent=1))
    draw(records, out / png)
    print(f"learning: {out / summary}, {out / png}")
    return 0 if all(ok for _, ok in results) else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["default", "pair", "warmstart", "table"])
    ap.add_argument("--quick", action="store_true", help="table: one seed, a shorter long run")
    ap.add_argument("--samples", type=int, default=8, help="warmstart: samples per problem")
    ap.add_argument("--per_family", type=int, default=20, help="warmstart: problems per family")
    ap.add_argument("--from", dest="trained", type=Path,
                    help="warmstart: score this pair run's <agent>/final weights instead")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--controls", nargs="+", default=list(CONTROLS), choices=CONTROLS)
    ap.add_argument("--out", type=Path)
    args, extra = ap.parse_known_args(argv)
    args.out = args.out or ROOT / "runs" / ("learning" if args.what == "default"
                                            else "learning-pair")  # pair, table share runs
    args.out.mkdir(parents=True, exist_ok=True)
    if args.what == "pair":
        return main_pair(args, extra)
    if args.what == "warmstart":
        return main_warmstart(args)
    if args.what == "table":
        return main_table(args, extra)
    records = []
    for control in args.controls:  # the real runs first, on a quiet machine
        for seed in args.seeds:
            rec = run_one(args.out, seed, control, extra)
            records.append(rec)
            print(f"learning: {control}/seed {seed}: {rec['wall_s']:.0f} s, held-out code_acc "
                  f"{_fmt(rec['evals'][0]['code_acc'])} -> {_fmt(rec['evals'][-1]['code_acc'])}",
                  flush=True)
    print(table(records))
    return report(args.out, records, claims(records), plot, "learning.png")


if __name__ == "__main__":
    sys.exit(main())
