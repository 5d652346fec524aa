"""``coevo serve``: the judge (and a trained tester) over HTTP for any trainer
(``docs/SERVICE.md``)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from ..argv import option
from ..execution.options import ExecutionOptions
from .base import PLUS, CLIError, OptionsCommand


@dataclass
class ServeArgs:
    """``coevo serve``: where it listens, the problems rewards may name, and the tester."""

    host: str = option("127.0.0.1", "address to listen on (any other than loopback needs a "
                                    "token)")
    port: int = option(8080, "port (0: any)")
    token: str | None = option(default_factory=lambda: os.environ.get("COEVO_SERVE_TOKEN"),
                               help="token every request but /health must carry (default: "
                                    "$COEVO_SERVE_TOKEN); required when --host is not loopback")
    problems: list[str] = option(default_factory=list,
                                 help="benchmarks whose problems rewards may name, NAME[=PATH] "
                                      "(several, or the flag repeated), e.g. humanevalplus=../"
                                      "shared/data/humanevalplus/HumanEvalPlus.jsonl.gz")
    max_tests: int | None = option(None, "gold reward: the first N gold tests of a problem "
                                         "(default: all)")
    tester: str | None = option(None, "a tester model: rewards on the tests it writes (once per "
                                      "problem)")
    engine: str = option("transformers", "the tester's generation engine",
                         choices=["transformers", "vllm"])
    k_tests: int = option(8, "tests the tester writes a problem")
    tester_cache: str | None = option(None, "file keeping the tester's tests across restarts")
    temperature: float = option(1.0, "the tester's sampling temperature")
    max_tokens: int = option(512, "the tester's new tokens per completion at most")
    seed: int = option(0, "the tester's sampling seed")

    def __post_init__(self):
        if self.k_tests < 1:
            raise ValueError("--k_tests must be >= 1")
        if self.max_tests is not None and self.max_tests < 1:
            raise ValueError("--max_tests must be >= 1")


@dataclass
class ServeLimits:
    """What one request, and the queue, may ask for (a request asking for more gets these)."""

    _argument_group_name = "limits (a request asking for more gets these)"

    max_time_limit: float = option(10.0, "CPU s per cell")
    max_wall_limit: float = option(30.0, "wall s per cell")
    max_memory_mb: int = option(2048, "MiB per cell")
    max_output_mb: float = option(16.0, "MiB of stdout per cell")
    max_cells: int = option(100_000, "cells per request")
    max_body_mb: float = option(32.0, "request body size")
    max_jobs: int = option(4096, "jobs per /execute request, malformed ones included")
    max_response_mb: float = option(64.0, "outputs a request may ask back (return_outputs: 64 "
                                          "KiB per cell counted)")
    queue_response_mb: float = option(512.0, "the same over every queued request (more wait "
                                               "their turn)")
    max_reward_items: int = option(4096, "completions per reward request")
    max_query_chars: int = option(1 << 20, "characters of one reward query or completion")
    max_pending_rewards: int = option(256, "reward requests scored at once (more wait their "
                                           "turn)")
    max_connections: int = option(8192, "open connections, waiting requests included, then 503 "
                                        "(size it to the trainer's requests in flight)")
    max_json_depth: int = option(64, "nesting of a body's JSON (checked as it streams in)")
    max_json_width: int = option(100_000, "items of one JSON array or object of a body")
    max_json_items: int = option(1_000_000, "JSON items (array elements, object members, "
                                            "arrays and objects) in a body")
    body_timeout: float = option(60.0, "seconds a client may take to send a body, then 408")
    header_timeout: float = option(30.0, "seconds a client may take to send a request's line "
                                         "and headers, then 408 and the connection closed")
    queue_mb: float = option(2048.0, "memory budget of the requests being read, parsed, queued "
                                     "and run (more wait their turn, their bodies unread)")
    queue_timeout: float = option(120.0, "seconds a request may wait for its turn before any of "
                                         "its cells starts, then 503 and nothing of it runs")
    run_code_queue_timeout: float = option(15.0, "the same for /run_code, then 504 (veRL's "
                                                 "client waits 30 s and retries 504 only)")
    tester_max_new: int = option(8, "--tester: problems without tests yet one request may bring "
                                    "(more: 429)")
    tester_max_inline: int = option(1024, "--tester: problems given in requests whose tests are "
                                          "kept (the oldest forgotten first)")
    queue_cells: int = option(1_000_000, "cells queued (more wait their turn)")
    queue_requests: int = option(1024, "requests queued (more wait their turn)")
    grace: float = option(30.0, "seconds to finish in-flight requests on SIGTERM")

    def __post_init__(self):
        for flag in ("max_cells", "queue_cells", "queue_requests", "max_reward_items",
                     "max_jobs", "max_query_chars", "max_pending_rewards", "max_connections",
                     "tester_max_new", "tester_max_inline", "max_json_depth", "max_json_width",
                     "max_json_items"):
            if getattr(self, flag) < 1:
                raise ValueError(f"--{flag} must be >= 1")
        for flag in ("max_response_mb", "queue_response_mb", "grace", "body_timeout",
                     "header_timeout", "queue_mb",
                     "queue_timeout", "run_code_queue_timeout", "max_body_mb"):
            if not getattr(self, flag) > 0:
                raise ValueError(f"--{flag} must be > 0")


class ServeCommand(OptionsCommand):
    name = "serve"
    help = "serve the judge over HTTP (coevo execute, SandboxFusion /run_code, OpenRLHF rewards)"
    options = (ServeArgs, ServeLimits, ExecutionOptions)

    def main(self, args: ServeArgs, lim: ServeLimits, execution: ExecutionOptions) -> int:
        from ..execution import IsolationError
        from ..serve.app import ServeOptions
        from ..serve.dispatcher import Limits
        from ..serve.server import ServeError, bind, check_exposure, make_executors, serve

        try:
            check_exposure(args.host, args.token)
            sock = bind(args.host, args.port)
        except ServeError as e:
            raise CLIError(str(e))
        try:
            executors = make_executors(execution.exec_backend, execution.exec_address,
                                       execution.exec_slots, launcher=execution.exec_launcher,
                                       allow_unsafe=execution.exec_allow_unsafe,
                                       use_uid=not execution.exec_no_uid)
        except (IsolationError, RuntimeError, ValueError, ImportError) as e:
            sock.close()
            raise CLIError(str(e).splitlines()[0])
        try:
            rewards = self._rewards(args, lim, executors[0])
        except CLIError:
            sock.close()
            for ex in executors:
                ex.close()
            raise
        iso = executors[0].isolation
        slots = iso.get("slots", 1) * (len(executors) if execution.exec_backend == "local"
                                       else 1)
        options = ServeOptions(token=args.token, max_body_bytes=int(lim.max_body_mb * (1 << 20)),
                               max_reward_items=lim.max_reward_items,
                               backend=execution.exec_backend,
                               slots=slots, launcher=iso.get("launcher", ""), tester=args.tester,
                               grace_s=lim.grace, max_query_chars=lim.max_query_chars,
                               max_pending_rewards=lim.max_pending_rewards,
                               queue_timeout_s=lim.queue_timeout,
                               run_code_queue_timeout_s=lim.run_code_queue_timeout,
                               queue_bytes=int(lim.queue_mb * (1 << 20)),
                               body_timeout_s=lim.body_timeout, json_depth=lim.max_json_depth,
                               json_width=lim.max_json_width, json_items=lim.max_json_items)
        limits = Limits(time_limit_s=lim.max_time_limit, wall_limit_s=lim.max_wall_limit,
                        memory_limit_mb=lim.max_memory_mb, output_limit_mb=lim.max_output_mb,
                        cells_per_request=lim.max_cells, queue_cells=lim.queue_cells,
                        queue_requests=lim.queue_requests, jobs_per_request=lim.max_jobs,
                        output_bytes_per_request=int(lim.max_response_mb * (1 << 20)),
                        queue_output_bytes=int(lim.queue_response_mb * (1 << 20)))
        serve(sock, executors, limits, options, rewards, grace_s=lim.grace,
              announce=lambda line: print(line, file=sys.stderr, flush=True),
              max_connections=lim.max_connections, header_timeout_s=lim.header_timeout)
        return 0

    @staticmethod
    def _rewards(args: ServeArgs, lim: ServeLimits, executor):
        """The reward service: on the loaded benchmarks' problems, and on problems that requests
        give in their labels (so it exists even with no --problems)."""
        from ..generation.engines import EngineError, Sampling, make_engine
        from ..serve.rewards import Rewards
        from ..tasks import LoaderError, load_tasks

        sets = {}
        for spec in args.problems:
            name, _, path = spec.partition("=")
            try:
                opts = {"executor": executor} if name.lower().replace("-", "") in PLUS else {}
                sets[name] = list(load_tasks(name, path or None, **opts))
            except (LoaderError, OSError) as e:
                raise CLIError(f"--problems {spec}: {str(e).splitlines()[0]}")
        engine = None
        if args.tester:
            try:
                engine = make_engine(args.engine, args.tester, Sampling(
                    temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed))
            except EngineError as e:
                raise CLIError(str(e))
        if "request" in sets:
            raise CLIError("--problems request: 'request' is reserved (problems given in "
                           "requests are keyed request:HASH); name the benchmark otherwise")
        return Rewards(sets, max_tests=args.max_tests or 1_000_000, engine=engine,
                       k_tests=args.k_tests, cache_path=args.tester_cache,
                       max_new_per_request=lim.tester_max_new,
                       max_inline=lim.tester_max_inline)
