"""One executor interface, and the factory every caller uses.

An executor turns jobs (n programs x t tests each, ``docs/EXECUTION.md``) into pass matrices.
The backends (``registry.py``, one record each) implement :class:`ExecutorProtocol` on the
execution core (``core.py``); the built-in ones:

- ``local`` (the default): :class:`~coevo_code.execution.executor.Executor`, warm fork-server
  slots on this machine;
- ``ray``: :class:`~coevo_code.execution.ray.RayExecutor`, the same slots inside Ray
  actors on the nodes of a Ray cluster (``pip install -e '.[ray]'``).

:func:`make_executor` picks one from plain options (``backend``, ``address`` and the backend's
own options), so that the command line, evaluation, training and the loaders name a backend
without knowing its class.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Protocol, runtime_checkable

from .registry import (
    BUILTIN,
    BackendError,
    backend_names,
    check_backend,
    check_options,
    get_backend,
)

BACKENDS = tuple(BUILTIN)  # the built-in backends' names (backend_names() lists every one)
__all__ = ["BACKENDS", "BackendError", "ExecutorBase", "ExecutorProtocol", "make_executor",
           "add_backend_arguments", "executor_from_args"]


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


def make_executor(backend: str = "local", address: str | None = None, **options
                  ) -> ExecutorProtocol:
    """The executor of backend ``backend`` (a name in the registry: ``local``, ``ray``), built
    from plain options.

    ``options`` are the backend's own (its record's ``options``; the local executor's
    ``slots``, ``launcher``, ``allow_unsafe``, ``use_uid``, ``preload``, ``heavy_preload``,
    ``chunk_tests``, ``disable``; the Ray backend applies them on every node, ``slots`` there is
    per node; default: the node's CPUs). ``address`` is the cluster's for a backend that takes
    one (Ray: ``ray://host:10001``, ``host:6379`` or ``auto``; without one it starts a local
    Ray instance, as ``ray.init()`` does). ``None`` values mean "the backend's default". An
    unknown backend or option, or an address for a backend that takes none, is a
    :class:`BackendError` of one line.
    """
    options = {k: v for k, v in options.items() if v is not None}
    backend = backend or "local"
    problem = check_backend(backend, address)
    if problem:
        raise BackendError(problem)
    check_options(backend, options)
    rec = get_backend(backend)
    if rec.takes_address:
        return rec.factory(address=address, **options)
    return rec.factory(**options)


def add_backend_arguments(parser) -> None:
    """``--backend`` and ``--address`` on a command that runs programs (execute, eval, rank)."""
    names = backend_names()
    parser.add_argument("--backend", default="local", choices=names,
                        help="where programs run: " + "; ".join(
                            f"{n}: {get_backend(n).help}" for n in names))
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
