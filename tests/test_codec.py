"""The pure parts of the judge's bounds: the canonical text of a value (what a label-free vote
compares), the hash-collision guards, and the marshal walk that decides whether the judge loads a
program's frame."""

from __future__ import annotations

import ast
import collections
import marshal
import struct

import pytest

from coevo_code.sandbox.codec import (CodecError, TooLarge, canonical, decode, encode,
                                      marshal_is_plain)
from coevo_code.sandbox.server import hash_flood

P61 = 2 ** 61 - 1


def text(v, budget=1 << 20):
    return canonical(v, budget)


def test_equal_sets_and_dicts_built_in_other_orders_have_one_text():
    words = [f"w{i}" for i in range(100)]
    a, b = set(words), set()
    for w in reversed(words):
        b.add(w)
    assert text(a) == text(b) == text(frozenset(words)).replace("frozenset(", "")[:-1]
    d1 = {k: [k] for k in words}
    d2 = {k: [k] for k in reversed(words)}
    assert text(d1) == text(d2) and ast.literal_eval(text(d1)) == d1
    assert text(collections.Counter("abracadabra")) == text(collections.Counter("arbadacarba"))
    od1 = collections.OrderedDict([(1, 2), (3, 4)])
    assert text(od1) != text(collections.OrderedDict([(3, 4), (1, 2)]))  # order is its equality


@pytest.mark.parametrize("v", [None, True, -7, 2 ** 100, 0.1 + 0.2, 3 - 4j, "h\u00e9\n", b"\x00a",
                               [1, [2, (3,)]], (1,), (), "", [], {}, {1: "x"}, range(3)])
def test_plain_values_print_as_their_repr(v):
    assert text(v) == repr(v)


def test_big_ints_compare_by_value_under_any_digit_limit():
    import sys
    a, b = 10 ** 5000 + 1, 10 ** 5000 + 2
    assert text(a) != text(b)
    assert ast.literal_eval(text(a)) == a and ast.literal_eval(text(-a)) == -a
    old = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(0)
        assert text(a) == canonical(a, 1 << 20)  # the same text with the limit lifted
        lifted = text([a, 1])
        sys.set_int_max_str_digits(640)  # lowered (a setup may): the text is the same
        c = 10 ** 1000
        lowered = text([a, c, -c])
        assert sys.get_int_max_str_digits() == 640  # and the limit is the program's again
    finally:
        sys.set_int_max_str_digits(old)
    assert lifted == text([a, 1])
    assert lowered == text([a, c, -c]) and ast.literal_eval(lowered) == [a, c, -c]


def test_text_is_bounded_by_its_budget_not_by_the_value_graph():
    s = "x" * 40_000
    with pytest.raises(TooLarge):
        canonical([s] * 100_000, 8 << 20)  # 4 GB of text from a 1 MB list
    deep = []
    for _ in range(50_000):
        deep = [deep]
    assert len(text(deep)) == 100_002  # iterative: no recursion limit
    loop = [1]
    loop.append(loop)
    assert text(loop) == "[1, [...]]"


def test_numpy_arrays_print_whole():
    np = pytest.importorskip("numpy")
    a = np.arange(5000)
    b = a.copy()
    b[2500] = -1
    assert "..." in repr(a) and repr(a) == repr(b)
    assert text(a) != text(b)


def test_decode_refuses_sets_and_mappings_of_colliding_hashes():
    keys = tuple(k * P61 for k in range(1, 2000))
    for tree in (("S", keys), ("F", keys), ("D", keys, keys), ("C", keys, keys),
                 ("DD", "int", keys, keys)):
        with pytest.raises(CodecError, match="of one hash"):
            decode(tree, None)
    ok = tuple(range(5000))
    assert decode(("S", ok), None) == set(ok)
    # honest values that collide in small groups: hash(2**k) repeats every 61 values of k, as
    # does hash(2.0**k) and hash(0.5**k): 1,000 of them hold 61 groups of about 16
    for powers in (tuple(2 ** k for k in range(1000)), tuple(2.0 ** k for k in range(1000)),
                   tuple(0.5 ** k for k in range(1000))):
        assert len(set(map(hash, powers))) <= 61
        assert decode(("S", powers), None) == set(powers)
        assert decode(("D", powers, powers), None) == dict(zip(powers, powers))
        assert not hash_flood("x = {%s}" % ", ".join(map(repr, powers)))
    # 65 items of one hash among many distinct ones: refused all the same
    with pytest.raises(CodecError, match="65 of them of one hash"):
        decode(("S", tuple(range(1, 5000)) + tuple(k * P61 for k in range(1, 66))), None)


def test_marshal_walk_accepts_what_encode_makes_and_refuses_the_rest():
    values = [[60, 62, 123, "{<>}", b"c\xbc", 2 ** 70, -1.5, 1j, None, True, (1, (2, [3]))],
              {"a": {1, 2}}, collections.deque([1]), 10 ** 400]
    for v in values:
        data = marshal.dumps(("ok", encode(v, lambda o: ("H", 1, "x"))))
        assert marshal_is_plain(data), v
        s = "shared"
        assert marshal_is_plain(marshal.dumps(("ok", ("L", (s, s, s)))))
    for bad in ({1: 2}, {1, 2}, frozenset({1}), compile("1", "x", "eval"), ("ok", {1: 2})):
        assert not marshal_is_plain(marshal.dumps(bad)), bad
    raw = b")\x02" + marshal.dumps("ok") + b">" + struct.pack("<i", 1) + marshal.dumps(P61)
    assert not marshal_is_plain(raw)
    # a frame with a byte that could be a refused code is walked; a malformed one is refused
    # (without such a byte marshal.loads itself is safe, and rejects what is malformed)
    assert not marshal_is_plain(marshal.dumps([60, 2])[:-1])  # truncated
    assert not marshal_is_plain(marshal.dumps(60) + b"N")  # trailing bytes


def test_hash_flood_finds_colliding_constants_in_long_sources_only():
    colliding = "x = {%s}" % ", ".join(str(k * P61) for k in range(1, 600))
    assert hash_flood(colliding)
    honest = "x = [%s]" % ", ".join(str(k) for k in range(5000))
    zeros = "x = [%s]" % ", ".join(["0"] * 5000)
    assert not hash_flood(honest) and not hash_flood(zeros)
    assert not hash_flood("x = {%s}" % ", ".join(str(k * P61) for k in range(1, 60)))


def test_the_judge_runs_under_memory_and_cpu_limits_of_its_own():
    """Backstops of the judge itself (direct launcher: its host pid is the judge): an address
    space limit set after its zygotes were forked, and a CPU allowance per unit."""
    from coevo_code.execution import Executor
    from coevo_code.sandbox.server import JUDGE_MEMORY_MB

    with Executor(slots=1, launcher="direct", allow_unsafe=True) as ex:
        ex.run([{"programs": ["print(1)"], "tests": [{"input": "", "output": "1"}]}])
        (pid,) = ex.server_pids()
        limits = {line[:26].strip(): line[26:].split()
                  for line in open(f"/proc/{pid}/limits").read().splitlines()[1:]}
        with open(f"/proc/{pid}/statm") as f:
            vm = int(f.read().split()[0]) * 4096
    soft_as = int(limits["Max address space"][0])
    assert vm < soft_as <= vm + (JUDGE_MEMORY_MB << 20) + (256 << 20)
    assert limits["Max cpu time"][0] != "unlimited" and int(limits["Max cpu time"][0]) < 10 ** 6
