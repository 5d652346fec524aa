"""The default run learns: the held-out evaluation's figures, the warm-started tiny models, the
reward controls, the reproduction fingerprint, and a short seeded default run whose held-out code
accuracy rises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coevo_code.execution import Executor

from coevo_code.evaluation.heldout import EVAL_KEYS, evaluate_model, problem_eval, summarize
from coevo_code.tasks.model import seeded_sample
from coevo_code.tasks.world import generate
from coevo_code.training.scoring import control_rewards

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
# the default run cut to 30 steps (its learning rate then decays over 30), seed 1: here its
# held-out code accuracy goes 0.408 -> 0.529
SHORT_RUN = ["--seed", "1", "--max_steps", "30", "--eval_steps", "30", "--save_steps", "30"]


@pytest.fixture(scope="module")
def sandbox():
    """One executor (the best launcher here): these tests are about the world and the models,
    the launchers have tests of their own."""
    with Executor(slots=2) as ex:
        yield ex


# ---- the held-out figures (pure) ------------------------------------------------------------------
def test_problem_eval_judges_tests_by_the_reference_and_its_mutants():
    task = generate("heldout", size=1)[0]
    # 4 sampled solutions + 1 greedy over 2 gold tests and 3 generated tests
    full = np.array([[1, 1, 1, 0, 1], [1, 0, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 1, 1, 1],
                     [1, 1, 1, 1, 1]], dtype=bool)
    # reference passes tests 0 and 1; a mutant fails test 0 only; test 2 did not parse
    judged = np.array([[1, 1, 0], [0, 1, 0], [1, 1, 1]], dtype=bool)
    e = problem_eval(task, full, 2, 4, [True, True, False], judged, 2)
    assert e.correct.tolist() == [True, False, True, False] and e.greedy is True
    # test 1 passes the reference but no mutant fails it (like assert f(3) == f(3)): inaccurate
    assert e.accurate.tolist() == [True, False, False]
    s = summarize([e])
    assert s["code_acc"] == 0.5 and s["code_acc_greedy"] == 1.0 and s["pass_at_4"] == 1.0
    assert s["ut_acc"] == pytest.approx(1 / 3)
    assert s["by_family"][task.metadata["family"]]["code_acc"] == 0.5
    # no mutants: the reference alone decides
    e2 = problem_eval(task, full, 2, 4, [True, True, True], judged[:1], 0)
    assert e2.accurate.tolist() == [True, True, False]


def test_summarize_edge_cases():
    task = generate("heldout", size=1)[0]
    none_right = problem_eval(task, np.zeros((4, 3), dtype=bool), 2, 4, [True], None, 0)
    s = summarize([none_right])
    assert s["code_acc"] == 0.0 and s["pass_at_4"] == 0.0 and s["ut_acc"] is None
    assert s["code_acc_greedy"] is None  # no greedy row sampled
    assert s["p01"] is None  # no correct solution: CURE's test figures are undefined
    assert summarize([])["code_acc"] is None


def test_reward_controls():
    rng = np.random.default_rng(0)
    rewards = [1.0, 0.0, 0.5, None, -1.0, 0.25, None, 1.0]
    roles = ["code"] * 4 + ["test"] * 4
    assert control_rewards(rewards, roles, "none", rng) == rewards
    assert control_rewards(rewards, roles, "flip", rng) == [-1.0, -0.0, -0.5, None, 1.0, -0.25,
                                                            None, -1.0]
    moved = [control_rewards(rewards, roles, "shuffle", rng) for _ in range(20)]
    for m in moved:
        assert m[3] is None and m[6] is None
        assert sorted(m[:3]) == sorted(rewards[:3])  # each role keeps its own values
        assert sorted(x for x in m[4:] if x is not None) == [-1.0, 0.25, 1.0]
    assert any(m != rewards for m in moved)
    with pytest.raises(ValueError, match="must be one of"):
        control_rewards(rewards, roles, "sideways", rng)


# ---- the warm-started models -----------------------------------------------------------------------
# What the shipped warm starts score on 48 held-out problems at temperature 1 (measured: tiny
# code 0.41, unit tests 0.07, 6% unparsed; tiny-llama code 0.17, unit tests 0.01, 59% unparsed).
# The window for unit-test accuracy (0.15 to 0.55) is not reached by either (see README).
WARM = {"tiny": {"code": (0.15, 0.55), "unparsed": 0.2},
        "tiny-llama": {"code": (0.10, 0.55), "unparsed": 0.8}}


@pytest.mark.parametrize("name", sorted(WARM))
def test_warm_start_is_mediocre_on_heldout(sandbox, name):
    """Shipped weights, at most 1.25 M parameters; on held-out problems at temperature 1 the
    model writes programs, and some but far from all are right."""
    from coevo_code.training.model import is_warm, load_tiny
    assert is_warm(name)
    model, tok = load_tiny(name)
    assert sum(p.numel() for p in model.parameters()) <= 1_250_000
    tasks = seeded_sample(generate("heldout"), 48, seed=0)
    got = evaluate_model(model, tok, tasks, sandbox, k=4, temperature=1.0, seed=0)
    assert set(EVAL_KEYS) - {"step"} <= set(got)
    lo, hi = WARM[name]["code"]
    assert lo <= got["code_acc"] <= hi, got
    assert got["ut_acc"] <= 0.55 and got["parse_fail_code"] < WARM[name]["unparsed"], got


def test_shipped_models_fit_the_package():
    assets = ROOT / "coevo_code" / "assets"
    size = sum(f.stat().st_size for d in ("tiny", "tiny-llama") for f in (assets / d).iterdir())
    assert size <= 10 * 2 ** 20


def test_reproduction_fingerprint():
    """``make_tiny_model.py --quick`` (200 problems, 8 SFT steps) reproduces the stored
    tokenizer exactly and the loss curve closely (bit-exactness across CPUs is not required)."""
    stored = json.loads((ROOT / "tests" / "fixtures" / "tiny_fingerprint.json").read_text())
    for arch in ("qwen2", "llama"):
        p = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"),
                            "--arch", arch, "--quick"], capture_output=True, text=True,
                           env=ENV, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        got = json.loads([x for x in p.stdout.splitlines() if x.startswith('{"arch"')][0])
        want = stored[arch]
        assert got["tokenizer_sha256"] == want["tokenizer_sha256"]
        assert (got["params"], got["vocab"]) == (want["params"], want["vocab"])
        assert np.allclose(got["losses"], want["losses"], atol=0.05), (got["losses"],
                                                                       want["losses"])


# ---- the default run learns ------------------------------------------------------------------------
def test_short_default_run_learns(tmp_path):
    """``coevo train`` as shipped, shortened (seeded): the held-out code accuracy rises by at
    least 0.10 from the step-0 evaluation to the last, through the production path (chat
    template, parsers, sandbox, CURE's rewards, TRL's GRPOTrainer)."""
    run = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "train", "--output_dir",
                        str(run), *SHORT_RUN], capture_output=True, text=True, env=ENV,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    evals = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines()]
    assert evals[0]["step"] == 0 and len(evals) >= 2
    rise = evals[-1]["code_acc"] - evals[0]["code_acc"]
    assert rise >= 0.10, [(e["step"], e["code_acc"], e["ut_acc"]) for e in evals]
    steps = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert sum(s["exec_cells"] for s in steps) > 0 and steps[-1]["parse_fail_code"] < 0.5
