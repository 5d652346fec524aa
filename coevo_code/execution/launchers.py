"""Launchers: how a slot's fork server is started inside its isolation boundary.

- ``direct``: a plain ``python -I`` process; the server's own layers (seccomp, Landlock, rlimits,
  per-slot uid when root) are the whole protection.
- ``bwrap``: the same server wrapped once in bubblewrap: new pid/net/ipc/uts namespaces, an empty
  root with only the system libraries and the Python installation bound read-only, a private
  /tmp, all capabilities dropped but the few the server needs to drop privileges in its children.
- ``docker``: the same server in a container (``--network none``, read-only root, tmpfs /tmp),
  through the ``docker`` SDK, for hosts that have an engine; its image (``coevo build-image``,
  ``image.py``) holds only an interpreter, its standard library, numpy and the host's C++ and
  Java toolchains (``image_toolchains.py``).

Under ``direct`` and ``bwrap`` each slot's judge starts inside cgroups of its own where the host
lets us make them (``slot_cgroups.py``: a process limit and the CPU share of one task per slot);
each docker container is one already. :meth:`Launcher.slot_layers` reports what holds.

Each launcher returns a :class:`Channel`: a byte pipe to the server plus a way to kill it.
"""

from __future__ import annotations

import glob
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

from . import slot_cgroups

SANDBOX_DIR = Path(__file__).resolve().parents[1] / "sandbox"

SLOT_UID_BASE = 61000  # programs of slot k run as SLOT_UID_BASE + k ...
TEST_UID_OFFSET = 500  # ... and its tests as SLOT_UID_BASE + TEST_UID_OFFSET + k
DISK_CAP_MB = 256  # the size of a slot's private /tmp (bwrap, docker): every cell's work dir
SYSTEM_READ_PATHS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib",
                     "/usr/share/zoneinfo", "/etc/ld.so.cache", "/etc/localtime",
                     "/etc/alternatives")
SERVER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
              "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "PYTHONDONTWRITEBYTECODE": "1"}

# Loads the sandbox modules from their sources (argv[2:], one argument "NAME\nSOURCE" per module)
# as the package coevo_sandbox and starts the judge with the slot's configuration (argv[1]).
# Nothing needs to be installed or bound where the server runs but a Python interpreter.
BOOTSTRAP = """\
import json, sys, types
pkg = types.ModuleType("coevo_sandbox"); pkg.__path__ = []; sys.modules["coevo_sandbox"] = pkg
for arg in sys.argv[2:]:
    name, src = arg.split("\\n", 1)
    m = types.ModuleType("coevo_sandbox." + name)
    m.__package__, m.__file__ = "coevo_sandbox", "<coevo_sandbox/%s.py>" % name
    sys.modules[m.__name__] = m
    setattr(pkg, name, m)
    exec(compile(src, m.__file__, "exec"), m.__dict__)
del arg, name, src, m  # the last module's source would stay with the judge and its zygotes
sys.modules["coevo_sandbox.server"].main(json.loads(sys.argv[1]))
"""
# Linux caps each argument of execve at MAX_ARG_STRLEN (32 pages, with its terminating NUL), so
# each module is an argument of its own (all of them in one passed that cap at 128 KiB).
MAX_ARG_BYTES = 32 * 4096 - 1


def sandbox_sources() -> list[str]:
    """The sandbox modules (``coevo_code/sandbox``) as the bootstrap reads them: one argument
    ``NAME\nSOURCE`` per module. A module too long for one argument is a clear error here, not
    an ``Argument list too long`` from the launcher."""
    from coevo_code.sandbox import MODULES
    out = []
    for name in MODULES:
        arg = name + "\n" + (SANDBOX_DIR / f"{name}.py").read_text()
        size = len(arg.encode("utf-8", "surrogateescape"))
        if size > MAX_ARG_BYTES:
            raise RuntimeError(f"coevo_code/sandbox/{name}.py is {size} bytes: each sandbox module "
                               f"travels as one argument of the judge's command line, which Linux "
                               f"caps at {MAX_ARG_BYTES} bytes; split the module")
        out.append(arg)
    return out


def server_command(python: str, cfg: dict) -> list[str]:
    """The argv that starts a slot's judge: the interpreter, the bootstrap, the slot
    configuration, the modules."""
    return [python, "-I", "-c", BOOTSTRAP, json.dumps(cfg), *sandbox_sources()]


