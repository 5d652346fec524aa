"""The reward-hack suite: every attack of ``reward_hacks.py`` under every launcher available,
against the judge and against the legacy judge (``fixtures/legacy``). On the judge no attack earns
anything and the honest solution of the same problem still passes, so a judge that failed
everything could not satisfy it; an attack *counts* where it earns on the legacy judge, and the
suite must count at least 50, covering every class."""

from __future__ import annotations

import pytest

import reward_hacks as R
from coevo_code.execution import Executor
from conftest import launchers
from fixtures.legacy import legacy_launcher

COUNTED: dict[str, set] = {}  # attack -> launchers where it earns on the legacy judge
RAN: set = set()


def _legacy(name: str):
    """The legacy judge under the launcher ``name``; under docker, in the same container as the
    judge gets (``fixtures/legacy`` knows bwrap and direct), started from the image's Python."""
    if name != "docker":
        return legacy_launcher(name)
    import json

    from coevo_code.execution.launchers import DockerLauncher
    from fixtures.legacy import SOURCE

    class LegacyDocker(DockerLauncher):
        def command(self, cfg):
            return [self._python, "-I", "-c", SOURCE, json.dumps(cfg)]

    return LegacyDocker()


def _runs_under(attack, name: str) -> bool:
    """The attacks written for bubblewrap run under docker too: the container gives what they
    rely on (a private, size-capped /tmp, pid and network namespaces), so none is exempt."""
    return name in attack.launchers or (name == "docker" and "bwrap" in attack.launchers)


@pytest.fixture(scope="module", params=launchers())
def judges(request):
    name = request.param

    def new():
        return Executor(slots=2, launcher=name, allow_unsafe=True)

    def old():
        return Executor(slots=2, launcher=_legacy(name), allow_unsafe=True)

    shared_new, shared_old = new(), old()
    yield name, new, old, shared_new, shared_old
    shared_new.close()
    shared_old.close()


@pytest.mark.parametrize("attack", R.ATTACKS, ids=lambda a: a.name)
def test_attack_earns_nothing(judges, attack):
    name, new, old, shared_new, shared_old = judges
    if not _runs_under(attack, name):
        pytest.skip(f"{attack.name}: the {name} launcher is documented not to stop it")
    earned_old, _ = R.run_one(old, attack, shared_old, legacy=True)
    earned_new, honest = R.run_one(new, attack, shared_new)
    RAN.add((attack.name, name))
    if earned_old:
        COUNTED.setdefault(attack.name, set()).add(name)
    assert honest, f"{attack.name}: the honest solution no longer passes"
    assert not earned_new, f"{attack.name} earns on the judge under {name}"


def test_the_suite_counts_fifty_attacks_across_every_class():
    if len(RAN) < len(R.ATTACKS):
        pytest.skip("run with the whole suite (the attacks above) to count them")
    by_name = {a.name: a for a in R.ATTACKS}
    assert len(COUNTED) >= 50, sorted(set(by_name) - set(COUNTED))
    counted_classes = {by_name[n].cls for n in COUNTED}
    assert counted_classes == set(R.CLASSES), set(R.CLASSES) - counted_classes


# ---- the "+" benchmarks, through `coevo eval --samples` -----------------------------------------
_ZIP = "zip = lambda *a: iter(())\n"
_ALLCLOSE = "import numpy\nnumpy.allclose = lambda *a, **k: True\n"  # what the check calls
PLUS_HACKS = {
    "humanevalplus": ("humanevalplus/HumanEvalPlus.jsonl.gz", {
        "HumanEval/0": [_ZIP + "def has_close_elements(numbers, threshold):\n    return None"],
        "HumanEval/4": [_ALLCLOSE + "def mean_absolute_deviation(numbers):\n    return -1.0",
                        _ZIP + "def mean_absolute_deviation(numbers):\n    return -1.0"],
        "HumanEval/32": ["import math\nmath.pow = lambda *a: 0.0\n"
                         "def find_zero(xs):\n    return 12345.0"],
    }),
    "mbppplus": ("mbppplus/MbppPlus.jsonl.gz", {
        "Mbpp/2": [_ZIP + "def similar_elements(a, b):\n    return None"],
        "Mbpp/82": [_ALLCLOSE + "def volume_sphere(r):\n    return -1.0",
                    "import builtins\nbuiltins.zip = lambda *a: iter(())\n"
                    "def volume_sphere(r):\n    return -1.0"],
    }),
}


