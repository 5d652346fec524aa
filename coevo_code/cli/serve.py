"""``coevo serve``: the judge (and a trained tester) over HTTP for any trainer
(``docs/SERVICE.md``)."""

from __future__ import annotations

import os
import sys

from .base import PLUS, CLIError, Command, sandbox_flags


class ServeCommand(Command):
    name = "serve"
    help = "serve the judge over HTTP (coevo execute, SandboxFusion /run_code, OpenRLHF rewards)"

    def register(self, sub) -> None:
        s = self.add_parser(sub)
        s.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: %(default)s; any other needs a token)")
        s.add_argument("--port", type=int, default=8080, help="port (default: %(default)s; 0: any)")
        s.add_argument("--token", default=os.environ.get("COEVO_SERVE_TOKEN"),
                       help="token every request but /health must carry (default: "
                            "$COEVO_SERVE_TOKEN); required when --host is not loopback")
        s.add_argument("--slots", type=int, default=None, help="sandbox slots (default: CPU cores)")
        s.add_argument("--allow-unsafe", action="store_true",
                       help="run even where no isolation layer is available (unprotected!)")
        sandbox_flags(s)
        s.add_argument("--problems", action="append", default=[], metavar="NAME[=PATH]",
                       help="a benchmark whose problems rewards may name (repeatable), e.g. "
                            "humanevalplus=../shared/data/humanevalplus/HumanEvalPlus.jsonl.gz")
        s.add_argument("--max-tests", type=int, default=None,
                       help="gold reward: the first N gold tests of a problem (default: all)")
        s.add_argument("--tester", default=None,
                       help="a tester model: rewards on the tests it writes (once per problem)")
        s.add_argument("--engine", default="transformers", choices=("transformers", "vllm"),
                       help="the tester's generation engine")
        s.add_argument("--k-tests", type=int, default=8, help="tests the tester writes a problem")
        s.add_argument("--tester-cache", default=None,
                       help="file keeping the tester's tests across restarts")
        s.add_argument("--temperature", type=float, default=1.0)
        s.add_argument("--max-tokens", type=int, default=512)
        s.add_argument("--seed", type=int, default=0)
        g = s.add_argument_group("limits (a request asking for more gets these)")
        g.add_argument("--max-time-limit", type=float, default=10.0, help="CPU s per cell")
        g.add_argument("--max-wall-limit", type=float, default=30.0, help="wall s per cell")
        g.add_argument("--max-memory-mb", type=int, default=2048, help="MiB per cell")
        g.add_argument("--max-output-mb", type=float, default=16.0, help="MiB of stdout per cell")
        g.add_argument("--max-cells", type=int, default=100_000, help="cells per request")
        g.add_argument("--max-body-mb", type=float, default=32.0, help="request body size")
        g.add_argument("--max-jobs", type=int, default=4096,
                       help="jobs per /execute request, malformed ones included")
        g.add_argument("--max-response-mb", type=float, default=64.0,
                       help="outputs a request may ask back (return_outputs: 64 KiB per cell "
                            "counted) (default: %(default)s)")
        g.add_argument("--queue-response-mb", type=float, default=512.0,
                       help="the same over every queued request, then 429 "
                            "(default: %(default)s)")
        g.add_argument("--max-reward-items", type=int, default=4096,
                       help="completions per reward request")
        g.add_argument("--max-query-chars", type=int, default=1 << 20,
                       help="characters of one reward query or completion")
        g.add_argument("--max-pending-rewards", type=int, default=256,
                       help="reward requests scored at once, then 429 (default: %(default)s)")
        g.add_argument("--max-connections", type=int, default=1024,
                       help="open connections and requests, then 503 (default: %(default)s)")
        g.add_argument("--tester-max-new", type=int, default=8,
                       help="--tester: problems without tests yet one request may bring (more: "
                            "429) (default: %(default)s)")
        g.add_argument("--tester-max-inline", type=int, default=1024,
                       help="--tester: problems given in requests whose tests are kept (the "
                            "oldest forgotten first) (default: %(default)s)")
        g.add_argument("--queue-cells", type=int, default=1_000_000,
                       help="cells queued before 429 (default: %(default)s)")
        g.add_argument("--queue-requests", type=int, default=1024,
                       help="requests queued before 429 (default: %(default)s)")
        g.add_argument("--grace", type=float, default=30.0,
                       help="seconds to finish in-flight requests on SIGTERM")

    def run(self, args, argv: list[str]) -> int:
        from ..execution import IsolationError
        from ..serve.app import ServeOptions
        from ..serve.dispatcher import Limits
        from ..serve.server import ServeError, bind, check_exposure, make_executors, serve

        for flag in ("max_cells", "queue_cells", "queue_requests", "k_tests", "max_reward_items",
                     "max_jobs", "max_query_chars", "max_pending_rewards", "max_connections",
                     "tester_max_new", "tester_max_inline"):
            if getattr(args, flag) < 1:
                raise CLIError(f"--{flag.replace('_', '-')} must be >= 1")
        for flag in ("max_response_mb", "queue_response_mb", "grace"):
            if not getattr(args, flag) > 0:
                raise CLIError(f"--{flag.replace('_', '-')} must be > 0")
        if args.max_tests is not None and args.max_tests < 1:
            raise CLIError("--max-tests must be >= 1")
        try:
            check_exposure(args.host, args.token)
            sock = bind(args.host, args.port)
        except ServeError as e:
            raise CLIError(str(e))
        try:
            executors = make_executors(args.backend, args.address, args.slots,
                                       launcher=args.launcher, allow_unsafe=args.allow_unsafe,
                                       use_uid=not args.no_uid)
        except (IsolationError, RuntimeError, ValueError, ImportError) as e:
            sock.close()
            raise CLIError(str(e).splitlines()[0])
        try:
            rewards = self._rewards(args, executors[0])
        except CLIError:
            sock.close()
            for ex in executors:
                ex.close()
            raise
        iso = executors[0].isolation
        slots = iso.get("slots", 1) * (len(executors) if args.backend == "local" else 1)
        options = ServeOptions(token=args.token, max_body_bytes=int(args.max_body_mb * (1 << 20)),
                               max_reward_items=args.max_reward_items, backend=args.backend,
                               slots=slots, launcher=iso.get("launcher", ""), tester=args.tester,
                               grace_s=args.grace, max_query_chars=args.max_query_chars,
                               max_pending_rewards=args.max_pending_rewards)
        limits = Limits(time_limit_s=args.max_time_limit, wall_limit_s=args.max_wall_limit,
                        memory_limit_mb=args.max_memory_mb, output_limit_mb=args.max_output_mb,
                        cells_per_request=args.max_cells, queue_cells=args.queue_cells,
                        queue_requests=args.queue_requests, jobs_per_request=args.max_jobs,
                        output_bytes_per_request=int(args.max_response_mb * (1 << 20)),
                        queue_output_bytes=int(args.queue_response_mb * (1 << 20)))
        serve(sock, executors, limits, options, rewards, grace_s=args.grace,
              announce=lambda line: print(line, file=sys.stderr, flush=True),
              max_connections=args.max_connections)
        return 0

    @staticmethod
    def _rewards(args, executor):
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
                       max_new_per_request=args.tester_max_new,
                       max_inline=args.tester_max_inline)
