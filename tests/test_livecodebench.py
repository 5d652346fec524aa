"""LiveCodeBench and LiveBench: loaded as their users load them (the hub repository's jsonl files
by release, through huggingface_hub's cache, a folder laid out the same way, or files), private
tests decoded without running anything, and graded as LiveCodeBench's own grader grades (checked
sample by sample against ``nvidia-livecodebench``'s ``run_test`` on a seeded subset)."""

from __future__ import annotations

import base64
import json
import os
import pickle
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import lcb_agreement as A

from coevo_code.execution import Executor
from coevo_code.tasks import LoaderError, load_tasks
from coevo_code.tasks.livecodebench import FILES, pickled_string

ENV = {**os.environ, "PYTHONPATH": str(HERE.parent), "OMP_NUM_THREADS": "1"}


def coevo(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "coevo_code.cli", *args], capture_output=True,
                          text=True, env={**ENV, **(env or {})}, timeout=timeout)


def _one_line(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr[-1500:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


# ---- a hub-shaped copy: test.jsonl ... test6.jsonl, one release each -----------------------------
def release_rows(i: int) -> list[dict]:
    """Two rows per release file: a stdin one and a LeetCode-style one, dated by release."""
    month = f"2024-{i:02d}"
    return [A.stdin_row(f"s{i}", [("1 2\n", "3\n"), ("2 2\n", "4\n")], date=f"{month}-05T00:00:00",
                        platform="atcoder"),
            {**A.functional_row(f"f{i}", "twoSum", A.TWO_SUM["starter_code"],
                                [([[2, 7], 9], [0, 1]), ([[1, 3], 4], [0, 1])],
                                date=f"{month}-20T00:00:00")}]


def write_repo(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, fname in enumerate(FILES, 1):
        (folder / fname).write_text("".join(json.dumps(r) + "\n" for r in release_rows(i)))
    return folder


@pytest.fixture
def hub_cache(tmp_path):
    """A huggingface_hub cache holding the repository as hf_hub_download stores it
    (refs/main -> snapshots/<commit>/test*.jsonl), for HF_HUB_OFFLINE=1 runs."""
    repo = tmp_path / "hub" / "datasets--livecodebench--code_generation_lite"
    commit = "0" * 40
    write_repo(repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1"}


@pytest.mark.slow
def test_hub_path_by_release_through_huggingface_hub(hub_cache):
    """No --data: the files of the release come through hf_hub_download (from its cache,
    offline); cumulative releases take test.jsonl ... testN.jsonl, single ones testN.jsonl."""
    p = coevo("tasks", "check", "livecodebench", "--release", "release_v3", "-q", env=hub_cache)
    assert p.returncode == 0, p.stderr[-1500:]
    assert "livecodebench/release_v3: 6 problems, 12 gold tests" in p.stdout
    assert "from hub:livecodebench/code_generation_lite" in p.stdout
    p = coevo("tasks", "check", "livecodebench", "--release", "v5", "--platform", "leetcode",
              "-q", env=hub_cache)
    assert p.returncode == 0, p.stderr[-1500:]
    assert "livecodebench/v5 (leetcode): 1 problems" in p.stdout
    assert "1 on other platforms" in p.stdout
    # a release whose file the cache lacks (offline): one line naming the way out
    (Path(hub_cache["HF_HUB_CACHE"]) / "datasets--livecodebench--code_generation_lite" /
     "snapshots" / ("0" * 40) / "test6.jsonl").unlink()
    line = _one_line(coevo("tasks", "check", "livecodebench", env=hub_cache))
    assert "cannot get test6.jsonl of livecodebench/code_generation_lite" in line
    assert "--data DIR" in line


def test_release_names_are_the_loading_scripts():
    """code_generation_lite.py's ALLOWED_FILES: release_vN cumulative, release_latest = all six,
    vN one file, vA_vB the files A..B: 6 + 1 + 6 + 15 names."""
    from coevo_code.tasks.livecodebench import RELEASES
    assert len(RELEASES) == 28
    assert RELEASES["release_latest"] == RELEASES["release_v6"] == RELEASES["v1_v6"] == FILES
    assert RELEASES["release_v1"] == RELEASES["v1"] == ["test.jsonl"]
    assert RELEASES["v3_v5"] == ["test3.jsonl", "test4.jsonl", "test5.jsonl"]


def test_folder_files_release_window_and_platform(tmp_path):
    repo = write_repo(tmp_path / "repo")
    ids = lambda **kw: [t.id for t in load_tasks("livecodebench", str(repo), **kw)]
    assert ids() == [f"{k}{i}" for i in range(1, 7) for k in "sf"]  # release_latest
    assert ids(release="release_v2") == ["s1", "f1", "s2", "f2"]
    assert ids(release="v4") == ["s4", "f4"]
    assert ids(release="v2_v3") == ["s2", "f2", "s3", "f3"]
    assert ids(start_date="2024-02-10", end_date="2024-03-31") == ["f2", "s3", "f3"]
    assert ids(platform="atcoder", end_date="2024-02-28") == ["s1", "s2"]
    ts = load_tasks("livecodebench", str(repo), start_date="2024-06-01", platform="leetcode")
    assert [t.id for t in ts] == ["f6"]
    assert ts.summary().endswith("; 10 outside the date window; 1 on other platforms")
    # several local files: as a list, or joined by commas (no --release then)
    files = [str(repo / "test2.jsonl"), str(repo / "test5.jsonl")]
    assert [t.id for t in load_tasks("livecodebench", files)] == ["s2", "f2", "s5", "f5"]
    assert len(load_tasks("livecodebench", ",".join(files))) == 4
    assert [t.id for t in load_tasks("livecodebench", files, release="release_v3")] == [
        "s2", "f2"]  # files named as the hub's: the release picks among them
    with pytest.raises(LoaderError, match="none of the files given is in release v1"):
        load_tasks("livecodebench", files, release="v1")
    (repo / "mine.jsonl").write_text((repo / "test.jsonl").read_text())
    with pytest.raises(LoaderError, match="mine.jsonl is not one: leave --release out"):
        load_tasks("livecodebench", [str(repo / "mine.jsonl")], release="v1")
    # both ends included, as lcb_runner's --start_date/--end_date: the end date is its midnight
    assert ids(start_date="2024-01-05", end_date="2024-01-05") == ["s1"]
    late = {**A.stdin_row("late", [("1 2\n", "3\n")]), "contest_date": "2024-01-05T18:30:00"}
    _write(repo / "test.jsonl", release_rows(1) + [late])
    assert ids(release="v1", end_date="2024-01-05") == ["s1"]
    assert ids(release="v1", start_date="2024-01-05", end_date="2024-01-06") == ["s1", "late"]
    with pytest.raises(LoaderError, match="lacks test6.jsonl"):
        (repo / "test6.jsonl").unlink()
        load_tasks("livecodebench", str(repo), release="release_v6")


def test_six_seconds_prelude_and_checker_by_default(tmp_path):
    ts = load_tasks("livecodebench", [str(write_repo(tmp_path / "r") / "test.jsonl")])
    stdio, func = ts[0], ts[1]
    assert stdio.time_limit_s == func.time_limit_s == 6.0
    job = stdio.job(["import os\nprint(3)"])
    assert job["time_limit_s"] == 6.0 and job["wall_limit_s"] <= 6.5
    # the prelude, the program's imports, the rest in the grader's wrapper, SystemExit caught
    assert job["programs"][0].endswith(
        "sys.setrecursionlimit(50000)\nimport os\ndef wrapped_function():\n    print(3)\n\n"
        "__name__ = 'tmp_sol'\ntry:\n    wrapped_function()\nexcept SystemExit:\n    pass\n")
    assert func.job(["x = 1"])["programs"][0].endswith("(50000)\nx = 1")  # LeetCode: unwrapped
    assert "Decimal" in job["checker"]
    assert func.kind == "functional" and func.entry_point == "twoSum"
    from coevo_code.roles import parse_program
    top = "def twoSum(nums, target):\n    return [0, 1]\n"  # graded too, as LiveCodeBench does
    assert parse_program(f"```python\n{top}```", func).code == top
    assert not parse_program("```python\ndef other(x):\n    return x\n```", func).ok


@pytest.mark.slow
def test_flags_on_eval_and_rank(tmp_path):
    """--release/--start-date/--end-date/--platform on `coevo eval` (scoring samples) and
    `coevo rank`; an unknown release is one line listing the valid names."""
    repo = write_repo(tmp_path / "repo")
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "s3", "solution": "a, b = map(int, input().split())"
                                                                "\nprint(a + b)"}) + "\n")
    p = coevo("eval", "--benchmark", "livecodebench", "--data", str(repo), "--release",
              "release_v4", "--start-date", "2024-03-01", "--platform", "atcoder", "--samples",
              str(samples), "-o", str(tmp_path / "o"), "-q")
    assert p.returncode == 0, p.stderr[-1500:]
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["benchmark"].startswith("livecodebench/release_v4 [2024-03-01, ...] (atcoder)")
    assert res["pass@1"] == 1.0 and res["tasks_without_samples"] == 1  # s3 and s4
    line = _one_line(coevo("eval", "--benchmark", "livecodebench", "--data", str(repo),
                           "--release", "release_v9", "--samples", str(samples), "-o",
                           str(tmp_path / "x")))
    assert line == ("coevo: livecodebench: unknown release 'release_v9'; choose from release_v1, "
                    "release_v2, release_v3, release_v4, release_v5, release_v6, release_latest, "
                    "v1, v2, v3, v4, v5, v6 (or a range such as v2_v4)")
    items = tmp_path / "rank.jsonl"
    items.write_text(json.dumps({"id": "s1", "solutions": ["print(3)", "print(4)"]}) + "\n")
    line = _one_line(coevo("rank", str(items), "--benchmark", "livecodebench", "--data",
                           str(repo), "--platform", "topcoder"))
    assert "--platform: unknown topcoder; choose from leetcode, atcoder, codeforces" in line


# ---- private tests: decoded without running anything ---------------------------------------------
class Boom:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ.get('BOOM_FILE', '/tmp/never')}",))