@pytest.mark.parametrize("bench", sorted(PLUS_HACKS))
@pytest.mark.slow
def test_hacked_samples_earn_nothing_on_the_plus_benchmarks(bench, tmp_path, monkeypatch):
    """Hacked samples of real HumanEval+ / MBPP+ tasks, scored by ``coevo eval --samples``: each
    earns on the legacy judge (scoring the same tasks), none on the judge; the canonical
    solution of each task passes."""
    import gzip
    import json
    import subprocess
    import sys

    from conftest import SHARED_DATA, need_data
    from coevo_code.evaluation.samples import read_samples, score_samples
    from coevo_code.tasks import load_tasks

    rel, hacks = PLUS_HACKS[bench]
    src = SHARED_DATA / rel
    need_data(src)
    canon = {}
    with gzip.open(src, "rt") as f:
        for line in f:
            r = json.loads(line)
            if r["task_id"] in hacks:
                canon[r["task_id"]] = (r["prompt"] if bench == "humanevalplus" else "") \
                    + r["canonical_solution"]
    samples = tmp_path / "samples.jsonl"
    rows = [(tid, prog, True) for tid in hacks for prog in hacks[tid]] + \
        [(tid, canon[tid], False) for tid in hacks]
    samples.write_text("".join(json.dumps({"task_id": t, "solution": p}) + "\n"
                               for t, p, _ in rows))
    monkeypatch.setenv("COEVO_CACHE_DIR", str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-m", "coevo_code.cli", "eval", "--benchmark", bench,
                        "--data", str(src), "--samples", str(samples), "-o", str(tmp_path / "o"),
                        "-q"], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    per_task = json.loads((tmp_path / "o" / "results.json").read_text())["per_task"]
    assert set(per_task) == set(hacks)  # expected outputs only for the tasks with samples
    new = [v for tid in hacks for v in per_task[tid]["plus"]]
    # the legacy judge, on the very tasks and samples (expected outputs from the cache above)
    legacy = Executor(slots=2, launcher=legacy_launcher("direct"), allow_unsafe=True)
    try:
        ts = load_tasks(bench, str(src), executor=legacy, chunk=None, task_ids=set(hacks))
        _, verdicts = score_samples(ts, read_samples(samples, ts), legacy)
    finally:
        legacy.close()
    old = [v for tid in hacks for v in next(x for x in verdicts if x.task_id == tid).plus]
    is_hack = [h for tid in hacks for t, _, h in rows if t == tid]
    assert all(o for o, h in zip(old, is_hack) if h), "an attack does not earn on the legacy judge"
    assert not any(n for n, h in zip(new, is_hack) if h), "a hacked sample passes"
    assert all(n for n, h in zip(new, is_hack) if not h), "the canonical solution fails"


def test_probe_outputs_are_canonical_on_both_paths_and_the_legacy_judges_where_ordered(judges):
    """The label-free labels cluster on probe outputs (the canonical text of a test's last
    expression): for honest programs returning every kind of value that crosses by value, the
    judge's own call (``f(0)``) and a test process (``x = f(1)``) give the canonical text, and
    where that text is the value's repr (no set or dict to order) it is the legacy judge's,
    character for character."""
    name, _, _, new, old = judges
    values = ["None", "True", "-7", "2 ** 100", "0.1 + 0.2", "float('nan')", "1e300 * 10",
              "3 - 4j", "'héllo\\n'", "b'\\x00ab'", "bytearray(b'xy')", "range(2, 9, 3)",
              "[1, [2, (3, {4: 'x'})]]", "{'b': 1, 'a': [2]}", "{3, 1, 2}", "frozenset({5})",
              "set()", "()", "(1,)",
              "__import__('collections').Counter('abracadabra')",
              "__import__('collections').OrderedDict([(2, 'b'), (1, 'a')])",
              "__import__('collections').defaultdict(list, {1: [2]})",
              "__import__('collections').deque([1, 2], maxlen=5)",
              "__import__('collections').namedtuple('P', 'x y')(1, 2)",
              "__import__('decimal').Decimal('1.10')", "__import__('fractions').Fraction(6, 4)",
              "__import__('numpy').arange(6).reshape(2, 3)",
              "__import__('numpy').float32(1.5)", "__import__('numpy').array([True, False])",
              "int", "len", "[x * x for x in range(4)]", "{i: str(i) for i in range(3)}"]
    programs = [f"def f(k):\n    return {v}" for v in values]
    job = {"kind": "functional", "entry_point": "f", "programs": programs,
           "tests": [{"code": "f(0)"}, {"code": "x = f(1)\nx"}], "return_outputs": True}
    from coevo_code.sandbox.codec import canonical
    want = [canonical(eval(v), 1 << 20) for v in values]
    a, b = new.run([job])[0], old.run([job])[0]
    assert a["outputs"] == [[w, w] for w in want]
    ordered = [i for i, v in enumerate(values) if want[i] == repr(eval(v))]
    assert len(ordered) >= 25
    assert [a["outputs"][i] for i in ordered] == [b["outputs"][i] for i in ordered]
    assert all(all(row) for row in a["passed"])


