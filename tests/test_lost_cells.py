"""Cells the harness lost (issue 51, item 1): a program cannot pass for a harness failure; a judge
lost on a cell is re-run once on a fresh one; what is lost again is ``sandbox_error``, and scoring
masks exactly the rows whose reward it could have changed (every other reward unchanged), in CURE
and in the label-free sources; evaluation counts it apart, never as the model's failure. Real
judges are killed with SIGKILL; the training runs are in ``test_training_faults.py``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coevo_code.evaluation.harness import ProblemResult, summarize
from coevo_code.evaluation.samples import SampleVerdicts, score_samples
from coevo_code.evaluation.samples import summarize as summarize_samples
from coevo_code.execution import Executor
from coevo_code.execution.core import JobState, job_units, run_unit
from coevo_code.execution.jobs import parse_job
from coevo_code.tasks.model import Task, TaskSet, TestCase
from coevo_code.training.joint import prepare_joint, score_joint
from coevo_code.training.scoring import (LOWEST, RewardOptions, full_matrix, lost_rows, prepare,
                                         score, score_matrix)
from coevo_code.training.step_metrics import batch_metrics
from coevo_code.training.tester_reward import TesterReward
from lost_cells import Killer, expected_masks

STDIO = Task(id="double", source="t", kind="stdio", prompt="double it",
             tests=[TestCase(input="2\n", output="4\n"), TestCase(input="5\n", output="10\n")])
GOOD = "print(int(input()) * 2)"
WRONG = "print(4)"
# doubles, but sleeps on one input: the killer takes its judge down on that cell only
SLEEPER = ("import time\nx = int(input())\nif x == 999:\n    time.sleep(1.5)\nprint(x * 2)")


def _code(p):
    return f"```python\n{p}\n```"


def _t(inp, out):
    return f"**Test Input:**\n```\n{inp}```\n\n**Test Output:**\n```\n{out}```"


# ---- the sandbox: a program cannot pass for a harness failure -----------------------------------
def test_a_program_or_test_that_exits_with_the_setup_failure_status_is_its_own_error(executor):
    """121 is the status of a cell whose isolation could not be set up; a program or a test that
    exits with it by itself, once isolated, is its own runtime error: the harness's failures are
    masked in training, so forging one would dodge a wrong answer's reward."""
    jobs = [{"programs": ["import os\nos._exit(121)", "import sys\nsys.exit(121)",
                          "print(int(input()) * 2)"],
             "tests": [{"input": "2\n", "output": "4\n"}]},
            {"kind": "functional", "entry_point": "f",
             "programs": ["def f(x):\n    return x",
                          "import os\nos._exit(121)\ndef f(x):\n    return x",
                          "import os\ndef f(x):\n    os._exit(121)"],
             "tests": [{"code": "assert f(1) == 1"}, {"code": "import os\nos._exit(121)"},
                       {"code": "f(1)"}]}]
    stdio, func = executor.run(jobs)
    assert stdio["outcomes"] == [["runtime_error"], ["runtime_error"], ["ok"]]
    assert func["outcomes"] == [["ok", "runtime_error", "ok"]] + [["runtime_error"] * 3] * 2


# ---- the executor: re-run once on a fresh judge, then sandbox_error -----------------------------
def _sleeper_job():
    return {"id": "s", "programs": [SLEEPER, GOOD, WRONG],
            "tests": [{"input": f"{x}\n", "output": f"{2 * x}\n"} for x in (2, 5, 999)]}


def test_a_judge_lost_once_is_replaced_and_the_cell_rerun():
    with Executor(slots=2, chunk_tests=1) as ex, Killer(once=True) as k:
        res = ex.run([_sleeper_job()])[0]
    assert k.kills == 1
    assert res["outcomes"] == [["ok"] * 3, ["ok"] * 3, ["ok", "wrong_answer", "wrong_answer"]]


def test_a_judge_lost_twice_on_a_cell_leaves_that_cell_alone_sandbox_error():
    with Executor(slots=2, chunk_tests=1) as ex:
        with Killer() as k:
            res = ex.run([_sleeper_job()])[0]
        assert k.kills == 2  # the unit, then its re-run on a fresh judge
        assert res["outcomes"] == [["ok", "ok", "sandbox_error"], ["ok"] * 3,
                                   ["ok", "wrong_answer", "wrong_answer"]]
        assert res["passed"][0] == [True, True, False]
        again = ex.run([_sleeper_job()])[0]  # the slots work on
        assert again["outcomes"][0] == ["ok"] * 3


