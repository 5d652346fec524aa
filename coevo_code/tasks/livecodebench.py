"""LiveCodeBench (``livecodebench/code_generation_lite``) read the way its users read it now: the
hub repository's jsonl files, one per release (``test.jsonl``, ``test2.jsonl`` ... ``test6.jsonl``),
fetched file by file with ``huggingface_hub`` (its cache and ``HF_HUB_OFFLINE`` apply), or a local
folder laid out the same way, or local files. The repository's loading script is not used
(current ``datasets`` no longer runs scripts).

Graded the way its own grader (``livecodebench/evaluation/testing_util.py``) grades: every program
runs after the grader's import prelude, 6 s per test, a stdin answer compared line by line
(stripped lines, same count, each line equal as text or as a list of Decimals), a functional
answer compared with ``==`` on the JSON value (a tuple counts as a list). docs/EVALUATION.md lists
the cases where we differ on purpose.

Private tests are base64(zlib(pickle(JSON string))) on the hub. They are decoded without
running anything: the pickle's opcodes are read (``pickletools.genops``) and only the pickle of
exactly one ``str`` is accepted; anything else is a one-line error naming the problem.
"""

from __future__ import annotations

import ast
import base64
import binascii
import gzip
import json
import pickletools
import re
import zlib
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Iterator

from .model import (LoaderError, RowErrors, Task, TaskSet, TestCase, Unreadable,
                    unreadable_json)

HUB_ID = "livecodebench/code_generation_lite"
FILES = ["test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl", "test6.jsonl"]
RELEASES: dict[str, list[str]] = {
    **{f"release_v{i}": FILES[:i] for i in range(1, 7)},
    "release_latest": FILES,
    **{f"v{i}": [FILES[i - 1]] for i in range(1, 7)},
    **{f"v{a}_v{b}": FILES[a - 1:b] for a in range(1, 7) for b in range(a + 1, 7)},
}
DEFAULT_RELEASE = "release_latest"
PLATFORMS = ("leetcode", "atcoder", "codeforces")
MAX_TESTS_BYTES = 1 << 30  # a problem's decompressed tests (a zlib bomb is refused, not inflated)
TIME_LIMIT_S = 6.0  # the grader's default (run_test(..., timeout=6)), per test

# the official grader's prelude, run before every program (``import_string`` in testing_util)
LCB_PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
    "from random import *\nfrom statistics import *\nfrom itertools import *\n"
    "from functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\n"
    "import datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\nimport math\n"
    "import random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n")

# what the grader's reliability_guard takes away that a program may call: quit() and help() are
# None there (so `quit()` after the right answer is a runtime error, as there)
LCB_GUARD = "import builtins as _guard\n_guard.quit = None\n_guard.help = None\ndel _guard\n"

# the official grader's stdin comparison (grade_stdio), as a stdio checker
LCB_STDIO_CHECKER = '''
from decimal import Decimal


def _lines(text):
    return [line.strip() for line in text.strip().split("\\n")]


def _decimals(line):
    try:
        return [Decimal(x) for x in line.split()]
    except Exception:
        return None


def check(input, expected, actual):
    got, want = _lines(actual), _lines(expected)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g == w:
            continue
        dg, dw = _decimals(g), _decimals(w)
        if dg is None or dw is None or dg != dw:
            return False
    return True
'''


@dataclass
class GradedTask(Task):
    """A task graded the way its benchmark's own grader does: ``program_prelude`` runs before
    every program, ``completion_prefix`` (LiveBench's ``partial_solution``) is put before a program
    that does not already start with it (joined by a newline), a stdin program is wrapped as the
    grader wraps it where ``wrap_stdin`` (``grader_stdin_program``), and the wall-clock limit is
    the time limit (plus a start-up allowance), as the grader's alarm is."""

    program_prelude: str = ""
    completion_prefix: str = ""
    wall_slack_s: float = 0.5
    wrap_stdin: bool = False  # run a stdin program as the grader does (``grader_stdin_program``)

    def full_program(self, program: str) -> str:
        if self.completion_prefix and not program.startswith(self.completion_prefix):
            program = self.completion_prefix + "\n" + program
        if self.wrap_stdin and self.kind == "stdio":
            program = grader_stdin_program(program)
        return self.program_prelude + program

    def job(self, programs, tests=None, **fields) -> dict:
        fields.setdefault("wall_limit_s", self.time_limit_s + self.wall_slack_s)
        return super().job([self.full_program(p) for p in programs], tests, **fields)


