"""One shared executor for many requests: every request's cells cut into small pieces and fed,
round-robin across requests, to the executor's slots.

A request's jobs are validated with the executor's own :func:`~coevo_code.execution.parse_job`
(a malformed job gets the same ``{"id", "error"}`` as in ``coevo execute`` and costs nothing),
their limits clamped to the server's maxima, and each distinct program is cut into pieces of up
to ``piece_tests`` tests (one executor unit). Workers, one per executor, each take the next few
pieces (one from each waiting request in turn, so a large request never starves small ones)
and run them with the executor's public ``run``; the pieces' outcomes are written back into
their request's matrix, and the request's future resolves when its last piece is in. A
cancelled request (its client went away) drops its pieces not yet started.

The queue is bounded in requests, cells and returnable output bytes. A request that does not fit
either is refused (:class:`QueueFull`) or, submitted with ``wait=True``, waits in a line, first
come first admitted, until the requests ahead of it leave room; :meth:`Dispatcher.expire` drops
a request none of whose cells has started (in the line or in the queue) when its deadline
passes.

Local backend: ``slots`` executors of one slot each, so that no worker waits on another's slow
piece; Ray backend: one executor (one per cluster), fed larger batches.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import threading
import time
from typing import Any, Callable

from ..execution import Job, JobError, parse_job
from ..execution.core import same_programs
from ..sandbox.protocol import HARNESS

OK = "ok"


class QueueFull(Exception):
    """The server's queue is full: the client should retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class QueueTimeout(Exception):
    """The request waited past its deadline without any of its cells starting; it was dropped
    (nothing of it ran) and the client should retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class TooLarge(ValueError):
    """A request above the server's per-request maxima."""


class ShuttingDown(Exception):
    """The server stopped before the request was answered (its grace ran out)."""


# characters of output a cell can send back with return_outputs (the sandbox's cap), the unit of
# the response-size accounting
OUTPUT_CELL_CHARS = 65536
_LIMIT_KEYS = ("time_limit_s", "wall_limit_s", "memory_limit_mb", "output_limit_mb")


@dataclasses.dataclass(frozen=True)
class Limits:
    """The server's maxima; a job asking for more gets them (clamped), never an error."""

    time_limit_s: float = 10.0
    wall_limit_s: float = 30.0
    memory_limit_mb: int = 2048
    output_limit_mb: float = 16.0
    cells_per_request: int = 100_000
    queue_cells: int = 1_000_000
    queue_requests: int = 1024
    jobs_per_request: int = 4096          # malformed jobs count too
    output_bytes_per_request: int = 64 << 20   # cells with return_outputs x 64 Ki
    queue_output_bytes: int = 512 << 20       # the same over every queued request

    def clamp_raw(self, raw: Any) -> Any:
        """A job dict with its limits above the server's maxima lowered to them, before
        parse_job (whose absolute ranges would otherwise refuse what the server clamps)."""
        if not isinstance(raw, dict):
            return raw
        top = dict(zip(_LIMIT_KEYS, (self.time_limit_s, self.wall_limit_s,
                                     self.memory_limit_mb, self.output_limit_mb)))
        out = None
        for k, hi in top.items():
            v = raw.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and (
                    isinstance(v, int) or v == v) and v > hi:
                out = out if out is not None else dict(raw)
                out[k] = hi
        return raw if out is None else out

    def clamp(self, job: Job) -> Job:
        t = min(job.time_limit_s, self.time_limit_s)
        return dataclasses.replace(
            job, time_limit_s=t, wall_limit_s=min(job.wall_limit_s, self.wall_limit_s),
            memory_limit_mb=min(job.memory_limit_mb, self.memory_limit_mb),
            output_limit_mb=min(job.output_limit_mb, self.output_limit_mb))


class _Request:
    __slots__ = ("future", "results", "states", "pieces", "left", "cells", "cancelled",
                 "t0", "t_first", "started", "out_bytes", "admitted")

    def __init__(self):
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self.results: list[dict | None] = []
        self.states: list = []          # per job: (job, outcomes, outputs, copies) or None
        self.pieces: collections.deque = collections.deque()
        self.left = 0                    # pieces not yet written back
        self.cells = 0
        self.cancelled = False
        self.t0 = time.monotonic()
        self.t_first: float | None = None
        self.started = 0
        self.out_bytes = 0               # what its returned outputs may weigh
        self.admitted = False            # in the queue (else waiting in line for room)


