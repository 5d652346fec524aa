"""Values that cross between a program and its test, as trees of plain marshal values.

Only a fixed list of *exact* types crosses (no subclasses, so no ``__eq__`` of the program's
choosing ever reaches a comparison): None, bool, int, float, complex, str, bytes, bytearray,
range, list, tuple, dict, set, frozenset, ``collections.Counter``, ``OrderedDict``, ``defaultdict``
(with a built-in default factory), ``deque``, named tuples (rebuilt from their name and fields on
the receiving side), ``decimal.Decimal``, ``fractions.Fraction``, numpy scalars and arrays (not
of object dtype); and built-in types and functions (``int``, ``len``) by name. Anything else crosses as an opaque handle: the receiver holds a reference it
can pass back, call, iterate, index or read attributes of, through the program, but never
compare by value (a handle is equal only to itself).

``decode`` is the trust boundary: it accepts exactly the tags below and rebuilds every value from
the receiver's own types; a malformed tree raises :class:`CodecError`.
"""

import builtins
import collections
import sys

_BUILTIN_FUNCTION = type(len)

_SCALARS = frozenset([type(None), bool, int, float, complex, str, bytes])
_FACTORIES = {None: None, "list": list, "int": int, "set": set, "dict": dict, "str": str,
              "float": float, "tuple": tuple, "frozenset": frozenset, "bool": bool}
_FACTORY_NAMES = {v: k for k, v in _FACTORIES.items() if v is not None}


class CodecError(ValueError):
    pass


def _np():
    return sys.modules.get("numpy")


def _np_scalar_types(np):
    types = getattr(_np_scalar_types, "cache", None)
    if types is None or types[0] is not np:
        seen = set()
        for t in np.sctypeDict.values():
            if isinstance(t, type) and issubclass(t, np.generic) and t.__module__ == "numpy":
                seen.add(t)
        types = (np, frozenset(seen))
        _np_scalar_types.cache = types
    return types[1]


def _namedtuple_fields(t):
    if t.__bases__ != (tuple,):
        return None
    fields = t.__dict__.get("_fields")
    if type(fields) is not tuple or not all(type(f) is str for f in fields):
        return None
    return fields


def encode(v, handle):
    """The tree of ``v``; ``handle(obj)`` returns the tree of an object that does not cross by
    value (``("H", id, repr)``)."""
    t = type(v)
    if t in _SCALARS:
        return v
    if t is list:  # flat lists and tuples of scalars (most inputs and answers): no recursion
        if _SCALARS.issuperset(map(type, v)):
            return ("L", tuple(v))
        return ("L", tuple([encode(x, handle) for x in v]))
    if t is tuple:
        if _SCALARS.issuperset(map(type, v)):
            return ("T", v)
        return ("T", tuple([encode(x, handle) for x in v]))
    if t is dict:
        return ("D", tuple([encode(k, handle) for k in v]),
                tuple([encode(x, handle) for x in v.values()]))
    if t is set:
        return ("S", tuple([encode(x, handle) for x in v]))
    if t is frozenset:
        return ("F", tuple([encode(x, handle) for x in v]))
    if t is bytearray:
        return ("BA", bytes(v))
    if t is range:
        return ("R", v.start, v.stop, v.step)
    if t is collections.Counter or t is collections.OrderedDict:
        return ("C" if t is collections.Counter else "O", tuple([encode(k, handle) for k in v]),
                tuple([encode(x, handle) for x in dict.values(v)]))
    if t is collections.defaultdict:
        f = v.default_factory
        if f is None or f in _FACTORY_NAMES:
            return ("DD", None if f is None else _FACTORY_NAMES[f],
                    tuple([encode(k, handle) for k in v]),
                    tuple([encode(x, handle) for x in dict.values(v)]))
        return handle(v)
    if t is collections.deque:
        return ("Q", tuple([encode(x, handle) for x in v]), v.maxlen)
    dec = sys.modules.get("decimal")
    if dec is not None and t is dec.Decimal:
        return ("DEC", str(v))
    frac = sys.modules.get("fractions")
    if frac is not None and t is frac.Fraction:
        return ("FR", v.numerator, v.denominator)
    np = _np()
    if np is not None:
        if t is np.ndarray and v.dtype.kind not in "OV":
            return ("NA", v.dtype.str, tuple(int(d) for d in v.shape),
                    np.ascontiguousarray(v).tobytes())
        if t in _np_scalar_types(np) and np.dtype(t).kind not in "OV":
            return ("NS", v.dtype.str, v.tobytes())
    if t is type or t is _BUILTIN_FUNCTION:  # int, str, len...: by name, if built-in
        name = getattr(v, "__name__", None)
        if type(name) is str and getattr(builtins, name, None) is v:
            return ("B", name)
    if issubclass(t, tuple):
        fields = _namedtuple_fields(t)
        if fields is not None and len(fields) == tuple.__len__(v):
            return ("NT", t.__name__, fields, tuple([encode(x, handle) for x in tuple.__iter__(v)]))
    return handle(v)


def _items(x, n):
    if len(x) != n:
        raise CodecError("a %r node of %d fields" % (x[0], len(x)))
    return x


def _seq(x):
    if type(x) is not tuple:
        raise CodecError("a container's items are not a tuple")
    return x


