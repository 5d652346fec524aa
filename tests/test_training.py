"""Training on TRL with the tiny model and the real executor (CPU, one torch thread)."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("trl")

import torch

from coevo_code.roles import parse_program, parse_test
from coevo_code.training import train
from coevo_code.training.run import reward_options
from coevo_code.training.scoring import LOWEST
from coevo_code.training.step_metrics import METRIC_KEYS
from coevo_code.training.trainer import STEP_KEYS
from training_helpers import (GARBAGE, PLUMBING, bundled, expected_rewards,
                              scripted_rollout, scripted_sampler, tiny_config)

torch.set_num_threads(1)


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.slow
def test_one_full_step_with_generation(tmp_path):
    """The tiny model generates, the sandbox judges, TRL updates: one step end to end."""
    cfg = tiny_config(tmp_path / "run", max_steps=1, save_strategy="steps", save_steps=1)
    res = train(cfg, PLUMBING)
    assert res.global_step == 1
    lines = _lines(tmp_path / "run" / "metrics.jsonl")
    assert [x["step"] for x in lines] == [1]
    line = lines[0]
    assert list(line) == list(STEP_KEYS)  # every key on every line
    for k, v in line.items():
        assert v is None or (isinstance(v, (int, float)) and math.isfinite(v)), (k, v)
    assert line["problems"] == 4 and line["generation"] == 1
    assert line["time_generation"] > 0 and line["time_update"] > 0
    # a random model writes garbage: it parses to nothing, gets the lowest reward, no crash
    mode, rows, rewards = res.trainer.coevo.calls[-1]
    assert len(rows) == 32
    tasks = bundled()
    unparsed = 0
    for (ti, role, text), r in zip(rows, rewards):
        parsed = (parse_program(text, tasks[ti]) if role == "code" else parse_test(text, tasks[ti]))
        if not parsed.ok:
            unparsed += 1
            assert r is None if role == "test" else r == LOWEST["code"]
    assert unparsed > 0
    assert (tmp_path / "run" / "checkpoint-1" / "trainer_state.json").exists()
    assert (tmp_path / "run" / "final" / "config.json").exists()
    # the model card (written with the checkpoint, and beside the final weights) is coevo's,
    # not TRL's template: it names the base model, the method and the data
    for card in (tmp_path / "run" / "README.md", tmp_path / "run" / "final" / "README.md"):
        text = card.read_text()
        assert "base_model: tiny-random" in text and "arXiv:2506.03136" in text, text
        assert "huggingface.co/None" not in text and "time machine" not in text
    assert str(tmp_path / "run" / "final") in (tmp_path / "run" / "final" / "README.md").read_text()


def _check_routing(res, tasks, k):
    """Every reward TRL received equals an independent recomputation for its (problem, role)
    group; garbage gets its role's lowest reward; problems nobody solves have no test rows."""
    reward = res.trainer.coevo
    calls = [c for c in reward.calls if c[0] == "train"]
    assert calls
    from coevo_code.execution import Executor
    with Executor(slots=1) as ex:
        for mode, rows, rewards in calls:
            # k code rows then k test rows per problem, groups intact
            for g in range(0, len(rows), k):
                group = rows[g:g + k]
                assert len({(ti, role) for ti, role, _ in group}) == 1
            for g in range(0, len(rows), 2 * k):
                assert [r for _, r, _ in rows[g:g + 2 * k]] == ["code"] * k + ["test"] * k
            want = expected_rewards(tasks, rows, reward_options(res.trainer.args), ex)
            assert rewards == pytest.approx(want)
            for (ti, role, text), r in zip(rows, rewards):
                if text == GARBAGE and not (role == "test" and ti % 3 == 2):
                    assert r == LOWEST[role]
                if role == "test":
                    assert (r is None) == (ti % 3 == 2)
                if role == "code" and ti % 3 != 2 and "wrong" not in text and text != GARBAGE:
                    assert r == 1.0


