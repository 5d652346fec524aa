"""Real benchmark data from ../shared/data: every reference solution passes its own tests."""

from __future__ import annotations

import gzip
import json

import pytest

from coevo_code.tasks.loaders import _CALL
from conftest import SHARED_DATA, need_data

HUMANEVAL = SHARED_DATA / "humaneval" / "HumanEval.jsonl.gz"
MBPP = SHARED_DATA / "mbpp" / "mbpp.jsonl"


@pytest.fixture(scope="module")
def real_executor():
    from coevo_code.execution import Executor
    with Executor() as ex:
        yield ex


def test_all_164_humaneval_canonical_solutions_pass(real_executor):
    need_data(HUMANEVAL)
    with gzip.open(HUMANEVAL, "rt") as f:
        tasks = [json.loads(line) for line in f]
    assert len(tasks) == 164
    jobs = [{"id": t["task_id"], "kind": "functional", "entry_point": t["entry_point"],
             "programs": [t["prompt"] + t["canonical_solution"]],
             "tests": [{"code": t["test"] + f"\ncheck({t['entry_point']})\n"}],
             "time_limit_s": 5} for t in tasks]
    results = real_executor.run(jobs)
    failed = [r["id"] for r in results if r["passed"] != [[True]]]
    assert not failed, failed
    # and a wrong solution fails: the checks bite
    t = tasks[0]
    bad = real_executor.run([{**jobs[0], "programs": [t["prompt"] + "    return None\n"]}])[0]
    assert bad["outcomes"] == [["wrong_answer"]]


@pytest.mark.slow
def test_all_974_mbpp_reference_solutions_pass(real_executor):
    need_data(MBPP)
    with open(MBPP) as f:
        tasks = [json.loads(line) for line in f]
    assert len(tasks) == 974
    # task 123 takes about 3 s: a limit generous enough for the slowest reference
    # the entry point as the MBPP loader reads it off the first test (task 126's is ``sum``: a
    # program's function may shadow a builtin in the tests' namespace only as the entry point)
    entry = {t["task_id"]: _CALL.search(t["test_list"][0]).group(1) for t in tasks}
    jobs = [{"id": t["task_id"], "kind": "functional", "programs": [t["code"]],
             "setup": t.get("test_setup_code") or "", "entry_point": entry[t["task_id"]],
             "tests": [{"code": c} for c in t["test_list"] + t["challenge_test_list"]],
             "time_limit_s": 10} for t in tasks]
    results = real_executor.run(jobs)
    failed = {r["id"]: r["outcomes"] for r in results
              if not all(all(row) for row in r["passed"])}
    assert not failed, failed
    assert sum(len(r["passed"][0]) for r in results) == sum(len(j["tests"]) for j in jobs)
