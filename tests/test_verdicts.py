"""Verdicts: what passes, what fails and with which outcome, and what a program sees."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import executor_fixture

executor = executor_fixture(docker=True)  # every launcher here, the container too

A_PLUS_B = [{"input": "1 2\n", "output": "3\n"}, {"input": "-5 5\n", "output": "0\n"},
            {"input": "1000000000 1000000000\n", "output": "2000000000\n"}]

CORRECT = {
    "input": "a, b = map(int, input().split())\nprint(a + b)",
    "readline": "import sys\na, b = map(int, sys.stdin.readline().split())\nprint(a + b)",
    "read": "import sys\nprint(sum(map(int, sys.stdin.read().split())))",
    "buffer": "import sys\nprint(sum(int(x) for x in sys.stdin.buffer.read().split()))",
    "open0": "print(sum(map(int, open(0).read().split())))",
    "open0_bytes": "print(sum(map(int, open(0, 'rb').read().split())))",
    "iterate_stdin": "import sys\nfor line in sys.stdin:\n    print(sum(map(int, line.split())))",
    "numpy": "import numpy as np\nprint(int(np.array(input().split(), dtype=np.int64).sum()))",
    "numpy_from_import": "from numpy import array\nprint(int(array(input().split(), dtype=int).sum()))",
    "end_spaces": "a, b = map(int, input().split())\nprint(a + b, end='  \\n\\n')",
    "sys_exit_0_after": "import sys\nprint(sum(map(int, input().split())))\nsys.exit(0)",
    "exit_builtin_after": "print(sum(map(int, input().split())))\nexit()",
    "quit_builtin_after": "print(sum(map(int, input().split())))\nquit()",
    "main_guard": "def main():\n    print(sum(map(int, input().split())))\n\n"
                  "if __name__ == '__main__':\n    main()",
    "threads": "import threading\nr = []\nt = threading.Thread(target=lambda: r.append("
               "sum(map(int, input().split()))))\nt.start()\nt.join()\nprint(r[0])",
    "thread_after_main": "import threading, sys\nthreading.stack_size(1 << 26)\n"
                         "def main():\n    print(sum(map(int, input().split())))\n"
                         "threading.Thread(target=main).start()",
    "atexit_print": "import atexit\natexit.register(lambda: print(sum(map(int, input().split()))))",
    "lazy_stdlib_import": "import fractions, queue, heapq, traceback\n"
                          "print(sum(map(int, input().split())))",
    "write_in_workdir": "open('scratch.txt', 'w').write(input())\n"
                        "print(sum(map(int, open('scratch.txt').read().split())))",
}

FAILING = {
    "wrong": ("a, b = map(int, input().split())\nprint(a - b)", "wrong_answer"),
    "float_for_int": ("a, b = map(int, input().split())\nprint(float(a + b))", "wrong_answer"),
    "extra_label": ("a, b = map(int, input().split())\nprint('Answer:', a + b)", "wrong_answer"),
    "no_output": ("a, b = map(int, input().split())", "wrong_answer"),
    "exception": ("print(1 // 0)", "runtime_error"),
    "eof": ("input()\ninput()\nprint(3)", "runtime_error"),
    "syntax": ("print(1 +", "syntax_error"),
    "indentation": ("if True:\nprint(1)", "syntax_error"),
    "null_byte": ("print(1)\x00", "syntax_error"),
    "exit_1": ("import sys\nprint(sum(map(int, input().split())))\nsys.exit(1)", "runtime_error"),
    "exit_message": ("import sys\nsys.exit('bye')", "runtime_error"),
    "recursion": ("def f(n):\n    return f(n + 1)\nf(0)", "runtime_error"),
    "segfault": ("import ctypes\nctypes.string_at(0)", "runtime_error"),
    "abort": ("import os\nos.abort()", "runtime_error"),
}


def run1(ex, program, tests=A_PLUS_B, **job):
    return ex.run([{"programs": [program], "tests": tests, **job}])[0]


@pytest.mark.parametrize("name", list(CORRECT))
def test_correct_programs_pass(executor, name):
    tests = A_PLUS_B[:1] if name == "iterate_stdin" else A_PLUS_B
    res = run1(executor, CORRECT[name], tests)
    assert res["outcomes"] == [["ok"] * len(tests)], res


@pytest.mark.parametrize("name", list(FAILING))
def test_failing_programs_fail_with_their_outcome(executor, name):
    program, outcome = FAILING[name]
    res = run1(executor, program)
    assert res["outcomes"] == [[outcome] * 3], res
    assert res["passed"] == [[False] * 3]


def test_syntax_error_fails_its_row_without_running(executor):
    before = executor.stats()["cells"]
    res = run1(executor, "def f(:\n    pass", [{"input": "", "output": ""}] * 50)
    assert res["outcomes"] == [["syntax_error"] * 50]
    assert executor.stats()["cells"] == before  # nothing was forked


def test_whitespace_rule_is_token_equality(executor):
    tests = [{"input": "", "output": "1 2\n3\n"}]
    progs = ["print('1  2   3')", "print('1\\t2\\n\\n3   ')", "print('1 23')", "print('1 2 3 4')"]
    res = executor.run([{"programs": progs, "tests": tests}])[0]
    assert res["outcomes"] == [["ok"], ["ok"], ["wrong_answer"], ["wrong_answer"]]


def test_matrix_shape_and_mixed_rows(executor):
    progs = [CORRECT["input"], "a, b = map(int, input().split())\nprint(abs(a) + abs(b))",
             FAILING["syntax"][0]]
    res = executor.run([{"id": "m", "programs": progs, "tests": A_PLUS_B}])[0]
    assert res["id"] == "m"
    assert res["passed"] == [[True] * 3, [True, False, True], [False] * 3]
    assert len(res["outcomes"]) == 3 and all(len(r) == 3 for r in res["outcomes"])
    assert res["seconds"] >= 0


def _fresh(program: str) -> str:
    return subprocess.run([sys.executable, "-I", "-c", program], capture_output=True,
                          text=True, timeout=60).stdout


def test_program_sees_what_a_fresh_interpreter_shows(executor):
    probe = ("import sys\ndef depth(n):\n    try:\n        return depth(n + 1)\n"
             "    except RecursionError:\n        return n\n"
             "print(__name__, len(sys.argv), depth(0), sys.getrecursionlimit(),"
             " sys.stdin.encoding, sys.stdout.encoding)")
    res = run1(executor, probe, [{"input": "", "output": ""}], return_outputs=True)
    got = res["outputs"][0][0].split()
    want = _fresh(probe).split()
    assert got[0] == "__main__" and got[1] == "1"
    assert got[2] == want[2], "recursion room differs from a fresh interpreter"
    assert got[3] == want[3]
    assert [g.lower().replace("-", "") for g in got[4:]] == ["utf8", "utf8"]
    # the same in the numpy sub-server, whose call stack differs
    with_numpy = "import numpy\n" + probe
    res = run1(executor, with_numpy, [{"input": "", "output": ""}], return_outputs=True)
    assert res["outputs"][0][0].split()[2:4] == _fresh(with_numpy).split()[2:4]


def test_seeds_are_the_jobs_own_the_same_in_every_cell_slot_and_run(executor):
    """Every cell of a job draws the same numbers (``random`` and ``numpy.random`` seeded from
    the job's id) and hashes strings with the same seed (every slot's judge has the one
    PYTHONHASHSEED), so a program printing a set of strings or a random draw prints the same
    in every slot; another job id draws others; os.urandom stays fresh."""
    prog = ("import os, random\nimport numpy as np\n"
            "print(random.random(), np.random.rand(), {'apple', 'banana', 'cherry', 'date', 'egg'},"
            " hash('apple'), os.urandom(8).hex())")
    tests = [{"input": "", "output": ""}] * 6

    def outs(jid):
        res = executor.run([{"id": jid, "programs": [prog], "tests": tests,
                             "return_outputs": True}] * 2)  # 12 cells over both slots
        return [o.rsplit(" ", 1) for r in res for o in r["outputs"][0]]

    a, again, b = outs("job-a"), outs("job-a"), outs("job-b")
    assert len({x for x, _ in a + again}) == 1, a
    assert len({x for x, _ in a + b}) == 2
    assert {x.split("}")[1] for x, _ in a} == {x.split("}")[1] for x, _ in b}  # str hash: one
    assert len({u for _, u in a + again}) == 24  # the cells are distinct processes
    # the documented seed, under every launcher: what `PYTHONHASHSEED=... python` prints
    import subprocess
    import sys

    from coevo_code.sandbox.server import DEFAULT_HASH_SEED
    show = "print({'apple', 'banana', 'cherry', 'date', 'egg'}, hash('apple'))"
    fresh = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True,
                           env={"PYTHONHASHSEED": str(DEFAULT_HASH_SEED)}).stdout
    assert a[0][0].split(" ", 2)[2] == fresh.strip()


def test_a_hash_flood_program_is_refused_before_it_is_compiled(executor):
    """The judge scans a long program for colliding constants on its parse tree, before it
    compiles it (compiling them costs quadratic time, on the judge, per unit): this program's
    ``return`` outside a function is an error only compile() finds, so a judge that compiled
    first would call it a syntax error; an honest long program of distinct constants runs."""
    flood = "xs = [%s]\nreturn 0" % ", ".join(str(k * (2 ** 61 - 1)) for k in range(1, 3001))
    honest = "xs = [%s]\nprint(len(xs))" % ", ".join(str(k * 2 ** 40) for k in range(1, 3001))
    res = executor.run([{"programs": [flood, honest], "tests": [{"input": "", "output": "3000"}]}])
    assert res[0]["outcomes"] == [["runtime_error"], ["ok"]]


def test_a_repeated_program_runs_once_and_its_copies_share_its_verdicts(executor):
    """k samples often repeat a program word for word: each text of a job runs once. Were the
    copies run, this program's random outputs would differ between them."""
    prog = "import os\nprint(os.urandom(8).hex())"
    done = []
    res = executor.run([{"programs": [prog, "print(2)", prog, prog],
                         "tests": [{"input": "", "output": "2"}] * 3,
                         "return_outputs": True}], progress=done.append)[0]
    assert sum(done) == 4 * 3  # a progress bar over every cell ends full, copies included
    outs = res["outputs"]
    assert outs[2] == outs[0] and outs[3] == outs[0] and len(set(outs[0])) == 3
    assert res["passed"] == [[False] * 3, [True] * 3, [False] * 3, [False] * 3]
    assert outs[1] == ["2\n"] * 3