class _Slot:
    """A slot whose server answers ``sandbox_error`` for the cells in ``lose`` on its first
    start (a cell whose isolation could not be set up), and correctly after a restart."""

    def __init__(self, lose):
        self.index, self.channel, self.starts, self.requests, self.lose = 0, None, 0, [], lose

    def start(self):
        self.starts += 1
        self.channel = object()

    def close(self):
        self.channel = None

    def call(self, request, timeout):
        self.requests.append(request["tests"])
        bad = self.lose if self.starts == 1 else ()
        return {"outcomes": ["sandbox_error" if t in bad else "ok" for t in request["tests"]],
                "outputs": None}


def test_cells_the_harness_lost_in_an_answered_unit_are_rerun_alone_on_a_fresh_server():
    job = parse_job({"programs": ["print(input())"],
                     "tests": [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(4)]})
    unit = job_units(0, job, 4)[0]
    st = JobState.empty(job)
    slot = _Slot(lose={b"1\n", b"3\n"})
    run_unit(slot, unit, st)
    assert st.outcomes == [["ok"] * 4]
    assert slot.starts == 2
    assert slot.requests == [[b"0\n", b"1\n", b"2\n", b"3\n"], [b"1\n", b"3\n"]]


# ---- scoring: exactly the rows a lost cell could change are masked ------------------------------
def _batch(n, m):
    return prepare(STDIO, [_code(GOOD)] * n, [_t(f"{j}\n", f"{2 * j}\n") for j in range(m)],
                   RewardOptions())


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_lost_cell_masks_what_it_could_change_and_nothing_else_moves(data):
    """Against the true matrix (nothing lost), the faulted one (lost cells read False): masked
    rows are exactly those the rule names, and every other reward is the true run's."""
    n, m = data.draw(st.integers(1, 5)), data.draw(st.integers(0, 4))
    opts = RewardOptions(code_all_passed=data.draw(st.booleans()),
                         post_stage=data.draw(st.booleans()))
    cells = st.lists(st.booleans(), min_size=n * (2 + m), max_size=n * (2 + m))
    true = np.array(data.draw(cells), dtype=bool).reshape(n, 2 + m)
    lost = np.array(data.draw(cells), dtype=bool).reshape(n, 2 + m)
    b = _batch(n, m)
    clean = score_matrix(b, true, opts)
    faulted = score_matrix(b, true & ~lost, opts, lost=lost)
    code, tests = expected_masks(true & ~lost, lost, 2, opts.code_all_passed)
    assert faulted.code_masked == code and faulted.test_masked == tests
    assert faulted.sandbox_errors == int(lost.sum())
    assert faulted.rows_masked == sum(code) + sum(tests)
    for a, b_, masked in zip(clean.code_rewards + clean.test_rewards,
                             faulted.code_rewards + faulted.test_rewards, code + tests):
        assert b_ is None if masked else b_ == a


def test_the_three_cases_by_hand():
    b = _batch(3, 2)  # rows: good, good, wrong; gold 0-1, generated 2-3
    true = np.array([[1, 1, 1, 1], [1, 1, 1, 1], [0, 1, 0, 1]], dtype=bool)
    clean = score_matrix(b, true, RewardOptions())
    # a generated cell lost: that test only
    lost = np.zeros_like(true)
    lost[2, 2] = True
    s = score_matrix(b, true & ~lost, RewardOptions(), lost=lost)
    assert s.code_rewards == clean.code_rewards and s.test_rewards == [None, clean.test_rewards[1]]
    # a gold cell lost on a solution another gold test fails: that solution only
    lost = np.zeros_like(true)
    lost[2, 1] = True
    s = score_matrix(b, true & ~lost, RewardOptions(), lost=lost)
    assert s.code_rewards == clean.code_rewards[:2] + [None]
    assert s.test_rewards == clean.test_rewards
    # a gold cell lost on a solution that may be correct: it, and every test (Eq. 4 reads C)
    lost = np.zeros_like(true)
    lost[0, 0] = True
    s = score_matrix(b, true & ~lost, RewardOptions(), lost=lost)
    assert s.code_rewards == [None] + clean.code_rewards[1:] and s.test_rewards == [None, None]
    assert s.n_solutions == 2 and s.rows_masked == 3


