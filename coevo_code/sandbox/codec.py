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
    value (``("H", id, repr)``, or from a program ``("H", id, repr, methods, abcs)``: the
    shape of its class, ``cell.object_shape``)."""
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
    """Rebuild a tree from the receiver's own types; ``handle(id, repr[, methods, abcs])``
    makes the receiver's stand-in for an object that did not cross by value."""
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
        _distinct_hashes(keys)
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
            _distinct_hashes(items)
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
        _distinct_hashes(keys)
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
    if tag == "H":  # ("H", id, repr), and from a program its class's shape (two ints)
        if len(x) == 5:
            if type(x[1]) is not int or type(x[2]) is not str or type(x[3]) is not int \
                    or type(x[4]) is not int:
                raise CodecError("a malformed handle")
            return handle(x[1], x[2], x[3], x[4])
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


COLLISIONS_ALLOWED = 64  # items of one set or mapping that may share one hash value


def _distinct_hashes(items):
    """Refuse a set or mapping where more than COLLISIONS_ALLOWED items share one hash value:
    building one costs quadratic time in the size of such a group (20,000 colliding ints:
    seconds), however small its frame. Hash values are ints below 2**61 that hash to
    themselves, so counting them is linear. Honest values collide in small groups only:
    ``hash(2**k)`` repeats every 61 values of k (likewise ``2.0**k`` and ``0.5**k``), so a set
    of the first 1,000 powers of two holds 61 groups of about 16; strings hash to 64 random
    bits."""
    if len(items) <= COLLISIONS_ALLOWED:
        return
    try:
        counts = collections.Counter(map(hash, items))
    except TypeError as e:
        raise CodecError("an unhashable item: %s" % e)
    most = max(counts.values())
    if most > COLLISIONS_ALLOWED:
        raise CodecError("a set or mapping of %d items, %d of them of one hash"
                         % (len(items), most))


# ---- the canonical text of a value ---------------------------------------------------------------
INT_DECIMAL_BITS = 13000  # ints up to this size print in decimal (< 4,300 digits), larger in hex


class TooLarge(Exception):
    """The canonical text of a value would exceed its budget."""


def _int_text(v):
    if v.bit_length() <= INT_DECIMAL_BITS:
        try:
            return int.__repr__(v)
        except ValueError:  # a setup or a program lowered sys.set_int_max_str_digits
            old = sys.get_int_max_str_digits()
            sys.set_int_max_str_digits(0)  # the same text wherever it is computed
            try:
                return int.__repr__(v)
            finally:
                sys.set_int_max_str_digits(old)
    return hex(v)  # linear, whatever sys.set_int_max_str_digits says; literal_eval reads it


def _flat(parts):
    """The text of a tree of fragments (lists nest), without recursion."""
    out, stack = [], [iter(parts)]
    while stack:
        for x in stack[-1]:
            if type(x) is str:
                out.append(x)
            else:
                stack.append(iter(x))
                break
        else:
            stack.pop()
    return "".join(out)