def interpreter() -> str:
    """This interpreter's path, normalised: ``tests/../.venv/bin/python`` names a directory
    (``tests``) that is not bound inside bubblewrap."""
    return os.path.normpath(os.path.abspath(sys.executable))


def python_paths() -> list[str]:
    """The interpreter's installation and the packages programs may import: nothing else."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            paths.add(p)
    exe = os.path.realpath(sys.executable)
    paths.add(os.path.dirname(exe))
    out = sorted(p for p in paths if p and os.path.exists(p))
    # keep only the outermost of nested paths
    return [p for p in out if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in out)]


def readable_by_others(path: str) -> bool:
    """Whether an unprivileged uid could read ``path`` (every parent searchable by others)."""
    p = Path(path)
    try:
        if not p.stat().st_mode & 0o004:
            return False
        for parent in p.parents:
            if not parent.stat().st_mode & 0o001:
                return False
    except OSError:
        return False
    return True


class Channel:
    """A started server: ``send``/``recv`` framed marshal messages, ``kill`` it and its group."""

    def __init__(self, proc: subprocess.Popen, description: str,
                 cgroup: slot_cgroups.SlotCgroup | None = None):
        self.proc = proc
        self.description = description
        self.cgroup = cgroup  # the slot's cgroups, where the host lets us make them
        self.rfd = proc.stdout.fileno()
        self.wfd = proc.stdin.fileno()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view):]

    def read(self, n: int, timeout: float) -> bytes:
        """Up to n bytes; b"" when the server closed its end; TimeoutError past ``timeout``."""
        r, _, _ = select.select([self.rfd], [], [], max(0.0, timeout))
        if not r:
            raise TimeoutError
        return os.read(self.rfd, n)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self) -> str:
        """The last line the process wrote to stderr, if any (never blocks)."""
        err = getattr(getattr(self, "proc", None), "stderr", None)
        if err is None:
            return ""
        try:
            data = os.read(err.fileno(), 1 << 16) or b""
        except (OSError, ValueError):
            return ""
        lines = data.decode("utf-8", "replace").strip().splitlines()
        return lines[-1][:500] if lines else ""

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.kill()
        except OSError:
            pass
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if self.cgroup is not None:  # whatever of the slot is left: killed, its cgroups removed
            self.cgroup.close()
            self.cgroup = None


class Launcher:
    """``slot_cgroups``: put each slot in cgroups of its own (a process limit and its own CPU
    share) where this host lets us make them (``slot_cgroups.py``); False runs the slots in this
    process's cgroup, as the benchmark of their effect does."""

    name = "?"
    outer = "none"  # what wraps the server: none | bubblewrap | docker

    def __init__(self, slot_cgroups: bool = True):
        self.slot_cgroups = slot_cgroups
        # slot -> why its judge runs without the slot cgroups the host plan offers (the plan is
        # the process's, shared by every launcher: one slot's failure is that slot's alone)
        self.cgroup_failures: dict[int, str] = {}

    def available(self) -> tuple[bool, str]:
        return True, ""

    def cgroup_plan(self) -> slot_cgroups.Plan:
        """Which slot cgroups this launcher makes here, or why not."""
        if not self.slot_cgroups:
            return slot_cgroups.Plan(why_not={c: "disabled by configuration"
                                              for c in ("pids", "cpu")})
        if not os.path.exists("/bin/sh"):
            return slot_cgroups.Plan(why_not={c: "no /bin/sh to enter the slot cgroup with"
                                              for c in ("pids", "cpu")})
        return slot_cgroups.host_plan()

    def slot_layers(self, layers: dict) -> dict[str, tuple[bool, str]]:
        """What keeps the slots from each other (``coevo doctor``): ``slot-cpu``, a CPU share
        per slot, so that a thread flood in one slot cannot make other slots' cells miss their
        limits; ``slot-pids``, a process limit per slot that holds for root too. ``layers`` are
        the judge's (whether cells run under a slot uid)."""
        p = self.cgroup_plan()
        ns = {"bubblewrap": "; own pid namespace (bubblewrap)"}.get(self.outer, "")
        failed = dict(getattr(self, "cgroup_failures", {}))
        if failed and p.parents:  # some slots run without: the layer holds for none of them
            p = slot_cgroups.Plan(version=p.version, why_not={c: "; ".join(
                f"slot {k}: {why}" for k, why in sorted(failed.items())) for c in ("pids", "cpu")})
        if "cpu" in p.parents:
            cpu = (True, f"each slot in a cgroup of its own (v{p.version}), with the CPU weight "
                         "of one task whatever its threads")
        else:
            cpu = (False, p.why_not.get("cpu", "?") + ": the slots share this process's CPU "
                   "cgroup, so a thread flood in one slot can make other slots' cells miss "
                   "their wall limit")
        uid = bool(layers.get("uid", (False,))[0])
        if "pids" in p.parents:
            pids = (True, f"pids.max {slot_cgroups.SLOT_PIDS_MAX} per slot (cgroup "
                          f"v{p.version}), for root too" + ns)
        elif uid:
            pids = (True, "RLIMIT_NPROC 512 per slot uid (no pids cgroup: "
                          + p.why_not.get("pids", "?") + ")" + ns)
        elif os.geteuid() == 0:
            pids = (False, p.why_not.get("pids", "?") + "; cells run as root without a slot uid, "
                    "where RLIMIT_NPROC does not count: one cell could take every process id "
                    "of the host" + ns)
        else:
            pids = (False, p.why_not.get("pids", "?") + "; cells run under this uid, whose "
                    "process limit (ulimit -u) every slot and this user's other processes "
                    "share" + ns)
        return {"slot-cpu": cpu, "slot-pids": pids}

    def command(self, cfg: dict) -> list[str]:
        raise NotImplementedError

    def slot_config(self, slot: int, base: str, preload, use_uid: bool,
                    heavy_preload=()) -> dict:
        uid, reason = None, ""
        if use_uid and os.geteuid() == 0:
            uid = SLOT_UID_BASE + slot
        elif use_uid:
            reason = "not running as root: children keep the caller's uid"
        else:
            reason = "disabled by configuration"
        return {"slot": slot, "workdir": f"{base}/slot{slot}", "uid": uid,
                "uid_test": None if uid is None else uid + TEST_UID_OFFSET, "uid_reason": reason,
                "read_paths": python_paths() + [p for p in SYSTEM_READ_PATHS if os.path.exists(p)],
                "preload": list(preload), "heavy_preload": list(heavy_preload),
                "landlock": True, "seccomp": True}

    def start(self, cfg: dict) -> Channel:
        argv = self.command(cfg)
        p = self.cgroup_plan()
        cgroup = None
        if p.parents:  # the judge enters the slot's cgroups before it (or bubblewrap) runs
            try:
                cgroup = slot_cgroups.SlotCgroup(p, str(cfg.get("token", "x")), int(cfg["slot"]))
                argv = cgroup.command(argv)
            except OSError as e:  # the host refused after all: run as before, and say so
                # (this slot only: the plan stays, and a later start of any slot tries again)
                self.cgroup_failures[int(cfg["slot"])] = f"making a slot cgroup failed ({e})"
            else:
                self.cgroup_failures.pop(int(cfg["slot"]), None)
        # stderr: what bubblewrap or the interpreter says before the judge takes over (it then
        # points its own at /dev/null), read when the judge does not start
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=dict(SERVER_ENV),
                                    start_new_session=True, close_fds=True, cwd="/")
        except BaseException:
            if cgroup is not None:
                cgroup.close()
            raise
        os.set_blocking(proc.stderr.fileno(), False)
        return Channel(proc, self.name, cgroup)


