"""Roles: prompts, and parsers that never raise and stay fast on any input."""

from __future__ import annotations

import ast
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from coevo_code import roles
from coevo_code.roles import (FAILED_PROGRAM, coder_messages, fenced_blocks, parse_failure_rate,
                              parse_program, parse_test)
from coevo_code.tasks import Task, TestCase

STDIO = Task(id="s", source="t", kind="stdio", prompt="Print twice n.",
             tests=[TestCase(input="2\n", output="4\n")],
             examples=[TestCase(input="2\n", output="4\n")])
FUNC = Task(id="f", source="t", kind="functional", entry_point="add",
            prompt="def add(a, b):\n    \"\"\"Add.\"\"\"\n", program_prefix="def add(a, b):\n",
            tests=[TestCase(code="assert add(1, 2) == 3")])


def test_prompts_are_chat_messages():
    for msgs in (coder_messages(STDIO), roles.tester_messages(STDIO), coder_messages(FUNC),
                 roles.tester_messages(FUNC)):
        assert [m["role"] for m in msgs] == ["system", "user"]
    assert "Print twice n." in coder_messages(STDIO)[1]["content"]
    assert "**Test Input:**" in roles.tester_messages(STDIO)[1]["content"]
    assert "Input:\n2\n" in roles.tester_messages(STDIO)[1]["content"]  # examples shown
    assert "assert add(" in roles.tester_messages(FUNC)[1]["content"]


def test_parse_program():
    text = "I think...\n```python\nprint(1)\n```\nbetter:\n```python\nprint(int(input())*2)\n```"
    p = parse_program(text, STDIO)
    assert p.ok and p.code.strip() == "print(int(input())*2)"
    assert parse_program("no code here at all, sorry :(", STDIO) == (
        parse_program("```python\nprint(\n```", STDIO))
    assert not parse_program("```python\nprint(\n```", STDIO).ok
    assert parse_program("```python\nprint(\n```", STDIO).code == FAILED_PROGRAM
    assert parse_program("print(3)", STDIO).ok  # raw code, no fence
    full = parse_program("```python\ndef add(a, b):\n    return a + b\n```", FUNC)
    assert full.ok and full.code.startswith("def add")
    body = parse_program("```python\n    return a + b\n```", FUNC)  # a body completion
    assert body.ok and body.code == "def add(a, b):\n    return a + b\n"
    assert not parse_program("```python\ndef other():\n    pass\n```", FUNC).ok


def test_parse_stdio_test_cure_format():
    text = ("Let me think.\n**Test Input:**\n```\n3\n```\n\n**Test Output:**\n```\n6\n```\n\n"
            "**Explanation:**\n\n3 * 2 = 6.")
    t = parse_test(text, STDIO)
    assert t.ok and t.test == TestCase(input="3\n", output="6")
    inline = parse_test("**Test Input:**\n```5```\n\n**Test Output:**\n```10```", STDIO)
    assert inline.ok and inline.test == TestCase(input="5\n", output="10")
    multi = parse_test("**Test Input:**\n```\n2 3\n1 2\n```\n**Test Output:**\n```\n5\n```", STDIO)
    assert multi.test.input == "2 3\n1 2\n"
    # the last one counts
    two = parse_test("**Test Input:**\n```1```\n**Test Output:**\n```2```\n"
                     "**Test Input:**\n```4```\n**Test Output:**\n```8```", STDIO)
    assert two.test == TestCase(input="4\n", output="8")
    bad = parse_test("**Test Input:**\n```1```\n(no output)", STDIO)
    assert not bad.ok and bad.test.output.startswith("\x00")


def test_parse_functional_test():
    t = parse_test("Reasoning...\n```python\nx = 1\nassert add(1, 2) == 3\n```", FUNC)
    assert t.ok and t.test.code == "assert add(1, 2) == 3"
    multi = parse_test("```python\nassert add(\n    1, 2) == 3\n```", FUNC)
    assert multi.ok and "add(" in multi.test.code
    assert not parse_test("```python\nassert other(1) == 2\n```", FUNC).ok
    assert not parse_test("nothing", FUNC).ok
    assert parse_test("assert add(2, 2) == 4", FUNC).ok  # no fence


