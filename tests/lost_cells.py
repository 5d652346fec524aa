"""Shared by the lost-cell tests: a killer that takes judges down the way a crash would (SIGKILL,
real processes), and an independent statement of which rows a lost cell masks."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import psutil

SLEEPS = {35, 230}  # nanosleep, clock_nanosleep (x86-64): a cell inside time.sleep


def _syscall(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _sandbox_python(p: psutil.Process | None) -> bool:
    """A Python process of the sandbox (a judge, a zygote or a cell: the bootstrap names the
    ``coevo_sandbox`` package on its command line), not a launcher wrapping one (bubblewrap)."""
    try:
        cmd = p.cmdline() if p is not None else []
    except (psutil.Error, OSError):
        return False
    return bool(cmd) and "python" in os.path.basename(cmd[0]) and "coevo_sandbox" in " ".join(cmd)


def judges(root: int | None = None) -> list[psutil.Process]:
    """Every judge under ``root`` (default: this process), whatever launches it (directly,
    inside bubblewrap, in a Ray actor): a sandbox Python process whose parent is not one (its
    zygotes and their cells are forked from it)."""
    try:
        procs = psutil.Process(root or os.getpid()).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for p in procs:
        try:
            if _sandbox_python(p) and not _sandbox_python(p.parent()):
                out.append(p)
        except psutil.Error:
            continue
    return out


class Killer:
    """A thread that, every ``every_s``, kills (SIGKILL) every judge under ``root`` (``all``),
    or only those running a cell that sleeps (``time.sleep`` in a program: the fault is tied to
    that program's cells, whatever the load). ``on_sleeper(judge)`` replaces the kill (a Ray
    node removed, say); ``once``: act on the first sleeper only."""

    def __init__(self, root: int | None = None, every_s: float = 0.01, all: bool = False,
                 on_sleeper=None, once: bool = False):
        self.root, self.every_s, self.all = root, every_s, all
        self.on_sleeper, self.once = on_sleeper, once
        self.kills = 0
        self.killed: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "Killer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _sleeping(self, judge: psutil.Process) -> bool:
        try:
            return any(_syscall(c.pid) in SLEEPS for z in judge.children()
                       for c in z.children())
        except psutil.Error:
            return False

    def _loop(self) -> None:
        while not self._stop.is_set():
            for j in judges(self.root):
                if j.pid in self.killed or (not self.all and not self._sleeping(j)):
                    continue
                self.killed.add(j.pid)
                if self.on_sleeper is not None:
                    self.on_sleeper(j)
                else:
                    try:
                        os.kill(j.pid, signal.SIGKILL)
                    except OSError:
                        continue
                self.kills += 1
                if self.once:
                    return
            time.sleep(self.every_s)


def expected_masks(full: np.ndarray, lost: np.ndarray, n_gold: int, all_passed: bool = False):
    """Which rows a lost cell masks, stated independently of ``scoring.lost_rows``: a solution
    whose code reward reads a lost gold cell; every test when some solution's correctness is
    unknown (no known gold failure); a test whose column holds a lost cell."""
    n, width = full.shape
    code, tests = [False] * n, [False] * (width - n_gold)
    unknown = False
    for i in range(n):
        gold_lost = any(lost[i, c] for c in range(n_gold))
        failed = any(not full[i, c] and not lost[i, c] for c in range(n_gold))
        code[i] = gold_lost and not (all_passed and failed)
        unknown = unknown or (gold_lost and not failed)
    for j in range(width - n_gold):
        tests[j] = unknown or any(lost[i, n_gold + j] for i in range(n))
    return code, tests
