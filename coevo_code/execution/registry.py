"""The backend registry: one record per executor backend, read by the factory, the command
line, the training config, the training step and ``coevo doctor``.

A backend is one module that defines its executor class (see
:class:`~coevo_code.execution.backends.ExecutorProtocol`) and a :class:`Backend` record; it is
known by one line here (``BUILTIN``) or one call, ``register_backend(name, "module:RECORD")``.
Records are imported when first asked for, so naming a backend (``ray``) imports nothing of
its library until its executor is built.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable


class BackendError(ValueError):
    """An unknown backend, or options a backend does not take."""


@dataclass(frozen=True)
class Processes:
    """The processes of a run that open executors at once: all of them (``world_size`` x
    ``agents``) on a shared pool, ``local_world_size`` of them on this machine."""
    world_size: int = 1
    local_world_size: int = 1
    agents: int = 1


@dataclass(frozen=True)
class Backend:
    """One executor backend.

    Attributes:
        name: what ``--exec_backend`` / ``exec_backend`` call it.
        factory: its executor class (or a function), called with the options (and ``address``
            when ``takes_address``).
        options: the option names it takes (``slots``, ``launcher``, ...); others are refused.
        help: one line for ``--exec_backend``'s help.
        takes_address: whether it runs somewhere named by ``--exec_address`` (a cluster).
        share: ``share(options, processes) -> options``: the options of one of several
            processes that open this backend at once (its part of the slots), or None when each
            process takes what it is given.
        doctor: ``doctor(address, launcher=..., use_uid=...) -> str``: what ``coevo doctor
            --exec_backend NAME`` prints, or None for the local report (this machine's layers).
    """
    name: str
    factory: Callable[..., Any]
    options: frozenset
    help: str = ""
    takes_address: bool = False
    share: Callable[[dict, Processes], dict] | None = None
    doctor: Callable[..., str] | None = None


# name -> "module:attribute" of its record; the built-in backends
BUILTIN = {
    "local": "coevo_code.execution.executor:BACKEND",
    "ray": "coevo_code.execution.ray:BACKEND",
}
_PATHS: dict[str, str] = dict(BUILTIN)
_LOADED: dict[str, Backend] = {}


def register_backend(name: str, record: str | Backend) -> None:
    """Make backend ``name`` known: ``record`` is a :class:`Backend` or the ``"module:attr"``
    path of one (imported when first asked for)."""
    if isinstance(record, Backend):
        if record.name != name:
            raise ValueError(f"backend record {record.name!r} registered as {name!r}")
        _LOADED[name] = record
        _PATHS[name] = ""
    else:
        _PATHS[name] = record
        _LOADED.pop(name, None)


def unregister_backend(name: str) -> None:
    """Forget backend ``name`` (tests register toy backends for a while)."""
    _PATHS.pop(name, None)
    _LOADED.pop(name, None)


def backend_names() -> tuple[str, ...]:
    """The names of every known backend, built-in first."""
    return tuple(_PATHS)


def unknown_backend(name: str, flag: str = "--exec_backend") -> str:
    return f"unknown executor backend {name!r} ({flag}); choose from {', '.join(_PATHS)}"


def get_backend(name: str) -> Backend:
    """The record of backend ``name`` (BackendError, one line, when none is known)."""
    rec = _LOADED.get(name)
    if rec is not None:
        return rec
    path = _PATHS.get(name)
    if path is None:
        raise BackendError(unknown_backend(name))
    module, _, attr = path.partition(":")
    rec = getattr(importlib.import_module(module), attr)
    if not isinstance(rec, Backend) or rec.name != name:
        raise BackendError(f"{path} is not the record of backend {name!r}")
    _LOADED[name] = rec
    return rec


def check_backend(name: str, address: str | None = None, *, backend_flag: str = "--exec_backend",
                  address_flag: str = "--exec_address") -> str | None:
    """What is wrong with running on backend ``name`` at ``address``, in one line naming the
    flags given; None when nothing is."""
    if name not in _PATHS:
        return unknown_backend(name, backend_flag)
    if address and not get_backend(name).takes_address:
        takers = [n for n in _PATHS if get_backend(n).takes_address]
        return (f"{address_flag} {address!r} is for the {' or '.join(takers)} backend; the "
                f"{name} backend runs on this machine (pass {backend_flag} {takers[0]})")
    return None


def check_options(name: str, options: dict) -> None:
    """BackendError (one line) unless backend ``name`` takes every option in ``options``."""
    rec = get_backend(name)
    extra = sorted(set(options) - rec.options)
    if extra:
        raise BackendError(f"the {name} backend takes no option {', '.join(map(repr, extra))}; "
                           f"it takes {', '.join(sorted(rec.options))}")


def share_options(options: dict, processes: Processes) -> dict:
    """``options`` (with ``backend``) as one of ``processes`` opens its executor: the backend's
    own share arithmetic, or the options unchanged."""
    rec = get_backend(options.get("backend") or "local")
    return rec.share(dict(options), processes) if rec.share is not None else dict(options)