def test_reward_routing_and_dropped_rows(tmp_path):
    tasks = bundled(6)
    cfg = tiny_config(tmp_path / "run", max_steps=2, problems_per_generation=3,
                      per_device_train_batch_size=24)
    res = train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    _check_routing(res, tasks, 4)
    # the tests of a problem no solution solves are out of the loss: zero advantage, no tokens
    dropped_tokens = []
    for batch, (mode, rows, rewards) in zip(res.trainer.batches, res.trainer.coevo.calls):
        for (ti, role, _), dropped, adv, tokens in zip(rows, batch["dropped"], batch["advantages"],
                                                       batch["tokens"]):
            assert dropped == (role == "test" and ti % 3 == 2)
            if dropped:
                assert adv == 0.0
                dropped_tokens.append(tokens)
            else:
                assert tokens > 0
        assert any(a != 0 for a in batch["advantages"])
    assert dropped_tokens and all(t == 0 for t in dropped_tokens)
    lines = _lines(tmp_path / "run" / "metrics.jsonl")
    assert [x["step"] for x in lines] == [1, 2]
    for x in lines:
        assert 0 < x["code_acc"] < 1 and 0 < x["ut_acc"] < 1
        assert x["parse_fail_code"] > 0 and x["exec_cells"] > 0 and x["exec_cells_per_s"] > 0
        assert x["test_rows_no_signal"] in (0, pytest.approx(1 / 3), pytest.approx(2 / 3))
        assert x["loss"] is not None and x["grad_norm"] > 0


@pytest.mark.slow
def test_extra_reward_functions_beside_coevo_keep_its_masking(tmp_path):
    """A second reward function (TRL's way: a dotted path, weighted by reward_weights) moves
    the advantages of the rows coevo scores, and cannot unmask the rows coevo leaves without
    signal: they keep zero advantage and no loss tokens although the other function gives
    them a value."""
    tasks = bundled(6)
    cfg = tiny_config(tmp_path / "run", max_steps=2, problems_per_generation=3,
                      per_device_train_batch_size=24,
                      reward_funcs=["training_helpers.length_bonus"], reward_weights=[1.0, 0.5])
    res = train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    assert len(res.trainer.reward_funcs) == 2
    _check_routing(res, tasks, 4)  # coevo's own rewards are unchanged
    base = train(tiny_config(tmp_path / "base", max_steps=2, problems_per_generation=3,
                             per_device_train_batch_size=24), PLUMBING, tasks=tasks,
                 rollout_func=scripted_rollout(tasks, 4))
    moved = 0
    for batch, plain, (mode, rows, _) in zip(res.trainer.batches, base.trainer.batches,
                                             res.trainer.coevo.calls):
        assert batch["dropped"] == plain["dropped"]
        for (ti, role, _), dropped, adv, tokens, adv0 in zip(
                rows, batch["dropped"], batch["advantages"], batch["tokens"],
                plain["advantages"]):
            assert dropped == (role == "test" and ti % 3 == 2)
            if dropped:
                assert adv == 0.0 and tokens == 0
            moved += abs(adv - adv0) > 1e-6
    assert moved > 0  # the second function reaches the advantages of the rows with signal


