"""The HTTP side of ``coevo serve``: a Starlette application over a :class:`Dispatcher`.

Endpoints (``docs/SERVICE.md``): ``POST /execute`` (``coevo execute``'s jobs and results),
``POST /run_code`` (SandboxFusion, Python), ``POST /reward`` and ``POST /get_reward`` (OpenRLHF's
remote reward model), ``GET /health``, ``GET /metrics`` (Prometheus), ``GET /v1/ping``.

Every request is read up to the body limit, parsed, clamped and queued without blocking the
event loop on the sandbox; its answer comes when its last cell is in. A client that goes away
cancels what of its request has not started. Errors are JSON ``{"error": "one line"}`` with a
4xx status (401 no token, 400 malformed, 403 a browser's request (an ``Origin`` header) or,
without a token, a ``Host`` that is not a loopback name, 413 too large, 415 a POST body not
declared ``application/json``, 429 queue full with ``Retry-After``, 503 shutting down).
"""

from __future__ import annotations

import asyncio
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
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from . import sandboxfusion
from .dispatcher import Dispatcher, QueueFull, ShuttingDown, TooLarge
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
    max_pending_rewards: int = 256    # reward requests being scored at once, then 429


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
        Gauge("coevo_serve_cancelled_cells", "cells dropped because their client went away",
              registry=r).set_function(lambda: dispatcher.cancelled_cells)


class _ClientGone(Exception):
    pass


def create_app(dispatcher: Dispatcher, rewards: Rewards | None = None,
               options: ServeOptions | None = None, on_shutdown=None) -> Starlette:
    """The application. ``on_shutdown`` runs after the last request is answered."""
    opts = options or ServeOptions()
    metrics = _Metrics(dispatcher)
    dispatcher.on_cells = metrics.cells.inc
    state = {"closing": False, "started": time.time(), "deadline": None, "pending_rewards": 0}
    # reward requests run TesterReward, which blocks on its cells: one thread each while they
    # wait (asyncio's default pool has cores + 4 threads, too few for OpenRLHF's one-sample
    # requests); the queue bounds how many can wait
    reward_pool = concurrent.futures.ThreadPoolExecutor(max_workers=256,
                                                        thread_name_prefix="coevo-reward")

    async def read_json(request: Request) -> Any:
        size = request.headers.get("content-length")
        if size is not None and size.isdigit() and int(size) > opts.max_body_bytes:
            raise HTTPError(413, f"the body has {size} bytes; this server takes at most "
                            f"{opts.max_body_bytes}", "too_large")
        chunks, got = [], 0
        async for chunk in request.stream():
            got += len(chunk)
            if got > opts.max_body_bytes:
                raise HTTPError(413, f"the body exceeds {opts.max_body_bytes} bytes", "too_large")
            chunks.append(chunk)
        body = b"".join(chunks)
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

    async def wait(request: Request, fut, cancel) -> Any:
        """The future's result, or _ClientGone (after cancelling) when the client leaves. A
        handler cancelled (uvicorn's shutdown timeout) cancels the request too."""
        wrapped = asyncio.wrap_future(fut)
        gone = asyncio.ensure_future(until_disconnect(request))
        try:
            done, _ = await asyncio.wait({wrapped, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            cancel()
            raise
        finally:
            gone.cancel()
        if wrapped in done:
            try:
                return wrapped.result()
            except ShuttingDown as e:
                raise shutting_down(str(e)) from None
        cancel()
        wrapped.cancel()
        raise _ClientGone()

    def submit(jobs) -> Any:
        if state["closing"]:
            raise shutting_down()
        try:
            return dispatcher.submit(jobs)
        except TooLarge as e:
            raise HTTPError(413, str(e), "too_large") from None
        except ShuttingDown as e:
            raise shutting_down(str(e)) from None
        except QueueFull as e:
            raise HTTPError(429, str(e), "queue_full",
                            {"Retry-After": str(e.retry_after)}) from None

    # ---- endpoints -------------------------------------------------------------------------------
    async def execute(request: Request):
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
        # validating many jobs takes a while: off the event loop, which serves the others
        fut = await asyncio.to_thread(submit, jobs) if len(jobs) > 16 else submit(jobs)
        results = await wait(request, fut, lambda: dispatcher.cancel(fut))
        return {"results": results}

    async def run_code(request: Request):
        body = await read_json(request)
        try:
            made = sandboxfusion.to_job(body)
        except sandboxfusion.RunCodeError as e:
            raise HTTPError(400, str(e), "malformed") from None
        if isinstance(made, dict):
            return made
        job, marker = made
        fut = submit([job])
        results = await wait(request, fut, lambda: dispatcher.cancel(fut))
        return sandboxfusion.from_result(results[0], marker)

    async def run_jupyter(request: Request):
        await read_json(request)
        return sandboxfusion.response("SandboxError", "coevo serve does not run Jupyter "
                                      "notebooks; use /run_code with language 'python'", None)

    async def reward(request: Request):
        if rewards is None:
            raise HTTPError(404, "this server loads no problems: start it with --problems "
                            "(and --tester for a tester's reward)", "no_rewards")
        if state["closing"]:
            raise shutting_down()
        # bounded: each one holds its parsed body and a thread while it is scored
        if state["pending_rewards"] >= opts.max_pending_rewards:
            raise HTTPError(429, f"{state['pending_rewards']} reward requests are being scored; "
                            f"this server scores at most {opts.max_pending_rewards} at once",
                            "queue_full", {"Retry-After": "1"})
        state["pending_rewards"] += 1
        hold: dict = {}

        def release(_=None):
            state["pending_rewards"] -= 1

        try:
            return await score_reward(request, hold)
        finally:
            # counted until its thread is done, not only until it is answered (a client gone)
            task = hold.get("task")
            if task is None or task.done():
                release()
            else:
                task.add_done_callback(release)

    async def score_reward(request: Request, hold: dict):
        body = await read_json(request)
        try:  # parsing thousands of labels takes a while: off the event loop
            texts, tasks, mismatch = await asyncio.to_thread(
                rewards.parse, body, opts.max_reward_items, opts.max_query_chars)
        except RewardError as e:
            raise HTTPError(400, str(e), "malformed") from None
        except RewardLimit as e:
            raise HTTPError(429, str(e), "queue_full", {"Retry-After": "5"}) from None
        del body
        if state["closing"]:
            raise shutting_down()
        runner = _Runner(dispatcher)
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
            raise HTTPError(429, str(e), "queue_full", {"Retry-After": "5"}) from None
        except ShuttingDown as e:
            raise shutting_down(str(e)) from None
        except QueueFull as e:
            raise HTTPError(429, str(e), "queue_full", {"Retry-After": str(e.retry_after)}
                            ) from None
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
        Route("/execute", endpoint("execute", execute), methods=["POST"]),
        Route("/run_code", endpoint("run_code", run_code), methods=["POST"]),
        Route("/run_jupyter", endpoint("run_jupyter", run_jupyter), methods=["POST"]),
        Route("/reward", endpoint("reward", reward), methods=["POST"]),
        Route("/get_reward", endpoint("reward", reward), methods=["POST"]),
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
        timer = threading.Timer(opts.grace_s, dispatcher.abort)
        timer.daemon = True
        timer.start()

    @contextlib.asynccontextmanager
    async def lifespan(app):
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
