"""Repair turns: the pure core (feedback messages, conversations, per-turn metrics),
the turn loop with a scripted engine (exact figures; no gold test ever in a prompt), and
``coevo eval --repair_turns`` end to end with the shipped tiny model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from coevo_code.repair import (FIELD_CHARS, NO_PROGRAM, FeedbackResult, agreed_tests,
                               feedback_message, feedback_tests, repair_messages, take_tests,
                               truncate, turn_figures, turn_metrics)
from coevo_code.roles import CODE, TEST, coder_messages
from coevo_code.tasks.model import Task, TestCase

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
ROOT = Path(__file__).resolve().parents[1]


def stdio(i, o):
    return TestCase(input=i, output=o)


# ---- the pure core ------------------------------------------------------------------------------
def test_truncate():
    assert truncate(None) == ""
    assert truncate("abc\n") == "abc"
    assert truncate("x" * FIELD_CHARS) == "x" * FIELD_CHARS
    long = truncate("y" * (FIELD_CHARS + 7))
    assert long == "y" * FIELD_CHARS + "... [7 more characters]"
    assert truncate("abcdef", 2) == "ab... [4 more characters]"


def test_all_passed_or_no_tests_is_no_feedback():
    ok = FeedbackResult(stdio("1\n", "1\n"), "ok", "1\n")
    assert feedback_message([ok, ok]) is None
    assert feedback_message([]) is None
    assert feedback_message([], program_ok=False) == NO_PROGRAM
    assert feedback_message([ok], program_ok=False) == NO_PROGRAM


def test_at_most_k_failing_stdio_tests_each_field_truncated():
    rs = [FeedbackResult(stdio("in1\n", "out1\n"), "ok", "out1\n"),
          FeedbackResult(stdio("in2\n", "out2\n"), "wrong_answer", "ACTUAL2\n"),
          FeedbackResult(stdio("I" * 1000, "E" * 1000), "wrong_answer", "A" * 1000),
          FeedbackResult(stdio("in4\n", "out4\n"), "timeout", "")]
    msg = feedback_message(rs)
    assert "failed 3 of 4 tests" in msg and "2 of the failing tests" in msg
    assert "in2" in msg and "ACTUAL2" in msg and "in1" not in msg and "in4" not in msg
    for ch in "IEA":
        assert ch * FIELD_CHARS + "... [600 more characters]" in msg
        assert ch * (FIELD_CHARS + 1) not in msg
    msg1 = feedback_message(rs, k=1)
    assert "Here is the failing test" in msg1 and "I" * 10 not in msg1
    msg3 = feedback_message(rs, k=3, limit=5)
    assert "time limit exceeded" in msg3 and "IIIII... [995 more characters]" in msg3
    assert "Your output:" not in msg3.split("Test 3:")[1]  # a timeout shows its outcome
    assert feedback_message(rs, k=0).startswith("Your solution failed 3 of 4")


def test_functional_feedback_splits_call_and_expected():
    rs = [FeedbackResult(TestCase(code="assert add(1, 2) == 3"), "wrong_answer", ""),
          FeedbackResult(TestCase(code="check(add)"), "runtime_error", "Traceback...")]
    msg = feedback_message(rs)
    assert "Call:\nadd(1, 2)\nExpected:\n3" in msg and "assertion failed" in msg
    assert "Test:\ncheck(add)" in msg and "runtime error" in msg and "Traceback..." in msg


def test_repair_messages_extend_the_conversation():
    task = Task("t", "x", "stdio", "Print the sum.", [stdio("1 2\n", "3\n")])
    first = coder_messages(task)
    conv = repair_messages(first, "ANSWER", "FEEDBACK")
    assert conv[:2] == first and len(first) == 2
    assert conv[2:] == [{"role": "assistant", "content": "ANSWER"},
                        {"role": "user", "content": "FEEDBACK"}]


def test_feedback_tests_never_the_gold_ones():
    from coevo_code.roles import parse_test
    task = Task("t", "x", "stdio", "p", [stdio("GOLD\n", "1\n")], examples=[stdio("EX\n", "1\n")])
    assert feedback_tests(task, "public") == [stdio("EX\n", "1\n")]
    good = parse_test("**Test Input:**\n```\n5\n```\n**Test Output:**\n```\n5\n```", task)
    bad = parse_test("nothing", task)
    assert feedback_tests(task, "self", [good, bad]) == [good.test]
    with pytest.raises(ValueError, match="not built"):
        feedback_tests(task, "tester:m")


def test_agreed_tests_and_their_columns():
    passed = np.array([[1, 0, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0]], dtype=bool)
    assert agreed_tests(passed, 0) == [0, 1, 2, 3]
    assert agreed_tests(passed, 1) == [0, 1, 2]
    assert agreed_tests(passed, 2) == [0]
    assert agreed_tests(passed, 4) == []
    assert agreed_tests(np.zeros((0, 3), dtype=bool), 1) == []  # no solution ran: none agrees
    assert agreed_tests(np.zeros((0, 3), dtype=bool), 0) == [0, 1, 2]
    with pytest.raises(ValueError, match="agreement -1"):
        agreed_tests(passed, -1)
    res = {"outcomes": [["ok", "wrong", "ok"]], "passed": [[True, False, True]],
           "outputs": [["a", "b", "c"]], "time_s": 1.0}
    assert take_tests(res, [2, 0]) == {"outcomes": [["ok", "ok"]], "passed": [[True, True]],
                                        "outputs": [["c", "a"]], "time_s": 1.0}
    assert res["outputs"] == [["a", "b", "c"]]


def test_turn_metrics_exact_and_edge_cases():
    nan = float("nan")
    a = np.array([[0, 1, 1], [1, 1, 1], [0, 0, 0], [0, 0, 1]], float)  # 3 wrong first, 2 repaired
    b = np.array([[1, 1, 1], [nan, nan, nan]])                         # an undecided solution
    m = turn_metrics([a, b])
    assert m["code_acc_turn1"] == pytest.approx((0.25 + 1.0) / 2)
    assert m["code_acc_turn2"] == pytest.approx((0.5 + 1.0) / 2)
    assert m["code_acc_turn3"] == pytest.approx((0.75 + 1.0) / 2)
    assert (m["repaired_share"], m["wrong_first"], m["repaired"]) == (2 / 3, 3, 2)
    assert (m["broken_share"], m["right_first"], m["broken"]) == (0.0, 2, 0)
    none_wrong = turn_metrics([np.ones((2, 2))])
    assert none_wrong["repaired_share"] is None and none_wrong["wrong_first"] == 0
    assert none_wrong["broken_share"] == 0.0 and none_wrong["right_first"] == 2
    empty = turn_metrics([])
    assert empty == {"repaired_share": None, "broken_share": None, "wrong_first": 0,
                     "repaired": 0, "right_first": 0, "broken": 0}
    lost_last = turn_metrics([np.array([[0.0, nan]])])  # undecided after the last turn: left out
    assert lost_last["wrong_first"] == 0 and lost_last["code_acc_turn2"] is None
    # right first attempts that a revision broke; one broken and mended again by turn 3 is not
    c = np.array([[1, 0, 0], [1, 0, 1], [1, 1, 1], [0, 1, 0], [1, nan, nan]], float)
    m = turn_metrics([c])
    assert (m["broken_share"], m["right_first"], m["broken"]) == (1 / 3, 3, 1)
    assert (m["repaired_share"], m["wrong_first"], m["repaired"]) == (0.0, 1, 0)
    none_right = turn_metrics([np.zeros((2, 2))])
    assert none_right["broken_share"] is None and none_right["right_first"] == 0
    # pooled over solutions, the gap between the turns is (repaired - broken) / decided
    d = np.array([[0, 1], [1, 0], [1, 1], [0, 1], [0, 0]], float)
    m = turn_metrics([d])
    assert m["code_acc_turn2"] - m["code_acc_turn1"] == pytest.approx((2 - 1) / 5)
    assert turn_figures(m) == {k: m[k] for k in ("code_acc_turn1", "code_acc_turn2",
                                                 "repaired_share", "broken_share")}


# ---- the turn loop with a scripted engine --------------------------------------------------------
WRONG = "```python\nprint(int(input().split()[0]) - 1)\n```"
FIXED = "```python\nprint(sum(map(int, input().split())))\n```"
MARKER = "ZQXGOLDMARKER"


class Scripted:
    """An engine whose revisions are scripted: every revision is FIXED; records each prompt."""

    def __init__(self):
        self.prompts: list[list[dict]] = []

    def generate(self, conversations, n, progress=None):
        self.prompts += [list(c) for c in conversations]
        return [[FIXED] * n for _ in conversations]

    def close(self):
        pass


@pytest.fixture(scope="module")
def ex():
    from coevo_code.execution import Executor
    with Executor(slots=1) as e:
        yield e


def _sum_task(tid="sum"):
    gold = [stdio("1 2\n", "3\n"), stdio("5 7\n", "12\n"), stdio(f"{MARKER} 1\n", MARKER)]
    return Task(tid, "test", "stdio", "Print the sum of two integers.", gold,
                examples=[stdio("1 2\n", "3\n")])


def test_turn_two_repairs_a_wrong_first_solution_exactly(ex, tmp_path):
    from coevo_code.evaluation.repair import run_repair
    from coevo_code.generation.cache import GenerationCache
    task = replace(_sum_task(), tests=[stdio("1 2\n", "3\n"), stdio("5 7\n", "12\n")])
    gens = {(task.id, CODE): [WRONG, FIXED, "no code at all"]}
    first = {task.id: [0.0, 1.0, 0.0]}
    engine, cache = Scripted(), GenerationCache(tmp_path / "g.jsonl")
    eps = run_repair([task], gens, first, 3, 0, engine, ex, 3, "public", cache=cache)
    pe = eps[task.id]
    assert pe.correct.tolist() == [[0, 1, 1], [1, 1, 1], [0, 1, 1]]
    assert [e.turns for e in pe.episodes] == [2, 1, 2]
    m = turn_metrics([pe.correct])
    assert (m["code_acc_turn1"], m["code_acc_turn2"], m["code_acc_turn3"]) == (1 / 3, 1.0, 1.0)
    assert (m["repaired_share"], m["wrong_first"], m["repaired"]) == (1.0, 2, 2)
    assert len(engine.prompts) == 2  # turn 3: both revisions passed their feedback
    wrong_prompt, noprog_prompt = engine.prompts
    assert wrong_prompt[-2] == {"role": "assistant", "content": WRONG}
    assert "Input:\n1 2\nExpected output:\n3\nYour output:\n0" in wrong_prompt[-1]["content"]
    assert noprog_prompt[-1]["content"] == NO_PROGRAM
    # resumed from the cache: nothing generated again, the same verdicts
    again = Scripted()
    eps2 = run_repair([task], gens, first, 3, 0, again, ex, 3, "public",
                      cache=GenerationCache(tmp_path / "g.jsonl"))
    assert again.prompts == [] and eps2[task.id].correct.tolist() == pe.correct.tolist()


def test_hidden_examples_stay_the_public_feedback(ex):
    """Prompts without the examples (``--hide_examples``): the conversation starts from the
    prompt the first turn had, and the examples given apart are still the feedback."""
    from coevo_code.evaluation.repair import run_repair
    task = replace(_sum_task(), tests=[stdio("5 7\n", "12\n")])
    hidden = replace(task, examples=[])
    engine = Scripted()
    eps = run_repair([hidden], {(task.id, CODE): [WRONG]}, {task.id: [0.0]}, 1, 0, engine, ex, 2,
                     "public", examples={task.id: list(task.examples)})
    assert engine.prompts[0][:2] == coder_messages(hidden) != coder_messages(task)
    assert "Input:\n1 2\nExpected output:\n3" in engine.prompts[0][-1]["content"]
    assert eps[task.id].correct.tolist() == [[0.0, 1.0]]
    # without them, a prompt that hides its examples has no public feedback: nothing to repair
    quiet = Scripted()
    run_repair([hidden], {(task.id, CODE): [WRONG]}, {task.id: [0.0]}, 1, 0, quiet, ex, 2,
               "public")
    assert quiet.prompts == []


def test_world_examples_option():
    from coevo_code.tasks import LoaderError, load_tasks
    plain = list(load_tasks("world", split="heldout", size=3))
    shown = list(load_tasks("world", split="heldout", size=3, examples=2))
    for a, b in zip(plain, shown):
        assert b.examples == a.tests[:2] and b.tests == a.tests[2:] and not a.examples
    with pytest.raises(LoaderError, match="examples must be 0 to 6"):
        load_tasks("world", split="heldout", size=1, examples=7)


@pytest.mark.parametrize("mode", ["public", "self"])
def test_no_gold_test_reaches_any_prompt(ex, mode):
    from coevo_code.evaluation.repair import run_repair
    task = _sum_task()
    from coevo_code.roles import tester_messages
    assert MARKER not in json.dumps(coder_messages(task) + tester_messages(task))  # turn 1
    self_test = "**Test Input:**\n```\n2 2\n```\n**Test Output:**\n```\n4\n```"
    gens = {(task.id, CODE): [WRONG, WRONG], (task.id, TEST): [self_test]}

    class StillWrong(Scripted):
        def generate(self, conversations, n, progress=None):
            self.prompts += [list(c) for c in conversations]
            return [[WRONG] * n for _ in conversations]

    engine = StillWrong()
    eps = run_repair([task], gens, {task.id: [0.0, 0.0]}, 2, 1, engine, ex, 3, mode)
    assert len(engine.prompts) == 4  # two solutions, revised twice, never fixed
    text = json.dumps(engine.prompts)
    assert MARKER not in text
    assert ("2 2" in text) == (mode == "self")
    assert eps[task.id].correct.tolist() == [[0, 0, 0], [0, 0, 0]]


def test_agreement_drops_the_tests_no_first_solution_passes(ex):
    """Self feedback with ``agreement=1``: of a right test (1 2 -> 3) and a wrong one
    (5 7 -> 13), only the right one is passed by a first-turn solution (FIXED), so FIXED is not
    revised and WRONG is shown the right test alone; with 0 both are revised."""
    from coevo_code.evaluation.repair import run_repair
    task = replace(_sum_task(), tests=[stdio("1 2\n", "3\n"), stdio("5 7\n", "12\n")])
    tests = ["**Test Input:**\n```\n1 2\n```\n**Test Output:**\n```\n3\n```",
             "**Test Input:**\n```\n5 7\n```\n**Test Output:**\n```\n13\n```"]
    gens = {(task.id, CODE): [WRONG, FIXED], (task.id, TEST): tests}
    for agreement, revised in ((1, 1), (0, 2), (2, 0)):
        engine = Scripted()
        eps = run_repair([task], gens, {task.id: [0.0, 1.0]}, 2, 2, engine, ex, 2, "self",
                         agreement=agreement)
        assert len(engine.prompts) == revised, agreement
        assert eps[task.id].correct.tolist() == [[0, float(revised > 0)], [1, 1]]
        if agreement == 1:
            shown = engine.prompts[0][-1]["content"]
            assert "1 2" in shown and "13" not in shown
            assert [t.input for t in eps[task.id].feedback] == ["1 2\n"]


# ---- coevo eval end to end ---------------------------------------------------------------------
def coevo(*args):
    return subprocess.run([sys.executable, "-m", "coevo_code.cli", *args], env=ENV,
                          capture_output=True, text=True, timeout=300)


COMMON = ["eval", "--benchmark", "bundled", "--limit", "2", "--model", "tiny", "--k_code", "2",
          "--k_test", "1", "--bon", "2x1", "--max_tokens", "48", "--bootstrap", "20", "-q"]


def test_eval_with_repair_turns_end_to_end(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    p = coevo(*COMMON, "-o", str(one))
    assert p.returncode == 0, p.stderr[-2000:]
    r1 = json.loads((one / "results.json").read_text())
    assert "repair" not in r1 and not any(k.startswith("code_acc") for k in r1["metrics"])
    p = coevo(*COMMON, "--repair_turns", "1", "-o", str(one))  # explicit 1: the same output
    assert p.returncode == 0, p.stderr[-2000:]
    again = json.loads((one / "results.json").read_text())
    assert {k: v for k, v in again.items() if k != "seconds"} == \
        {k: v for k, v in r1.items() if k != "seconds"}
    # two turns on the same generations (copied: turn 1 is not generated again)
    two.mkdir()
    (two / "generations.jsonl").write_bytes((one / "generations.jsonl").read_bytes())
    p = coevo(*COMMON, "--repair_turns", "2", "--feedback_tests", "self", "-o", str(two))
    assert p.returncode == 0, p.stderr[-2000:]
    r2 = json.loads((two / "results.json").read_text())
    m = r2["metrics"]
    assert {"code_acc_turn1", "code_acc_turn2", "repaired_share", "broken_share"} <= set(m)
    rep = r2["repair"]
    assert m["broken_share"] == (rep["broken"] / rep["right_first"] if rep["right_first"]
                                 else None)
    assert m["code_acc_turn1"] == pytest.approx(r1["metrics"]["pass@1"])
    assert m["code_acc_turn2"] >= 0.0
    assert r2["repair"]["turns"] == 2 and r2["repair"]["feedback_tests"] == "self"
    assert sum(r2["repair"]["solutions_by_turns_used"].values()) == 4
    assert all(len(v["correct_by_turn"]) == 2 for v in r2["per_task"].values())
    assert "code_acc_turn2=" in p.stdout and "repaired_share=" in p.stdout
    assert "broken_share=" in p.stdout
    for k in r1["metrics"]:  # the first turn's figures are the one-turn run's
        assert m[k] == r1["metrics"][k], k


def test_eval_with_a_tester_models_feedback(tmp_path):
    """``--feedback_tests tester:MODEL``: another model's tests check the solutions between
    turns; they are generated once (the cache's ``test#tester`` rows) and the first turn is the
    one-turn run's."""
    out = tmp_path / "t"
    p = coevo(*COMMON, "--repair_turns", "2", "--feedback_tests", "tester:tiny-llama", "-o",
              str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads((out / "results.json").read_text())
    assert r["repair"]["feedback_tests"] == "tester:tiny-llama"
    rows = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    tester = [x for x in rows if x.get("role") == "test#tester"]
    assert len(tester) == 2 and all(len(x["completions"]) == 1 for x in tester)
    assert {"code_acc_turn1", "code_acc_turn2", "repaired_share"} <= set(r["metrics"])
    p = coevo(*COMMON, "--repair_turns", "2", "--feedback_tests", "tester:", "-o",
              str(tmp_path / "x"))
    assert p.returncode == 2
    lines = [x for x in p.stderr.splitlines() if x.startswith("coevo:")]
    assert len(lines) == 1 and "tester:MODEL needs a model" in lines[0], p.stderr[-2000:]


def test_every_episode_ending_early_keeps_its_verdicts_in_later_turns(ex):
    from coevo_code.evaluation.repair import run_repair
    task = replace(_sum_task(), tests=[stdio("1 2\n", "3\n")])
    engine = Scripted()
    eps = run_repair([task], {(task.id, CODE): [FIXED]}, {task.id: [1.0]}, 1, 0, engine, ex, 4,
                     "public")
    assert eps[task.id].correct.tolist() == [[1, 1, 1, 1]] and engine.prompts == []
    m = turn_metrics([eps[task.id].correct])
    assert m["code_acc_turn4"] == 1.0 and m["repaired_share"] is None and m["wrong_first"] == 0


def test_repair_gap_pairs_problems_and_bounds_the_change(tmp_path, capsys):
    """``benchmarks/repair_gap.py``: each problem's gap from ``correct_by_turn`` (solutions
    undecided at a turn left out), the change against a reference over the problems both
    decided, its bootstrap interval, and a clear error for results with no problem in common."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import repair_gap
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    ref = {"a": {"correct_by_turn": [[False, False], [True, False]]},    # gap -1/2
           "b": {"correct_by_turn": [[True, True], [None, True]]},       # gap 0 (one left out)
           "c": {"correct_by_turn": [[None, None]]}}                     # nothing decided
    new = {"a": {"correct_by_turn": [[False, True], [True, True]]},      # gap +1/2
           "b": {"correct_by_turn": [[True, True], [True, True]]},       # gap 0
           "d": {"correct_by_turn": [[False, True]]}}                    # not in the reference
    assert repair_gap.problem_gaps(ref) == {"a": -0.5, "b": 0.0}
    change, lo, hi, n = repair_gap.paired_change(repair_gap.problem_gaps(new),
                                                 repair_gap.problem_gaps(ref))
    assert (change, n) == (0.5, 2)                                       # (1 + 0) / 2
    assert lo == 0.0 and hi == 1.0    # resampling two problems whose changes are 1 and 0
    with pytest.raises(ValueError, match="same problems"):
        repair_gap.paired_change({"x": 1.0}, {"y": 0.0})
    for name, per in (("ref", ref), ("new", new)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps({
            "metrics": {"code_acc_turn1": 0.5, "code_acc_turn2": 0.75},
            "repair": {"turns": 2, "repaired": 1, "wrong_first": 2, "broken": 0,
                       "right_first": 2}, "per_task": per}))
    assert repair_gap.main([str(tmp_path / "ref"), str(tmp_path / "new")]) == 0
    out = capsys.readouterr().out
    assert "| ref | 0.500 | 0.750 | +0.250 | 1 of 2 | 0 of 2 | reference | 2 |" in out
    assert "| new | 0.500 | 0.750 | +0.250 | 1 of 2 | 0 of 2 | +0.500 (+0.000, +1.000) | 2 |" in out
    with pytest.raises(SystemExit, match="not found"):
        repair_gap.main([str(tmp_path / "ref"), str(tmp_path / "missing")])
