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
import struct
import sys

from .codec import CodecError, TooLarge, canonical, decode, encode, marshal_is_plain
from .protocol import (EXIT_MEMORY, FRAME_CAP, RETURN_OUTPUT_CAP, ProtocolError, read_exact,
                       recv, send)


def recv_plain(fd, cap):
    """A frame from the program: at most ``cap`` bytes (ProtocolError past it), loaded only if
    it holds nothing but what ``codec.encode`` makes (ValueError otherwise): a dict or a
    frozenset of colliding keys, written by the program itself, is never built."""
    (n,) = struct.unpack(">I", read_exact(fd, 4))
    if n > cap:
        raise ProtocolError("a message of %d bytes (cap %d)" % (n, cap))
    data = read_exact(fd, n)
    if not marshal_is_plain(data):
        raise ValueError("a frame holding more than plain values")
    return marshal.loads(data)

_KEEP = []
_STREAMS = None
HANDLE_TEXT_CAP = 1000  # characters of a handle's repr sent along (then a digest of the rest)

# A handle follows the data model for isinstance too. Its class has those of these methods the
# object's class has, and no others: the special methods (and generator methods) by which
# collections.abc's structural ABCs recognise a class in their __subclasshook__ (Sized,
# Iterable, Container, Callable, Iterator, Hashable, Reversible, Collection, Generator, the async
# ones, Buffer), and __getitem__ (iteration's fallback). Each is read from the object's class
# as collections.abc reads it: the first class of its MRO naming it decides, and None there
# means "not there".
SHAPE_METHODS = ("__len__", "__iter__", "__contains__", "__call__", "__next__", "__hash__",
                 "__reversed__", "__getitem__", "__await__", "__aiter__", "__anext__", "send",
                 "throw", "close", "asend", "athrow", "aclose", "__buffer__")
# the methods every handle had before its class followed the object's (a shape the program
# could not give)
FULL_SHAPE = sum(1 << SHAPE_METHODS.index(m) for m in ("__len__", "__iter__", "__contains__",
                                                        "__call__", "__next__", "__hash__",
                                                        "__getitem__"))
# The nominal ABCs (those a class joins by inheritance or ``register``, not by its methods)
# whose answer the program gives for each of its objects (isinstance in its own process, where
# its registrations and inheritance live: ``dict_keys`` is a KeysView there); the handle's class
# is registered with those that say yes. (The structural ones follow from the methods.)
SHAPE_ABCS = tuple(("collections.abc", n) for n in (
    "Set", "MutableSet", "Mapping", "MutableMapping", "MappingView", "KeysView", "ItemsView",
    "ValuesView", "Sequence", "MutableSequence")) + tuple(
    ("numbers", n) for n in ("Number", "Complex", "Real", "Rational", "Integral"))
HANDLE_SHAPES_CAP = 256  # distinct handle classes a test makes; past them the program is
# answering out of protocol (no honest program has that many kinds of object)


def _shape_abcs():
    """The ABCs of SHAPE_ABCS (None where this interpreter lacks one), imported on first
    use."""
    abcs = getattr(_shape_abcs, "cache", None)
    if abcs is None:
        import importlib
        abcs = []
        for mod, name in SHAPE_ABCS:
            try:
                abcs.append(getattr(importlib.import_module(mod), name, None))
            except ImportError:
                abcs.append(None)
        _shape_abcs.cache = abcs
    return abcs


_SHAPE_CACHE = {}


def object_shape(obj):
    """``(methods, abcs)`` of a program's object, as bit masks over SHAPE_METHODS and
    SHAPE_ABCS: which of the methods its class has (as collections.abc's ``_check_methods``
    reads them) and which ABCs it is an instance of, in this process. The object's own code
    may run (a ``__class__`` property, a metaclass): anything it raises gives the full shape
    and no ABC, as a handle answered before. Within one request the shape of a class is kept
    (``_SHAPE_CACHE``, emptied before each request; an ABC registering a class anywhere starts
    it afresh): the program's namespace holds hundreds of functions and classes of a few
    types."""
    try:
        import abc
        t = type(obj)
        key = (t, obj.__class__, abc.get_cache_token())
        shape = _SHAPE_CACHE.get(key)
        if shape is None:
            if len(_SHAPE_CACHE) > 1024:
                _SHAPE_CACHE.clear()
            shape = _SHAPE_CACHE[key] = _object_shape(obj, t)
        return shape
    except BaseException:  # noqa: BLE001 - the object's own code may raise anything
        return FULL_SHAPE, 0


