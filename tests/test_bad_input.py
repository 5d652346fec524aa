"""Bad input gets a clear error for its own record and loses nothing else."""

from __future__ import annotations

import pytest

from coevo_code.execution import JobError, parse_job

GOOD = {"id": "g", "programs": ["print(input())"], "tests": [{"input": "x\n", "output": "x\n"}]}


@pytest.mark.parametrize("job, field", [
    ("not a dict", "JSON object"),
    ({"programs": "print(1)"}, "'programs'"),
    ({"programs": [1]}, "programs[0]"),
    ({"programs": [], "tests": [{"input": "1"}]}, "tests[0]"),
    ({"programs": [], "tests": "x"}, "'tests'"),
    ({"programs": [], "kind": "sql"}, "'kind'"),
    ({"programs": [], "time_limit_s": -1}, "'time_limit_s'"),
    ({"programs": [], "time_limit_s": "1"}, "'time_limit_s'"),
    ({"programs": [], "memory_limit_mb": 0}, "'memory_limit_mb'"),
    ({"programs": [], "output_limit_mb": float("nan")}, "'output_limit_mb'"),
    ({"programs": [], "return_outputs": "yes"}, "'return_outputs'"),
    ({"programs": [], "kind": "functional", "tests": [{"input": "1", "output": "1"}]}, "tests[0]"),
    ({"programs": [], "kind": "functional", "checker": "def check(*a): return 1"}, "'checker'"),
    ({"programs": [], "tests": [{"input": "\ud800", "output": ""}]}, "tests[0].input"),
    ({"programs": [], "tests": [{"input": "", "output": "a\udfffb"}]}, "tests[0].output"),
    ({"programs": [], "time_limit_s": 10 ** 400}, "'time_limit_s'"),
    ({"programs": [], "memory_limit_mb": 10 ** 30}, "'memory_limit_mb'"),
    ({"programs": [], "wall_limit_s": -10 ** 400}, "'wall_limit_s'"),
])
def test_job_errors_name_the_field(job, field):
    with pytest.raises(JobError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_job(job)


def test_malformed_job_yields_error_for_that_job_only(executor):
    results = executor.run([GOOD, {"id": "bad", "programs": "oops"}, GOOD])
    assert results[0]["passed"] == [[True]] and results[2]["passed"] == [[True]]
    assert results[1]["id"] == "bad" and "programs" in results[1]["error"]
    assert "passed" not in results[1]


def test_empty_lists(executor):
    res = executor.run([{"programs": ["print(1)", "print(2)"], "tests": []},
                        {"programs": [], "tests": [{"input": "", "output": ""}]}])
    assert res[0]["passed"] == [[], []] and res[0]["outcomes"] == [[], []]
    assert res[1]["passed"] == []


def test_empty_program(executor):
    res = executor.run([{"programs": [""], "tests": [{"input": "", "output": "1"},
                                                     {"input": "", "output": ""}]},
                        {"kind": "functional", "programs": [""],
                         "tests": [{"code": "assert f(1) == 1"}]}])
    assert res[0]["outcomes"] == [["wrong_answer", "ok"]]
    assert res[1]["outcomes"] == [["runtime_error"]]


def test_non_utf8_output(executor):
    prog = "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe caf\\xc3\\xa9\\n')"
    res = executor.run([{"programs": [prog], "tests": [{"input": "", "output": "café"}],
                         "return_outputs": True}])[0]
    assert res["outcomes"] == [["wrong_answer"]]
    # kept apart from a real U+FFFD (doubled), as the stdio rule keeps them, and JSON-safe
    assert res["outputs"][0][0] == "\ufffdff\ufffdfe café\n"


def test_huge_input(executor):
    data = ("7 " * 5_000_000) + "\n"  # 10 MB
    prog = "import sys\nprint(sum(map(int, sys.stdin.buffer.read().split())))"
    # ten CPU seconds: this is about a 10 MB input getting through, not about speed (summing
    # five million integers took more than the default second on a loaded CI machine)
    res = executor.run([{"programs": [prog, "print(len(input()))"], "time_limit_s": 10,
                         "tests": [{"input": data, "output": str(7 * 5_000_000)}]}])[0]
    assert res["outcomes"] == [["ok"], ["wrong_answer"]]


def test_unicode_input_and_expected(executor):
    res = executor.run([{"programs": ["print(input()[::-1])"],
                         "tests": [{"input": "héllo wörld ✓\n", "output": "✓ dlröw olléh"}]}])[0]
    assert res["outcomes"] == [["ok"]]