def test_length_shaping_shapes_the_rows_left_as_their_own_group():
    opts = RewardOptions(length_shaping=True, min_len=1, max_len=100)
    b = prepare(STDIO, [_code(GOOD)] * 3 + [_code(WRONG)], [], opts,
                code_lengths=[30, 10, 20, 5])
    lost = np.zeros((4, 2), dtype=bool)
    lost[0, 0] = True
    s = score_matrix(b, np.array([[0, 1], [1, 1], [1, 1], [0, 0]], dtype=bool), opts, lost=lost)
    alone = score_matrix(prepare(STDIO, [_code(GOOD)] * 2 + [_code(WRONG)], [], opts,
                                 code_lengths=[10, 20, 5]),
                         np.array([[1, 1], [1, 1], [0, 0]], dtype=bool), opts)
    assert s.code_rewards[0] is None and s.code_rewards[1:] == pytest.approx(alone.code_rewards)


def test_step_metrics_count_lost_cells_and_masked_rows_apart_from_rows_without_signal():
    b = _batch(2, 2)
    s = score(b, {"passed": [[True, True, True, False], [True, True, False, False]],
                  "outcomes": [["ok", "ok", "ok", "sandbox_error"],
                               ["ok", "ok", "wrong_answer", "sandbox_error"]]},
              RewardOptions())
    assert s.test_rewards[1] is None and s.test_masked == [False, True]
    m = batch_metrics([s])
    assert m["exec_sandbox_errors"] == 2 and m["rows_masked"] == 1
    assert m["test_rows_no_signal"] == 0.0  # the masked row is not "no correct solution"
    assert lost_rows(np.ones((1, 1), bool), np.zeros((1, 2), bool))[1].tolist() == [False]


# ---- the executor, then scoring: a real judge lost on one cell ----------------------------------
def test_a_cell_lost_in_a_real_run_masks_its_test_row_and_nothing_else():
    codes = [_code(SLEEPER), _code(GOOD), _code(WRONG)]
    tests = [_t("3\n", "6\n"), _t("999\n", "1998\n"), _t("1\n", "4\n")]
    b = prepare(STDIO, codes, tests, RewardOptions())
    with Executor(slots=2, chunk_tests=1) as ex:
        clean = score(b, ex.run([b.job])[0], RewardOptions())
        with Killer() as k:
            faulted = score(b, ex.run([b.job])[0], RewardOptions())
    assert k.kills == 2
    assert faulted.sandbox_errors == 1 and faulted.test_masked == [False, True, False]
    assert faulted.code_masked == [False] * 3
    assert faulted.code_rewards == clean.code_rewards == [1.0, 1.0, 0.5]
    assert faulted.test_rewards == [clean.test_rewards[0], None, clean.test_rewards[2]]


# ---- label-free: a lost cell may change any vote --------------------------------------------------
def _joint(outcomes):
    opts = RewardOptions(label_source="self_majority")
    jb = prepare_joint(STDIO, [([_code(GOOD)] * 2 + [_code(WRONG)],
                                [_t("3\n", "6\n"), _t("4\n", "8\n")])], 0, 1, opts)
    ok = {"ok": True}
    outs = {("ok", 2): "6", ("ok", 3): "8"}
    result = {"passed": [[o in ok for o in row] for row in outcomes], "outcomes": outcomes,
              "outputs": [[outs.get((o, j), "4") for j, o in enumerate(row)]
                          for row in outcomes]}
    return score_joint(jb, result, None, opts)


def test_label_free_rows_of_a_problem_with_a_lost_generated_cell_are_all_masked():
    good = ["ok"] * 4
    wrong = ["wrong_answer"] * 4
    clean = _joint([good, good, wrong])
    assert clean.code_rewards == [1.0, 1.0, 0.0] and clean.rows_masked == 0
    gold_lost = _joint([["sandbox_error", "ok", "ok", "ok"], good, wrong])
    assert gold_lost.code_rewards == clean.code_rewards  # gold tests reach the metrics only
    assert gold_lost.test_rewards == clean.test_rewards and gold_lost.rows_masked == 0
    lost = _joint([good, ["ok", "ok", "ok", "sandbox_error"], wrong])
    assert lost.code_rewards == [None] * 3 and lost.test_rewards == [None] * 2
    assert lost.rows_masked == 5 and lost.sandbox_errors == 1 and lost.pass_estimate is None


