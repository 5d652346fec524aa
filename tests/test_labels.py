"""Label-free labels (coevo_code.labels) and the joint scoring of a pair or ring
(training.scoring.prepare_joint / score_joint) on the real sandbox."""

from __future__ import annotations

import numpy as np
import pytest

from coevo_code import labels as L
from coevo_code.tasks.model import Task, TestCase

DOUBLE = Task(id="double", source="t", kind="stdio", prompt="Print twice the integer read.",
              tests=[TestCase(input=f"{i}\n", output=f"{2 * i}\n") for i in (1, 5, 9)])
ADD = Task(id="add", source="t", kind="functional", prompt="def add(a, b): ...",
           entry_point="add", tests=[TestCase(code="assert add(1, 2) == 3"),
                                     TestCase(code="assert add(-1, 1) == 0")])


def code(p):
    return f"```python\n{p}\n```"


def io_test(inp, out):
    return f"**Test Input:**\n```\n{inp}\n```\n\n**Test Output:**\n```\n{out}\n```"


def py_test(line):
    return f"```python\n{line}\n```"


RIGHT = code("print(2 * int(input()))")
TRIPLE = code("print(3 * int(input()))")
CONST = code("print(7)")
GOOD_TESTS = [io_test("2", "4"), io_test("3", "6"), io_test("10", "20"), io_test("0", "0")]
TRIPLE_TESTS = [io_test("2", "6"), io_test("3", "9"), io_test("10", "30"), io_test("0", "0")]


# ---- who labels whom; the vote; probes ------------------------------------------------------------
def test_supervisors_of_each_source():
    assert [L.supervisor("partner", i, 2) for i in range(2)] == [1, 0]
    assert [L.supervisor("ring", i, 3) for i in range(3)] == [2, 0, 1]
    assert [L.supervisor("self_majority", i, 3) for i in range(3)] == [0, 1, 2]
    assert L.supervisor("frozen", 0, 1) == L.FROZEN and L.supervisor("gold", 0, 1) is None
    with pytest.raises(ValueError, match="exactly 2 agents"):
        L.supervisor("partner", 0, 3)
    with pytest.raises(ValueError, match="label_source must be one of"):
        L.supervisor("majority", 0, 2)
    assert L.peer(0, 1) is None and L.peer(0, 2) == 1 and L.peer(0, 3) == 2


def test_a_label_source_record_requires_its_model_card_text_and_valid_agents():
    """A source without a method text cannot exist (the record refuses it, so the model card
    never meets an unknown source at a checkpoint); a name registers once."""
    with pytest.raises(TypeError):
        L.LabelSource("votes", labeller=lambda a, n: a)  # no method at all
    for method in ("", "   ", None):
        with pytest.raises(ValueError, match="'votes' needs its model card's method text"):
            L.LabelSource("votes", method=method, labeller=lambda a, n: a)
    with pytest.raises(ValueError, match="agents must be 1 <= min <= max"):
        L.LabelSource("votes", method="m", labeller=lambda a, n: a, min_agents=3, max_agents=2)
    with pytest.raises(ValueError, match="'ring' is registered already"):
        L.register(L.LabelSource("ring", method="m", labeller=lambda a, n: a))
    assert list(L.SOURCES) == ["gold", "partner", "ring", "self_majority", "frozen"]


def test_a_new_label_source_is_one_record(monkeypatch):
    """Registering a record is all it takes: who labels whom, the agent bounds, the config's
    validation and choices, and the model card read it."""
    from coevo_code.training.modelcard import render
    monkeypatch.setitem(L.SOURCES, "next", L.LabelSource(
        "next", method="Each agent labelled by its successor.", min_agents=3,
        labeller=lambda a, n: (a + 1) % n))
    assert [L.supervisor("next", i, 3) for i in range(3)] == [1, 2, 0]
    with pytest.raises(ValueError, match="label_source next needs at least 3 agents, got 2"):
        L.supervisor("next", 0, 2)
    card = render(name="r", base_model="tiny", label_source="next", data="d", step=1)
    assert "Each agent labelled by its successor." in card


