"""HumanEval+ and MBPP+ (evalplus): tests from ``base_input`` / ``plus_input``.

The expected output of each input is what the canonical solution returns on it: computed once,
through the executor, and cached on disk (keyed by the data file's hash). Outputs are compared as
evalplus 0.3.1 compares them (``evalplus/eval/__init__.py::unsafe_execute``), input by input:
``out == exp``, evalplus's special oracles (MBPP+'s set-equality and "not None" tasks with their
bool branch, Mbpp/164, /295, /558, /581; HumanEval/32 checks that the polynomial vanishes at the
answer), then, where the answer is not equal and a tolerance applies (the task's ``atol``, or
1e-6 from the first expected value made of floats on), the same type, the same length for lists
and tuples, and ``numpy.allclose(rtol=1e-7, atol)``. Expected values whose repr would pass 4 KB
(and are not floats) are kept as a digest that is equal exactly when the values are ``==``
(numbers by value, dicts and sets in any order): they are compared for equality only. MBPP+
inputs get back the tuples, sets and complex numbers JSON lost (evalplus's
``mbpp_deserialize_inputs``). Not replicated: evalplus's per-input time limits (derived from the
canonical solution's speed); see ``docs/CORE.md``.

Inputs are grouped into tests of up to ``chunk`` inputs (a test passes when every input in it
does), base inputs apart from plus inputs, so that HumanEval+'s 124,000 inputs make ~2,800 cells
rather than one cell each. ``chunk=None`` puts all base inputs in one test and all plus inputs in
another (two cells per solution, stopping at the first failing input, as evalplus's fast check
does): what scoring samples uses. The CPU limit of a test is 4x the canonical solution's time on
its inputs (at least 5 s), as evalplus's ``gt_time_limit_factor`` and ``min_time_limit``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path

from .loaders import HUB_IDS, _need, read_records
from .model import RowErrors, Task, TaskSet, TestCase

# evalplus/eval/__init__.py: MBPP_OUTPUT_SET_EQ_TASKS
MBPP_SET_EQ = {"similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly",
               "larg_nnum", "intersection_array", "find_dissimilar", "Diff"}
# evalplus/eval/__init__.py: MBPP_OUTPUT_NOT_NONE_TASKS (they return re.Match objects)
MBPP_NOT_NONE = {"check_str", "text_match_three", "text_starta_endb"}
# evalplus: each input may take gt_time_limit_factor (4) x the canonical solution's time
TIME_FACTOR, MIN_TIME_S = 4.0, 5.0

# Runs in the sandbox, as the task's setup: evalplus's comparison
# (evalplus/eval/__init__.py::unsafe_execute and is_floats, evalplus/eval/_special_oracle.py,
# v0.3.1, Apache-2.0), input by input in the same order, with the same sticky float tolerance.
CHECK_SETUP = r"""
import sys as _sys, copy as _copy, math as _math
if hasattr(_sys, "set_int_max_str_digits"):
    _sys.set_int_max_str_digits(0)  # HumanEval/83 and /139 build integers past 4300 digits

def _coevo_is_floats(x):
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    if type(x).__name__ == "ndarray" and type(x).__module__ == "numpy":
        return str(x.dtype) in ("float64", "float32")
    return False

def _coevo_poly(xs, x):
    return sum([c * _math.pow(x, i) for i, c in enumerate(xs)])

def _coevo_surface_area(base_edge, height):
    slant_height = _math.sqrt((base_edge / 2) ** 2 + height ** 2)
    return round(base_edge ** 2 + 4 * (base_edge * slant_height) / 2)

def _coevo_digit_distance(num1, num2):
    a, b = str(num1), str(num2)
    n = max(len(a), len(b))
    return sum(abs(int(x) - int(y)) for x, y in zip(a.zfill(n), b.zfill(n)))