@pytest.mark.slow
def test_skip_zero_advantage_gives_the_same_update_on_fewer_rows(tmp_path):
    """--skip_zero_advantage runs the forward and backward pass on the rows with a signal only,
    and the weights after two steps are those of the full batch's update (which did move them)."""
    from transformers import AutoModelForCausalLM
    tasks = bundled(6)

    def run(name, **kw):
        cfg = tiny_config(tmp_path / name, max_steps=2, problems_per_generation=3,
                          per_device_train_batch_size=24, **kw)
        res = train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
        return res, AutoModelForCausalLM.from_pretrained(str(res.final_dir)).state_dict()

    full, w_full = run("full")
    skip, w_skip = run("skip", skip_zero_advantage=True)
    w0 = AutoModelForCausalLM.from_pretrained(str(tmp_path / "full" / "initial-model")).state_dict()
    for batch in skip.trainer.batches:
        assert batch["updated"] == max(1, sum(a != 0 for a in batch["advantages"]))
    assert any(b["updated"] < len(b["advantages"]) for b in skip.trainer.batches)
    for batch in full.trainer.batches:
        assert batch["updated"] == len(batch["advantages"])
    moved = max((w_full[k] - w0[k]).abs().max().item() for k in w0)
    assert moved > 1e-4
    # the same up to float rounding (a batch of another size sums in another order, and Adam
    # scales a near-zero gradient's rounding up): a hundredth of how far the update moved them
    for k in w_full:
        torch.testing.assert_close(w_skip[k], w_full[k], rtol=0, atol=moved / 100)
    assert [x["loss"] for x in _lines(tmp_path / "skip" / "metrics.jsonl")] == pytest.approx(
        [x["loss"] for x in _lines(tmp_path / "full" / "metrics.jsonl")], abs=1e-6)


def test_without_zero_advantage_keeps_the_rows_with_signal_and_the_normaliser():
    from coevo_code.training.trainer import CoevoTrainer
    out = {"advantages": torch.tensor([0.5, 0.0, -0.5, 0.0]),
           "completion_ids": torch.arange(8).reshape(4, 2),
           "num_items_in_batch": torch.tensor(8), "note": "kept"}
    kept = CoevoTrainer._without_zero_advantage(out)
    assert kept["advantages"].tolist() == [0.5, -0.5]
    assert kept["completion_ids"].tolist() == [[0, 1], [4, 5]]
    assert kept["num_items_in_batch"].item() == 8 and kept["note"] == "kept"
    # no row with a signal: one row stays (its loss is zero), so every process runs a backward
    none = CoevoTrainer._without_zero_advantage({**out, "advantages": torch.zeros(4)})
    assert none["advantages"].tolist() == [0.0] and none["completion_ids"].tolist() == [[0, 1]]


def test_skip_zero_advantage_refuses_a_loss_where_such_rows_count(tmp_path):
    with pytest.raises(ValueError, match="--skip_zero_advantage needs --beta 0"):
        tiny_config(tmp_path / "run", skip_zero_advantage=True, beta=0.04)
    with pytest.raises(ValueError, match="--skip_zero_advantage needs --beta 0 and --loss_type"):
        tiny_config(tmp_path / "run", skip_zero_advantage=True, loss_type="grpo")


def test_unknown_reward_function_is_named(tmp_path):
    from coevo_code.tasks import LoaderError
    with pytest.raises(LoaderError, match="--reward_funcs no_such_reward"):
        train(tiny_config(tmp_path / "run", max_steps=1, reward_funcs=["no_such_reward"]),
              PLUMBING, tasks=bundled(2))


@pytest.mark.slow
def test_reward_routing_under_gradient_accumulation(tmp_path):
    """4 micro-batches of 8 rows per optimiser step: the reward call still sees the whole
    generation batch, both roles of every problem."""
    tasks = bundled(6)
    cfg = tiny_config(tmp_path / "run", max_steps=2, problems_per_generation=4,
                      per_device_train_batch_size=8, gradient_accumulation_steps=4)
    assert cfg.steps_per_generation == 4
    res = train(cfg, PLUMBING, tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    assert res.global_step == 2
    _check_routing(res, tasks, 4)
    assert len([c for c in res.trainer.coevo.calls if c[0] == "train"]) == 2
    assert [x["step"] for x in _lines(tmp_path / "run" / "metrics.jsonl")] == [1, 2]


@pytest.mark.slow
def test_weights_move_with_signal(tmp_path):
    from transformers import AutoModelForCausalLM
    tasks = bundled(6)
    res = train(tiny_config(tmp_path / "run", max_steps=1, problems_per_generation=3,
                            per_device_train_batch_size=24), PLUMBING, tasks=tasks,
                rollout_func=scripted_rollout(tasks, 4))
    a = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "initial-model")
    b = AutoModelForCausalLM.from_pretrained(res.final_dir)
    diff = max((pa - pb).abs().max().item() for pa, pb in zip(a.parameters(), b.parameters()))
    assert diff > 1e-6


