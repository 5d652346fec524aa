"""Sandboxed execution: programs x tests -> pass matrices (host side; see sandbox/ for the rest)."""

from ..sandbox.protocol import OUTCOMES  # the result schema's outcome codes: the sandbox's own
from .backends import BACKENDS, BackendError, ExecutorProtocol, make_executor
from .executor import DEFAULT_HEAVY_PRELOAD, DEFAULT_PRELOAD, Executor, IsolationError
from .jobs import Job, JobError, parse_job
from .launchers import choose_launcher
from .registry import Backend, backend_names, get_backend, register_backend

__all__ = ["Executor", "ExecutorProtocol", "make_executor", "BACKENDS", "BackendError",
           "IsolationError", "Job", "JobError", "OUTCOMES", "parse_job",
           "choose_launcher", "DEFAULT_PRELOAD", "DEFAULT_HEAVY_PRELOAD", "Backend",
           "backend_names", "get_backend", "register_backend"]
