"""CodeContests (``deepmind/code_contests``): the loader, iterating the split row by row.

Fields read: ``name, description, source, difficulty, cf_rating, public_tests, private_tests,
generated_tests, solutions, incorrect_solutions, time_limit, memory_limit_bytes, input_file,
output_file`` (and ``coevo_validation`` in a file ``coevo tasks validate`` wrote).

- Gold tests: the kinds in ``gold`` (``public``, ``private``, ``generated``; all three by
  default, as CodeContests' own evaluation counts a problem solved only when every test passes,
  docs/DATASETS.md). Public tests are also the statement's examples.
- References: the Python 3 solutions (language 3); the incorrect Python 3 solutions go to
  ``metadata["incorrect"]``. With ``languages`` naming ``cpp`` or ``java``, the C++ (2) and Java
  (4) solutions and incorrect solutions are kept as well, in ``metadata["native_references"]``
  and ``metadata["native_incorrect"]``. Tests and solutions are decoded from their row when used
  (:mod:`.rows`), so a several-GB split loads in the memory of its statements.
- Limits: the row's ``time_limit`` and ``memory_limit_bytes``; where a row has none (CodeChef
  rows: null time limit, memory 0) the fallbacks :data:`FALLBACK_TIME_LIMIT_S` and
  :data:`FALLBACK_MEMORY_MB`, noted in the load report.
- Noted in the load report: rows whose Python solutions are all Python 2 (language 1; they are
  not run: the sandbox runs Python 3), rows with no Python solution, rows without a time or
  memory limit. Refused: rows with no gold test of the chosen kinds (``strict``: an error).
"""

from __future__ import annotations

from collections import Counter
from functools import partial

from .loaders import HUB_IDS, _io_pairs, _need
from .model import LoaderError, RowErrors, Task, TestCase
from .rows import ReportedTaskSet, field_of, iter_rows

GOLD_KINDS = ("public", "private", "generated")
DEFAULT_GOLD = GOLD_KINDS
# CURE's converted CodeContests files give every problem ``test_time_limit`` 1 (its data README:
# "usually set as 1"); Codeforces' most common memory limit is 256 MB.
FALLBACK_TIME_LIMIT_S = 1.0
FALLBACK_MEMORY_MB = 256
LANGUAGES = {0: "unknown", 1: "Python 2", 2: "C++", 3: "Python 3", 4: "Java"}
PYTHON3 = 3
PYTHON2 = 1
# the sandbox's native languages (the job format's ``language``) and their codes in the rows
NATIVE_CODES = {"cpp": 2, "java": 4}
RUN_LANGUAGES = ("python",) + tuple(NATIVE_CODES)


def parse_languages(languages) -> tuple[str, ...]:
    """``"python,cpp"`` (or a sequence) as a tuple of the languages whose solutions to keep;
    a name the sandbox does not run is a one-line LoaderError."""
    names = languages.split(",") if isinstance(languages, str) else list(languages)
    names = tuple(dict.fromkeys(n.strip().lower() for n in names if n.strip()))
    bad = [n for n in names if n not in RUN_LANGUAGES]
    if bad or not names:
        raise LoaderError(f"languages must be among {', '.join(RUN_LANGUAGES)}, got "
                          f"{','.join(bad) or 'none'}")
    return names


def parse_references(spec) -> dict[str, int] | None:
    """``--references``: ``N`` (the first N solutions of every language), ``java=N`` (of that
    language; the others all), or both, comma-separated (``40,java=10``): {language or ``*``:
    N}, or None for all. A count under 1 or an unknown language is a one-line LoaderError."""
    if spec is None or isinstance(spec, dict):
        return spec
    if isinstance(spec, int):
        spec = str(spec)
    caps = {}
    for part in str(spec).split(","):
        lang, _, n = part.strip().rpartition("=")
        lang = lang.strip().lower() or "*"
        if lang != "*" and lang not in RUN_LANGUAGES:
            raise LoaderError(f"--references: unknown language {lang!r} in {spec!r}; languages "
                              f"are {', '.join(RUN_LANGUAGES)}")
        try:
            caps[lang] = int(n)
        except ValueError:
            raise LoaderError(f"--references: {part.strip()!r} is not N or LANGUAGE=N") from None
        if caps[lang] < 1:
            raise LoaderError(f"--references must be at least 1, got {part.strip()!r}")
    return caps


