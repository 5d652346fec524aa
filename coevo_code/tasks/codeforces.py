"""CodeForces (``open-r1/codeforces``): the loader, iterating the split row by row.

Fields read: ``id, title, description, input_format, output_format, interaction_format, note,
examples, official_tests, official_tests_complete, input_mode, generated_checker, executable,
time_limit, memory_limit, rating, tags``.

- Gold tests: ``official_tests`` (the examples where none are published), decoded from their
  row when used (:mod:`.rows`).
- ``generated_checker``: a Python script run the way open-r1 runs it (``checker.py INPUT
  CORRECT_OUTPUT SOLUTION_OUTPUT``, verdict ``1`` on stdout with exit status 0), as the stdio
  job's checker (:func:`coevo_code.execution.fileio.files_checker`) in a sandbox cell of its own.
- ``input_mode: file``: the program reads ``input.txt`` and writes ``output.txt`` (the task's
  ``input_mode``, see docs/EXECUTION.md).
- Interactive problems (a non-empty ``interaction_format``, or a statement saying "This is an
  interactive problem") are refused: no interactor is published, so no verdict can be computed.
  They are counted by name in the load report (``strict``: an error instead).
- ``config``: ``default`` (every problem) or ``verifiable``. From the hub it is the dataset's
  configuration of that name; on a local file ``verifiable`` keeps the rows whose ``executable``
  is true (``official_tests_complete`` where a row has no ``executable``), the others are
  refused as "not verifiable".
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from ..execution.fileio import files_checker
from .loaders import HUB_IDS, _io_pairs, _need
from .model import LoaderError, RowErrors, Task, TestCase
from .rows import ReportedTaskSet, field_of, iter_rows

CONFIGS = ("default", "verifiable")
LAZY_COLUMNS = ("id", "official_tests")


def is_interactive(row: dict) -> bool:
    if (row.get("interaction_format") or "").strip():
        return True
    text = f"{row.get('title') or ''}\n{row.get('description') or ''}".lower()
    return "this is an interactive problem" in text


def _official(row: dict, where: str) -> list[TestCase]:
    return _io_pairs(row.get("official_tests") or [], where + " official_tests")


def load_codeforces(source=None, split: str | None = None, config: str = "default",
                    strict: bool = False, submissions=None, languages=None,
                    per_problem: int | None = None) -> ReportedTaskSet:
    """open-r1/codeforces, row by row (see the module docstring). ``submissions``: a file of
    ``open-r1/codeforces-submissions`` (or its hub id) whose accepted and wrong submissions in
    ``languages`` (default ``python``) become the problems' references and incorrect solutions,
    as CodeContests keeps them (:mod:`.submissions`; at most ``per_problem`` of each kind and
    language)."""
    if languages is not None and submissions is None:
        raise LoaderError("codeforces: --languages needs --submissions (open-r1/codeforces holds "
                          "no solutions; its submissions are open-r1/codeforces-submissions)")
    name = "codeforces"
    if config not in CONFIGS:
        raise LoaderError(f"codeforces: unknown --dataset_config {config!r}; choose from "
                          f"{', '.join(CONFIGS)}")
    hub = source is None or not Path(source).exists()
    rows, origin, lazy = iter_rows(source or HUB_IDS[name], name, split, columns=LAZY_COLUMNS,
                                   hub_config=config if hub else None)
    tasks: list[Task] = []
    refused: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}

    def refuse(reason: str, why: str, pid: str):
        if strict:
            raise LoaderError(why)
        refused.setdefault(reason, []).append(pid)

    errors = RowErrors(name, strict)
    for k, r, fetch in errors.readable(rows):
        with errors.row(k, r):
            pid = str(_need(r, "id", k, name))
            where = f"codeforces record {k} ({pid})"
            if is_interactive(r):
                refuse("interactive", f"{where}: interactive problem (it talks with an interactor "
                       "that the dataset does not publish): refused, no verdict can be computed",
                       pid)
                continue
            if config == "verifiable" and not hub:
                ok = r.get("executable")
                if ok is None:
                    ok = r.get("official_tests_complete")
                if not ok:
                    refuse("not verifiable", f"{where}: not in the verifiable configuration "
                           "(executable is false)", pid)
                    continue
            examples = _io_pairs(r.get("examples") or [], where + " examples")
            n_official = len(r.get("official_tests") or [])
            if n_official:
                tests = field_of(fetch, partial(_official, where=where), n_official, lazy)
            else:
                tests = examples
                if examples:
                    notes.setdefault("without official tests (examples used)", []).append(pid)
            if not len(tests):
                refuse("without tests", f"{where}: no tests (official_tests and examples are "
                       "empty)", pid)
                continue
            if n_official and r.get("official_tests_complete") is False:
                notes.setdefault("with incomplete official tests", []).append(pid)
            mode = r.get("input_mode") or "stdio"
            if mode not in ("stdio", "file"):
                raise LoaderError(f"{where}: input_mode {mode!r}, expected stdio or file")
            if mode == "file":
                notes.setdefault("reading input.txt / writing output.txt", []).append(pid)
            parts = [r.get("title") or "", _need(r, "description", k, name),
                     "Input\n" + (r.get("input_format") or ""),
                     "Output\n" + (r.get("output_format") or ""), r.get("note") or ""]
            checker = r.get("generated_checker") or None
            tasks.append(Task(id=pid, source=name, kind="stdio",
                              prompt="\n\n".join(p for p in parts if p.strip()),
                              tests=tests, examples=examples,
                              time_limit_s=float(r.get("time_limit") or 1.0),
                              memory_limit_mb=max(16, int(r.get("memory_limit") or 256)),
                              checker=files_checker(checker) if checker else None,
                              needs_checker=bool(checker), input_mode=mode,
                              metadata={"generated_checker": checker, "rating": r.get("rating"),
                                        "tags": r.get("tags"), "input_mode": mode,
                                        "official_tests_complete": r.get("official_tests_complete")}))
    label = name if config == "default" else f"{name}/{config}"
    if submissions is not None:
        _attach(tasks, submissions, languages or "python", per_problem, strict, notes)
    return ReportedTaskSet(label, origin, tasks, skipped=errors.lines, refused=refused,
                           notes=notes)


def _attach(tasks, source, languages, per_problem, strict, notes) -> None:
    """Each task's submissions, where :mod:`.codecontests` keeps a row's solutions: Python's in
    ``references`` and ``metadata["incorrect"]``, C++'s and Java's in
    ``metadata["native_references"]`` and ``metadata["native_incorrect"]``."""
    from .codecontests import NATIVE_CODES, parse_languages
    from .submissions import PER_PROBLEM, read_submissions
    languages = parse_languages(languages)
    subs = read_submissions(source, [t.id for t in tasks], languages,
                            per_problem or PER_PROBLEM, strict)
    for t in tasks:
        t.references = subs.of(t.id, "references", "python")
        t.metadata["incorrect"] = subs.of(t.id, "incorrect", "python")
        native = [lang for lang in languages if lang in NATIVE_CODES]
        t.metadata["native_references"] = {lang: subs.of(t.id, "references", lang)
                                           for lang in native}
        t.metadata["native_incorrect"] = {lang: subs.of(t.id, "incorrect", lang)
                                          for lang in native}
        t.metadata["languages"] = {lang: len(subs.of(t.id, "references", lang))
                                   for lang in languages}
        if not any(subs.of(t.id, "references", lang) for lang in languages):
            notes.setdefault(f"without an accepted {'/'.join(languages)} submission",
                             []).append(t.id)
    if subs.left_out:
        notes[f"kinds of submissions left out ({sum(subs.left_out.values())} submissions)"] = [
            f"{why}: {n}" for why, n in subs.left_out.most_common()]
    if subs.skipped:
        notes.setdefault("submissions skipped (unreadable)", []).extend(subs.skipped[:8])