def _object_shape(obj, t):
    try:
        mro = t.__mro__
        methods = 0
        for i, name in enumerate(SHAPE_METHODS):
            for klass in mro:
                d = klass.__dict__
                if name in d:
                    if d[name] is not None:
                        methods |= 1 << i
                    break
        abcs = 0
        if not issubclass(t, type):  # a class is no collection or number (its metaclass would
            for i, abc in enumerate(_shape_abcs()):  # have to be registered); and asking
                if abc is not None and isinstance(obj, abc) is True:  # costs the most there
                    abcs |= 1 << i
        return methods, abcs
    except BaseException:  # noqa: BLE001 - the object's own code may raise anything
        return FULL_SHAPE, 0


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


# ---- a test -----------------------------------------------------------------------------------
class ProgramGone(BaseException):
    """The program exited, died or broke the protocol during a call. A BaseException, so that a
    test's ``except Exception`` cannot swallow it and pass."""


class ProgramError(Exception):
    """An exception of the program whose class is not a built-in one."""


_PASSABLE = {name: obj for name, obj in vars(builtins).items()
             if isinstance(obj, type) and issubclass(obj, Exception)}


class _Link:
    def __init__(self, rfd, wfd, cap=FRAME_CAP):
        self.rfd, self.wfd = rfd, wfd
        self.cap = cap  # the largest answer taken: the job's output limit
        self.gone = None
        self.handles = {}  # one stand-in per object of the program

    def ask(self, msg):
        if self.gone is not None:
            raise ProgramGone(self.gone)
        try:
            send(self.wfd, msg)
            reply = recv_plain(self.rfd, self.cap)
        except (EOFError, OSError):
            self.gone = "DIED"
            raise ProgramGone("DIED") from None
        except ProtocolError:  # an answer larger than the output limit
            self.gone = "OUTPUT"
            raise ProgramGone("OUTPUT") from None
        except (ValueError, TypeError):
            self.gone = "PROTOCOL"
            raise ProgramGone("PROTOCOL") from None
        if type(reply) is not tuple or not reply:
            self.gone = "PROTOCOL"
            raise ProgramGone("PROTOCOL")
        kind = reply[0]
        if kind == "ok" and len(reply) == 2:
            try:
                return decode(reply[1], self.handle)
            except (CodecError, RecursionError):
                self.gone = "PROTOCOL"
                raise ProgramGone("PROTOCOL") from None
        if kind == "ns" and msg[0] == "ns" and len(reply) == 2 and type(reply[1]) is tuple:
            return {p[0]: p[1] for p in reply[1]
                    if type(p) is tuple and len(p) == 2 and type(p[0]) is str}
        if kind == "raise" and len(reply) == 3 and type(reply[1]) is str:
            name, text = reply[1], reply[2] if type(reply[2]) is str else ""
            if name == "MemoryError":
                self.gone = "MEM"
                raise ProgramGone("MEM")
            cls = _PASSABLE.get(name)
            if cls in (StopIteration, StopAsyncIteration) and not (
                    msg[0] == "op" and msg[2] == "next"):
                # as Python does for a generator: a StopIteration out of a call would end the
                # test's own map()/filter()/for early, turning all() and any() into passes
                cls, text = RuntimeError, "%s raised by the program" % name
            e = cls(text) if cls is not None else ProgramError("%s: %s" % (name, text))
            e._coevo_from_program = True
            raise e
        if kind == "dead" and len(reply) == 2 and type(reply[1]) is str:
            self.gone = reply[1][:40]
            raise ProgramGone(self.gone)
        self.gone = "PROTOCOL"
        raise ProgramGone("PROTOCOL")

    def handle(self, k, text, methods=FULL_SHAPE, abcs=0):
        if (type(methods) is not int or type(abcs) is not int
                or not 0 <= methods < 1 << len(SHAPE_METHODS)
                or not 0 <= abcs < 1 << len(SHAPE_ABCS)):
            self.gone = "PROTOCOL"
            raise ProgramGone("PROTOCOL")
        cls = handle_class(methods, abcs)
        if cls is None:
            self.gone = "PROTOCOL"  # more kinds of object than any honest program has
            raise ProgramGone("PROTOCOL")
        h = self.handles.get(k)
        if h is None:
            h = self.handles[k] = cls(self, k, text)
        else:  # the same object: its repr and its class's shape as they are now
            object.__setattr__(h, "_repr", text)
            if type(h) is not cls:
                object.__setattr__(h, "__class__", cls)
        return h

    def encode(self, v):
        def out(obj):
            if type(obj) in _HANDLE_CLASSES and obj._link is self:
                return ("H", obj._id, "")
            raise TypeError("a %s cannot be passed to the program (only plain values and the "
                            "program's own objects cross)" % type(obj).__name__)
        return encode(v, out)