def canonical(value, budget, handle_text=None):
    """The text a label-free vote compares: ``repr`` for plain values, with every set (and
    frozenset) printed in the sorted order of its items' texts and every dict (Counter,
    defaultdict) in the sorted order of its keys' texts, so that equal values built in other
    orders give the same text; ints past 4,300 digits in hex (compared by value, under any
    digit limit); a numpy array as its full list (no summarising ``...``); a handle as its
    program's repr (``handle_text(v)``, None for anything else). The same function runs in the
    judge and in a test process, so both give the same text for the same value.

    Raises :class:`TooLarge` when the text would pass ``budget`` characters: a value whose
    references repeat one large object costs what its text would, and no more is built.
    Iterative, so depth costs no recursion; a value that contains itself prints ``...``."""
    size = [0]

    def emit(text, parts):
        size[0] += len(text)
        if size[0] > budget:
            raise TooLarge
        parts.append(text)

    np = _np()
    stack = []  # frames: [kind, items, index, parts, id, extra]
    path = set()

    def push(kind, items, parts, v, extra):
        path.add(id(v))
        stack.append([kind, items, 0, parts, id(v), extra, []])

    def visit(v, parts):
        t = type(v)
        if t is str or t is bytes or t is bool or v is None or t is float or t is complex:
            emit(repr(v), parts)
            return
        if t is int:
            emit(_int_text(v), parts)
            return
        if handle_text is not None:
            text = handle_text(v)
            if text is not None:
                emit(text, parts)
                return
        if id(v) in path:
            emit("[...]" if t is list else "{...}" if t is dict else "...", parts)
            return
        if t is list:
            emit("[", parts)
            push("seq", list(v), parts, v, "]")
        elif t is tuple:
            emit("(", parts)
            push("seq", list(v), parts, v, ",)" if len(v) == 1 else ")")
        elif t is set or t is frozenset:
            if not v:
                emit("set()" if t is set else "frozenset()", parts)
                return
            push("set", list(v), parts, v, ("{", "}") if t is set else ("frozenset({", "})"))
        elif t is dict or t is collections.Counter or t is collections.defaultdict:
            if t is dict:
                head = "{"
            elif t is collections.Counter:
                head = "Counter({"
            else:
                f = v.default_factory
                head = "defaultdict(%s, {" % ("None" if f is None else
                                             getattr(f, "__name__", "?"))
            push("map", list(dict.items(v)), parts, v, (head, "}" if t is dict else "})", True))
        elif t is collections.OrderedDict:
            push("map", list(dict.items(v)), parts, v, ("OrderedDict({", "})", False))
        elif t is collections.deque:
            emit("deque([", parts)
            push("seq", list(v), parts, v,
                 "])" if v.maxlen is None else "], maxlen=%d)" % v.maxlen)
        elif issubclass(t, tuple) and _namedtuple_fields(t) is not None:
            fields = _namedtuple_fields(t)
            emit(t.__name__ + "(", parts)
            items = list(tuple.__iter__(v))
            push("nt", items, parts, v, fields)
        elif np is not None and t is np.ndarray and v.dtype.kind not in "OV":
            if v.size > budget:
                raise TooLarge
            emit("array(", parts)
            push("seq", [v.tolist()], parts, v,
                 ", dtype=%r, shape=%r)" % (v.dtype.str, tuple(v.shape)))
        else:  # Decimal, Fraction, range, bytearray, numpy scalars, built-ins: their repr
            try:
                text = repr(v)
            except Exception:  # noqa: BLE001 - an object's repr is the program's code: it may raise anything
                text = None
            emit(text if type(text) is str else "<%s>" % t.__name__, parts)

    top = []
    visit(value, top)
    while stack:
        frame = stack[-1]
        kind, items, i, parts, _, extra, subs = frame
        if kind == "seq" or kind == "nt":
            if i < len(items):
                frame[2] = i + 1
                if i:
                    emit(", ", parts)
                if kind == "nt":
                    emit(extra[i] + "=", parts)
                visit(items[i], parts)
                continue
            emit(extra if kind == "seq" else ")", parts)
        elif kind == "set":
            if i < len(items):
                frame[2] = i + 1
                sub = []
                subs.append(sub)
                visit(items[i], sub)
                continue
            texts = sorted(_flat(sub) for sub in subs)
            parts.append(extra[0])
            parts.append(", ".join(texts))
            parts.append(extra[1])
            size[0] += 2 * len(texts)
        else:  # map: keys and values alternate in subs
            if i < 2 * len(items):
                frame[2] = i + 1
                sub = []
                subs.append(sub)
                visit(items[i // 2][i % 2], sub)
                continue
            head, tail, sort = extra
            keys = [_flat(subs[j]) for j in range(0, len(subs), 2)]
            order = range(len(keys))
            if sort:
                order = sorted(order, key=keys.__getitem__)
            parts.append(head)
            for n, j in enumerate(order):
                if n:
                    parts.append(", ")
                parts.append(keys[j])
                parts.append(": ")
                parts.append(subs[2 * j + 1])
            parts.append(tail)
            size[0] += 4 * len(keys)
        if size[0] > budget:
            raise TooLarge
        stack.pop()
        path.discard(frame[4])
    return _flat(top)


# ---- frames from the other side ---------------------------------------------------------------
_SKIP = {ord("i"): 4, ord("g"): 8, ord("y"): 16, ord("r"): 4}
_NONE = frozenset(b"0NFTS.")
_SIZED = frozenset(b"stuaA")  # 4-byte length, then that many bytes
_SHORT = frozenset(b"zZ")  # 1-byte length


def marshal_is_plain(data):
    """Whether a marshal frame holds only what ``codec.encode`` makes (scalars, tuples, lists,
    back-references; never a dict, set, frozenset or code object): ``marshal.loads`` then costs
    what the frame's size costs. A program
    writing its own frame could otherwise have the judge build a dict or a frozenset of
    colliding keys (quadratic) while loading it. Walks the type codes without building
    anything."""
    if not any(b in data for b in (b"{", b"<", b">", b"c", b"\xfb", b"\xbc", b"\xbe",
                                    b"\xe3")):
        return True  # no byte could be a refused type code, wherever it sits
    n, i, need = len(data), 0, 1
    try:
        while need:
            need -= 1
            code = data[i] & 0x7F
            i += 1
            if code in _NONE:
                continue
            skip = _SKIP.get(code)
            if skip is not None:
                i += skip
            elif code in _SIZED or code == 0x6C:  # 'l': a digit count, 2 bytes each
                k = int.from_bytes(data[i:i + 4], "little", signed=True)
                i += 4 + (abs(k) * 2 if code == 0x6C else k)
                if k < 0 and code != 0x6C:
                    return False
            elif code in _SHORT:
                i += 1 + data[i]
            elif code == 0x28 or code == 0x5B:  # '(' tuple, '[' list
                k = int.from_bytes(data[i:i + 4], "little", signed=True)
                if k < 0:
                    return False
                i += 4
                need += k
            elif code == 0x29:  # ')' small tuple
                need += data[i]
                i += 1
            else:  # a refused code or one encode never makes
                return False
            if i > n:
                return False
    except IndexError:
        return False
    return i == n