# tests that test nothing: each passes every program that does not raise
TAUTOLOGIES = ["assert add(1, 2) == add(1, 2)", "assert add(1, 2) == 99 or True",
               "assert add is not None", "assert add(1, 2) is not None",
               "assert isinstance(add(1, 2), int)",
               "assert add(1, 2) != 'never'", "assert (add := lambda a, b: 3)(1, 2) == 3",
               "assert add(*[1, 2]) == add(1, 2)", "assert add(len([1]), 2) == add(1, 2)",
               "assert add(1, 2) == add(1, 2), 'message'", "assert [add(1, 2)] == [add(1, 2)]"]
NOT_ASSERTS = ["try:\n    add(1, 2)\nexcept Exception:\n    pass\nassert True",
               "def add(a, b):\n    return 3\nassert True"]


def test_generated_functional_tests_are_input_output_pairs():
    ok = {"assert add(1, 2) == 3": "assert add(1, 2) == 3",
          "assert add(-1, 2.5) == 1.5, 'why'": "assert add(-1, 2.5) == 1.5",
          "assert add([1], b=[2]) == [1, 2]": "assert add([1], b=[2]) == [1, 2]",
          "assert add((1,), ()) == (1,)": "assert add((1,), ()) == (1,)"}
    for text, code in ok.items():
        t = parse_test(f"```python\n{text}\n```", FUNC)
        assert t.ok and t.test.code == code, text
    for text in TAUTOLOGIES:
        t = parse_test(f"Surely true:\n```python\n{text}\n```", FUNC)
        assert not t.ok and t.test == roles.FAILED_FUNCTIONAL_TEST, text
    for text in NOT_ASSERTS:  # the last assert is what is taken: it does not call add
        assert not parse_test(f"```python\n{text}\n```", FUNC).ok, text
    # a rebinding before the assert is not part of the test: only the pair is kept
    t = parse_test("```python\nadd = lambda a, b: 3\nassert add(1, 2) == 3\n```", FUNC)
    assert t.ok and t.test.code == "assert add(1, 2) == 3"
    # LeetCode-style: a method of a fresh Solution()
    lc = Task(id="lc", source="t", kind="functional", entry_point="twoSum", prompt="...",
              starter_code="class Solution:\n    def twoSum(self, nums, target):\n",
              tests=[TestCase(code="assert Solution().twoSum([2, 7], 9) == [0, 1]")])
    assert parse_test("assert Solution().twoSum([2, 7], 9) == [0, 1]", lc).ok
    assert not parse_test("assert twoSum([2, 7], 9) == [0, 1]", lc).ok
    assert not parse_test("assert Solution(1).twoSum([2, 7], 9) == [0, 1]", lc).ok
    assert not parse_test("s = Solution()\nassert s.twoSum([2, 7], 9) == [0, 1]", lc).ok
    assert "Solution().twoSum" in roles.tester_messages(lc)[1]["content"]
    # the probe form, for the label-free vote only
    assert roles.io_test("add(1, 2)", "add", probe=True) == "add(1, 2)"
    assert roles.io_test("add(1, 2)", "add") is None
    assert roles.io_test("add(x, 2)", "add", probe=True) is None
    # the test is rebuilt from source segments, which leave out the parentheses around them:
    # it is the statement written (one assert of the same comparison), never two statements
    split = 'assert add(1, 2) == ("a"\n"b")'
    assert roles.io_test(split, "add") == 'assert (add(1, 2)) == ("a"\n"b")'
    for text in (split, "assert add(\n1, 2) == (\n3)", "assert (add(1, 2)) == 3"):
        back = ast.parse(roles.io_test(text, "add")).body
        assert len(back) == 1 and ast.dump(back[0]) == ast.dump(ast.parse(text).body[0]), text
    assert roles.io_test("assert add(1, 2) == 3", "add") == "assert add(1, 2) == 3"
    # a bool or None answer may be checked with ``is`` against that literal (the bundled gold
    # tests' form, which the scripted pairs replay as generated tests); nothing else with ``is``
    assert roles.io_test("assert add(4, 0) is True", "add") == "assert add(4, 0) is True"
    assert roles.io_test("assert add(4, 0) is None", "add") == "assert add(4, 0) is None"
    for text in ("assert add(1, 2) is 3", "assert add(1, 2) is not None",
                 "assert add(1, 2) is not False", "assert add(1, 2) is ()"):
        assert roles.io_test(text, "add") is None, text


