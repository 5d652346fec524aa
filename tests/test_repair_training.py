"""Training in repair turns: the credit rules, the tester's repair credit on a scripted batch,
TRL's batches joined, and the trainer end to end with scripted completions: the later turns'
rows train on the revision's tokens only (feedback is prompt), no prompt ever holds a gold
test, the held-out evaluation reports each turn; ``repair_turns: 1`` writes the single-turn
run's metrics exactly."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

import torch

from coevo_code.execution import Executor
from coevo_code.repair import revision_parents, credit_for_repairs, turn_credit
from coevo_code.tasks import load_tasks
from coevo_code.tasks.model import TestCase
from coevo_code.training import train
from coevo_code.training.repair_turns import REPAIR_KEYS, RepairTurns, turn_keys
from coevo_code.training.step import Row, group_rows
from coevo_code.training.trainer import CoevoTrainer, merge_batches
from training_helpers import PLUMBING, rollout_output, tiny_config

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
MARKER = "GOLD-MARKER-5c1e"


# ---- the rules (pure) -----------------------------------------------------------------------------
def test_revision_parents_cycle_the_open_rows():
    assert revision_parents([1, 3], 4) == [1, 3, 1, 3]
    assert revision_parents([2], 3) == [2, 2, 2]
    assert revision_parents([0, 1, 2, 3], 4) == [0, 1, 2, 3]
    assert revision_parents([], 4) == []


def test_revision_parents_by_solution_revise_one_open_row_k_times():
    assert revision_parents([1, 3], 4, "solution", pick=0) == [1, 1, 1, 1]
    assert revision_parents([1, 3], 4, "solution", pick=3) == [3, 3, 3, 3]
    assert revision_parents([], 4, "solution", pick=1) == []
    with pytest.raises(ValueError, match="repair_groups 'row'"):
        revision_parents([1], 2, "row")


def test_turn_credit_rules():
    # turn 1: four rows; rows 1 and 3 were revised, twice each (turn 2), and row 0 of turn 2
    # once more (turn 3)
    R = [[1.0, 0.0, 0.5, 0.0], [1.0, 0.0, 0.5, None], [1.0]]
    P = [[], [1, 3, 1, 3], [0]]
    assert turn_credit(R, P, "turn") == R
    imp = turn_credit(R, P, "improvement")
    assert imp[0] == R[0] and imp[1] == [1.0, 0.0, 0.5, None] and imp[2] == [0.0]
    fin = turn_credit(R, P, "final")
    # turn 2 row 0 takes its revision's 1.0; turn 1 row 1: mean(1.0, 0.5); row 3: its one
    # decided revision; rows 0 and 2 (never revised) keep their own
    assert fin[2] == [1.0] and fin[1] == [1.0, 0.0, 0.5, None]
    assert fin[0] == [1.0, 0.75, 0.5, 0.0]
    # every revision without signal: no credit for the row it revises
    assert turn_credit([[0.0], [None, None]], [[], [0, 0]], "final")[0] == [None]
    with pytest.raises(ValueError, match="repair credit 'best'"):
        turn_credit(R, P, "best")


def test_credit_for_repairs_rules():
    # three generated tests; row a wrong, shown tests 0 and 1, half its revisions right; row b
    # right, shown test 1, its revision wrong; row c wrong, shown 2, revision wrong
    credit, fixed, broken = credit_for_repairs(3, [[0, 1], [1], [2]], [0.0, 1.0, 0.0],
                                                 [0.5, 0.0, 0.0])
    assert fixed.tolist() == [0.5, 0.5, 0.0] and broken.tolist() == [0, 1, 0]
    assert credit.tolist() == [0.5 / 3, 0.0, 0.0]   # test 1 sent a right solution wrong
    # undecided rows count for nothing
    credit, _, _ = credit_for_repairs(2, [[0], [1]], [None, 0.0], [1.0, float("nan")])
    assert credit.tolist() == [0.0, 0.0]


def test_merge_batches_pads_prompts_left_and_completions_right():
    a = {"prompt_ids": torch.tensor([[5, 6]]), "prompt_mask": torch.tensor([[1, 1]]),
         "completion_ids": torch.tensor([[7]]), "completion_mask": torch.tensor([[1]]),
         "advantages": torch.tensor([0.5]), "num_items_in_batch": torch.tensor(1),
         "old_per_token_logps": None}
    b = {"prompt_ids": torch.tensor([[1, 2, 3]]), "prompt_mask": torch.tensor([[1, 1, 1]]),
         "completion_ids": torch.tensor([[8, 9]]), "completion_mask": torch.tensor([[1, 1]]),
         "advantages": torch.tensor([-1.0]), "num_items_in_batch": torch.tensor(2),
         "old_per_token_logps": None}
    m = merge_batches([a, b], pad_token_id=0)
    assert m["prompt_ids"].tolist() == [[0, 5, 6], [1, 2, 3]]
    assert m["prompt_mask"].tolist() == [[0, 1, 1], [1, 1, 1]]
    assert m["completion_ids"].tolist() == [[7, 0], [8, 9]]
    assert m["completion_mask"].tolist() == [[1, 0], [1, 1]]
    assert m["advantages"].tolist() == [0.5, -1.0] and m["old_per_token_logps"] is None
    with pytest.raises(ValueError, match="'old_per_token_logps'"):
        merge_batches([a, {**b, "old_per_token_logps": torch.zeros(1, 2)}], 0)


# ---- the tester's repair credit on a scripted batch (real sandbox) ------------------------------
def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def _stdio_test(inp: str, out: str) -> str:
    return f"**Test Input:**\n```\n{inp}\n```\n\n**Test Output:**\n```\n{out}\n```"


@pytest.mark.parametrize("credit", ["turn", "final", "improvement"])
def test_credit_for_repairs_on_a_scripted_batch(credit):
    """One problem (reverse the words, join with '-'), two solutions and two tests. The right
    solution fails the wrong test and its revision is wrong; the wrong solution (joins with
    '+') fails both tests and its revision is right. The right test earns the repair credit
    (it failed a wrong solution whose revision passed), the wrong test none (it sent a right
    solution into a wrong revision)."""
    task = load_tasks("world", split="train")[0]
    assert task.references[0].strip().endswith("print('-'.join(xs[::-1]))")
    right = _fenced(task.references[0])
    wrong = _fenced(task.references[0].replace("'-'", "'+'"))
    good = _stdio_test("a b c", "c-b-a")
    bad = _stdio_test("a b c", "nope")
    items = [Row(0, "code", right, 9), Row(0, "code", wrong, 9),
             Row(0, "test", good, 9), Row(0, "test", bad, 9)]
    prompts = [[{"role": "user", "content": f"prompt {i}"}] for i in range(4)]
    first = [1.0, 0.25, 0.5, -0.5]  # the first turn's rewards (as the step would give them)
    seen = []

    def reviser(convs):
        seen.extend(convs)  # row 0's revision: a constant; row 1's: the reference
        return ["```python\nprint('zzz')\n```" if c[0]["content"] == "prompt 0" else right
                for c in convs]

    rt = RepairTurns(2, "self", credit, test_credit=1.0)
    rt.reviser = reviser
    with Executor(slots=2) as ex:
        rewards, figs = rt.run(items, prompts, first, group_rows(items, [task], "train"),
                               [task], ex)
    # both solutions failed a feedback test: two revisions, one per open row
    assert [c[0]["content"] for c in seen] == ["prompt 0", "prompt 1"]
    assert "nope" in seen[0][-1]["content"] and "c+b+a" in seen[1][-1]["content"]
    assert seen[0][1] == {"role": "assistant", "content": right}
    later = rt.later[0]
    assert later.turn == 2 and later.task_index == [0, 0]
    assert figs["repair_rows"] == 2 and figs["repair_open"] == 2
    assert figs["repair_fixed"] == 1.0 and figs["repair_broken"] == 1.0
    # the good test: shown to the wrong solution, whose one revision passed: 1 / 2 rows revised
    assert rewards[2] == pytest.approx(0.5 + 0.5) and rewards[3] == pytest.approx(-0.5)
    if credit == "turn":
        assert rewards[:2] == first[:2] and later.rewards == [0.0, 1.0]
    elif credit == "final":
        assert rewards[:2] == [0.0, 1.0] and later.rewards == [0.0, 1.0]
    else:
        assert rewards[:2] == first[:2] and later.rewards == [-1.0, 0.75]


def test_groups_by_solution_share_one_conversation():
    """``groups="solution"``: the problem's k rows of turn 2 are k revisions of one open row (the
    seeded generator's pick), so the group's prompts are one conversation; the repair figures
    count that row's revisions as one revised row (their mean)."""
    task = load_tasks("world", split="train")[0]
    right = _fenced(task.references[0])
    wrong = _fenced(task.references[0].replace("'-'", "'+'"))
    bad = _stdio_test("a b c", "nope")
    items = [Row(0, "code", right, 9), Row(0, "code", wrong, 9), Row(0, "code", wrong, 9),
             Row(0, "test", bad, 9), Row(0, "test", bad, 9), Row(0, "test", bad, 9)]
    prompts = [[{"role": "user", "content": f"prompt {i}"}] for i in range(6)]
    picked = set()
    for seed in range(6):
        revs = iter([right, "```python\nprint('zzz')\n```", right])
        rt = RepairTurns(2, "self", "turn", groups="solution", seed=seed)
        rt.reviser = lambda convs, revs=revs: [next(revs) for _ in convs]
        with Executor(slots=1) as ex:
            _, figs = rt.run(items, prompts, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                             group_rows(items, [task], "train"), [task], ex)
        later = rt.later[0]
        assert len(later.prompts) == 3 and later.task_index == [0, 0, 0]
        assert all(p == later.prompts[0] for p in later.prompts)
        picked.add(later.prompts[0][0]["content"])
        assert later.rewards == [1.0, 0.0, 1.0] and figs["repair_rows"] == 3
        if later.prompts[0][0]["content"] == "prompt 0":  # a right row: 1 of 3 revisions broke
            assert figs["repair_broken"] == pytest.approx(1 / 3) and figs["repair_fixed"] is None
        else:
            assert figs["repair_fixed"] == pytest.approx(2 / 3) and figs["repair_broken"] is None
    assert len(picked) > 1  # the pick follows the seed