class Handle:
    """The test's stand-in for an object of the program: it can be called, iterated, indexed,
    measured, asked for attributes and given some (each a request to the program), and passed
    back; it is equal only to itself. Its class (:func:`handle_class`) has the special methods
    the object's class has, so that ``isinstance`` with an ABC answers as for the object."""

    __slots__ = ("_link", "_id", "_repr")

    def __init__(self, link, k, text):
        object.__setattr__(self, "_link", link)
        object.__setattr__(self, "_id", k)
        object.__setattr__(self, "_repr", text)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._link.ask(("getattr", self._id, name))

    def __setattr__(self, name, value):
        link = self._link
        link.ask(("setattr", self._id, name, link.encode(value)))

    def _op(self, what, arg=None):
        return self._link.ask(("op", self._id, what, self._link.encode(arg)))

    def __str__(self):
        return self._op("str")

    def __repr__(self):
        return self._repr

    def __bool__(self):
        return self._op("bool") is True

    def __ne__(self, other):
        """Between two objects of the program, as the object answers it (both crossed as
        handles, so no value of the test's is compared by the program's code); with anything
        else, by identity, as ``==``."""
        if other is self:
            return False
        if type(other) in _HANDLE_CLASSES and other._link is self._link:
            return self._op("ne", other) is True
        return True

    __eq__ = object.__eq__
    __hash__ = None  # as the object's class says (SHAPE_METHODS)


def _call(self, *args, **kwargs):
    link = self._link
    return link.ask(("call", self._id, link.encode(args), link.encode(kwargs)))


def _iter(self):
    it = self._op("iter")
    return it if type(it) in _HANDLE_CLASSES else iter(it)


def _contains(self, item):  # decided here, with the test's ==, over what it yields
    for x in self:
        if x is item or x == item:
            return True
    return False


def _forward(name):
    """A method the object's class has that the test reaches as an attribute of the object
    (``send``, ``__await__``...): the program's bound method, called there."""
    def method(self, *args, **kwargs):
        return self._link.ask(("getattr", self._id, name))(*args, **kwargs)
    method.__name__ = name
    return method


def _forward_attribute(name):
    return property(lambda self: self._link.ask(("getattr", self._id, name)))


_SHAPE_IMPLS = {
    "__len__": lambda self: self._op("len"),
    "__iter__": _iter,
    "__contains__": _contains,
    "__call__": _call,
    "__next__": lambda self: self._op("next"),
    "__hash__": object.__hash__,  # by identity, as == is
    "__reversed__": lambda self: self._op("reversed"),
    "__getitem__": lambda self, key: self._op("getitem", key),
}
for _name in SHAPE_METHODS:
    if _name not in _SHAPE_IMPLS:
        _SHAPE_IMPLS[_name] = (_forward(_name) if _name.startswith("__")
                               else _forward_attribute(_name))
_HANDLE_CLASSES = {Handle}
_SHAPED = {}


def handle_class(methods, abcs):
    """The class of a handle whose object's class has the methods ``methods`` (a bit mask over
    SHAPE_METHODS) and is an instance of the nominal ABCs ``abcs`` (over SHAPE_ABCS): one class
    per shape, made once; None past HANDLE_SHAPES_CAP shapes."""
    key = (methods, abcs)
    cls = _SHAPED.get(key)
    if cls is None:
        if len(_SHAPED) >= HANDLE_SHAPES_CAP:
            return None
        ns = {"__slots__": ()}
        for i, name in enumerate(SHAPE_METHODS):
            if methods >> i & 1:
                ns[name] = _SHAPE_IMPLS[name]
        if "__hash__" not in ns:
            ns["__hash__"] = None
        cls = _SHAPED[key] = type("Handle", (Handle,), ns)
        for i, abc in enumerate(_shape_abcs()):
            if abcs >> i & 1 and abc is not None:
                abc.register(cls)
        _HANDLE_CLASSES.add(cls)
    return cls


_MODULE_ALIASES = {("np", "numpy"), ("pd", "pandas"), ("plt", "matplotlib.pyplot"),
                   ("nx", "networkx"), ("sp", "scipy")}
# Names a program brings in with ``from M import N`` and tests then use unqualified (MBPP's
# ``Counter``, ``sqrt``): where the program's object under such a name is the standard library's
# own (it says so), the test gets the standard object itself; a name the program defines (its own
# ``gcd``, ``median``, ``class Random``) stays the program's.
_STDLIB_FROM = ("math", "collections", "itertools", "functools", "heapq", "bisect", "operator",
                "statistics", "string", "re", "fractions", "decimal", "copy", "random", "typing",
                "cmath", "datetime")


