"""The judge: the process a launcher starts (``python -I -c BOOTSTRAP CONFIG MODULE...``), inside
the isolation boundary, once per executor slot.

It talks to the host over the two inherited pipes (fds 0 and 1, moved away at start-up; 4-byte
big-endian length + ``marshal`` payload both ways), holds the jobs' programs, tests and expected
outputs, and decides every verdict. It never runs program or test code itself: at start-up, before
the first job, it forks the zygotes (one with the common modules preloaded, one with numpy too),
and for each cell it seals the cell's code and input into memfds and asks a zygote to run it.
A stdio program's output is compared here (or by a checker in a cell of its own); a functional
test runs in a cell apart from the program it calls, and reports its own status, which only the
test process holds. See docs/EXECUTION.md for the threat model.
"""

import ast
import json
import marshal
import os
import resource
import signal
import socket
import stat
import struct
import sys

from . import seccomp
from .answers import JUDGE_FRAME_CAP, NeedsTestProcess, _judge_decode, _opaque_text
from .cell import output_text
from .codec import TooLarge, canonical, encode, marshal_is_plain
from .native import COMPILE_ROLE, Compiled, NativeZygote, find_tools, run_native
from .outcomes import (_functional_outcome, _stdio_outcome, same_tokens, status_text,
                       stdio_output, take_memfd)
from .prepare import (_NO_VALUE, FLOOD_SCAN_BYTES, hash_flood,
                      judge_compiled_test, literal_call, parse_test, tree_uses_modules,
                      uses_modules)
from .protocol import (CHILD_SETUP_FAILED, EXIT_MEMORY, MEMORY, OK, OUTPUT, RUNTIME, SANDBOX,
                       STATUS_CAP, SYNTAX, TIMEOUT, WRONG, read_exact, recv, recv_msg, send,
                       send_msg)
from .zygote import Zygote, fresh_depth, sealed_memfd

INPUT_CACHE_BYTES = 64 << 20  # test inputs kept as sealed memfds across units
INPUT_CACHE_COUNT = 4096
TEST_CACHE_BYTES = 64 << 20  # functional tests kept prepared across units: what they keep,
TEST_CACHE_COUNT = 4096  # estimated as their source plus TEST_NODE_BYTES per syntax-tree node
TEST_NODE_BYTES = 128  # (the literals and code kept of one node: about 100 bytes as measured)
JUDGE_MEMORY_MB = 4096  # address space the judge may add to what it maps at start-up
JUDGE_CPU_BASE_S = 30.0  # CPU seconds the judge may spend on a unit: this, plus per cell ...
JUDGE_CPU_PER_CELL_S = 2.0  # ... this and the cell's time limit (its checker's, at most)


class ZygoteGone(RuntimeError):
    pass


def _no_handle(obj):
    raise TypeError("a %s cannot be passed to the program" % type(obj).__name__)


def empty_dir(path, limit=1 << 20):
    """Remove everything beneath ``path`` (kept itself), whatever a cell left there: with no
    recursion and a bounded number of open descriptors (subdirectories are hoisted to the top
    before their parent is removed, so a tree thousands of levels deep costs nothing more),
    making unreadable directories readable first. Raises OSError past ``limit`` entries."""
    top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    done = 0
    try:
        while True:
            names = os.listdir(top)
            if not names:
                return
            for name in names:
                done += 1
                if done > limit:
                    raise OSError("more than %d entries under %s" % (limit, path))
                _remove(top, name, done)
    finally:
        os.close(top)


def _remove(top, name, serial):
    try:
        os.unlink(name, dir_fd=top)
        return
    except IsADirectoryError:
        pass
    except FileNotFoundError:
        return
    except PermissionError:  # a directory unlink() refuses with EPERM on some file systems
        if not stat.S_ISDIR(os.stat(name, dir_fd=top, follow_symlinks=False).st_mode):
            raise
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        d = os.open(name, flags, dir_fd=top)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=top, follow_symlinks=False)
        d = os.open(name, flags, dir_fd=top)
    try:
        for sub in os.listdir(d):
            try:
                os.unlink(sub, dir_fd=d)
            except (IsADirectoryError, PermissionError):
                os.rename(sub, ".coevo-%d-%s" % (serial, sub[:100]), src_dir_fd=d,
                          dst_dir_fd=top)
    finally:
        os.close(d)
    os.rmdir(name, dir_fd=top)


