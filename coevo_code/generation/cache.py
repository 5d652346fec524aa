"""The generation cache: completions per (problem, role) in a JSONL file, written as they
arrive, so that an interrupted run resumes without generating again; and
:func:`generate_all`, every problem's solutions and tests from an engine through that cache.
``coevo eval`` keeps its ``generations.jsonl`` here, the frozen labeller of label-free training
its ``frozen_labels.jsonl``, and :class:`~coevo_code.training.tester_reward.TesterReward` the
tester's tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ..roles import CODE, TEST, coder_messages, tester_messages
from ..tasks.model import Task


class GenerationCache:
    """``generations.jsonl``: one line per (task_id, role) with its completions."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.data: dict[tuple[str, str], list[str]] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    rec = json.loads(line)
                    self.data[(rec["task_id"], rec["role"])] = list(rec["completions"])
                except (ValueError, KeyError, TypeError):
                    continue  # a line torn by an interruption: generated again

    def get(self, task_id: str, role: str, k: int) -> list[str] | None:
        got = self.data.get((task_id, role))
        return got[:k] if got is not None and len(got) >= k else None

    def put(self, task_id: str, role: str, completions: list[str]) -> None:
        self.data[(task_id, role)] = completions
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"task_id": task_id, "role": role, "completions": completions})
                    + "\n")


def generate_all(tasks: Sequence[Task], engine, k_code: int, k_test: int, cache: GenerationCache,
                 chunk: int = 8, progress=None) -> dict[tuple[str, str], list[str]]:
    """Completions for every (task, role), from the cache where present; new ones are written
    to the cache every ``chunk`` problems."""
    out = {}
    for role, k, messages in ((CODE, k_code, coder_messages), (TEST, k_test, tester_messages)):
        if k <= 0:
            continue
        todo = []
        for t in tasks:
            got = cache.get(t.id, role, k)
            if got is None:
                todo.append(t)
            else:
                out[(t.id, role)] = got
                if progress:
                    progress(1)
        for a in range(0, len(todo), chunk):
            part = todo[a:a + chunk]
            texts = engine.generate([messages(t) for t in part], k, progress=progress)
            for t, completions in zip(part, texts):
                cache.put(t.id, role, completions)
                out[(t.id, role)] = completions
    return out