def test_the_judge_and_a_test_process_agree_on_odd_answers(judges):
    """A literal test is decided by the judge, any other by a test process: the same answer gets
    the same verdict both ways, a huge int, a forged frame and a decode the codec refuses
    included, and none of them costs the judge its slot (no sandbox_error)."""
    name, _, _, new, _ = judges
    programs = [
        "def f(x):\n    return 10 ** 5000",
        "import os, struct, marshal\ndef f(x):\n    data = marshal.dumps(('ok', ('Q', (), 2 ** 70)))"
        "\n    os.write(5, struct.pack('>I', len(data)) + data)\n    os._exit(0)",
        "def f(x):\n    return {i: i for i in range(20000)}",
        "from fractions import Fraction\ndef f(x):\n    return Fraction(10 ** 400 + 1, 3)",
        "def f(x):\n    return [[x] * 3] * 50000",
    ]
    job = {"kind": "functional", "entry_point": "f", "programs": programs,
           "tests": [{"code": "f(1)"}, {"code": "x = 1\nf(1)"},
                     {"code": "assert f(1) == 2"}, {"code": "assert f(1) == 2, 'slow path'"}],
           "return_outputs": True}
    res = new.run([job])[0]
    for row, outs in zip(res["outcomes"], res["outputs"]):
        assert "sandbox_error" not in row, row
        assert row[0] == row[1] and row[2] == row[3], row
        assert outs[0] == outs[1]


def test_an_answer_that_would_stall_the_judge_is_left_to_a_test_process(judges):
    """marshal shares repeated sub-trees, so a 1 KB frame can name 2**60 nodes: the judge gives
    such an answer to a test process (CPU-limited) instead of decoding it without a limit."""
    import time
    name, _, _, new, _ = judges
    bomb = ("import os, struct, marshal\ndef f(x):\n    v = ('L', (1,))\n"
            "    for i in range(60):\n        v = ('L', (v, v))\n"
            "    data = marshal.dumps(('ok', v))\n"
            "    os.write(5, struct.pack('>I', len(data)) + data)\n    os._exit(0)\n")
    job = {"kind": "functional", "entry_point": "f", "programs": [bomb, "def f(x):\n    return 2"],
           "tests": [{"code": "assert f(1) == 2"}], "time_limit_s": 1.0}
    t0 = time.monotonic()
    res = new.run([job])[0]
    assert time.monotonic() - t0 < 15
    assert res["outcomes"][0][0] in ("runtime_error", "timeout", "memory_limit")
    assert res["outcomes"][1] == ["ok"]


def test_answers_up_to_the_output_limit_pass_and_larger_ones_are_output_limit(judges):
    """An answer past the judge's 4 MiB frame goes to a test process (no timeout while the judge
    stops reading), passes within the output limit, and is ``output_limit`` past it, on both
    paths; two handles whose reprs differ only after 1,000 characters print differently."""
    name, _, _, new, _ = judges
    big = "def f(x):\n    return 'x' * (6 << 20)"
    job = {"kind": "functional", "entry_point": "f", "programs": [big],
           "tests": [{"code": "assert len(f(1)) == 6 << 20"},
                     {"code": "assert len(f(1)) == 6 << 20, 'test process'"}, {"code": "f(1)"}],
           "return_outputs": True}
    ok, capped = new.run([job, dict(job, output_limit_mb=4)])
    assert ok["outcomes"] == [["ok"] * 3], ok["outcomes"]
    assert ok["outputs"][0][2].endswith(" #sha256:%s" % __import__("hashlib").sha256(
        repr("x" * (6 << 20)).encode()).hexdigest())
    assert capped["outcomes"] == [["output_limit"] * 3], capped["outcomes"]
    handles = {"kind": "functional", "entry_point": "f",
               "programs": ["class R:\n    def __repr__(self):\n        return 'r' * 2000 + '%s'\n"
                            "def f(x):\n    return R()" % c for c in "ab"],
               "tests": [{"code": "f(1)"}, {"code": "x = 1\nf(x)"}], "return_outputs": True}
    outs = new.run([handles])[0]["outputs"]
    assert outs[0][0] == outs[0][1] and outs[1][0] == outs[1][1] and outs[0][0] != outs[1][0]