def _blob(obj) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(obj))).decode()


def test_tampered_private_tests_are_refused_without_running(tmp_path, monkeypatch):
    flag = tmp_path / "ran"
    monkeypatch.setenv("BOOM_FILE", str(flag))
    good = A.stdin_row("q1", [("1 2\n", "3\n"), ("2 2\n", "4\n")])
    assert load_tasks("livecodebench", [str(_write(tmp_path / "ok.jsonl", [good]))])[0].tests
    bad = {**good, "question_id": "abc123", "private_test_cases": _blob(Boom())}
    path = _write(tmp_path / "bad.jsonl", [good, bad])
    line = _one_line(coevo("tasks", "check", "livecodebench", "--path", str(path),
                           "--strict"))
    assert line.startswith("coevo: livecodebench record 1 (abc123) private_test_cases: refused "
                           "without running it: the pickle holds opcode")
    assert not flag.exists()
    for obj, why in (([{"input": "1", "output": "1"}], "opcode EMPTY_LIST"),
                     (b"[]", "opcode SHORT_BINBYTES"), (("[]", "x"), "opcode TUPLE2")):
        with pytest.raises(LoaderError, match=why):
            load_tasks("livecodebench", [str(_write(tmp_path / "b.jsonl",
                                                    [{**good, "private_test_cases": _blob(obj)}]))],
                       strict=True)
    assert not flag.exists()