class DirectLauncher(Launcher):
    """The server as a plain process of this host."""

    name = "direct"

    def slot_config(self, slot, base, preload, use_uid, heavy_preload=()):
        cfg = super().slot_config(slot, base, preload, use_uid, heavy_preload)
        if cfg["uid"] is not None:
            hidden = [p for p in python_paths() if not readable_by_others(p)]
            if hidden:
                cfg["uid"] = cfg["uid_test"] = None
                cfg["uid_reason"] = (f"the Python installation {hidden[0]} is not readable by other "
                                     "users, so a per-slot uid could not import modules; use the "
                                     "bwrap launcher (it binds the installation readably) or a "
                                     "world-readable Python")
        return cfg

    def command(self, cfg):
        return server_command(interpreter(), cfg)


class BwrapLauncher(Launcher):
    """The server inside bubblewrap, started once per slot."""

    name = "bwrap"
    outer = "bubblewrap"

    def __init__(self, binary: str | None = None, slot_cgroups: bool = True):
        super().__init__(slot_cgroups)
        self.binary = binary or shutil.which("bwrap")
        self._probe: tuple[bool, str] | None = None

    def available(self):
        if self._probe is None:
            if not self.binary:
                self._probe = (False, "bubblewrap is not installed (Debian/Ubuntu: "
                                      "apt-get install bubblewrap)")
            else:
                try:
                    r = subprocess.run(self._wrap(["/bin/true" if os.path.exists("/bin/true")
                                                   else "/usr/bin/true"], bind_python=False),
                                       capture_output=True, timeout=20)
                    ok = r.returncode == 0
                    why = r.stderr.decode(errors="replace").strip().splitlines()
                    self._probe = (ok, "" if ok else "bwrap cannot create namespaces here: "
                                   + (why[-1] if why else f"exit {r.returncode}")
                                   + " (unprivileged user namespaces may be disabled; "
                                     "sysctl kernel.unprivileged_userns_clone=1)")
                except (OSError, subprocess.TimeoutExpired) as e:
                    self._probe = (False, f"bwrap failed to start: {e}")
        return self._probe

    def _wrap(self, argv, bind_python=True, cfg=None):
        root = os.geteuid() == 0
        a = [self.binary, "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid",
             "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        if not root:
            a += ["--unshare-user"]
        for d in ("/usr",):
            a += ["--ro-bind", d, d]
        for d in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
            if os.path.islink(d):
                a += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                a += ["--ro-bind", d, d]
        # /etc searchable by the cells' uids (bwrap would make it 0700): the links of
        # /etc/alternatives lead to the compilers, and the JDK keeps its configuration in
        # /etc/java-N-openjdk (native.py)
        a += ["--perms", "0755", "--dir", "/etc"]
        for f in ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives",
                  *sorted(glob.glob("/etc/java-*"))):
            if os.path.exists(f):
                a += ["--ro-bind", f, f]
        # The private /tmp first, then the interpreter bound over it: bwrap applies its
        # arguments in order, so an installation that lives under /tmp (a virtual environment
        # made there) is bound back read-only on top of the fresh tmpfs instead of being hidden.
        a += ["--proc", "/proc", "--dev", "/dev", "--size", str(DISK_CAP_MB << 20), "--tmpfs", "/tmp"]
        if bind_python:
            made = {"/tmp"}
            for p in python_paths():
                if p.startswith("/usr/"):
                    continue
                # Parents bwrap would create with the host's modes (/root is 0700): make them
                # searchable, or a per-slot uid could not import a single module.
                for parent in reversed(Path(p).parents):
                    d = str(parent)
                    if d != "/" and d not in made and not d.startswith("/usr"):
                        a += ["--perms", "0755", "--dir", d]
                        made.add(d)
                a += ["--ro-bind", p, p]
        a += ["--chdir", "/tmp", "--cap-drop", "ALL"]
        if root and cfg is not None and cfg.get("uid") is not None:
            for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN", "CAP_DAC_OVERRIDE",
                        "CAP_FOWNER"):
                a += ["--cap-add", cap]
        a += ["--clearenv"]
        for k, v in SERVER_ENV.items():
            a += ["--setenv", k, v]
        return a + ["--"] + argv

    def slot_config(self, slot, base, preload, use_uid, heavy_preload=()):
        return super().slot_config(slot, "/tmp", preload, use_uid, heavy_preload)

    def command(self, cfg):
        return self._wrap(server_command(interpreter(), cfg), cfg=cfg)


