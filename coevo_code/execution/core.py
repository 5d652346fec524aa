"""The execution core every backend uses: a batch of jobs from parsing to result dicts.

A backend (``registry.py``) only decides *where* units of work run. What a batch is, and what
comes back, is decided here, once:

- :func:`start_batch` parses the jobs (a malformed job gets its ``{"id", "error"}`` result) and
  gives each well-formed one an empty :class:`JobState` (its outcome and output matrices);
- :func:`same_programs` finds the programs of a job whose text an earlier one has: each text
  runs once, and :func:`copy_verdicts` gives its copies its verdicts after the run;
- :func:`distinct_programs` lists the programs that do run;
- :func:`cell_budget_s` / :func:`unit_budget_s` are the time budget of a unit of cells (the
  wall limit of each cell, the checker's, and a margin), the one figure a backend waits for;
- :func:`plan_units` cuts a batch into :class:`Unit` s (one program against a chunk of tests,
  as the sandbox server's ``run`` request), and :func:`run_unit` runs one on a slot, re-running
  what the harness lost once on a fresh server (the unit, when the server failed; the cells
  whose outcome is a harness failure, when it answered), writing the unit's cells into its
  job's state;
- :func:`finish_batch` assembles the result dicts (``passed``, ``outcomes``, ``seconds``,
  ``outputs`` when asked), in job order.

A slot, for :func:`run_unit`, is anything with ``index``, ``channel`` (None when stopped),
``start()``, ``call(request, timeout)`` and ``close()``: the local executor's
:class:`~coevo_code.execution.executor.Slot`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..sandbox.protocol import HARNESS, OK, SANDBOX
from .jobs import Job, JobError, job_seed, parse_job

log = logging.getLogger(__name__)

# the time budget of a unit: per cell, its wall limit, the checker's (at least 5 s) and this;
# per unit, this on top (a server's start and the unit's own overhead)
CELL_MARGIN_S = 1.0
UNIT_MARGIN_S = 10.0


@dataclass
class JobState:
    """A job being run: its outcome matrix (``None`` until a cell is written), its output matrix
    when asked, and when its first unit started and its last finished."""
    job: Job
    outcomes: list
    outputs: list | None
    t0: float = 0.0
    t1: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    compile_output: dict = field(default_factory=dict)  # C++/Java: row -> the compiler's text

    @classmethod
    def empty(cls, job: Job) -> "JobState":
        n, t = job.shape
        return cls(job, [[None] * t for _ in range(n)],
                   [[""] * t for _ in range(n)] if job.return_outputs else None)


@dataclass
class Unit:
    """One server request: program ``program`` of job ``job`` against tests ``start:stop``."""
    job: int
    program: int
    start: int
    stop: int
    request: dict
    budget_s: float


def start_batch(jobs: Iterable[Any], languages: dict | None = None
                ) -> tuple[list[dict | None], list[JobState | None]]:
    """A batch's jobs parsed, for any backend: the results so far (a malformed job's
    ``{"id", "error"}``, None elsewhere) and an empty state per well-formed job.
    ``languages``: the judges' ``{language: (available, detail)}`` for C++ and Java (None: not
    known); a job in a language the sandbox cannot run gets its error, not a matrix."""
    results: list[dict | None] = []
    states: list[JobState | None] = []
    for raw in jobs:
        jid = raw.get("id") if isinstance(raw, dict) else None
        try:
            job = raw if isinstance(raw, Job) else parse_job(raw)
        except JobError as e:
            results.append({"id": jid, "error": str(e)})
            states.append(None)
            continue
        except Exception as e:  # noqa: BLE001 - a job no rule foresaw: its own error, not the run's
            results.append({"id": jid, "error": f"the job could not be read ({type(e).__name__}: "
                                                f"{str(e)[:200]})"})
            states.append(None)
            continue
        if job.language != "python" and languages is not None:
            on, why = languages.get(job.language, (False, "this judge does not know it"))
            if not on:
                results.append({"id": jid, "error": f"'language' {job.language!r} cannot run "
                                                    f"in this sandbox: {why}"})
                states.append(None)
                continue
        states.append(JobState.empty(job))
        results.append(None)
    return results, states


def same_programs(job: Job) -> dict[int, int]:
    """{index: index of its first copy} for every program of ``job`` whose text an earlier one
    has: a policy's k samples often repeat a program word for word, and the same text gets the
    same verdicts, so each text runs once (a program that reads the clock or draws random numbers
    gets the verdicts of its first copy's runs)."""
    first: dict[str, int] = {}
    out = {}
    for i, p in enumerate(job.programs):
        if p in first:
            out[i] = first[p]
        else:
            first[p] = i
    return out


def distinct_programs(job: Job, copies: dict[int, int]) -> list[int]:
    """The indices of the programs of ``job`` that run (those not in ``copies``), in order."""
    return [p for p in range(job.shape[0]) if p not in copies]


def copy_verdicts(states: list[JobState | None], copies: list[dict[int, int]]) -> int:
    """Give every copy of a program its first copy's outcomes (and outputs); returns the number
    of cells so filled, for a progress bar over every cell."""
    for st, c in zip(states, copies):
        for p, first in c.items():
            st.outcomes[p] = list(st.outcomes[first])
            if st.outputs is not None:
                st.outputs[p] = list(st.outputs[first])
            if first in st.compile_output:
                st.compile_output[p] = st.compile_output[first]
    return sum(len(c) * st.job.shape[1] for st, c in zip(states, copies) if st is not None)


def cell_budget_s(job: Job) -> float:
    """The time one cell of ``job`` may take, margin included."""
    checker_wall = max(job.wall_limit_s, 5.0) if job.checker else 0.0
    return job.wall_limit_s + checker_wall + CELL_MARGIN_S


def unit_budget_s(job: Job, tests: int) -> float:
    """The time a server may take to answer one :class:`Unit` of ``tests`` cells (a native
    program's compile's wall cap included)."""
    compile_s = (max(3 * job.compile_time_limit_s + 5, 30.0) if job.language != "python"
                 else 0.0)  # the compile's wall cap (sandbox.native.compile_wall_s)
    return tests * cell_budget_s(job) + compile_s + UNIT_MARGIN_S


def job_units(index: int, job: Job, size: int) -> list[Unit]:
    """Job ``index``'s units: every program against chunks of ``size`` tests (none when the job
    has no tests)."""
    n, t = job.shape
    if t == 0:
        return []
    out = []
    seed = job_seed(job)
    for p, program in enumerate(job.programs):
        for a in range(0, t, size):
            b = min(t, a + size)
            if job.kind == "stdio":
                tests = [x for x, _ in job.tests[a:b]]
                expected = [y for _, y in job.tests[a:b]]
            else:
                tests, expected = job.tests[a:b], None
            req = {"op": "run", "kind": job.kind, "program": program, "setup": job.setup,
                   "entry_point": job.entry_point,
                   "tests": tests, "expected": expected, "time": job.time_limit_s,
                   "wall": job.wall_limit_s, "mem_mb": job.memory_limit_mb,
                   "out_mb": job.output_limit_mb, "return_outputs": job.return_outputs,
                   "checker": job.checker, "seed": seed}
            if job.language != "python":  # Python's request stays as it was
                req.update(language=job.language, compile_time=job.compile_time_limit_s)
            out.append(Unit(index, p, a, b, req, unit_budget_s(job, b - a)))
    return out


def plan_units(states: list[JobState | None], copies: list[dict[int, int]], slots: int,
               chunk_tests: int) -> list[Unit]:
    """The units of a batch for ``slots`` slots, copies left out: units of up to
    ``chunk_tests`` tests; on small batches (fewer than four units per slot), smaller ones, so
    that a slow row (an infinite loop times every one of its tests) spreads over all slots. A
    C++ or Java program's row is one unit, whatever its length: the judge that runs it compiles
    it once for all its tests, so an n x t matrix compiles n times (a row is not spread over
    slots; the judge's cache serves a program that comes back in a later job)."""
    want = 4 * slots
    chunk = chunk_tests
    big = sum((st.job.shape[0] - len(c)) * -(-st.job.shape[1] // chunk)
              for st, c in zip(states, copies) if st) >= want
    units: list[Unit] = []
    for i, st in enumerate(states):
        if st is not None:
            n, t = st.job.shape
            n -= len(copies[i])
            size = chunk if big else max(1, min(chunk, -(-n * t // want)))
            if st.job.language != "python":  # a native program's row is one unit: one judge
                size = max(1, t)  # compiles it once for all its tests
            units.extend(u for u in job_units(i, st.job, size) if u.program not in copies[i])
    return units


PLACED = 4096  # native programs whose slot the executor remembers


def program_key(request: dict) -> bytes:
    """A native unit's program, as the slots' caches know it (its language and text)."""
    import hashlib
    h = hashlib.sha256(request.get("language", "").encode())
    h.update(b"\0" + request["program"].encode("utf-8", "surrogatepass"))
    return h.digest()


class UnitQueue:
    """The units of a batch as the slots take them: Python units in order, from one line; a C++
    or Java unit first to the slot that ran its program last (``placed``, kept by the executor
    across batches), else to the slot its text hashes to, so that a program that comes back
    (another job, the same batch again) finds its compile in that judge's cache. A slot whose
    own units are done takes the next Python unit, then steals the last unit of the slot with
    the most left: no slot idles while another has work."""

    def __init__(self, units: list[Unit], slots: int, placed: dict | None = None):
        import collections
        self.lock = threading.Lock()
        self.shared = collections.deque()
        self.own = [collections.deque() for _ in range(max(1, slots))]
        self.placed = placed if placed is not None else {}
        for u in units:
            if u.request.get("language", "python") == "python":
                self.shared.append(u)
            else:
                key = program_key(u.request)
                where = self.placed.get(key)
                fresh = where is None or where >= len(self.own)
                if fresh:
                    where = int.from_bytes(key[:8], "little") % len(self.own)
                self.own[where].append((u, fresh))

    def ran(self, unit: Unit, slot: int) -> None:
        """Remember the slot that compiled ``unit``'s program (the last ``PLACED`` programs):
        the next job with it goes there, whichever slot its hash names."""
        if unit.request.get("language", "python") != "python":
            with self.lock:
                key = program_key(unit.request)
                self.placed.pop(key, None)
                self.placed[key] = slot
                while len(self.placed) > PLACED:
                    self.placed.pop(next(iter(self.placed)))

    def take(self, slot: int) -> Unit | None:
        with self.lock:
            mine = self.own[slot % len(self.own)]
            if mine:
                return mine.popleft()[0]
            if self.shared:
                return self.shared.popleft()
            for other in sorted(self.own, key=len, reverse=True):
                for k in range(len(other) - 1, -1, -1):
                    if other[k][1]:  # compiled nowhere yet: one compile wherever it runs
                        unit = other[k][0]
                        del other[k]
                        return unit
            return None


def _call(slot: Any, request: dict, budget_s: float, job_id) -> dict | None:
    """One request on ``slot``, starting its server if it has none: the answer, or None when
    the server failed (died, did not answer within ``budget_s``, or reported an error), which
    is then closed, so that the next call starts a fresh one."""
    try:
        if slot.channel is None:
            slot.start()
        res = slot.call(request, budget_s)
    except Exception as e:  # noqa: BLE001 - a dead, hung or unstartable server
        log.warning("slot %d failed (%s); restarting it", slot.index, e)
        slot.close()
        return None
    if "error" in res:  # the server is in doubt (a zygote gone, a work dir replaced, a bug)
        log.error("sandbox server error on job %r: %s", job_id, res["error"])
        slot.close()
        return None
    return res


def _subrequest(request: dict, cells: list[int]) -> dict:
    """``request`` for the tests at positions ``cells`` of its unit only."""
    sub = dict(request, tests=[request["tests"][i] for i in cells])
    if request.get("expected") is not None:
        sub["expected"] = [request["expected"][i] for i in cells]
    return sub


def run_unit(slot: Any, unit: Unit, st: JobState) -> None:
    """Run ``unit`` on ``slot`` and write its cells into ``st``. What the harness lost is re-run
    once on a fresh server: the whole unit when the server failed (died, did not answer within
    the unit's budget, or reported an error), the cells whose outcome is a harness failure
    (:data:`~coevo_code.sandbox.protocol.HARNESS`: a cell whose isolation could not be set up)
    when it answered; what fails again stays ``sandbox_error``."""
    now = time.monotonic()
    with st.lock:
        if not st.t0:
            st.t0 = now
    k = unit.stop - unit.start
    res = _call(slot, unit.request, unit.budget_s, st.job.id)
    if res is None:
        res = _call(slot, unit.request, unit.budget_s, st.job.id)
    outcomes = list(res["outcomes"]) if res else [SANDBOX] * k
    outputs = list(res["outputs"]) if res and res.get("outputs") is not None else None
    if res is not None:
        lost = [i for i, o in enumerate(outcomes) if o in HARNESS]
        if lost:
            log.warning("slot %d: %d cell(s) of job %r ended %s; re-running them on a fresh "
                        "server", slot.index, len(lost), st.job.id, outcomes[lost[0]])
            slot.close()
            again = _call(slot, _subrequest(unit.request, lost), unit.budget_s, st.job.id)
            if again is not None:
                for i, o in zip(lost, again["outcomes"]):
                    outcomes[i] = o
                if outputs is not None and again.get("outputs") is not None:
                    for i, o in zip(lost, again["outputs"]):
                        outputs[i] = o
    with st.lock:
        if res is not None and st.job.language != "python" and res.get("detail"):
            st.compile_output[unit.program] = str(res["detail"])
        st.outcomes[unit.program][unit.start:unit.stop] = outcomes
        if st.outputs is not None and outputs is not None:
            st.outputs[unit.program][unit.start:unit.stop] = outputs
        st.t1 = max(st.t1, time.monotonic())


def finish_batch(results: list[dict | None], states: list[JobState | None]) -> list[dict]:
    """The result dict of every job whose state was filled in (``passed``, ``outcomes``,
    ``seconds``, ``outputs`` when asked), in job order."""
    for i, st in enumerate(states):
        if st is None:
            continue
        res = {"id": st.job.id, "passed": [[o == OK for o in row] for row in st.outcomes],
               "outcomes": st.outcomes, "seconds": round(max(0.0, st.t1 - st.t0), 6)}
        if st.outputs is not None:
            res["outputs"] = st.outputs
        if st.job.language != "python":  # the compiler's diagnostics of each row ("" if none)
            res["compile_output"] = [st.compile_output.get(p, "")
                                     for p in range(st.job.shape[0])]
        results[i] = res
    return results  # type: ignore[return-value]