@pytest.mark.parametrize("overrides, message", [
    ({"problems_per_generation": None, "per_device_train_batch_size": 12}, "multiple of 2k"),
    ({"p_give_example": 1.5}, "--p_give_example"),
    ({"label_source": "oracle"}, "--label_source"),
    ({"min_len": 10, "max_len": 5}, "--min_len"),
    ({"reward_funcs": ["training_helpers.length_bonus"], "reward_weights": [1.0]},
     "--reward_weights needs 2 weights"),
])
def test_config_errors_name_the_flag(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(tmp_path, **overrides)


def test_length_shaping_passes_cure_advantages_through(tmp_path):
    cfg = tiny_config(tmp_path, length_shaping=True)
    assert cfg.scale_rewards == "none"


def test_metric_keys_cover_the_issue():
    for k in ("code_acc", "ut_acc", "p01", "p00", "bon_acc", "exec_cells_per_s"):
        assert k in METRIC_KEYS
    for k in ("step", "reward_code_mean", "reward_test_mean", "time_generation",
              "time_execution", "time_rewards", "time_update"):
        assert k in STEP_KEYS


@pytest.mark.slow
def test_eval_set_and_tensorboard(tmp_path, monkeypatch):
    """The labelled evaluation set is scored before the first step and every eval_steps (pooled
    exactly over the whole set, the model's completions scripted), and the step metrics reach
    TensorBoard through TRL's report_to."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    tasks = bundled(6)
    monkeypatch.setattr("coevo_code.evaluation.heldout.sample", scripted_sampler(tasks))
    cfg = tiny_config(tmp_path / "run", max_steps=2, problems_per_generation=3,
                      per_device_train_batch_size=24, eval_tasks="bundled", eval_steps=2,
                      eval_on_start=True, per_device_eval_batch_size=8,
                      report_to=["tensorboard"])
    assert cfg.eval_strategy == "steps"
    train(cfg, PLUMBING, tasks=tasks, eval_tasks=tasks, rollout_func=scripted_rollout(tasks, 4))
    evals = _lines(tmp_path / "run" / "eval.jsonl")
    assert [e["step"] for e in evals] == [0, 2]
    e = evals[1]
    assert e["problems"] == 6 and e["cells"] > 0
    # problems 2 and 5 get only wrong solutions; the others 3 correct of 4 and a correct greedy
    assert e["code_acc"] == pytest.approx(12 / 24)
    assert e["code_acc_greedy"] == pytest.approx(4 / 6)
    assert e["pass_at_4"] == pytest.approx(4 / 6)
    assert e["bon_acc"] == pytest.approx(4 / 6)
    # tests: the two gold ones pass the reference (no mutants here), wrong and garbage do not
    assert e["ut_acc"] == pytest.approx(12 / 24)
    assert set(e["by_family"]) == {"all"} and e["by_family"]["all"]["code_acc"] == e["code_acc"]
    card = (tmp_path / "run" / "final" / "README.md").read_text()
    assert "Held-out, last evaluation (step 2" in card and "| 0.500 | 0.667 |" in card
    events = list(tmp_path.rglob("events.out.tfevents*"))
    assert events
    tags = set()
    for ev in events:
        acc = EventAccumulator(str(ev))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    assert "train/coevo/code_acc" in tags and "train/loss" in tags
    assert any(t.startswith("eval/") and "code_acc" in t for t in tags), sorted(tags)
