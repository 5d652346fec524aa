"""open-r1/codeforces: checkers run the way open-r1 runs them, file input, interactive problems
refused, configurations. Rows are written in the dataset's exact schema (no real row of it is
available here, ../shared/data/README.md)."""

from __future__ import annotations

import json

import pytest

from coevo_code.execution.jobs import JobError, parse_job
from coevo_code.tasks import LoaderError, check_tasks, load_tasks
from conftest import executor_fixture

executor = executor_fixture(docker=False)

# A checker the way open-r1's generated checkers are written: a script reading the three files
# named on its command line and printing 1 or 0. Any pair (a, b) with a + b = n and a, b >= 1 is
# right; the reference answer is one of them.
PAIR_CHECKER = """\
import sys

def main():
    with open(sys.argv[1]) as f:
        n = int(f.read().split()[0])
    with open(sys.argv[2]) as f:
        ref = f.read().split()
    with open(sys.argv[3]) as f:
        got = f.read().split()
    assert len(ref) == 2
    if len(got) != 2:
        print(0)
        return
    a, b = int(got[0]), int(got[1])
    print(1 if a >= 1 and b >= 1 and a + b == n else 0)

if __name__ == "__main__":
    main()
"""
PAIR_LOW = "n = int(input())\nprint(1, n - 1)"
PAIR_HIGH = "n = int(input())\nprint(n - 1, 1)"
PAIR_WRONG = "n = int(input())\nprint(0, n)"
DOUBLE_FILE = ("with open('input.txt') as f:\n    n = int(f.read())\n"
               "with open('output.txt', 'w') as f:\n    f.write(str(2 * n))")


def row(pid, **over):
    base = {"id": pid, "aliases": None, "contest_id": pid.split("/")[0], "contest_name": "c",
            "contest_type": "CF", "contest_start": 0, "contest_start_year": 2020,
            "index": pid.split("/")[1], "time_limit": 1.0, "memory_limit": 256.0,
            "title": "Pairs", "description": "Given n, print two positive integers summing to n.",
            "input_format": "One integer n (2 <= n <= 100).", "output_format": "Two integers.",
            "interaction_format": None, "note": None,
            "examples": [{"input": "5\n", "output": "1 4\n"}], "editorial": None, "rating": 800,
            "tags": ["math"], "testset_size": 3,
            "official_tests": [{"input": "5\n", "output": "1 4\n"},
                               {"input": "2\n", "output": "1 1\n"},
                               {"input": "100\n", "output": "50 50\n"}],
            "official_tests_complete": True, "input_mode": "stdio",
            "generated_checker": PAIR_CHECKER, "executable": True, "generated_tests": 0}
    base.update(over)
    return base


@pytest.fixture
def cf_file(tmp_path):
    rows = [row("1/A"),
            row("2/A", title="Doubling", description="Read n from input.txt, write 2n to "
                "output.txt.", input_mode="file", generated_checker=None,
                examples=[{"input": "4\n", "output": "8\n"}],
                official_tests=[{"input": "4\n", "output": "8\n"},
                                {"input": "21\n", "output": "42\n"}]),
            row("3/E", title="Guess", description="This is an interactive problem. Guess x.",
                interaction_format="Print '? y' to ask; the jury answers < or >."),
            row("4/B", official_tests=[], examples=[], executable=False),
            row("5/C", executable=False, official_tests_complete=False)]
    path = tmp_path / "cf.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_load_report_refuses_interactive_and_testless_rows_by_name(cf_file):
    ts = load_tasks("codeforces", cf_file)
    assert [t.id for t in ts] == ["1/A", "2/A", "5/C"]
    s = ts.summary()
    assert "refused: 1 interactive (3/E); 1 without tests (4/B)" in s, s
    assert "1 reading input.txt / writing output.txt (2/A)" in s
    assert "1 with incomplete official tests (5/C)" in s
    assert ts[1].input_mode == "file" and ts[0].needs_checker and ts[0].checker
    verifiable = load_tasks("codeforces", cf_file, config="verifiable")
    assert [t.id for t in verifiable] == ["1/A", "2/A"]
    assert "2 not verifiable (4/B, 5/C)" in verifiable.summary()


def test_one_line_errors(cf_file, tmp_path):
    with pytest.raises(LoaderError) as e:
        load_tasks("codeforces", cf_file, strict=True)
    assert str(e.value) == ("codeforces record 2 (3/E): interactive problem (it talks with an "
                            "interactor that the dataset does not publish): refused, no verdict "
                            "can be computed")
    with pytest.raises(LoaderError, match="unknown --dataset_config 'verified'; choose from default, "
                                          "verifiable"):
        load_tasks("codeforces", cf_file, config="verified")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(row("6/A", input_mode="pipe")) + "\n")
    with pytest.raises(LoaderError, match=r"record 0 \(6/A\): input_mode 'pipe'"):
        load_tasks("codeforces", bad, strict=True)
    assert "input_mode 'pipe'" in load_tasks("codeforces", bad).skipped[0]  # skipped, counted