@pytest.mark.parametrize("name", list(L.SOURCES))
def test_every_registered_source_validates_labels_and_has_a_card(name):
    """Each registered source: a config with the agents and data it needs validates, and one
    without them is refused naming the flag; every admitted agent gets a labeller; the card
    carries the record's method."""
    pytest.importorskip("trl")
    from coevo_code.training.config import CoevoConfig
    from coevo_code.training.modelcard import render
    src = L.SOURCES[name]
    n = src.min_agents
    agents = [f"a{i}" for i in range(n)] if n > 1 else []
    extra = {"frozen_labels": "labels.jsonl"} if src.needs_frozen else {}
    cfg = CoevoConfig(output_dir="/tmp/x", label_source=name, agent_names=agents,
                      agent_name=agents[0] if agents else "", use_cpu=True, bf16=False,
                      problems_per_generation=1, **extra)
    assert cfg.label_source == name
    if n > 1:
        with pytest.raises(ValueError, match=f"--label_source {name} needs a pair or ring"):
            CoevoConfig(output_dir="/tmp/x", label_source=name, use_cpu=True, bf16=False,
                        problems_per_generation=1)
    if src.needs_frozen:
        with pytest.raises(ValueError, match=f"--label_source {name} needs --frozen_labels"):
            CoevoConfig(output_dir="/tmp/x", label_source=name, use_cpu=True, bf16=False,
                        problems_per_generation=1)
    if src.max_agents is not None:
        with pytest.raises(ValueError, match=f"label_source {name} needs exactly"):
            many = [f"a{i}" for i in range(src.max_agents + 1)]
            CoevoConfig(output_dir="/tmp/x", label_source=name, agent_names=many,
                        agent_name="a0", use_cpu=True, bf16=False, problems_per_generation=1)
    for i in range(max(n, 1)):
        j = L.supervisor(name, i, max(n, 1))
        assert (j is None) == src.needs_gold
        assert j is None or j == L.FROZEN or 0 <= j < max(n, 1)
    card = render(name="r", base_model="tiny", label_source=name, data="d", step=1)
    assert src.method in card


def test_probe_code_takes_the_left_hand_side():
    assert L.probe_code("assert add(1, 2) == 3") == "add(1, 2)"
    assert L.probe_code("x = [1, 2]\nassert add(*x) == 3") == "x = [1, 2]\nadd(*x)"
    assert L.probe_code("assert is_even(4)") == "is_even(4)"
    assert L.probe_code("add(1, 2)") is None and L.probe_code("assert (") is None


def test_vote_threshold_tie_and_accurate_tests():
    outs = [["4"], ["4"], ["6"], ["4"]]
    own = np.array([[1, 0], [1, 0], [0, 1], [1, 1]], dtype=bool)
    v = L.vote(own, outs, threshold=0.5)
    assert v.correct.tolist() == [True, True, False, True] and v.agreement == 0.75
    assert v.accurate.tolist() == [True, False]  # test 1 fails solutions 0 and 1 of C
    assert L.vote(own, outs, threshold=0.8) is None                          # below the threshold
    assert L.vote(own[:2], [["4"], ["6"]]) is None                           # a tie
    assert L.vote(np.zeros((2, 1), bool), [["a"], ["b"]], [[True], [True]]) is None  # all errored


def _joint(blocks_sol, blocks_test, passed):
    rows = np.repeat(np.arange(len(blocks_sol)), blocks_sol)
    cols = np.repeat(np.arange(len(blocks_test)), blocks_test)
    return np.asarray(passed, dtype=bool), rows, cols


