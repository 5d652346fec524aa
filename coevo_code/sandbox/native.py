"""Native languages (C++ and Java): each language's compile-and-run rules as one small record
(:data:`RUNNERS`, after SandboxFusion's ``MAJOR_RUNNERS``), and the native zygote that runs the
compiler and the compiled programs inside the same isolation as Python cells.

The native zygote is forked by the judge at start-up, before the judge's own seccomp filter
(which forbids ``execve``) is on, and, like the Python zygotes, never holds job data: the judge
sends it limits and sealed memfds. Its own filter is the judge's less ``execve``/``execveat``.
It runs two kinds of cell:

- **compile**: the cell writes the source from its memfd into the compile work dir and executes
  the compiler there, with its own limits (CPU seconds per process, address space, file size,
  the diagnostics capped; a wall cap), under a filter that lets the compiler's driver start its passes
  (fork and exec) and nothing else the program cells are denied; every process of the compile is
  killed at the end. The judge then reads the artifact (a static ELF binary; Java's class files)
  into a sealed memfd and empties the dir.
- **run**: the cell isolates itself as a Python program cell does (its work dir, rlimits, uid,
  Landlock, no new processes), then executes the artifact: the C++ binary straight from its
  sealed memfd (``execveat(fd, "", AT_EMPTY_PATH)``: no file of it exists anywhere a program can
  reach, and the C++ ruleset grants the right to execute no file at all), or the JVM with the
  class files written into the work dir. ``execve`` of a path is denied to the program.
"""

import fcntl
import hashlib
import marshal
import math
import os
import re
import resource
import shutil
import signal
import stat
import time

from . import landlock, seccomp
from .outcomes import stdio_output, take_memfd
from .protocol import (CHILD_SETUP_FAILED, COMPILE, EXIT_MEMORY, SANDBOX, WRONG, recv_msg,
                       send_msg)
from .zygote import LOW_FDS, Zygote, become, sealed_memfd

COMPILE_ROLE = "c"  # the judge's work dir of compiles

# The C++ runtime piece linked into every program: a failed ``new`` (the address-space limit
# reached) ends the program with the sandbox's memory status (protocol.EXIT_MEMORY), as a
# Python program's MemoryError does, instead of an abort that reads as a runtime error. Written
# without headers, so that it costs the compiler milliseconds.
CPP_RUNTIME = """\
namespace std { typedef void (*new_handler)(); new_handler set_new_handler(new_handler) noexcept; }
extern "C" void _exit(int);
static void coevo_out_of_memory() { _exit(120); }
static struct coevo_init { coevo_init() { std::set_new_handler(coevo_out_of_memory); } } coevo_init_;
"""

JAVA_VM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
                   "-XX:ReservedCodeCacheSize=32m", "-XX:CompressedClassSpaceSize=32m",
                   "-Xshare:auto")


class Runner:
    """One language's rules. ``compile``: the compiler's argv (``{src}`` is the source file's
    name); ``tools``: the programs that must be on the judge's PATH; ``files``: sources added to
    every compile; ``artifact``: ``binary`` (the file ``main``) or ``classes`` (every
    ``.class`` file); ``run``: the argv of a run (``{mem}`` the memory limit in MiB, ``{main}``
    Java's main class); ``memory_exit``: the exit status that means the program ran out of
    memory; ``as_extra_mb``: address space given on top of the memory limit (the process's own
    mappings; the JVM's reservations); ``compile_mem_mb``: the compiler's address space."""

    __slots__ = ("language", "tools", "compile", "files", "artifact", "run", "memory_exit",
                 "as_extra_mb", "compile_mem_mb", "stack")

    def __init__(self, language, tools, compile, files, artifact, run, memory_exit,
                 as_extra_mb, compile_mem_mb, stack):
        self.language, self.tools, self.compile, self.files = language, tools, compile, files
        self.artifact, self.run, self.memory_exit = artifact, run, memory_exit
        self.as_extra_mb, self.compile_mem_mb, self.stack = as_extra_mb, compile_mem_mb, stack

    def source_name(self, src):
        if self.language != "java":
            return "main.cpp"
        m = _JAVA_PUBLIC.search(_java_code(src))
        return (m.group(1) if m else "Main") + ".java"

    def fingerprint(self):
        """What a compile depends on besides the source: part of every cache key."""
        return repr((self.language, self.compile, sorted(self.files.items())))