def reference_cap(references, lang: str) -> int | None:
    """How many of ``lang``'s solutions to run under ``references`` (an int, a
    :func:`parse_references` dict, or None: all)."""
    if references is None or isinstance(references, int):
        return references
    return references.get(lang, references.get("*"))


# what a fetch re-reads (parquet reads only these columns)
LAZY_COLUMNS = ("name", "public_tests", "private_tests", "generated_tests", "solutions",
                "incorrect_solutions")


def parse_gold(gold) -> tuple[str, ...]:
    """``gold`` as a tuple of kinds: a tuple/list, or ``"public,private"``."""
    kinds = [k.strip() for k in gold.split(",")] if isinstance(gold, str) else list(gold)
    bad = [k for k in kinds if k not in GOLD_KINDS]
    if bad or not kinds:
        raise LoaderError(f"--gold_tests: unknown kind {', '.join(map(repr, bad)) or 'none'}; "
                          f"choose from {', '.join(GOLD_KINDS)} (comma-separated)")
    return tuple(dict.fromkeys(kinds))


def _count(block, where: str) -> int:
    """How many tests a block holds, checked as :func:`_io_pairs` would (without decoding)."""
    if block is None:
        return 0
    if isinstance(block, dict):
        ins, outs = block.get("input") or [], block.get("output") or []
        if len(ins) != len(outs):
            raise LoaderError(f"{where}: {len(ins)} inputs but {len(outs)} outputs")
        return len(ins)
    if isinstance(block, list):
        return len(block)
    raise LoaderError(f"{where}: tests must be {{input: [...], output: [...]}} or a list")


def gold_tests(row: dict, gold: tuple[str, ...], where: str) -> list[TestCase]:
    tests: list[TestCase] = []
    for kind in gold:
        tests += _io_pairs(row.get(f"{kind}_tests"), f"{where} {kind}_tests")
    return tests


def solutions(row: dict, key: str, language: int = PYTHON3) -> list[str]:
    sols = row.get(key) or {}
    return [s for lang, s in zip(sols.get("language") or [], sols.get("solution") or [])
            if lang == language]