def _unwrap_main_guard(code: str) -> str:
    """A last ``if __name__ == '__main__':`` block replaced by its body (``clean_if_name``)."""
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            return ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:  # noqa: BLE001 - as the grader: anything it cannot parse stays as it is
        pass
    return code


def grader_stdin_program(code: str) -> str:
    """A stdin program as LiveCodeBench's ``grade_stdio`` runs it, so that pass@1 matches its
    grader's: a last ``__main__`` guard unwrapped, the top-level imports kept at module level and
    every other top-level statement moved into a function (``make_function``), which is called
    once in a module named ``tmp_sol`` with ``SystemExit`` caught (``call_method``). So ``exit(1)``
    after the right output passes, a ``global`` statement in a function naming a top-level
    variable fails (the variable is the wrapper's local), and a guard that is not the last
    statement does not run, all as there. A program that cannot be parsed is left as it is (it
    fails either way)."""
    code = _unwrap_main_guard(code)
    try:
        tree = ast.parse(code)
        imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        rest = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        func = ast.FunctionDef(name="wrapped_function", args=ast.arguments(
            posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=rest, decorator_list=[], returns=None, lineno=-1)
        if "type_params" in ast.FunctionDef._fields:  # Python 3.12+
            func.type_params = []
        wrapped = ast.unparse(imports) + "\n" + ast.unparse(func)
    except Exception:  # noqa: BLE001 - a syntax error (or worse) fails when the program runs
        return code
    return (wrapped + "\n\n__name__ = 'tmp_sol'\ntry:\n    wrapped_function()\n"
            "except SystemExit:\n    pass\n")


@dataclass
class ReportedTaskSet(TaskSet):
    """A task set whose load report says what was left out and why."""

    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        s = super().summary()
        return s + ("; " + "; ".join(self.notes) if self.notes else "")


# ---- private tests, decoded without running anything -------------------------------------------
_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"}
_MEMO_OPS = {"MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT"}


def pickled_string(data: bytes) -> str:
    """The one ``str`` a pickle holds, read from its opcodes; ValueError for anything else. Only
    the shape ``pickle.dumps(a_str)`` writes (protocol 0 to 5) is accepted: ``[PROTO] STRING
    [memo] STOP``, ``FRAME`` headers aside, and nothing after ``STOP``; any other opcode (an
    object, a call, a memo fetch), a second value, bytes or trailing data is refused. Nothing is
    unpickled."""
    try:
        ops = [(op.name, arg, pos) for op, arg, pos in pickletools.genops(data)]
    except Exception as e:  # noqa: BLE001 - genops raises several kinds on a broken stream
        raise ValueError(f"not a valid pickle ({type(e).__name__}: {e})") from None
    for name, _, pos in ops:
        if name not in _STRING_OPS | _MEMO_OPS | {"PROTO", "FRAME", "STOP"}:
            raise ValueError(f"the pickle holds opcode {name} at byte {pos}, not one string")
    end = ops[-1][2] + 1  # genops stops at the first STOP
    if end != len(data):
        raise ValueError(f"{len(data) - end} bytes after the pickle's STOP")
    shape = [(name, arg, pos) for name, arg, pos in ops if name != "FRAME"]
    if shape and shape[0][0] == "PROTO":
        shape = shape[1:]
    if shape and shape[-1][0] == "STOP":
        shape = shape[:-1]
    if len(shape) == 2 and shape[1][0] in _MEMO_OPS:
        shape = shape[:1]
    strings = sum(name in _STRING_OPS for name, _, _ in ops)
    if strings != 1:
        raise ValueError(f"the pickle holds {strings} strings, not one")
    if len(shape) != 1:
        names = " ".join(n for n, _, _ in ops[:12]) + (" ..." if len(ops) > 12 else "")
        raise ValueError(f"the pickle's opcodes ({names}) are not those of one pickled string")
    return shape[0][1]


def _json(text, where: str, what: str):
    """``json.loads``; its failures (bad JSON, nesting too deep, a number past Python's integer
    digit limit) one line naming ``where``."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise LoaderError(f"{where}: {what} is not JSON ({getattr(e, 'msg', e)})") from None
    except RecursionError:
        raise LoaderError(f"{where}: {what} is JSON nested too deeply to read; refused") from None
    except ValueError as e:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise LoaderError(f"{where}: {what} cannot be read: {unreadable_json(e)}; refused"
                          ) from None


def decode_lcb_tests(raw, where: str) -> list[dict]:
    """LiveCodeBench test cases: a JSON string (or list), or base64(zlib(pickle(JSON string)))
    where the pickle is exactly one string (read from its opcodes, never unpickled)."""
    if raw is None or raw == "":
        return []
    if isinstance(raw, list):
        tests = raw
    else:
        if not isinstance(raw, (str, bytes)):
            raise LoaderError(f"{where}: expected a string, got {type(raw).__name__}")
        text = raw.strip() if isinstance(raw, str) else raw.strip().decode("latin-1")
        if text[:1] in ("[", "{", '"'):  # JSON (a base64 blob never starts so)
            tests = _json(raw, where, "the text")
        else:
            try:
                inflate = zlib.decompressobj()
                packed = inflate.decompress(base64.b64decode(raw, validate=True), MAX_TESTS_BYTES)
            except (binascii.Error, zlib.error, ValueError) as e:
                raise LoaderError(f"{where}: neither JSON nor base64(zlib(pickle)) "
                                  f"({type(e).__name__}: {str(e)[:80]})") from None
            if inflate.unconsumed_tail:
                raise LoaderError(f"{where}: the tests inflate past {MAX_TESTS_BYTES} bytes; "
                                  f"refused")
            if not inflate.eof:
                raise LoaderError(f"{where}: the zlib stream is truncated; refused")
            if inflate.unused_data:
                raise LoaderError(f"{where}: {len(inflate.unused_data)} bytes after the zlib "
                                  f"stream; refused")
            try:
                text = pickled_string(packed)
            except ValueError as e:
                raise LoaderError(f"{where}: refused without running it: {e}") from None
            tests = _json(text, where, "the pickled string")
    if not isinstance(tests, list):
        raise LoaderError(f"{where}: expected a list of tests, got {type(tests).__name__}")
    for i, t in enumerate(tests):
        if not (isinstance(t, dict) and isinstance(t.get("input"), str)
                and isinstance(t.get("output"), str)):
            raise LoaderError(f"{where}: test {i} is not {{input: str, output: str, testtype}}")
    return tests


def lcb_functional_test(func: str, inp: str, out: str, first_of_list: bool = False) -> TestCase:
    """One LeetCode-style test: one JSON value per input line, one line per argument; the answer
    compared as LiveCodeBench does (``==`` after a tuple becomes a list). The function called is
    ``Solution().func`` where the program defines ``Solution``, else the program's top-level
    ``func`` (the grader's rule: ``class Solution`` in the program, whatever the starter code).
    ``first_of_list``: LiveBench's extra rule, an answer equal to the first element of a list
    answer also passes."""
    call = f"(Solution().{func} if 'Solution' in globals() else {func})"
    code = (f"import json as _json\n"
            f"_args = [_json.loads(_l) for _l in {inp!r}.split('\\n') if _l.strip()]\n"
            f"_want = _json.loads({out!r})\n"
            f"_value = {call}(*_args)\n"
            f"if isinstance(_value, tuple):\n    _value = list(_value)\n")
    if first_of_list:
        code += ("assert _value == _want or (isinstance(_want, list) and len(_want) > 0 "
                 "and _value == _want[0])")
    else:
        code += "assert _value == _want"
    return TestCase(code=code)


def _json_field(value, where: str, what: str) -> dict:
    if isinstance(value, str):
        value = _json(value or "{}", where, what)
    return value if isinstance(value, dict) else {}


def lcb_task(name: str, k: int, r: dict, prompt: str, meta, starter: str | None, *,
             prelude: str, stdio_checker: str, first_of_list: bool = False,
             **extra) -> GradedTask:
    """One LiveCodeBench-schema row (LiveBench's too) as a task graded like its grader."""
    qid = str(_need(r, "question_id", k, name))
    where = f"{name} record {k} ({qid})"
    public = decode_lcb_tests(r.get("public_test_cases"), where + " public_test_cases")
    private = decode_lcb_tests(r.get("private_test_cases"), where + " private_test_cases")
    if not public + private:
        raise LoaderError(f"{where}: no tests (public_test_cases and private_test_cases empty)")
    kinds = {t.get("testtype") for t in public + private}
    if kinds - {"stdin", "functional"} or len(kinds) > 1:
        raise LoaderError(f"{where}: test types {sorted(map(str, kinds))}, expected stdin or "
                          "functional")
    meta = _json_field(meta, where, "metadata")
    info = {"contest_date": r.get("contest_date"), "platform": r.get("platform"),
            "difficulty": r.get("difficulty")}
    common = dict(id=qid, source=name, prompt=prompt, starter_code=starter or "",
                  time_limit_s=TIME_LIMIT_S, program_prelude=prelude, metadata=info, **extra)
    if kinds == {"functional"}:
        func = meta.get("func_name")
        if not func:
            raise LoaderError(f"{where}: functional tests but no func_name in metadata")
        conv = lambda ts: [lcb_functional_test(func, t["input"], t["output"],  # noqa: E731 - a one-line converter, used twice just below
                                               first_of_list) for t in ts]
        return GradedTask(kind="functional", tests=conv(public + private), examples=conv(public),
                          entry_point=func, **common)
    conv = lambda ts: [TestCase(input=t["input"], output=t["output"]) for t in ts]  # noqa: E731 - likewise
    return GradedTask(kind="stdio", tests=conv(public + private), examples=conv(public),
                      checker=stdio_checker, wrap_stdin=True, **common)


def _need(rec, key: str, k: int, name: str):
    if not isinstance(rec, dict):
        raise LoaderError(f"{name} record {k}: not an object")
    if key not in rec or rec[key] is None:
        rid = rec.get("question_id")
        raise LoaderError(f"{name} record {k}{f' ({rid})' if rid else ''}: missing field {key!r}")
    return rec[key]


# ---- where the rows come from -------------------------------------------------------------------
def release_files(release: str | None) -> list[str]:
    """The hub files of a release name; one-line error listing the valid names."""
    key = (release or DEFAULT_RELEASE).strip()
    if key not in RELEASES:
        simple = [f"release_v{i}" for i in range(1, 7)] + ["release_latest"] + \
                 [f"v{i}" for i in range(1, 7)]
        raise LoaderError(f"livecodebench: unknown release {key!r}; choose from "
                          f"{', '.join(simple)} (or a range such as v2_v4)")
    return RELEASES[key]


def _hub_files(hub_id: str, names: list[str]) -> list[Path]:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise LoaderError("livecodebench: reading the hub needs huggingface_hub (pip install "
                          "huggingface_hub), or pass a local folder holding test.jsonl ... "
                          "test6.jsonl") from None
    out = []
    for fname in names:
        try:
            out.append(Path(hf_hub_download(hub_id, fname, repo_type="dataset")))
        except Exception as e:  # noqa: BLE001 - offline, missing, gated: one message
            raise LoaderError(
                f"livecodebench: cannot get {fname} of {hub_id} from the Hugging Face hub "
                f"({type(e).__name__}); "
                f"download the repository's jsonl files where there is a network and pass "
                f"their folder (--data DIR; coevo tasks check: --path DIR)") from None
    return out


def resolve_sources(source, release: str | None) -> tuple[list[Path], str, bool]:
    """The jsonl files to read and where they came from: the hub (``source`` None or a hub id;
    ``release`` picks the files), a folder laid out as the hub repository (``release`` picks the
    files), or one or several files (a list, or paths joined by commas; with ``release``, those of
    its files, by the hub's names). The flag: whether the files were picked by release."""
    if source is None or (isinstance(source, str) and not Path(source).exists()
                          and "," not in source and re.fullmatch(r"[\w.-]+/[\w.-]+", source)):
        hub_id = source or HUB_ID
        names = release_files(release)
        return _hub_files(hub_id, names), f"hub:{hub_id}", True
    if isinstance(source, (str, Path)) and Path(source).is_dir():
        names = release_files(release)
        folder = Path(source)
        missing = [n for n in names if not (folder / n).is_file()
                   and not (folder / (n + ".gz")).is_file()]
        if missing:
            raise LoaderError(f"livecodebench: {folder} lacks {', '.join(missing)} "
                              f"(release {release or DEFAULT_RELEASE} needs {', '.join(names)})")
        paths = [folder / n if (folder / n).is_file() else folder / (n + ".gz") for n in names]
        return paths, str(folder), True
    if isinstance(source, (list, tuple)):
        items = [Path(s) for s in source]
    elif Path(source).exists():
        items = [Path(source)]
    else:
        items = [Path(s.strip()) for s in str(source).split(",") if s.strip()]
    for p in items:
        if not p.is_file():
            raise LoaderError(f"livecodebench: no such file {str(p)!r} (give a file, several "
                              f"files joined by commas, a folder, or a hub id owner/name)")
    if release:  # files named as the hub's: the release picks among them
        names = release_files(release)
        odd = [p.name for p in items if p.name.removesuffix(".gz") not in FILES]
        if odd:
            raise LoaderError(f"livecodebench: --release picks files by the hub's names "
                              f"({', '.join(FILES)}); {', '.join(odd)} is not one: leave "
                              f"--release out to read the files given")
        items = [p for p in items if p.name.removesuffix(".gz") in names]
        if not items:
            raise LoaderError(f"livecodebench: none of the files given is in release {release} "
                              f"({', '.join(names)})")
        return items, ", ".join(str(p) for p in items), True
    return items, ", ".join(str(p) for p in items), False


def iter_jsonl(paths: list[Path], name: str) -> Iterator[tuple[int, dict]]:
    """(record number, row) over jsonl files (``.gz`` too), one line at a time; a line that
    cannot be read is an :class:`~coevo_code.tasks.model.Unreadable` in its place (that row's
    error, the others load)."""
    k = 0
    for path in paths:
        opener = gzip.open if path.name.endswith(".gz") else open
        try:
            with opener(path, "rb") as f:  # bytes: a line that is not UTF-8 is its row's error
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        row = _json(line, f"{name}: {path} line {n}", "the line")
                    except LoaderError as e:
                        row = Unreadable(str(e))
                    yield k, row
                    k += 1
        except (OSError, EOFError) as e:
            raise LoaderError(f"{name}: cannot read {path}: {getattr(e, 'strerror', None) or e}"
                              ) from None


def parse_date(value, flag: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).replace(tzinfo=None)
    except ValueError:
        raise LoaderError(f"{flag}: {value!r} is not a date (YYYY-MM-DD)") from None


def load_livecodebench(source=None, split: str | None = None, release: str | None = None,
                       start_date=None, end_date=None, platform: str | None = None,
                       strict: bool = False) -> TaskSet:
    """LiveCodeBench code generation: ``release`` (release_v1 ... release_v6 cumulative,
    release_latest, v1 ... v6 single; default release_latest), problems whose contest date is in
    [start_date, end_date] and whose platform is ``platform`` (leetcode, atcoder, codeforces;
    comma-separated for several). ``split`` is accepted for symmetry: the repository has only
    ``test``. A row that cannot be used (unreadable, malformed, tests no program can read) is
    skipped and counted in the load report; ``strict``: its one-line error ends the load."""
    name = "livecodebench"
    if split not in (None, "test"):
        raise LoaderError(f"livecodebench: no split {split!r}; the repository has only 'test'")
    lo, hi = parse_date(start_date, "--start_date"), parse_date(end_date, "--end_date")
    if lo and hi and lo > hi:
        raise LoaderError(f"--start_date {start_date} is after --end_date {end_date}")
    wanted = None
    if platform:
        wanted = {p.strip().lower() for p in str(platform).split(",") if p.strip()}
        bad = sorted(wanted - set(PLATFORMS))
        if bad:
            raise LoaderError(f"--platform: unknown {', '.join(bad)}; choose from "
                              f"{', '.join(PLATFORMS)}")
    paths, origin, by_release = resolve_sources(source, release)
    tasks, outside, other_platform, seen = [], 0, 0, set()
    errors = RowErrors(name, strict)
    for k, r in errors.readable(iter_jsonl(paths, name)):
        with errors.row(k, r):
            when = parse_date(_need(r, "contest_date", k, name),
                              f"{name} record {k} ({r.get('question_id')}) contest_date")
            if (lo and when < lo) or (hi and when > hi):
                outside += 1
                continue
            if wanted and str(r.get("platform", "")).lower() not in wanted:
                other_platform += 1
                continue
            prompt = f"{r.get('question_title') or ''}\n\n{_need(r, 'question_content', k, name)}"
            task = lcb_task(name, k, r, prompt.strip(), r.get("metadata"), r.get("starter_code"),
                            prelude=LCB_GUARD + LCB_PRELUDE, stdio_checker=LCB_STDIO_CHECKER)
            if task.id in seen:
                raise LoaderError(f"{name} record {k} ({task.id}): question_id appears twice")
            seen.add(task.id)
            tasks.append(task)
    label = f"{name}/{release or DEFAULT_RELEASE}" if by_release else name
    notes = []
    if lo or hi:
        label += f" [{start_date or '...'}, {end_date or '...'}]"
        notes.append(f"{outside} outside the date window")
    if wanted:
        label += f" ({','.join(sorted(wanted))})"
        notes.append(f"{other_platform} on other platforms")
    return ReportedTaskSet(label, origin, tasks, skipped=errors.lines, notes=notes)