def test_agent_rewards_partner_self_and_edge_cases():
    # agent 0: 2 solutions, 2 tests; agent 1: 3 solutions (two agree), 2 tests
    passed, rows, cols = _joint([2, 3], [2, 2], [
        # t0(a0) t1(a0) t0(a1) t1(a1)
        [1, 1, 1, 0],   # a0 s0: passes partner's accurate test only
        [0, 0, 0, 0],   # a0 s1
        [1, 0, 1, 0],   # a1 s0 (in C)
        [1, 0, 1, 0],   # a1 s1 (in C)
        [0, 1, 0, 1],   # a1 s2
    ])
    outputs = [["a"] * 4, ["b"] * 4, ["x"] * 4, ["x"] * 4, ["y"] * 4]
    labels = L.block_labels(passed, outputs, np.zeros((5, 4), bool), rows, cols, 2)
    assert labels[1].correct.tolist() == [True, True, False]
    assert labels[1].accurate.tolist() == [True, False]
    assert labels[0] is None  # agent 0's two solutions tie
    r0 = L.agent_rewards("partner", 0, 2, passed, labels, rows, cols)
    assert r0.code.tolist() == [1.0, 0.0] and r0.pseudo_correct.tolist() == [True, False]
    # my tests, run by the partner's solutions against its C = {s0, s1}: t0 passes C and fails
    # the wrong s2 (accurate, catches it); t1 fails C
    assert r0.test[0] > r0.test[1]
    r1 = L.agent_rewards("partner", 1, 2, passed, labels, rows, cols)
    assert r1.label is None and r1.code is None and r1.test is None  # agent 0 did not label
    s1 = L.agent_rewards("self_majority", 1, 2, passed, labels, rows, cols)
    assert s1.code.tolist() == [1.0, 1.0, 0.0]  # SRT: the majority cluster earns 1
    with pytest.raises(ValueError, match="gold"):
        L.agent_rewards("gold", 0, 2, passed, labels, rows, cols)
    # a label whose C passes none of its own tests: no accurate test, so no code reward; my tests
    # are still judged by the partner's solutions
    broken = passed.copy()
    broken[2:4, 2:] = False
    lab2 = L.block_labels(broken, outputs, np.zeros((5, 4), bool), rows, cols, 2)
    assert lab2[1] is not None and not lab2[1].accurate.any()
    r = L.agent_rewards("partner", 0, 2, broken, lab2, rows, cols)
    assert r.label is not None and r.code is None and r.test is not None


def test_rewards_come_only_from_the_labeller_not_from_a_third_agent():
    rng = np.random.default_rng(0)
    passed = rng.random((9, 9)) < 0.5
    rows = cols = np.repeat(np.arange(3), 3)
    outputs = [[str(int(x)) for x in row] for row in passed]
    base = L.block_labels(passed, outputs, np.zeros((9, 9), bool), rows, cols, 3)
    r = L.agent_rewards("ring", 1, 3, passed, base, rows, cols)
    assert r.labeller == 0
    # agent 2 changes everything it wrote: agent 1's rewards do not move
    p2 = passed.copy()
    p2[6:, :] = ~p2[6:, :]
    p2[:, 6:] = ~p2[:, 6:]
    o2 = [[str(int(x)) for x in row] for row in p2]
    again = L.agent_rewards("ring", 1, 3, p2, L.block_labels(p2, o2, np.zeros((9, 9), bool),
                                                             rows, cols, 3), rows, cols)
    for a, b in ((r.code, again.code), (r.test, again.test)):
        assert (a is None and b is None) or np.allclose(a, b)


# ---- joint scoring on the real sandbox ----------------------------------------------------------
@pytest.fixture(scope="module")
def executor():
    from coevo_code.execution import Executor
    ex = Executor(slots=2)
    yield ex
    ex.close()


def _score(executor, task, blocks, me, source="partner", n_agents=2, **opts):
    from coevo_code.training.joint import prepare_joint, score_joint
    from coevo_code.training.scoring import RewardOptions
    options = RewardOptions(label_source=source, **opts)
    jb = prepare_joint(task, blocks, me, n_agents, options)
    results = iter(executor.run(jb.jobs))
    main = next(results) if jb.batch.job is not None else None
    probe = next(results) if jb.probe_job is not None else None
    return score_joint(jb, main, probe, options)


