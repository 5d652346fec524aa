"""LiveBench coding (``livebench/coding``): LiveCodeBench-schema rows graded the way LiveBench's
``process_results/coding/utils.py`` grades them.

- ``coding_completion`` rows are graded as ``partial_solution + "\\n" + answer`` (unless the answer
  already starts with the partial solution), as LiveBench does;
- questions already removed (``livebench_removal_date`` on or before ``livebench_date``, default
  today) or not yet released (``livebench_release_date`` after it) are left out and counted in
  the load report;
- 6 s per test; LiveBench's prelude (the LiveCodeBench imports, recursion limit 600000) before
  every program, after its guard's ``exit``, ``quit`` and ``help`` set to None; a stdin program
  wrapped as LiveCodeBench's grader wraps one; a stdin answer compared with LiveBench's rules (its
  copy of an older LiveCodeBench ``testing_util``): the whole output or its stripped lines equal
  the stripped expected text, or the non-empty lines equal the expected non-empty stripped lines,
  or, unless every line is an integer, each line read as one float is ``allclose`` (rtol 1e-5,
  atol 1e-8) to the expected one; a functional answer equal to the expected value (a tuple
  counts as a list) or to the first element of an expected list.
"""

from __future__ import annotations

import json
from datetime import date, datetime

from .livecodebench import LCB_PRELUDE, ReportedTaskSet, lcb_task, parse_date
from .model import LoaderError, RowErrors, TaskSet

# LiveCodeBench's prelude with LiveBench's own recursion limit (its copy of the grader)
LIVEBENCH_PRELUDE = LCB_PRELUDE.replace("sys.setrecursionlimit(50000)",
                                        "sys.setrecursionlimit(6*10**5)")

# LiveBench's ReliabilityGuard also sets exit() to None (LiveCodeBench's current one does not)
LIVEBENCH_GUARD = ("import builtins as _guard\n_guard.exit = None\n_guard.quit = None\n"
                   "_guard.help = None\ndel _guard\n")

LIVEBENCH_STDIO_CHECKER = '''
import math


def _is_int(v):
    return isinstance(v, str) and v.isdigit()


def _allclose(a, b):
    return len(a) == len(b) and all(
        x == y or (math.isfinite(x) and math.isfinite(y) and abs(x - y) <= 1e-8 + 1e-5 * abs(y))
        for x, y in zip(a, b))


def check(input, expected, actual):
    out = actual.splitlines()
    want = expected.strip()
    if "\\n".join(out).strip() == want or "\\n".join(o.strip() for o in out).strip() == want:
        return True
    if out == [expected]:
        return True
    lines = [x.strip() for x in expected.split("\\n") if len(x)]
    if out == lines:
        return True
    out = [o for o in out if len(o)]
    if out == lines:
        return True
    try:
        if not all(_is_int(a) and _is_int(b) for a, b in zip(out, lines)):
            return _allclose([float(e) for e in out], [float(e) for e in lines])
    except Exception:
        pass
    return False
'''


def load_livebench(source=None, split: str | None = None, livebench_date=None,
                   strict: bool = False) -> TaskSet:
    """LiveBench coding (``LCB_generation`` and ``coding_completion``), as of ``livebench_date``
    (default today): removed and not-yet-released questions are left out and counted. A row
    that cannot be used is skipped and counted (``strict``: a one-line error naming it)."""
    from .loaders import _need, _records
    name = "livebench"
    as_of = parse_date(livebench_date, "--livebench_date") or datetime.combine(date.today(),
                                                                               datetime.min.time())
    items, origin = _records(name, source, split)
    tasks, removed, unreleased = [], [], 0
    errors = RowErrors(name, strict)
    for k, r in errors.readable(items):
        with errors.row(k, r):
            qid = str(_need(r, "question_id", k, name))
            where = f"livebench record {k} ({qid})"
            gone = parse_date(r.get("livebench_removal_date") or None,
                              f"{where} livebench_removal_date")
            born = parse_date(r.get("livebench_release_date") or None,
                              f"{where} livebench_release_date")
            if gone is not None and gone <= as_of:
                removed.append(qid)
                continue
            if born is not None and born > as_of:
                unreleased += 1
                continue
            turns = _need(r, "turns", k, name)
            orig = r.get("original_json") or {}
            if isinstance(orig, str):
                try:
                    orig = json.loads(orig)
                except (json.JSONDecodeError, ValueError, RecursionError):
                    raise LoaderError(f"{where}: original_json is not JSON") from None
            partial = r.get("partial_solution") or ""
            completion = r.get("task") == "coding_completion" and bool(partial)
            task = lcb_task(name, k, r, turns[0] if turns else "", orig.get("metadata"),
                            orig.get("starter_code"),
                            prelude=LIVEBENCH_GUARD + LIVEBENCH_PRELUDE,
                            stdio_checker=LIVEBENCH_STDIO_CHECKER, first_of_list=True,
                            completion_prefix=partial if completion else "",
                            program_prefix=partial + "\n" if completion else "",
                            references=[r["solution"]] if r.get("solution") else [])
            task.metadata.update({"task": r.get("task"), "release_date": r.get("release_date"),
                                  "livebench_release_date": r.get("livebench_release_date"),
                                  "partial_solution": partial or None})
            tasks.append(task)
    notes = [f"{len(removed)} removed on or before {as_of.date()} (livebench_removal_date)"]
    if unreleased:
        notes.append(f"{unreleased} released after {as_of.date()}")
    return ReportedTaskSet(f"{name} (as of {as_of.date()})", origin, tasks,
                           skipped=errors.lines, notes=notes)
