"""A control group per slot: each slot's judge, its zygotes and every cell they fork live in a
cgroup of their own, with a process limit (``pids.max``) and the default CPU weight, so that a
thread flood or a grab for process ids in one slot neither starves the other slots' cells of CPU
nor takes their process ids. Both limits hold for root, unlike ``RLIMIT_NPROC``.

The slot cgroups are children of the cgroup this process runs in (a container's, a pod's, a Slurm
job's, or the host's), one per slot and controller hierarchy, named ``coevo-<pid>-<token>-<slot>``:
each competes for CPU with this cgroup's other tasks as one task would (the weight of one
single-threaded cell), whatever number of threads it runs. cgroup v1 (a ``pids`` and a ``cpu``
hierarchy) and v2 (where this cgroup's ``cgroup.subtree_control`` enables ``pids`` and ``cpu``,
or ``COEVO_SLOT_CGROUP`` names a writable cgroup that does) are both handled; where neither can
be written (a container's read-only ``/sys/fs/cgroup``, a v2 cgroup that holds processes and so
cannot delegate), :func:`plan` says why and the slots run without, as before (``coevo doctor``).

A judge enters its cgroups before it runs anything: the launcher starts it through ``/bin/sh``,
which writes its own pid into each slot cgroup's ``cgroup.procs`` and then ``exec``s the
launcher's command (bubblewrap or the interpreter), so bubblewrap's own children are born
inside. Closing a slot kills every process left in its cgroups and removes them.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
import time
from dataclasses import dataclass, field

SLOT_PIDS_MAX = 1024  # processes and threads per slot (the docker launcher's per-container limit)
ENV_PARENT = "COEVO_SLOT_CGROUP"  # a writable v2 cgroup to create the slot cgroups in

# /bin/sh: move this shell into each cgroup named before the command ($1 = how many), then exec
# the command; a move that fails ends the judge's start-up with status 121 and a message.
ENTER = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1/cgroup.procs" || '
         '{ echo "coevo: cannot enter the slot cgroup $1" >&2; exit 121; }; shift; '
         'n=$((n - 1)); done; exec "$@"')


@dataclass
class Plan:
    """Where slot cgroups go on this host: the parent directory of each controller (one entry
    for v2, one per hierarchy for v1), or why not."""

    version: int = 0
    parents: dict[str, str] = field(default_factory=dict)  # controller -> parent directory
    why_not: dict[str, str] = field(default_factory=dict)  # controller -> reason it is off


def _mounts() -> tuple[str | None, dict[str, tuple[str, str]]]:
    """(v2 mount point, {v1 controller: (mount point, mounted root)}) from mountinfo."""
    v2, v1 = None, {}
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return None, {}
    for line in lines:
        left, _, right = line.partition(" - ")
        a, b = left.split(), right.split()
        if len(a) < 5 or len(b) < 3:
            continue
        root, point, fstype, opts = a[3], a[4], b[0], b[2].split(",")
        if fstype == "cgroup2" and v2 is None:
            v2 = (point, root)
        elif fstype == "cgroup":
            for c in ("pids", "cpu"):
                if c in opts:
                    v1.setdefault(c, (point, root))
    return v2, v1


def _own_paths() -> tuple[str | None, dict[str, str]]:
    """This process's cgroup paths: (the v2 one, {v1 controller: path})."""
    v2, v1 = None, {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f.read().splitlines():
                hid, ctrls, path = line.split(":", 2)
                if hid == "0" and ctrls == "":
                    v2 = path
                for c in ctrls.split(","):
                    if c in ("pids", "cpu"):
                        v1[c] = path
    except (OSError, ValueError):
        pass
    return v2, v1


def _on_disk(point: str, root: str, path: str) -> str | None:
    """The directory of cgroup ``path`` under a mount of the hierarchy's ``root``."""
    root = root.rstrip("/")
    if root and path != root and not path.startswith(root + "/"):
        return None  # our cgroup is outside what is mounted here
    return os.path.join(point, path[len(root):].lstrip("/"))


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _writable(d: str) -> str:
    """'' if slot cgroups can be made in ``d``, else why not."""
    if not os.path.isdir(d):
        return f"{d} is not mounted here"
    if not os.access(d, os.W_OK):
        return f"{d} is not writable (a read-only cgroup file system, or not root)"
    return ""


def plan() -> Plan:
    """Where this host lets us create slot cgroups, per controller (``pids``, ``cpu``)."""
    p = Plan()
    v2mount, v1mounts = _mounts()
    v2path, v1paths = _own_paths()
    forced = os.environ.get(ENV_PARENT)
    if v1mounts and not forced:
        p.version = 1
        for c in ("pids", "cpu"):
            if c not in v1mounts or c not in v1paths:
                p.why_not[c] = f"no cgroup v1 {c} hierarchy is mounted"
                continue
            d = _on_disk(*v1mounts[c], v1paths[c])
            why = _writable(d) if d else f"this process's {c} cgroup is not mounted here"
            if why:
                p.why_not[c] = "cgroup v1: " + why
            else:
                p.parents[c] = d
        return p
    if v2mount is None and not forced:
        p.why_not = {c: "no cgroup file system is mounted" for c in ("pids", "cpu")}
        return p
    p.version = 2
    d = forced or (_on_disk(*v2mount, v2path) if v2path is not None else None)
    why = _writable(d) if d else "this process's cgroup is not mounted here"
    if not why:
        try:
            enabled = set(_read(os.path.join(d, "cgroup.subtree_control")).split())
            available = set(_read(os.path.join(d, "cgroup.controllers")).split())
        except OSError as e:
            enabled, available, why = set(), set(), f"cannot read {d}: {e.strerror}"
        for c in ("pids", "cpu"):
            if why:
                break
            if c in enabled:
                p.parents[c] = d
            elif c not in available:
                p.why_not[c] = f"cgroup v2: the {c} controller is not delegated to {d}"
            else:
                try:
                    _write(os.path.join(d, "cgroup.subtree_control"), f"+{c}")
                    p.parents[c] = d
                except OSError as e:
                    p.why_not[c] = (
                        f"cgroup v2: cannot enable {c} for the children of {d} ("
                        + ("it holds processes, the no-internal-process rule"
                           if e.errno == errno.EBUSY else e.strerror)
                        + f"); set {ENV_PARENT} to a writable cgroup that delegates cpu and pids")
    if why:
        p.why_not = {c: "cgroup v2: " + why for c in ("pids", "cpu")}
    return p


_PLAN: Plan | None = None
_PLAN_LOCK = threading.Lock()


def host_plan() -> Plan:
    """:func:`plan`, worked out once per process (stale slot cgroups of dead processes are
    removed then, before this process makes any)."""
    global _PLAN
    with _PLAN_LOCK:
        if _PLAN is None:
            p = plan()
            for d in set(p.parents.values()):
                _remove_stale(d)
            _PLAN = p
    return _PLAN


def _remove_stale(parent: str) -> None:
    """Remove empty slot cgroups whose process is gone (a host that died without closing)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if len(parts) != 4 or parts[0] != "coevo" or not parts[1].isdigit():
            continue
        if int(parts[1]) != os.getpid() and os.path.exists(f"/proc/{parts[1]}"):
            continue
        try:
            os.rmdir(os.path.join(parent, name))
        except OSError:
            pass


class SlotCgroup:
    """One slot's cgroups (one directory per hierarchy), made with their limits; ``command``
    wraps a launcher's argv so that the judge starts inside; ``close`` kills what is left in
    them and removes them."""

    def __init__(self, p: Plan, token: str, slot: int):
        self.plan = p
        self.name = f"coevo-{os.getpid()}-{token}-{slot}"
        self.dirs: dict[str, str] = {}
        try:
            self._make(p)
        except OSError:
            self.close()
            raise

    def _make(self, p: Plan) -> None:
        for c, parent in sorted(p.parents.items()):
            d = os.path.join(parent, self.name)
            if d in self.dirs.values():  # v2, or v1 hierarchies mounted together
                self.dirs[c] = d
                continue
            try:
                os.mkdir(d, 0o755)
            except FileExistsError:
                self._kill_in(d)  # a restarted slot: nothing of the last judge may stay
            self.dirs[c] = d
        if "pids" in self.dirs:
            _write(os.path.join(self.dirs["pids"], "pids.max"), str(SLOT_PIDS_MAX))
        if "cpu" in self.dirs:  # the default weight: the share of one task
            try:
                if p.version == 2:
                    _write(os.path.join(self.dirs["cpu"], "cpu.weight"), "100")
                else:
                    _write(os.path.join(self.dirs["cpu"], "cpu.shares"), "1024")
            except OSError:
                pass

    def command(self, argv: list[str]) -> list[str]:
        dirs = sorted(set(self.dirs.values()))
        return ["/bin/sh", "-c", ENTER, "coevo-slot", str(len(dirs)), *dirs, *argv]

    @staticmethod
    def _kill_in(d: str, wait_s: float = 5.0) -> None:
        kill_file = os.path.join(d, "cgroup.kill")  # v2, Linux >= 5.14: the whole cgroup at once
        end = time.monotonic() + wait_s
        while True:
            try:
                procs = [int(x) for x in _read(os.path.join(d, "cgroup.procs")).split()]
            except (OSError, ValueError):
                return
            if not procs or time.monotonic() > end:
                return
            try:
                _write(kill_file, "1")
            except OSError:
                for pid in procs:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            time.sleep(0.01)

    def close(self) -> None:
        for d in set(self.dirs.values()):
            self._kill_in(d)
            for _ in range(50):  # an exiting process keeps the cgroup busy for a moment
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.dirs = {}
