"""``coevo tasks validate`` decides by the agreement of several trusted references, in any
language: one reference, hostile or fragile, cannot drop a valid generated test, and the invalid
ones still go.

The crafted rows below share one problem (print the sum of n integers, 1 <= n <= 5000,
0 <= a_i <= 10^9), honest references in Python and C++, and six generated tests: four valid
(two small, two with n = 1500 and 3000) and two invalid (a recorded output that is wrong; values
of 4 * 10^18, outside the constraints, where C++'s long long overflows and Python's integers do
not). Each row adds hostile or fragile references that pass every public and private test:

- ``DIGEST``: answers from a table of the SHA-256 digests of the setters' inputs, 0 otherwise
  (the memorization rule looks only for literal input text);
- ``SHORT``: holds the setters' inputs, all under 16 characters, verbatim, and sums the first
  three numbers otherwise (right on the small tests, wrong on the large);
- ``RECURSIVE``: an honest recursive sum, whose ``RecursionError`` on the large valid inputs is
  inside the constraints.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from coevo_code.tasks.validate import decide, validate_codecontests

PUBLIC = {"input": ["3\n1 2 3\n"], "output": ["6\n"]}
PRIVATE = {"input": ["1\n7\n", "2\n10 20\n", "4\n1 1 1 1\n"], "output": ["7\n", "30\n", "4\n"]}


def _case(n, base):
    xs = [(base * (i + 1)) % 1_000_000_007 for i in range(n)]
    return f"{n}\n{' '.join(map(str, xs))}\n", f"{sum(xs)}\n"


VALID = [("2\n5 7\n", "12\n"), ("1\n9\n", "9\n"), _case(1500, 999_983), _case(3000, 1_000_003)]
INVALID = [("3\n4 5 6\n", "16\n"),  # the recorded output is wrong
           ("3\n4000000000000000000 4000000000000000000 4000000000000000000\n",
            "12000000000000000000\n")]  # outside the constraints: C++ overflows
GENERATED = {"input": [i for i, _ in VALID + INVALID], "output": [o for _, o in VALID + INVALID]}

PY_SUM = "import sys\nprint(sum(map(int, sys.stdin.read().split()[1:])))"
PY_LOOP = ("n = int(input())\ns = 0\nfor x in input().split()[:n]:\n    s += int(x)\nprint(s)")
CPP_SCANF = ('#include <cstdio>\nint main(){int n; scanf("%d",&n); long long s=0, x;\n'
             'for(int i=0;i<n;i++){scanf("%lld",&x); s+=x;} printf("%lld\\n", s);}')
CPP_STREAM = ("#include <bits/stdc++.h>\nusing namespace std;\nint main(){int n; cin>>n; "
              "vector<long long> a(n); for(auto&x:a) cin>>x; "
              "cout<<accumulate(a.begin(),a.end(),0LL)<<'\\n';}")
_SETTERS = dict(zip(PUBLIC["input"] + PRIVATE["input"], PUBLIC["output"] + PRIVATE["output"]))
DIGEST = ("import hashlib, sys\nT = " + repr({hashlib.sha256(i.encode()).hexdigest(): o.strip()
                                              for i, o in _SETTERS.items()})
          + "\nh = hashlib.sha256(sys.stdin.read().encode()).hexdigest()\nprint(T.get(h, 0))")
SHORT = ("import sys\nd = sys.stdin.read()\nT = " + repr({i: o.strip() for i, o in _SETTERS.items()})
         + "\nprint(T[d] if d in T else sum(map(int, d.split()[1:4])))")
RECURSIVE = ("def s(a, i):\n    return 0 if i == len(a) else a[i] + s(a, i + 1)\n"
             "input()\nprint(s(list(map(int, input().split())), 0))")

HONEST = [(3, PY_SUM), (3, PY_LOOP), (2, CPP_SCANF), (2, CPP_STREAM)]


def row(name, extra):
    sols = HONEST + [(3, src) for src in extra]
    return {"name": name, "description": "Print the sum of n integers.", "source": 2,
            "public_tests": PUBLIC, "private_tests": PRIVATE, "generated_tests": GENERATED,
            "solutions": {"language": [lang for lang, _ in sols],
                          "solution": [src for _, src in sols]},
            "incorrect_solutions": {"language": [], "solution": []},
            "time_limit": {"seconds": 2, "nanos": 0}, "memory_limit_bytes": 256 << 20}


def test_votes_decide_as_documented():
    """The rules on hand-made votes (rows: references; columns: generated tests)."""
    ok, wa, re, tle = "ok", "wrong_answer", "runtime_error", "timeout"
    d = decide([[ok, wa, wa, re, tle], [ok, ok, wa, re, ok], [ok, ok, ok, re, ok]])
    assert d.dropped == [2, 3]  # two disputes; nobody confirms and three crash
    assert d.contested == [1] and d.disputes == {1: 1, 2: 2} and d.crashes == {3: 3}
    assert d.slow == {4: 1} and d.outliers == []
    # a crash where others confirm is the reference's fault: kept, contested
    assert decide([[re, ok], [ok, ok], [ok, ok]]).dropped == []
    # one reference alone decides nothing; with min_dispute 1 (the old rule) it drops
    assert decide([[wa, ok]]).dropped == [] and decide([[wa, ok]], 1).dropped == [0]
    # references that dispute what most others confirm lose their votes, even when two agree
    hostile = decide([[wa, wa, wa, wa], [wa, wa, wa, wa], [ok, ok, ok, wa], [ok, ok, ok, wa],
                      [ok, ok, ok, wa]])
    assert hostile.outliers == [0, 1] and hostile.dropped == [3], hostile
    lone = decide([[wa, wa, wa, ok], [ok, ok, ok, ok], [ok, ok, ok, ok], [ok, wa, ok, ok]])
    assert lone.outliers == [0] and lone.dropped == [] and lone.contested == [1]
    assert decide([[wa, wa, ok], [wa, ok, ok], [ok, wa, ok]]).outliers == []
    assert decide([]).dropped == [] and decide([[]]).dropped == []


@pytest.mark.slow
def test_hostile_and_fragile_references_keep_every_valid_test(tmp_path, executor):
    if not executor.languages()["cpp"][0]:
        pytest.skip("no C++ toolchain in this sandbox")
    rows = [row("digest", [DIGEST]), row("short", [SHORT]), row("recursive", [RECURSIVE]),
            row("all_three", [DIGEST, SHORT, RECURSIVE])]
    src, out = tmp_path / "cc.jsonl", tmp_path / "clean.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = {v.name: v for v in validate_codecontests(src, out, executor,
                                                       languages="python,cpp")}
    for name, v in report.items():
        assert v.skipped is None and v.dropped == [4, 5], v.line()  # the invalid two, nothing else
        assert v.disputed_by[4] == {"python": v.languages["python"]["voting"], "cpp": 2}
        assert v.disputed_by[5] == {"cpp": 2}, v.line()  # the C++ overflow decides it
        assert v.deciding() == ["python", "cpp"]
    assert report["digest"].outliers == [2] and report["all_three"].outliers == [2]  # DIGEST
    assert {lang: (c["passing_before"], c["passing_after"])
            for lang, c in report["digest"].languages.items()} == {"python": (0, 2),
                                                                   "cpp": (0, 2)}
    assert report["short"].contested == [2, 3] and report["recursive"].crashing == {2: 1, 3: 1}
    assert report["all_three"].contested == [2, 3]
    cleaned = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(c["generated_tests"]["input"] == GENERATED["input"][:4] for c in cleaned)
    assert cleaned[3]["coevo_validation"]["decided_by"] == ["python", "cpp"]
    # the old rule (any one reference's wrong answer drops) loses the two large valid tests
    short = validate_codecontests(tmp_path / "cc.jsonl", tmp_path / "old.jsonl", executor,
                                  languages="python,cpp", min_dispute=1)[1]
    assert short.dropped == [2, 3, 4, 5], short.line()


def test_references_per_language():
    from coevo_code.tasks.codecontests import parse_references, reference_cap
    from coevo_code.tasks.model import LoaderError
    caps = parse_references("40,java=10")
    assert [reference_cap(caps, lang) for lang in ("python", "cpp", "java")] == [40, 40, 10]
    only = parse_references("java=60")
    assert [reference_cap(only, lang) for lang in ("python", "java")] == [None, 60]
    assert reference_cap(7, "cpp") == 7 and reference_cap(None, "cpp") is None
    for bad, said in (("0", "at least 1"), ("rust=3", "unknown language 'rust'"),
                      ("java=x", "is not N or LANGUAGE=N")):
        with pytest.raises(LoaderError, match=said):
            parse_references(bad)