def test_agreement_shows_only_tests_a_first_turn_solution_passes():
    """``agreement=1``: the wrong test ('nope') no solution passes is dropped after the first
    turn, so the right solution (which fails only that test) is not revised; the wrong solution
    is shown the agreed test alone (its k revisions the problem's group), and that test alone
    earns the repair credit. Without the
    filter both solutions are revised (the scripted batch above)."""
    task = load_tasks("world", split="train")[0]
    right = _fenced(task.references[0])
    wrong = _fenced(task.references[0].replace("'-'", "'+'"))
    items = [Row(0, "code", right, 9), Row(0, "code", wrong, 9),
             Row(0, "test", _stdio_test("a b c", "c-b-a"), 9),
             Row(0, "test", _stdio_test("a b c", "nope"), 9)]
    prompts = [[{"role": "user", "content": f"prompt {i}"}] for i in range(4)]
    for agreement, revised in ((1, ["prompt 1"] * 2), (2, []), (0, ["prompt 0", "prompt 1"])):
        seen = []
        rt = RepairTurns(2, "self", "turn", agreement=agreement)
        rt.reviser = lambda convs, seen=seen: seen.extend(convs) or [right] * len(convs)
        with Executor(slots=1) as ex:
            rewards, figs = rt.run(items, prompts, [1.0, 0.25, 0.5, -0.5],
                                   group_rows(items, [task], "train"), [task], ex)
        assert [c[0]["content"] for c in seen] == revised, agreement
        if agreement == 1:  # only the right solution passes the good test: one agrees
            assert "c-b-a" in seen[0][-1]["content"] and "nope" not in seen[0][-1]["content"]
            assert rt.later[0].rewards == [1.0, 1.0] and figs["repair_fixed"] == 1.0
            assert rewards[2:] == [pytest.approx(1.5), pytest.approx(-0.5)]
        if agreement == 2:  # no test has two solutions passing it: no feedback, no turn 2
            assert rt.later == [] and rewards == [1.0, 0.25, 0.5, -0.5]
    with pytest.raises(ValueError, match="agreement"):
        RepairTurns(2, "self", agreement=-1)