class Dispatcher:
    """Feeds many requests' jobs into shared executors. ``executors`` must stay open while the
    dispatcher runs; :meth:`close` stops the workers (it does not close the executors)."""

    def __init__(self, executors: list, limits: Limits = Limits(), piece_tests: int = 8,
                 batch_cells: int = 16, on_cells: Callable[[int], None] | None = None):
        if not executors:
            raise ValueError("a dispatcher needs at least one executor")
        self.executors = executors
        self.limits = limits
        self.piece_tests = max(1, piece_tests)
        self.batch_cells = max(1, batch_cells)
        self.on_cells = on_cells
        self._cv = threading.Condition()
        self._ring: collections.deque[_Request] = collections.deque()  # requests with pieces
        self._line: collections.deque[_Request] = collections.deque()  # waiting for room
        self.expired_requests = 0
        self.sandbox_errors = 0   # cells the harness lost (after a re-run): no verdict, ever
        self.lined_requests = 0   # requests that waited in line for room, ever
        self.queued_cells = 0
        self.waiting_cells = 0  # cells of pieces not yet taken by a worker
        self.queued_requests = 0
        self.inflight_pieces = 0
        self.cancelled_cells = 0
        self.queued_output_bytes = 0
        self._stop = False
        self._live: dict[int, _Request] = {}  # id(future) -> request, while queued or running
        self._workers = [threading.Thread(target=self._work, args=(ex,), daemon=True,
                                          name=f"coevo-serve-worker-{i}")
                         for i, ex in enumerate(executors)]
        for w in self._workers:
            w.start()

    def languages(self) -> dict:
        """The executors' ``{language: (available, detail)}`` for C++ and Java (an executor
        that does not say, such as Ray's, leaves them to its judges)."""
        ask = getattr(self.executors[0], "languages", None)
        if ask is None:
            return {"cpp": (True, ""), "java": (True, "")}
        return ask()

    # ---- submitting ------------------------------------------------------------------------------
    def submit(self, jobs: list[Any], wait: bool = False) -> concurrent.futures.Future:
        """A future of one result per job, in order (``docs/EXECUTION.md``'s results). Raises
        :class:`TooLarge` before anything is queued. A request that does not fit in the queue
        raises :class:`QueueFull`, or with ``wait`` waits in line for room (see
        :meth:`expire`)."""
        if len(jobs) > self.limits.jobs_per_request:
            raise TooLarge(f"the request has {len(jobs)} jobs; this server takes at most "
                           f"{self.limits.jobs_per_request} per request")
        req = _Request()
        cells = out_bytes = 0
        for raw in jobs:
            jid = raw.get("id") if isinstance(raw, dict) else None
            if not isinstance(jid, (str, int, float, type(None))) or (
                    isinstance(jid, str) and len(jid) > 1024):
                jid = None  # an id is echoed back: no object or megabyte string
            try:
                job = self.limits.clamp(parse_job(self.limits.clamp_raw(raw)))
                if job.language != "python":
                    on, why = self.languages().get(job.language, (False, "no toolchain"))
                    if not on:
                        raise JobError(f"'language' {job.language!r} cannot run in this "
                                       f"sandbox: {why}")
            except JobError as e:
                req.results.append({"id": jid, "error": str(e)})
                req.states.append(None)
                continue
            n, t = job.shape
            cells += n * t
            if job.return_outputs:
                out_bytes += n * t * OUTPUT_CELL_CHARS
            req.results.append(None)
            req.states.append(job)
        if cells > self.limits.cells_per_request:
            raise TooLarge(f"the request has {cells} cells; this server takes at most "
                           f"{self.limits.cells_per_request} per request")
        if out_bytes > self.limits.output_bytes_per_request:
            raise TooLarge(f"the request asks outputs back for {out_bytes // OUTPUT_CELL_CHARS} "
                           f"cells (up to 64 Ki characters each); this server returns at most "
                           f"{self.limits.output_bytes_per_request // OUTPUT_CELL_CHARS} per "
                           "request")
        req.cells = cells
        req.out_bytes = out_bytes
        # on an idle server, small requests in smaller pieces, so that a slow row (a loop times
        # every test) spreads over the slots, as the executor does with a small batch; with work
        # waiting, whole pieces (each piece is one executor unit, and a unit costs a round trip)
        want = 4 * len(self.executors)
        size = self.piece_tests if cells + self.waiting_cells >= want * self.piece_tests else max(
            1, min(self.piece_tests, -(-cells // want)))
        for j, job in enumerate(req.states):
            if job is None:
                continue
            n, t = job.shape
            copies = same_programs(job)  # a repeated text runs once, as in the executor
            outcomes = [[None] * t for _ in range(n)]
            outputs = [[""] * t for _ in range(n)] if job.return_outputs else None
            req.states[j] = (job, outcomes, outputs, copies, {})
            # a C++ or Java row is one piece: the judge that runs it compiles it once
            step = size if job.language == "python" else max(1, t)
            for p in range(n):
                if p in copies:
                    continue
                for a in range(0, t, step):
                    req.pieces.append((j, p, a, min(t, a + step)))
        if not req.pieces:  # nothing to run (malformed jobs, no tests): answered at once
            self._finish(req)
            return req.future
        with self._cv:
            if self._stop:
                raise ShuttingDown("the server is shutting down")
            if not self._line and self._fits(req):
                self._admit(req)
            elif wait:
                self._line.append(req)
                self._live[id(req.future)] = req
                self.lined_requests += 1
            else:
                raise QueueFull(f"the queue is full ({self.queued_requests} requests, "
                                f"{self.queued_cells} cells waiting)",
                                retry_after=self._retry_after())
        return req.future

    def _fits(self, req: _Request) -> bool:
        lim = self.limits
        return self.queued_requests < lim.queue_requests and (
            not self.queued_cells or self.queued_cells + req.cells <= lim.queue_cells) and (
            not self.queued_output_bytes
            or self.queued_output_bytes + req.out_bytes <= lim.queue_output_bytes)

    def _admit(self, req: _Request) -> None:
        """Into the queue (under the lock): its pieces counted and on the ring."""
        req.admitted = True
        req.left = len(req.pieces)
        self.queued_cells += req.cells
        self.queued_output_bytes += req.out_bytes
        self.waiting_cells += sum(b - a for _, _, a, b in req.pieces)
        self.queued_requests += 1
        self._ring.append(req)
        self._live[id(req.future)] = req
        self._cv.notify_all()

    def _admit_waiting(self) -> None:
        """Admit requests from the head of the line while they fit (under the lock)."""
        while self._line and not self._stop and self._fits(self._line[0]):
            self._admit(self._line.popleft())

    @property
    def waiting_requests(self) -> int:
        """Requests in line for room in the queue."""
        return len(self._line)

    def _retry_after(self) -> int:
        return max(1, min(60, int(self.queued_cells / max(1, 100 * len(self.executors))) + 1))

    def cancel(self, future: concurrent.futures.Future) -> int:
        """Drop the pieces of the request behind ``future`` not yet started (its client went
        away); the pieces running finish and are discarded. The cells dropped."""
        with self._cv:
            req = self._live.get(id(future))
            if req is None or req.future is not future:
                return 0
            dropped = self._drop(req)
            if not future.done():
                future.cancel()
            return dropped

    def expire(self, future: concurrent.futures.Future) -> bool:
        """At the request's deadline: if none of its cells has started (it is in line, or queued
        behind others), drop it and fail its future with :class:`QueueTimeout`; True then. False
        when it has started (it runs to its end) or is done."""
        with self._cv:
            req = self._live.get(id(future))
            if req is None or req.future is not future or req.t_first is not None:
                return False
            self._drop(req)
            self.expired_requests += 1
            retry = self._retry_after()
        if not future.done():
            future.set_exception(QueueTimeout(
                "the judge is busy: none of the request's cells could start before its "
                "deadline (nothing of it ran); retry", retry_after=retry))
        return True

    def _drop(self, req: _Request, count: bool = True) -> int:
        """Under the lock: the request's pieces not started dropped, out of the line or the ring
        (``count``: into ``cancelled_cells``)."""
        req.cancelled = True
        if not req.admitted:
            try:
                self._line.remove(req)
            except ValueError:
                pass
            self._live.pop(id(req.future), None)
            self._admit_waiting()   # it may have been the head that did not fit
            self._cv.notify_all()
            return 0
        dropped = sum(b - a for _, _, a, b in req.pieces)
        self.waiting_cells -= dropped
        req.left -= len(req.pieces)
        req.pieces.clear()
        if req in self._ring:
            self._ring.remove(req)
        if count:
            self.cancelled_cells += dropped
        if req.left == 0:
            self._release(req)
        return dropped

    # ---- the workers -----------------------------------------------------------------------------
    def _take(self) -> list:
        """Up to batch_cells cells of pieces, one from each waiting request in turn."""
        batch, cells = [], 0
        # no more than a fair share of what waits, so that the other workers get some of it
        cap = min(self.batch_cells, max(1, -(-self.waiting_cells // len(self.executors))))
        while self._ring and cells < cap:
            req = self._ring.popleft()
            j, p, a, b = req.pieces.popleft()
            batch.append((req, j, p, a, b))
            cells += b - a
            self.waiting_cells -= b - a
            if req.t_first is None:
                req.t_first = time.monotonic()
            if req.pieces:
                self._ring.append(req)
        self.inflight_pieces += len(batch)
        return batch

    def _work(self, executor) -> None:
        while True:
            with self._cv:
                while not self._ring and not self._stop:
                    self._cv.wait()
                if self._stop:  # shutting down: what still waits was failed by abort()
                    return
                batch = self._take()
            jobs = []
            for req, j, p, a, b in batch:
                job = req.states[j][0]
                jobs.append(dataclasses.replace(job, id=None, programs=[job.programs[p]],
                                                tests=job.tests[a:b]))
            try:
                results = executor.run(jobs)
            except Exception as e:  # noqa: BLE001 - an executor gone: every piece a sandbox error
                results = [{"error": f"executor failed: {e}"} for _ in jobs]
            done = []
            with self._cv:
                self.inflight_pieces -= len(batch)
                for (req, j, p, a, b), res in zip(batch, results):
                    if req.cancelled:
                        req.left -= 1
                        if req.left == 0:
                            self._release(req)
                        continue
                    job, outcomes, outputs, copies, compiled = req.states[j]
                    got = res.get("outcomes") or [["sandbox_error"] * (b - a)]
                    outcomes[p][a:b] = got[0]
                    self.sandbox_errors += sum(o in HARNESS for o in got[0])
                    if res.get("compile_output") and res["compile_output"][0]:
                        compiled[p] = res["compile_output"][0]
                    if outputs is not None and res.get("outputs"):
                        outputs[p][a:b] = res["outputs"][0]
                    req.left -= 1
                    if req.left == 0:
                        self._release(req)
                        done.append(req)
            n = sum(b - a for _, _, _, a, b in batch)
            if self.on_cells is not None:
                self.on_cells(n)
            for req in done:
                self._finish(req)

    def _release(self, req: _Request) -> None:
        self.queued_cells -= req.cells
        self.queued_output_bytes -= req.out_bytes
        self.queued_requests -= 1
        self._live.pop(id(req.future), None)
        self._admit_waiting()
        self._cv.notify_all()

    def _finish(self, req: _Request) -> None:
        seconds = round(time.monotonic() - (req.t_first or req.t0), 6)
        for j, st in enumerate(req.states):
            if st is None:
                continue
            job, outcomes, outputs, copies, compiled = st
            for p, q in copies.items():
                outcomes[p] = list(outcomes[q])
                if outputs is not None:
                    outputs[p] = list(outputs[q])
                if q in compiled:
                    compiled[p] = compiled[q]
            res = {"id": job.id, "passed": [[o == OK for o in row] for row in outcomes],
                   "outcomes": outcomes, "seconds": seconds}
            if outputs is not None:
                res["outputs"] = outputs
            if job.language != "python":
                res["compile_output"] = [compiled.get(p, "") for p in range(len(outcomes))]
            req.results[j] = res
        if not req.future.done():
            req.future.set_result(req.results)

    # ---- state and shutdown ----------------------------------------------------------------------
    def idle(self) -> bool:
        with self._cv:
            return not (self._ring or self._line or self.inflight_pieces
                        or self.queued_requests)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Until every queued request is answered (graceful shutdown)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while self._ring or self._line or self.inflight_pieces or self.queued_requests:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def abort(self) -> int:
        """Stop taking pieces and fail every request not yet answered with
        :class:`ShuttingDown` (the grace ran out); pieces running finish and are discarded.
        The requests failed."""
        with self._cv:
            self._stop = True
            reqs = list(self._live.values())
            for req in reqs:
                self._drop(req, count=False)
            self._ring.clear()
            self._cv.notify_all()
        for req in reqs:
            if not req.future.done():
                req.future.set_exception(ShuttingDown("the server shut down before this "
                                                      "request was answered"))
        return len(reqs)

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop the workers without running what still waits (see :meth:`abort`); a worker
        inside a piece is waited for up to ``timeout`` seconds (closing the executors ends it)."""
        self.abort()
        deadline = None if timeout is None else time.monotonic() + timeout
        for w in self._workers:
            w.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