# ---- functional jobs -------------------------------------------------------------------------
def test_sets_and_dicts_keyed_by_powers_of_two_pass(executor):
    """hash(2**k) repeats every 61 values of k (and hash(2.0**k), hash(0.5**k)): an honest set
    or dict of 130 powers collides in groups of 3, far from a hash flood; it passes, through
    the judge's own call (a literal test, a probe) and through a test process."""
    prog = ("def f(n):\n    return {2 ** i for i in range(n)}\n"
            "def g(n):\n    return {2.0 ** i: 0.5 ** i for i in range(n)}")
    tests = ["assert f(130) == {%s}" % ", ".join(str(2 ** i) for i in range(130)),
             "assert f(130) == {2 ** i for i in range(130)}",
             "x = 130\nassert g(x) == {2.0 ** i: 0.5 ** i for i in range(x)}", "f(130)",
             "x = 130\ng(x)"]
    res = executor.run([{"kind": "functional", "entry_point": "f", "programs": [prog],
                         "tests": [{"code": t} for t in tests], "return_outputs": True}])[0]
    assert res["outcomes"] == [["ok"] * 5], res
    import ast
    assert ast.literal_eval(res["outputs"][0][3]) == {2 ** i for i in range(130)}


def test_functional_semantics(executor):
    job = {"kind": "functional", "entry_point": "add", "setup": "import math\nOFFSET = 0",
           "programs": ["def add(a, b):\n    return a + b + OFFSET",
                        "def add(a, b):\n    return a * b",
                        "def add(a, b):\n    raise ValueError('no')",
                        "def add(a, b):\n    return a + b\nprint('noise')",
                        "x = (", ""],
           "tests": [{"code": "assert add(1, 2) == 3"}, {"code": "assert add(2, 2) == 4"},
                     {"code": "assert math.isclose(add(0.1, 0.2), 0.3)"}],
           "return_outputs": True}
    res = executor.run([job])[0]
    assert res["outcomes"] == [["ok", "ok", "ok"],
                               ["wrong_answer", "ok", "wrong_answer"],
                               ["runtime_error"] * 3,
                               ["ok", "ok", "ok"],
                               ["syntax_error"] * 3,
                               ["runtime_error"] * 3]


