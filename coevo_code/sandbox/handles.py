"""A call between a test and the program, from both sides: the shape of a program's object
(which special methods its class has, which ABCs it is an instance of), measured in the program's
process; and, in the test's process, the link to the program, the handles that stand for the
program's objects, and the binding of the program's names into the test's namespace."""

import builtins
import marshal
import struct
import sys

from .codec import CodecError, decode, encode, marshal_is_plain
from .protocol import FRAME_CAP, ProtocolError, read_exact, send


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