def test_pickled_string_reads_opcodes_only():
    for proto in range(0, 6):
        assert pickled_string(pickle.dumps("[1]", protocol=proto)) == "[1]"
    with pytest.raises(ValueError, match="bytes after"):
        pickled_string(pickle.dumps("a") + b"junk")
    with pytest.raises(ValueError, match="not a valid pickle"):
        pickled_string(pickle.dumps("abc")[:-3])
    with pytest.raises(ValueError, match="opcode"):
        pickled_string(pickle.dumps(Boom()))
    big = "x" * 200_000  # written unframed by protocol 4: PROTO BINUNICODE MEMOIZE STOP
    assert pickled_string(pickle.dumps(big, protocol=4)) == big
    one = pickle.dumps("[1]", protocol=4)
    for odd, why in ((one[:2] + one, "not those of one pickled string"),  # PROTO twice
                     (b"\x80\x04\x94X\x03\x00\x00\x00[1].", "not those of one"),  # memo first
                     (pickle.dumps("[1]", protocol=2)[:-1] + b"X\x01\x00\x00\x00a.",
                      "2 strings, not one"),
                     (b"\x80\x02X\x01\x00\x00\x00aq\x00h\x00.", "opcode BINGET"),
                     (b".", "0 strings"),
                     (b"\x80\x04\x8d" + (2 ** 62).to_bytes(8, "little") + b"ab.",
                      "not a valid pickle")):  # a huge length is never allocated
        with pytest.raises(ValueError, match=why):
            pickled_string(odd)