def test_public_feedback_gives_the_tester_no_credit():
    task = load_tasks("world", split="train")[0]
    task = dataclasses.replace(task, examples=[TestCase(input="a b c\n",
                                                        output="c-b-a\n")])
    wrong = _fenced(task.references[0].replace("'-'", "'+'"))
    items = [Row(0, "code", wrong, 9), Row(0, "test", _stdio_test("x y", "y-x"), 9)]
    rt = RepairTurns(2, "public")
    rt.reviser = lambda convs: [_fenced(task.references[0])] * len(convs)
    with Executor(slots=1) as ex:
        rewards, figs = rt.run(items, [[{"role": "user", "content": "p"}]] * 2, [0.0, 0.5],
                               group_rows(items, [task], "train"), [task], ex)
    assert figs["repair_fixed"] == 1.0 and rt.later[0].rewards == [1.0]
    assert rewards == [0.0, 0.5]  # the example led to the fix; the tester earns nothing


# ---- the trainer in turns, scripted -----------------------------------------------------------------
def _marked(tasks):
    """The functional bundled problems, each gold test carrying a marker in its expected value
    (``assert f(x) == (y, MARKER)[0]``: the verdicts are unchanged) and one example without
    it."""
    out = []
    for t in tasks:
        tests = []
        for c in t.tests:
            call, expected = c.code.split(" == ", 1)
            tests.append(dataclasses.replace(c, code=f"{call} == ({expected}, {MARKER!r})[0]"))
        out.append(dataclasses.replace(t, tests=tests, examples=[t.tests[0]]))
    return out


