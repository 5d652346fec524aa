"""Samples graded by us and by LiveCodeBench's own grader (``nvidia-livecodebench``:
``livecodebench/evaluation/testing_util.run_test``), for LiveCodeBench and LiveBench rows; used by
tests/test_livecodebench.py (a seeded subset) and benchmarks/lcb_agreement.py (all of them).

A sample is a row in the benchmark's exact schema and one program. Ours: the row written to a
jsonl file, loaded by ``load_tasks`` and run through the executor (the task's own prelude,
checker and 6 s limit). Theirs: ``run_test`` on ``{"input_output": {inputs, outputs, fn_name}}``
built from the same row the way LiveCodeBench builds it, in a fresh interpreter per sample (its
``reliability_guard`` disables ``os`` functions in the process that calls it). LiveBench is not
installable: its rows are graded by the LiveCodeBench grader, given the program LiveBench builds
(``partial_solution + "\\n" + answer`` for ``coding_completion``); the few rules of LiveBench's
older copy of that grader that the current one lacks show up as named disagreements.
"""

from __future__ import annotations

import base64
import json
import pickle
import random
import subprocess
import sys
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(__import__("os").environ.get("COEVO_SHARED_DATA", ROOT.parent / "shared" / "data"))
REAL_ROW = SHARED / "livecodebench" / "code_generation_lite_1873_A.jsonl"


@dataclass
class Sample:
    name: str
    bench: str        # "livecodebench" | "livebench"
    row: dict
    program: str
    on_purpose: str = ""  # why we disagree on purpose ("" where we should agree)


def private_blob(tests: list[dict]) -> str:
    """Tests stored the way the hub stores private tests: base64(zlib(pickle(JSON string)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


def stdin_row(qid: str, pairs: list[tuple[str, str]], date="2024-03-02T00:00:00",
              platform="atcoder") -> dict:
    tests = [{"input": i, "output": o, "testtype": "stdin"} for i, o in pairs]
    return {"question_title": qid, "question_content": f"Problem {qid}.", "platform": platform,
            "question_id": qid, "contest_id": "c1", "contest_date": date, "starter_code": "",
            "difficulty": "easy", "public_test_cases": json.dumps(tests[:1]),
            "private_test_cases": private_blob(tests[1:]), "metadata": "{}"}


def functional_row(qid: str, func: str, starter: str, pairs: list[tuple[list, object]],
                   date="2024-03-09T00:00:00") -> dict:
    tests = [{"input": "\n".join(json.dumps(a) for a in args), "output": json.dumps(out),
              "testtype": "functional"} for args, out in pairs]
    return {"question_title": qid, "question_content": f"Problem {qid}.", "platform": "leetcode",
            "question_id": qid, "contest_id": "w1", "contest_date": date, "starter_code": starter,
            "difficulty": "medium", "public_test_cases": json.dumps(tests[:1]),
            "private_test_cases": private_blob(tests[1:]),
            "metadata": json.dumps({"func_name": func})}


def livebench_row(lcb: dict, task="LCB_generation", partial="", removal="") -> dict:
    return {"question_id": "lb-" + lcb["question_id"], "category": "coding",
            "turns": [lcb["question_content"]], "question_title": lcb["question_title"],
            "public_test_cases": lcb["public_test_cases"],
            "private_test_cases": lcb["private_test_cases"],
            "original_json": {"metadata": lcb["metadata"], "starter_code": lcb["starter_code"]},
            "release_date": lcb["contest_date"][:10], "task": task,
            "livebench_release_date": "2024-06-24", "livebench_removal_date": removal,
            "remainder": "", "solution": "", "partial_solution": partial}


SORT_OK = """t = int(input())
for _ in range(t):
    s = input().strip()
    print("YES" if sum(a != b for a, b in zip(s, "abc")) in (0, 2) else "NO")