def _stdlib_names():
    table = getattr(_stdlib_names, "cache", None)
    if table is None:
        import importlib
        table = {}
        for mod in reversed(_STDLIB_FROM):  # the first listed wins a name two modules share
            try:
                m = importlib.import_module(mod)
            except ImportError:
                continue
            for attr in dir(m):
                if not attr.startswith("_"):
                    table[attr] = (m, attr)
        _stdlib_names.cache = table
    return table


_BUILTINS = frozenset(vars(builtins))


def _module_names():
    names = getattr(_module_names, "cache", None)
    if names is None:
        names = _module_names.cache = frozenset(sys.stdlib_module_names) | {
            alias for alias, _ in _MODULE_ALIASES} | {mod.split(".")[0]
                                                      for _, mod in _MODULE_ALIASES}
    return names


def prepare():
    """Built once in the zygote, so that no cell pays for them: the name tables of
    ``_bind_program``."""
    _module_names()
    _stdlib_names()


def _stdlib_binding(name, desc, link):
    """What the test gets under ``name``, a standard export that is no module's name, for the
    program's ``desc``: the standard object where the program's object is that object (its repr,
    or else its ``__module__`` and ``__qualname__``, are the standard one's: what a
    ``from M import N`` leaves), else the program's own (decoded, or a handle). A program that
    claims a standard name for an object of its own gets the standard object in its test, which
    is what importing it would have given: nothing more."""
    mod, attr = _stdlib_names()[name]
    real = getattr(mod, attr)
    if desc[0] == "C" and type(desc[1]) is tuple and len(desc[1]) in (3, 5) and \
            desc[1][0] == "H":
        try:
            same = desc[1][2] == repr(real)
        except Exception:  # noqa: BLE001 - the program's object's repr may raise anything: then not the same
            same = False
        if not same and type(desc[1][1]) is int:
            mine = getattr(real, "__module__", None), getattr(real, "__qualname__", None)
            if mine[0] is not None and mine[0] != "__main__":
                try:
                    same = (link.ask(("getattr", desc[1][1], "__module__")) == mine[0]
                            and link.ask(("getattr", desc[1][1], "__qualname__")) == mine[1])
                except Exception:  # noqa: BLE001 - the program's answer: not the standard one
                    same = False
        if same:
            return real
    return decode(desc[1], link.handle)


def binds_program_object(name, entry_point):
    """Whether a test process binds the program's own object under ``name`` (the rules of
    ``_bind_program``): the entry point always; else not a builtin's, a module's or a common
    standard export's name, nor a dunder."""
    if name == entry_point:
        return True
    return not (name.startswith("__") or name in _BUILTINS or name in _module_names()
                or name in _stdlib_names())


def _bind_program(g, link, entry_point):
    """The program's names in the test's namespace: its functions and classes as handles, its
    plain values decoded, the modules it imported imported here (under their own name). A
    builtin's name (but the entry point's) is never bound, so that no ``abs`` or ``zip`` of the
    program's reaches the test's code; a module's name (the standard ones, ``np``, ``pd``...) is
    bound to nothing but that module (a program's ``class math`` or ``class np`` does not become
    the test's); and a name the common standard modules export (``Counter``, ``sqrt``,
    ``permutations``) is the standard library's own where the program imported it, the
    program's where it defined it (``_stdlib_binding``)."""
    ns = link.ask(("ns",))
    if type(ns) is not dict:
        raise ProgramGone("PROTOCOL")
    modules = _module_names()
    stdlib = _stdlib_names()
    import importlib
    for name, desc in ns.items():
        if (type(name) is not str or not name.isidentifier() or name.startswith("__")
                or (name in _BUILTINS and name != entry_point)
                or type(desc) is not tuple or not desc):
            continue
        kind = desc[0]
        try:
            if kind == "M" and len(desc) == 2 and type(desc[1]) is str:
                mod = desc[1]
                if mod == name or mod.rsplit(".", 1)[-1] == name or (name, mod) in _MODULE_ALIASES:
                    g[name] = importlib.import_module(mod if mod != "posixpath" else "os.path")
            elif name != entry_point and (name in modules or name in stdlib):
                if kind in ("C", "V") and len(desc) == 2 and name not in modules:
                    g[name] = _stdlib_binding(name, desc, link)
            elif kind in ("C", "V") and len(desc) == 2:
                g[name] = decode(desc[1], link.handle)
        except (ImportError, CodecError, RecursionError, ValueError, TypeError):
            continue


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
