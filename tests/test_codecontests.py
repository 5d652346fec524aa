"""CodeContests: the loader on the real rows (limits, fallbacks, Python 2 only rows, gold-test
kinds), every file format decoding the same tests lazily, ``tasks check`` with every reference
and the incorrect solutions, and ``tasks validate`` dropping the generated tests the correct
solutions disagree with."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys

import pytest

from coevo_code.tasks import LoaderError, check_tasks, load_tasks
from coevo_code.tasks.rows import RowField
from coevo_code.tasks.validate import validate_codecontests
from conftest import SHARED_DATA, executor_fixture, need_data

executor = executor_fixture(docker=False)
SAMPLE = SHARED_DATA / "codecontests" / "code_contests_train_sample.jsonl"
CODECHEF = ["brcktsrm", "comm3", "gcd2", "luckybal", "prpaln", "tf01"]
PHONE = "1060_A. Phone Numbers"


@pytest.fixture(scope="module")
def sample():
    need_data(SAMPLE)
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def test_real_rows_limits_fallbacks_and_python2_rows(sample):
    ts = load_tasks("codecontests", SAMPLE)
    s = ts.summary()
    assert len(ts) == 8 and ts.n_tests == 792, s
    assert f"6 with Python 2 solutions only (not run) ({', '.join(CODECHEF)})" in s
    assert f"6 without a time limit (1 s used) ({', '.join(CODECHEF)})" in s
    assert f"6 without a memory limit (256 MB used)" in s  # noqa: F541 - written like the two lines above
    assert "1 without a Python solution (1081_G. Mergesort Strikes Back)" in s
    by = {t.id: t for t in ts}
    phone = by[PHONE]
    assert (phone.time_limit_s, phone.memory_limit_mb) == (2.0, 488)  # 512000000 bytes
    assert by["gcd2"].time_limit_s == 1.0 and by["gcd2"].memory_limit_mb == 256
    assert phone.metadata["test_counts"] == {"public": 3, "private": 95, "generated": 81}
    # tests and solutions stay on disk until used, and decode to exactly the row's
    assert isinstance(phone.tests, RowField) and len(phone.tests) == 179
    row = next(r for r in sample if r["name"] == PHONE)
    want = [(i, o) for kind in ("public", "private", "generated")
            for i, o in zip(row[f"{kind}_tests"]["input"], row[f"{kind}_tests"]["output"])]
    assert [(t.input, t.output) for t in phone.tests] == want
    assert phone.tests[-1].input == want[-1][0] and len(phone.tests[:5]) == 5
    assert len(phone.references) == 505 and len(phone.metadata["incorrect"]) == 172
    assert phone.references[0] == [s for lang, s in zip(row["solutions"]["language"],
                                                         row["solutions"]["solution"])
                                   if lang == 3][0]
    job = phone.job(phone.references[:1])
    assert len(job["tests"]) == 179 and job["time_limit_s"] == 2.0


def test_every_format_loads_the_same_tasks(sample, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    jsonl = tmp_path / "cc.jsonl"
    shutil.copy(SAMPLE, jsonl)
    gz = tmp_path / "cc.jsonl.gz"
    with gzip.open(gz, "wt") as f:
        f.write(SAMPLE.read_text())
    js = tmp_path / "cc.json"
    js.write_text(json.dumps(sample))
    pqt = tmp_path / "cc.parquet"
    pq.write_table(pa.Table.from_pylist(sample), pqt, row_group_size=3)  # 3 row groups
    loads = {p.suffix: load_tasks("codecontests", p) for p in (jsonl, gz, js, pqt)}
    assert isinstance(loads[".parquet"][6].tests, RowField)
    assert isinstance(loads[".gz"][6].tests, list)  # cannot be re-read in place
    ref = loads[".jsonl"]
    for suffix, ts in loads.items():
        assert [t.id for t in ts] == [t.id for t in ref], suffix
        for t, r in zip(ts, ref):
            assert list(t.tests) == list(r.tests), (suffix, t.id)
            assert list(t.references) == list(r.references), (suffix, t.id)
            assert (t.time_limit_s, t.memory_limit_mb) == (r.time_limit_s, r.memory_limit_mb)


def test_gold_test_kinds_and_one_line_errors(tmp_path):
    need_data(SAMPLE)
    private = load_tasks("codecontests", SAMPLE, gold="private")
    assert [t.id for t in private] == [PHONE, "1081_G. Mergesort Strikes Back"]
    assert private.n_tests == 95 + 124
    assert f"refused: 6 without gold tests ({', '.join(CODECHEF)})" in private.summary()
    assert load_tasks("codecontests", SAMPLE, gold="public,generated")[6].metadata[
        "test_counts"]["generated"] == 81
    with pytest.raises(LoaderError) as e:
        load_tasks("codecontests", SAMPLE, gold="private", strict=True)
    assert str(e.value) == ("codecontests record 0 (brcktsrm): no gold tests (private is "
                            "empty); choose other --gold_tests or drop the row")
    with pytest.raises(LoaderError, match="--gold_tests: unknown kind 'hidden'; choose from "
                                          "public, private, generated"):
        load_tasks("codecontests", SAMPLE, gold="private,hidden")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"name": "p", "description": "d",
                               "generated_tests": {"input": ["1"], "output": []}}) + "\n")
    with pytest.raises(LoaderError, match=r"record 0 \(p\) generated_tests: 1 inputs but 0"):
        load_tasks("codecontests", bad, strict=True)
    assert "1 inputs but 0" in load_tasks("codecontests", bad).skipped[0]  # skipped, counted


# ---- validate: a constructed row whose answers are known ----------------------------------------
DOUBLE = "print(2 * int(input()))"
DOUBLE_SLOW = "import time\nn = int(input())\nwhile n == 7:\n    pass\nprint(2 * n)"
DOUBLE_LOOSE = "n = int(input())\nprint(2 * n if n >= 0 else 0)"  # right only within n >= 0
WRONG = "print(int(input()) + 2)"
DOUBLE_CLAMP = "n = int(input())\nprint(max(0, 2 * n))"  # right only within n >= 0 too


def cc_row(name, **over):
    row = {"name": name, "description": "Print 2n (0 <= n <= 100).", "source": 2,
           "difficulty": 1, "cf_contest_id": 1, "cf_index": "A", "cf_points": 0.0,
           "cf_rating": 800, "cf_tags": [], "is_description_translated": False,
           "untranslated_description": "",
           "public_tests": {"input": ["1\n"], "output": ["2\n"]},
           "private_tests": {"input": ["5\n", "0\n"], "output": ["10\n", "0\n"]},
           # 0: right; 1: outside the constraints (n < 0), the correct solutions disagree;
           # 2: expected output wrong; 3: right, but one correct solution is too slow on it
           "generated_tests": {"input": ["9\n", "-4\n", "3\n", "7\n"],
                               "output": ["18\n", "-8\n", "7\n", "14\n"]},
           "solutions": {"language": [3, 3, 3, 2, 3, 3],
                         "solution": [DOUBLE, DOUBLE_LOOSE, DOUBLE_SLOW, "int main(){}", WRONG,
                                      DOUBLE_CLAMP]},
           "incorrect_solutions": {"language": [3], "solution": [WRONG]},
           "time_limit": {"seconds": 1, "nanos": 0}, "memory_limit_bytes": 256 << 20,
           "input_file": "", "output_file": ""}
    row.update(over)
    return row


@pytest.mark.slow
def test_validate_drops_what_trusted_solutions_disagree_with(tmp_path, executor):
    """The reference failing a private test (WRONG, listed among the solutions) decides
    nothing; two references disputing the output (wrong answer) drop a test, a timeout does not;
    rows that cannot be validated are copied with the reason."""
    src = tmp_path / "cc.jsonl"
    rows = [cc_row("1_A"), cc_row("2_B", solutions={"language": [1], "solution": ["print 1"]}),
            cc_row("3_C", generated_tests={"input": [], "output": []})]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = check_tasks(load_tasks("codecontests", src), executor)
    one_by_one = check_tasks(load_tasks("codecontests", src), executor, batch=1)
    assert [p.to_dict() for p in one_by_one.per_problem] == [p.to_dict()
                                                              for p in before.per_problem]
    p = before.per_problem[0]
    assert (p.references, p.references_passed, p.incorrect, p.incorrect_failed) == (5, 0, 1, 1)
    assert before.per_problem[1].skipped == "Python 2 solutions only (1)"
    out = tmp_path / "clean.jsonl"
    report = validate_codecontests(src, out, executor)
    v = report[0]
    assert (v.references, v.trusted, v.dropped) == (5, 4, [1, 2]), v.line()
    assert v.disagreeing == {1: 2, 2: 4} and v.slow == {3: 1} and v.contested == []
    assert v.disputed_by == {1: {"python": 2}, 2: {"python": 4}} and v.deciding() == ["python"]
    assert report[1].skipped == "Python 2 solutions only"
    assert report[2].skipped == "no generated tests"
    cleaned = [json.loads(x) for x in out.read_text().splitlines()]
    assert cleaned[0]["generated_tests"] == {"input": ["9\n", "7\n"], "output": ["18\n", "14\n"]}
    assert cleaned[0]["coevo_validation"]["dropped"] == [1, 2]
    assert {k: v for k, v in cleaned[1].items() if k != "coevo_validation"} == rows[1]
    ts = load_tasks("codecontests", out)
    assert ts[0].metadata["validation"]["trusted"] == 4 and len(ts[0].tests) == 5
    from coevo_code.training.run import _load  # what the trainer reads tasks_path with
    assert [len(t.tests) for t in _load("codecontests", str(out), None, None, 0, "tasks")] \
        == [5, 7, 3]
    after = check_tasks(ts, executor, references=1)
    assert after.per_problem[0].references_passed == 1
    with pytest.raises(LoaderError, match="is the input file"):
        validate_codecontests(src, src, executor)


@pytest.mark.slow
def test_check_and_validate_commands(tmp_path):
    src = tmp_path / "cc.jsonl"
    src.write_text(json.dumps(cc_row("1_A")) + "\n")
    base = [sys.executable, "-m", "coevo_code.cli", "tasks"]
    p = subprocess.run(base + ["check", "codecontests", "--path", str(src), "-q", "-v",
                               "--references", "1", "--report", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr[-800:]  # the generated tests fail the reference
    assert "1_A: 0/1 references pass all 7 tests; 1/1 incorrect solutions fail; failed " \
           "tests: generated 2 (1: wrong_answer 1)" in p.stdout, p.stdout
    assert json.loads((tmp_path / "r.json").read_text())["problems"][0]["references"] == 1
    clean = tmp_path / "clean.jsonl"
    p = subprocess.run(base + ["validate", "codecontests", "--path", str(src), "-o", str(clean),
                               "-q"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-800:]
    assert "2 of 4 generated tests dropped in 1 validated rows" in p.stdout
    p = subprocess.run(base + ["check", "codecontests", "--path", str(clean), "-q", "--markdown"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "3/5 reference solutions pass" in p.stdout, p.stdout
    assert "| 1_A | 5 | 3/5 | 1/1 | |" in p.stdout
    p = subprocess.run(base + ["check", "mbpp", "--gold_tests", "private", "-q"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.strip() == "coevo: --gold_tests applies to codecontests"


MEMO = ('s = input().strip()\n'
        'print(2469135780246912 if s == "1234567890123456" else 2 * int(s) if int(s) < 5 else 0)')


def test_a_solution_holding_the_private_inputs_decides_nothing(tmp_path, executor):
    """A "correct" solution that compares the input with a private test's and prints its answer
    (1060_A has one) passes the setters' tests but is wrong elsewhere: its disagreement on a
    generated test drops nothing. Inputs in comments do not count."""
    from coevo_code.tasks.validate import memorizes
    assert memorizes(MEMO, ["1234567890123456\n"])
    assert not memorizes("# tried 1234567890123456\nprint(1)", ["1234567890123456\n"])
    assert not memorizes(MEMO, ["123456789012345\n"])  # shorter than 16: not evidence
    row = cc_row("9_Z", private_tests={"input": ["1234567890123456\n"],
                                       "output": ["2469135780246912\n"]},
                 generated_tests={"input": ["7\n"], "output": ["14\n"]},
                 solutions={"language": [3, 3], "solution": [DOUBLE, MEMO]})
    src, out = tmp_path / "cc.jsonl", tmp_path / "clean.jsonl"
    src.write_text(json.dumps(row) + "\n")
    v = validate_codecontests(src, out, executor)[0]
    assert (v.memorizing, v.trusted, v.dropped) == ([1], 1, []), v.line()
    assert "1 solutions hold public/private inputs verbatim" in v.line()


def test_a_hub_split_is_read_by_index_from_arrow(sample, monkeypatch):
    """The hub path (no network here): ``datasets.load_dataset`` answers with an Arrow-backed
    split of the real rows; tasks re-read their row by index and match the file's."""
    datasets = pytest.importorskip("datasets")
    asked = []

    def fake_load(*args, split=None, **kw):
        asked.append((args, split))
        return datasets.Dataset.from_list(sample)

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    hub = load_tasks("codecontests", split="train")
    assert asked == [(("deepmind/code_contests",), "train")] and hub.origin.startswith("hub:")
    ref = load_tasks("codecontests", SAMPLE)
    assert isinstance(hub[6].tests, RowField)
    for t, r in zip(hub, ref):
        assert t.id == r.id and list(t.tests) == list(r.tests)
        assert list(t.references) == list(r.references)


