"""Launchers: how a slot's fork server is started inside its isolation boundary.

- ``direct``: a plain ``python -I`` process; the server's own layers (seccomp, Landlock, rlimits,
  per-slot uid when root) are the whole protection.
- ``bwrap``: the same server wrapped once in bubblewrap: new pid/net/ipc/uts namespaces, an empty
  root with only the system libraries and the Python installation bound read-only, a private
  /tmp, all capabilities dropped but the few the server needs to drop privileges in its children.
- ``docker``: the same server in a container (``--network none``, read-only root, tmpfs /tmp),
  through the ``docker`` SDK, for hosts that have an engine.

Each launcher returns a :class:`Channel`: a byte pipe to the server plus a way to kill it.
"""

from __future__ import annotations

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

# Loads the sandbox modules from their sources (argv[1], a JSON list of [name, source]) as the
# package coevo_sandbox and starts the judge with the slot's configuration (argv[2]). Nothing
# needs to be installed or bound where the server runs but a Python interpreter.
BOOTSTRAP = """\
import json, sys, types
pkg = types.ModuleType("coevo_sandbox"); pkg.__path__ = []; sys.modules["coevo_sandbox"] = pkg
for name, src in json.loads(sys.argv[1]):
    m = types.ModuleType("coevo_sandbox." + name)
    m.__package__, m.__file__ = "coevo_sandbox", "<coevo_sandbox/%s.py>" % name
    sys.modules[m.__name__] = m
    setattr(pkg, name, m)
    exec(compile(src, m.__file__, "exec"), m.__dict__)
sys.modules["coevo_sandbox.server"].main(json.loads(sys.argv[2]))
"""


def sandbox_sources() -> str:
    """The sandbox modules (``coevo_code/sandbox``), as the bootstrap reads them."""
    from coevo_code.sandbox import MODULES
    mods = [[name, (SANDBOX_DIR / f"{name}.py").read_text()] for name in MODULES]
    return json.dumps(mods)


def server_command(python: str, cfg: dict) -> list[str]:
    """The argv that starts a slot's judge: the interpreter, the bootstrap, the modules, the
    slot configuration."""
    return [python, "-I", "-c", BOOTSTRAP, sandbox_sources(), json.dumps(cfg)]


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

    def __init__(self, proc: subprocess.Popen, description: str):
        self.proc = proc
        self.description = description
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


class Launcher:
    name = "?"
    outer = "none"  # what wraps the server: none | bubblewrap | docker

    def available(self) -> tuple[bool, str]:
        return True, ""

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
        # stderr: what bubblewrap or the interpreter says before the judge takes over (it then
        # points its own at /dev/null), read when the judge does not start
        proc = subprocess.Popen(self.command(cfg), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=dict(SERVER_ENV),
                                start_new_session=True, close_fds=True, cwd="/")
        os.set_blocking(proc.stderr.fileno(), False)
        return Channel(proc, self.name)


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

    def __init__(self, binary: str | None = None):
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
        for f in ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives"):
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


class DockerLauncher(Launcher):
    """The server in a container, through the docker SDK (an engine must answer)."""

    name = "docker"
    outer = "docker"

    def __init__(self, image: str = "coevo-sandbox:latest"):
        self.image = image
        self._client = None

    def available(self):
        try:
            import docker
        except ImportError:
            return False, "the docker SDK is not installed (pip install docker)"
        try:
            self._client = docker.from_env(timeout=5)
            self._client.ping()
        except Exception as e:  # noqa: BLE001 - any failure means no engine
            return False, f"no Docker engine answers ({type(e).__name__}: {e})"
        try:
            self._client.images.get(self.image)
        except Exception:  # noqa: BLE001
            return False, (f"image {self.image} not found: build it with "
                           f"'docker build -t {self.image} sandbox/'")
        return True, ""

    def slot_config(self, slot, base, preload, use_uid, heavy_preload=()):
        cfg = super().slot_config(slot, "/tmp", preload, True, heavy_preload)
        cfg["uid"] = SLOT_UID_BASE + slot  # the container's server runs as root inside
        cfg["uid_test"] = cfg["uid"] + TEST_UID_OFFSET
        cfg["read_paths"] = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/localtime"]
        return cfg

    def start(self, cfg):
        ok, why = self.available()
        if not ok:
            raise RuntimeError(why)
        container = self._client.containers.run(
            self.image, command=server_command("python3", cfg),
            stdin_open=True, detach=True, network_mode="none", read_only=True,
            tmpfs={"/tmp": f"rw,exec,size={DISK_CAP_MB}m"}, cap_drop=["ALL"],
            cap_add=["SETUID", "SETGID", "KILL", "CHOWN", "DAC_OVERRIDE", "FOWNER"],
            security_opt=["no-new-privileges"], pids_limit=1024, environment=SERVER_ENV,
            auto_remove=True)
        return DockerChannel(container)


class DockerChannel(Channel):
    """A container's attached stdin/stdout (docker multiplexes stdout in 8-byte-header frames)."""

    def __init__(self, container):
        self.container = container
        self.description = "docker"
        sock = container.attach_socket(params={"stdin": 1, "stdout": 1, "stream": 1})
        self.sock = getattr(sock, "_sock", sock)
        self._buf = b""
        self._left = 0  # bytes left in the current stdout frame

    @property
    def pid(self):
        return -1

    def write(self, data):
        self.sock.sendall(data)

    def read(self, n, timeout):
        self.sock.settimeout(max(0.001, timeout))
        while True:
            if self._buf and self._left:
                k = min(n, len(self._buf), self._left)
                out, self._buf = self._buf[:k], self._buf[k:]
                self._left -= k
                return out
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError as e:  # socket.timeout is an OSError
                raise TimeoutError from e
            if not chunk:
                return b""
            self._buf += chunk
            while not self._left and len(self._buf) >= 8:
                stream, size = self._buf[0], struct.unpack(">I", self._buf[4:8])[0]
                self._buf = self._buf[8:]
                if stream == 1:
                    self._left = size
                else:  # stderr frame: drop it
                    self._buf = self._buf[size:]

    def alive(self):
        try:
            self.container.reload()
            return self.container.status == "running"
        except Exception:  # noqa: BLE001
            return False

    def kill(self):
        try:
            self.container.kill()
        except Exception:  # noqa: BLE001
            pass


LAUNCHERS = {"direct": DirectLauncher, "bwrap": BwrapLauncher, "docker": DockerLauncher}


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