"""
SUM_ROW = stdin_row("sum", [("1 2\n", "3\n"), ("10 20\n", "30\n"), ("-5 5\n", "0\n")])
PAIR_ROW = stdin_row("pair", [("2\n", "1 2\n"), ("3\n", "1 2 3\n")])
LINES_ROW = stdin_row("lines", [("2\n", "1\n2\n"), ("3\n", "1\n2\n3\n")])
HALF_ROW = stdin_row("half", [("1\n", "0.5\n"), ("3\n", "1.5\n")])
THIRD_ROW = stdin_row("third", [("1\n", "0.333333333\n")])
LONG_N = 200_000
LONG_ROW = stdin_row("long", [(f"{LONG_N}\n", "".join(f"{i}\n" for i in range(LONG_N)))])
TWO_SUM = functional_row(
    "two-sum", "twoSum",
    "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        ",
    [([[2, 7, 11, 15], 9], [0, 1]), ([[3, 2, 4], 6], [1, 2]), ([[3, 3], 6], [0, 1])])
AVG = functional_row(
    "average", "average", "class Solution:\n    def average(self, nums: List[int]) -> float:\n",
    [([[1, 2]], 1.5), ([[1, 2, 4]], 2.3333333333333335)])
EVEN = functional_row(
    "is-even", "isEven", "class Solution:\n    def isEven(self, n: int) -> bool:\n",
    [([4], True), ([7], False)])
RANGE = functional_row(
    "range", "makeRange", "class Solution:\n    def makeRange(self, n: int) -> List[int]:\n",
    [([3], [0, 1, 2]), ([100_000], list(range(100_000)))])
WRAPPED = functional_row(
    "wrapped", "wrap", "class Solution:\n    def wrap(self, n: int) -> List[List[int]]:\n",
    [([2], [[1, 2]])])

TWO_SUM_OK = """class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                return [seen[target - x], i]
            seen[x] = i