def test_a_planted_partner_output_changes_my_reward_and_my_own_tests_do_not(executor):
    mine = ([RIGHT, RIGHT, TRIPLE, "no code here"], GOOD_TESTS[:3] + ["garbage"])
    honest = ([RIGHT, RIGHT, RIGHT, CONST], GOOD_TESTS)
    planted = ([TRIPLE, TRIPLE, TRIPLE, CONST], TRIPLE_TESTS)  # agrees on a wrong answer
    a = _score(executor, DOUBLE, [mine, honest], 0)
    b = _score(executor, DOUBLE, [mine, planted], 0)
    assert a.code_rewards == [1.0, 1.0, 0.25, 0.0]   # 3 of 4 accurate partner tests catch TRIPLE
    assert b.code_rewards == [0.25, 0.25, 1.0, 0.0]  # the partner's wrong majority is now "gold"
    assert a.test_rewards != b.test_rewards and a.test_rewards[3] == -1.0
    # gold metrics of my block are the same either way, and never enter the rewards
    assert a.n_correct == b.n_correct == 2
    assert a.pseudo_hits == (4, 4) and b.pseudo_hits == (1, 4)  # only the unparsed one agrees
    # my own tests do not move my code rewards
    mine2 = (mine[0], TRIPLE_TESTS)
    assert _score(executor, DOUBLE, [mine2, honest], 0).code_rewards == a.code_rewards
    assert a.labelled and a.vote_agreement == 0.75 and a.cells > 0
    assert a.joint_err.tolist() == [[2, 0], [1, 1]]  # my errors (rows) x partner errors (cols)
    assert a.label_agree[1] == 8


def test_functional_problems_vote_on_the_probe_values(executor):
    right = code("def add(a, b):\n    return a + b")
    wrong = code("def add(a, b):\n    return a - b")
    mine = ([right, wrong], [py_test("assert add(2, 2) == 4"), py_test("assert add(2, 2) == 0")])
    partner = ([right, right, wrong], [py_test("assert add(5, 1) == 6"),
                                       py_test("assert add(0, 3) == -3")])
    s = _score(executor, ADD, [mine, partner], 0)
    assert s.code_rewards == [1.0, 0.0] and s.labelled
    assert s.test_rewards[0] > s.test_rewards[1]
    unlabelled = _score(executor, ADD, [mine, ([right, wrong], partner[1])], 0)  # a tie
    assert unlabelled.code_rewards == [None, None] and unlabelled.test_rewards == [None, None]
    assert unlabelled.labelled is False


def test_frozen_and_self_majority_sources(executor):
    mine = ([RIGHT, TRIPLE, TRIPLE, TRIPLE], GOOD_TESTS)
    frozen = ([RIGHT, RIGHT, RIGHT, CONST], GOOD_TESTS)
    f = _score(executor, DOUBLE, [mine, frozen], 0, source="frozen", n_agents=1)
    assert f.code_rewards == [1.0, 0.25, 0.25, 0.25]
    s = _score(executor, DOUBLE, [mine], 0, source="self_majority", n_agents=1)
    assert s.code_rewards == [0.0, 1.0, 1.0, 1.0]  # self-reward follows its own wrong majority
    assert s.pseudo_hits == (0, 4) and s.label_agree == (0, 0)  # no peer when alone


