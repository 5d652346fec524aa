"""An answer decoded by the judge itself (a literal test's call into the program): bounded, since
the judge has no CPU limit; anything costly is left to a test process, which has one."""

from .codec import decode

JUDGE_FRAME_CAP = 4 << 20  # the largest answer the judge reads (larger: a test process)


class NeedsTestProcess(Exception):
    """A test the judge cannot decide alone after all (an answer holding numpy values)."""


class _Opaque:
    """The judge's stand-in for a handle: equal only to itself; its repr is the program's."""

    __slots__ = ("text",)

    def __init__(self, k, text):
        self.text = text

    def __repr__(self):
        return self.text


def _opaque_text(v):
    return v.text if type(v) is _Opaque else None


JUDGE_NODES = 200_000  # nodes of an answer the judge decodes itself (marshal shares repeated
JUDGE_ITEMS = 10_000  # sub-trees, so a small frame can name 2**60 of them); items of a mapping
JUDGE_INT_BITS = 1 << 16  # or set (colliding keys make building one quadratic); bits of a number


def _judge_decode(tree):
    """Decode an answer in the judge, which has no CPU limit: anything costly (too many nodes,
    large mappings or sets, huge numbers, numpy values) is left to a test process, which has."""
    stack, seen = [tree], 0
    while stack:
        x = stack.pop()
        seen += 1
        if seen > JUDGE_NODES:
            raise NeedsTestProcess
        t = type(x)
        if t is int:
            if x.bit_length() > JUDGE_INT_BITS:
                raise NeedsTestProcess
        elif t is tuple:
            if x and x[0] in ("NA", "NS", "DEC", "FR"):
                raise NeedsTestProcess
            if len(x) > JUDGE_ITEMS and x[:1] != ("L",) and x[:1] != ("T",):
                raise NeedsTestProcess
            if x and x[0] in ("D", "C", "O", "DD", "S", "F", "Q") and any(
                    type(y) is tuple and len(y) > JUDGE_ITEMS for y in x[1:]):
                raise NeedsTestProcess
            stack.extend(x)

    handles = {}

    def handle(k, text, *shape):  # one stand-in per object of the program, as in a test process
        h = handles.get(k)
        if h is None:
            h = handles[k] = _Opaque(k, text)
        else:
            h.text = text
        return h
    return decode(tree, handle)