def test_functional_outputs_are_the_value_of_the_last_expression(executor):
    job = {"kind": "functional", "programs": ["def f(x):\n    return [x, str(x)]"],
           "tests": [{"code": "f(1)"}, {"code": "y = 2\nf(y)"}, {"code": "assert f(3)"}],
           "return_outputs": True}
    res = executor.run([job])[0]
    assert res["outcomes"] == [["ok", "ok", "ok"]]
    assert res["outputs"] == [["[1, '1']", "[2, '2']", ""]]


def test_humaneval_style_check(executor):
    prog = "def incr(xs):\n    return [x + 1 for x in xs]"
    test = "def check(candidate):\n    assert candidate([1, 2]) == [2, 3]\n\ncheck(incr)"
    res = executor.run([{"kind": "functional", "programs": [prog], "tests": [test]}])[0]
    assert res["outcomes"] == [["ok"]]


# ---- checkers, outputs, limits ------------------------------------------------------------------
CHECKER = ("def check(input, expected, actual):\n"
           "    n = int(input)\n    a, b = map(int, actual.split())\n"
           "    return a + b == n and a >= 0 and b >= 0\n")


def test_checker_accepts_any_valid_answer(executor):
    progs = ["n = int(input())\nprint(0, n)", "n = int(input())\nprint(n, 0)",
             "n = int(input())\nprint(n, 1)", "print('x y')"]
    res = executor.run([{"programs": progs, "tests": [{"input": "5\n", "output": "2 3\n"}],
                         "checker": CHECKER}])[0]
    assert res["outcomes"] == [["ok"], ["ok"], ["wrong_answer"], ["wrong_answer"]]


