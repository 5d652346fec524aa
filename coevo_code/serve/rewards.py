"""Rewards over HTTP in OpenRLHF's remote reward-model protocol, computed by the project's own
:class:`~coevo_code.training.tester_reward.TesterReward` (so the numbers are the in-process ones).

OpenRLHF (``--remote_rm_url``, ``openrlhf/utils/agent.py``) posts ``{"query": [...], "prompts":
[...], "labels": [...]}``: each query is the prompt and the response decoded together, each label
the dataset's ``--label_key`` field. It reads ``rewards`` (and ``scores`` for dynamic filtering,
``extra_logs`` for logging) from the answer.

A label names the problem:

- a task id of a benchmark the server loaded (``HumanEval/0``), or ``benchmark:task_id``;
- a JSON object (or its text): ``{"benchmark", "task_id"}``; or the problem itself,
  ``{"kind", "tests", "entry_point"?, "setup"?, "prompt"?, "program_prefix"?, "time_limit_s"?}``
  with tests as executor jobs write them.

The reward of a completion: the gold reward (the share of the problem's first ``max_tests`` gold
tests it passes, ``TesterReward.from_gold``), or with a tester model, CURE's reward on the
tests the tester wrote for the problem (written once per problem and kept, keyed by
``benchmark:task_id``, or for a problem given in the request by ``request:`` and a hash of it).
Problems are keyed by benchmark inside, so two loaded benchmarks that share task ids (humaneval
and humanevalplus) each keep their own tests. With a tester, a request may bring at most
``max_new_per_request`` problems the tester has not seen, and at most ``max_inline`` problems
given in requests are kept (the oldest forgotten first). None (the tester wrote no usable test) is
sent as 0.0 with ``no_signal`` true at its index.
"""

from __future__ import annotations

import collections
import concurrent.futures
import copy
import dataclasses
import hashlib
import json
import threading
import time
from typing import Any, Sequence

from ..tasks.model import LoaderError, Task, TestCase
from ..training.tester_reward import TesterReward

# where an assistant's turn starts in a decoded chat (ChatML, Llama 3, DeepSeek, Mistral, Phi)
ASSISTANT_MARKS = ("<|im_start|>assistant", "<|start_header_id|>assistant<|end_header_id|>",
                   "<｜Assistant｜>", "[/INST]", "<|assistant|>")
END_MARKS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>", "<|end|>",
             "<｜end▁of▁sentence｜>")


class RewardError(ValueError):
    """A malformed reward request: the message is the one-line reason."""


class RewardLimit(Exception):
    """A request above what the tester may generate for it now (answered 429)."""


class _Runner:
    """An executor for one request's TesterReward: its jobs go through the dispatcher (waiting
    in line for room when the queue is full), and the request can cancel them. At ``deadline``
    (``time.monotonic()``) jobs none of whose cells has started are dropped: ``run`` raises the
    dispatcher's ``QueueTimeout``."""

    def __init__(self, dispatcher, deadline: float | None = None):
        self.dispatcher = dispatcher
        self.deadline = deadline
        self.futures: list = []
        self.cancelled = False
        self.lock = threading.Lock()

    def run(self, jobs, progress=None):
        with self.lock:
            if self.cancelled:
                raise RewardError("the request was cancelled")
            fut = self.dispatcher.submit(list(jobs), wait=True)
            self.futures.append(fut)
        if self.deadline is None:
            return fut.result()
        try:
            return fut.result(timeout=max(0.0, self.deadline - time.monotonic()))
        except concurrent.futures.TimeoutError:
            self.dispatcher.expire(fut)   # dropped if it has not started, else it runs on
            return fut.result()

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            for f in self.futures:
                self.dispatcher.cancel(f)