def test_a_row_reading_input_txt_runs_with_files(tmp_path, executor):
    file_double = ("n = int(open('input.txt').read())\n"
                   "open('output.txt', 'w').write(str(2 * n))")
    rows = [cc_row("7_F", input_file="input.txt", output_file="output.txt",
                   generated_tests={"input": [], "output": []},
                   solutions={"language": [3], "solution": [file_double]},
                   incorrect_solutions={"language": [3], "solution": [DOUBLE]}),
            cc_row("8_G", input_file="data.in", output_file="data.out")]
    src = tmp_path / "cc.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ts = load_tasks("codecontests", src)
    assert [t.input_mode for t in ts] == ["file", "stdio"]
    assert "1 reading input.txt / writing output.txt (7_F)" in ts.summary()
    assert "1 with other file names (run as stdio) (8_G)" in ts.summary()
    p = check_tasks(ts, executor).per_problem[0]
    assert (p.references_passed, p.incorrect_failed) == (1, 1)  # stdout is not its answer


CPP_DOUBLE = "#include <cstdio>\nint main(){int n; scanf(\"%d\",&n); printf(\"%d\\n\",2*n);}"
CPP_WRONG = "#include <cstdio>\nint main(){int n; scanf(\"%d\",&n); printf(\"%d\\n\",n+n+(n>4));}"
JAVA_DOUBLE = ("import java.util.*;\npublic class Main { public static void main(String[] a) {"
               " System.out.println(2 * new Scanner(System.in).nextInt()); } }")
