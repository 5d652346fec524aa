"""Pure parts of training: the sampler's order, scoring, step metrics, the native loader and the
shipped tiny-model files."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from coevo_code.rewards import cure_length_shaping, group_normalize
from coevo_code.tasks import LoaderError, check_tasks, load_tasks
from coevo_code.tasks.model import Task, TestCase
from coevo_code.training.scoring import LOWEST, RewardOptions, full_matrix, prepare, score
from coevo_code.training.step_metrics import METRIC_KEYS, batch_metrics

ROOT = Path(__file__).resolve().parent.parent


# ---- the sampler ------------------------------------------------------------------------------
def _sampler(**kw):
    pytest.importorskip("torch")
    from coevo_code.training.data import PairedSampler
    args = dict(n_problems=5, k=3, problems_per_batch=2, batches=7, repeat=1, seed=1)
    args.update(kw)
    return PairedSampler(**args)


@pytest.mark.slow
def test_sampler_layout_k_code_then_k_test_per_problem():
    idx = list(_sampler())
    assert len(idx) == len(_sampler()) == 7 * 2 * 6
    for g in range(0, len(idx), 6):
        block = idx[g:g + 6]
        problem = {i // 4 for i in block}
        assert len(problem) == 1
        assert all(i % 2 == 0 for i in block[:3]) and all(i % 2 == 1 for i in block[3:])
        assert len(set(block[:3])) == 1 and len(set(block[3:])) == 1
        assert block[0] // 2 == block[3] // 2  # the same examples-shown choice for both roles


def test_sampler_covers_every_problem_once_per_pass_and_is_prefix_stable():
    idx = list(_sampler(batches=5))
    visits = [i // 4 for i in idx[::6]]
    assert sorted(visits[:5]) == [0, 1, 2, 3, 4] and sorted(visits[5:10]) == [0, 1, 2, 3, 4]
    assert visits[:5] != visits[5:10] or visits[:5] != list(range(5))
    longer = list(_sampler(batches=9))
    assert longer[:len(idx)] == idx  # resuming with a larger max_steps keeps the order
    assert list(_sampler(batches=5)) == idx
    assert list(_sampler(batches=5, seed=2)) != idx


def test_sampler_repeats_each_generation_batch_for_trl():
    idx = list(_sampler(batches=2, repeat=3))
    one = 2 * 6
    assert idx[:one] == idx[one:2 * one] == idx[2 * one:3 * one]
    assert idx[3 * one:4 * one] != idx[:one]


@pytest.mark.parametrize("p, lo, hi", [(0.0, 0, 0), (1.0, 1, 1), (0.3, 0.22, 0.38)])
def test_sampler_shows_examples_with_probability_p(p, lo, hi):
    idx = list(_sampler(n_problems=50, problems_per_batch=10, batches=30, p_give_example=p))
    shown = [(i % 4) >= 2 for i in idx[::6]]
    assert lo <= sum(shown) / len(shown) <= hi


# ---- scoring ----------------------------------------------------------------------------------
STDIO = Task(id="double", source="t", kind="stdio", prompt="double it",
             tests=[TestCase(input="2\n", output="4\n"), TestCase(input="5\n", output="10\n")])
GOOD = "```python\nprint(int(input()) * 2)\n```"
WRONG = "```python\nprint(4)\n```"


def _t(inp, out):
    return f"**Test Input:**\n```\n{inp}```\n\n**Test Output:**\n```\n{out}```"


def test_prepare_leaves_unparsed_completions_out_of_the_job():
    b = prepare(STDIO, [GOOD, "no code", WRONG], [_t("3\n", "6\n"), "nothing", _t("1\n", "9\n")],
                RewardOptions())
    assert len(b.job["programs"]) == 2 and len(b.job["tests"]) == 2 + 2
    full = full_matrix(b, {"passed": [[True, True, True, False], [True, False, False, False]]})
    assert full.tolist() == [[True, True, True, False, False],
                             [False] * 5,
                             [True, False, False, False, False]]


def test_score_by_hand():
    b = prepare(STDIO, [GOOD, "no code", WRONG], [_t("3\n", "6\n"), "nothing", _t("2\n", "4\n")],
                RewardOptions())
    # good passes everything; wrong passes gold 1 and generated test 3 (input 2)
    s = score(b, {"passed": [[True, True, True, True], [True, False, False, True]]},
              RewardOptions())
    assert s.code_rewards == [1.0, LOWEST["code"], 0.5]
    # W = {wrong} (the unparsed completion is no program): test 1 accurate, catches it -> 1;
    # test 2 unparsed -> -1; test 3 accurate, the wrong program passes it -> 0
    assert s.test_rewards == [1.0, LOWEST["test"], 0.0]
    assert s.n_correct == 1 and s.code_parse_failures == 1 and s.test_parse_failures == 1
    assert s.cells == 2 * 4
    # CURE's formula as published (W = {unparsed, wrong}): test 3 "catches" the unparsed one
    cure = RewardOptions(wrong_programs_only=False)
    s = score(b, {"passed": [[True, True, True, True], [True, False, False, True]]}, cure)
    assert s.test_rewards == [1.0, LOWEST["test"], 0.5]


FIB = Task(id="fib", source="t", kind="functional", entry_point="fib", prompt="fib(n)",
           tests=[TestCase(code=f"assert fib({n}) == {v}") for n, v in
                  ((0, 0), (1, 1), (2, 1), (10, 55))])
RIGHT_FIB = ("```python\ndef fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n"
             "        a, b = b, a + b\n    return a\n```")
WRONG_FIB = "```python\ndef fib(n):\n    return n\n```"
PROSE = ["The n-th Fibonacci number is the sum of the two before it.",
         "I would solve this with dynamic programming, keeping the last two values.",
         "Sorry, I cannot write this function."]
FIB_TESTS = {"trivial": "```python\nassert fib(1) == 1\n```",    # `return n` passes it too
             "catching": "```python\nassert fib(6) == 8\n```",
             "wrong": "```python\nassert fib(6) == 6\n```"}


def _fib_rewards(executor, codes, options=None):
    options = options or RewardOptions()
    b = prepare(FIB, codes, list(FIB_TESTS.values()), options)
    s = score(b, executor.run([b.job])[0], options)
    return s, dict(zip(FIB_TESTS, s.test_rewards))


def test_prose_pays_a_test_no_more_than_real_wrong_programs(executor):
    """The scripted batch of docs/CORE.md: one correct solution and three completions of prose
    against one trivial test (one that even the wrong program `return n` passes). Beside three
    real wrong programs the trivial test earns 0; beside prose it earned +1 under CURE's
    formula (every test "caught" the prose) and earns 0 now."""
    real, r_real = _fib_rewards(executor, [RIGHT_FIB] + [WRONG_FIB] * 3)
    prose, r_prose = _fib_rewards(executor, [RIGHT_FIB] + PROSE)
    assert r_real == {"trivial": 0.0, "catching": 1.0, "wrong": -1.0}
    assert r_prose["trivial"] <= r_real["trivial"]
    assert r_prose == {"trivial": 0.0, "catching": 0.0, "wrong": -1.0}
    assert prose.code_rewards == [1.0] + [LOWEST["code"]] * 3  # the coder's side is unchanged
    assert prose.counts.wrong_x_accurate == 0 and real.counts.wrong_x_accurate == 6
    # the hole, under CURE's formula as published: the trivial test is paid for the prose
    _, cure = _fib_rewards(executor, [RIGHT_FIB] + PROSE, RewardOptions(wrong_programs_only=False))
    assert cure["trivial"] == 1.0
    # mixed: one real wrong program and two prose; the real one decides
    _, mixed = _fib_rewards(executor, [RIGHT_FIB, WRONG_FIB] + PROSE[:2])
    assert mixed == {"trivial": 0.0, "catching": 1.0, "wrong": -1.0}


def test_known_wrong_programs_pay_a_test_for_catching_them_when_every_sample_is_right(executor):
    """Four right solutions: under CURE's formula W is empty and every right test earns +1, the
    trivial one (`return n` passes it) as much as the one that catches a mistake. The problem's
    known wrong programs, once a gold test fails them, join W for the test rewards: the trivial
    test earns for the one it catches, the catching test for both; a "mutant" the gold tests
    do not fail is no known wrong program; the code rewards and metrics do not change."""
    import dataclasses
    fib = dataclasses.replace(FIB, metadata={"mutants": [
        "def fib(n):\n    return n\n", "def fib(n):\n    return 0\n",
        "def fib(n):\n    return [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55][n]\n"]})

    def rewards(options):
        b = prepare(fib, [RIGHT_FIB] * 4, list(FIB_TESTS.values()), options)
        jobs = [j for j in (b.job, b.known_job) if j is not None]
        res = executor.run(jobs)
        return b, score(b, res[0], options, res[1] if len(res) > 1 else None)

    b0, cure = rewards(RewardOptions())  # the default: CURE's formula
    assert b0.known_job is None
    assert dict(zip(FIB_TESTS, cure.test_rewards)) == {"trivial": 1.0, "catching": 1.0,
                                                       "wrong": -1.0}
    b, known = rewards(RewardOptions(known_wrong=4))
    assert len(b.known_job["programs"]) == 3 and b.known_job["tests"] == b.job["tests"]
    # W = {return n, return 0} (the table lookup passes every gold test: left out)
    assert dict(zip(FIB_TESTS, known.test_rewards)) == {"trivial": 0.5, "catching": 1.0,
                                                        "wrong": -0.5}
    assert known.known == (2, 2) and known.cells == 4 * 7 + 3 * 7
    assert known.code_rewards == cure.code_rewards and known.counts == cure.counts
    # a lost cell of a known wrong program on a generated test masks that test's reward
    res = executor.run([b.job, b.known_job])
    res[1]["outcomes"][0][4] = "sandbox_error"  # return n on the trivial test
    res[1]["passed"][0][4] = False
    lost = score(b, res[0], RewardOptions(known_wrong=4), res[1])
    assert lost.test_rewards[0] is None and lost.test_rewards[1:] == known.test_rewards[1:]
    assert lost.sandbox_errors == 1


def test_what_is_not_a_program_is_decided_by_the_parser_and_the_compiler(executor):
    """Not programs: nothing parsed, or a text the judge could not compile (`syntax_error` in its
    whole row: `ast.parse` accepts a `return` outside a function, `compile` does not). A
    program that ran and crashed, on import included, is a program (a wrong one)."""
    from coevo_code.matrix import program_rows
    uncompiled = "```python\ndef fib(n):\n    return n\nreturn 1\n```"
    crashes = "```python\nimport no_such_module_here\ndef fib(n):\n    return n\n```"
    b = prepare(FIB, [RIGHT_FIB, PROSE[0], uncompiled, crashes], list(FIB_TESTS.values()),
                RewardOptions())
    res = executor.run([b.job])[0]
    assert res["outcomes"][1] == ["syntax_error"] * 7 and "runtime_error" in res["outcomes"][2]
    assert program_rows(b, res).tolist() == [True, False, False, True]
    s = score(b, res, RewardOptions())
    # W = {crashes}: every accurate test catches it (it is a real wrong program)
    assert dict(zip(FIB_TESTS, s.test_rewards)) == {"trivial": 1.0, "catching": 1.0,
                                                    "wrong": -0.0}


def test_no_correct_solution_means_no_test_reward_and_no_gold_no_code_reward():
    b = prepare(STDIO, [WRONG, WRONG], [_t("3\n", "6\n"), _t("2\n", "4\n")], RewardOptions())
    s = score(b, {"passed": [[True, False, False, True]] * 2}, RewardOptions())
    assert s.code_rewards == [0.5, 0.5] and s.test_rewards == [None, None]
    nogold = Task(id="x", source="t", kind="stdio", prompt="p", tests=[])
    b = prepare(nogold, [GOOD], [_t("3\n", "6\n")], RewardOptions())
    s = score(b, {"passed": [[True]]}, RewardOptions())
    assert s.code_rewards == [None] and s.test_rewards == [None] and s.n_correct is None


def test_max_gold_tests_and_all_passed():
    opts = RewardOptions(max_gold_tests=1, code_all_passed=True)
    b = prepare(STDIO, [GOOD, WRONG], [], opts)
    assert b.n_gold == 1 and len(b.job["tests"]) == 1
    s = score(b, {"passed": [[True], [True]]}, opts)
    assert s.code_rewards == [1.0, 1.0] and s.test_rewards == []


def test_length_shaping_returns_cure_advantages():
    opts = RewardOptions(length_shaping=True, min_len=1, max_len=100)
    b = prepare(STDIO, [GOOD, GOOD, WRONG, "not code at all"], [], opts,
                code_lengths=[30, 10, 20, 5])
    s = score(b, {"passed": [[True, True], [True, True], [False, False]]}, opts)
    want = cure_length_shaping(group_normalize([1, 1, 0, 0], keep_all_ones=True),
                               [30, 10, 20, 5], 1, 100)
    assert s.code_rewards == pytest.approx(list(want))
    assert sum(s.code_rewards) == pytest.approx(0.0)


def test_batch_metrics_keys_and_undefined_values():
    m = batch_metrics([])
    assert list(m) == list(METRIC_KEYS) + ["joint_errors", "cross_bon", "pseudo_label_by_family"]
    assert all(m[k] is None for k in ("labelled", "agreement", "kappa", "joint_errors",
                                      "pseudo_label_by_family"))
    assert m["code_acc"] is None and m["problems"] == 0 and m["exec_cells_per_s"] is None
    b = prepare(STDIO, [GOOD, WRONG], [_t("3\n", "6\n"), _t("2\n", "4\n")], RewardOptions())
    s = score(b, {"passed": [[True, True, True, True], [True, False, False, True]]},
              RewardOptions())
    m = batch_metrics([s], exec_seconds=0.5)
    assert m["code_acc"] == 0.5 and m["ut_acc"] == 1.0
    assert m["p01"] == 0.5 and m["p00"] is None  # no inaccurate test: undefined, not NaN
    assert m["exec_cells_per_s"] == 16.0 and m["bon_acc"] == 1.0
    assert all(v is None or math.isfinite(v) for v in m.values())
    json.dumps(m)



def test_pseudo_label_counts_pool_per_family():
    """``pseudo_label_by_family`` holds the 2 x 2 counts behind ``pseudo_label_kappa`` per task
    family (pseudo-label says wrong x gold says wrong): problems without a family, unlabelled
    ones and ones with nothing judged add nothing to it; the report pools them over steps."""
    import numpy as np

    from coevo_code.metrics import TestCounts, joint_errors
    from coevo_code.training.report import label_accuracy_by_family, label_counts_by_family
    from coevo_code.training.scoring import ProblemScore

    def ps(family, pseudo_wrong, gold_wrong, labelled=True):
        m = joint_errors(pseudo_wrong, gold_wrong)
        return ProblemScore(task_id="t", code_rewards=[], test_rewards=[], n_solutions=4,
                            n_correct=None, counts=TestCounts(), bon=float("nan"),
                            code_parse_failures=0, test_parse_failures=0, code_lengths=[],
                            test_lengths=[], cells=0, labelled=labelled,
                            pseudo_hits=(int(np.trace(m)), int(m.sum())), pseudo_joint=m,
                            family=family)
    f, t = False, True
    m = batch_metrics([ps("take", [f, f, t, t], [f, t, t, t]),   # passes one wrong solution
                       ps("take", [t, f, f, f], [f, f, f, f]),   # fails one right solution
                       ps("extreme", [f, f, f, f], [t, t, t, t]),
                       ps(None, [f, t, f, t], [f, t, f, t]),
                       ps("add_const", [], []),
                       ps("pick_word", [f] * 4, [f] * 4, labelled=None)])
    assert m["pseudo_label_by_family"] == {"extreme": [[0, 4], [0, 0]],
                                           "take": [[4, 1], [1, 2]]}
    assert list(m["pseudo_label_by_family"]) == ["extreme", "take"]  # sorted: stable lines
    assert m["pseudo_label_acc"] == 10 / 16  # every labelled problem, family or not
    json.dumps(m)
    lines = [{"step": 1, "pseudo_label_by_family": m["pseudo_label_by_family"]},
             {"step": 2, "pseudo_label_by_family": None},
             {"step": 3, "pseudo_label_by_family": {"take": [[1, 0], [0, 3]],
                                                    "count_word": [[0, 2], [2, 0]]}}]
    pooled = label_counts_by_family(lines)
    assert list(pooled) == ["count_word", "extreme", "take"]
    assert pooled["take"].tolist() == [[5, 1], [1, 5]]
    assert label_accuracy_by_family(lines) == {"count_word": (0, 4), "extreme": (0, 4),
                                               "take": (10, 12)}
    assert label_counts_by_family([]) == {}

# ---- the native loader and the bundled problems -------------------------------------------------
def test_bundled_problems_load_and_every_reference_passes(executor):
    ts = load_tasks("bundled")
    assert len(ts) >= 20 and {t.kind for t in ts} == {"stdio", "functional"}
    assert all(len(t.tests) >= 5 and t.references for t in ts)
    report = check_tasks(ts, executor)
    assert report.passed == report.checked == len(ts), report.summary()


@pytest.mark.parametrize("text, needle", [
    ("- {id: a, kind: stdio, prompt: p}\n", "missing field 'tests'"),
    ("- {id: a, kind: functional, prompt: p, tests: [{code: 'assert f()'}]}\n", "entry_point"),
    ("- {id: a, kind: stdio, prompt: p, tests: [{input: '1'}]}\n", "tests[0]"),
    ("- {id: a, kind: stdio, prompt: p, tests: [{input: '1', output: '1'}], colour: red}\n",
     "colour"),
    ("- {id: a, kind: stdio, prompt: p, tests: [{input: '1', output: '1'}]}\n"
     "- {id: a, kind: stdio, prompt: q, tests: [{input: '1', output: '1'}]}\n", "duplicate id"),
    ("- {id: a, kind: sql, prompt: p, tests: [{input: '1', output: '1'}]}\n", "kind"),
    ("key: [unclosed\n", "not valid YAML"),
])
def test_native_loader_errors_name_the_record(tmp_path, text, needle):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(LoaderError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        load_tasks("native", str(f), strict=True)


# ---- the tiny model's files ----------------------------------------------------------------------
@pytest.mark.parametrize("arch,folder,cls", [("qwen2", "tiny-random", "qwen2"),
                                               ("llama", "tiny-llama-random", "llama")])
@pytest.mark.slow
def test_shipped_random_tiny_model_files_are_what_the_script_makes(tmp_path, arch, folder, cls):
    pytest.importorskip("tokenizers")
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), "--arch",
                        arch, "--random", "--out", str(tmp_path)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    shipped = ROOT / "coevo_code" / "assets" / folder
    names = sorted(x.name for x in shipped.iterdir())
    assert names == sorted(x.name for x in tmp_path.iterdir())
    for name in names:
        assert (shipped / name).read_bytes() == (tmp_path / name).read_bytes(), name
    cfg = json.loads((shipped / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 2 and cfg["hidden_size"] == 64
    assert cfg["model_type"] == cls


@pytest.mark.slow
def test_the_two_tiny_families_differ_in_architecture_and_tokenizer():
    from coevo_code.generation.tiny import tiny_tokenizer
    qwen, llama = tiny_tokenizer("tiny"), tiny_tokenizer("tiny-llama")
    text = "def add(a, b):\n    return a + b\n"
    assert qwen.encode(text) != llama.encode(text)
    assert len(qwen) != len(llama)
    msgs = [{"role": "user", "content": "hi"}]
    assert "<|im_start|>" in qwen.apply_chat_template(msgs, tokenize=False)
    assert "<|start_header_id|>" in llama.apply_chat_template(msgs, tokenize=False)


def test_reward_names_a_problem_whose_batch_lacks_a_role():
    pytest.importorskip("trl")
    from coevo_code.training.reward import CoevoReward
    from coevo_code.training.step import CoevoStep
    r = CoevoReward(CoevoStep({"train": [STDIO]}, RewardOptions()))
    with pytest.raises(RuntimeError, match="problem double: .* no test rows"):
        r(completions=[GOOD, GOOD], role=["code", "code"], task_index=[0, 0],
          split=["train", "train"])
    with pytest.raises(ValueError, match="role and task_index"):
        r(completions=[GOOD])


def test_reward_call_without_trl_scores_a_plain_batch():
    """The callable as TRL calls it (one process): rewards in row order, metrics kept."""
    pytest.importorskip("trl")
    from coevo_code.training.reward import CoevoReward
    from coevo_code.training.step import CoevoStep
    step = CoevoStep({"train": [STDIO]}, RewardOptions(), executor_options={"slots": 1})
    r = CoevoReward(step)
    try:
        logged = {}
        out = r(completions=[[{"role": "assistant", "content": c}] for c in
                             (GOOD, "no code", _t("3\n", "6\n"), _t("2\n", "5\n"))],
                role=["code", "code", "test", "test"], task_index=[0] * 4,
                split=["train"] * 4, log_metric=lambda k, v: logged.__setitem__(k, v))
    finally:
        step.close()
    # the only solution outside C is no program: nothing to catch, so the accurate test (3 -> 6)
    # earns 0 and the inaccurate one (2 -> 5, it fails the correct solution) -1
    assert out == [1.0, 0.0, 0.0, -1.0]
    assert step.last.metrics["code_acc"] == 0.5 and logged["coevo/code_acc"] == 0.5
    assert step.last.no_signal == [False] * 4


def _lazy_surrogate_task(tmp_path):
    """A CodeContests-schema row whose private test holds a lone surrogate: its tests are
    decoded only when used, so it loads, and the executor refuses its job."""
    row = {"name": "surrogate", "description": "Print the number read.",
           "public_tests": {"input": ["1\n"], "output": ["1\n"]},
           "private_tests": {"input": ["2\ud800\n", "3\n"], "output": ["2\n", "3\n"]}}
    path = tmp_path / "cc.jsonl"
    path.write_text(json.dumps(row) + "\n")
    [task] = load_tasks("codecontests", path)
    return task


def test_a_refused_job_is_a_counted_skip_and_the_step_goes_on(tmp_path, caplog):
    """Issue 51: a problem whose job the executor answers with an error ended the whole batch
    (RuntimeError: the executor gave no matrix). Its rows now get no reward, the step counts it
    (problems_refused) and names it once, and every other problem of the batch is scored."""
    pytest.importorskip("trl")
    from coevo_code.training.step import CoevoStep
    sur = _lazy_surrogate_task(tmp_path)
    echo = "```python\nprint(input())\n```"
    rows = [(0, "code", GOOD, 5), (0, "code", WRONG, 5), (0, "test", _t("3\n", "6\n"), 7),
            (0, "test", _t("2\n", "5\n"), 7),
            (1, "code", echo, 5), (1, "code", WRONG, 5), (1, "test", _t("7\n", "7\n"), 7),
            (1, "test", _t("8\n", "9\n"), 7)]
    step = CoevoStep({"train": [STDIO, sur]}, RewardOptions(), executor_options={"slots": 1})
    try:
        with caplog.at_level("WARNING", logger="coevo_code.training.step"):
            out = step.run(rows, "train")
            again = step.run(rows, "train")
    finally:
        step.close()
    assert out.rewards[:4] == [1.0, 0.5, 1.0, 0.0]  # the other problem, scored as ever
    assert out.rewards[4:] == [None] * 4 and out.no_signal[4:] == [True] * 4
    assert out.metrics["problems"] == 2 and out.metrics["problems_refused"] == 1
    assert again.metrics["problems_refused"] == 1 and again.rewards == out.rewards
    named = [r.message for r in caplog.records if "surrogate" in r.message]
    assert len(named) == 1 and "the executor refused the job of problem surrogate" in named[0]
    assert "\n" not in named[0]


def test_a_generated_test_no_program_can_read_is_an_invalid_test_not_a_refused_job():
    """A tester's stdio test holding a lone surrogate (a model's JSON "\\ud800") would make the
    executor refuse the problem's whole job; it is an invalid test instead (ok=False, -1), and
    the job runs the rest."""
    b = prepare(STDIO, [GOOD], [_t("3\n", "6\n"), _t("3\ud800\n", "6\n"), _t("1\n", "\udfff")],
                RewardOptions())
    assert [x.ok for x in b.tests] == [True, False, False]
    assert len(b.job["tests"]) == 2 + 1
    from coevo_code.execution.jobs import parse_job
    parse_job(b.job)  # the executor takes it


def test_evaluation_leaves_a_refused_problem_out_and_scores_the_rest(tmp_path, executor):
    from coevo_code.evaluation.harness import judge, summarize
    sur = _lazy_surrogate_task(tmp_path)
    gens = {(STDIO.id, "code"): [GOOD, WRONG], (STDIO.id, "test"): [_t("3\n", "6\n")],
            (sur.id, "code"): ["```python\nprint(input())\n```"], (sur.id, "test"): []}
    refused: list = []
    problems = judge([STDIO, sur], gens, 2, 1, executor, refused=refused)
    assert [p.task_id for p in problems] == [STDIO.id]
    assert refused == [{"task_id": "surrogate", "error": refused[0]["error"]}]
    assert refused[0]["error"].startswith("the executor refused the job of problem surrogate: ")
    assert summarize(problems, [(2, 1)], ["cure"], bootstrap=0)["metrics"]["pass@1"] == 0.5


def test_the_step_passes_named_rows_and_an_explicit_shared_state():
    """Rows are named (plain tuples are taken and named on entry); scoring a list of rows gives a
    ScoredRows whose phases are times only, and label-free, the state the exchange settled
    travels beside them (SharedState), not inside the phase times."""
    pytest.importorskip("trl")
    from coevo_code.training.step import CoevoStep, Lockstep, Row, ScoredRows, SharedState

    class Alone:  # an exchange of one agent that says: stop
        agents = ["a"]

        def swap(self, key, payload):
            return [dict(payload, stop=True, curriculum={"0": 0.25})]

    rows = [(0, "code", GOOD, 5), (0, "code", "no code", 2), (0, "test", _t("3\n", "6\n"), 7),
            (0, "test", _t("2\n", "5\n"), 7)]
    gold = CoevoStep({"train": [STDIO]}, RewardOptions(), executor_options={"slots": 1})
    free = CoevoStep({"train": [STDIO]}, RewardOptions(label_source="self_majority"),
                     executor_options={"slots": 1}, exchange=Alone(), n_agents=1)
    try:
        named = [Row(*r) for r in rows]
        assert named[2].role == "test" and named[2].length == 7 and named[2] == rows[2]
        got = gold.score_rows(named, "train")
        assert isinstance(got, ScoredRows) and got.shared is None
        assert got.rewards == [1.0, 0.0, 0.0, -1.0]  # the one wrong row is no program
        assert set(got.phases) == {"execution", "rewards"}
        out = gold.run(rows, "train")  # plain tuples still read
        assert out.rewards == got.rewards and set(out.phases) == {"execution", "rewards"}
        lf = free.score_rows(named, "train")
        assert set(lf.phases) == {"execution", "rewards", "exchange"}
        assert lf.shared == SharedState({"0": 0.25}, True)
        assert free.lockstep.stop_all  # the exchange's stop reached this agent
    finally:
        gold.close()
        free.close()
    other = Lockstep()  # another process adopts what the main one settled; the main keeps its own
    other.adopt(SharedState({"3": 0.5}, True), main=False)
    assert other.curriculum.estimates == {3: 0.5} and other.stop_all
    main = Lockstep()
    main.curriculum.estimates = {1: 0.1}
    main.adopt(SharedState({"3": 0.5}, False), main=True)
    assert main.curriculum.estimates == {1: 0.1} and not main.stop_all


@pytest.mark.parametrize("source, says", [("gold", "arXiv:2506.03136"), ("partner", "partner"),
                                          ("ring", "ring"), ("self_majority", "2505.21444"),
                                          ("frozen", "frozen labeller")])
def test_model_card_names_model_method_data_and_figures(source, says):
    from coevo_code.training.modelcard import render
    card = render(name="run", base_model="Qwen/Qwen2.5-7B-Instruct", label_source=source,
                  data="world, split train (2000 problems)", step=60,
                  eval_data="world, split heldout (50 problems)",
                  last_step={"step": 60, "code_acc": 0.5, "ut_acc": None},
                  first_eval={"step": 0, "code_acc": 0.25}, last_eval={"step": 60, "code_acc": 0.75},
                  agent="qwen" if source in ("partner", "ring") else None, weights="runs/x/final")
    assert card.startswith("---\nbase_model: Qwen/Qwen2.5-7B-Instruct\n")
    assert says in card and "60 optimiser steps" in card
    assert "world, split train (2000 problems)" in card and "split heldout" in card
    assert "| code_acc |" in card and "| 0.500 |" in card and "ut_acc" not in card.split("## Use")[0]
    assert "| 0.250 |" in card and "| 0.750 |" in card  # before training and the last evaluation
    assert 'from_pretrained("runs/x/final")' in card
    assert ("(agent qwen)" in card) == (source in ("partner", "ring"))
    assert "no gold test" in card or source == "gold"


def test_model_card_without_figures_and_bad_source():
    from coevo_code.training.modelcard import render
    card = render(name="r", base_model="tiny", label_source="gold", data="d", step=0)
    assert "(none recorded)" in card and "Held-out" not in card
    with pytest.raises(ValueError, match="label_source"):
        render(name="r", base_model="tiny", label_source="votes", data="d", step=0)


def test_config_declares_reward_options_and_lockstep_fields_once():
    """RewardOptions is read from the config by field name (same defaults), and the fields a
    pair keeps in lockstep come from the config's field metadata plus TRL's own."""
    import dataclasses
    pytest.importorskip("trl")
    from coevo_code.training.config import CoevoConfig, lockstep_fields
    from coevo_code.training.run import reward_options
    config_fields = {f.name: f for f in dataclasses.fields(CoevoConfig)}
    for f in dataclasses.fields(RewardOptions):
        assert f.name in config_fields, f.name
        assert config_fields[f.name].default == f.default, f.name
    cfg = CoevoConfig(output_dir="/tmp/x", label_threshold=0.7, bon_n=2, post_stage=True,
                      label_source="self_majority", label_judge="answers", use_cpu=True,
                      bf16=False, problems_per_generation=1)
    opts = reward_options(cfg)
    assert (opts.label_threshold, opts.bon_n, opts.post_stage) == (0.7, 2, True)
    assert opts.label_judge == "answers"
    for judge, why in (("votes", "--label_judge must be one of tests, answers"),
                       ("answers", "--label_judge answers is for label-free sources")):
        with pytest.raises(ValueError, match=why):
            CoevoConfig(output_dir="/tmp/x", label_judge=judge, use_cpu=True, bf16=False,
                        problems_per_generation=1)
    lock = lockstep_fields()
    assert len(lock) == len(set(lock)) and set(lock) <= set(config_fields)
    for name in ("seed", "tasks", "num_generations", "problems_per_generation", "max_steps",
                 "label_source", "label_judge", "curriculum_window", "agent_names",
                 "eval_tasks_limit"):
        assert name in lock, name
    for name in ("learning_rate", "per_device_train_batch_size", "model_init_kwargs"):
        assert name not in lock, name  # each agent's own


def test_old_name_problems_per_step_still_works_with_a_warning():
    pytest.importorskip("trl")
    from coevo_code.training.config import CoevoConfig
    with pytest.warns(FutureWarning, match="problems_per_generation"):
        cfg = CoevoConfig(output_dir="/tmp/x", problems_per_step=3, num_generations=4,
                          use_cpu=True, bf16=False)
    assert cfg.problems_per_generation == 3 and cfg.generation_batch_size == 24
    with pytest.raises(ValueError, match="old name"):
        CoevoConfig(output_dir="/tmp/x", problems_per_step=3, problems_per_generation=2,
                    use_cpu=True, bf16=False)