def _wrong(task) -> str:
    return f"def {task.entry_point}(*args):\n    return -12345\n"


def _scripted(tasks, prompts_seen, mixed=False):
    """Turn 1: a wrong solution and, as tests, the problem's first gold test without its
    marker; a revision (a conversation with feedback): the reference (``mixed``: every other
    revision the wrong solution again)."""
    revised = []

    def rollout(prompts, trainer):
        texts = []
        for p in prompts:
            prompts_seen.append(p)
            text = p[-1]["content"]
            ti = next(i for i, t in enumerate(tasks) if t.prompt.strip() in
                      "\n".join(m["content"] for m in p if m["role"] == "user"))
            if len(p) > 2 and p[-2]["role"] == "assistant":
                revised.append(p)
                texts.append(_fenced(_wrong(tasks[ti]) if mixed and len(revised) % 2 else
                                     tasks[ti].references[0]))
            elif "unit test" in text.lower():
                texts.append(_fenced(tasks[ti].examples[0].code))
            else:
                texts.append(_fenced(_wrong(tasks[ti])))
        return rollout_output(trainer.processing_class, prompts, texts)
    return rollout


@pytest.mark.parametrize("feedback", ["self", "public"])
def test_training_in_turns_trains_on_revisions_only_and_never_shows_gold(tmp_path, monkeypatch,
                                                                          feedback):
    tasks = _marked([t for t in load_tasks("bundled") if t.kind == "functional"
                     and all(" == " in c.code for c in t.tests)][:4])
    seen: list = []
    batches: list = []
    real = CoevoTrainer._generate_and_score_completions

    def spy(self, inputs):
        out = real(self, inputs)
        batches.append((self, out))
        return out

    monkeypatch.setattr(CoevoTrainer, "_generate_and_score_completions", spy)
    cfg = tiny_config(tmp_path / "run", max_steps=1, repair_turns=2, repair_feedback=feedback,
                      p_give_example=0.0)
    res = train(cfg, PLUMBING, tasks=tasks, rollout_func=_scripted(tasks, seen))
    assert res.global_step == 1
    # no prompt, first turn or revision, holds a gold test
    assert seen and not any(MARKER in m["content"] for p in seen for m in p)
    revisions = [p for p in seen if len(p) > 2]
    assert len(revisions) == 4 * 4  # every wrong solution failed its feedback: k per problem
    trainer, out = batches[-1]
    tok = trainer.processing_class
    n = len(out["advantages"])
    later = range(n - 16, n)  # no row of zero advantage is skipped: kept in the batch
    for i in later:
        comp = tok.decode(out["completion_ids"][i][out["completion_mask"][i].bool()])
        prompt = tok.decode(out["prompt_ids"][i][out["prompt_mask"][i].bool()])
        # the loss covers the revision's own tokens; the feedback is prompt
        assert "return -12345" not in comp and "failed" not in comp and "def " in comp
        assert "Your solution failed" in prompt and "return -12345" in prompt
    line = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert line["repair_rows"] == 16 and line["repair_fixed"] == 1.0
    assert all(k in line for k in REPAIR_KEYS)
    # every revision is right and every first attempt wrong: the groups of turn 2 are all 1.0
    # (zero advantage); the first turn's code rows all 0.0; the tests earn the repair credit
    mode, rows, rewards = trainer.coevo.calls[-1]
    tests = [r for (ti, role, _), r in zip(rows, rewards) if role == "test"]
    assert trainer.coevo.repair.later[0].rewards == [1.0] * 16
    if feedback == "self":
        assert all(r is None for r in tests)  # no solution right at turn 1: no test reward
    assert out["advantages"][-16:].abs().sum() == 0