def test_the_labellers_rows_that_are_not_programs_pay_no_test(executor):
    """Co-RL's and the self-rewarding baselines' test reward counts caught wrong solutions as
    CURE's does: the labeller's completions that are not programs are none of them. A trivial
    test (input 0, which the wrong TRIPLE passes too) earns nothing beside prose, as beside a
    real wrong program; under CURE's formula as published it earned +1 for the prose."""
    trivial, catching = io_test("0", "0"), io_test("2", "4")
    mine = ([RIGHT, RIGHT], [trivial, catching])
    real = _score(executor, DOUBLE, [mine, ([RIGHT] * 3 + [TRIPLE], GOOD_TESTS)], 0)
    prose = _score(executor, DOUBLE, [mine, ([RIGHT] * 3 + ["no code, just words"], GOOD_TESTS)],
                   0)
    assert real.test_rewards == [0.0, 1.0]
    assert prose.test_rewards == [0.0, 0.0] and prose.test_rewards[0] <= real.test_rewards[0]
    cure = _score(executor, DOUBLE, [mine, ([RIGHT] * 3 + ["no code, just words"], GOOD_TESTS)],
                  0, wrong_programs_only=False)
    assert cure.test_rewards == [1.0, 1.0]
    own = _score(executor, DOUBLE, [([RIGHT] * 3 + ["just some words"], [trivial, catching])], 0,
                 source="self_majority", n_agents=1)
    assert own.test_rewards == [0.0, 0.0] and own.code_rewards == [1.0, 1.0, 1.0, 0.0]


def test_agent_rewards_leave_the_labellers_non_programs_out():
    # agent 0: one test, trivial (every program passes it); agent 1 labels: s0, s1 agree (C),
    # s2 is no program (errored everywhere, passes nothing)
    passed, rows, cols = _joint([1, 3], [1, 1], [[1, 1], [1, 1], [1, 1], [0, 0]])
    outputs = [["a", "a"], ["x", "x"], ["x", "x"], ["", ""]]
    errored = np.array([[0, 0], [0, 0], [0, 0], [1, 1]], dtype=bool)
    labels = L.block_labels(passed, outputs, errored, rows, cols, 2)
    plain = L.agent_rewards("partner", 0, 2, passed, labels, rows, cols)
    masked = L.agent_rewards("partner", 0, 2, passed, labels, rows, cols,
                             program=[True, True, True, False])
    assert plain.test.tolist() == [1.0] and masked.test.tolist() == [0.0]
    assert masked.code.tolist() == plain.code.tolist()


# ---- judging by the labeller's answers ----------------------------------------------------------
def test_answer_key_keeps_the_inputs_c_agrees_on():
    correct = np.array([True, True, False])
    outs = [["4", "6", "1", "x"], ["4", "7", "1", "x"], ["9", "9", "9", "9"]]
    err = np.array([[0, 0, 0, 1], [0, 0, 0, 0], [0, 0, 0, 0]], dtype=bool)
    answers, answered = L.answer_key(correct, outs, err)
    # input 1: C disagrees; input 3: a member of C errored; the wrong solution never counts
    assert answered.tolist() == [True, False, True, False]
    assert answers == ["4", None, "1", None]
    # a block with no tests of its own votes on the others' inputs (its accurate tests: none)
    rows, cols = np.array([0, 0, 1, 1, 1]), np.array([0, 0])
    outs5 = [["a", "b"], ["c", "d"], ["x", "y"], ["x", "y"], ["z", "y"]]
    labs = L.block_labels(np.ones((5, 2), bool), outs5, np.zeros((5, 2), bool), rows, cols, 2,
                          all_inputs=True)
    assert labs[1].correct.tolist() == [True, True, False] and labs[1].accurate.size == 0
    assert L.block_labels(np.ones((5, 2), bool), outs5, np.zeros((5, 2), bool), rows, cols,
                          2)[1] is None
    none = L.answer_key(np.zeros(3, bool), outs, err)
    assert not none[1].any()
    with pytest.raises(ValueError, match="C marks 2 solutions"):
        L.answer_key(correct[:2], outs, err)


