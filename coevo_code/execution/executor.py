"""The host side of the sandbox: slots, scheduling, verdicts.

``Executor.run(jobs)`` turns jobs (n programs x t tests each) into pass matrices. Each slot is one
fork server (``sandbox/server.py``) started once inside its isolation boundary and reused; work is
cut into units of one program against a chunk of tests, and one host thread per slot feeds its
server. A server that dies or stops answering is replaced; its unit is retried once, then its cells
become ``sandbox_error``. Nothing a program does reaches other cells' verdicts.
"""

from __future__ import annotations

import logging
import marshal
import os
import secrets
import struct
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable

from ..sandbox.server import DEFAULT_HASH_SEED, empty_dir
from .backends import ExecutorBase
from .core import (UnitQueue, copy_verdicts, finish_batch, plan_units, run_unit, same_programs,
                   start_batch)
from .launchers import DISK_CAP_MB, Channel, DirectLauncher, Launcher, choose_launcher
from .registry import Backend, Processes

log = logging.getLogger(__name__)

DEFAULT_PRELOAD = ("collections", "itertools", "functools", "heapq", "bisect", "math",
                   "re", "string", "random", "fractions", "decimal", "statistics", "typing",
                   "datetime", "copy", "operator", "array", "dataclasses", "json", "io",
                   "threading", "ast")
# Imported by a separate sub-server per slot, which gets only the programs that import them: a
# server holding numpy forks and exits about twice as slowly.
DEFAULT_HEAVY_PRELOAD = ("numpy",)


# Servers are spawned from one long-lived thread: bubblewrap's --die-with-parent (a parent-death
# signal) fires when the *thread* that forked it exits, which would kill a server started from a
# short-lived worker thread.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coevo-spawner")


class IsolationError(RuntimeError):
    """No isolation layer is available and running unprotected was not asked for."""


class SlotDied(RuntimeError):
    pass