# ---- evaluation: the harness's failures apart from the model's ----------------------------------
def test_eval_leaves_undecided_solutions_and_lost_tests_out_and_counts_them():
    matrix = np.array([[1, 1, 1, 0], [0, 1, 1, 1], [1, 1, 0, 1]], dtype=bool)
    lost = np.zeros_like(matrix)
    lost[1, 0] = lost[0, 3] = True  # solution 1 undecided; generated test 1 lost
    p = ProblemResult("x", matrix & ~lost, 2, np.array([True, False, True]), True, 0, 0, lost)
    out = summarize([p], [(3, 1)], ["first"], bootstrap=0)
    assert out["metrics"]["pass@1"] == 1.0  # 2 of the 2 decided: the lost one is not wrong
    assert (out["sandbox_errors"], out["solutions_undecided"], out["tests_undecided"]) == (2, 1, 1)
    assert out["metrics"]["ut_acc"] == 0.0  # test 0 (fails a correct one) is the only judged


def test_samples_the_harness_lost_are_undecided_not_wrong():
    ts = TaskSet("t", "here", [STDIO])
    samples = {"double": [SLEEPER.replace("999", "5"), GOOD, WRONG]}
    with Executor(slots=2, chunk_tests=1) as ex, Killer():
        summary, verdicts = score_samples(ts, samples, ex)
    assert verdicts[0].undecided == [True, False, False]
    assert summary["pass@1"] == 0.5 and summary["sandbox_errors"] == 1
    assert summary["samples_undecided"] == 1
    v = SampleVerdicts("a", [True, False], [True, False], undecided_base=[False, True],
                       undecided=[False, True])
    assert summarize_samples(TaskSet("t", "here", [STDIO]), [v])["pass@1"] == 1.0


def test_unparsed_rows_are_never_lost():
    b = prepare(STDIO, ["no code", _code(GOOD)], ["nothing"], RewardOptions())
    s = score(b, {"passed": [[True, True]], "outcomes": [["ok", "sandbox_error"]]},
              RewardOptions())
    assert s.code_rewards == [LOWEST["code"], None] and s.test_rewards == [None]
    assert s.code_masked == [False, True] and full_matrix(b, {"passed": [[True, False]]}).shape \
        == (2, 3)


def test_a_tester_reward_gives_no_reward_to_a_solution_the_sandbox_lost():
    """``TesterReward`` (a trained tester, or the gold tests, as a TRL reward; ``coevo serve``'s
    ``/reward`` too): a solution with a lost cell gets None (no signal), not a low share."""
    with Executor(slots=2, chunk_tests=1) as ex:
        reward = TesterReward.from_gold([STDIO], executor=ex)
        sleeper = SLEEPER.replace("999", "5")
        texts = [_code(sleeper), _code(GOOD), _code(WRONG)]
        clean = reward(completions=texts, task_id=["double"] * 3)
        with Killer():
            faulted = reward(completions=texts, task_id=["double"] * 3)
    assert clean == [1.0, 1.0, 0.5] and faulted == [None, 1.0, 0.5]


# ---- with i51-rewards-rows: the program mask and the lost mask together -------------------------
def test_the_program_mask_and_the_lost_mask_compose():
    """A text the judge could not compile (every cell ``syntax_error``) is no program, decided
    without running, so no cell of it is lost, and it is no wrong solution; a test with a lost
    cell stays masked; the others' credit counts the wrong programs whose cells were kept. A job
    the executor refused is skipped and counted beside the lost cells."""
    b = prepare(STDIO, [_code(GOOD), _code(WRONG), _code("return 1")],
                [_t("2\n", "4\n"), _t("3\n", "7\n")], RewardOptions())
    assert [p.ok for p in b.programs] == [True] * 3 and [x.ok for x in b.tests] == [True] * 2
    res = {"passed": [[True, True, True, False], [True, False, True, False], [False] * 4],
           "outcomes": [["ok"] * 3 + ["wrong_answer"],
                        ["ok", "wrong_answer", "ok", "sandbox_error"], ["syntax_error"] * 4]}
    s = score(b, res, RewardOptions())
    assert s.code_rewards == [1.0, 0.5, 0.0] and s.code_masked == [False] * 3
    # test 1 catches no wrong *program* (only the text that never ran fails it); test 2 is masked
    assert s.test_rewards == [0.0, None] and s.test_masked == [False, True]
    assert (s.counts.wrong_x_accurate, s.counts.wrong_pass_accurate) == (1, 1)
    cure = score(b, res, RewardOptions(wrong_programs_only=False))
    assert cure.test_rewards == [0.5, None]  # CURE's formula: the non-program is caught too
    refused = score(b, {"error": "a lone surrogate"}, RewardOptions())
    assert refused.refused and refused.code_rewards == [None] * 3 and refused.rows_masked == 0
    m = batch_metrics([s, refused])
    assert (m["problems_refused"], m["exec_sandbox_errors"], m["rows_masked"]) == (1, 1, 1)