RUNNERS = {
    "cpp": Runner("cpp", ("g++",),
                  ("g++", "-std=c++17", "-O2", "-DONLINE_JUDGE", "-pipe", "-static", "-w",
                   "-fdiagnostics-color=never", "-o", "main", "{src}", "coevo_runtime.cpp"),
                  {"coevo_runtime.cpp": CPP_RUNTIME}, "binary", ("main",), 120, 64, 2048, True),
    "java": Runner("java", ("javac", "java"),
                   ("javac", "-encoding", "UTF-8", "-nowarn", "-J-Xmx512m", "-J-Xss8m")
                   + tuple("-J" + o for o in JAVA_VM_OPTIONS) + ("-d", ".", "{src}"),
                   {}, "classes",
                   ("java", "-DONLINE_JUDGE=true", "-Xmx{mem}m", "-Xss64m",
                    "-XX:+ExitOnOutOfMemoryError")
                   + JAVA_VM_OPTIONS + ("-cp", ".", "{main}"), 3, 1536, 2048, False),
}
LANGUAGES = ("python",) + tuple(RUNNERS)

_JAVA_PUBLIC = re.compile(r"\bpublic\s+(?:(?:final|abstract|strictfp)\s+)*(?:class|interface|enum|record)\s+([A-Za-z_$][A-Za-z0-9_$]*)")
_JAVA_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"", re.S)


def _java_code(src):
    """Java source without comments and string literals (where ``public class`` may appear)."""
    return _JAVA_COMMENTS.sub(" ", src)


COMPILE_TIME_S = 10.0  # CPU seconds per process of a compile (its wall cap: compile_wall_s)


def compile_wall_s(time_s):
    """A compile's wall-clock cap for ``time_s`` CPU seconds per process (the host's unit budget,
    ``execution.core.unit_budget_s``, allows the same)."""
    return max(3 * time_s + 5, 30.0)
COMPILE_DIAG_BYTES = 64 << 10  # what a compile may print (more is cut: the tail is kept)
ARTIFACT_BYTES = 64 << 20  # the largest binary (or all class files of one program)
ARTIFACT_FILES = 256  # class files of one Java program
CACHE_BYTES = 256 << 20  # compiled programs a judge keeps (bytes of artifacts) ...
CACHE_COUNT = 1024  # ... and how many programs, compile errors included
TOOL_READ_PATHS = ("/usr/bin", "/bin", "/usr/include", "/usr/libexec", "/usr/lib", "/usr/lib64",
                   "/lib", "/lib64", "/usr/local/include", "/etc/alternatives")
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
       "MALLOC_ARENA_MAX": "1"}
NR_EXECVE = 59


def find_tools():
    """{language: (available, detail)} for this judge's file system and PATH; and the paths the
    toolchains need to read beyond the Python installation's (the JDK's configuration, which
    Debian keeps in ``/etc/java-N-openjdk``)."""
    found, extra = {}, []
    for lang, r in RUNNERS.items():
        paths = [shutil.which(t, path=ENV["PATH"]) for t in r.tools]
        missing = [t for t, p in zip(r.tools, paths) if p is None]
        if missing:
            found[lang] = [False, "%s not found on %s" % (", ".join(missing), ENV["PATH"])]
            continue
        found[lang] = [True, " ".join(os.path.realpath(p) for p in paths)]
        if lang == "java":
            home = os.path.dirname(os.path.dirname(os.path.realpath(paths[-1])))
            extra.append(home)
            for root in (os.path.join(home, "conf"), os.path.join(home, "lib")):
                try:
                    for name in os.listdir(root):
                        real = os.path.realpath(os.path.join(root, name))
                        if real.startswith("/etc/"):
                            extra.append("/".join(real.split("/")[:3]))
                except OSError:
                    pass
    return found, sorted(set(extra))


def cache_key(runner, src):
    """The content address of a compiled program: the SHA-256 of the language's rules and the
    whole source. Only a compile of exactly this source under exactly these rules writes it."""
    h = hashlib.sha256(runner.fingerprint().encode())
    h.update(b"\0")
    h.update(src.encode("utf-8", "surrogatepass"))
    return h.digest()