JAVA_WRONG = ("public class Main { public static void main(String[] a) throws Exception {"
              " System.out.println(System.in.read() - '0'); } }")


def test_check_runs_cpp_and_java_solutions(tmp_path, executor):
    """--languages: the row's C++ and Java solutions and incorrect solutions are kept and run,
    counted per language; a C++ reference that does not compile fails with compile_error; the
    default (Python) loads and checks exactly as before."""
    if not all(executor.languages().get(lang, (False,))[0] for lang in ("cpp", "java")):
        pytest.skip("no C++ or Java toolchain here")
    src = tmp_path / "cc.jsonl"
    row = cc_row("1_A", generated_tests={"input": ["9\n"], "output": ["18\n"]},
                 solutions={"language": [3, 2, 2, 4], "solution": [
                     DOUBLE, CPP_DOUBLE, "int main( {", JAVA_DOUBLE]},
                 incorrect_solutions={"language": [3, 2, 4],
                                      "solution": [WRONG, CPP_WRONG, JAVA_WRONG]})
    src.write_text(json.dumps(row) + "\n")
    plain = load_tasks("codecontests", src)
    assert "native_references" not in plain[0].metadata
    py = check_tasks(plain, executor)
    assert (py.checked, py.passed) == (1, 1) and "languages" not in py.per_problem[0].to_dict()
    ts = load_tasks("codecontests", src, languages="python,cpp,java")
    native = ts[0].metadata["native_references"]
    assert (len(native["cpp"]), len(native["java"])) == (2, 1)
    rep = check_tasks(ts, executor, languages=("python", "cpp", "java"))
    p = rep.per_problem[0]
    assert p.languages == {"python": {"references": 1, "passed": 1, "incorrect": 1, "failed": 1},
                           "cpp": {"references": 2, "passed": 1, "incorrect": 1, "failed": 1},
                           "java": {"references": 1, "passed": 1, "incorrect": 1, "failed": 1}}
    assert (rep.checked, rep.passed) == (4, 3) and p.failing_references == ["cpp 1"]
    assert p.failures["public 0"] == {"compile_error": 1}
    assert "cpp 1/2, incorrect failing 1/1" in p.line()
    with pytest.raises(LoaderError, match="languages must be among python, cpp, java, got go"):
        load_tasks("codecontests", src, languages="python,go")
