"""The task world: families, splits, gold tests that only a computation passes, references and
mutants checked in the real sandbox."""

from __future__ import annotations

import ast
from collections import Counter

import pytest

from coevo_code.execution import Executor

from coevo_code.tasks import LoaderError, check_tasks, load_tasks
from coevo_code.tasks.model import TaskSet, seeded_sample
from coevo_code.tasks.world import (BASE, FAMILIES, SEEN_COMBOS, SPLITS, UNSEEN_COMBOS,
                                    generate, heldout_params)


@pytest.fixture(scope="module")
def sandbox():
    """One executor (the best launcher here): these tests are about the world and the models,
    the launchers have tests of their own."""
    with Executor(slots=2) as ex:
        yield ex


@pytest.fixture(scope="module")
def splits():
    return {s: generate(s) for s in SPLITS}


@pytest.mark.slow
def test_families_and_sizes(splits):
    kinds = Counter(FAMILIES[f].kind for f in BASE)
    assert len(BASE) >= 8 and kinds["stdio"] >= 3 and kinds["functional"] >= 3
    total = sum(len(ts) for ts in splits.values())
    distinct = {(t.prompt, t.starter_code, tuple(t.tests)) for ts in splits.values() for t in ts}
    assert total >= 5000 and len(distinct) == total  # thousands of distinct problems
    statements = {(t.prompt, t.starter_code) for ts in splits.values() for t in ts}
    assert len(statements) >= 2000
    for split, ts in splits.items():
        fams = Counter(t.metadata["family"] for t in ts)
        assert min(fams.values()) >= 0.5 * max(fams.values()), (split, fams)  # families in turn


@pytest.mark.slow
def test_splits_are_disjoint(splits):
    ids = [t.id for ts in splits.values() for t in ts]
    assert len(ids) == len(set(ids))
    seen = {(t.metadata["family"], t.metadata["param_key"]) for s in ("sft", "train")
            for t in splits[s]}
    for t in splits["heldout"]:
        assert (t.metadata["family"], t.metadata["param_key"]) not in seen
        assert t.metadata["params"] in heldout_params(t.metadata["family"])
    held_families = {t.metadata["family"] for t in splits["heldout"]}
    assert held_families == set(BASE)  # every family has unseen parameter values
    combos = {t.metadata["family"] for t in splits["heldout_combo"]}
    assert combos == set(UNSEEN_COMBOS)
    trained = {t.metadata["family"] for s in ("sft", "train") for t in splits[s]}
    assert set(SEEN_COMBOS) <= trained and not combos & trained
    # the unseen composition is made of families the training splits do have
    assert all(set(FAMILIES[c].parts) <= trained for c in combos)
    # sft and train share parameter tuples but not problems
    sft = {(t.prompt, t.starter_code, tuple(t.tests)) for t in splits["sft"]}
    assert not sft & {(t.prompt, t.starter_code, tuple(t.tests)) for t in splits["train"]}


def test_deterministic_from_seed():
    a, b = generate("train", seed=0, size=50), generate("train", seed=0, size=50)
    assert [(t.prompt, t.starter_code, t.tests) for t in a] == \
        [(t.prompt, t.starter_code, t.tests) for t in b]
    c = generate("train", seed=1, size=50)
    assert [t.tests for t in a] != [t.tests for t in c]


@pytest.mark.slow
def test_gold_tests_need_a_computation(splits):
    """Distinct inputs; no output more than three times in eight; functional tests are plain
    ``assert f(literal) == literal``."""
    for ts in splits.values():
        for t in ts:
            assert len(t.tests) == 8
            if t.kind == "stdio":
                assert len({x.input for x in t.tests}) == 8
                assert max(Counter(x.output for x in t.tests).values()) <= 3
                continue
            outs = []
            for x in t.tests:
                node = ast.parse(x.code).body[0]
                assert isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)
                call, (op,), (right,) = node.test.left, node.test.ops, node.test.comparators
                assert isinstance(op, ast.Eq) and isinstance(call, ast.Call)
                assert call.func.id == t.entry_point
                ast.literal_eval(call.args[0]), ast.literal_eval(right)
                outs.append(ast.unparse(right))
            assert len({x.code for x in t.tests}) == 8 and max(Counter(outs).values()) <= 3


def _constant(t) -> str:
    """The best constant program for a problem: prints / returns its most common gold output."""
    if t.kind == "stdio":
        out = Counter(x.output for x in t.tests).most_common(1)[0][0]
        return f"print({out.rstrip(chr(10))!r})"
    rights = Counter(ast.unparse(ast.parse(x.code).body[0].test.comparators[0]) for x in t.tests)
    return f"def {t.entry_point}(*a):\n    return {rights.most_common(1)[0][0]}\n"


@pytest.mark.slow
def test_references_pass_constants_fail_mutants_are_caught(sandbox, splits):
    """In the sandbox, on a seeded sample of every split: every reference passes all its gold
    tests; the best constant program solves at most 5% of the problems (here none) and passes
    at most a quarter of the tests on average; every mutant fails some gold test."""
    sample = [t for s in SPLITS for t in seeded_sample(splits[s], 40, seed=3)]
    report = check_tasks(TaskSet("world", "sample", sample), sandbox)
    assert report.passed == report.checked == len(sample), report.summary()
    consts = sandbox.run([t.job([_constant(t)]) for t in sample])
    solved = [all(r["passed"][0]) for r in consts]
    share = [sum(r["passed"][0]) / len(r["passed"][0]) for r in consts]
    assert sum(solved) / len(sample) <= 0.05 and sum(share) / len(share) <= 0.25, share
    muts = sandbox.run([t.job(t.metadata["mutants"]) for t in sample])
    for t, r in zip(sample, muts):
        assert len(t.metadata["mutants"]) >= 2
        assert all(not all(row) for row in r["passed"]), (t.id, t.metadata["mutants"])


@pytest.mark.slow
def test_loader(splits):
    ts = load_tasks("world", split="heldout_combo")
    assert len(ts) == len(splits["heldout_combo"]) and "generated" in ts.summary()
    assert len(load_tasks("world", split="sft", size=30)) == 30
    with pytest.raises(LoaderError, match="unknown split 'test'"):
        load_tasks("world", split="test")
    with pytest.raises(LoaderError, match="takes no file"):
        load_tasks("world", "some.jsonl")


@pytest.mark.slow
def test_the_world_through_the_commands(tmp_path):
    """``coevo tasks check world`` runs every reference of a split; ``coevo eval --benchmark
    world`` scores a model on it."""
    import json
    import os
    import subprocess
    import sys
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "tasks", "check", "world",
                        "--split", "heldout_combo", "--quiet"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-1500:]
    assert "160/160 reference solutions pass" in p.stdout
    out = tmp_path / "e"
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "eval", "--benchmark", "world",
                        "--split", "heldout", "--limit", "4", "--model", "tiny", "--k-code", "2",
                        "--k-test", "2", "--bon", "2x2", "--max-tokens", "64", "--bootstrap",
                        "20", "-o", str(out)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-1500:]
    res = json.loads((out / "results.json").read_text())
    assert res["problems"] == 4 and res["parse_fail_code"] < 0.5  # the warm start writes code