# ---- the judge's side ----------------------------------------------------------------------------
class Compiled:
    """The judge's cache of compiled programs (content-addressed by :func:`cache_key`, least
    recently used out first past CACHE_BYTES or CACHE_COUNT): each entry ``(fd, size, main)``,
    a sealed memfd with the artifact, or ``(None, 0, diagnostics)`` for a compile error."""

    def __init__(self):
        self.entries = {}
        self.bytes = 0
        self.compiles = 0  # compiler runs since start: the cache's effect is cells / compiles

    def get(self, key):
        hit = self.entries.pop(key, None)
        if hit is not None:
            self.entries[key] = hit
        return hit

    def put(self, key, entry):
        while self.entries and (self.bytes + entry[1] > CACHE_BYTES
                                or len(self.entries) >= CACHE_COUNT):
            _, (fd, size, _) = _pop_oldest(self.entries)
            if fd is not None:
                os.close(fd)
            self.bytes -= size
        self.entries[key] = entry
        self.bytes += entry[1]


def _pop_oldest(d):
    k = next(iter(d))
    return k, d.pop(k)


def _open_regular(dir_fd, name, cap):
    """The bytes of a regular file the compile left (never following a link, never blocking on
    a FIFO), or None past ``cap`` bytes or when it is anything else."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
            return None
        data = os.pread(fd, st.st_size + 1, 0)
        return data if len(data) <= cap else None
    finally:
        os.close(fd)


def collect_artifact(runner, cdir):
    """What a compile in ``cdir`` produced: ``(bytes, main class or None)``, or ``(None,
    why)``."""
    top = os.open(cdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if runner.artifact == "binary":
            data = _open_regular(top, "main", ARTIFACT_BYTES)
            if data is None:
                return None, "the compiler left no binary"
            return data, None
        classes, total = {}, 0
        stack = [""]
        while stack:
            rel = stack.pop()
            d = os.open(rel or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                        dir_fd=top)
            try:
                for name in sorted(os.listdir(d)):
                    path = rel + "/" + name if rel else name
                    st = os.stat(name, dir_fd=d, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode) and path.count("/") < 16:
                        stack.append(path)
                    elif name.endswith(".class") and stat.S_ISREG(st.st_mode):
                        data = _open_regular(d, name, ARTIFACT_BYTES - total)
                        if data is None or len(classes) >= ARTIFACT_FILES:
                            return None, "the class files exceed %d files or %d bytes" % (
                                ARTIFACT_FILES, ARTIFACT_BYTES)
                        classes[path] = data
                        total += len(data)
            finally:
                os.close(d)
        main = java_main(classes)
        if main is None:
            return None, "no class declares public static void main(String[])"
        return marshal.dumps(classes), main
    finally:
        os.close(top)


def java_main(classes):
    """The main class among compiled classes: a top-level class whose constant pool names
    ``main`` with the signature ``([Ljava/lang/String;)V``; the first in name order."""
    for path in sorted(classes):
        data = classes[path]
        if "$" in path.rsplit("/", 1)[-1]:
            continue
        if b"([Ljava/lang/String;)V" in data and b"\x00\x04main" in data:
            return path[:-len(".class")].replace("/", ".")
    return None


def diagnostics(data):
    """A compile's output as text (its tail past COMPILE_DIAG_BYTES)."""
    text = data.decode("utf-8", "replace")
    return text if len(text) <= COMPILE_DIAG_BYTES else "..." + text[-COMPILE_DIAG_BYTES:]


def run_argv(runner, mem_mb, main):
    return [a.replace("{mem}", str(int(mem_mb))).replace("{main}", main or "")
            for a in runner.run]


VM_FAILED = "Error occurred during initialization of VM"


class CompilerGone(RuntimeError):
    """The harness failed at a compile: its cell could not be set up, the compiler could not be
    started, or it was stopped by the wall clock before it used its CPU time (a loaded
    machine). The program is not to blame: ``sandbox_error`` (the executor runs the unit once
    more on a fresh judge), never cached."""


def compile_program(judge, runner, req):
    """The cache entry of ``req``'s program, compiled now on a miss; raises CompilerGone."""
    src = req["program"]
    key = cache_key(runner, src)
    hit = judge.compiled.get(key)
    if hit is not None:
        return hit
    name = runner.source_name(src)
    time_s = float(req.get("compile_time") or COMPILE_TIME_S)
    src_fd = sealed_memfd(marshal.dumps({name: src}))
    diag_fd = os.memfd_create("diagnostics", os.MFD_CLOEXEC)
    try:
        judge.compiled.compiles += 1
        res = judge._spawn(judge.zygotes["native"],
                           {"mode": "compile", "language": runner.language, "time": time_s,
                            "wall": compile_wall_s(time_s), "source_name": name},
                           [src_fd, diag_fd], clean=False)
        diag = diagnostics(take_memfd(diag_fd, COMPILE_DIAG_BYTES + 1))
        try:
            (rc, sig, used), = res["cells"]
            if not res["exec"] and not res["killed"]:
                raise CompilerGone(diag or "the compile cell could not be set up")
            if res["killed"] and used < time_s:  # the wall cap on a loaded machine, not the
                raise CompilerGone("the compile ran past its wall cap (%g s) with %.1f CPU s: "
                                   "the machine is too loaded" % (compile_wall_s(time_s), used))
            if rc and VM_FAILED in diag:  # the compiler's JVM could not start (its threads,
                raise CompilerGone(diag[:300])  # its memory): the machine's state, not the code
            if res["killed"] or sig or rc != 0:
                why = ("the compile ran past its time limit (%g CPU s per process)" % time_s
                       if res["killed"] or sig == signal.SIGXCPU
                       else "the compiler was killed by signal %d" % sig if sig else "")
                entry = (None, 0, (diag + "\n" + why).strip() or "exit status %d" % rc)
            else:
                data, main = collect_artifact(runner, judge.dirs[COMPILE_ROLE])
                if data is None:
                    entry = (None, 0, main)
                else:
                    entry = (sealed_memfd(data, "program"), len(data), main)
        finally:
            judge._clean()
    finally:
        os.close(src_fd)
        os.close(diag_fd)
    judge.compiled.put(key, entry)
    return entry


def run_native(judge, req):
    """One unit of a native stdio program: compiled once per judge (the cache), then run against
    each test with the Python stdio rules; ``compile_error`` in every cell where it does not
    compile (the compiler's diagnostics in ``detail``)."""
    tests = req["tests"]
    n = len(tests)
    want_out = bool(req.get("return_outputs"))
    outputs = [""] * n if want_out else None
    cpu = [0.0] * n
    lang = req.get("language")
    runner = RUNNERS.get(lang)
    if runner is None or "native" not in judge.zygotes or not judge.languages.get(lang,
                                                                                  [0])[0]:
        why = (judge.languages.get(lang, [0, "no such language"])[1]
               if runner is not None else "no such language")
        return {"outcomes": [SANDBOX] * n, "outputs": outputs, "cpu": cpu,
                "detail": "%r cannot run in this sandbox: %s" % (lang, why)}
    if req.get("kind", "stdio") != "stdio":
        return {"outcomes": [SANDBOX] * n, "outputs": outputs, "cpu": cpu,
                "detail": "%s programs run stdio jobs only" % lang}
    try:
        entry = compile_program(judge, runner, req)
    except CompilerGone as e:
        return {"outcomes": [SANDBOX] * n, "outputs": outputs, "cpu": cpu,
                "detail": "the compile failed in the harness: %s" % e}
    fd, _, main = entry
    if fd is None:
        return {"outcomes": [COMPILE] * n, "outputs": outputs, "cpu": cpu, "detail": main}
    checker = None
    if req.get("checker"):
        try:
            checker = compile(req["checker"], "checker.py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
            return {"outcomes": [WRONG] * n, "outputs": outputs, "cpu": cpu,
                    "detail": "the checker does not compile: %s" % e}
    time_limit = float(req["time"])
    cap = int(float(req["out_mb"]) * (1 << 20))
    limits = {"time": time_limit, "wall": float(req["wall"]), "mem_mb": float(req["mem_mb"]),
              "out_cap": cap, "seed": req.get("seed")}
    cell = {"mode": "run", "language": lang, "main": main, "time": time_limit,
            "wall": limits["wall"], "mem_mb": int(limits["mem_mb"]), "out_cap": cap}
    expected = req.get("expected")
    outcomes = []
    for i, test in enumerate(tests):
        in_fd = judge._input(test)
        res = judge._spawn(judge.zygotes["native"], cell, [fd, in_fd, judge.out_fd])
        (rc, sig, used), = res["cells"]
        out = take_memfd(judge.out_fd, cap + 1)
        if res["exec"] and rc == CHILD_SETUP_FAILED:
            rc = 1  # the program's own exit status, not a setup failure
        elif not res["exec"] and not res["killed"]:
            rc = CHILD_SETUP_FAILED
        elif rc == EXIT_MEMORY and runner.memory_exit != EXIT_MEMORY:
            rc = 1
        elif rc == runner.memory_exit and not sig:
            rc = EXIT_MEMORY
        outcome = judge.stdio_verdict(limits, res["killed"], rc, sig, used, out, checker, test,
                                      expected[i])
        outcomes.append(outcome)
        cpu[i] = used
        if want_out:
            outputs[i] = stdio_output(out)
    return {"outcomes": outcomes, "outputs": outputs, "cpu": cpu}


# ---- the native zygote -----------------------------------------------------------------------------
class NativeZygote:
    """Forks compile and run cells (see the module's docstring). Built by the judge's fork
    before any job exists; reports its layers in its hello."""

    def __init__(self, cfg, sock, dirs, uids, tool_paths):
        self.cfg, self.sock, self.dirs = cfg, sock, dirs  # "p": runs, "c": compiles
        self.uids = dict(uids)
        self.pid = os.getpid()
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.devnull = os.open(os.devnull, os.O_RDWR)
        for fd in range(3, LOW_FDS):
            try:
                os.fstat(fd)
            except OSError:
                os.dup2(self.devnull, fd, inheritable=False)
        self.layers = {}
        try:
            seccomp.prctl(seccomp.PR_SET_CHILD_SUBREAPER, 1)
        except OSError:
            pass
        self.drop_caps = self.uids.get("p") is None and os.geteuid() == 0
        read = list(cfg.get("read_paths", []))
        tools = [p for p in TOOL_READ_PATHS if os.path.exists(p)] + list(tool_paths)
        self.rulesets = {}
        abi = landlock.abi() if cfg.get("landlock", True) else 0
        if abi > 0:
            # compile: read and execute the toolchains, write the compile dir; a C++ run:
            # read (never execute) the system, write its own dir; a Java run: the JVM's files
            # read and executed, its own dir written
            plan = {"c": (read + tools, True, dirs["c"]), "cpp": (read, False, dirs["p"]),
                    "java": (read + list(tool_paths), True, dirs["p"])}
            for name, (paths, execute, wdir) in plan.items():
                fd, _ = landlock.build(abi, paths, [wdir], [os.devnull], execute=execute)
                self.rulesets[name] = fd
        self.ll_scoped = abi >= 6
        self.filters = {}
        try:
            seccomp.prctl(seccomp.PR_SET_NO_NEW_PRIVS, 1)
        except OSError:
            pass
        if cfg.get("seccomp", True) and os.uname().machine == "x86_64":
            deny_signals = not self.ll_scoped and self.uids.get("p") is None
            self.filters = {"cpp": seccomp.native_run_filter(deny_signals, deny_execve=True),
                            "java": seccomp.native_run_filter(deny_signals, deny_execve=False),
                            "c": seccomp.compile_filter(deny_signals)}
            seccomp.install(seccomp.native_server_filter())

    def serve(self):
        send_msg(self.sock, {"pid": self.pid, "native": True})
        while True:
            try:
                msg, fds = recv_msg(self.sock)
            except (EOFError, OSError):
                return
            try:
                res = self.spawn(msg, fds)
            except Exception as e:  # noqa: BLE001 - said to the judge, never a silent death
                res = {"error": "%s: %s" % (type(e).__name__, e)}
            finally:
                for fd in fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            send_msg(self.sock, res)

    def spawn(self, req, fds):
        """One compile (fds: sources, diagnostics) or run (fds: artifact, stdin, stdout) cell.
        Returns ``{"cells": [[exit code, signal, cpu seconds]], "killed": bool, "exec":
        bool}`` (``exec`` False: the cell never reached the compiler or the program)."""
        mode = req["mode"]
        runner = RUNNERS[req["language"]]
        ready_r, ready_w = os.pipe()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        pid = seccomp.fast_fork()
        if pid == 0:
            try:
                os.close(ready_r)
                self._cell(mode, runner, req, fds, ready_w)
            finally:
                os._exit(CHILD_SETUP_FAILED)
        os.close(ready_w)
        try:
            killed = Zygote._watch(self, [pid], t0, float(req["time"]), float(req["wall"]))
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            _, wstatus, ru = os.wait4(pid, 0)
            said = _drain(ready_r)
        finally:
            os.close(ready_r)
        sig = os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else 0
        code = os.WEXITSTATUS(wstatus) if os.WIFEXITED(wstatus) else -1
        used = ru.ru_utime + ru.ru_stime
        if mode == "compile" or killed or not self.filters:
            Zygote._sweep(self)  # the compiler's passes (or anything that outlived its cell)
        if mode == "compile":  # every process of the compile, each reaped by now (its passes
            after = resource.getrusage(resource.RUSAGE_CHILDREN)  # by the driver or the sweep)
            used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        # "r": isolated; "!": exec failed, after which the cell exits 121: the sandbox's failure
        isolated = said.startswith(b"r") and b"!" not in said
        return {"cells": [[code, sig, used]], "killed": killed, "exec": isolated}

    _cpu = Zygote._cpu  # a process's CPU seconds, from /proc

    def _cell(self, mode, runner, req, fds, ready):
        """Between fork and exec: nothing of the cell's code runs before every layer is on."""
        role = "c" if mode == "compile" else "p"
        try:
            os.setpgid(0, 0)
            if mode == "compile":  # fds: sources, diagnostics
                src = marshal.loads(os.pread(fds[0], os.fstat(fds[0]).st_size, 0))
                fdmap = {0: self.devnull, 1: fds[1], 2: fds[1]}
                time_s = float(req["time"])
                mem = runner.compile_mem_mb << 20
                fsize = ARTIFACT_BYTES
            else:  # fds: artifact, stdin, stdout
                src = None
                fdmap = {0: fds[1], 1: fds[2], 2: self.devnull, 3: fds[0]}
                time_s = float(req["time"])
                mem = (int(req["mem_mb"]) + runner.as_extra_mb) << 20
                fsize = int(req["out_cap"]) + 1
            for target, fd in fdmap.items():
                os.dup2(fd, target, inheritable=target < 3)
            os.dup2(ready, 4, inheritable=False)
            ready = 4
            os.chdir(self.dirs[role])
            cpu = int(math.ceil(time_s)) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
            if mode == "run" and runner.stack:  # a judge's stack: as deep as memory allows
                resource.setrlimit(resource.RLIMIT_STACK, (mem, mem))
            become(self.uids.get("p"), self.drop_caps, self.pid)
            ruleset = self.rulesets.get("c" if mode == "compile" else runner.language)
            if ruleset is not None:
                seccomp.syscall(landlock.NR_RESTRICT, ruleset, 0)
            elif self.rulesets:
                os._exit(CHILD_SETUP_FAILED)
            os.closerange(5, 1 << 16)
            if mode == "compile":
                for name, data in list(src.items()) + list(runner.files.items()):
                    with open(name, "xb") as f:
                        f.write(data.encode("utf-8", "surrogateescape")
                                if type(data) is str else data)
                argv = [a.replace("{src}", req["source_name"]) for a in runner.compile]
            else:
                if runner.artifact == "classes":
                    for path, data in marshal.loads(
                            os.pread(3, os.fstat(3).st_size, 0)).items():
                        if "/" in path:
                            os.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
                        with open(path, "xb") as f:
                            f.write(data)
                argv = run_argv(runner, req["mem_mb"], req.get("main"))
            env = dict(ENV, TMPDIR=self.dirs[role], HOME=self.dirs[role])
            filt = self.filters.get("c" if mode == "compile" else runner.language)
            if filt is not None:
                seccomp.install(filt)
            elif self.filters:
                os._exit(CHILD_SETUP_FAILED)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; an ignored
                signal.signal(sig, signal.SIG_DFL)  # signal stays ignored across exec
            fcntl.fcntl(ready, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
            os.write(ready, b"r")
        except BaseException:  # noqa: BLE001 - a forked child: any setup failure is the sandbox's
            os._exit(CHILD_SETUP_FAILED)
        try:
            if mode == "run" and runner.artifact == "binary":
                os.execve(3, argv, env)  # fexecve: execveat(3, "", AT_EMPTY_PATH)
            os.execvpe(argv[0], argv, env)
        except BaseException as e:  # noqa: BLE001 - the exec failed: the sandbox's doing, said so
            try:
                os.write(ready, b"!")
                if mode == "compile":  # the diagnostics say why
                    os.write(2, ("cannot execute %s: %s" % (argv[0], e)).encode())
            except OSError:
                pass
        os._exit(CHILD_SETUP_FAILED)


def _drain(fd):
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 64)
    except BlockingIOError:
        return b""