def test_return_outputs(executor):
    res = run1(executor, "print(input().upper())", [{"input": "abc\n", "output": "ABC"}],
               return_outputs=True)
    assert res["outputs"] == [["ABC\n"]]
    assert "outputs" not in run1(executor, "print(1)", [{"input": "", "output": "1"}])


def test_limits_are_per_job(executor):
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5:\n    pass\nprint(1)"
    one = [{"input": "", "output": "1"}]
    assert run1(executor, busy, one)["outcomes"] == [["ok"]]
    assert run1(executor, busy, one, time_limit_s=0.2)["outcomes"] == [["timeout"]]
    alloc = "x = bytearray(200 * 1024 * 1024)\nprint(1)"
    assert run1(executor, alloc, one)["outcomes"] == [["ok"]]
    assert run1(executor, alloc, one, memory_limit_mb=64)["outcomes"] == [["memory_limit"]]
    big = "print('x' * 3_000_000)\nprint(1)"
    assert run1(executor, big, [{"input": "", "output": "x" * 3_000_000 + "\n1"}])[
        "outcomes"] == [["ok"]]  # legitimate outputs of a few MB pass
    assert run1(executor, big, one, output_limit_mb=1)["outcomes"] == [["output_limit"]]


def test_sleeping_program_ends_by_the_wall_clock(executor):
    sleeper = "import time\ntime.sleep(2)\nprint(1)"
    one = [{"input": "", "output": "1"}]
    # 2 s asleep uses no CPU: within the 1 s CPU limit and the 3 s default wall cap
    assert run1(executor, sleeper, one)["outcomes"] == [["ok"]]
    assert run1(executor, "import time\ntime.sleep(60)", one)["outcomes"] == [["timeout"]]
    assert run1(executor, sleeper, one, wall_limit_s=1.0)["outcomes"] == [["timeout"]]