def test_a_tautology_earns_no_more_than_a_real_test(executor):
    """A scripted batch under CURE's test reward: one right and two wrong solutions, real tests
    (right, catching a wrong solution or not; wrong) and tautologies. A tautology is an invalid
    test: the reward of a test that does not parse (-1), never more than a real test's; before,
    it passed every program and earned 0 (+1 with no wrong solution) where a wrong real test
    earned -1."""
    from coevo_code.matrix import full_matrix, prepare
    from coevo_code.rewards import cure_test_rewards
    from coevo_code.training.scoring import LOWEST, RewardOptions, score_matrix
    right = "def add(a, b):\n    return a + b"
    wrong = ["def add(a, b):\n    return a * b if a == 2 else a + b",
             "def add(a, b):\n    return 6"]
    real = {"catches both": "assert add(2, 5) == 7", "catches one": "assert add(1, 2) == 3",
            "catches none": "assert add(3, 3) == 6", "wrong": "assert add(2, 3) == 6"}
    task = Task(id="add", source="t", kind="functional", entry_point="add", prompt="add",
                tests=[TestCase(code=c) for c in ("assert add(1, 2) == 3", "assert add(2, 5) == 7",
                                                  "assert add(0, 0) == 0")])
    fence = "```python\n{}\n```".format
    for programs in ([right] + wrong, [right, right + "\n"]):
        texts = list(real.values()) + TAUTOLOGIES
        batch = prepare(task, [fence(p) for p in programs], [fence(t) for t in texts])
        assert [x.ok for x in batch.tests] == [True] * len(real) + [False] * len(TAUTOLOGIES)
        score = score_matrix(batch, full_matrix(batch, executor.run([batch.job])[0]),
                             RewardOptions())
        r = dict(zip(texts, score.test_rewards))
        assert score.test_parse_failures == len(TAUTOLOGIES)
        assert all(r[t] == LOWEST["test"] == -1.0 for t in TAUTOLOGIES)
        assert all(r[t] <= min(r[x] for x in real.values()) for t in TAUTOLOGIES)
        if len(programs) == 3:
            assert r[real["catches both"]] == 1.0 and r[real["catches one"]] == 0.5
            assert r[real["catches none"]] == 0.0 and r[real["wrong"]] == -1.0
        else:
            assert r[real["catches none"]] == 1.0 and r[real["wrong"]] == -1.0
        # the hole this closes: run as written, every tautology passes every program
        raw = executor.run([task.job([*programs], tests=[TestCase(code=t) for t in TAUTOLOGIES
                                                          if "\n" not in t])])[0]
        assert all(all(row) for row in raw["passed"])
        gold = task.job(programs)
        correct = [all(row) for row in executor.run([gold])[0]["passed"]]
        assert min(cure_test_rewards(raw["passed"], correct)) >= 0.0


def test_failed_parses_fail_everything(executor):
    prog = parse_program("garbage", STDIO).code
    test = parse_test("garbage", STDIO).test
    res = executor.run([STDIO.job([prog, "print(int(input())*2)"]),
                        STDIO.job(["print(int(input())*2)", "print('')"], tests=[test]),
                        FUNC.job(["def add(a, b):\n    return a + b"],
                                 tests=[parse_test("garbage", FUNC).test])])
    assert res[0]["passed"] == [[False], [True]]
    assert res[1]["passed"] == [[False], [False]]
    assert res[2]["passed"] == [[False]]


def test_parse_failure_rate():
    parsed = [parse_program(x, STDIO) for x in ("print(1)", "((", "```python\nprint(2)\n```")]
    assert parse_failure_rate(parsed) == 1 / 3
    assert parse_failure_rate([]) != parse_failure_rate([])  # NaN


TEXT = st.text(alphabet=st.sampled_from(list("`*\n :abcdeTstIpuOassert()=+123python\\\"'#")),
               max_size=400) | st.text(max_size=300)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_parsers_never_raise(text):
    for task in (STDIO, FUNC):
        p = parse_program(text, task)
        t = parse_test(text, task)
        assert isinstance(p.code, str) and isinstance(t.test, TestCase)
        assert t.test.kind == task.kind
    fenced_blocks(text)


def test_parsers_are_fast_on_hostile_input():
    worst = [("```" * 20000), ("**Test Input:**" * 20000), ("assert (" * 5000 + "\n") * 10,
             "```python\n" + "(" * 100000 + "\n```", "a" * 2_000_000]
    for text in worst:
        t0 = time.perf_counter()
        for task in (STDIO, FUNC):
            parse_program(text, task)
            parse_test(text, task)
        assert time.perf_counter() - t0 < 5.0, text[:40]