def test_zlib_and_json_tricks_are_one_line_errors():
    from coevo_code.tasks.livecodebench import decode_lcb_tests
    packed = zlib.compress(pickle.dumps('[{"input": "1", "output": "1"}]'))
    b64 = lambda b: base64.b64encode(b).decode()
    assert decode_lcb_tests(b64(packed), "q") == [{"input": "1", "output": "1"}]
    deep = "[" * 100_000 + "]" * 100_000
    for raw, why in ((b64(packed + b"xyz"), "3 bytes after the zlib stream"),
                     (b64(packed[:-6]), "zlib stream is truncated"),
                     (b64(zlib.compress(pickle.dumps(deep))), "nested too deeply"),
                     (deep, "nested too deeply"), ("[{", "the text is not JSON"),
                     ("é" * 8, "neither JSON nor base64"),
                     (json.dumps("[]"), "expected a list of tests, got str")):
        with pytest.raises(LoaderError, match=why) as e:
            decode_lcb_tests(raw, "q")
        assert str(e.value).startswith("q: ") and "\n" not in str(e.value)


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_row_without_tests_is_one_line(tmp_path):
    row = {**A.stdin_row("empty", [("1\n", "1\n")]), "public_test_cases": "[]",
           "private_test_cases": ""}
    with pytest.raises(LoaderError, match=r"record 0 \(empty\): no tests"):
        load_tasks("livecodebench", [str(_write(tmp_path / "e.jsonl", [row]))], strict=True)


def bad_rows_file(tmp_path: Path) -> Path:
    """Rows in the hub's schema: two good ones around three a loader cannot use: private tests
    whose JSON holds a 5,000-digit integer, a stdin test with a lone surrogate (JSON's
    "\\ud800": no byte a program could read), and a line holding a 5,000-digit integer."""
    big = "9" * 5000
    digits = {**A.stdin_row("digits", [("1\n", "1\n"), ("2\n", "2\n")]),
              "private_test_cases": _blob('[{"input": "2\\n", "output": %s, "testtype": '
                                          '"stdin"}]' % big)}
    surrogate = A.stdin_row("surrogate", [("1 2\n", "3\n"), ("1\ud800 2\n", "3\n")])
    line = json.dumps(A.stdin_row("digits_line", [("1\n", "1\n")]))[:-1] + f', "x": {big}}}'
    good = [A.stdin_row("good1", [("1 2\n", "3\n"), ("2 2\n", "4\n")]),
            A.functional_row("good2", "twoSum", A.TWO_SUM["starter_code"],
                             [([[2, 7], 9], [0, 1]), ([[1, 3], 4], [0, 1])])]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([json.dumps(good[0]), json.dumps(digits), json.dumps(surrogate),
                               line, json.dumps(good[1])]) + "\n")
    return path


