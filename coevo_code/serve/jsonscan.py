"""Bounds on a JSON body checked while it streams in, before it is parsed.

``json.loads`` builds every value of a body at once: a 32 MiB body of ``[{},{},...]`` becomes
eleven million dicts (about 900 MB) before any check of the server's can look at it. A
:class:`JSONBounds` is fed the body chunk by chunk as it arrives and raises :class:`TooDeep`,
:class:`TooWide` or :class:`TooMany` as soon as the body nests deeper than ``depth``, one array
or object holds more than ``width`` items, or the body holds more than ``items`` in all, so a
body that breaks a bound is refused after reading only what shows it.

What it counts: an *item* is an array element or an object member (key and value together),
counted by its container (one per comma, plus one for a non-empty container), and every array
or object is one item more. Strings are skipped whole (their brackets and commas are text),
escapes included, across chunk boundaries. It does not validate the JSON: ``json.loads`` does
that afterwards, on a body that now parses into at most ``items`` items nested at most
``depth`` deep.
"""

from __future__ import annotations

import re

_STRUCT = re.compile(rb'["\[\]{},]')
_IN_STRING = re.compile(rb'[^"\\]*')     # string content up to its end quote or an escape
_SPACE = b" \t\r\n"
# a run of items that hold no string and no non-empty container, each followed by its comma
# (numbers, literals, {}, []): skipped a match at a time, counted with bytes.count; at most 1,024
# a match, as the regex engine keeps state for each repetition (25 MB for 90,000 unbounded)
_RUN = re.compile(rb'(?:[ \t\r\n]*(?:-?[0-9][0-9.eE+-]*|true|false|null|\{[ \t\r\n]*\}'
                  rb'|\[[ \t\r\n]*\])[ \t\r\n]*,){1,1024}')


class JSONBoundError(ValueError):
    """A body over one of the bounds; the message is the one-line reason."""


class TooDeep(JSONBoundError):
    pass


class TooWide(JSONBoundError):
    pass


class TooMany(JSONBoundError):
    pass


class JSONBounds:
    """``scan = JSONBounds(depth=64, width=100_000, items=1_000_000); scan.feed(chunk)`` for
    every chunk; raises the first bound crossed."""

    __slots__ = ("depth", "width", "items", "total", "_stack", "_in_string", "_escape",
                 "_empty")

    def __init__(self, depth: int = 64, width: int = 100_000, items: int = 1_000_000):
        self.depth, self.width, self.items = depth, width, items
        self.total = 0             # items so far
        self._stack: list[int] = []  # per open container: its items so far
        self._in_string = False
        self._escape = False       # the chunk ended inside a string, right after a backslash
        self._empty = False        # the innermost container has seen nothing but space yet

    def feed(self, chunk: bytes) -> None:
        i, n = 0, len(chunk)
        stack = self._stack
        while i < n:
            if self._in_string:
                if self._escape:        # the escaped byte, carried over from the last chunk
                    self._escape = False
                    i += 1
                    continue
                i = _IN_STRING.match(chunk, i).end()
                if i >= n:
                    return
                if chunk[i] == 0x5C:    # a backslash: skip it and the byte it escapes
                    if i + 1 >= n:
                        self._escape = True
                        return
                    i += 2
                    continue
                self._in_string = False  # the end quote
                i += 1
                continue
            if self._empty:             # the first thing in a container: is it non-empty?
                while i < n and chunk[i] in _SPACE:
                    i += 1
                if i >= n:
                    return
                self._empty = False
                if chunk[i] not in b"]}":
                    self._count(1)
            m = _STRUCT.search(chunk, i)
            if m is None:
                return
            i = m.end()
            c = chunk[i - 1]
            if c == 0x22:               # "
                self._in_string = True
            elif c == 0x2C:             # ,
                if stack:
                    self._count(1)
                    while (run := _RUN.match(chunk, i)) is not None:   # flat items, C speed
                        a, i = run.span()
                        empty = chunk.count(b"{", a, i) + chunk.count(b"[", a, i)
                        if empty and len(stack) >= self.depth:
                            raise TooDeep(f"the body nests deeper than {self.depth} arrays or "
                                          "objects")
                        self._count(chunk.count(b",", a, i))
                        self.total += empty
                        if self.total > self.items:
                            raise TooMany(f"the body holds more than {self.items} JSON items")
            elif c in (0x5B, 0x7B):     # [ {
                if len(stack) >= self.depth:
                    raise TooDeep(f"the body nests deeper than {self.depth} arrays or objects")
                self.total += 1
                if self.total > self.items:
                    raise TooMany(f"the body holds more than {self.items} JSON items")
                stack.append(0)
                self._empty = True
            else:                       # ] }
                if stack:
                    stack.pop()

    def _count(self, k: int) -> None:
        stack = self._stack
        stack[-1] += k
        if stack[-1] > self.width:
            raise TooWide(f"an array or object of the body holds more than {self.width} items")
        self.total += k
        if self.total > self.items:
            raise TooMany(f"the body holds more than {self.items} JSON items")
