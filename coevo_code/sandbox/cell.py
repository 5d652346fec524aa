"""What a forked cell runs, after the zygote has isolated it. Never returns: every path ends in
``os._exit``.

File descriptors, set by the zygote:

- a **stdio program**: 0 its input (a sealed memfd), 1 its output (a memfd the judge reads), 2
  /dev/null, 3 its compiled code (and the job's setup, unused). Its verdict is decided by the judge from its exit status and
  output alone: it holds no channel to declare one.
- a **program answering calls** (functional tests): 0 and 2 /dev/null, 1 its output (capped like
  a stdio program's), 3 its code and the job's setup, 4 requests from the test, 5 its answers. It
  runs the program as ``__main__`` and then the setup in the same namespace (as a single process
  did before the split), then answers the test's calls (``call``, ``getattr``, a few protocol ops on
  handles) with values encoded by :mod:`.codec`.
- a **test** (or a checker): 0-2 /dev/null, 3 its code (the job's ``setup`` and the test, compiled
  by the judge), 4 the program's answers, 5 requests to it, 6 its status memfd. It runs the setup
  and the test in a namespace of its own, where the program's functions, classes and values are
  stand-ins that call into the program process; the comparisons, the builtins and every helper
  are its own. It writes ``OK<repr of the last expression>`` after the test ran to its end, or
  ``ASSERT`` / ``MEM`` / ``EXC <name>`` / ``PROG <what the program did>``.
"""

import builtins
import io
import marshal
import os
import sys

from .codec import CodecError, TooLarge, canonical, decode, encode
from .handles import (_HANDLE_CLASSES, _SHAPE_CACHE, _SHAPED, FULL_SHAPE, HANDLE_SHAPES_CAP,  # noqa: F401
                      SHAPE_ABCS, SHAPE_METHODS, Handle, ProgramError, ProgramGone, _bind_program,
                      _Link, _module_names, _stdlib_names, binds_program_object, handle_class,
                      object_shape, prepare, recv_plain)
from .protocol import EXIT_MEMORY, FRAME_CAP, RETURN_OUTPUT_CAP, recv, send


_KEEP = []
_STREAMS = None
HANDLE_TEXT_CAP = 1000  # characters of a handle's repr sent along (then a digest of the rest)

def _stream(fd, mode, name, like, errors, line_buffering):
    """One standard stream as CPython's ``create_stdio`` makes it for a file that is not a
    terminal: a FileIO named ``<stdin>`` (and its buffer), a TextIOWrapper with ``mode`` and
    ``name``, splitting lines at ``\n`` only, with the encoding and errors the interpreter chose
    for its own (``like``: UTF-8 and surrogateescape under the sandbox's C.UTF-8 locale)."""
    raw = io.FileIO(fd, mode + "b", closefd=False)
    raw.name = name
    buf = (io.BufferedReader if mode == "r" else io.BufferedWriter)(raw)
    text = io.TextIOWrapper(buf, encoding=getattr(like, "encoding", None) or "utf-8",
                            errors=getattr(like, "errors", None) or errors, newline="\n",
                            line_buffering=line_buffering)
    text.mode = mode
    return text


def new_streams():
    """Streams as a fresh interpreter with a non-tty stdin/stdout would have them (every
    attribute a program may read: ``mode``, ``name``, ``encoding``, ``errors``, ``buffer``,
    ``fileno()``, ``isatty()``...). Built once in the zygote (never used there), so that a cell
    only has to install its pristine copies."""
    global _STREAMS
    _STREAMS = (_stream(0, "r", "<stdin>", sys.__stdin__, "strict", False),
                _stream(1, "w", "<stdout>", sys.__stdout__, "strict", False),
                _stream(2, "w", "<stderr>", None, "backslashreplace", True))


def _fresh_streams():
    # The zygote's own stream objects are kept alive: collecting them would close fds 0-2.
    _KEEP.extend([sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__,
                  sys.__stderr__])
    sys.stdin, sys.stdout, sys.stderr = _STREAMS
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = _STREAMS


def _depth():
    f, d = sys._getframe(1), 0
    while f is not None:
        d += 1
        f = f.f_back
    return d