def decode(x, handle, depth=0):
    """Rebuild a tree from the receiver's own types; ``handle(id, repr)`` makes the receiver's
    stand-in for an object that did not cross by value."""
    t = type(x)
    if t in _SCALARS:
        return x
    if depth > 200:
        raise CodecError("a value nested deeper than 200 levels")
    if t is not tuple or not x or type(x[0]) is not str:
        raise CodecError("a node of type %s" % t.__name__)
    tag, d = x[0], depth + 1

    def dec(y):
        return decode(y, handle, d)

    if tag == "L":
        items = _seq(_items(x, 2)[1])
        if _SCALARS.issuperset(map(type, items)):
            return list(items)
        return [dec(i) for i in items]
    if tag == "T":
        items = _seq(_items(x, 2)[1])
        if _SCALARS.issuperset(map(type, items)):
            return items
        return tuple([dec(i) for i in items])
    if tag in ("D", "C", "O"):
        _items(x, 3)
        keys, vals = [dec(k) for k in _seq(x[1])], [dec(v) for v in _seq(x[2])]
        if len(keys) != len(vals):
            raise CodecError("a mapping with %d keys and %d values" % (len(keys), len(vals)))
        try:
            pairs = dict(zip(keys, vals))
        except TypeError as e:
            raise CodecError("an unhashable key: %s" % e)
        if tag == "C":
            c = collections.Counter()
            dict.update(c, pairs)
            return c
        return collections.OrderedDict(pairs) if tag == "O" else pairs
    if tag in ("S", "F"):
        try:
            items = [dec(i) for i in _seq(_items(x, 2)[1])]
            return set(items) if tag == "S" else frozenset(items)
        except TypeError as e:
            raise CodecError("an unhashable set item: %s" % e)
    if tag == "BA":
        if type(_items(x, 2)[1]) is not bytes:
            raise CodecError("a bytearray of non-bytes")
        return bytearray(x[1])
    if tag == "R":
        _items(x, 4)
        if not all(type(i) is int for i in x[1:]) or x[3] == 0:
            raise CodecError("a malformed range")
        return range(x[1], x[2], x[3])
    if tag == "DD":
        _items(x, 4)
        if x[1] not in _FACTORIES:
            raise CodecError("a defaultdict factory %r" % (x[1],))
        keys, vals = [dec(k) for k in _seq(x[2])], [dec(v) for v in _seq(x[3])]
        if len(keys) != len(vals):
            raise CodecError("a mapping with %d keys and %d values" % (len(keys), len(vals)))
        try:
            return collections.defaultdict(_FACTORIES[x[1]], zip(keys, vals))
        except TypeError as e:
            raise CodecError("an unhashable key: %s" % e)
    if tag == "Q":
        _items(x, 3)
        if x[2] is not None and (type(x[2]) is not int or x[2] < 0):
            raise CodecError("a deque maxlen %r" % (x[2],))
        return collections.deque([dec(i) for i in _seq(x[1])], x[2])
    if tag == "NT":
        _items(x, 4)
        name, fields, items = x[1], x[2], _seq(x[3])
        if (type(name) is not str or type(fields) is not tuple or len(fields) != len(items)
                or not all(type(f) is str for f in fields)):
            raise CodecError("a malformed named tuple")
        try:
            cls = _namedtuple(name, fields)
        except (ValueError, TypeError) as e:
            raise CodecError("a named tuple %r: %s" % (name, e))
        return cls(*[dec(i) for i in items])
    if tag == "DEC":
        if type(_items(x, 2)[1]) is not str:
            raise CodecError("a Decimal of non-text")
        import decimal
        try:
            return decimal.Decimal(x[1])
        except (ArithmeticError, ValueError) as e:
            raise CodecError("a Decimal %r: %s" % (x[1][:40], e))
    if tag == "FR":
        _items(x, 3)
        if type(x[1]) is not int or type(x[2]) is not int or x[2] == 0:
            raise CodecError("a malformed Fraction")
        import fractions
        return fractions.Fraction(x[1], x[2])
    if tag in ("NA", "NS"):
        import numpy as np
        try:
            dtype = np.dtype(_items(x, 4 if tag == "NA" else 3)[1])
        except (TypeError, ValueError) as e:
            raise CodecError("a numpy dtype %r: %s" % (x[1], e))
        if dtype.kind in "OV" or dtype.hasobject:
            raise CodecError("a numpy value of dtype %s" % dtype)
        data = x[-1]
        if type(data) is not bytes:
            raise CodecError("numpy data that is not bytes")
        if tag == "NS":
            if len(data) != dtype.itemsize:
                raise CodecError("a numpy scalar of %d bytes for %s" % (len(data), dtype))
            return np.frombuffer(data, dtype)[0]
        shape = x[2]
        if type(shape) is not tuple or not all(type(s) is int and s >= 0 for s in shape):
            raise CodecError("a numpy shape %r" % (shape,))
        n = 1
        for s in shape:
            n *= s
        if n * dtype.itemsize != len(data):
            raise CodecError("numpy data of %d bytes for shape %r" % (len(data), shape))
        return np.frombuffer(data, dtype).reshape(shape).copy()
    if tag == "B":
        obj = getattr(builtins, _items(x, 2)[1], None) if type(x[1]) is str else None
        if not (type(obj) is type or type(obj) is _BUILTIN_FUNCTION):
            raise CodecError("no built-in %r" % (x[1],))
        return obj
    if tag == "H":
        _items(x, 3)
        if type(x[1]) is not int or type(x[2]) is not str:
            raise CodecError("a malformed handle")
        return handle(x[1], x[2])
    raise CodecError("an unknown tag %r" % (tag[:20],))


_NT_CACHE = {}


def _namedtuple(name, fields):
    key = (name, fields)
    cls = _NT_CACHE.get(key)
    if cls is None:
        if len(_NT_CACHE) > 256:
            _NT_CACHE.clear()
        cls = _NT_CACHE[key] = collections.namedtuple(name, fields)
    return cls