def test_advantage_weight_scales_the_later_turns_only(tmp_path, monkeypatch):
    """``repair_advantage_weight: 3``: the same scripted step (half the revisions right) gives
    the revision rows three times the advantages of the default run, the first turn's rows
    the same ones."""
    tasks = _marked([t for t in load_tasks("bundled") if t.kind == "functional"
                     and all(" == " in c.code for c in t.tests)][:4])
    real = CoevoTrainer._generate_and_score_completions
    adv = {}
    for w in (1.0, 3.0):
        got = []

        def spy(self, inputs, got=got):
            out = real(self, inputs)
            got.append(out["advantages"].clone())
            return out

        monkeypatch.setattr(CoevoTrainer, "_generate_and_score_completions", spy)
        cfg = tiny_config(tmp_path / f"run{w}", max_steps=1, repair_turns=2,
                          p_give_example=0.0, repair_advantage_weight=w)
        train(cfg, PLUMBING, tasks=tasks, rollout_func=_scripted(tasks, [], mixed=True))
        adv[w] = got[-1]
    one, three = adv[1.0], adv[3.0]
    assert one.shape == three.shape and len(one) > 16
    assert one[-16:].abs().sum() > 0  # the revisions' groups are half right, half wrong
    assert torch.allclose(three[-16:], 3 * one[-16:])
    assert torch.equal(three[:-16], one[:-16])


@pytest.mark.parametrize("turns", [{"repair_turns": 2},
                                   {"repair_turns": 1, "eval_repair_turns": 2}])