def limits(row: dict) -> tuple[float | None, int | None]:
    """The row's (time limit s, memory limit MB), None where the row has none."""
    tl = row.get("time_limit")
    seconds = None
    if isinstance(tl, dict):
        seconds = (tl.get("seconds") or 0) + (tl.get("nanos") or 0) / 1e9 or None
    mem = row.get("memory_limit_bytes") or 0
    return seconds, (int(mem // (1 << 20)) or None)


def load_codecontests(source=None, split: str | None = None, gold=DEFAULT_GOLD,
                      strict: bool = False, languages="python") -> ReportedTaskSet:
    """CodeContests, row by row (see the module docstring). ``languages`` (``python``, ``cpp``,
    ``java``, comma-separated): with ``cpp`` or ``java``, the row's C++ / Java solutions and
    incorrect solutions are kept too, in ``metadata["native_references"]`` and
    ``metadata["native_incorrect"]`` ({language: solutions}); ``references`` stay Python's."""
    name = "codecontests"
    gold = parse_gold(gold)
    languages = parse_languages(languages)
    rows, origin, lazy = iter_rows(source or HUB_IDS[name], name, split, columns=LAZY_COLUMNS)
    tasks: list[Task] = []
    refused: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    errors = RowErrors(name, strict)
    for k, r, fetch in errors.readable(rows):
        with errors.row(k, r):
            pname = str(_need(r, "name", k, name))
            where = f"codecontests record {k} ({pname})"
            counts = {kind: _count(r.get(f"{kind}_tests"), f"{where} {kind}_tests")
                      for kind in GOLD_KINDS}
            n_gold = sum(counts[kind] for kind in gold)
            if n_gold == 0:
                why = (f"{where}: no gold tests ({'+'.join(gold)} "
                       f"{'is' if len(gold) == 1 else 'are'} empty); choose other --gold_tests "
                       f"or drop the row")
                if strict:
                    raise LoaderError(why)
                refused.setdefault("without gold tests", []).append(pname)
                continue
            public = _io_pairs(r.get("public_tests"), where + " public_tests")
            langs = Counter((r.get("solutions") or {}).get("language") or [])
            bad_langs = Counter((r.get("incorrect_solutions") or {}).get("language") or [])
            if not langs[PYTHON3]:
                if langs[PYTHON2]:
                    notes.setdefault("with Python 2 solutions only (not run)", []).append(pname)
                else:
                    notes.setdefault("without a Python solution", []).append(pname)
            seconds, mb = limits(r)
            if seconds is None:
                notes.setdefault(f"without a time limit ({FALLBACK_TIME_LIMIT_S:g} s used)",
                                 []).append(pname)
            if mb is None:
                notes.setdefault(f"without a memory limit ({FALLBACK_MEMORY_MB} MB used)",
                                 []).append(pname)
            files = ((r.get("input_file") or "").strip(), (r.get("output_file") or "").strip())
            mode = "stdio"
            if files == ("input.txt", "output.txt"):
                mode = "file"
                notes.setdefault("reading input.txt / writing output.txt", []).append(pname)
            elif any(f and f not in ("stdin", "stdout") for f in files):
                notes.setdefault("with other file names (run as stdio)", []).append(pname)
            metadata = {"difficulty": r.get("difficulty"), "cf_rating": r.get("cf_rating"),
                        "source": r.get("source"), "test_counts": counts, "gold": gold,
                        "languages": {LANGUAGES.get(lang, str(lang)): c for lang, c in langs.items()},
                        "incorrect_languages": {LANGUAGES.get(lang, str(lang)): c
                                                for lang, c in bad_langs.items()},
                        "incorrect": field_of(fetch, partial(solutions, key="incorrect_solutions"),
                                              bad_langs[PYTHON3], lazy),
                        "time_limit_from_row": seconds is not None,
                        "memory_limit_from_row": mb is not None}
            native = [lang for lang in languages if lang in NATIVE_CODES]
            if native:
                metadata["native_references"] = {
                    lang: field_of(fetch, partial(solutions, key="solutions",
                                                  language=NATIVE_CODES[lang]),
                                   langs[NATIVE_CODES[lang]], lazy) for lang in native}
                metadata["native_incorrect"] = {
                    lang: field_of(fetch, partial(solutions, key="incorrect_solutions",
                                                  language=NATIVE_CODES[lang]),
                                   bad_langs[NATIVE_CODES[lang]], lazy) for lang in native}
            if r.get("coevo_validation"):
                metadata["validation"] = r["coevo_validation"]
            tasks.append(Task(
                id=pname, source=name, kind="stdio", prompt=_need(r, "description", k, name),
                tests=field_of(fetch, partial(gold_tests, gold=gold, where=where), n_gold, lazy),
                examples=public,
                references=field_of(fetch, partial(solutions, key="solutions"), langs[PYTHON3], lazy),
                time_limit_s=float(seconds or FALLBACK_TIME_LIMIT_S),
                memory_limit_mb=int(mb or FALLBACK_MEMORY_MB),
                input_mode=mode,
                metadata=metadata))
    label = name if gold == DEFAULT_GOLD else f"{name} [{'+'.join(gold)}]"
    return ReportedTaskSet(label, origin, tasks, skipped=errors.lines, refused=refused,
                           notes=notes)
