"""The ``coevo`` command: execute (files and pipes), doctor, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def coevo(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "coevo_code.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=300)


JOBS = [
    {"id": "p1", "kind": "stdio", "programs": ["print(int(input())*2)"],
     "tests": [{"input": "2\n", "output": "4\n"}], "time_limit_s": 1.0, "memory_limit_mb": 1024},
    {"id": "p2", "kind": "functional", "entry_point": "add", "setup": "",
     "programs": ["def add(a, b):\n    return a + b"], "tests": [{"code": "assert add(1, 2) == 3"}]},
]


def test_execute_file_to_file_with_a_bad_line(tmp_path):
    src = tmp_path / "jobs.jsonl"
    lines = [json.dumps(JOBS[0]), "{not json", "", json.dumps({"id": "x", "programs": 3}),
             json.dumps(JOBS[1])]
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out" / "m.jsonl"
    r = coevo("execute", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    res = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x.get("id") for x in res] == ["p1", None, "x", "p2"]
    assert res[0] == {"id": "p1", "passed": [[True]], "outcomes": [["ok"]],
                      "seconds": res[0]["seconds"]}
    assert "line 2" in res[1]["error"] and "JSON" in res[1]["error"]
    assert "line 4" in res[2]["error"] and "programs" in res[2]["error"]
    assert res[3]["passed"] == [[True]]
    assert "cells/s" in r.stderr and "start-up" in r.stderr


def test_execute_gives_a_json_line_that_is_not_an_object_an_error_and_runs_the_rest(tmp_path):
    src = tmp_path / "jobs.jsonl"
    src.write_text("\n".join([json.dumps(JOBS[0]), "[1, 2]", '"a string"', "42", "null",
                              json.dumps(JOBS[1])]) + "\n")
    out = tmp_path / "m.jsonl"
    r = coevo("execute", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    res = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(res) == 6 and res[0]["passed"] == [[True]] and res[5]["passed"] == [[True]]
    for k, what in ((1, "list"), (2, "str"), (3, "int"), (4, "NoneType")):
        assert f"line {k + 1}" in res[k]["error"] and "JSON object" in res[k]["error"], res[k]
        assert what in res[k]["error"]


def test_execute_gives_lines_it_cannot_run_their_own_error_and_writes_every_result(tmp_path):
    """A lone surrogate in a stdio test, huge numbers in limit fields, a number JSON cannot hold
    and nesting too deep to read: each line gets its own ``error``, the others run, and the
    results file has one line per job."""
    src = tmp_path / "jobs.jsonl"
    bad = [json.dumps(dict(JOBS[0], id="s", tests=[{"input": "\ud800\n", "output": "4\n"}])),
           json.dumps(dict(JOBS[0], id="t", time_limit_s=10 ** 400)),
           json.dumps(dict(JOBS[0], id="m")).replace('"memory_limit_mb": 1024',
                                                    '"memory_limit_mb": ' + "9" * 5000),
           '{"id": "d", "programs": ' + "[" * 100000 + "]" * 100000 + "}"]
    src.write_text("\n".join([json.dumps(JOBS[0])] + bad + [json.dumps(JOBS[1])]) + "\n")
    out = tmp_path / "m.jsonl"
    r = coevo("execute", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    res = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(res) == 6 and res[0]["passed"] == [[True]] and res[5]["passed"] == [[True]]
    assert "line 2" in res[1]["error"] and "tests[0].input" in res[1]["error"]
    assert "line 3" in res[2]["error"] and "'time_limit_s'" in res[2]["error"]
    for k in (3, 4):
        assert f"line {k + 1}" in res[k]["error"] and "JSON" in res[k]["error"], res[k]
    assert all("passed" not in x for x in res[1:5])


def test_execute_stdin_to_stdout():
    r = coevo("execute", "-", "-o", "-", "-q", stdin="".join(json.dumps(j) + "\n" for j in JOBS))
    assert r.returncode == 0, r.stderr
    res = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["passed"] for x in res] == [[[True]], [[True]]]


@pytest.mark.slow
def test_execute_bundled_example(tmp_path):
    out = tmp_path / "m.jsonl"
    r = coevo("execute", "-o", str(out))
    assert r.returncode == 0, r.stderr
    res = {x["id"]: x for x in map(json.loads, out.read_text().splitlines())}
    assert res["a-plus-b"]["passed"][0] == [True] * 4
    assert res["a-plus-b"]["outcomes"][4] == ["timeout"] * 4
    assert res["hostile"]["passed"] == [[True], [False], [False], [False]]  # rm -rf / failed


@pytest.mark.parametrize("args, msg", [
    (["execute", "/no/such/file.jsonl"], "no such jobs file"),
    (["execute", "--exec_slots", "0"], "--exec_slots must be >= 1"),
    (["execute", "--exec_launcher", "nope"], "invalid choice"),
    (["execute", "--no-such-flag", "1"], "unknown flag --no-such-flag"),
    (["eval", "--k_code", "0", "--benchmark", "x", "-o", "y"], "--k_code must be >= 1"),
    (["rank", "--ranker"], "--ranker needs a value"),
])
def test_errors_are_one_line(args, msg):
    r = coevo(*args)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr  # one line, no usage
    assert msg in r.stderr and r.stderr.startswith("coevo")


def test_an_old_spelling_works_with_a_one_line_warning_naming_the_new_one():
    r = coevo("execute", "--slots", "0")
    assert r.returncode == 2
    warning, error = r.stderr.strip().splitlines()
    assert warning == ("warning: coevo execute: --slots is now --exec_slots (the old spelling "
                       "works until the next release)")
    assert error == "coevo: --exec_slots must be >= 1, got 0"


def test_doctor_reports_layers():
    r = coevo("doctor")
    assert r.returncode == 0, r.stderr
    for layer in ("seccomp", "landlock", "rlimits", "uid"):
        assert layer in r.stdout
    assert "[on ] seccomp" in r.stdout
    assert "[on ] hash seed" in r.stdout and "PYTHONHASHSEED=20241205 in every slot" in r.stdout


def test_a_hash_seed_that_cannot_be_set_is_reported():
    """The judge re-executes itself (``python -s -P -c``) to fix its string-hash seed; where it
    cannot (Python 3.10 has no ``-P``; a judge not started with ``-c``) with_hash_seed says so
    instead of returning as if the seed were in place (the judge's hello carries it to
    ``coevo doctor``)."""
    import os
    import tempfile
    from pathlib import Path
    repo = str(Path(__file__).resolve().parents[1])
    code = (f"import sys\nsys.path.insert(0, {repo!r})\n"
            "from coevo_code.sandbox.server import with_hash_seed\n"
            "print(with_hash_seed(7), hash('abc'))")
    with tempfile.TemporaryDirectory() as d:
        script = Path(d, "judge.py")
        script.write_text(code)
        r = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True,
                           timeout=60)
    assert r.stdout.split()[0] == "False", r.stderr
    r = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                       timeout=60)  # re-executed with the seed
    fresh = subprocess.run([sys.executable, "-c", "print(hash('abc'))"], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONHASHSEED="7"), timeout=60)
    assert r.stdout.split() == ["True", fresh.stdout.strip()], r.stderr