def test_generated_checker_decides_in_the_sandbox(cf_file, executor):
    """Both right answers pass although neither matches the reference output of every test;
    a wrong one fails; without the checker exact matching would fail the right ones."""
    t = load_tasks("codeforces", cf_file)[0]
    res = executor.run([t.job([PAIR_LOW, PAIR_HIGH, PAIR_WRONG]),
                        {**t.job([PAIR_LOW, PAIR_HIGH]), "checker": None}])
    assert res[0]["passed"] == [[True] * 3, [True] * 3, [False] * 3], res[0]
    assert res[0]["outcomes"][2] == ["wrong_answer"] * 3
    assert res[1]["passed"] == [[True, True, False], [False, True, False]]


@pytest.mark.parametrize("script, ok", [
    ("print(1)", True),
    ("print(100)", True),               # the piston run script accepts 100 too
    ("print('1\\n')", True),            # whitespace is removed before comparing
    ("print(0)", False),
    ("print(1); raise SystemExit(3)", False),  # open-r1 also needs exit status 0
    ("print(1); raise ValueError", False),
    ("import sys; sys.stdout.write('1'); sys.exit(0)", True),
    ("import os; os.write(1, b'1')", True),  # the real stdout, not only sys.stdout
    ("print('ok')", False),
])
def test_checker_verdict_convention(script, ok, executor):
    job = {"programs": ["print(input())"], "tests": [{"input": "7\n", "output": "7\n"}],
           "checker": script, "checker_convention": "files"}
    assert executor.run([job])[0]["passed"] == [[ok]], script


def test_checker_sees_the_normalized_files(executor):
    """Input and correct output without \\r, empty lines dropped from both outputs, as the
    piston run script prepares them; the paths come as argv[1..3]."""
    script = ("import sys\nfiles = [open(p).read() for p in sys.argv[1:4]]\n"
              "print(1 if files == ['a b\\nc\\n', 'x\\ny\\n', 'x\\ny\\n'] else 0)")
    job = {"programs": ["print('x'); print(); print('y')"],
           "tests": [{"input": "a b\r\nc\r\n", "output": "x\r\n\r\ny\r\n"}],
           "checker": script, "checker_convention": "files"}
    assert executor.run([job])[0]["passed"] == [[True]]


def test_file_input_problem(cf_file, executor):
    """A program reading input.txt and writing output.txt passes; one answering on stdout
    fails (its stdout is not its answer, as on the judge); a file left unclosed is flushed."""
    t = load_tasks("codeforces", cf_file)[1]
    unclosed = "n = int(open('input.txt').read())\nf = open('output.txt', 'w')\nf.write(str(2 * n))"
    noisy = "print('debug')\n" + DOUBLE_FILE
    stdout_only = "print(2 * int(input()))"
    crash = DOUBLE_FILE + "\nraise SystemExit(1)"
    res = executor.run([t.job([DOUBLE_FILE, unclosed, noisy, stdout_only, crash, "print(("])])[0]
    assert res["passed"] == [[True, True]] * 3 + [[False, False]] * 3, res
    assert res["outcomes"][4] == ["runtime_error"] * 2
    assert res["outcomes"][5] == ["syntax_error"] * 2
    assert check_tasks(load_tasks("codeforces", cf_file), executor).per_problem[0].skipped


def test_file_mode_never_compiles_a_hash_flood_on_the_host(monkeypatch):
    """parse_job wraps file-mode programs on the host (unsandboxed, no CPU limit, holding the
    GIL): a program of colliding constants, whose compile costs quadratic time, is wrapped
    without being compiled there (its cell compiles it, on its own budget); others are still
    compiled, so that one only compile() rejects keeps its syntax_error."""
    from coevo_code.execution import fileio
    compiled = []

    def spy(src, *a, **k):
        compiled.append(src)
        return compile(src, *a, **k)

    monkeypatch.setattr(fileio, "compile", spy, raising=False)
    flood = "xs = [%s]\nprint(len(xs))" % ", ".join(str(k * (2 ** 61 - 1))
                                                  for k in range(1, 3001))
    job = parse_job({"programs": [flood, "print(1)", "return 0"], "input_mode": "file",
                     "tests": [{"input": "", "output": "1"}]})
    assert len(compiled) == 2 and "return 0" in job.programs  # all but the flood
    assert job.programs[0] != flood and repr(flood) in job.programs[0]
    assert job.programs[1] != "print(1)"


def test_job_schema_refuses_bad_values():
    with pytest.raises(JobError, match="'input_mode' must be 'stdio' or 'file', got 'pipe'"):
        parse_job({"programs": [], "input_mode": "pipe"})
    with pytest.raises(JobError, match="'checker_convention' 'files' needs a 'checker'"):
        parse_job({"programs": [], "checker_convention": "files"})
    with pytest.raises(JobError, match="stdio jobs only"):
        parse_job({"kind": "functional", "programs": [], "input_mode": "file"})