def inline_task(spec: dict, where: str) -> Task:
    """A problem given in a request, keyed by a hash of its content."""
    kind = spec.get("kind", "stdio")
    tests = spec.get("tests")
    if not isinstance(tests, list):
        raise RewardError(f"{where}: 'tests' must be a list")
    cases = []
    for i, t in enumerate(tests):
        if kind == "functional":
            code = t if isinstance(t, str) else (t.get("code") if isinstance(t, dict) else None)
            if not isinstance(code, str):
                raise RewardError(f"{where}: tests[{i}] of a functional problem must be code")
            cases.append(TestCase(code=code))
        else:
            if not (isinstance(t, dict) and isinstance(t.get("input"), str)
                    and isinstance(t.get("output"), str)):
                raise RewardError(f"{where}: tests[{i}] of a stdio problem must be "
                                  "{input, output} strings")
            cases.append(TestCase(input=t["input"], output=t["output"]))
    key = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]
    fields = {}
    for name in ("prompt", "setup", "starter_code", "program_prefix", "entry_point", "checker"):
        v = spec.get(name)
        if v is not None:
            if not isinstance(v, str):
                raise RewardError(f"{where}: '{name}' must be a string")
            fields[name] = v
    if "time_limit_s" in spec:
        v = spec["time_limit_s"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 600:
            raise RewardError(f"{where}: 'time_limit_s' must be a number in (0, 600]")
        fields["time_limit_s"] = float(v)
    try:
        return Task(id=f"request:{key}", source="request", kind=kind, tests=cases,
                    prompt=fields.pop("prompt", ""), **fields)
    except LoaderError as e:
        raise RewardError(f"{where}: {e}") from None


class Rewards:
    """The reward service: loaded problems, the gold reward and (optionally) a tester's."""

    def __init__(self, tasksets: dict[str, Sequence[Task]], max_tests: int = 1_000_000,
                 engine=None, k_tests: int = 8, cache_path=None, max_new_per_request: int = 8,
                 max_inline: int = 1024):
        if "request" in tasksets:
            raise ValueError("a benchmark cannot be named 'request' (problems given in requests "
                             "are keyed request:HASH)")
        # keyed inside by benchmark:task_id, so that benchmarks sharing ids keep their own tests
        self.by_bench = {name: {t.id: dataclasses.replace(t, id=f"{name}:{t.id}") for t in tasks}
                         for name, tasks in tasksets.items()}
        self.by_id: dict[str, list[Task]] = {}
        for tasks in self.by_bench.values():
            for tid, t in tasks.items():
                self.by_id.setdefault(tid, []).append(t)
        self.max_tests = max_tests
        every = [t for tasks in self.by_bench.values() for t in tasks.values()]
        self.gold = TesterReward.from_gold(every, max_tests=max_tests)
        self.tester = None
        self._gen_lock = threading.Lock()
        self.generated = 0  # problems whose tests the tester model wrote (not from its cache)
        self.max_new_per_request, self.max_inline = max_new_per_request, max_inline
        self._inline: collections.OrderedDict[str, None] = collections.OrderedDict()
        if engine is not None:
            self.tester = TesterReward(every, engine=engine, k_tests=k_tests,
                                       cache_path=cache_path)

    # ---- labels ----------------------------------------------------------------------------------
    def resolve(self, label: Any, where: str) -> Task:
        if isinstance(label, str):
            s = label.strip()
            if s.startswith("{"):
                try:
                    label = json.loads(s)
                except ValueError:
                    raise RewardError(f"{where}: the label is not valid JSON") from None
            else:
                return self._by_name(None, s, where)
        if not isinstance(label, dict):
            raise RewardError(f"{where}: a label is a task id or a JSON object, got "
                              f"{type(label).__name__}")
        if "tests" in label:
            return inline_task(label, where)
        tid = label.get("task_id", label.get("id"))
        if not isinstance(tid, str):
            raise RewardError(f"{where}: the label needs 'task_id' (with 'benchmark') or 'tests'")
        bench = label.get("benchmark")
        if bench is not None and not isinstance(bench, str):
            raise RewardError(f"{where}: 'benchmark' must be a string")
        return self._by_name(bench, tid, where)

    def _by_name(self, bench: str | None, tid: str, where: str) -> Task:
        if bench is None and tid not in self.by_id and ":" in tid:
            bench, tid = tid.split(":", 1)
        if bench is not None:
            if bench not in self.by_bench:
                raise RewardError(f"{where}: benchmark {bench!r} is not loaded here (loaded: "
                                  f"{', '.join(sorted(self.by_bench)) or 'none'})")
            task = self.by_bench[bench].get(tid)
            if task is None:
                raise RewardError(f"{where}: {bench} has no task {tid!r}")
            return task
        found = self.by_id.get(tid)
        if not found:
            raise RewardError(f"{where}: no loaded benchmark has task {tid!r} (loaded: "
                              f"{', '.join(sorted(self.by_bench)) or 'none'}); give the tests "
                              "in the label instead")
        if len(found) > 1:
            raise RewardError(f"{where}: task {tid!r} is in several loaded benchmarks; name one "
                              "as benchmark:task_id")
        return found[0]

    # ---- the request -----------------------------------------------------------------------------
    @staticmethod
    def completion(query: str, prompt: str | None) -> str:
        return Rewards.split(query, prompt)[0]

    @staticmethod
    def split(query: str, prompt: str | None) -> tuple[str, bool]:
        """The response: the query after its prompt, less the end-of-turn marks and spaces at
        its end (found from the end and cut once: linear in the query's length); and whether
        the prompt was given but did not begin the query (a decoding that differs). Then the
        response is what follows the query's last assistant mark, or, with none, the query
        after as many characters as the prompt has: not the whole query, whose prompt may hold
        code that passes."""
        mismatch = False
        if not prompt:
            start = 0
        elif query.startswith(prompt):
            start = len(prompt)
        else:
            mismatch = True
            found = [k + len(m) for m in ASSISTANT_MARKS if (k := query.rfind(m)) >= 0]
            start = max(found) if found else min(len(prompt), len(query))
        end = len(query)
        while end > start:
            if query[end - 1].isspace():
                end -= 1
                continue
            for m in END_MARKS:
                if end - len(m) >= start and query.startswith(m, end - len(m)):
                    end -= len(m)
                    break
            else:
                break
        return query[start:end], mismatch

    def parse(self, body: Any, max_items: int, max_chars: int = 1 << 20
              ) -> tuple[list[str], list[Task], list[bool]]:
        """The completions, their problems, and for each whether its prompt did not begin its
        query (see :meth:`split`)."""
        if not isinstance(body, dict):
            raise RewardError("the request must be a JSON object with 'query' and 'labels'")
        queries = body.get("query", body.get("queries"))
        completions = body.get("completions", body.get("responses"))
        labels = body.get("labels")
        if completions is None:
            if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
                raise RewardError("'query' must be a list of strings")
            self._check_lengths(queries, "query", max_chars)
            prompts = body.get("prompts")
            if prompts is None:
                prompts = [None] * len(queries)
            if not isinstance(prompts, list) or len(prompts) != len(queries):
                raise RewardError(f"'prompts' must be a list as long as 'query' ({len(queries)})")
            split = [self.split(q, p if isinstance(p, str) else None)
                     for q, p in zip(queries, prompts)]
            texts = [t for t, _ in split]
            mismatch = [m for _, m in split]
        else:
            if not isinstance(completions, list) or not all(isinstance(c, str)
                                                            for c in completions):
                raise RewardError("'completions' must be a list of strings")
            self._check_lengths(completions, "completions", max_chars)
            texts = list(completions)
            mismatch = [False] * len(texts)
        if not isinstance(labels, list) or len(labels) != len(texts):
            raise RewardError(f"'labels' must be a list with one label per query ({len(texts)})")
        if len(texts) > max_items:
            raise RewardError(f"the request has {len(texts)} completions; this server takes at "
                              f"most {max_items} per request")
        tasks = [self.resolve(label, f"labels[{i}]") for i, label in enumerate(labels)]
        return texts, tasks, mismatch

    @staticmethod
    def _check_lengths(items: list, name: str, max_chars: int) -> None:
        for i, x in enumerate(items):
            if len(x) > max_chars:
                raise RewardError(f"{name}[{i}] has {len(x)} characters; this server takes at "
                                  f"most {max_chars}")

    def score(self, texts: list[str], tasks: list[Task], runner: _Runner) -> list:
        """The rewards (None: no signal), computed by a TesterReward on ``runner``."""
        if not texts:
            return []
        base = self.tester if self.tester is not None else self.gold
        reward = copy.copy(base)            # the shared tests, this request's executor
        reward._executor, reward._own = runner, False
        reward.tasks = dict(base.tasks)
        for t in tasks:
            if t.id not in reward.tasks:
                reward.tasks[t.id] = t
                if self.tester is None:       # gold: the request's own tests
                    reward.tests = dict(reward.tests)
                    reward.tests[t.id] = list(t.tests[:self.max_tests])
        if self.tester is not None:
            reward.tests = self._tester_tests(tasks, runner)
        return reward(completions=texts, task_id=[t.id for t in tasks])

    def _tester_tests(self, tasks: list[Task], runner: _Runner | None = None
                      ) -> dict[str, list]:
        """The tester's tests for these problems (written now for those it has none of), as a
        dict of this request's own. The shared tester's problems are never changed by a
        request: the writing runs on a copy that sees the request's problems."""
        tester = self.tester
        with self._gen_lock:              # one engine: one generation at a time
            if runner is not None and runner.cancelled:  # its client left while it waited
                raise RewardError("the request was cancelled")
            ids = list(dict.fromkeys(t.id for t in tasks))
            new = [tid for tid in ids if tid not in tester.tests]
            if len(new) > self.max_new_per_request:
                raise RewardLimit(f"the request has {len(new)} problems the tester has no tests "
                                  f"for yet; this server writes tests for at most "
                                  f"{self.max_new_per_request} per request")
            own = copy.copy(tester)
            own.tasks = dict(tester.tasks)
            own.tasks.update({t.id: t for t in tasks if t.id not in tester.tasks})
            # own.tests is tester.tests: what is written is kept for every later request
            cache, k = tester.cache, tester.k_tests
            self.generated += sum(1 for tid in new if tid.startswith("request:") or cache is None
                                  or cache.get(tid, "test", k) is None)
            own.tests_for([tid for tid in ids if not tid.startswith("request:")])
            own.cache = None  # problems given in requests: kept in memory only (bounded below)
            own.tests_for([tid for tid in ids if tid.startswith("request:")])
            out = {tid: tester.tests[tid] for tid in ids}
            for t in tasks:                  # problems given in requests: the newest kept
                if t.id.startswith("request:"):
                    self._inline[t.id] = None
                    self._inline.move_to_end(t.id)
            while len(self._inline) > self.max_inline:
                old, _ = self._inline.popitem(last=False)
                tester.tests.pop(old, None)
        return out
