"""The tester as a reward model: TesterReward scores solutions by a frozen tester's tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coevo_code import TesterReward
from coevo_code.generation.engines import Engine
from coevo_code.training.tester_reward import coder_rows
from coevo_code.tasks import load_tasks

ROOT = Path(__file__).resolve().parent.parent


class ScriptedTester(Engine):
    """Writes each problem's first gold tests in the tester's format (and nothing usable for
    the problems listed in ``mute``); counts its calls."""

    def __init__(self, tasks, mute=()):
        self.tasks = {t.id: t for t in tasks}
        self.by_prompt = {t.prompt.strip(): t for t in tasks}
        self.mute, self.calls = set(mute), 0

    def generate(self, conversations, n, progress=None):
        self.calls += 1
        out = []
        for conv in conversations:
            task = next(t for p, t in self.by_prompt.items() if p in conv[-1]["content"])
            if task.id in self.mute:
                out.append(["no idea"] * n)
                continue
            texts = []
            for case in task.tests[:n]:
                texts.append(f"```python\n{case.code}\n```" if case.code is not None else
                             f"**Test Input:**\n```\n{case.input}```\n\n**Test Output:**\n```\n"
                             f"{case.output}```")
            out.append(texts)
        return out


def test_rewards_are_the_share_of_tester_tests_passed(tmp_path):
    tasks = list(load_tasks("bundled"))[:4]
    engine = ScriptedTester(tasks, mute={tasks[3].id})
    reward = TesterReward(tasks, engine, k_tests=4, cache_path=tmp_path / "tests.jsonl")
    try:
        ids, texts = [], []
        for t in tasks:
            wrong = ("print(0)" if t.kind == "stdio"
                     else f"def {t.entry_point}(*a):\n    return None")
            for c in (t.references[0], wrong, "not a program at all"):
                ids.append(t.id)
                texts.append(f"```python\n{c}\n```" if "not a program" not in c else c)
        r = reward(completions=[[{"role": "assistant", "content": x}] for x in texts],
                   task_id=ids)
        for i in range(3):
            assert r[3 * i] == 1.0 and r[3 * i + 2] == 0.0
            assert 0.0 <= r[3 * i + 1] < 1.0
        assert r[9:] == [None, None, None]  # the tester wrote nothing usable: no signal
        assert engine.calls == 1
        reward(completions=texts[:3], task_id=ids[:3])
        assert engine.calls == 1  # tests are written once per problem
        # a second reward reads them back from disk
        again = TesterReward(tasks, engine, k_tests=4, cache_path=tmp_path / "tests.jsonl")
        again.tests_for([t.id for t in tasks])
        assert engine.calls == 1 and again.tests == reward.tests
        with pytest.raises(ValueError, match="task_id"):
            reward(completions=texts[:1], task_id=["nope"])
    finally:
        reward.close()
    assert coder_rows(tasks)[0]["task_id"] == tasks[0].id


def test_gold_tests_in_the_testers_place():
    """``TesterReward.from_gold``: the same reward with the gold tests, the upper bound a tester
    reward is measured against; no tester is asked for anything."""
    tasks = list(load_tasks("world", split="heldout"))[:3]
    reward = TesterReward.from_gold(tasks, max_tests=8)
    try:
        ids, texts = [], []
        for t in tasks:
            for c in (t.references[0], t.metadata["mutants"][0]):
                ids.append(t.id)
                texts.append(f"```python\n{c}\n```")
        r = reward(completions=texts, task_id=ids)
        assert r[0::2] == [1.0] * 3  # the reference passes every gold test
        assert all(x < 1.0 for x in r[1::2])  # every mutant fails one (the world's gold catch it)
        assert all(len(reward.tests[t.id]) == 8 for t in tasks)
    finally:
        reward.close()


@pytest.mark.slow
def test_example_trains_with_the_tiny_tester(tmp_path):
    pytest.importorskip("trl")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "train_with_tester_reward.py"),
                        "--config", str(ROOT / "configs" / "tester-reward-tiny.yaml"),
                        "--output_dir", str(tmp_path / "run")],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "tester reward: 2 calls, tests for 8 problems" in p.stderr
    assert (tmp_path / "run" / "final" / "config.json").exists()
    assert (tmp_path / "run" / "tester_tests.jsonl").read_text().count("\n") == 8


@pytest.mark.slow
def test_example_on_gold_takes_as_many_tests_as_a_tester(tmp_path):
    """``--tester_model gold`` (the upper bound of the tester-reward comparison) judges each
    solution on the first ``tester_k`` gold tests, as many as the tester it is compared with
    writes, not on every gold test."""
    pytest.importorskip("trl")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "train_with_tester_reward.py"),
                        "--config", str(ROOT / "configs" / "tester-reward-tiny.yaml"),
                        "--tester_model", "gold", "--tester_k", "2", "--max_steps", "1",
                        "--output_dir", str(tmp_path / "run")],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    tasks = list(load_tasks("bundled"))[:8]
    want = sum(min(2, len(t.tests)) for t in tasks)
    assert want < sum(len(t.tests) for t in tasks)  # the limit bites on these problems
    assert f"tests for 8 problems, {want} parsed" in p.stderr