_DOCKER_RUNS: dict[str, tuple[bool, str]] = {}  # image id -> whether a container of it ran


class DockerLauncher(Launcher):
    """The server in a container, one per slot, through the docker SDK (an engine must answer
    and the image must exist: ``coevo build-image`` builds it offline from this host's Python).

    The container: the image's interpreter, standard library, numpy and toolchains only
    (read-only root), ``--network none``, its own pid/mount/ipc/uts namespaces, a
    ``DISK_CAP_MB`` tmpfs /tmp for the work dirs, every capability dropped but the few the judge
    needs to move its cells to per-slot uids, ``no-new-privileges``, the engine's default
    seccomp profile, a pids limit, and stdin closed when the host's attachment goes (so a
    crashed host leaves no container). C++ and Java compiles and runs are cells of the judge's
    native zygote inside the container, as under the other launchers (``sandbox/native.py``).
    """

    name = "docker"
    outer = "docker"
    CAPS = ["SETUID", "SETGID", "KILL", "CHOWN", "DAC_OVERRIDE", "FOWNER"]
    LABEL = "coevo.sandbox"  # every container carries it, with the executor's token as value

    def __init__(self, image: str = "coevo-sandbox:latest"):
        super().__init__(slot_cgroups=False)  # the engine gives each container its cgroup
        self.image = image
        self._client = None
        self._python = None
        self._probe: tuple[bool, str] | None = None

    def available(self):
        if self._probe is not None:
            return self._probe
        try:
            import docker
        except ImportError:
            return False, "the docker SDK is not installed (pip install docker)"
        try:
            client = docker.from_env(timeout=30)
            client.ping()
        except Exception as e:  # noqa: BLE001 - any failure means no engine
            msg = str(e).splitlines()[0][:200] if str(e) else ""
            return False, f"no Docker engine answers ({type(e).__name__}: {msg})"
        try:
            img = client.images.get(self.image)
        except Exception:  # noqa: BLE001 - the SDK raises several kinds for an absent image
            return False, (f"image {self.image} not found: build it offline with "
                           f"'coevo build-image --tag {self.image}'")
        labels = (img.attrs.get("Config") or {}).get("Labels") or {}
        python = labels.get("coevo.python", "/usr/local/bin/python3")
        if img.id not in _DOCKER_RUNS:  # once per image and process: can it run a container?
            _DOCKER_RUNS[img.id] = self._run_probe(client, python)
        if not _DOCKER_RUNS[img.id][0]:
            return _DOCKER_RUNS[img.id]
        self._client = client
        self._python = python
        self._probe = (True, "")
        return self._probe

    def slot_layers(self, layers):
        return {"slot-cpu": (True, "each slot is a container: a cgroup of its own, with the "
                                   "engine's default CPU weight whatever its threads"),
                "slot-pids": (True, "a pids limit of 1024 per container, for root too; own pid "
                                    "namespace")}

    def _run_probe(self, client, python) -> tuple[bool, str]:
        try:
            c = client.containers.create(self.image, [python, "-I", "-c", "print('ok')"],
                                         network_mode="none", read_only=True)
        except Exception as e:  # noqa: BLE001 - any failure to create the container is the probe's answer
            return False, self._cannot(e)
        try:
            c.start()
            code = c.wait(timeout=60).get("StatusCode")
            if code != 0:
                said = c.logs().decode(errors="replace").strip().splitlines()
                return False, self._cannot(f"exit {code}: {said[-1] if said else ''}")
            return True, ""
        except Exception as e:  # noqa: BLE001 - any failure to run it is the probe's answer
            return False, self._cannot(e)
        finally:
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001 - removed already, or the engine is gone
                pass

    def _cannot(self, e) -> str:
        msg = getattr(e, "explanation", None) or str(e)  # the daemon's own words, if any
        msg = (str(msg).strip().splitlines() or [""])[-1][:300]
        kind = f"{type(e).__name__}: " if isinstance(e, Exception) else ""
        return f"the engine answers but cannot run the image {self.image} here ({kind}{msg})"

    def slot_config(self, slot, base, preload, use_uid, heavy_preload=()):
        cfg = super().slot_config(slot, "/tmp", preload, use_uid, heavy_preload)
        if use_uid:  # the judge is root inside its container, whoever runs the host side
            cfg["uid"] = SLOT_UID_BASE + slot
            cfg["uid_test"] = cfg["uid"] + TEST_UID_OFFSET
            cfg["uid_reason"] = ""
        # what cells may read: the image's /usr (interpreter, standard library, numpy, shared
        # libraries, the toolchains as bwrap binds the host's /usr); /lib and /lib64 are links
        # into it. The native zygote adds the toolchains' own paths (native: TOOL_READ_PATHS
        # such as /etc/alternatives for compiles; the JDK and its /etc/java-N-openjdk for
        # compiles and Java runs), as under the other launchers.
        cfg["read_paths"] = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/localtime"]
        return cfg

    def command(self, cfg):
        return server_command(self._python or "/usr/local/bin/python3", cfg)

    def start(self, cfg):
        ok, why = self.available()
        if not ok:
            raise RuntimeError(why)
        api = self._client.api
        host_config = api.create_host_config(
            network_mode="none", read_only=True,
            tmpfs={"/tmp": f"rw,exec,nosuid,nodev,size={DISK_CAP_MB}m,mode=1777"},
            cap_drop=["ALL"], cap_add=list(self.CAPS) if cfg.get("uid") is not None else [],
            security_opt=["no-new-privileges"], pids_limit=1024, ipc_mode="private",
            auto_remove=True)
        # created, attached, then started: nothing the judge writes (its hello first) can be
        # written before the host listens
        c = api.create_container(
            self.image, command=self.command(cfg), stdin_open=True,  # and StdinOnce (not detached)
            environment=dict(SERVER_ENV), working_dir="/tmp", user="0:0",
            labels={self.LABEL: str(cfg.get("token", "")), "coevo.slot": str(cfg.get("slot"))},
            host_config=host_config)
        cid = c["Id"]
        try:
            sock = api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1,
                                                  "stream": 1})
            api.start(cid)
            pid = api.inspect_container(cid)["State"].get("Pid") or -1
        except Exception:
            try:
                api.remove_container(cid, force=True)
            except Exception:  # noqa: BLE001 - the container may never have been made; the first error is raised
                pass
            raise
        return DockerChannel(api, cid, sock, pid)