def test_an_entry_point_named_like_a_standard_export_is_the_programs(executor):
    """A test's namespace binds common standard exports (``Counter``, ``sqrt``) only where the
    program defines no such name, and never over the entry point: HumanEval/131 is ``digits``
    (``string.digits``), MBPP+ has ``sum``."""
    job = {"kind": "functional", "entry_point": "digits",
           "programs": ["def digits(n):\n    p = 1\n    for c in str(n):\n"
                        "        p *= int(c) if int(c) % 2 else 1\n    return p"],
           "tests": [{"code": "assert digits(235) == 15"}, {"code": "assert digits(235) == 15, 'm'"},
                     {"code": "x = [digits(n) for n in (1, 35)]\nassert x == [1, 15]"}]}
    assert executor.run([job])[0]["outcomes"] == [["ok", "ok", "ok"]]


# What the program returns, of every kind a handle stands for; and the ABC checks a test makes.
ABC_OBJECTS = {
    "iterable_only": "class R:\n    def __iter__(self):\n        return iter([1, 2])\n"
                     "def f():\n    return R()",
    "collection": "class B:\n    def __len__(self):\n        return 2\n"
                  "    def __iter__(self):\n        return iter([1, 2])\n"
                  "    def __contains__(self, x):\n        return x in (1, 2)\ndef f():\n"
                  "    return B()",
    "sequence_by_inheritance": "import collections.abc\n"
                               "class S(collections.abc.Sequence):\n"
                               "    def __len__(self):\n        return 2\n"
                               "    def __getitem__(self, i):\n"
                               "        if i > 1:\n            raise IndexError(i)\n"
                               "        return i + 1\ndef f():\n    return S()",
    "registered_mapping": "import collections.abc\nclass M:\n    pass\n"
                          "collections.abc.Mapping.register(M)\ndef f():\n    return M()",
    "unhashable": "class U:\n    def __eq__(self, other):\n        return False\n"
                  "def f():\n    return U()",
    "generator": "def f():\n    return (i for i in (1, 2))",
    "dict_keys": "def f():\n    return {1: 0, 2: 0}.keys()",
    "int_subclass": "class I(int):\n    pass\ndef f():\n    return I(2)",
    "callable": "class C:\n    def __call__(self):\n        return 2\ndef f():\n    return C()",
}
ABC_CHECKS = ["Sized", "Iterable", "Container", "Collection", "Iterator", "Generator", "Hashable",
              "Reversible", "Callable", "Sequence", "Mapping", "Set", "KeysView",
              "numbers.Integral", "numbers.Number"]


