"""``coevo serve`` in a child process, for tests, benchmarks and the load test: started on a free
loopback port, its URL read from the line it prints when it listens."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time


def _sandbox(cmd: list[str]) -> bool:
    return "-c" in cmd and "coevo_sandbox" in " ".join(cmd[cmd.index("-c"):][:2])


class ServeProcess:
    """``with ServeProcess(["--exec_slots", "2"]) as s: httpx.get(s.url + "/health")``."""

    def __init__(self, args=(), env: dict | None = None, start_timeout: float = 120.0,
                 cwd: str | None = None):
        self.args = list(args)
        self.env = env
        self.cwd = cwd   # ``python -m`` imports from here first (another checkout's source)
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self._final: str | None = None
        self._log = tempfile.NamedTemporaryFile("w+", prefix="coevo-serve-", suffix=".log",
                                                delete=False)

    def start(self) -> "ServeProcess":
        env = dict(os.environ, **(self.env or {}))
        env.setdefault("OMP_NUM_THREADS", "1")
        cmd = [sys.executable, "-m", "coevo_code.cli", "serve", "--port", "0", *self.args]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True, cwd=self.cwd)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            m = re.search(r"listening on (http://\S+)", self.log())
            if m:
                self.url = m.group(1)
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"coevo serve exited with {self.proc.returncode}: "
                                   f"{self.log()[-2000:]}")
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"coevo serve did not start in {self.start_timeout} s: "
                           f"{self.log()[-2000:]}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def judges(self) -> list[int]:
        """The pids of the slot servers (judges): the sandbox's Python processes whose parent is
        not one (their zygotes and cells are)."""
        import psutil
        out = []
        for c in psutil.Process(self.pid).children(recursive=True):
            try:
                cmd = c.cmdline()
                parent = c.parent().cmdline() if c.parent() else []
            except psutil.Error:
                continue
            # python [-s -P ...] -c SCRIPT: the script, whatever flags come before it
            if _sandbox(cmd) and not _sandbox(parent):
                out.append(c.pid)
        return out

    def log(self) -> str:
        if self._final is not None:
            return self._final
        with open(self._log.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> "ServeProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        self._final = self.log()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass
