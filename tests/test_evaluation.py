"""`coevo eval` end to end on CPU (the tiny model through the transformers engine and through an
OpenAI-compatible server on 127.0.0.1), best-of-N against the core, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from coevo_code.evaluation.harness import ProblemResult, parse_bon, summarize
from coevo_code.metrics import (pass_at_k, pooled_best_of_n, pooled_test_counts)
from coevo_code.ranking import codet_select

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def coevo(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "coevo_code.cli", *args], env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def _one_line_error(p, needle):
    assert p.returncode == 2, p.stderr[-2000:]
    lines = [x for x in p.stderr.splitlines() if x.startswith("coevo:")]
    assert len(lines) == 1 and needle in lines[0], p.stderr[-2000:]


# ---- best-of-N and the other metrics on simulated matrices equal the core's ---------------------
def _simulated(seed=0, problems=40, n=8, t=3, m=8):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(problems):
        good = rng.random(n) < rng.random()
        gold = np.where(good[:, None], True, rng.random((n, t)) < 0.4)
        gen = rng.random((n, m)) < np.where(good[:, None], 0.8, 0.35)
        mat = np.concatenate([gold, gen], axis=1)
        out.append(ProblemResult(f"p{i}", mat, t, gold.all(axis=1), True, 0, 0))
    return out


def test_bon_and_metrics_match_the_core_exactly():
    probs = _simulated()
    s = summarize(probs, [(4, 4), (8, 8), (8, 0)], ["cure", "codet", "first"], bootstrap=200)
    m = s["metrics"]
    pairs = [(p.correct, p.generated) for p in probs]
    assert m["bon_4x4/cure"] == pooled_best_of_n(pairs, 4, 4)
    assert m["bon_8x8/cure"] == pooled_best_of_n(pairs, 8, 8)
    assert m["bon_8x8/codet"] == pooled_best_of_n(pairs, 8, 8, select=codet_select)
    assert m["bon_8x8/first"] == np.mean([p.correct[0] for p in probs])
    assert m["pass@1"] == pytest.approx(np.mean([p.correct.mean() for p in probs]))
    assert m["pass@5"] == pytest.approx(np.mean([pass_at_k(8, int(p.correct.sum()), 5)
                                                for p in probs]))
    counts = pooled_test_counts((p.generated, p.correct) for p in probs)
    assert (m["ut_acc"], m["p01"], m["p00"], m["mu"]) == (counts.unit_test_accuracy, counts.p01,
                                                          counts.p00, counts.mu)
    for k, (lo, hi) in s["ci95"].items():
        assert lo <= m[k] + 1e-12 and m[k] <= hi + 1e-12, k
    assert s["ci95"]["pass@1"][1] - s["ci95"]["pass@1"][0] > 0


def test_parse_bon():
    assert parse_bon("4x4, 16x16") == [(4, 4), (16, 16)]
    with pytest.raises(ValueError, match="NxM"):
        parse_bon("4by4")


# ---- end to end on CPU ---------------------------------------------------------------------------
COMMON = ["--benchmark", "bundled", "--limit", "3", "--model", "tiny-random", "--k-code", "2",
          "--k-test", "2", "--bon", "2x2", "--max-tokens", "12", "--bootstrap", "50"]


@pytest.mark.slow
def test_transformers_engine_end_to_end_and_resume(tmp_path):
    out = tmp_path / "e"
    p = coevo("eval", *COMMON, "-o", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())
    assert res["problems"] == 3 and res["engine"] == "transformers"
    assert set(res["metrics"]) >= {"pass@1", "ut_acc", "p01", "p00", "bon_2x2/cure",
                                   "bon_2x2/codet", "bon_2x2/first"}
    assert res["metrics"]["pass@1"] == 0.0  # a random model writes no program
    assert (out / "results.md").read_text().startswith("# bundled")
    lines = (out / "generations.jsonl").read_text().splitlines()
    assert len(lines) == 6 and all(len(json.loads(x)["completions"]) == 2 for x in lines)
    # resumed: nothing generated again, the same results
    before = (out / "generations.jsonl").read_bytes()
    p = coevo("eval", *COMMON, "-o", str(out))
    assert p.returncode == 0
    assert (out / "generations.jsonl").read_bytes() == before
    assert json.loads((out / "results.json").read_text())["metrics"] == res["metrics"]


@pytest.fixture
def server(tmp_path):
    log = tmp_path / "requests.txt"
    proc = subprocess.Popen([sys.executable, str(HERE / "openai_server.py"), "--log", str(log)],
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    yield f"http://127.0.0.1:{port}/v1", log, proc
    proc.kill()
    proc.wait()


@pytest.mark.slow
def test_openai_engine_against_a_local_server(tmp_path, server):
    url, log, _ = server
    out = tmp_path / "o"
    p = coevo("eval", *COMMON, "--engine", "openai", "--base-url", url, "--concurrency", "2",
              "-o", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())
    assert res["engine"] == "openai" and res["problems"] == 3
    served = log.read_text().splitlines()
    assert len(served) == 6 and all(x == "tiny-random 2" for x in served)  # 3 problems x 2 roles, n=2
    gens = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    assert all(len(g["completions"]) == 2 for g in gens)


@pytest.mark.slow
def test_unreachable_endpoint_keeps_what_was_generated(tmp_path, server):
    url, log, proc = server
    out = tmp_path / "u"
    # the code completions come from the live server ...
    p = coevo("eval", *COMMON, "--k-test", "0", "--bon", "2x0", "--engine", "openai",
              "--base-url", url, "-o", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    kept = (out / "generations.jsonl").read_text()
    proc.kill()
    proc.wait()
    t = time.time()
    p = coevo("eval", *COMMON, "--engine", "openai", "--base-url", url, "-o", str(out))
    _one_line_error(p, "cannot reach")
    assert time.time() - t < 120
    assert (out / "generations.jsonl").read_text() == kept  # nothing lost


def test_unknown_benchmark(tmp_path):
    _one_line_error(coevo("eval", "--benchmark", "nosuch", "--model", "tiny", "-o",
                          str(tmp_path / "x")), "nosuch")
    assert not (tmp_path / "x" / "results.json").exists()


def test_sample_for_a_task_that_does_not_exist(tmp_path):
    s = tmp_path / "s.jsonl"
    s.write_text(json.dumps({"task_id": "stdio/sum-two", "solution": "print(3)"}) + "\n"
                 + json.dumps({"task_id": "no/such-task", "solution": "pass"}) + "\n")
    p = coevo("eval", "--benchmark", "bundled", "--samples", str(s), "-o", str(tmp_path / "x"))
    _one_line_error(p, "line 2: task 'no/such-task' is not in bundled")
    assert not (tmp_path / "x" / "results.json").exists()


def test_samples_on_bundled_problems(tmp_path):
    from coevo_code.tasks import load_tasks
    ts = load_tasks("bundled")
    s = tmp_path / "s.jsonl"
    rows = []
    for t in ts:
        rows.append({"task_id": t.id, "solution": t.references[0]})
        rows.append({"task_id": t.id, "solution": "print('no')" if t.kind == "stdio"
                     else f"def {t.entry_point}(*a):\n    return None\n"})
    s.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = coevo("eval", "--benchmark", "bundled", "--samples", str(s), "-o", str(tmp_path / "x"),
              "-q")
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads((tmp_path / "x" / "results.json").read_text())
    assert res["pass@1"] == 0.5 and res["samples"] == 2 * len(ts)
    assert all(v["plus"] == [True, False] for v in res["per_task"].values())


# ---- coevo rank ------------------------------------------------------------------------------
RANK_IN = [
    {"id": "double", "kind": "stdio",
     "solutions": ["print(4)", "print(int(input())*2)", "print(int(input())+2)"],
     "tests": [{"input": "2\n", "output": "4\n"}, {"input": "5\n", "output": "10\n"},
               {"input": "0\n", "output": "0\n"}]},
    {"id": "add", "kind": "functional", "entry_point": "add",
     "solutions": ["def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b"],
     "tests": [{"code": "assert add(1, 2) == 3"}]},
    {"id": "bad", "solutions": []},
]


def test_rank_jsonl_in_and_out(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in RANK_IN))
    p = coevo("rank", str(src), "--ranker", "cure", "-o", str(tmp_path / "out.jsonl"))
    assert p.returncode == 1  # one line could not be ranked; the others were
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["double", "add", "bad"]
    assert rows[0]["choice"] == 1 and rows[0]["passed"] == [1, 3, 1]
    assert rows[1]["solution"].endswith("a + b")
    assert "solutions" in rows[2]["error"]
    p = coevo("rank", str(src), "--ranker", "codet")
    assert json.loads(p.stdout.splitlines()[0])["choice"] == 1
    _one_line_error(coevo("rank", str(src), "--ranker", "best"), "--ranker")


def test_rank_leaves_out_a_test_whose_cell_the_harness_lost():
    """A lost cell (sandbox_error) is no verdict: the test it belongs to leaves the ranking, so a
    crashed judge cannot make the ranker pick a solution the other tests rank lower."""
    from coevo_code.evaluation.rank import prepare_records, rank_items

    class Lost:  # the executor's answer shape: solution 0 lost its cell of test 0
        def run(self, jobs):
            return [{"passed": [[False, True], [True, False]],
                     "outcomes": [["sandbox_error", "ok"], ["ok", "wrong_answer"]]}]

    rec = {"id": "p", "kind": "stdio", "solutions": ["a", "b"],
           "tests": [{"input": "1", "output": "1"}, {"input": "2", "output": "2"}]}
    [row] = rank_items(prepare_records([(1, rec)]), Lost(), "cure")
    assert row["choice"] == 0 and row["passed"] == [1, 0]
    assert row["tests"] == 1 and row["sandbox_errors"] == 1


def test_rank_against_a_benchmark_with_completions(tmp_path):
    from coevo_code.tasks import load_tasks
    t = load_tasks("bundled")[0]
    rec = {"task_id": t.id, "solutions": ["I think the answer is\n```python\nprint(0)\n```",
                                          f"Here:\n```python\n{t.references[0]}```"],
           "tests": [{"input": x.input, "output": x.output} for x in t.tests]}
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(rec) + "\n")
    p = coevo("rank", str(src), "--benchmark", "bundled")
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout)
    assert row["choice"] == 1 and row["passed"][1] == len(t.tests)


@pytest.mark.slow
def test_eval_config_file_and_flags_that_win(tmp_path):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("benchmark: bundled\nlimit: 2\nmodel: tiny\nk_code: 2\nk_test: 1\n"
                   "bon: 2x1\nmax_tokens: 8\nbootstrap: 10\ntemperature: 0.7\n")
    p = coevo("eval", "--config", str(cfg), "--k-code", "3", "-o", str(tmp_path / "o"), "-q")
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["k_code"] == 3 and res["k_test"] == 1 and res["problems"] == 2
    assert res["sampling"]["temperature"] == 0.7 and res["sampling"]["max_tokens"] == 8
    bad = tmp_path / "bad.yaml"
    bad.write_text("benchmark: bundled\ntemperatur: 1\n")
    _one_line_error(coevo("eval", "--config", str(bad), "-o", str(tmp_path / "b")), "temperatur")


@pytest.mark.slow
def test_bon_larger_than_drawn_is_reported_at_the_drawn_size(tmp_path, server):
    """--k-code 2 --k-test 2 with the default --bon 4x4,16x16: no bon_4x4 or bon_16x16 row
    computed from 2x2 samples; one bon_2x2 row, and a note saying so (stderr, results)."""
    url, _, _ = server
    out = tmp_path / "b"
    args = [a for a in COMMON if a not in ("--bon", "2x2")]
    p = coevo("eval", *args, "--engine", "openai", "--base-url", url, "-o", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())
    rows = {k.split("/")[0] for k in res["metrics"] if k.startswith("bon_")}
    assert rows == {"bon_2x2"} and res["bon"] == ["2x2"]
    assert len(res["notes"]) == 2 and "bon 16x16 asked" in res["notes"][1]
    assert "reported as bon_2x2" in p.stderr
    assert "note: bon 4x4 asked" in (out / "results.md").read_text()


def test_fit_bon():
    from coevo_code.cli.evaluate import fit_bon
    assert fit_bon([(4, 4), (16, 16)], 16, 16) == ([(4, 4), (16, 16)], [])
    fit, notes = fit_bon([(4, 4), (16, 16), (2, 0)], 8, 2)
    assert fit == [(4, 2), (8, 2), (2, 0)] and len(notes) == 2
