"""One executor interface, and the factory every caller uses.

An executor turns jobs (n programs x t tests each, ``docs/EXECUTION.md``) into pass matrices.
Two backends implement :class:`ExecutorProtocol`:

- ``local`` (the default): :class:`~coevo_code.execution.executor.Executor`, warm fork-server
  slots on this machine;
- ``ray``: :class:`~coevo_code.execution.ray_backend.RayExecutor`, the same slots inside Ray
  actors on the nodes of a Ray cluster (``pip install -e '.[ray]'``).

:func:`make_executor` picks one from plain options (``backend``, ``address`` and the slot and
launcher options), so that the command line, evaluation, training and the loaders name a backend
without knowing its class.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Protocol, runtime_checkable

BACKENDS = ("local", "ray")


@runtime_checkable
class ExecutorProtocol(Protocol):
    """What every backend offers (the local :class:`Executor` is the reference).

    - ``run(jobs, progress=None)``: one result dict per job, in job order (``passed``,
      ``outcomes``, ``outputs`` when asked, ``seconds``; a malformed job gives ``{"id", "error"}``);
      ``progress``, if given, is called with the number of cells finished after each unit;
    - ``stats()``: counters, at least ``{"cells": n}``, the programs run so far;
    - ``isolation``: the isolation report (launcher, slots, layers) ``coevo doctor`` prints;
    - ``close()``; and use as a context manager.
    """

    isolation: dict

    def run(self, jobs: Iterable[Any],
            progress: Callable[[int], None] | None = None) -> list[dict]: ...

    def stats(self) -> dict: ...

    def close(self) -> None: ...

    def __enter__(self) -> "ExecutorProtocol": ...

    def __exit__(self, *exc) -> None: ...


class ExecutorBase:
    """What every backend shares: use as a context manager, closed on exit (and, best effort,
    when collected)."""

    def close(self) -> None:  # pragma: no cover - every backend defines it
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit anything may be half torn down
            pass


class BackendError(ValueError):
    """An unknown backend, or options a backend does not take."""


def make_executor(backend: str = "local", address: str | None = None, **options
                  ) -> ExecutorProtocol:
    """The executor for ``backend`` (``local`` or ``ray``), built from plain options.

    ``options`` are the local executor's (``slots``, ``launcher``, ``allow_unsafe``, ``use_uid``,
    ``preload``, ``heavy_preload``, ``chunk_tests``, ``disable``); the Ray backend applies them
    on every node (``slots`` there is per node; default: the node's CPUs). ``address`` is the Ray
    cluster's (``ray://host:10001``, ``host:6379`` or ``auto``); without one the Ray backend starts
    a local Ray instance, as ``ray.init()`` does. ``None`` values mean "the backend's default".
    """
    options = {k: v for k, v in options.items() if v is not None}
    backend = backend or "local"
    if backend == "local":
        if address:
            raise BackendError(f"--address {address!r} is for the ray backend; the local "
                               "backend runs on this machine (pass --backend ray)")
        from .executor import Executor
        return Executor(**options)
    if backend == "ray":
        from .ray_backend import RayExecutor
        return RayExecutor(address=address, **options)
    raise BackendError(f"unknown executor backend {backend!r}; choose from {', '.join(BACKENDS)}")


def add_backend_arguments(parser) -> None:
    """``--backend`` and ``--address`` on a command that runs programs (execute, eval, rank)."""
    parser.add_argument("--backend", default="local", choices=BACKENDS,
                        help="where programs run: local slots (default) or a Ray cluster")
    parser.add_argument("--address", default=None,
                        help="ray backend: the cluster's address (default: start a local Ray "
                             "instance)")


def executor_from_args(args) -> ExecutorProtocol:
    """The executor a command's sandbox flags ask for (``--backend``, ``--address``, ``--slots``,
    ``--launcher``, ``--allow-unsafe``, ``--no-uid``); flags a command lacks take their
    defaults."""
    return make_executor(getattr(args, "backend", "local"), getattr(args, "address", None),
                         slots=getattr(args, "slots", None),
                         launcher=getattr(args, "launcher", "auto"),
                         allow_unsafe=getattr(args, "allow_unsafe", False),
                         use_uid=not getattr(args, "no_uid", False))