class DockerChannel(Channel):
    """A container's attached stdin/stdout. Without a tty the engine multiplexes stdout and
    stderr in frames of an 8-byte header (stream, 0, 0, 0, size as big-endian u32) and payload;
    stdout payloads are the judge's protocol, stderr is kept for ``stderr_tail``."""

    def __init__(self, api, cid: str, sock, pid: int):
        self.api = api
        self.cid = cid
        self.description = "docker"
        self._host_pid = pid
        self._wrapper = sock
        self.sock = getattr(sock, "_sock", sock)  # the raw socket under the SDK's SocketIO
        self.sock.setblocking(True)
        self._raw = b""    # bytes received, not yet demultiplexed
        self._out = b""    # stdout payload ready for read()
        self._left = 0     # payload bytes still to come in the current frame
        self._stream = 1   # that frame's stream
        self._err = b""    # the last stderr bytes
        self._eof = False

    @property
    def pid(self):
        """The judge's pid on the host (the container's first process)."""
        return self._host_pid

    def write(self, data):
        self.sock.sendall(data)

    def _demux(self):
        while self._raw:
            if self._left == 0:
                if len(self._raw) < 8:
                    return
                self._stream = self._raw[0]
                self._left = struct.unpack(">I", self._raw[4:8])[0]
                self._raw = self._raw[8:]
                continue
            k = min(self._left, len(self._raw))
            chunk, self._raw = self._raw[:k], self._raw[k:]
            self._left -= k
            if self._stream == 1:
                self._out += chunk
            else:
                self._err = (self._err + chunk)[-4096:]

    def read(self, n, timeout):
        """Up to n bytes of the judge's stdout; b"" when the container closed it."""
        while not self._out:
            if self._eof:
                return b""
            r, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
            if not r:
                raise TimeoutError
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                self._eof = True
                continue
            self._raw += chunk
            self._demux()
        out, self._out = self._out[:n], self._out[n:]
        return out

    def alive(self):
        try:
            return bool(self.api.inspect_container(self.cid)["State"].get("Running"))
        except Exception:  # noqa: BLE001 - removed: it ended
            return False

    def stderr_tail(self):
        lines = self._err.decode("utf-8", "replace").strip().splitlines()
        return lines[-1][:500] if lines else ""

    def kill(self):
        try:
            self.api.kill(self.cid)  # SIGKILL; auto_remove deletes the container once it ends
        except Exception:  # noqa: BLE001 - already gone
            pass
        for s in (self.sock, self._wrapper):
            try:
                s.close()
            except Exception:  # noqa: BLE001 - closed already
                pass
        # wait until it is gone, so that its processes are too when close() returns
        try:
            self.api.wait(self.cid, timeout=10)
        except Exception:  # noqa: BLE001 - removed already, or slow to end
            pass


LAUNCHERS = {"direct": DirectLauncher, "bwrap": BwrapLauncher, "docker": DockerLauncher}
# what a launcher option takes (the command's --exec_launcher, training's exec_launcher): "auto"
# chooses as choose_launcher does
LAUNCHER_CHOICES = ("auto", *sorted(LAUNCHERS))


def choose_launcher(name: str = "auto") -> tuple[Launcher, list[str]]:
    """The launcher to use and why others were passed over. ``auto``: bubblewrap when it works
    here, else the direct launcher (whose own layers still apply)."""
    notes = []
    if name != "auto":
        if name not in LAUNCHERS:
            raise ValueError(f"unknown launcher {name!r}; choose one of auto, "
                             + ", ".join(LAUNCHERS))
        launcher = LAUNCHERS[name]()
        ok, why = launcher.available()
        if not ok:
            raise RuntimeError(f"launcher {name!r} is not available: {why}")
        return launcher, notes
    b = BwrapLauncher()
    ok, why = b.available()
    if ok:
        return b, notes
    notes.append(f"bubblewrap: {why}")
    return DirectLauncher(), notes