def test_judge_answers_share_all_passed_and_edge_cases():
    label = L.PseudoLabel(np.array([True]), np.array([True]), 1.0)
    key = (["4", None, "1"], np.array([True, False, True]))
    outs = [["4", "0", "1"], ["4", "0", "2"], ["4", "0", "1"]]
    err = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 1]], dtype=bool)
    assert L.judge_answers(label, key, outs, err).tolist() == [1.0, 0.5, 0.5]  # error: no answer
    assert L.judge_answers(label, key, outs, err, all_passed=True).tolist() == [1.0, 0.0, 0.0]
    assert L.judge_answers(None, key, outs, err) is None
    assert L.judge_answers(label, ([None], np.array([False])), [["4"]], [[False]]) is None
    with pytest.raises(ValueError, match="answers 3 inputs"):
        L.judge_answers(label, key, [["4"]], [[False]])
    with pytest.raises(ValueError, match="with 3 rows of outputs"):
        L.judge_answers(label, key, outs, err[:2])
    with pytest.raises(ValueError, match="label_judge must be one of"):
        L.label_verdicts(label, [0], [0], [0], [[True]], judge_by="votes")
    with pytest.raises(ValueError, match="needs the solutions' outputs"):
        L.label_verdicts(label, [0], [0], [0], [[True]], judge_by="answers")


REVERSE = Task(id="reverse", source="t", kind="stdio",
               prompt="Read words and print them in reverse order, joined by spaces.",
               tests=[TestCase(input=f"{s}\n", output=" ".join(s.split()[::-1]) + "\n")
                      for s in ("a b", "x y z", "one")])
REV = code("print(' '.join(input().split()[::-1]))")
KEEP = code("print(' '.join(input().split()))")  # the mistake a one-word input cannot show


def test_answers_catch_a_mistake_the_labellers_tests_cannot_show(executor):
    # the labeller is right (it reverses) but tests only one-word inputs, on which leaving the
    # words in order is right too; my tests have longer inputs, some with wrong expected outputs
    weak = ([REV, REV, REV, KEEP], [io_test("cat", "cat"), io_test("dog", "dog")])
    mine = ([REV, KEEP, KEEP, KEEP], [io_test("a b c", "c b a"), io_test("p q", "p q")])
    by_tests = _score(executor, REVERSE, [mine, weak], 0)
    by_answers = _score(executor, REVERSE, [mine, weak], 0, label_judge="answers")
    assert by_tests.code_rewards == [1.0, 1.0, 1.0, 1.0]  # every mistake paid in full
    # four inputs answered by the labeller's C; KEEP agrees on the two one-word ones only
    assert by_answers.code_rewards == [1.0, 0.5, 0.5, 0.5]
    assert by_tests.pseudo_hits == (1, 4) and by_answers.pseudo_hits == (4, 4)
    # only my tests' inputs count, never their expected outputs
    flipped = (mine[0], [io_test("a b c", "a b c"), io_test("p q", "q p")])
    again = _score(executor, REVERSE, [flipped, weak], 0, label_judge="answers")
    assert again.code_rewards == by_answers.code_rewards
    # my tests, judged by the labeller's C: voting on every input leaves its own KEEP out of C,
    # so my right test (which catches KEEP) is accurate, where under its own inputs it was not
    assert by_tests.test_rewards == [-1.0, -1.0] and by_answers.test_rewards == [1.0, -1.0]
    assert by_answers.vote_agreement == 0.75 and by_tests.vote_agreement == 1.0
    # the agreement diagnostic judges by answers too: my vote (C = my three KEEPs) and the
    # labeller's (C = its three REVs) judge all eight solutions oppositely. By tests, my one
    # accurate test ("p q" -> "p q") fails the four REVs and the labeller's pass everything
    assert by_answers.label_agree == (0, 8) and by_tests.label_agree == (4, 8)


def test_answers_compare_stdout_as_the_stdio_pass_rule_does(executor):
    # a right solution printing a trailing space passes the gold tests; the answers judge must
    # not count it as a different answer
    spaced = code("print(' '.join(input().split()[::-1]) + ' ')")
    labeller = ([REV, REV, REV, KEEP], [io_test("a b c", "c b a"), io_test("x y", "y x")])
    mine = ([REV, spaced, KEEP, KEEP], [io_test("one", "one")])
    s = _score(executor, REVERSE, [mine, labeller], 0, label_judge="answers")
    assert s.n_correct == 2
    assert s.code_rewards[:2] == [1.0, 1.0] and s.code_rewards[2] == s.code_rewards[3] < 1.0
