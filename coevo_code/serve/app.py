"""The HTTP side of ``coevo serve``: a Starlette application over a :class:`Dispatcher`.

Endpoints (``docs/SERVICE.md``): ``POST /execute`` (``coevo execute``'s jobs and results),
``POST /run_code`` (SandboxFusion: Python, C++, Java), ``POST /reward`` and ``POST /get_reward`` (OpenRLHF's
remote reward model), ``GET /health``, ``GET /metrics`` (Prometheus), ``GET /v1/ping``.

Every request waits its turn (a bounded line, see below), is read up to the body limit within
the body timeout, its JSON bounded in depth, width and items as it streams in, then parsed,
clamped and queued without blocking the event loop on the sandbox; its answer comes when its
last cell is in. A client that goes away cancels what of its request has not started.

Load never refuses a request at once: a request that finds the server full waits, first come
first served, for its share of the memory budget (``queue_bytes``, charged before its body is
read: a waiting request costs its connection only), for a reward slot (``max_pending_rewards``)
and for room in the dispatcher's queue, until its deadline (``queue_timeout_s``; for
``/run_code`` ``run_code_queue_timeout_s``). A request none of whose cells has started by then is
dropped and answered 503 with ``Retry-After`` (``/run_code``: 504, the one status veRL's
SandboxFusion client retries; 503 there would be scored as a failed test), which every client we
serve retries or reports as an error.

Errors are JSON ``{"error": "one line"}``: 401 no token, 400 malformed, 403 a browser's request
(an ``Origin`` header) or, without a token, a ``Host`` that is not a loopback name, 408 a body
not sent within the body timeout, 413 too large (bytes, JSON depth, width or items), 415 a POST
body not declared ``application/json``, 429 a tester request with too many new problems, 503
busy past the deadline or shutting down, 504 ``/run_code`` busy past its deadline.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import hmac
import ipaddress
import json
import threading
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from . import sandboxfusion
from .dispatcher import Dispatcher, QueueFull, QueueTimeout, ShuttingDown, TooLarge
from .jsonscan import JSONBoundError, JSONBounds
from .rewards import RewardError, RewardLimit, Rewards, _Runner

OPEN_PATHS = ("/health", "/v1/ping")


@dataclasses.dataclass
class ServeOptions:
    token: str | None = None
    max_body_bytes: int = 32 << 20
    max_reward_items: int = 4096
    backend: str = "local"
    slots: int = 0
    launcher: str = ""
    tester: str | None = None
    grace_s: float = 30.0             # on SIGTERM: in-flight requests answered up to this long
    max_query_chars: int = 1 << 20    # characters of one reward query / completion
    max_pending_rewards: int = 256    # reward requests being scored at once; more wait
    queue_timeout_s: float = 120.0    # a request none of whose cells started by then: 503
    run_code_queue_timeout_s: float = 15.0   # the same for /run_code: 504
    queue_bytes: int = 2 << 30        # memory budget of the bodies being read, parsed, run
    body_timeout_s: float = 60.0      # time to send a body, once the server reads it: then 408
    json_depth: int = 64              # a body's JSON: nesting,
    json_width: int = 100_000         # items of one array or object,
    json_items: int = 1_000_000       # items in all (checked while it streams in)


# what a request holds of the memory budget while it is read, parsed, queued and run: its body
# (twice while it is joined) and what parsing makes of it, at most PARSED_PER_BYTE bytes a body
# byte (an empty dict, 64 bytes, of 3 bytes "{},") and PARSED_PER_ITEM bytes a JSON item
PARSED_PER_BYTE = 32
PARSED_PER_ITEM = 128
MIN_COST = 4096


def body_cost(length: int, json_items: int) -> int:
    """Bytes of the memory budget a body of ``length`` bytes is charged."""
    return max(MIN_COST, min(PARSED_PER_BYTE * length, 2 * length + PARSED_PER_ITEM * json_items))


class Gate:
    """A budget shared first come, first served (on the event loop): ``await acquire(n,
    deadline)`` takes ``n`` when every earlier waiter has had its share and ``n`` is free;
    raises :class:`asyncio.TimeoutError` at ``deadline`` (``time.monotonic()``) otherwise, and
    :class:`ShuttingDown` once :meth:`close` is called."""

    def __init__(self, capacity: int):
        self.capacity = self.free = capacity
        self._waiters: collections.deque = collections.deque()
        self.waited = 0   # acquisitions that had to wait, ever
        self.closed = False

    def close(self) -> None:
        """Every waiter, and every later acquire, gets :class:`ShuttingDown`."""
        self.closed = True
        while self._waiters:
            _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(ShuttingDown("the server is shutting down"))

    @property
    def waiting(self) -> int:
        return sum(1 for _, f in self._waiters if not f.done())

    async def acquire(self, n: int, deadline: float) -> int:
        n = min(n, self.capacity)     # one request alone always fits
        if self.closed:
            raise ShuttingDown("the server is shutting down")
        if not self._waiters and self.free >= n:
            self.free -= n
            return n
        self.waited += 1
        fut = asyncio.get_running_loop().create_future()
        entry = (n, fut)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(fut), max(0.0, deadline - time.monotonic()))
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release(n)          # granted at the moment it timed out
            else:
                fut.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(entry)
                self._wake()
            raise
        return n

    def release(self, n: int) -> None:
        self.free += n
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            n, fut = self._waiters[0]
            if fut.done():
                self._waiters.popleft()
            elif n <= self.free:
                self._waiters.popleft()
                self.free -= n
                fut.set_result(None)
            else:
                return


class HTTPError(Exception):
    def __init__(self, status: int, message: str, kind: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.kind, self.headers = status, kind, headers or {}


class _Metrics:
    def __init__(self, dispatcher: Dispatcher):
        self.registry = r = CollectorRegistry()
        self.requests = Counter("coevo_serve_requests", "HTTP requests answered",
                                ["endpoint", "code"], registry=r)
        self.cells = Counter("coevo_serve_cells", "cells judged", registry=r)
        self.errors = Counter("coevo_serve_errors", "requests answered with an error, by kind",
                              ["kind"], registry=r)
        self.latency = Histogram("coevo_serve_request_seconds", "time to answer a request",
                                 ["endpoint"], registry=r,
                                 buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30,
                                          60, 120))
        Gauge("coevo_serve_queue_cells", "cells queued or running", registry=r
              ).set_function(lambda: dispatcher.queued_cells)
        Gauge("coevo_serve_queue_requests", "requests queued or running", registry=r
              ).set_function(lambda: dispatcher.queued_requests)
        Gauge("coevo_serve_inflight_pieces", "pieces on the slots now", registry=r
              ).set_function(lambda: dispatcher.inflight_pieces)
        Gauge("coevo_serve_sandbox_error_cells", "cells whose judge, container or node was lost "
              "twice (sandbox_error): no verdict on the program, not a wrong answer", registry=r
              ).set_function(lambda: dispatcher.sandbox_errors)
        Gauge("coevo_serve_cancelled_cells", "cells dropped because their client went away",
              registry=r).set_function(lambda: dispatcher.cancelled_cells)
        self.waiting = Gauge("coevo_serve_waiting_requests", "requests waiting for their turn "
                             "(memory budget, reward slot or room in the queue)", registry=r)
        self.waited = Gauge("coevo_serve_waited_requests", "requests that waited for their turn "
                            "(once for each of the three), since the start", registry=r)
        self.budget = Gauge("coevo_serve_queue_bytes", "bytes of the memory budget held by "
                            "requests being read, parsed, queued or run", registry=r)


class _ClientGone(Exception):
    pass


def create_app(dispatcher: Dispatcher, rewards: Rewards | None = None,
               options: ServeOptions | None = None, on_shutdown=None) -> Starlette:
    """The application. ``on_shutdown`` runs after the last request is answered."""
    opts = options or ServeOptions()
    metrics = _Metrics(dispatcher)
    dispatcher.on_cells = metrics.cells.inc
    state = {"closing": False, "started": time.time(), "deadline": None, "pending_rewards": 0}
    budget = Gate(max(opts.queue_bytes, MIN_COST))          # bodies read, parsed, queued, run
    reward_slots = Gate(opts.max_pending_rewards)            # reward requests being scored
    metrics.waiting.set_function(lambda: budget.waiting + reward_slots.waiting
                                 + dispatcher.waiting_requests)
    metrics.budget.set_function(lambda: budget.capacity - budget.free)
    metrics.waited.set_function(lambda: budget.waited + reward_slots.waited
                                + dispatcher.lined_requests)
    # reward requests run TesterReward, which blocks on its cells: one thread each while they
    # are scored (asyncio's default pool has cores + 4 threads, too few for OpenRLHF's
    # one-sample requests); the others wait for a slot before their bodies are read
    reward_pool = concurrent.futures.ThreadPoolExecutor(max_workers=opts.max_pending_rewards,
                                                        thread_name_prefix="coevo-reward")

    def overloaded(endpoint: str, message: str, retry_after: int) -> HTTPError:
        # veRL's SandboxFusion client retries 504 only (any other error is a failed test);
        # OpenRLHF's reward client and our own retry any; the SandboxFusion client any non-200
        if endpoint == "run_code":
            return HTTPError(504, message, "queue_timeout", {"Retry-After": str(retry_after)})
        return HTTPError(503, message, "queue_timeout", {"Retry-After": str(retry_after)})

    def deadline_for(endpoint: str) -> float:
        return time.monotonic() + (opts.run_code_queue_timeout_s if endpoint == "run_code"
                                   else opts.queue_timeout_s)

    async def take(gate: Gate, n: int, deadline: float, endpoint: str, what: str) -> int:
        try:
            return await gate.acquire(n, deadline)
        except ShuttingDown as e:
            raise shutting_down(str(e)) from None
        except asyncio.TimeoutError:
            raise overloaded(endpoint, f"the server is busy: no {what} freed up before this "
                             "request's deadline (nothing of it ran); retry",
                             dispatcher._retry_after()) from None

    def cost_of(request: Request) -> int:
        size = request.headers.get("content-length")
        length = int(size) if size is not None and size.isdigit() else opts.max_body_bytes
        return body_cost(min(length, opts.max_body_bytes), opts.json_items)

    async def read_json(request: Request) -> Any:
        size = request.headers.get("content-length")
        if size is not None and size.isdigit() and int(size) > opts.max_body_bytes:
            raise HTTPError(413, f"the body has {size} bytes; this server takes at most "
                            f"{opts.max_body_bytes}", "too_large")
        scan = JSONBounds(opts.json_depth, opts.json_width, opts.json_items)
        chunks: list[bytes] = []
        refused: list[HTTPError] = []

        async def receive_all():
            got = 0
            async for chunk in request.stream():
                got += len(chunk)
                if got > opts.max_body_bytes:
                    raise HTTPError(413, f"the body exceeds {opts.max_body_bytes} bytes",
                                    "too_large", {"Connection": "close"})
                if refused:     # the rest of a refused body: read and dropped, so that its
                    continue    # client, still sending, can read the answer
                try:   # the bounds as it streams in: a body over them is never parsed
                    if len(chunk) > 16384:   # a large chunk: off the event loop
                        await asyncio.to_thread(scan.feed, chunk)
                    else:
                        scan.feed(chunk)
                except JSONBoundError as e:
                    refused.append(HTTPError(413, str(e), "too_large", {"Connection": "close"}))
                    chunks.clear()
                    continue
                chunks.append(chunk)

        try:
            await asyncio.wait_for(receive_all(), opts.body_timeout_s)
        except asyncio.TimeoutError:
            if refused:
                raise refused[0] from None
            raise HTTPError(408, f"the body was not sent within {opts.body_timeout_s:g} s",
                            "slow_body", {"Connection": "close"}) from None
        except ClientDisconnect:
            raise _ClientGone() from None
        if refused:
            raise refused[0]
        body = b"".join(chunks)
        del chunks[:]
        try:
            if len(body) > 65536:
                return await asyncio.to_thread(json.loads, body)
            return json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise HTTPError(400, f"the body is not valid JSON ({str(e).splitlines()[0]})",
                            "malformed") from None
        except RecursionError:
            raise HTTPError(400, "the body nests too deeply", "malformed") from None

    async def until_disconnect(request: Request) -> None:
        while True:
            msg = await request.receive()
            if msg["type"] == "http.disconnect":
                return

    def shutting_down(message: str = "the server is shutting down") -> HTTPError:
        return HTTPError(503, message, "shutting_down", {"Retry-After": "5",
                                                         "Connection": "close"})

    async def wait(request: Request, fut, endpoint: str, deadline: float) -> Any:
        """The future's result, or _ClientGone (after cancelling) when the client leaves. A
        request none of whose cells has started at its deadline is dropped (overloaded). A
        handler cancelled (uvicorn's shutdown timeout) cancels the request too."""
        wrapped = asyncio.wrap_future(fut)
        gone = asyncio.ensure_future(until_disconnect(request))
        try:
            done, _ = await asyncio.wait({wrapped, gone}, return_when=asyncio.FIRST_COMPLETED,
                                         timeout=max(0.0, deadline - time.monotonic()))
            if not done:   # its deadline: dropped if it has not started, else it runs on
                dispatcher.expire(fut)
                done, _ = await asyncio.wait({wrapped, gone},
                                             return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            dispatcher.cancel(fut)
            raise
        finally:
            gone.cancel()
        if wrapped in done:
            try:
                return wrapped.result()
            except ShuttingDown as e:
                raise shutting_down(str(e)) from None
            except QueueTimeout as e:
                raise overloaded(endpoint, str(e), e.retry_after) from None
        dispatcher.cancel(fut)
        wrapped.cancel()
        raise _ClientGone()

    def submit(jobs, endpoint: str) -> Any:
        if state["closing"]:
            raise shutting_down()
        try:
            return dispatcher.submit(jobs, wait=True)
        except TooLarge as e:
            raise HTTPError(413, str(e), "too_large") from None
        except ShuttingDown as e:
            raise shutting_down(str(e)) from None
        except QueueFull as e:
            raise overloaded(endpoint, str(e), e.retry_after) from None

    def gated(endpoint: str, fn):
        """Every POST: (a reward request: a reward slot, then) its share of the memory budget
        before its body is read, both held until it is answered (a reward request: until its
        thread is done), each waited for first come, first served, up to its deadline."""
        async def run(request: Request):
            if state["closing"]:
                raise shutting_down()
            if endpoint == "reward" and rewards is None:
                raise HTTPError(404, "this server loads no problems: start it with --problems "
                                "(and --tester for a tester's reward)", "no_rewards")
            deadline = deadline_for(endpoint)
            hold: dict = {"release": []}
            try:
                if endpoint == "reward":
                    # each one holds its parsed body and a thread while it is scored
                    await take(reward_slots, 1, deadline, endpoint, "reward slot")
                    state["pending_rewards"] += 1

                    def free_slot():
                        state["pending_rewards"] -= 1
                        reward_slots.release(1)
                    hold["release"].append(free_slot)
                n = await take(budget, cost_of(request), deadline, endpoint, "memory")
                hold["release"].append(lambda: budget.release(n))
                return await fn(request, deadline, hold)
            finally:
                def release(_=None):
                    for r in hold["release"]:
                        r()
                task = hold.get("task")
                if task is None or task.done():
                    release()
                else:
                    task.add_done_callback(release)
        return run

    # ---- endpoints -------------------------------------------------------------------------------
    async def execute(request: Request, deadline: float, hold: dict):
        body = await read_json(request)
        if isinstance(body, dict) and "jobs" in body:
            jobs = body["jobs"]
        elif isinstance(body, list):
            jobs = body
        elif isinstance(body, dict) and "programs" in body:
            jobs = [body]
        else:
            raise HTTPError(400, "the body must be a list of jobs, {\"jobs\": [...]}, or one job",
                            "malformed")
        if not isinstance(jobs, list):
            raise HTTPError(400, "'jobs' must be a list", "malformed")
        del body
        # validating many jobs takes a while: off the event loop, which serves the others
        fut = await asyncio.to_thread(submit, jobs, "execute") if len(jobs) > 16 else submit(
            jobs, "execute")
        del jobs
        results = await wait(request, fut, "execute", deadline)
        return {"results": results}

    async def run_code(request: Request, deadline: float, hold: dict):
        body = await read_json(request)
        try:
            made = sandboxfusion.to_job(body)
        except sandboxfusion.RunCodeError as e:
            raise HTTPError(400, str(e), "malformed") from None
        if isinstance(made, dict):
            return made
        job, marker = made
        fut = submit([job], "run_code")
        results = await wait(request, fut, "run_code", deadline)
        return sandboxfusion.from_result(results[0], marker)

    async def run_jupyter(request: Request, deadline: float, hold: dict):
        await read_json(request)
        return sandboxfusion.response("SandboxError", "coevo serve does not run Jupyter "
                                      "notebooks; use /run_code with language 'python'", None)

    async def reward(request: Request, deadline: float, hold: dict):
        body = await read_json(request)
        if state["closing"]:
            raise shutting_down()
        try:  # parsing thousands of labels takes a while: off the event loop
            texts, tasks, mismatch = await asyncio.to_thread(
                rewards.parse, body, opts.max_reward_items, opts.max_query_chars)
        except RewardError as e:
            raise HTTPError(400, str(e), "malformed") from None
        except RewardLimit as e:
            raise HTTPError(429, str(e), "too_many_new", {"Retry-After": "5"}) from None
        del body
        if state["closing"]:
            raise shutting_down()
        runner = _Runner(dispatcher, deadline)
        task = asyncio.get_running_loop().run_in_executor(reward_pool, rewards.score, texts,
                                                           tasks, runner)
        hold["task"] = task
        # retrieved even when nobody waits for it any more (client gone, shutdown)
        task.add_done_callback(lambda f: f.cancelled() or f.exception())
        gone = asyncio.ensure_future(until_disconnect(request))
        try:
            done, _ = await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            runner.cancel()
            raise
        finally:
            gone.cancel()
        if task not in done:
            runner.cancel()
            raise _ClientGone()
        try:
            values = task.result()
        except TooLarge as e:
            raise HTTPError(413, str(e), "too_large") from None
        except RewardLimit as e:
            raise HTTPError(429, str(e), "too_many_new", {"Retry-After": "5"}) from None
        except ShuttingDown as e:
            raise shutting_down(str(e)) from None
        except (QueueFull, QueueTimeout) as e:
            raise overloaded("reward", str(e), e.retry_after) from None
        rewards_out = [0.0 if v is None else float(v) for v in values]
        return {"rewards": rewards_out, "scores": rewards_out,
                "extra_logs": {"no_signal": [v is None for v in values],
                               "prompt_mismatch": mismatch}}

    async def health(request: Request):
        status = "closing" if state["closing"] else "ok"
        if opts.token and not request.scope.get("coevo_authorized"):
            return {"status": status}  # the deployment's details only to token holders
        return {"status": "closing" if state["closing"] else "ok", "backend": opts.backend,
                "slots": opts.slots, "launcher": opts.launcher,
                "queue_requests": dispatcher.queued_requests,
                "queue_cells": dispatcher.queued_cells,
                "waiting_requests": (budget.waiting + reward_slots.waiting
                                     + dispatcher.waiting_requests),
                "pending_rewards": state["pending_rewards"],
                "queue_mb": round((budget.capacity - budget.free) / (1 << 20), 1),
                "rewards": rewards is not None, "tester": opts.tester is not None,
                "tester_problems": len(rewards.tester.tests) if rewards and rewards.tester else 0,
                "tester_generated": rewards.generated if rewards else 0,
                "uptime_s": round(time.time() - state["started"], 1)}

    async def metrics_page(request: Request):
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def ping(request: Request):
        return PlainTextResponse("pong")

    def endpoint(name: str, fn):
        async def handler(request: Request):
            t0 = time.perf_counter()
            try:
                out = await fn(request)
                resp = out if isinstance(out, Response) else JSONResponse(out)
            except HTTPError as e:
                metrics.errors.labels(e.kind).inc()
                resp = JSONResponse({"error": str(e)}, status_code=e.status, headers=e.headers)
            except _ClientGone:
                metrics.errors.labels("client_gone").inc()
                resp = Response(status_code=499)
            except Exception as e:  # noqa: BLE001 - a bug: one line, the server lives on
                metrics.errors.labels("internal").inc()
                resp = JSONResponse({"error": f"internal error: {type(e).__name__}: "
                                     f"{str(e).splitlines()[0] if str(e) else ''}"},
                                    status_code=500)
            metrics.requests.labels(name, str(resp.status_code)).inc()
            metrics.latency.labels(name).observe(time.perf_counter() - t0)
            return resp
        return handler

    routes = [
        Route("/execute", endpoint("execute", gated("execute", execute)), methods=["POST"]),
        Route("/run_code", endpoint("run_code", gated("run_code", run_code)), methods=["POST"]),
        Route("/run_jupyter", endpoint("run_jupyter", gated("run_code", run_jupyter)),
              methods=["POST"]),
        Route("/reward", endpoint("reward", gated("reward", reward)), methods=["POST"]),
        Route("/get_reward", endpoint("reward", gated("reward", reward)), methods=["POST"]),
        Route("/health", endpoint("health", health), methods=["GET"]),
        Route("/metrics", endpoint("metrics", metrics_page), methods=["GET"]),
        Route("/v1/ping", endpoint("ping", ping), methods=["GET"]),
    ]

    def begin_shutdown() -> None:
        """At the signal (SIGINT/SIGTERM): new requests get 503 from now on; what is still
        unanswered when the grace runs out is dropped and answered 503."""
        if state["closing"]:
            return
        state["closing"] = True
        state["deadline"] = time.monotonic() + opts.grace_s
        loop = state.get("loop")
        if loop is not None:   # requests waiting for their turn: 503 now (from the loop's thread)
            loop.call_soon_threadsafe(budget.close)
            loop.call_soon_threadsafe(reward_slots.close)
        timer = threading.Timer(opts.grace_s, dispatcher.abort)
        timer.daemon = True
        timer.start()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        state["loop"] = asyncio.get_running_loop()
        yield
        begin_shutdown()  # a shutdown without a signal (tests, an embedding)
        left = max(0.0, state["deadline"] - time.monotonic())
        await asyncio.to_thread(dispatcher.wait_idle, left)
        dispatcher.abort()
        reward_pool.shutdown(wait=False, cancel_futures=True)
        if on_shutdown is not None:
            await asyncio.to_thread(on_shutdown)

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.metrics = metrics
    app.state.flags = state
    app.state.begin_shutdown = begin_shutdown
    return TokenGate(app, opts.token, metrics)


def _loopback_host(value: str) -> bool:
    """Whether a Host header names this machine's loopback (with or without a port)."""
    host = value.strip().lower()
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if host in ("localhost", "localhost.") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class TokenGate:
    """ASGI middleware in front of every request.

    A browser's request is refused (403): one with an ``Origin`` header (a web page's fetch or
    form), and, without a token, one whose ``Host`` is not a loopback name (DNS rebinding: a page
    of attacker.example resolved to 127.0.0.1). A POST must declare its body
    ``application/json`` (415), which a page cannot send cross-origin without a preflight.

    With a token, every path but /health and /v1/ping needs it, as ``Authorization: Bearer
    TOKEN``, ``X-Coevo-Token: TOKEN`` or a path prefix ``/t/TOKEN/`` (for clients that send no
    headers: SandboxFusion's, veRL's, OpenRLHF's); /health then tells callers without it only
    its status."""

    def __init__(self, app, token: str | None, metrics: _Metrics):
        self.app, self.token, self.metrics = app, token, metrics
        self.state = app.state

    async def _refuse(self, scope, receive, send, status: int, kind: str, message: str,
                      headers: dict | None = None):
        self.metrics.errors.labels(kind).inc()
        self.metrics.requests.labels(kind, str(status)).inc()
        resp = JSONResponse({"error": message}, status_code=status, headers=headers)
        await resp(scope, receive, send)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {}
        for k, v in scope.get("headers", []):
            headers.setdefault(k, v.decode("latin-1"))
        if b"origin" in headers:
            return await self._refuse(scope, receive, send, 403, "forbidden",
                                      "requests from web pages (an Origin header) are refused")
        if not self.token and not _loopback_host(headers.get(b"host", "localhost")):
            return await self._refuse(scope, receive, send, 403, "forbidden",
                                      "without a token this server answers only requests to a "
                                      "loopback host name (Host: 127.0.0.1 or localhost)")
        if scope.get("method") == "POST":
            ctype = headers.get(b"content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json" and not (ctype.startswith("application/")
                                                    and ctype.endswith("+json")):
                return await self._refuse(scope, receive, send, 415, "malformed",
                                          "the body must be sent as Content-Type: "
                                          f"application/json (got {ctype or 'none'!r})")
        if not self.token:
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        given = None
        if path.startswith("/t/"):
            rest = path[3:]
            given, _, tail = rest.partition("/")
            scope = dict(scope, path="/" + tail, raw_path=("/" + tail).encode())
            path = "/" + tail
        elif b"authorization" in headers and headers[b"authorization"][:7].lower() == "bearer ":
            given = headers[b"authorization"][7:].strip()
        elif b"x-coevo-token" in headers:
            given = headers[b"x-coevo-token"].strip()
        authorized = given is not None and hmac.compare_digest(
            given.encode("utf-8", "surrogateescape"), self.token.encode())
        if authorized or path in OPEN_PATHS:
            return await self.app(dict(scope, coevo_authorized=authorized), receive, send)
        return await self._refuse(scope, receive, send, 401, "unauthorized",
                                  "a token is required: Authorization: Bearer TOKEN, "
                                  "X-Coevo-Token, or the path prefix /t/TOKEN/",
                                  {"WWW-Authenticate": "Bearer"})