def test_a_bad_row_is_one_line_or_a_counted_skip_and_the_rest_is_evaluated(tmp_path):
    """Issue 51: a row whose tests hold a 5,000-digit integer ended the load with a ValueError
    traceback (Python's digit limit), and a row with a lone surrogate in a test loaded, had its
    job refused by the executor and then ended scoring with a RuntimeError. Now each is a
    one-line error naming it under --strict, and by default a skipped row the load report counts
    and names, with the rest of the evaluation intact."""
    path = bad_rows_file(tmp_path)
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(4300)  # Python's default: a test before may have lifted it
    try:
        ts = load_tasks("livecodebench", [str(path)])
        with pytest.raises(LoaderError) as e:
            load_tasks("livecodebench", [str(path)], strict=True)
    finally:
        sys.set_int_max_str_digits(old)
    assert [t.id for t in ts] == ["good1", "good2"]
    assert ts.skipped == [
        "livecodebench record 1 (digits) private_test_cases: the pickled string cannot be read: "
        "it holds an integer of more than 4300 digits (Python's limit for reading one); refused",
        "livecodebench record 2 (surrogate): task surrogate: test 1 input holds a lone surrogate "
        "at character 1, which no program can read or print",
        f"livecodebench: {path} line 4: the line cannot be read: it holds an integer of more "
        "than 4300 digits (Python's limit for reading one); refused"]
    assert "3 rows skipped (--strict: an error): livecodebench record 1 (digits)" in ts.summary()
    assert str(e.value) == ts.skipped[0]
    p = coevo("tasks", "check", "livecodebench", "--path", str(path), "--strict")
    lines = [x for x in p.stderr.strip().splitlines() if "sandbox layers inactive" not in x]
    assert p.returncode == 2 and lines == ["coevo: " + ts.skipped[0]], p.stderr
    # the evaluation of the rest: scored samples of the two good rows, the three named
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "good1", "solution": "a, b = map(int, input()"
                                                                   ".split())\nprint(a + b)"})
                       + "\n" + json.dumps({"task_id": "good2", "solution": A.TWO_SUM_OK}) + "\n")
    p = coevo("eval", "--benchmark", "livecodebench", "--data", str(path), "--samples",
              str(samples), "-o", str(tmp_path / "o"), "-q")
    assert p.returncode == 0, p.stderr[-1500:]
    assert "Traceback" not in p.stderr
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["tasks"] == 2 and res["pass@1"] == 1.0 and res["rows_skipped"] == ts.skipped
    assert "- rows_skipped: 3" in (tmp_path / "o" / "results.md").read_text()


# ---- LiveBench ----------------------------------------------------------------------------------
def test_livebench_removal_dates_and_completion_prefix(tmp_path):
    rows = [{**A.livebench_row(A.TWO_SUM, task="coding_completion", partial=A.COMPLETION_PARTIAL),
             "solution": A.TWO_SUM_OK},
            {**A.livebench_row(A.SUM_ROW), "livebench_removal_date": "2024-10-01"},
            {**A.livebench_row(A.PAIR_ROW), "livebench_release_date": "2025-01-01"}]
    path = str(_write(tmp_path / "lb.jsonl", rows))
    ts = load_tasks("livebench", path, livebench_date="2024-11-25")
    assert [t.id for t in ts] == ["lb-two-sum"]
    assert ts.summary().endswith("; 1 removed on or before 2024-11-25 (livebench_removal_date); "
                                 "1 released after 2024-11-25")
    assert [t.id for t in load_tasks("livebench", path, livebench_date="2024-09-01")] == [
        "lb-two-sum", "lb-sum"]
    task = ts[0]
    assert task.time_limit_s == 6.0
    body = task.job([A.COMPLETION_ANSWER])["programs"][0]
    assert body.endswith(A.COMPLETION_PARTIAL + "\n" + A.COMPLETION_ANSWER)
    whole = task.job([A.COMPLETION_PARTIAL + "\n" + A.COMPLETION_ANSWER])["programs"][0]
    assert whole == body  # not prefixed twice
    assert task.references == [A.TWO_SUM_OK]  # `coevo tasks check livebench` runs `solution`