"""
COMPLETION_PARTIAL = ("class Solution:\n    def twoSum(self, nums: List[int], target: int) -> "
                      "List[int]:\n        seen = {}")
COMPLETION_ANSWER = ("        for i, x in enumerate(nums):\n            if target - x in seen:\n"
                     "                return [seen[target - x], i]\n            seen[x] = i")


def real_row() -> dict:
    return json.loads(REAL_ROW.read_text().splitlines()[0])


def samples() -> list[Sample]:
    """Every sample: LiveCodeBench stdin (the real row and constructed ones), LeetCode-style
    (class Solution, functional tests), and LiveBench rows."""
    lcb = "livecodebench"
    out = []
    if REAL_ROW.is_file():
        row = real_row()
        out += [Sample("real 1873_A: a correct solution", lcb, row, SORT_OK),
                Sample("real 1873_A: always YES", lcb, row,
                       "for _ in range(int(input())):\n    input()\n    print('YES')\n")]
    add = "a, b = map(int, input().split())\n"
    out += [
        Sample("stdin: right answer", lcb, SUM_ROW, add + "print(a + b)\n"),
        Sample("stdin: wrong answer", lcb, SUM_ROW, add + "print(a - b)\n"),
        Sample("stdin: trailing spaces on the line", lcb, SUM_ROW, add + "print(a + b, '  ')\n"),
        Sample("stdin: blank lines after the answer", lcb, SUM_ROW, add + "print(a + b)\nprint()\nprint()\n"),
        Sample("stdin: leading spaces and a tab", lcb, SUM_ROW, add + "print(' \\t', a + b)\n"),
        Sample("stdin: blank line inside the answer", lcb, LINES_ROW,
               "n = int(input())\nprint(1)\nprint()\nprint(*range(2, n + 1), sep='\\n')\n"),
        Sample("stdin: answer split across lines", lcb, PAIR_ROW,
               "print(*range(1, int(input()) + 1), sep='\\n')\n"),
        Sample("stdin: lines joined on one line", lcb, LINES_ROW,
               "print(*range(1, int(input()) + 1))\n"),
        Sample("stdin: spaces doubled inside a line", lcb, PAIR_ROW,
               "print('  '.join(map(str, range(1, int(input()) + 1))))\n"),
        Sample("float: 0.50 for 0.5", lcb, HALF_ROW, "print(f'{int(input()) / 2:.2f}')\n"),
        Sample("float: 5e-1 for 0.5 (same Decimal)", lcb, HALF_ROW,
               "n = int(input())\nprint('5e-1' if n == 1 else '15e-1')\n"),
        Sample("float: 7 digits for 9", lcb, THIRD_ROW, "input()\nprint(f'{1/3:.7f}')\n"),
        Sample("float: full repr for 9 digits", lcb, THIRD_ROW, "input()\nprint(1/3)\n"),
        Sample("float: within 1e-9 but not equal", lcb, HALF_ROW,
               "print(int(input()) / 2 + 1e-12)\n"),
        Sample("long output: 200000 lines, right", lcb, LONG_ROW,
               "print('\\n'.join(map(str, range(int(input())))))\n"),
        Sample("long output: 200000 lines, last one wrong", lcb, LONG_ROW,
               "n = int(input())\nprint('\\n'.join(map(str, range(n - 1))))\nprint(n)\n"),
        Sample("long output: one line short", lcb, LONG_ROW,
               "print('\\n'.join(map(str, range(int(input()) - 1))))\n"),
        Sample("runtime error after the right output", lcb, SUM_ROW,
               add + "print(a + b)\nraise ValueError('late')\n"),
        Sample("runtime error before any output", lcb, SUM_ROW, add + "print(a // 0)\n"),
        Sample("timeout: busy loop", lcb, SUM_ROW, "while True:\n    pass\n"),
        Sample("timeout: sleeps 8 s then answers", lcb, SUM_ROW,
               "import time\ntime.sleep(8)\n" + add + "print(a + b)\n"),
        Sample("names from the grader's prelude (gcd, no import)", lcb, SUM_ROW,
               add + "print(gcd(a, b) * 0 + a + b)\n"),
        Sample("if __name__ == '__main__' guard", lcb, SUM_ROW,
               "def main():\n    " + add.strip() + "\n    print(a + b)\n\n"
               "if __name__ == '__main__':\n    main()\n"),
        Sample("exit() after the right output", lcb, SUM_ROW, add + "print(a + b)\nexit()\n"),
        Sample("quit() after the right output", lcb, SUM_ROW, add + "print(a + b)\nquit()\n"),
        Sample("stdin: global in a function at top level", lcb, SUM_ROW,
               "total = 0\ndef add(x):\n    global total\n    total += x\n"
               "for x in map(int, input().split()):\n    add(x)\nprint(total)\n"),
        Sample("sys.exit(1) after the right output", lcb, SUM_ROW,
               add + "print(a + b)\nimport sys\nsys.exit(1)\n"),
        Sample("sys.exit('message') after the right output", lcb, SUM_ROW,
               add + "print(a + b)\nimport sys\nsys.exit('done')\n"),
        Sample("__main__ guard that is not the last statement", lcb, SUM_ROW,
               "def main():\n    " + add.strip() + "\n    print(a + b)\n\n"
               "if __name__ == '__main__':\n    main()\nDONE = True\n"),
        Sample("from sys import stdin; stdin.readline()", lcb, SUM_ROW,
               "from sys import stdin\na, b = map(int, stdin.readline().split())\n"
               "print(a + b)\n"),
        Sample("stdin: sys.stdin.buffer", lcb, SUM_ROW,
               "import sys\na, b = map(int, sys.stdin.buffer.read().split())\nprint(a + b)\n",
               on_purpose="LiveCodeBench replaces sys.stdin by a StringIO, which has no "
                          "`buffer`; we give the program real standard streams"),
        Sample("stdin: open(0).read()", lcb, SUM_ROW,
               "a, b = map(int, open(0).read().split())\nprint(a + b)\n",
               on_purpose="LiveCodeBench's prelude binds `open` to the real builtin before it "
                          "patches `builtins.open`, so `open(0)` reads the grader's own stdin, "
                          "not the test's; we give the program real standard streams"),
        Sample("stdin: os.read(0, ...)", lcb, SUM_ROW,
               "import os\na, b = map(int, os.read(0, 1 << 20).split())\nprint(a + b)\n",
               on_purpose="LiveCodeBench feeds the test only to Python-level sys.stdin; file "
                          "descriptor 0 is the grader's; we give the program real standard "
                          "streams"),
        Sample("stdout: sys.stdout.buffer.write", lcb, SUM_ROW,
               "import sys\n" + add + "sys.stdout.buffer.write(b'%d\\n' % (a + b))\n",
               on_purpose="LiveCodeBench captures output with a StringIO, which has no "
                          "`buffer`; we give the program real standard streams"),
        # LeetCode-style
        Sample("class Solution: right (List from the prelude)", lcb, TWO_SUM, TWO_SUM_OK),
        Sample("class Solution: wrong", lcb, TWO_SUM, TWO_SUM_OK.replace("seen[target - x], i",
                                                                       "i, seen[target - x]")),
        Sample("class Solution task answered by a top-level function", lcb, TWO_SUM,
               "def twoSum(nums, target):\n    return [0, 1] if nums[0] + nums[1] == target "
               "else [1, 2]\n"),
        Sample("class Solution: a tuple for a list", lcb, TWO_SUM,
               TWO_SUM_OK.replace("[seen[target - x], i]", "(seen[target - x], i)")),
        Sample("class Solution: runtime error", lcb, TWO_SUM,
               TWO_SUM_OK.replace("seen = {}", "seen = {}\n        nums[len(nums)]")),
        Sample("class Solution: timeout", lcb, TWO_SUM,
               TWO_SUM_OK.replace("seen = {}", "seen = {}\n        while True: pass")),
        Sample("class Solution: float answer, exact", lcb, AVG,
               "class Solution:\n    def average(self, nums: List[int]) -> float:\n"
               "        return sum(nums) / len(nums)\n"),
        Sample("class Solution: float answer, off in the last digit", lcb, AVG,
               "class Solution:\n    def average(self, nums: List[int]) -> float:\n"
               "        return sum(x / len(nums) for x in nums)\n"),
        Sample("class Solution: 1/0 for true/false", lcb, EVEN,
               "class Solution:\n    def isEven(self, n: int) -> bool:\n"
               "        return 1 if n % 2 == 0 else 0\n"),
        Sample("class Solution: long list answer", lcb, RANGE,
               "class Solution:\n    def makeRange(self, n: int) -> List[int]:\n"
               "        return list(range(n))\n"),
        Sample("class Solution: long list, one element off", lcb, RANGE,
               "class Solution:\n    def makeRange(self, n: int) -> List[int]:\n"
               "        return list(range(n - 1)) + [n]\n"),
    ]
    # LiveBench rows (LiveBench's rules), graded by the LiveCodeBench grader on LiveBench's program
    lb = "livebench"
    partial_row = livebench_row(TWO_SUM, task="coding_completion", partial=COMPLETION_PARTIAL)
    out += [
        Sample("livebench completion: right continuation", lb, partial_row, COMPLETION_ANSWER),
        Sample("livebench completion: wrong continuation", lb, partial_row,
               COMPLETION_ANSWER.replace("seen[target - x], i", "i, i")),
        Sample("livebench completion: answer repeats the prefix", lb, partial_row,
               COMPLETION_PARTIAL + "\n" + COMPLETION_ANSWER),
        Sample("livebench generation: class Solution", lb, livebench_row(TWO_SUM), TWO_SUM_OK),
        Sample("livebench stdin: right answer", lb, livebench_row(SUM_ROW), add + "print(a + b)\n"),
        Sample("livebench stdin: trailing spaces", lb, livebench_row(SUM_ROW),
               add + "print(a + b, ' ')\n"),
        Sample("livebench stdin: exit() after the right output", lb, livebench_row(SUM_ROW),
               add + "print(a + b)\nexit()\n",
               on_purpose="LiveBench's reliability guard sets `exit` to None (a runtime error); "
                          "the current LiveCodeBench grader's leaves it"),
        Sample("livebench stdin: runtime error", lb, livebench_row(SUM_ROW), add + "print(a // 0)\n"),
        Sample("livebench stdin: timeout", lb, livebench_row(SUM_ROW), "while True:\n    pass\n"),
        Sample("livebench stdin: answer split across lines", lb, livebench_row(PAIR_ROW),
               "print(*range(1, int(input()) + 1), sep='\\n')\n"),
        Sample("livebench float: 0.5 + 1e-9 for 0.5", lb, livebench_row(HALF_ROW),
               "print(int(input()) / 2 + 1e-9)\n",
               on_purpose="LiveBench's copy of the grader compares one-number lines with "
                          "numpy.allclose; the current LiveCodeBench grader wants equal Decimals"),
        Sample("livebench stdin: blank line inside the answer", lb, livebench_row(LINES_ROW),
               "n = int(input())\nprint(1)\nprint()\nprint(*range(2, n + 1), sep='\\n')\n",
               on_purpose="LiveBench's copy drops empty output lines before comparing; the "
                          "current LiveCodeBench grader counts them"),
        Sample("livebench class Solution: the first element of a list answer", lb,
               livebench_row(WRAPPED),
               "class Solution:\n    def wrap(self, n: int) -> List[List[int]]:\n"
               "        return [1, 2]\n",
               on_purpose="LiveBench's copy also accepts an answer equal to the expected list's "
                          "first element; the current LiveCodeBench grader does not"),
    ]
    return out


# always in the subset: where LiveCodeBench's stdin rule and a token comparison differ (the test
# fails if the rule is lost), where its wrapping of a stdin program changes the verdict (the test
# fails if the wrapper is lost), one 6 s timeout, one long output, one LiveBench completion
KEPT = ("stdin: blank line inside the answer", "stdin: answer split across lines",
        "float: 0.50 for 0.5", "timeout: busy loop", "long output: 200000 lines, right",
        "livebench completion: right continuation", "stdin: global in a function at top level",
        "sys.exit(1) after the right output", "__main__ guard that is not the last statement",
        "class Solution task answered by a top-level function", "quit() after the right output")


def seeded_subset(items: list[Sample], k: int, seed: int = 0) -> list[Sample]:
    """``k`` samples drawn with ``seed``, in their original order, plus the real row's two, every
    on-purpose case and the ``KEPT`` ones (the other timeouts are left to the benchmark: each
    costs 6 s on both sides)."""
    keep = [s for s in items if s.name.startswith("real") or s.on_purpose or s.name in KEPT]
    rest = [s for s in items if s not in keep and "timeout" not in s.name]
    pick = random.Random(seed).sample(rest, min(k, len(rest)))
    return [s for s in items if s in keep or s in pick]


# ---- ours ---------------------------------------------------------------------------------------
def our_verdicts(items: list[Sample], executor) -> list[bool]:
    """Load each sample's row with our loader and run its program through ``executor``."""
    from coevo_code.tasks import load_tasks
    out: list[bool | None] = [None] * len(items)
    with tempfile.TemporaryDirectory() as d:
        jobs, where = [], []
        for bench in ("livecodebench", "livebench"):
            rows = {}
            for s in items:
                if s.bench == bench:
                    rows.setdefault(s.row["question_id"], s.row)
            if not rows:
                continue
            path = Path(d) / f"{bench}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
            tasks = {t.id: t for t in load_tasks(bench, str(path))}
            for i, s in enumerate(items):
                if s.bench == bench:
                    jobs.append(tasks[s.row["question_id"]].job([s.program]))
                    where.append(i)
        for i, res in zip(where, executor.run(jobs)):
            out[i] = bool(res.get("passed") and all(res["passed"][0]))
    return out  # type: ignore[return-value]