def test_isinstance_of_an_abc_answers_as_for_the_object(executor):
    """A value the program returns is a handle in the test's process; ``isinstance`` with an
    abstract base class answers as it does for the object in one Python process: structural
    ABCs (Sized, Iterable, Container...) by the methods the object's class has, nominal ones
    (Sequence, Mapping, KeysView, Integral...) by the program's inheritance and registrations.
    A handle used to answer Sized, Iterable and Container True for any object."""
    tests = ["import numbers\nfrom collections.abc import *\nassert isinstance(f(), %s)" % c
             for c in ABC_CHECKS] + ["from collections.abc import Sized\nassert not "
                                     "isinstance(f(), Sized) or len(f()) == 2"]
    job = {"kind": "functional", "entry_point": "f", "programs": list(ABC_OBJECTS.values()),
           "tests": [{"code": t} for t in tests]}
    res = executor.run([job])[0]
    for (name, program), row in zip(ABC_OBJECTS.items(), res["outcomes"]):
        want = []
        for t in tests:  # the same test beside the program, in this process
            g: dict = {}
            exec(program, g)
            try:
                exec(t, g)
                want.append("ok")
            except AssertionError:
                want.append("wrong_answer")
            except Exception:  # noqa: BLE001 - as the judge labels any other exception
                want.append("runtime_error")
        assert row == want, (name, [(c, a, b) for c, a, b in zip(tests, row, want) if a != b])
    assert res["outcomes"][0][0] == "wrong_answer"  # the case of the report: no __len__


def test_a_handle_forwards_what_the_objects_class_has():
    """The handle classes themselves: one per shape, with exactly the object's methods (None for
    a class that is unhashable), registered with the nominal ABCs the object is an instance of;
    a program's shape outside the bit masks, or more kinds of object than the cap, ends the call
    as the program's protocol error."""
    import collections.abc as abc

    from coevo_code.sandbox import cell
    methods, abcs = cell.object_shape({1: 2}.keys())
    cls = cell.handle_class(methods, abcs)
    assert cls is cell.handle_class(methods, abcs) and issubclass(cls, abc.KeysView)
    assert issubclass(cls, abc.Set) and not issubclass(cls, abc.Sequence)
    unhashable = cell.handle_class(*cell.object_shape([]))
    assert unhashable.__hash__ is None and issubclass(unhashable, abc.MutableSequence)
    assert cell.object_shape(len) == cell.object_shape(print)  # one class for every builtin

    class Link(cell._Link):
        def __init__(self):
            super().__init__(-1, -1)
    link = Link()
    with pytest.raises(cell.ProgramGone):
        link.handle(1, "x", 1 << len(cell.SHAPE_METHODS), 0)
    with pytest.raises(cell.ProgramGone):
        link.handle(2, "x", 0, -1)
    assert link.gone == "PROTOCOL"
    saved = dict(cell._SHAPED)
    try:
        cell._SHAPED.update({("filler", i): object for i in range(cell.HANDLE_SHAPES_CAP)})
        assert cell.handle_class(3, 0) is None
    finally:
        cell._SHAPED.clear()
        cell._SHAPED.update(saved)