def test_the_configuration_goes_to_the_hub(cf_file, monkeypatch):
    """From the hub (no network here: ``datasets.load_dataset`` answers with an Arrow split of
    the fixture rows) the configuration is the dataset's own; rows are re-read by index."""
    datasets = pytest.importorskip("datasets")
    rows = [json.loads(x) for x in cf_file.read_text().splitlines()]
    asked = []

    def fake_load(*args, split=None, **kw):
        asked.append((args, split))
        return datasets.Dataset.from_list(rows)

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    ts = load_tasks("codeforces", split="test", config="verifiable")
    assert asked == [(("open-r1/codeforces", "verifiable"), "test")]
    # the hub's configuration already selected its rows: no local filter (5/C stays)
    assert [t.id for t in ts] == ["1/A", "2/A", "5/C"]
    assert [(x.input, x.output) for x in ts[1].tests] == [("4\n", "8\n"), ("21\n", "42\n")]
    assert list(reversed(ts[1].tests))[0].input == "21\n"


# ---- submissions (open-r1/codeforces-submissions) as references and incorrect solutions -------
CPP_PAIR = ('#include <cstdio>\nint main(){int n; scanf("%d",&n); printf("%d %d\\n", ARGS);}')
JAVA_PAIR = ("import java.util.*;\npublic class Main { public static void main(String[] a) {\n"
             " int n = new Scanner(System.in).nextInt(); System.out.println(1 + \" \" + (n - 1));"
             " } }\n")


def submission(k, pid, lang, verdict, source):
    contest, index = pid.split("/")
    return {"submission_id": str(1000 + k), "source": source, "contestId": contest,
            "problem_index": index, "programmingLanguage": lang, "verdict": verdict,
            "testset": "TESTS", "passedTestCount": 3.0, "timeConsumedMillis": 15.0,
            "memoryConsumedBytes": 0.0, "creationTimeSeconds": 1.6e9, "problem_id": pid}


def test_submissions_are_the_solutions_checked_per_language(cf_file, tmp_path, executor):
    """Accepted submissions are references, wrong ones incorrect solutions, in the sandbox's
    languages; the rest is left out and counted; the checker decides native programs too."""
    if not executor.languages()["cpp"][0] or not executor.languages()["java"][0]:
        pytest.skip("no C++ or Java toolchain in this sandbox")
    cpp = {k: CPP_PAIR.replace("ARGS", v) for k, v in (("low", "1, n - 1"), ("high", "n - 1, 1"),
                                                       ("wrong", "0, n"))}
    subs = [("GNU C++17", "OK", cpp["low"]), ("Java 11", "OK", JAVA_PAIR),
            ("PyPy 3-64", "OK", PAIR_HIGH), ("GNU C++20 (64)", "OK", cpp["high"]),
            ("GNU C++17", "WRONG_ANSWER", cpp["wrong"]),
            ("Python 3", "TIME_LIMIT_EXCEEDED", PAIR_WRONG),
            ("GNU C++17", "COMPILATION_ERROR", "int main( {"), ("Kotlin 1.7", "OK", "fun main"),
            ("GNU C11", "OK", "int main(){}")]
    path = tmp_path / "subs.jsonl"
    path.write_text("".join(json.dumps(submission(k, "1/A", *s)) + "\n"
                            for k, s in enumerate(subs))
                    + json.dumps(submission(99, "9/Z", "GNU C++17", "OK", "x")) + "\n")
    ts = load_tasks("codeforces", cf_file, submissions=path, languages="python,cpp,java")
    t = next(t for t in ts if t.id == "1/A")
    assert t.references == [PAIR_HIGH] and t.metadata["incorrect"] == [PAIR_WRONG]
    assert [len(t.metadata["native_references"][k]) for k in ("cpp", "java")] == [2, 1]
    assert t.metadata["native_incorrect"] == {"cpp": [cpp["wrong"]], "java": []}
    assert "3 kinds of submissions left out (3 submissions)" in ts.summary(), ts.summary()
    report = check_tasks(ts, executor, languages=("python", "cpp", "java"))
    p = next(p for p in report.per_problem if p.id == "1/A")
    assert (p.references, p.references_passed, p.incorrect, p.incorrect_failed) == (4, 4, 2, 2)
    assert p.languages["cpp"] == {"references": 2, "passed": 2, "incorrect": 1, "failed": 1}
    with pytest.raises(LoaderError, match="--languages needs --submissions"):
        load_tasks("codeforces", cf_file, languages="cpp")
    cpp_only = load_tasks("codeforces", cf_file, submissions=path, languages="cpp")
    assert next(t for t in cpp_only if t.id == "1/A").references == []
