"""Training through a failing sandbox (issue 51, item 1), with real judges killed (SIGKILL) and a
real Ray node removed: the run goes on, ``metrics.jsonl`` counts the lost cells
(``exec_sandbox_errors``) and the rows they masked (``rows_masked``), the masked rows get no reward,
no advantage and no place in their group's baseline, every other reward is what a run without the
fault gives; and a sandbox that fails entirely stops the run with one line, which ``--resume``
continues."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl")

import torch
from transformers import TrainerCallback

from coevo_code.execution import Executor
from coevo_code.matrix import full_matrix
from coevo_code.training import train
from coevo_code.training.run import reward_options
from coevo_code.training.scoring import prepare
from lost_cells import Killer, expected_masks
from training_helpers import (PLUMBING, bundled, expected_rewards, plan, scripted_rollout,
                              tiny_config)

torch.set_num_threads(1)
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
K = 4


def _lines(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def _sleeper_rollout(tasks):
    """The scripted completions, but the first solution of the first problem of the first
    generation batch is its reference behind a ``time.sleep``: the cells the killer finds
    (whole units of that program are lost). Returns the rollout and a dict whose ``"ti"`` names
    that problem once chosen."""
    chosen: dict = {}

    def choose(ti, role, j, trainer):
        if trainer.state.global_step == 0:
            chosen.setdefault("ti", ti)
        if (ti, role, j) == (chosen.get("ti"), "code", 0):
            return f"```python\nimport time\ntime.sleep(0.5)\n{tasks[ti].references[0]}\n```"
        return plan(tasks[ti], ti, role, j)
    return scripted_rollout(tasks, K, choose=choose), chosen


def _check_against_the_truth(res) -> list[tuple[int, int]]:
    """Every call's rewards against the same completions judged without a fault: the rows the
    lost cells could change (``expected_masks`` on the true matrix and the lost cells) are None
    and marked masked, every other reward equals the fault-free one. Returns each call's (lost
    cells, masked rows)."""
    step = res.trainer.coevo
    tasks = step.tasks["train"]  # as the step scores them (reward_tasks: hidden tests)
    opts = reward_options(res.trainer.args)
    calls = [c for c in step.calls if c[0] == "train"]
    scored = [s for split, s in step.scored if split == "train"]
    assert len(calls) == len(scored) == res.global_step
    out = []
    with Executor(slots=2) as ex:
        for (_, rows, rewards), scores in zip(calls, scored):
            truth = expected_rewards(tasks, rows, opts, ex)
            groups: dict = {}
            for pos, (ti, role, _) in enumerate(rows):
                groups.setdefault(ti, {"code": [], "test": []})[role].append(pos)
            masked = set()
            for (ti, g), s in zip(groups.items(), scores):
                b = prepare(tasks[ti], [rows[p][2] for p in g["code"]],
                            [rows[p][2] for p in g["test"]], opts)
                true = full_matrix(b, ex.run([b.job])[0] if b.job else None)
                code, tests = expected_masks(true & ~s.lost, s.lost, b.n_gold,
                                             opts.code_all_passed)
                assert (s.code_masked, s.test_masked) == (code, tests), tasks[ti].id
                masked |= {p for p, m in zip(g["code"] + g["test"], code + tests) if m}
            for pos, (got, want) in enumerate(zip(rewards, truth)):
                if pos in masked or want is None:
                    assert got is None, pos
                else:
                    assert got == pytest.approx(want), pos
            out.append((sum(s.sandbox_errors for s in scores), len(masked)))
    return out


@pytest.mark.slow
def test_a_judge_killed_mid_step_masks_what_it_touched_and_the_run_goes_on(tmp_path):
    tasks = bundled(6)

    def run(name, fault):
        cfg = tiny_config(tmp_path / name, max_steps=2, problems_per_generation=3,
                          per_device_train_batch_size=24,
                          reward_funcs=["training_helpers.length_bonus"], reward_weights=[1.0, 0.5],
                          max_rows_masked=0.25)  # 5 of 24 rows: above the default 0.1
        rollout, chosen = _sleeper_rollout(tasks)
        with fault:
            return train(cfg, PLUMBING, tasks=tasks, rollout_func=rollout), chosen["ti"]

    clean, sleeper = run("clean", contextlib.nullcontext())
    killer = Killer()
    faulted, again = run("faulted", killer)
    assert again == sleeper
    assert faulted.global_step == 2 and (tmp_path / "faulted" / "final").is_dir()
    assert killer.kills >= 2  # each unit of the sleeper: killed, re-run on a fresh judge, killed

    counts = _check_against_the_truth(faulted)
    lines = _lines(tmp_path / "faulted" / "metrics.jsonl")
    assert [(x["exec_sandbox_errors"], x["rows_masked"]) for x in lines] == counts
    # the sleeper's whole row is lost: it may be correct, so every test of its problem is masked
    # too (5 rows, in step 1); the other batch lost nothing
    assert counts[0][0] > 0 and counts[0][1] == 1 + K and counts[1] == (0, 0)
    assert all(x["rows_masked"] == 0 and x["exec_sandbox_errors"] == 0
               for x in _lines(tmp_path / "clean" / "metrics.jsonl"))

    # the same rows, the same rewards but for the masked ones
    for (_, rows, got), (_, rows0, want) in zip(faulted.trainer.coevo.calls,
                                                 clean.trainer.coevo.calls):
        assert rows == rows0
        for (ti, role, text), a, b in zip(rows, got, want):
            masked = ti == sleeper and (role == "test" or "time.sleep" in text)
            assert a is None if masked else a == b

    # no advantage, no loss tokens, and out of the group's baseline (with a second reward
    # function beside coevo's, whose value these rows keep)
    for batch, (_, rows, rewards) in zip(faulted.trainer.batches, faulted.trainer.coevo.calls):
        for g in range(0, len(rows), K):
            group = list(range(g, g + K))
            if rows[g][0] != sleeper:
                continue
            combined = [None if rewards[i] is None else rewards[i] + 0.5 * len(rows[i][2]) / 100
                        for i in group]
            kept = [c for c in combined if c is not None]
            for i, c in zip(group, combined):
                if c is None:
                    assert batch["advantages"][i] == 0.0 and batch["tokens"][i] == 0
                    assert batch["dropped"][i]
                else:
                    want = (c - np.mean(kept)) / (np.std(kept, ddof=1) + 1e-4)
                    assert batch["advantages"][i] == pytest.approx(want, rel=1e-4, abs=1e-5)


@pytest.mark.slow
def test_a_ray_node_lost_mid_step_masks_what_it_touched_and_the_run_goes_on(tmp_path):
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from coevo_code.execution.ray import RESOURCE

    node = {"num_cpus": 2, "resources": {RESOURCE: 1}, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 1, "include_dashboard": False,
                                      "node_ip_address": "127.0.0.1"})
    try:
        workers = [cluster.add_node(**node)]
        cluster.wait_for_nodes()
        tasks = bundled(6)
        removed = []

        def lose(judge):  # the node running the sleeper goes away
            cluster.remove_node(workers[-1], allow_graceful=False)
            removed.append(workers[-1])

        class Rejoin(TrainerCallback):  # a fresh node joins after the step (the main thread)
            def on_step_end(self, args, state, control, **kwargs):
                if len(workers) == len(removed):
                    workers.append(cluster.add_node(**node))

        cfg = tiny_config(tmp_path / "run", max_steps=2, problems_per_generation=3,
                          per_device_train_batch_size=24, exec_backend="ray",
                          exec_address=cluster.address, exec_slots=2, max_rows_masked=1.0)
        rollout, _ = _sleeper_rollout(tasks)
        with Killer(on_sleeper=lose, once=True):
            res = train(cfg, PLUMBING, tasks=tasks, rollout_func=rollout, callbacks=[Rejoin()])
        assert res.global_step == 2 and removed
        counts = _check_against_the_truth(res)
        lines = _lines(tmp_path / "run" / "metrics.jsonl")
        assert [(x["exec_sandbox_errors"], x["rows_masked"]) for x in lines] == counts
        assert len(removed) == 1 and len(workers) == 2
        # step 1 lost the sleeper's cells and all that had not run when its node went; step 2
        # ran on the node that joined
        assert counts[0][0] > 0 and counts[0][1] >= 1 + K and counts[1] == (0, 0)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def _steps(out: Path) -> list[int]:
    path = out / "metrics.jsonl"
    return [x["step"] for x in _lines(path)] if path.exists() else []


@pytest.mark.slow
def test_a_sandbox_that_fails_entirely_stops_the_run_in_one_line_and_resume_continues(tmp_path):
    """``coevo train`` (the warm-started tiny model, whose completions parse) with every judge
    killed every 50 ms from step 2 on: the run stops at step 2 with one line naming the step and
    the cause, exit 4, checkpoint 1 intact; ``--resume`` continues from it once the sandbox
    works."""
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
        [str(ROOT)] + [x for x in [os.environ.get("PYTHONPATH")] if x])}
    cli = [sys.executable, "-m", "coevo_code.cli", "train"]
    p = subprocess.Popen(cli + ["--max_steps", "2", "--save_steps", "1", "--eval_on_start",
                                "false", "--problems_per_generation", "2",
                                "--per_device_train_batch_size", "16", "--torch_threads", "1",
                                "--output_dir", str(out)],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 300
        while not (out / "checkpoint-1").exists() and p.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with Killer(root=p.pid, all=True, every_s=0.05) as killer:
            _, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 4, err[-3000:]
    assert killer.kills > 0 and "Traceback" not in err
    said = [x for x in err.splitlines() if x.startswith("coevo: step")]
    assert len(said) == 1, err[-3000:]
    line = said[0]
    assert line.startswith("coevo: step 2: ") and "masked because" in line, line
    assert "sandbox cell(s) failed twice" in line and "--max_rows_masked 0.1" in line, line
    assert f"coevo train --resume {out}` continues from the last checkpoint" in line, line
    assert _steps(out) == [1]

    r = subprocess.run(cli + ["--resume", str(out)], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert _steps(out) == [1, 2]
    assert all(x["exec_sandbox_errors"] == 0 for x in _lines(out / "metrics.jsonl"))