def test_held_out_evaluation_in_turns(tmp_path, monkeypatch, turns):
    """eval.jsonl has each turn's code accuracy and the repaired share (scripted sampler:
    wrong first attempts, right revisions, the feedback from the model's own tests), in a run
    in turns and in a single-turn run evaluated in two."""
    from coevo_code.evaluation import heldout
    tasks = [t for t in load_tasks("bundled") if t.kind == "functional"][:3]

    def sample(model, tokenizer, conversations, n, temperature, max_new_tokens, seed,
               batch_size=32):
        out = []
        for c in conversations:
            ti = next(i for i, t in enumerate(tasks) if t.prompt.strip() in c[-1]["content"]
                      or (len(c) > 2 and t.prompt.strip() in c[1]["content"]))
            if len(c) > 2:
                out.append([_fenced(tasks[ti].references[0])] * n)
            elif "unit test" in c[-1]["content"].lower():
                out.append([_fenced(tasks[ti].tests[0].code)] * n)
            else:
                out.append([_fenced(_wrong(tasks[ti]))] * n)
        return out

    monkeypatch.setattr(heldout, "sample", sample)
    cfg = tiny_config(tmp_path / "run", max_steps=1, eval_strategy="steps", eval_steps=1,
                      eval_on_start=True, **turns)
    train(cfg, PLUMBING, tasks=tasks, eval_tasks=tasks)
    evals = [json.loads(x) for x in (tmp_path / "run" / "eval.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [0, 1]
    for e in evals:
        assert set(turn_keys(2)) <= set(e)
        assert e["code_acc_turn1"] == e["code_acc"] == 0.0
        assert e["code_acc_turn2"] == 1.0 and e["repaired_share"] == 1.0
        assert e["broken_share"] is None  # no right first attempt
    line = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert ("repair_rows" in line) == (turns["repair_turns"] > 1)


# ---- one turn is the single-turn run -----------------------------------------------------------------
def test_one_turn_writes_the_single_turn_metrics(tmp_path):
    """``--repair_turns 1`` (the default) writes the metrics the single-turn trainer wrote
    before repair turns existed (tests/fixtures/single_turn_metrics.json, recorded then; the
    seeded run is reproducible to the bit on this machine), every column but the times."""
    want = json.loads((ROOT / "tests" / "fixtures" / "single_turn_metrics.json").read_text())
    run = tmp_path / "run"
    p = subprocess.run(
        [sys.executable, "-m", "coevo_code.cli", "train", "--seed", "0", "--max_steps", "3",
         "--eval_tasks", "", "--eval_on_start", "false", "--save_strategy", "no",
         "--problems_per_generation", "4", "--per_device_train_batch_size", "32",
         "--torch_threads", "1", "--repair_turns", "1", "--output_dir", str(run)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    got = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    drop = ("wall_s", "exec_cells_per_s")
    got = [{k: v for k, v in d.items() if not k.startswith("time_") and k not in drop}
           for d in got]
    assert got == want
    assert not any(k in got[0] for k in REPAIR_KEYS)


@pytest.mark.parametrize("overrides,message", [
    ({"repair_turns": 0}, "--repair_turns must be at least 1"),
    ({"repair_turns": 2, "label_source": "self_majority"}, "--repair_turns > 1 needs gold tests"),
    ({"repair_turns": 2, "length_shaping": True}, "--length_shaping"),
    ({"repair_turns": 2, "repair_max_failing": 0}, "--repair_max_failing"),
    ({"repair_turns": 2, "repair_groups": "row"}, "--repair_groups must be one of"),
    ({"repair_turns": 2, "repair_feedback_agreement": -1}, "--repair_feedback_agreement"),
    ({"repair_turns": 2, "repair_advantage_weight": -1.0}, "--repair_advantage_weight"),
])
def test_repair_config_errors_name_the_flag(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(tmp_path, **overrides)




def test_world_examples_reach_the_loaders(tmp_path):
    """``tasks_examples`` / ``eval_tasks_examples``: the world's public examples for training
    with ``repair_feedback: public`` (hidden from the prompts with ``p_give_example: 0``)."""
    from coevo_code.training.run import _load, _selection
    cfg = tiny_config(tmp_path, tasks="world", tasks_split="train", tasks_examples=2,
                      eval_tasks="world", eval_tasks_split="heldout", eval_tasks_examples=3)
    train_sel, eval_sel = _selection(cfg, "tasks"), _selection(cfg, "eval_tasks")
    assert train_sel["examples"] == 2 and eval_sel["examples"] == 3
    tasks = _load("world", None, "heldout", 4, 0, "eval_tasks", **eval_sel)
    assert all(len(t.examples) == 3 and len(t.tests) == 5 for t in tasks)
    plain = _load("world", None, "heldout", 4, 0, "eval_tasks",
                  **_selection(tiny_config(tmp_path, tasks="world"), "eval_tasks"))
    assert all(not t.examples and len(t.tests) == 8 for t in plain)