def _read_code(fd=3):
    """The marshalled payload the judge sealed into fd 3; the fd is closed afterwards."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    os.close(fd)
    return marshal.loads(data)


def _main_namespace(default_recursion, adjust, seed=None):
    """A fresh ``__main__`` as ``python main.py`` has it, the seeds of ``random`` and
    ``numpy.random`` (``seed``: a program's, the job's own, the same in every cell of a job, so
    that its outputs do not depend on the slot; fresh entropy without one, as a test or a
    checker always has it), and the recursion room of a fresh interpreter (the zygote's frames
    below do not count)."""
    _fresh_streams()
    sys.argv = ["main.py"]
    main_module = type(sys)("__main__")
    _KEEP.append(sys.modules.get("__main__"))
    sys.modules["__main__"] = main_module
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    if "random" in sys.modules:
        sys.modules["random"].seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            # An int seed is ~10x cheaper in a forked cell than seed(None) or an array seed.
            np.random.seed(seed & 0xFFFFFFFF)
        except Exception:  # noqa: BLE001 - a numpy that refuses the seed stays unseeded
            pass
    g = main_module.__dict__
    g["__builtins__"] = builtins
    g["__file__"] = "main.py"
    # +2: this frame and exec()'s, corrected by the zygote's calibration against a fresh
    # interpreter where a CPython version counts them otherwise.
    offset = _depth() + 1 + adjust
    real_get, real_set = sys.getrecursionlimit, sys.setrecursionlimit
    real_set(default_recursion + offset)
    # ... and the program reads and sets the limit as it would there.
    sys.getrecursionlimit = lambda: real_get() - offset
    sys.setrecursionlimit = lambda limit: real_set(limit + offset)
    return g


def _exit_code(e):
    c = e.code
    if c is None:
        return 0
    if isinstance(c, int):
        return c & 0xFF
    try:
        sys.stderr.write(str(c) + "\n")
    except BaseException:  # noqa: BLE001 - the exit value's str() is the program's code: it may raise anything
        pass
    return 1


def _finish(status):
    """Non-daemon threads and atexit handlers, as at interpreter exit; flush; exit."""
    try:
        th = sys.modules.get("threading")
        if th is not None and th.active_count() > 1:
            th._shutdown()
        import atexit
        atexit._run_exitfuncs()
    except SystemExit as e:
        status = _exit_code(e)
    except BaseException:  # noqa: BLE001 - the program's exit handlers may raise anything; the status stands
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except MemoryError:
            status = EXIT_MEMORY
        except BaseException:  # noqa: BLE001 - a stream the program replaced may raise anything on flush
            pass
    os._exit(status)


# ---- a stdio program ------------------------------------------------------------------------
def run_stdio(default_recursion, adjust, seed=None):
    code, _ = _read_code()
    g = _main_namespace(default_recursion, adjust, seed)
    status = 0
    try:
        exec(code, g)
    except SystemExit as e:
        status = _exit_code(e)
    except MemoryError:
        status = EXIT_MEMORY
    except BaseException:  # noqa: BLE001 - a program may raise anything
        # (no traceback: stderr is /dev/null, and formatting a RecursionError's costs ~30 ms)
        status = 1
    _finish(status)


# ---- a program answering calls ----------------------------------------------------------------
class _Table:
    """Objects of the program that crossed as handles, by id: one handle per object (kept alive
    here for the cell's life, so its ``id`` is never reused), so that ``f() is f()`` holds in
    the test for an object the program returns twice."""

    def __init__(self):
        self.objs = {}
        self.ids = {}

    def put(self, obj):
        k = self.ids.get(id(obj))
        if k is None:
            k = len(self.objs) + 1
            self.objs[k] = obj
            self.ids[id(obj)] = k
        try:
            text = repr(obj)
            if type(text) is not str:
                text = "<object>"
        except BaseException:  # noqa: BLE001 - the program's own __repr__
            text = "<object>"
        if len(text) > HANDLE_TEXT_CAP:  # cut, with a digest of the whole: no truncation
            try:  # decides whether two handles' texts are the same
                text = output_text(text, HANDLE_TEXT_CAP)
            except BaseException:  # noqa: BLE001 - a MemoryError: the cut alone
                text = text[:HANDLE_TEXT_CAP]
        methods, abcs = object_shape(obj)
        return ("H", k, text, methods, abcs)

    def get(self, k, *_):
        try:
            return self.objs[k]
        except (KeyError, TypeError):
            raise CodecError("no handle %r" % (k,))


def _encode_result(v, table):
    try:
        return encode(v, table.put)
    except (RecursionError, MemoryError):
        return table.put(v)


def _answer(msg, g, table):
    op = msg[0]
    if op == "ns":
        ns = {}
        for name, value in list(g.items()):
            if type(name) is not str or (name.startswith("__") and name.endswith("__")):
                continue
            if type(value) is type(sys):
                ns[name] = ("M", getattr(value, "__name__", ""))
            elif callable(value):
                ns[name] = ("C", table.put(value))
            else:
                ns[name] = ("V", _encode_result(value, table))
        return ("ns", tuple(ns.items()))  # pairs: a frame of the program's never holds a dict
    if op == "call":
        target = table.get(msg[1])
        args = decode(msg[2], table.get)
        kwargs = decode(msg[3], table.get)
        if type(args) is not tuple or type(kwargs) is not dict:
            raise CodecError("malformed call arguments")
        return ("ok", _encode_result(target(*args, **kwargs), table))
    if op == "callname":  # the judge's own call of a global, for a test it decides itself
        name = msg[1]
        if type(name) is not str or name not in g:
            raise NameError("name %r is not defined" % (name,))
        args = decode(msg[2], table.get)
        kwargs = decode(msg[3], table.get)
        if type(args) is not tuple or type(kwargs) is not dict:
            raise CodecError("malformed call arguments")
        return ("ok", _encode_result(g[name](*args, **kwargs), table))
    if op == "getattr":
        if type(msg[2]) is not str:
            raise CodecError("an attribute name that is not text")
        return ("ok", _encode_result(getattr(table.get(msg[1]), msg[2]), table))
    if op == "setattr":
        if type(msg[2]) is not str:
            raise CodecError("an attribute name that is not text")
        setattr(table.get(msg[1]), msg[2], decode(msg[3], table.get))
        return ("ok", None)
    if op == "op":
        obj, what = table.get(msg[1]), msg[2]
        arg = decode(msg[3], table.get)
        if what == "iter":
            v = iter(obj)
        elif what == "next":
            v = next(obj)
        elif what == "len":
            v = len(obj)
        elif what == "getitem":
            v = obj[arg]
        elif what == "contains":
            v = arg in obj
        elif what == "str":
            v = str(obj)
        elif what == "bool":  # __bool__, then __len__, as Python decides truth
            v = bool(obj)
        elif what == "reversed":
            v = reversed(obj)
        elif what == "ne":  # only between two of the program's own objects (see Handle)
            v = bool(obj != arg)
        else:
            raise CodecError("an unknown op %r" % (what,))
        return ("ok", _encode_result(v, table))
    raise CodecError("an unknown request %r" % (op,))


def serve_program(default_recursion, adjust, seed=None):
    code, setup = _read_code()
    g = _main_namespace(default_recursion, adjust, seed)
    try:
        exec(code, g)
        exec(setup, g)  # as before the split: the program sees what the job's setup defines
    except SystemExit:
        os._exit(1)  # a program that exits while loading answers nothing
    except MemoryError:
        dead = ("dead", "MEM")
    except BaseException as e:  # noqa: BLE001 - the program failed while loading: its exception, by name
        dead = ("dead", "EXC " + type(e).__name__)
    else:
        dead = None
    table = _Table()
    while True:
        try:
            msg = recv(4, FRAME_CAP)
        except BaseException:  # noqa: BLE001 - the test is gone (or wrote garbage): the cell
            os._exit(0)  # is over, and nothing of the program's exit matters any more
        if dead is not None:
            reply = dead
        else:
            try:
                if type(msg) is not tuple or not msg:
                    raise CodecError("a request that is not a tuple")
                _SHAPE_CACHE.clear()  # a class may have changed since the last request
                reply = _answer(msg, g, table)
            except SystemExit:
                os._exit(1)  # exiting during a call fails that call (the test sees it end)
            except MemoryError:
                reply = ("raise", "MemoryError", "")
            except BaseException as e:  # noqa: BLE001 - the program's exception, by name
                try:
                    text = str(e)[:1000]
                except BaseException:  # noqa: BLE001 - the exception's str() is the program's code too
                    text = ""
                reply = ("raise", type(e).__name__, text)
        try:
            send(5, reply)
        except (ValueError, OverflowError):  # marshal refused: too large or too deep
            try:
                send(5, ("raise", "MemoryError", "the answer could not be sent"))
            except BaseException:  # noqa: BLE001 - nothing can be sent: the memory exit says it
                os._exit(EXIT_MEMORY)
        except MemoryError:  # the answer did not fit the program's memory: its memory limit
            os._exit(EXIT_MEMORY)
        except OSError:
            os._exit(0)


def value_tree(tree):
    """A test's syntax tree with its last statement, when it is an expression (``add(1, 2)``),
    assigned to ``__coevo_value__``: that value is the cell's output. Changes ``tree``."""
    import ast
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        name = ast.copy_location(ast.Name("__coevo_value__", ast.Store()), last)
        name.end_lineno, name.end_col_offset = last.end_lineno, last.end_col_offset
        tree.body[-1] = ast.copy_location(ast.Assign(targets=[name], value=last.value), last)
    return tree


def compile_test(src):
    """A functional test's code. The judge compiles a short test once per unit and sends the code
    (``server.judge_compiled_test``); a test it did not compile (long, or one whose compiling
    failed there) is compiled here, in the test's own process: its cost, its recursion and its
    errors are the test's (a set literal of 20,000 colliding hashes costs that cell, never the
    judge)."""
    if type(src) is not str:  # compiled by the judge
        return src
    import ast
    return compile(value_tree(ast.parse(src, "test.py")), "test.py", "exec", dont_inherit=True)


def output_text(text, cap=RETURN_OUTPUT_CAP):
    """A cell's output as returned: whole up to ``cap`` characters, else its first ``cap``
    characters and the SHA-256 of the whole, so that equal outputs stay equal and different
    ones different, however long (no truncation decides an equality)."""
    if len(text) <= cap:
        return text
    import hashlib
    return "%s #sha256:%s" % (text[:cap], hashlib.sha256(
        text.encode("utf-8", "surrogatepass")).hexdigest())


def _handle_text(v):
    return v._repr if type(v) in _HANDLE_CLASSES else None


def run_test(default_recursion, adjust, with_program=True, seed=None):
    """A test (or a checker). ``seed`` is ignored: its ``random`` and ``numpy.random`` draw
    fresh entropy, never the job's seed, which the program knows (it could replay the random
    inputs a test draws without seeding, as HumanEval/38's and /50's do, and pass unsolved)."""
    setup, test, entry_point, out_cap = _read_code()
    g = _main_namespace(default_recursion, adjust, None)
    report = b""
    link = None
    try:
        code = compile_test(test)
        if with_program:
            link = _Link(4, 5, out_cap)
            _bind_program(g, link, entry_point)
        exec(setup, g)
        exec(code, g)
        if "__coevo_value__" in g:
            try:
                text = canonical(g["__coevo_value__"], out_cap, _handle_text)
                report = b"OK" + output_text(text).encode("utf-8", "surrogatepass")
            except TooLarge:
                report = b"PROG OUTPUT"
        else:
            report = b"OK"
    except ProgramGone as e:
        report = b"PROG " + str(e).encode()
    except MemoryError as e:
        report = b"PROG MEM" if getattr(e, "_coevo_from_program", False) else b"MEM"
    except AssertionError as e:
        report = (b"PROG EXC AssertionError" if getattr(e, "_coevo_from_program", False)
                  else b"ASSERT")
    except BaseException as e:  # noqa: BLE001 - a test may raise anything
        report = (b"PROG EXC " if getattr(e, "_coevo_from_program", False) else b"EXC ") \
            + type(e).__name__.encode()
    if link is not None and link.gone is not None and not report.startswith(b"PROG "):
        # the program died, answered out of protocol or overran under the test, and the test
        # swallowed the ProgramGone (a bare except): exiting is never a pass
        report = b"PROG " + link.gone.encode("ascii", "replace")
    try:
        os.write(6, report)
    except OSError:
        pass
    os._exit(0)