class Judge:
    def __init__(self, cfg):
        self.cfg = cfg
        # The protocol pipes move off 0/1; 0/1/2 become /dev/null so nothing reaches the host.
        self.rfd = os.dup(0)
        self.wfd = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
        for fd in (self.rfd, self.wfd):
            os.set_inheritable(fd, False)
        self.pid = os.getpid()
        self.counter = 0
        self.start_error = None
        try:
            self._start(cfg)
        except Exception as e:  # noqa: BLE001 - reported to the host in the hello, never a bare exit
            self.start_error = "%s: %s" % (type(e).__name__, e)

    def _start(self, cfg):
        self.work = cfg["workdir"]
        uids = {"p": cfg.get("uid"), "t": cfg.get("uid_test", cfg.get("uid"))}
        os.makedirs(self.work, exist_ok=True)
        os.chmod(self.work, 0o711)
        self.dirs = {}
        uids[COMPILE_ROLE] = uids["p"]  # compiles run as the program's uid, in a dir of their own
        for role in ("p", "t", COMPILE_ROLE):
            d = os.path.join(self.work, role)
            os.makedirs(d, exist_ok=True)
            empty_dir(d)
            if uids[role] is not None:
                os.chown(d, uids[role], uids[role])
            os.chmod(d, 0o700)
            self.dirs[role] = d
        self.dir_ids = {r: os.stat(d).st_ino for r, d in self.dirs.items()}
        self.dir_ctimes = {}
        depth = fresh_depth()  # before seccomp forbids exec
        preload = list(cfg.get("preload", []))
        heavy = list(cfg.get("heavy_preload", []))
        self.heavy_roots = frozenset(m.split(".")[0] for m in heavy)
        # both forked before either is waited for: they start (preload, calibrate) in parallel
        self._socks = []
        py_dirs = {r: self.dirs[r] for r in ("p", "t")}
        light = self._fork_zygote(lambda s: Zygote(self.cfg, s, preload, py_dirs, uids, depth))
        forked = (self._fork_zygote(lambda s: Zygote(self.cfg, s, preload + heavy, py_dirs, uids,
                                                     depth)) if heavy else None)
        # C++ and Java: the toolchains this judge sees, and their zygote, forked now (before
        # the judge's own filter forbids exec, which the native zygote's allows)
        self.languages, tool_paths = find_tools() if cfg.get("native", True) else ({}, [])
        native = None
        if any(on for on, _ in self.languages.values()):
            native = self._fork_zygote(lambda s: NativeZygote(self.cfg, s, self.dirs, uids,
                                                              tool_paths))
        self.compiled = Compiled()
        self.zygotes = {"light": self._zygote_hello(*light)}
        if forked is not None:
            try:
                self.zygotes["heavy"] = self._zygote_hello(*forked)
            except ZygoteGone:
                pass
        if native is not None:
            try:
                self.zygotes["native"] = self._zygote_hello(*native)
            except ZygoteGone as e:
                for lang in self.languages:
                    self.languages[lang] = [False, str(e)]
        hello = self.zygotes["light"][2]
        self.layers = hello["layers"]
        self.preloaded = list(hello["preloaded"])
        if "heavy" in self.zygotes:
            self.preloaded += [m for m in self.zygotes["heavy"][2]["preloaded"]
                               if m not in self.preloaded]
        self._limit_memory(cfg)
        self.out_fd = os.memfd_create("stdout", os.MFD_CLOEXEC)
        self.st_fd = os.memfd_create("status", os.MFD_CLOEXEC)
        self.inputs = {}  # test input bytes -> sealed memfd, most recent last
        self.inputs_bytes = 0
        self.prepared = {}  # (test, entry point, setup's names) -> prepared test, most recent last
        self.prepared_bytes = 0
        try:  # nothing of the judge (the tests, the expected outputs) for a same-uid reader
            seccomp.prctl(seccomp.PR_SET_DUMPABLE, 0)
        except OSError:
            pass
        if self.layers.get("seccomp", [False])[0]:
            seccomp.install(seccomp.server_filter())

    def _limit_memory(self, cfg):
        """The judge's own address space: what it maps now plus ``judge_memory_mb`` (default
        JUDGE_MEMORY_MB). Set after the zygotes are forked, so cells keep their own limits; a
        soft limit, which a MemoryError then reports inside the unit. Nothing the judge does
        with a program's data should come near it (every such step is bounded by the output
        limit); it is the backstop, with the CPU limit of each unit (``_limit_cpu``)."""
        extra = int(cfg.get("judge_memory_mb", JUDGE_MEMORY_MB)) << 20
        try:
            with open("/proc/self/statm", "rb") as f:
                now = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            hard = resource.getrlimit(resource.RLIMIT_AS)[1]
            want = now + extra
            if hard != resource.RLIM_INFINITY:
                want = min(want, hard)
            resource.setrlimit(resource.RLIMIT_AS, (want, hard))
        except (OSError, ValueError):
            pass

    def _limit_cpu(self, n_cells, time_limit):
        """The CPU the judge itself may spend on a unit: its own work on each cell is
        milliseconds; past this it is stopped by SIGXCPU (the host replaces it and retries the
        unit once, then reports sandbox_error), never left to run on."""
        ru = resource.getrusage(resource.RUSAGE_SELF)
        allow = JUDGE_CPU_BASE_S + n_cells * (JUDGE_CPU_PER_CELL_S + time_limit)
        try:
            hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
            soft = int(ru.ru_utime + ru.ru_stime + allow) + 1
            if hard != resource.RLIM_INFINITY:
                soft = min(soft, hard)
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        except (OSError, ValueError):
            pass

    def _fork_zygote(self, make):
        """Fork a zygote, ``make(socket)`` built in the child, and serve there."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                mine.close()
                for other in self._socks:  # the judge's ends of the zygotes forked before
                    other.close()
                os.close(self.rfd)
                os.close(self.wfd)
                seccomp.prctl(seccomp.PR_SET_PDEATHSIG, signal.SIGKILL)
                if os.getppid() != self.pid:
                    os._exit(0)
                try:
                    zygote = make(theirs)
                except Exception as e:  # noqa: BLE001 - said to the judge, which says it to the host
                    send_msg(theirs, {"error": "%s: %s" % (type(e).__name__, e)})
                else:
                    zygote.serve()
            finally:
                os._exit(0)
        theirs.close()
        self._socks.append(mine)
        return pid, mine

    def _zygote_hello(self, pid, mine):
        try:
            hello, fds = recv_msg(mine)
        except (EOFError, OSError) as e:
            mine.close()
            _, status = os.waitpid(pid, 0)
            raise ZygoteGone("a zygote did not start (%s; exit status %d)"
                             % (e or "it closed its socket", os.waitstatus_to_exitcode(status)))
        if "error" in hello:
            raise ZygoteGone("a zygote did not start: %s" % hello["error"])
        return (pid, mine, hello)

    def hello(self):
        if self.start_error is not None:
            return {"op": "hello", "error": self.start_error}
        return {"op": "hello", "pid": self.pid, "layers": self.layers,
                "python": sys.version.split()[0], "preloaded": self.preloaded,
                "hash_seed": self.cfg.get("hash_seed_in_place"), "languages": self.languages}

    # ---- the loop ------------------------------------------------------------------------------
    def serve(self):
        send(self.wfd, self.hello())
        if self.start_error is not None:
            return
        while True:
            try:
                req = recv(self.rfd)
            except EOFError:
                return
            op = req.get("op")
            if op == "run":
                try:
                    res = self.run_unit(req)
                except Exception as e:  # noqa: BLE001 - reported: the host replaces this server
                    res = {"error": "%s: %s" % (type(e).__name__, e)}
            elif op == "ping":
                res = {"op": "pong"}
            elif op == "stats":  # cells run so far
                res = {"cells": self.counter, "compiles": self.compiled.compiles}
            else:
                res = {"error": "unknown op %r" % (op,)}
            send(self.wfd, res)

    def _spawn(self, zygote, req, fds, during=None, clean=True):
        """Have ``zygote`` run one cell; ``during()``, if given, runs while the cell does (the
        judge talking to the program). Returns the zygote's report. With ``clean`` False the
        work dirs are left for the caller to read (a compile's artifact) and empty."""
        self.counter += 1
        sock = zygote[1]
        try:
            send_msg(sock, req, fds)
            if during is not None:
                during()
            res, extra = recv_msg(sock)
        except (EOFError, OSError) as e:
            raise ZygoteGone("the zygote died: %s" % e)
        for fd in extra:
            os.close(fd)
        if "error" in res:
            raise ZygoteGone(res["error"])
        if clean:
            self._clean()
        return res

    def _clean(self):
        """Empty the work dirs a cell changed. A dir's ctime moves with every entry made or
        removed in it, and no call can set it back (``utime`` moves it too), so an unchanged
        ctime means an untouched dir."""
        for role, d in self.dirs.items():
            try:
                st = os.stat(d)
            except OSError:
                st = None
            if st is None or st.st_ino != self.dir_ids[role]:
                raise RuntimeError("a cell replaced its work dir %s" % d)
            if st.st_ctime_ns != self.dir_ctimes.get(role):
                empty_dir(d)
                self.dir_ctimes[role] = os.stat(d).st_ctime_ns

    # ---- one unit: one program against a list of tests -----------------------------------------
    def run_unit(self, req):
        kind = req["kind"]
        tests = req["tests"]
        n = len(tests)
        self._limit_cpu(n, max(2.0, float(req["time"])))
        if req.get("language", "python") != "python":
            return run_native(self, req)
        want_out = bool(req.get("return_outputs"))
        outputs = [""] * n if want_out else None
        cpu = [0.0] * n
        try:
            # a long program is parsed once and scanned for a hash flood before it is compiled:
            # compiling colliding constants costs quadratic time (40,000 colliding ints: seconds
            # per unit); a short one cannot hold a flood (hash_flood), and is compiled directly
            src = req["program"]
            if len(src) > FLOOD_SCAN_BYTES:
                src = ast.parse(src, "main.py")
                if hash_flood(req["program"], src):
                    return {"outcomes": [RUNTIME] * n, "outputs": outputs, "cpu": cpu,
                            "detail": "the program's constants collide in hash"}
            code = compile(src, "main.py", "exec", dont_inherit=True)
            setup = compile(req.get("setup") or "", "setup.py", "exec", dont_inherit=True)
            checker = None
            if req.get("checker"):
                checker = compile(req["checker"], "checker.py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
            return {"outcomes": [SYNTAX] * n, "outputs": outputs, "cpu": cpu,
                    "detail": "%s: %s" % (type(e).__name__, e)}
        entry = req.get("entry_point")
        # each functional test parsed, scanned and compiled once per judge, not once per unit
        prepared = [self._prepare_test(t, entry, setup) for t in tests] if kind != "stdio" else []
        fast = [p[0] for p in prepared] if kind != "stdio" else None
        zygote = self.zygotes["light"]
        # numpy's zygote for a program or a test that imports it, or a setup that does so at its
        # top level (evalplus's checks import it inside a function, only on a float mismatch:
        # that test pays the import itself, the others keep the light zygote's cheap forks)
        if "heavy" in self.zygotes and (
                uses_modules(code, self.heavy_roots)
                or uses_modules(setup, self.heavy_roots, nested=False)
                or any(p[1] for p in prepared)):
            zygote = self.zygotes["heavy"]
        limits = {"time": float(req["time"]), "wall": float(req["wall"]),
                  "mem_mb": float(req["mem_mb"]), "out_cap": int(float(req["out_mb"]) * (1 << 20)),
                  "seed": req.get("seed")}
        cap = limits["out_cap"]
        expected = req.get("expected")
        outcomes = []
        if kind != "stdio":  # what each test's process gets: its code, or its source
            tests = [p[2] for p in prepared]
        code_fd = sealed_memfd(marshal.dumps((code, setup)))
        try:
            for i, test in enumerate(tests):
                if kind == "stdio":
                    in_fd = self._input(test)
                    res = self._spawn(zygote, dict(limits, mode="stdio"),
                                      [code_fd, in_fd, self.out_fd])
                    (rc, sig, used), = res["cells"]
                    out = take_memfd(self.out_fd, cap + 1)
                    outcome = self.stdio_verdict(limits, res["killed"], rc, sig, used, out,
                                                 checker, test, expected[i])
                    text = stdio_output(out) if want_out else ""
                elif fast[i] is not None and zygote is self.zygotes["light"]:
                    try:
                        outcome, text, used = self.run_call(limits, code_fd, fast[i], want_out)
                    except NeedsTestProcess:
                        fast[i] = None
                        outcome = None
                    if outcome is None:  # decided by a test process after all
                        outcome, text, used = self.run_test_cell(zygote, limits, code_fd, setup,
                                                                 test, entry, want_out)
                else:
                    outcome, text, used = self.run_test_cell(zygote, limits, code_fd, setup,
                                                             test, entry, want_out)
                cpu[i] = used
                outcomes.append(outcome)
                if want_out:
                    outputs[i] = text
        finally:
            os.close(code_fd)
        return {"outcomes": outcomes, "outputs": outputs, "cpu": cpu}

    def stdio_verdict(self, limits, killed, rc, sig, used, out, checker, test, expected):
        """A stdio cell's outcome, Python's or a native program's: its limits first, then the
        checker, or the tokens compared with ``expected``."""
        outcome = _stdio_outcome(killed, rc, sig, used, limits["time"], out, limits["out_cap"])
        if outcome is None:
            if checker is not None:
                return self.run_checker(limits, checker, test, expected, out)
            return OK if same_tokens(out, expected) else WRONG
        return outcome

    def _prepare_test(self, src, entry, setup):
        """A functional test as every unit runs it: ``(literal call or None, whether it imports a
        heavy module, what its test process gets, estimated size)``, the third
        ``judge_compiled_test``'s code or the source itself. Kept across units
        (TEST_CACHE_COUNT tests, TEST_CACHE_BYTES of estimated size, least recently used out
        first), keyed by the test, the entry point and the names the setup uses (all that
        ``literal_call`` reads of the unit): every program of a job runs the same tests, so a
        job's tests are parsed and compiled once per judge, not once per program."""
        key = (src, entry, setup.co_names)
        hit = self.prepared.pop(key, None)
        if hit is None:
            tree = parse_test(src)
            call = None if tree is None or hash_flood(src, tree) else literal_call(tree, entry,
                                                                                   setup)
            heavy = tree is not None and tree_uses_modules(tree, self.heavy_roots)
            size = 4 * len(src) + (0 if tree is None else
                                   TEST_NODE_BYTES * sum(1 for _ in ast.walk(tree)))
            hit = (call, heavy, judge_compiled_test(src, tree), size)  # last: changes the tree
            while self.prepared and (self.prepared_bytes + size > TEST_CACHE_BYTES
                                     or len(self.prepared) >= TEST_CACHE_COUNT):
                # the least recently used first
                self.prepared_bytes -= self.prepared.pop(next(iter(self.prepared)))[3]
            self.prepared_bytes += size
        self.prepared[key] = hit  # most recent last
        return hit

    def run_test_cell(self, zygote, limits, code_fd, setup, test, entry, want_out):
        """A functional test in a process of its own, calling the program in another."""
        t_fd = sealed_memfd(marshal.dumps((setup, test, entry, limits["out_cap"])))
        try:
            res = self._spawn(zygote, dict(limits, mode="func"),
                              [code_fd, t_fd, self.out_fd, self.st_fd])
        finally:
            os.close(t_fd)
        cap = limits["out_cap"]
        out = take_memfd(self.out_fd, cap + 1)
        status = take_memfd(self.st_fd, STATUS_CAP)
        outcome = _functional_outcome(res, limits["time"], out, cap, status)
        text = status_text(status[2:]) if want_out and outcome == OK else ""
        return outcome, text, res["cells"][0][2]

    def run_call(self, limits, code_fd, call, want_out):
        """A literal-only test, decided here: one call into the program over two pipes, the
        answer decoded to exact types and compared (or, for a probe, its canonical text taken)
        by the judge. Returns (outcome, output text, cpu seconds). Every step is bounded by the
        answer's size: larger than the output limit is ``output_limit``; larger than
        JUDGE_FRAME_CAP, or costly to decode, goes to a test process (CPU-limited)."""
        name, args, kwargs, expected = call
        cap = limits["out_cap"]
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        mine = {req_r, req_w, rep_r, rep_w}
        reply = None

        def talk():
            nonlocal reply
            for fd in (req_r, rep_w):  # the cell holds these now: EOF when it dies
                os.close(fd)
                mine.discard(fd)
            try:
                send(req_w, ("callname", name, encode(args, _no_handle),
                             encode(kwargs, _no_handle)))
                (size,) = struct.unpack(">I", read_exact(rep_r, 4))
                if size > cap:
                    reply = "output limit"
                elif size > JUDGE_FRAME_CAP:
                    reply = "too large"
                else:
                    data = read_exact(rep_r, size)
                    reply = marshal.loads(data) if marshal_is_plain(data) else "refused"
            except (EOFError, OSError, ValueError, TypeError):
                reply = None  # the program died, hung until killed, or broke the protocol
            finally:  # the program's cue to end; a write it is still making fails at once
                for fd in (req_w, rep_r):
                    os.close(fd)
                    mine.discard(fd)

        try:
            res = self._spawn(self.zygotes["light"], dict(limits, mode="call"),
                              [code_fd, self.out_fd, req_r, rep_w], during=talk)
        finally:
            for fd in mine:
                os.close(fd)
        out = take_memfd(self.out_fd, cap + 1)
        (rc, sig, used), = res["cells"]
        if res["killed"] or used > limits["time"] or sig == signal.SIGXCPU:
            return TIMEOUT, "", used
        if rc == CHILD_SETUP_FAILED:
            return SANDBOX, "", used
        if sig == signal.SIGXFSZ or len(out) > cap or reply == "output limit":
            return OUTPUT, "", used
        if rc == EXIT_MEMORY and type(reply) is not tuple:
            return MEMORY, "", used
        if reply == "too large":
            raise NeedsTestProcess
        if type(reply) is not tuple or not reply:
            return RUNTIME, "", used  # died, broke the protocol, or a refused frame
        if reply[0] in ("raise", "dead"):
            mem = reply[1:2] in (("MemoryError",), ("MEM",))
            return (MEMORY if mem else RUNTIME), "", used
        if reply[0] != "ok" or len(reply) != 2:
            return RUNTIME, "", used
        try:
            value = _judge_decode(reply[1])
        except NeedsTestProcess:
            raise
        except MemoryError:
            return MEMORY, "", used
        except Exception:  # noqa: BLE001 - malformed (CodecError) or refused (OverflowError...):
            return RUNTIME, "", used  # as the test process's decode would end the test
        if expected is _NO_VALUE:
            try:
                text = canonical(value, cap, _opaque_text)
            except TooLarge:
                return OUTPUT, "", used
            except MemoryError:
                return MEMORY, "", used
            return OK, output_text(text) if want_out else "", used
        try:
            same = bool(value == expected)
        except Exception:  # noqa: BLE001 - an ambiguous comparison, as assert would raise
            return RUNTIME, "", used
        return (OK if same else WRONG), "", used

    def run_checker(self, limits, checker, test, expected, out):
        arg = repr((test.decode("utf-8", "replace"), expected.decode("utf-8", "replace"),
                    out.decode("utf-8", "replace")))
        call = compile("assert check(*%s)" % arg, "check_call.py", "exec", dont_inherit=True)
        fd = sealed_memfd(marshal.dumps((checker, call, None, 0)))
        req = dict(limits, mode="checker", time=max(limits["time"], 2.0),
                   wall=max(limits["wall"], 5.0))
        try:
            res = self._spawn(self.zygotes["light"], req, [fd, self.st_fd])
        finally:
            os.close(fd)
        status = take_memfd(self.st_fd, STATUS_CAP)
        return OK if not res["killed"] and status.startswith(b"OK") else WRONG

    def _input(self, data):
        """A sealed memfd holding ``data``, cached across units (the same tests recur for every
        program of a job); rewound for each cell, which shares its offset. The cache lives here,
        in the judge, which no cell is forked from."""
        fd = self.inputs.pop(data, None)
        if fd is None:
            fd = sealed_memfd(data, "stdin")
            self.inputs_bytes += len(data)
            while self.inputs and (self.inputs_bytes > INPUT_CACHE_BYTES
                                   or len(self.inputs) >= INPUT_CACHE_COUNT):
                old, ofd = next(iter(self.inputs.items()))
                del self.inputs[old]
                os.close(ofd)
                self.inputs_bytes -= len(old)
        else:
            os.lseek(fd, 0, os.SEEK_SET)
        self.inputs[data] = fd
        return fd


DEFAULT_HASH_SEED = 20241205  # PYTHONHASHSEED of every judge, zygote and cell (unless set)


def with_hash_seed(seed):
    """Re-execute this interpreter with ``PYTHONHASHSEED=seed`` unless it already runs with it.

    A launcher starts the judge as ``python -I``, which ignores the environment and so draws a
    random string-hash seed: each slot would have its own, and a program printing a set of
    strings would print it in another order on another slot. The seed is fixed when an
    interpreter starts, so the judge starts again, once, as ``python -s -P`` (-I less
    ``-E``) in the environment the launcher gave it with the seed added; every zygote and cell
    forked from it inherits the seed. Returns True when the seed is in place, False when it
    cannot be (an interpreter before 3.11 has no ``-P``; one not started with ``-c``): the
    judge says so in its hello, and ``coevo doctor`` shows it."""
    seed = str(int(seed))
    if not sys.flags.ignore_environment and os.environ.get("PYTHONHASHSEED") == seed:
        os.environ.pop("PYTHONHASHSEED")  # the cells see the launcher's environment
        return True
    argv = list(getattr(sys, "orig_argv", ()))
    if sys.version_info < (3, 11) or "-c" not in argv:
        return False
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONHASHSEED=seed, PYTHONDONTWRITEBYTECODE="1")
    rest = argv[argv.index("-c"):]
    os.execve(sys.executable, [sys.executable, "-s", "-P"] + rest, env)


def drop_sources():
    """Forget the Python copies of the modules' sources the bootstrap read from the command line
    (``sys.argv[2:]`` and ``sys.orig_argv``'s, 130 KB each), so that no zygote or cell holds
    them (each zygote hands the freed pages back before it forks cells). The kernel's copy on
    the stack, ``/proc/self/cmdline``, and the interpreter's own stay; the sources are public."""
    extra = len(sys.argv) - 2
    if extra > 0 and sys.argv[0] == "-c":
        del sys.argv[2:]
        orig = getattr(sys, "orig_argv", None)
        if type(orig) is list and len(orig) > extra:
            del orig[-extra:]


def main(cfg=None):
    if cfg is None:
        cfg = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    seed = cfg.get("hash_seed", DEFAULT_HASH_SEED)
    cfg["hash_seed_in_place"] = None  # none asked for: a random one, as in any interpreter
    if seed is not None:
        cfg["hash_seed_in_place"] = with_hash_seed(seed)
    drop_sources()
    cfg.setdefault("workdir", "/tmp/coevo-slot")
    Judge(cfg).serve()