# ---- theirs -------------------------------------------------------------------------------------
THEIRS = r"""
import json, os, sys
from livecodebench.evaluation.testing_util import run_test
out = os.dup(1)
for line in sys.stdin.read().splitlines():
    job = json.loads(line)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child per sample, as LiveCodeBench's check_correctness runs one
        os.close(r)
        results, meta = run_test({"input_output": job["input_output"]}, test=job["program"],
                                 timeout=job["timeout"])
        n = len(json.loads(job["input_output"])["inputs"])
        ok = len(results) == n and all(x is True or (type(x).__name__ == "bool_" and bool(x))
                                       for x in results)
        os.write(w, json.dumps({"passed": ok, "why": meta.get("error_message")}).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    os.write(out, b"@@" + (data or b'{"passed": false, "why": "no verdict"}') + b"\n")
"""


def lcb_tests(raw) -> list[dict]:
    """Test cases as LiveCodeBench's own code reads them (json, else pickle: trusted here, these
    rows are built by this module)."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return json.loads(pickle.loads(zlib.decompress(base64.b64decode(raw))))


def their_program(s: Sample) -> str:
    """The program LiveBench grades: ``partial_solution + "\\n" + answer`` for a completion
    that does not already start with the partial solution."""
    partial = s.row.get("partial_solution") or ""
    if s.bench == "livebench" and partial and not s.program.startswith(partial):
        return partial + "\n" + s.program
    return s.program


def their_job(s: Sample, timeout: int) -> dict:
    tests = lcb_tests(s.row["public_test_cases"]) + lcb_tests(s.row["private_test_cases"])
    meta = s.row.get("metadata") if s.bench == "livecodebench" else s.row["original_json"]["metadata"]
    fn = json.loads(meta or "{}").get("func_name")
    return {"input_output": json.dumps({"inputs": [t["input"] for t in tests],
                                        "outputs": [t["output"] for t in tests],
                                        "fn_name": fn}),
            "program": their_program(s), "timeout": timeout, "n": len(tests)}


def _their_batch(items: list[Sample], timeout: int) -> list[bool]:
    jobs = [their_job(s, timeout) for s in items]
    p = subprocess.run([sys.executable, "-c", THEIRS], text=True, capture_output=True,
                       input="".join(json.dumps(j) + "\n" for j in jobs),
                       timeout=sum(timeout * (j["n"] + 1) + 10 for j in jobs) + 60,
                       cwd=tempfile.gettempdir())
    marks = [x for x in p.stdout.splitlines() if x.startswith("@@")]
    if len(marks) != len(items):
        raise RuntimeError(f"the LiveCodeBench grader gave {len(marks)} verdicts for "
                           f"{len(items)} samples (rc {p.returncode}): {p.stderr[-500:]}")
    return [bool(json.loads(m[2:])["passed"]) for m in marks]


def their_verdicts(items: list[Sample], timeout: int = 6, workers: int = 2) -> list[bool]:
    """run_test's verdicts: ``workers`` interpreters, each forking a child per sample."""
    chunks = [list(range(i, len(items), workers)) for i in range(workers)]
    with ThreadPoolExecutor(workers) as pool:
        done = list(pool.map(lambda idx: _their_batch([items[i] for i in idx], timeout), chunks))
    out: list[bool] = [False] * len(items)
    for idx, verdicts in zip(chunks, done):
        for i, v in zip(idx, verdicts):
            out[i] = v
    return out


def agreement(items: list[Sample], ours: list[bool], theirs: list[bool]) -> dict:
    rows = [{"sample": s.name, "bench": s.bench, "ours": o, "theirs": t, "agree": o == t,
             "on_purpose": s.on_purpose} for s, o, t in zip(items, ours, theirs)]
    return {"samples": len(rows), "agree": sum(r["agree"] for r in rows),
            "disagree": [r for r in rows if not r["agree"]], "rows": rows}