def _coevo_feed(h, v):
    # a digest that is equal for values that are == (1 == 1.0 == True, dicts and sets in any
    # order, a list and its subclasses), linear in the value's size (repr of a huge int is not)
    t = type(v)
    if t.__module__ == "numpy" and getattr(v, "ndim", None) == 0 and hasattr(v, "item"):
        return _coevo_feed(h, v.item())  # numpy scalars are == to Python's
    if t is float and v == v and abs(v) != float("inf") and v.is_integer():
        v, t = int(v), int
    elif t is complex and v.imag == 0:
        return _coevo_feed(h, v.real)
    # every item is prefixed with its type and length, so that no two sequences of items
    # feed the same bytes ([1, 19970] and [157953, None] did, unprefixed)
    if t is bool or t is int:
        b = int(v).to_bytes(int(v).bit_length() // 8 + 1, "little", signed=True)
        h.update(b"i%d:" % len(b) + b)
    elif t is str:
        h.update(b"s%d:" % len(v) + v.encode("utf-8", "surrogatepass"))
    elif t is bytes or t is bytearray:
        h.update(b"b%d:" % len(v) + bytes(v))
    elif v is None:
        h.update(b"N")
    elif isinstance(v, (list, tuple)):
        h.update((b"l%d:" if isinstance(v, list) else b"t%d:") % len(v))
        for x in v:
            _coevo_feed(h, x)
    elif isinstance(v, (dict, set, frozenset)):
        pairs = v.items() if isinstance(v, dict) else ((x,) for x in v)
        parts = sorted(b"".join(_coevo_digest(x, raw=True) for x in p) for p in pairs)
        h.update((b"d%d:" if isinstance(v, dict) else b"S%d:") % len(parts) + b"".join(parts))
    else:
        name = type(v).__qualname__.encode("utf-8", "surrogatepass")
        text = repr(v).encode("utf-8", "surrogatepass")
        h.update(b"r%d:%d:" % (len(name), len(text)) + name + text)

def _coevo_digest(value, raw=False):
    import hashlib
    h = hashlib.sha256()
    _coevo_feed(h, value)
    return h.digest() if raw else "#sha256:" + h.hexdigest()

def _coevo_long(v, budget=4096):
    # whether repr(v) would be longer than ``budget`` characters, found without building it
    stack, size = [v], 0
    while stack:
        x = stack.pop()
        t = type(x)
        if t is int:
            size += x.bit_length() * 0.30103 + 2
        elif t is str or t is bytes:
            size += len(x) + 3
        elif t in (list, tuple, set, frozenset):
            size += 2 * len(x) + 2
            stack.extend(x)
        elif t is dict:
            size += 4 * len(x) + 2
            stack.extend(x.keys())
            stack.extend(x.values())
        else:
            size += 24
        if size > budget:
            return True
    return False

def _coevo_ns():
    import collections
    return {"inf": float("inf"), "nan": float("nan"), "Counter": collections.Counter,
            "OrderedDict": collections.OrderedDict, "deque": collections.deque}

def _coevo_expected(fn, args_src, special):
    # per input: None where the canonical solution raised, else [the value's repr (a digest
    # for long values that are not floats), whether evalplus's is_floats holds for it]
    _ns = _coevo_ns()
    out = []
    for args in eval(args_src, _ns):
        try:
            v = fn(*_copy.deepcopy(args))
        except Exception:
            out.append(None)
            continue
        if special == "not_none":
            v = v is not None
        floats = _coevo_is_floats(v)
        if not special and not floats and _coevo_long(v):
            out.append([_coevo_digest(v), False])
        else:
            out.append([repr(v), floats])
    return out

def _coevo_check(fn, args_src, expected_src, atol, special):
    # evalplus's unsafe_execute, one input after another; ``atol`` is its value when the
    # first of these inputs comes (evalplus sets it to 1e-6 for good at the first float answer)
    _ns = _coevo_ns()
    for inp, e in zip(eval(args_src, _ns), expected_src):
        out = fn(*inp)
        digest = e.startswith("#sha256:")
        exp = None if digest else eval(e, _ns)
        exact_match = (_coevo_digest(out) == e) if digest else (out == exp)
        if special == "always":  # Mbpp/164
            exact_match = exact_match or True
        elif special == "sum_div":  # Mbpp/295
            exact_match = exact_match or out == 0
        elif special == "surface_area":  # Mbpp/581
            exact_match = exact_match or abs(out - _coevo_surface_area(*inp)) <= atol
        elif special == "digit_distance":  # Mbpp/558
            exact_match = exact_match or out == _coevo_digit_distance(*inp)
        elif special == "set_eq":
            exact_match = set(out) == set(exp)
        elif special == "not_none":
            if isinstance(out, bool):
                exact_match = out == exp
            else:
                exact_match = exp == (out is not None)
        if special == "find_zero":
            assert abs(_coevo_poly(*inp, out)) <= max(atol, 1e-6)
            continue
        if atol == 0 and _coevo_is_floats(exp):
            atol = 1e-6
        if not exact_match and atol != 0:
            assert not digest  # long exact values: equality only
            assert type(out) == type(exp)
            if isinstance(exp, (list, tuple)):
                assert len(out) == len(exp)
            import numpy
            assert numpy.allclose(out, exp, rtol=1e-07, atol=atol)
        else:
            assert exact_match
"""


def mbpp_deserialize_inputs(task_id: str, inputs: list) -> list:
    """Port of evalplus's ``evalplus/data/mbpp.py::mbpp_deserialize_inputs`` (v0.3.1, Apache-2.0):
    give MBPP+ inputs back the Python types JSON could not hold."""
    n = int(str(task_id).split("/")[-1])
    if n in (2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616,
             630, 726, 740, 744, 809):
        return [[tuple(lst) for lst in inp] for inp in inputs]
    if n in (63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780):
        return [[[tuple(lst) for lst in lst_lst] for lst_lst in inp] for inp in inputs]
    if n in (75, 413, 444, 753):
        return [[[tuple(lst) for lst in inp[0]]] + [inp[1]] for inp in inputs]
    if n in (106, 750):
        return [[inp[0]] + [tuple(inp[1])] for inp in inputs]
    if n == 115:
        return [[[set(item) if isinstance(item, list) and len(item) else {} for item in inp[0]]]
                for inp in inputs]
    if n == 124:
        return [(float(inp[0]), complex(inp[1])) for inp in inputs]
    if n in (250, 405, 446, 617, 720, 763, 808):
        return [[tuple(inp[0])] + [inp[1]] for inp in inputs]
    if n in (259, 401, 445):
        modified = [[[tuple(lst) for lst in lst_lst] for lst_lst in inp] for inp in inputs]
        return [[tuple(lst) for lst in inp] for inp in modified]
    if n == 278:
        modified = [[[tuple(item) if isinstance(item, list) else item for item in inp[0]]]
                    for inp in inputs]
        return [[tuple(lst) for lst in inp] for inp in modified]
    if n == 307:
        return [[tuple(inp[0])] + [inp[1], inp[2]] for inp in inputs]
    if n == 722:
        return [[{key: tuple(value) for key, value in inp[0].items()}] + inp[1:] for inp in inputs]
    if n == 252:
        return [[complex(inp[0])] for inp in inputs]
    if n in (580, 615, 791):
        def to_tuple(v):
            return tuple(to_tuple(i) for i in v) if isinstance(v, list) else v
        return [to_tuple(inp) for inp in inputs]
    return inputs


# evalplus/eval/__init__.py: the MBPP+ special oracles, by entry point
MBPP_ORACLES = {"are_equivalent": "always", "sum_div": "sum_div", "surface_Area": "surface_area",
                "digit_distance_nums": "digit_distance"}


def _special(name: str, entry: str) -> str:
    if name == "humanevalplus" and entry == "find_zero":
        return "find_zero"
    if name == "mbppplus" and entry in MBPP_ORACLES:
        return MBPP_ORACLES[entry]
    if name == "mbppplus" and entry in MBPP_SET_EQ:
        return "set_eq"
    if name == "mbppplus" and entry in MBPP_NOT_NONE:
        return "not_none"
    return ""


def cache_dir() -> Path:
    return Path(os.environ.get("COEVO_CACHE_DIR", Path.home() / ".cache" / "coevo-code"))


def _program(name: str, r: dict) -> str:
    return (r["prompt"] + r["canonical_solution"]) if name == "humanevalplus" else r["canonical_solution"]


def _expected_outputs(name, records, inputs_of, origin_hash, executor=None, chunk=50):
    """task_id -> {"outputs": [repr, is_floats] of each expected value (a digest for long ones
    that are not floats; None where the canonical solution raised or timed out), "seconds": its
    slowest group}, cached on disk.
    Delete the cache file to recompute."""
    # keyed by the check's own code too: the expected values are CHECK_SETUP's reprs and digests,
    # so a change to how it writes them must never read values an older check wrote
    check = hashlib.sha256(CHECK_SETUP.encode()).hexdigest()[:12]
    cache = cache_dir() / f"{name}-{origin_hash}-check{check}.json"
    have = {}
    if cache.is_file():
        try:
            have = json.loads(cache.read_text())
        except (OSError, json.JSONDecodeError):
            have = {}
    todo = [r for r in records if r["task_id"] not in have]
    if todo:
        from ..execution import make_executor
        own = executor is None
        ex = executor or make_executor()
        try:
            pending = [(r, i, i + chunk) for r in todo for i in range(0, len(inputs_of(r)), chunk)]
            results: dict[str, dict] = {r["task_id"]: {"outputs": [None] * len(inputs_of(r)),
                                                       "seconds": 0.0} for r in todo}
            while pending:
                jobs = []
                for r, a, b in pending:
                    code = (f"_coevo_expected({r['entry_point']}, {repr(inputs_of(r)[a:b])!r}, "
                            f"{_special(name, r['entry_point'])!r})")
                    jobs.append({"id": r["task_id"], "kind": "functional",
                                 "entry_point": r["entry_point"],
                                 "programs": [_program(name, r)], "setup": CHECK_SETUP,
                                 "tests": [code], "return_outputs": True, "time_limit_s": 60})
                done = ex.run(jobs)
                retry = []
                for (r, a, b), res in zip(pending, done):
                    value = None
                    if res.get("passed") == [[True]]:
                        try:
                            value = ast.literal_eval(res["outputs"][0][0])
                        except (ValueError, SyntaxError, MemoryError, RecursionError):
                            value = None  # truncated (long float lists): split below
                    if value is not None and len(value) == b - a:
                        entry = results[r["task_id"]]
                        entry["outputs"][a:b] = value
                        entry["seconds"] = max(entry["seconds"], res.get("seconds", 0.0))
                    elif b - a > 1:
                        mid = (a + b) // 2
                        retry += [(r, a, mid), (r, mid, b)]
                pending = retry
            have.update(results)
        finally:
            if own:
                ex.close()
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(have))
        tmp.replace(cache)
    return have


def _load_plus(name: str, source, executor=None, chunk: int | None = 50, limit: int | None = None,
               seed: int = 0, task_ids=None, strict: bool = False) -> TaskSet:
    src = source or HUB_IDS[name]
    records, origin = read_records(src, name)  # json module: ints too large for Arrow are fine
    clean, errors = [], RowErrors(name, strict)
    for k, r in errors.readable(enumerate(records)):
        with errors.row(k, r):
            for key in ("task_id", "prompt", "entry_point", "canonical_solution", "base_input",
                        "plus_input"):
                _need(r, key, k, name)
            clean.append(r)
    if task_ids is not None:  # only these tasks (scoring samples): no expected outputs for others
        wanted = set(map(str, task_ids))
        clean = [r for r in clean if str(r["task_id"]) in wanted]
    if limit is not None:  # a seeded sample, for quick checks
        import random
        clean = sorted(random.Random(seed).sample(clean, min(limit, len(clean))),
                       key=lambda r: records.index(r))
    deser = mbpp_deserialize_inputs if name == "mbppplus" else (lambda tid, x: x)

    cached_inputs: dict[str, list] = {}

    def listed(x):  # a task without plus inputs stores {} there
        return list(x) if isinstance(x, list) else []

    def inputs_of(r):
        if r["task_id"] not in cached_inputs:
            cached_inputs[r["task_id"]] = (deser(r["task_id"], listed(r["base_input"]))
                                           + deser(r["task_id"], listed(r["plus_input"])))
        return cached_inputs[r["task_id"]]

    digest = hashlib.sha256(Path(src).read_bytes()).hexdigest()[:16] if Path(src).exists() else "hub"
    expected = _expected_outputs(name, clean, inputs_of, digest, executor)
    tasks = []
    for r in clean:
        tid, entry = r["task_id"], r["entry_point"]
        ins, outs = inputs_of(r), expected[tid]["outputs"]
        n_base = len(listed(r["base_input"]))
        special = _special(name, entry)
        atol = float(r.get("atol") or 0)
        tests, skipped, base_tests = [], 0, 0
        size = chunk or max(1, len(ins))
        for lo, hi in ((0, n_base), (n_base, len(ins))):  # evalplus checks each list apart
            keep = [(i, o) for i, o in zip(ins[lo:hi], outs[lo:hi]) if o is not None]
            skipped += (hi - lo) - len(keep)
            for a in range(0, len(keep), size):
                part = keep[a:a + size]
                # evalplus's atol when this part's first input comes: 1e-6 for good once an
                # earlier expected value of the list was made of floats
                sticky = atol if atol != 0 or special == "find_zero" or not any(
                    o[1] for _, o in keep[:a]) else 1e-6
                tests.append(TestCase(code=(
                    f"_coevo_check({entry}, {repr([i for i, _ in part])!r}, "
                    f"{[o[0] for _, o in part]!r}, {sticky!r}, {special!r})")))
            if lo == 0:
                base_tests = len(tests)
        prefix = r["prompt"] if name == "humanevalplus" else ""
        # the canonical time was measured per group of 50 inputs: a larger test gets the sum
        groups = 1 if chunk and chunk <= 50 else max(1, -(-max(n_base, len(ins) - n_base) // 50))
        tasks.append(Task(id=tid, source=name, kind="functional", prompt=r["prompt"], tests=tests,
                          entry_point=entry, setup=CHECK_SETUP, program_prefix=prefix,
                          references=[_program(name, r)],
                          time_limit_s=max(MIN_TIME_S,
                                           TIME_FACTOR * expected[tid]["seconds"] * groups),
                          metadata={"base_tests": base_tests, "inputs": len(ins),
                                    "skipped_inputs": skipped, "atol": atol}))
    return TaskSet(name, origin, tasks, skipped=errors.lines)


def load_humanevalplus(source=None, executor=None, limit=None, seed=0, chunk=50,
                       task_ids=None, strict: bool = False) -> TaskSet:
    return _load_plus("humanevalplus", source, executor, chunk=chunk, limit=limit, seed=seed,
                      task_ids=task_ids, strict=strict)


def load_mbppplus(source=None, executor=None, limit=None, seed=0, chunk=50,
                  task_ids=None, strict: bool = False) -> TaskSet:
    return _load_plus("mbppplus", source, executor, chunk=chunk, limit=limit, seed=seed,
                      task_ids=task_ids, strict=strict)