def test_the_judge_compiles_short_tests_and_leaves_the_rest_to_their_cell():
    """A short test reaches its cells compiled, once per unit (its last expression assigned to
    the cell's output); a long one, or one whose compiling fails in the judge, reaches them as
    source and fails there, alone."""
    import ast

    from coevo_code.sandbox.server import FLOOD_SCAN_BYTES, judge_compiled_test
    src = "x = 2\nf(x) * 3"
    code = judge_compiled_test(src, ast.parse(src))
    assert type(code) is not str
    g = {"f": lambda v: v + 1}
    exec(code, g)
    assert g["__coevo_value__"] == 9
    deep = "f([1]) + " + " + ".join(["[1]"] * 1300)  # RecursionError in the judge's compile
    assert len(deep) <= FLOOD_SCAN_BYTES and judge_compiled_test(deep, ast.parse(deep)) == deep
    long = "assert f(0) == 1\n" + "y = 1\n" * (FLOOD_SCAN_BYTES // 6)
    assert judge_compiled_test(long, ast.parse(long)) == long
    assert judge_compiled_test("assert f(", None) == "assert f("


def test_the_judge_prepares_each_test_once_and_keys_it_by_what_decides_it(monkeypatch):
    """Every program of a job runs the same tests: the judge parses, scans and compiles each
    once, not once per unit. The cache key holds everything its result depends on: a setup that
    defines the called name makes the same test go to a test process, not the judge's literal
    path; the least recently used entry leaves first."""
    from coevo_code.sandbox import server

    judge = server.Judge.__new__(server.Judge)  # the cache alone, no zygotes
    judge.prepared, judge.prepared_bytes, judge.heavy_roots = {}, 0, {"numpy"}
    parsed = []
    real_parse = server.parse_test
    monkeypatch.setattr(server, "parse_test", lambda src: parsed.append(src) or real_parse(src))
    no_setup = compile("", "setup.py", "exec")
    t = "assert f(2) == 4"
    first = judge._prepare_test(t, "f", no_setup)
    assert first[0] is not None and first[1] is False and type(first[2]) is not str
    assert judge._prepare_test(t, "f", compile("", "setup.py", "exec")) is first  # another unit
    assert parsed == [t]
    defines_f = compile("def f(x):\n    return 0", "setup.py", "exec")
    assert judge._prepare_test(t, "f", defines_f)[0] is None  # the setup's f: a test process
    assert judge._prepare_test("import numpy\nassert f(1) == 1", "f", no_setup)[1] is True
    assert len(parsed) == 3
    monkeypatch.setattr(server, "TEST_CACHE_COUNT", 3)
    judge._prepare_test(t, "f", no_setup)  # the most recent again
    judge._prepare_test("assert f(3) == 9", "f", no_setup)  # a fourth: the oldest leaves
    assert (t, "f", defines_f.co_names) not in judge.prepared
    assert (t, "f", no_setup.co_names) in judge.prepared
    assert judge.prepared_bytes == sum(v[3] for v in judge.prepared.values())
    # the size bound weighs what an entry keeps (its literals), not only its source's length
    monkeypatch.setattr(server, "TEST_CACHE_COUNT", 4096)
    monkeypatch.setattr(server, "TEST_CACHE_BYTES", 50_000)
    wide = "assert f(%r) == 0" % ([[]] * 100)  # 400 characters, 100 lists kept
    assert judge._prepare_test(wide, "f", no_setup)[3] > 100 * server.TEST_NODE_BYTES
    for k in range(20):
        judge._prepare_test(wide.replace("0", str(k)), "f", no_setup)
    assert judge.prepared_bytes <= 50_000 and len(judge.prepared) < 5


def test_each_sandbox_module_is_one_argument_under_the_kernels_cap(monkeypatch, tmp_path):
    """Linux caps one execve argument at 128 KiB: the modules travel one argument each (all of
    them in one passed the cap), and a module too long for one is a clear error naming it."""
    from coevo_code.execution import launchers

    args = launchers.sandbox_sources()
    from coevo_code.sandbox import MODULES
    assert [a.split("\n", 1)[0] for a in args] == list(MODULES)
    assert all(len(a.encode()) <= launchers.MAX_ARG_BYTES for a in args)
    big = tmp_path / "sandbox"
    big.mkdir()
    for name in MODULES:
        (big / f"{name}.py").write_text("x = 1\n" * (30000 if name == "codec" else 1))
    monkeypatch.setattr(launchers, "SANDBOX_DIR", big)
    with pytest.raises(RuntimeError, match=r"sandbox/codec\.py is \d+ bytes"):
        launchers.sandbox_sources()


def test_no_cell_holds_the_judges_copy_of_the_sandbox_sources(executor):
    """The judge forgets the module sources it was started with once they are loaded, so that
    neither its zygotes nor their cells carry them (a program sees a short ``sys.orig_argv``)."""
    prog = "import sys\nprint(sum(len(a) for a in sys.orig_argv) < 20000, sys.argv)"
    res = run1(executor, prog, [{"input": "", "output": "True ['main.py']"}])
    assert res["outcomes"] == [["ok"]]
