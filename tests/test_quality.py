"""``coevo tasks quality``: a set of tests against a dataset's correct and incorrect programs. The
figures on hand-made pass matrices (their edge cases: no wrong program, no correct one, no test,
programs that did not compile, cells the sandbox lost), the tests file's formats and its
one-line errors, and a run through the real sandbox on a small row of Python and C++ programs
whose every figure is known."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from coevo_code.cli import main
from coevo_code.metrics import TestCounts
from coevo_code.roles import TEST
from coevo_code.tasks import LoaderError, TestCase
from coevo_code.tasks.codecontests import load_codecontests
from coevo_code.tasks.quality import (Quality, measure_quality, read_tests_file, share_text,
                                      tester_quality)
from conftest import executor_fixture

executor = executor_fixture(docker=False)

B = np.array


# ---- the pure figures ----------------------------------------------------------------------------
# 2 correct programs, 3 wrong; 4 tests: 0 right, 1 right, 2 wrong (the second correct program
# fails it), 3 right. Wrong program 4 passes everything.
PASSED = B([[1, 1, 1, 1],
            [1, 1, 0, 1],
            [0, 1, 1, 1],
            [1, 0, 0, 1],
            [1, 1, 1, 1]], bool)
CORRECT = B([1, 1, 0, 0, 0], bool)


def test_the_figures_of_one_matrix():
    q = tester_quality(PASSED, CORRECT)
    assert (q.caught, q.wrong, q.rejected, q.correct, q.accurate, q.tests) == (2, 3, 1, 2, 3, 4)
    # p01: wrong programs x accurate tests (0, 1, 3): 2 + 2 + 3 passes of 9; p00: test 2, 2 of 3
    assert q.pairs == TestCounts(4, 3, 9, 7, 3, 2)
    assert (q.p01, q.p00) == (7 / 9, 2 / 3)
    assert q.left_out() == ""
    d = q.to_dict()
    assert (d["caught_share"], d["p01_pairs"], d["p00_pairs"]) == (0.666667, 9, 3)


def test_no_wrong_program_no_correct_one_no_test():
    """No incorrect solution: nothing to catch (undefined, n=0), the tests are still judged. No
    correct one: no test is judged (accuracy, p01, p00 undefined), wrong programs are still
    caught or not. No test: no program is failed, so no wrong one is caught."""
    q = tester_quality(PASSED[:2], CORRECT[:2])
    assert (q.wrong, q.correct, q.rejected, q.tests, q.accurate) == (0, 2, 1, 4, 3)
    assert math.isnan(q.caught_share) and share_text(q.caught, q.wrong) == "- (n=0)"
    assert q.pairs.wrong_x_accurate == q.pairs.wrong_x_inaccurate == 0 and math.isnan(q.p01)
    assert q.to_dict()["caught_share"] is None
    q = tester_quality(PASSED[2:], CORRECT[2:])
    assert (q.caught, q.wrong, q.correct, q.tests) == (2, 3, 0, 0)
    assert math.isnan(q.accuracy) and math.isnan(q.p00) and q.undecided_tests == 0
    q = tester_quality(np.zeros((5, 0), bool), CORRECT)
    assert (q.caught, q.wrong, q.rejected, q.correct, q.tests) == (0, 3, 0, 2, 0)
    q = tester_quality(np.zeros((0, 3), bool), np.zeros(0, bool))
    assert q == Quality()


def test_a_program_that_did_not_compile_is_neither_caught_nor_failed():
    """A correct program its compiler refused fails every test but makes no test inaccurate; a
    wrong one is not caught: both are counted apart."""
    passed = np.vstack([PASSED, np.zeros((2, 4), bool)])
    correct = np.append(CORRECT, [True, False])
    compiled = B([1, 1, 1, 1, 1, 0, 0], bool)
    q = tester_quality(passed, correct, compiled=compiled)
    assert q == replace(tester_quality(PASSED, CORRECT), not_compiled_correct=1,
                        not_compiled_wrong=1)
    assert q.left_out() == "2 not compiled (1 correct, 1 wrong)"


def test_a_lost_cell_decides_nothing():
    """Lost cells (sandbox_error): a wrong program a decided cell fails is caught all the same; one
    whose only failure could be the lost cell is undecided, not caught; a correct program likewise
    (undecided, not failed); a test whose only unknown is a correct program's lost cell is
    undecided; p01 / p00 leave out every test with a lost cell."""
    lost = np.zeros_like(PASSED)
    lost[2, 0] = lost[2, 2] = True   # wrong 2: test 0 (which failed it) lost, test 2 lost
    lost[4, 1] = True                # wrong 4 (passes all): a lost cell -> undecided
    lost[0, 3] = True                # correct 0: test 3 lost -> test 3 undecided
    passed = PASSED.copy()
    passed[lost] = False             # a lost cell reads as not passed
    q = tester_quality(passed, CORRECT, lost=lost)
    # wrong 2: no decided failing cell left -> undecided; wrong 3 caught; wrong 4 undecided
    assert (q.caught, q.wrong, q.undecided_wrong) == (1, 1, 2)
    assert (q.rejected, q.correct, q.undecided_correct) == (1, 1, 1)  # correct 0 undecided
    assert (q.accurate, q.tests, q.undecided_tests) == (2, 3, 1)
    # tests 0, 1, 2, 3 all have a lost cell: no pair is left for p01 / p00
    assert q.pairs == TestCounts() and q.lost_cells == 4
    assert q.left_out() == ("3 programs undecided (1 correct, 2 wrong), 1 tests undecided, "
                            "4 cells lost (sandbox_error)")
    lost = np.zeros_like(PASSED)
    lost[3, 1] = True  # wrong 3 fails tests 1 and 2: caught by test 2 whatever test 1 says
    q = tester_quality(PASSED & ~lost, CORRECT, lost=lost)
    assert (q.caught, q.wrong, q.undecided_wrong, q.tests) == (2, 3, 0, 4)
    assert q.pairs == TestCounts(3, 2, 6, 5, 3, 2)  # test 1 out of the pairs


def test_pooling_adds_counts_and_bad_shapes_are_refused():
    a, b = tester_quality(PASSED, CORRECT), tester_quality(PASSED[:2], CORRECT[:2])
    s = a + b
    assert (s.caught, s.wrong, s.correct, s.tests, s.pairs) == (2, 3, 4, 8, a.pairs + b.pairs)
    with pytest.raises(ValueError, match="lost has shape"):
        tester_quality(PASSED, CORRECT, lost=np.zeros((5, 3), bool))
    with pytest.raises(ValueError, match="correct has shape"):
        tester_quality(PASSED, CORRECT[:3])


# ---- a small row through the sandbox --------------------------------------------------------------
DOUBLE = "print(2 * int(input()))"
DOUBLE_TOO = "n = int(input())\nprint(n + n)"
PLUS_TWO = "print(int(input()) + 2)"                      # right at n = 2 only
SMALL = "n = int(input())\nprint(2 * n if n < 50 else 0)"  # wrong from 50
SYNTAX = "print(2 *"
CPP_DOUBLE = "#include <cstdio>\nint main(){int n; scanf(\"%d\",&n); printf(\"%d\\n\",2*n);}"
CPP_BROKEN = "int main( {"
CPP_WRONG = "#include <cstdio>\nint main(){int n; scanf(\"%d\",&n); printf(\"%d\\n\",n+n+(n>4));}"
# 0 catches nothing; 1 and 2 catch; 3 is wrong (2 * 3 is 6), and PLUS_TWO agrees with it
TESTS = [("2\n", "4"), ("7\n", "14"), ("60\n", "120"), ("3\n", "5")]


def row(name, solutions, incorrect, **over):
    r = {"name": name, "description": "Print 2n (0 <= n <= 100).",
         "public_tests": {"input": ["1\n"], "output": ["2\n"]},
         "private_tests": {"input": [], "output": []},
         "generated_tests": {"input": ["9\n", "5\n"], "output": ["18\n", "11\n"]},
         "solutions": {"language": [lang for lang, _ in solutions],
                       "solution": [s for _, s in solutions]},
         "incorrect_solutions": {"language": [lang for lang, _ in incorrect],
                                 "solution": [s for _, s in incorrect]},
         "time_limit": {"seconds": 1, "nanos": 0}, "memory_limit_bytes": 256 << 20}
    r.update(over)
    return r


@pytest.fixture
def files(tmp_path):
    src = tmp_path / "cc.jsonl"
    rows = [row("2_A. Double", [(3, DOUBLE), (3, DOUBLE_TOO), (2, CPP_DOUBLE), (2, CPP_BROKEN)],
                [(3, PLUS_TWO), (3, SMALL), (3, SYNTAX), (2, CPP_WRONG)]),
            row("3_B. Double again", [(3, DOUBLE)], []),
            row("4_C. Not tested", [(3, DOUBLE)], [(3, PLUS_TWO)])]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tests = tmp_path / "tests.jsonl"
    tests.write_text("".join(json.dumps({"problem": p, "input": i, "output": o}) + "\n"
                             for p in ("2_A", "3_B. Double again") for i, o in TESTS))
    return src, tests


def test_the_tests_file_and_its_one_line_errors(files, tmp_path):
    """Records name a problem by its id or its short name; coevo eval's generations.jsonl is read
    too (tester completions parsed, code lines passed over); a bad record is an error naming it."""
    src, path = files
    ts = load_codecontests(src)
    tests, labels, unparsed = read_tests_file(path, ts.tasks)
    assert sorted(tests) == ["2_A. Double", "3_B. Double again"]
    assert [(t.input, t.output) for t in tests["2_A. Double"]] == TESTS
    assert labels["3_B. Double again"][0] == "line 5" and unparsed["2_A. Double"] == 0
    gen = tmp_path / "generations.jsonl"
    good = "**Test Input:**\n```\n7\n```\n**Test Output:**\n```\n14\n```"
    gen.write_text(json.dumps({"task_id": "2_A. Double", "role": TEST,
                               "completions": [good, "no test here"]}) + "\n"
                   + json.dumps({"task_id": "2_A. Double", "role": "code",
                                 "completions": ["print(1)"]}) + "\n")
    tests, labels, unparsed = read_tests_file(gen, ts.tasks)
    assert [(t.input, t.output) for t in tests["2_A. Double"]] == [("7\n", "14")]
    assert (labels["2_A. Double"], unparsed["2_A. Double"]) == (["line 1 completion 0"], 1)
    bad = tmp_path / "bad.jsonl"
    for text, msg in (
            ('{"problem": "9_Z", "input": "1", "output": "2"}',
             "line 2: problem '9_Z' is not among the 3 problems loaded"),
            ('{"problem": "2_A", "input": "1"}', "line 2: 'output' must be a string, got NoneType"),
            ('{"problem": "2_A", "input": "1", "output": 2', "line 2 is not valid JSON"),
            ('["2_A", "1", "2"]', "line 2: a record must be a JSON object, got list"),
            ('{"input": "1", "output": "2"}', "line 2: no 'problem'")):
        bad.write_text('{"problem": "2_A", "input": "1\\n", "output": "2"}\n' + text + "\n")
        with pytest.raises(LoaderError, match="tests file .*" + msg.replace("(", r"\(")) as e:
            read_tests_file(bad, ts.tasks)
        assert "\n" not in str(e.value)


def test_what_is_not_run(files):
    """A problem with no test (a tester that wrote none that parse) or with no program in the
    languages asked for is not run: named with the reason, out of every figure and the table."""
    src, _ = files
    ts = load_codecontests(src, languages="python,cpp")
    rep = measure_quality(ts.tasks[:2], lambda t: [] if t.id.startswith("2_A") else
                          [TestCase("1\n", "2")], None, languages=("cpp",))
    assert [p.skipped for p in rep.per_problem] == ["no tests", "no cpp solution"]
    assert rep.overall == {} and rep.summary() == "tester quality (tests; 0 problems run, 2 not " \
        "run): nothing run"
    assert rep.table().endswith("Not run (no tests): 2_A. Double.\nNot run (no cpp solution): "
                                "3_B. Double again.")


def test_tests_against_real_programs_through_the_sandbox(files, executor):
    """Every figure of a small row, per language and together: test 0 catches nothing, test 3 is
    wrong (every correct program fails it, one wrong program passes it); a Python program with a
    syntax error and a C++ one that does not compile are counted apart; a problem without
    incorrect solutions has nothing to catch (- with n=0)."""
    if not executor.languages().get("cpp", (False,))[0]:
        pytest.skip("no C++ toolchain here")
    src, path = files
    ts = load_codecontests(src, languages="python,cpp")
    tests, labels, _ = read_tests_file(path, ts.tasks)
    rep = measure_quality([t for t in ts if t.id in tests], lambda t: tests[t.id], executor,
                          languages=("python", "cpp"), labels_of=lambda t: labels[t.id])
    a, b = rep.per_problem
    py, cpp, both = a.quality["python"], a.quality["cpp"], a.quality["all"]
    assert (py.caught, py.wrong, py.rejected, py.correct, py.accurate, py.tests) == \
        (2, 2, 2, 2, 3, 4)
    assert py.pairs == TestCounts(4, 3, 6, 3, 2, 1)  # PLUS_TWO passes 0 and 3, SMALL 0 and 1
    assert (py.not_compiled_wrong, py.not_compiled_correct) == (1, 0)
    assert (cpp.caught, cpp.wrong, cpp.rejected, cpp.correct, cpp.accurate, cpp.tests) == \
        (1, 1, 1, 1, 3, 4)
    assert cpp.pairs == TestCounts(4, 3, 3, 1, 1, 0) and cpp.not_compiled_correct == 1
    assert (both.caught, both.wrong, both.rejected, both.correct) == (3, 3, 3, 3)
    assert both.pairs == TestCounts(4, 3, 9, 4, 3, 1)
    assert a.detail["python"]["uncaught_wrong"] == [] and \
        a.detail["python"]["not_compiled"] == ["python incorrect 2"]
    assert a.detail["cpp"]["failed_correct"] == {"cpp 0": {"wrong_answer": 1}}
    assert a.detail["all"] == {"inaccurate_tests": ["line 4"], "catch_nothing": ["line 1"]}
    one = b.quality["python"]
    assert (one.wrong, one.correct, one.rejected, one.accurate, one.tests) == (0, 1, 1, 3, 4)
    assert set(b.quality) == {"python", "all"}
    total = rep.overall
    assert (total["all"].caught, total["all"].wrong, total["all"].rejected,
            total["all"].correct, total["all"].accurate, total["all"].tests) == (3, 3, 4, 4, 6, 8)
    table = rep.table()
    assert ("| 2_A. Double | python | 4 | 1.000 (2/2) | 1.000 (2/2) | 0.750 (3/4) | "
            "0.500 (3/6) | 0.500 (1/2) | 1 not compiled (0 correct, 1 wrong) |") in table
    assert "| 3_B. Double again | python | 4 | - (n=0) | 1.000 (1/1) | 0.750 (3/4) | - (n=0) |" \
        in table
    assert "| all 2 problems | all | 8 | 1.000 (3/3) | 1.000 (4/4) | 0.750 (6/8) |" in table
    assert rep.summary().startswith("tester quality (tests; 2 problems run): wrong programs "
                                    "caught 1.000 (3/3), correct programs wrongly failed 1.000 "
                                    "(4/4), accurate tests 0.750 (6/8)")


def test_the_command(files, tmp_path, capsys):
    """`coevo tasks quality`: the dataset's own tests by kind or a tests file, the table, the
    report, a seeded sample; a bad tests file is one line naming the record, before anything
    runs."""
    src, path = files
    out = tmp_path / "r.json"
    base = ["tasks", "quality", "codecontests", "--path", str(src), "--languages", "python", "-q"]
    assert main(base + ["--tests_file", str(path), "--markdown", "--report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| all 2 problems | python | 8 | 1.000 (2/2) | 1.000 (3/3) | 0.750 (6/8) |" in text
    r = json.loads(out.read_text())
    assert r["overall"]["python"]["caught"] == 2 and r["tests"] == "tests from tests.jsonl"
    assert [p["id"] for p in r["problems"]] == ["2_A. Double", "3_B. Double again"]
    # the dataset's generated tests (9 -> 18 right, 5 -> 11 wrong), one solution of each kind
    assert main(base + ["--tests", "generated", "--references", "1", "-v"]) == 0
    text = capsys.readouterr().out
    assert "3_B. Double again: 2 tests; python: caught 0/0, wrongly failed 1/1, accurate 1/2" \
        in text
    assert "tester quality (the dataset's generated tests; 3 problems run)" in text
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "2_A", "input": "1\\n", "output": "2"}\n{"problem": "1_Q"}\n')
    assert main(base + ["--tests_file", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"coevo: tests file {bad} line 2: problem '1_Q' is not among the 3 problems "
                   "loaded")
    assert main(base + ["--tests_file", str(bad), "--tests", "public"]) == 2
    assert "give --tests (the dataset's) or --tests_file, not both" in capsys.readouterr().err
    assert main(base + ["--tests", "hidden"]) == 2
    assert "coevo: --tests: unknown kind 'hidden'; choose from public, private, generated" in \
        capsys.readouterr().err