# ---- agreement with the official grader ---------------------------------------------------------
@pytest.mark.slow
def test_agreement_with_the_livecodebench_grader_on_a_seeded_subset():
    """Our verdict equals run_test's on every sample of a seeded subset, except the documented
    on-purpose cases, which differ exactly as docs/EVALUATION.md says."""
    pytest.importorskip("livecodebench.evaluation.testing_util",
                        reason="nvidia-livecodebench (the test extra) is not installed")
    items = A.seeded_subset(A.samples(), k=10, seed=0)
    assert sum(s.name.startswith("real") for s in items) == 2, "the real row is missing"
    with Executor(slots=2) as ex:
        ours = A.our_verdicts(items, ex)
    theirs = A.their_verdicts(items)
    wrong = [(s.name, o, t) for s, o, t in zip(items, ours, theirs)
             if (o == t) == bool(s.on_purpose)]
    assert not wrong, wrong
    assert any(ours) and not all(ours)


def test_tests_that_inflate_past_the_cap_are_refused(monkeypatch):
    from coevo_code.tasks import livecodebench as L
    blob = A.private_blob([{"input": "1\n" * 5000, "output": "1\n", "testtype": "stdin"}])
    assert len(L.decode_lcb_tests(blob, "q")) == 1
    monkeypatch.setattr(L, "MAX_TESTS_BYTES", 4096)
    with pytest.raises(LoaderError, match="q: the tests inflate past"):
        L.decode_lcb_tests(blob, "q")

# ---- coevo train: the same selection, as config fields ------------------------------------------
@pytest.mark.slow
def test_train_config_selects_livecodebench_problems(tmp_path):
    """``coevo train`` takes the selection as fields (tasks_release ... eval_tasks_platform, TRL
    style ``--field`` overrides), each passed to the loader of its own data set."""
    from coevo_code.training.cli import parse_train_args
    from coevo_code.training.run import _load, _selection
    repo = str(write_repo(tmp_path / "repo"))
    a = parse_train_args(["--tasks", "livecodebench", "--tasks_path", repo, "--tasks_split",
                          "test", "--eval_tasks_split", "test", "--tasks_release",
                          "release_v3", "--tasks_platform", "atcoder",
                          "--eval_tasks", "livecodebench", "--eval_tasks_path", repo,
                          "--eval_tasks_start_date", "2024-05-01", "--eval_tasks_end_date",
                          "2024-05-31", "--output_dir", str(tmp_path / "run")])
    c = a.config
    assert a.inputs["tasks_release"] == "release_v3"
    train = _load(c.tasks, c.tasks_path, c.tasks_split, None, 0, "--tasks",
                  **_selection(c, "tasks"))
    assert [t.id for t in train] == ["s1", "s2", "s3"]
    held = _load(c.eval_tasks, c.eval_tasks_path, c.eval_tasks_split, None, 0, "--eval_tasks",
                 **_selection(c, "eval_tasks"))
    assert [t.id for t in held] == ["s5", "f5"]
    with pytest.raises(LoaderError, match=r"^--tasks: livecodebench: unknown release 'v9'"):
        _load("livecodebench", repo, None, None, 0, "--tasks", release="v9")
    with pytest.raises(LoaderError, match=r"^--tasks: mbpp does not take option\(s\) release"):
        _load("mbpp", "mbpp.jsonl", None, None, 0, "--tasks", release="v1")
