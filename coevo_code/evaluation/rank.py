"""``coevo rank``: choose one solution per problem with a named ranker.

Input, one JSON object a line:

- with tests: ``{"id", "kind", "solutions": [programs], "tests": [{"input", "output"} | {"code"}],
  "entry_point"?, "setup"?, "checker"?, "time_limit_s"?}``;
- with ``--benchmark NAME``: ``{"task_id", "solutions": [completions or programs]}`` (parsed
  with the coder's parser), and ``"tests"`` as above or, with ``--tester MODEL``, written by a
  tester model (``--k_test`` per problem).

Output, one line per input line, same order: ``{"id", "ranker", "choice", "solution",
"passed": [tests passed per solution]}``, or ``{"id", "error"}`` for a line that cannot be ranked
(the others still are). A test with a cell whose judge, container or node was lost, and lost
again on a fresh judge (``sandbox_error``), is left out of the ranking (its cells are no verdict
on any solution): ``"tests"`` counts the tests ranked on, ``"sandbox_errors"`` the lost cells.
Rankers: ``cure`` (most tests passed), ``codet`` / ``codet_sqrt`` (CodeT
dual agreement), ``mbr`` (MBR-exec: outputs agreeing with the most other solutions; stdio),
``first``.
"""

from __future__ import annotations

import json
from typing import Iterable

import numpy as np

from ..ranking import mbr_exec_select
from ..roles import parse_program, parse_test, tester_messages
from ..sandbox.protocol import ANSWERED, HARNESS
from ..tasks.model import Task, TestCase
from .harness import RANKERS

ALL_RANKERS = (*RANKERS, "mbr")


class RankError(ValueError):
    pass


def _task_from_record(rec: dict, k: int) -> Task:
    kind = rec.get("kind", "stdio")
    if kind not in ("stdio", "functional"):
        raise RankError(f"line {k}: kind must be stdio or functional")
    return Task(id=str(rec.get("id", k)), source="rank", kind=kind, prompt="", tests=[],
                entry_point=rec.get("entry_point"), setup=rec.get("setup", ""),
                checker=rec.get("checker"), time_limit_s=float(rec.get("time_limit_s", 1.0)))


def _tests(raw, k: int) -> list[TestCase]:
    if not isinstance(raw, list):
        raise RankError(f"line {k}: tests must be a list")
    out = []
    for t in raw:
        if isinstance(t, dict) and "code" in t:
            out.append(TestCase(code=str(t["code"])))
        elif isinstance(t, dict) and "input" in t and "output" in t:
            out.append(TestCase(input=str(t["input"]), output=str(t["output"])))
        else:
            raise RankError(f"line {k}: a test needs input and output, or code")
    return out


def prepare_records(records: Iterable[tuple[int, dict]], benchmark=None, engine=None,
                    k_test: int = 8) -> list[dict]:
    """Resolve each record to (task, programs, tests) or an error, writing tests with the
    tester engine where asked."""
    tasks = {t.id: t for t in benchmark} if benchmark is not None else {}
    items = []
    for k, rec in records:
        try:
            if not isinstance(rec, dict) or not isinstance(rec.get("solutions"), list) or \
                    not rec["solutions"]:
                raise RankError(f"line {k}: needs a non-empty list 'solutions'")
            if benchmark is not None:
                tid = str(rec.get("task_id", rec.get("id")))
                if tid not in tasks:
                    raise RankError(f"line {k}: task {tid!r} is not in {benchmark.name}")
                task = tasks[tid]
                programs = [parse_program(str(s), task).code for s in rec["solutions"]]
            else:
                task = _task_from_record(rec, k)
                programs = [str(s) for s in rec["solutions"]]
            tests = _tests(rec["tests"], k) if "tests" in rec else None
            if tests is None and engine is None:
                raise RankError(f"line {k}: no tests (give them, or --tester MODEL with "
                                f"--benchmark)")
            items.append({"k": k, "id": str(rec.get("id", rec.get("task_id", k))), "task": task,
                          "programs": programs, "tests": tests,
                          "solutions": [str(s) for s in rec["solutions"]]})
        except RankError as e:
            items.append({"k": k, "id": str((rec or {}).get("id", k)) if isinstance(rec, dict)
                          else str(k), "error": str(e)})
    need = [it for it in items if "error" not in it and it["tests"] is None]
    if need:
        texts = engine.generate([tester_messages(it["task"]) for it in need], k_test)
        for it, completions in zip(need, texts):
            it["tests"] = [p.test for p in (parse_test(c, it["task"]) for c in completions) if p.ok]
    return items


def rank_items(items: list[dict], executor, ranker: str) -> list[dict]:
    if ranker not in ALL_RANKERS:
        raise RankError(f"unknown ranker {ranker!r}; choose from {', '.join(ALL_RANKERS)}")
    live = [it for it in items if "error" not in it]
    jobs = []
    for it in live:
        if ranker == "mbr" and it["task"].kind != "stdio":
            it["error"] = f"line {it['k']}: mbr needs stdio tests (outputs to compare)"
            continue
        job = it["task"].job(it["programs"], it["tests"] or [], id=it["id"],
                             return_outputs=ranker == "mbr")
        jobs.append((it, job))
    results = executor.run([j for _, j in jobs]) if jobs else []
    for (it, _), res in zip(jobs, results):
        if "passed" not in res:
            it["error"] = f"line {it['k']}: {res.get('error')}"
            continue
        passed = np.asarray(res["passed"], dtype=bool).reshape(len(it["programs"]), -1)
        lost = np.asarray([[o in HARNESS for o in row] for row in res.get("outcomes") or []],
                          dtype=bool).reshape(passed.shape) if res.get("outcomes") else None
        errors = int(lost.sum()) if lost is not None else 0
        if errors and ranker != "mbr":  # a lost cell is no verdict: rank on the other tests
            passed = passed[:, ~lost.any(axis=0)]
        if ranker == "mbr":
            errored = np.asarray([[o not in ANSWERED for o in row]
                                  for row in res["outcomes"]], dtype=bool).reshape(passed.shape)
            choice = mbr_exec_select(res["outputs"], errored) if passed.shape[1] else 0
        else:
            choice = RANKERS[ranker](passed) if passed.shape[1] else 0
        it["result"] = {"choice": int(choice), "passed": passed.sum(axis=1).astype(int).tolist(),
                        "tests": int(passed.shape[1])}
        if errors:
            it["result"]["sandbox_errors"] = errors
    out = []
    for it in items:
        if "error" in it:
            out.append({"id": it["id"], "error": it["error"]})
        else:
            r = it["result"]
            out.append({"id": it["id"], "ranker": ranker, "choice": r["choice"],
                        "solution": it["solutions"][r["choice"]], "passed": r["passed"],
                        "tests": r["tests"],
                        **({"sandbox_errors": r["sandbox_errors"]} if "sandbox_errors" in r
                           else {})})
    return out


def dumps(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)