class Slot:
    """One fork server and its framed protocol."""

    def __init__(self, launcher: Launcher, index: int, base: str, preload, use_uid: bool,
                 heavy_preload=()):
        self.launcher = launcher
        self.index = index
        self.cfg = launcher.slot_config(index, base, preload, use_uid, heavy_preload)
        self.channel: Channel | None = None
        self.hello: dict = {}

    def start(self, timeout: float = 60.0) -> dict:
        self.channel = _SPAWNER.submit(self.launcher.start, self.cfg).result()
        try:
            self.hello = self._recv(timeout)
            if "error" in self.hello:
                raise SlotDied(self.hello["error"])
        except SlotDied as e:
            said = self.channel.stderr_tail() if self.channel is not None else ""
            self.close()
            raise RuntimeError(f"the sandbox server of slot {self.index} did not start "
                               f"({self.launcher.name} launcher): {e}"
                               + (f" ({said})" if said else "")) from None
        return self.hello

    def close(self) -> None:
        if self.channel is not None:
            self.channel.kill()
            self.channel = None

    def restart(self) -> None:
        self.close()
        self.start()

    def _read_exact(self, n: int, deadline: float) -> bytes:
        chunks = []
        while n:
            try:
                b = self.channel.read(min(n, 1 << 20), deadline - time.monotonic())
            except TimeoutError:
                raise SlotDied("no answer before the deadline") from None
            if not b:
                raise SlotDied("the server closed its pipe")
            chunks.append(b)
            n -= len(b)
        return b"".join(chunks)

    def _recv(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        (n,) = struct.unpack(">I", self._read_exact(4, deadline))
        return marshal.loads(self._read_exact(n, deadline))

    def call(self, request: dict, timeout: float) -> dict:
        data = marshal.dumps(request)
        try:
            self.channel.write(struct.pack(">I", len(data)) + data)
        except OSError as e:
            raise SlotDied(f"write failed: {e}") from None
        return self._recv(timeout)


class Executor(ExecutorBase):
    """Run untrusted programs against tests, in parallel slots, each isolated.

    Args:
        slots: number of fork servers (default: the CPU cores available to this process).
        launcher: ``auto`` (bubblewrap when it works here, else direct), ``bwrap``, ``direct``
            or ``docker``.
        allow_unsafe: run even where no isolation layer at all is available.
        preload: modules each server imports once so that programs find them warm.
        heavy_preload: modules (numpy) preloaded in a second server per slot that runs only the
            programs importing them, so that the others keep cheap forks.
        chunk_tests: tests per unit of work (smaller spreads slow programs over slots).
        use_uid: run children under a per-slot uid when root (default True).
        disable: server layers to switch off (``seccomp``, ``landlock``), to test fallbacks.
        hash_seed: ``PYTHONHASHSEED`` of every slot's judge and so of every cell (default: a
            fixed documented value, so that outputs that depend on string hashing, such as a
            printed set of strings, are the same in every slot, launcher and run; None leaves
            each slot a random one, as a bare interpreter would draw).
    """

    def __init__(self, slots: int | None = None, launcher: str | Launcher = "auto",
                 allow_unsafe: bool = False, preload: Iterable[str] = DEFAULT_PRELOAD,
                 chunk_tests: int = 8, use_uid: bool = True,
                 heavy_preload: Iterable[str] = DEFAULT_HEAVY_PRELOAD,
                 disable: Iterable[str] = (), hash_seed: int | None = DEFAULT_HASH_SEED):
        if slots is None:
            slots = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
                os.cpu_count() or 1)
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        if isinstance(launcher, Launcher):
            self.launcher, self.launcher_notes = launcher, []
        else:
            self.launcher, self.launcher_notes = choose_launcher(launcher)
        self.chunk_tests = max(1, int(chunk_tests))
        self._base = tempfile.mkdtemp(prefix="coevo-sandbox-")
        os.chmod(self._base, 0o711)
        self.slots = [Slot(self.launcher, i, self._base, tuple(preload), use_uid,
                           tuple(heavy_preload)) for i in range(slots)]
        # Marks every process of this executor (servers and the children they fork share the
        # command line), so that monitoring and tests can find any that outlived its job.
        self.token = secrets.token_hex(8)
        disable = set(disable)
        unknown = disable - {"seccomp", "landlock"}
        if unknown:
            raise ValueError(f"unknown layer(s) to disable: {sorted(unknown)}; "
                             "choose from seccomp, landlock")
        if hash_seed is not None and not (isinstance(hash_seed, int)
                                          and 0 <= hash_seed <= 4294967295):
            raise ValueError(f"hash_seed must be an int in [0, 4294967295], got {hash_seed!r}")
        self.hash_seed = hash_seed
        for s in self.slots:
            s.cfg["token"] = self.token
            s.cfg["hash_seed"] = hash_seed
            for layer in disable:
                s.cfg[layer] = False
        self._closed = False
        self._run_lock = threading.Lock()
        self._placed: dict = {}  # native program -> the slot that compiled it (UnitQueue)
        try:
            self._start_slots()
        except RuntimeError as e:
            if launcher != "auto" or self.launcher.name != "bwrap":
                raise
            # bubblewrap works here but the server did not start under it: say why, fall back
            self.launcher_notes.append(f"bubblewrap: the server did not start under it ({e}); "
                                       "fell back to the direct launcher")
            log.warning(self.launcher_notes[-1])
            self.launcher = DirectLauncher()
            self._closed = False
            os.makedirs(self._base, mode=0o711, exist_ok=True)
            for s in self.slots:
                s.launcher = self.launcher
                s.cfg = dict(self.launcher.slot_config(s.index, self._base, tuple(preload),
                                                       use_uid, tuple(heavy_preload)),
                             token=self.token, hash_seed=hash_seed,
                             **{layer: False for layer in disable})
            self._start_slots()
        self.isolation = self._isolation_report()
        active = [k for k, (on, _) in self.isolation["layers"].items() if on and k in _PROTECTIVE]
        if not active and not allow_unsafe:
            self.close()
            raise IsolationError(
                "no isolation layer is available on this host (no bubblewrap, no seccomp, no "
                "Landlock, no container); run 'coevo doctor' for how to enable one, or pass "
                "allow_unsafe=True (--exec_allow_unsafe) to run programs unprotected")
        on = {k for k, (v, _) in self.isolation["layers"].items() if v}
        missing = [k for k in ("seccomp", "landlock") if k not in on]
        if not on & {"bubblewrap", "container"}:
            missing.insert(0, "bubblewrap")
        if missing:
            log.warning("sandbox layers inactive: %s (see 'coevo doctor')", ", ".join(missing))
        if not self.isolation["hash_seed"][0]:
            log.warning("hash seed: %s", self.isolation["hash_seed"][1])

    # ---- lifecycle ---------------------------------------------------------------------------
    def _start_slots(self) -> None:
        errors: list[Exception] = []

        def go(s):
            try:
                s.start()
            except Exception as e:  # noqa: BLE001 - every slot's start error is gathered; the first is raised once all tried
                errors.append(e)

        threads = [threading.Thread(target=go, args=(s,)) for s in self.slots]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            self.close()
            raise errors[0]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for s in self.slots:
            s.close()
        try:  # whatever cells left there, however deep: no recursion
            empty_dir(self._base)
            os.rmdir(self._base)
        except OSError as e:
            log.warning("could not remove the sandbox dir %s: %s", self._base, e)

    @property
    def sandbox_dir(self) -> str:
        """The directory under which every slot's cells get their work dirs."""
        return self._base

    def server_pids(self) -> list[int]:
        """Host pids of the slot processes (for tests and monitoring)."""
        return [s.channel.pid for s in self.slots if s.channel is not None]

    def stats(self) -> dict:
        """Counters summed over slots: ``cells`` is the number of children forked so far (a
        compile is one), ``compiles`` the number of C++ and Java compiles (the compile cache's
        misses)."""
        total = compiles = 0
        with self._run_lock:
            for s in self.slots:
                if s.channel is not None:
                    got = s.call({"op": "stats"}, 10.0)
                    total += got.get("cells", 0)
                    compiles += got.get("compiles", 0)
        return {"cells": total, "compiles": compiles}

    def languages(self) -> dict:
        """``{language: (available, detail)}`` for the native languages, as the judges found
        their toolchains (``cpp``, ``java``; Python is always there): a language is available
        only where every slot's judge has it."""
        out: dict = {}
        for s in self.slots:
            for lang, (on, why) in (s.hello.get("languages") or {}).items():
                if lang not in out or (out[lang][0] and not on):
                    out[lang] = (bool(on), why)
        return out

    def _isolation_report(self) -> dict:
        layers: dict[str, tuple[bool, str]] = {}
        outer = self.launcher.outer
        if outer == "bubblewrap":
            layers["bubblewrap"] = (True, "pid/net/ipc/uts namespaces; read-only system and "
                                          "Python installation only; private /tmp")
        elif outer == "docker":
            layers["container"] = (True, "docker: --network none, read-only root, tmpfs /tmp")
        else:
            why = "; ".join(self.launcher_notes) or f"{self.launcher.name} launcher chosen"
            layers["bubblewrap"] = (False, why)
        hello = self.slots[0].hello
        for name, (on, detail) in hello.get("layers", {}).items():
            layers[name] = (bool(on), detail)
        layers.update(self.launcher.slot_layers(layers))  # slots kept from each other
        if outer in ("bubblewrap", "docker"):
            layers["disk"] = (True, f"cells write only in their own work dir, on the slot's "
                                    f"{DISK_CAP_MB} MiB private /tmp, emptied after every cell")
        else:
            layers["disk"] = (False, "no size cap on the work dirs under the direct launcher "
                                     "(each file is capped at the output limit, and the dirs "
                                     "are emptied after every cell); bubblewrap or docker caps "
                                     "them")
        return {"launcher": self.launcher.name, "slots": len(self.slots),
                "python": hello.get("python"), "preloaded": hello.get("preloaded", []),
                "layers": layers, "hash_seed": self._hash_seed_report(hello)}

    def _hash_seed_report(self, hello: dict) -> tuple[bool, str]:
        """(whether every slot hashes strings with the one seed asked for, what to say)."""
        if self.hash_seed is None:
            return True, "not fixed (hash_seed=None): each slot draws its own, as Python does"
        if all(s.hello.get("hash_seed") for s in self.slots):
            return True, f"PYTHONHASHSEED={self.hash_seed} in every slot"
        py = str(hello.get("python"))
        if "hash_seed" not in hello:
            why = "the judge does not say whether it is in place"
        elif tuple(int(x) for x in py.split(".")[:2] if x.isdigit()) < (3, 11):
            why = f"Python {py} has no -P to restart the judge with it; needs 3.11+"
        else:
            why = "the judge could not restart itself with it"
        return False, (f"PYTHONHASHSEED={self.hash_seed} not set ({why}): each slot hashes "
                       "strings with its own seed, so a label-free output that prints a set of "
                       "strings may differ between slots")

    # ---- running -------------------------------------------------------------------------------
    def run(self, jobs: Iterable[Any], progress: Callable[[int], None] | None = None) -> list[dict]:
        """Run every job; one result dict per job, in order (see ``docs/EXECUTION.md``).

        ``progress``, if given, is called with the number of cells finished after each unit.
        Calls from several threads are served one after the other (each uses every slot).
        """
        with self._run_lock:
            return self._run(jobs, progress)

    def _run(self, jobs, progress) -> list[dict]:
        if self._closed:
            raise RuntimeError("this Executor is closed")
        results, states = start_batch(jobs, self.languages())
        copies = [same_programs(st.job) if st is not None else {} for st in states]
        units = plan_units(states, copies, len(self.slots), self.chunk_tests)
        queue = UnitQueue(units, len(self.slots), self._placed)

        def worker(slot: Slot):
            while True:
                unit = queue.take(slot.index)
                if unit is None:
                    return
                run_unit(slot, unit, states[unit.job])
                queue.ran(unit, slot.index)
                if progress is not None:
                    progress(unit.stop - unit.start)

        threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in self.slots]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        copied = copy_verdicts(states, copies)
        if progress is not None and copied:
            progress(copied)  # the copies' cells are done too: a bar over every cell ends full
        return finish_batch(results, states)


_PROTECTIVE = ("bubblewrap", "container", "seccomp", "landlock")


def share_slots(options: dict, processes: Processes) -> dict:
    """The local backend's options for one of ``processes``: without ``slots``, an equal part
    of this machine's cores for each process on it."""
    if options.get("slots") is None:
        options["slots"] = max(1, (os.cpu_count() or 1) // max(1, processes.local_world_size))
    return options


BACKEND = Backend(
    name="local", factory=Executor, share=share_slots,
    help="warm fork-server slots on this machine (default)",
    options=frozenset({"slots", "launcher", "allow_unsafe", "preload", "chunk_tests", "use_uid",
                       "heavy_preload", "disable", "hash_seed"}))
