"""The native task format: one record per problem, the fields of :class:`Task` as plain data.

A file is YAML (a list of records) or JSON / JSON Lines. A record::

    id: stdio/sum-two           # unique
    kind: stdio                 # or functional (then entry_point is required)
    prompt: Read two integers ...
    tests: [{input: "1 2\\n", output: "3\\n"}]       # functional: [{code: "assert f(1) == 2"}]
    examples: [...]             # optional: public tests a prompt may show
    references: ["..."]         # optional: reference solutions (`coevo tasks check` runs them)
    entry_point, setup, starter_code, program_prefix, time_limit_s, memory_limit_mb, checker

The team's bundled problems (``coevo_code/data/problems.yaml``, the embedded default run's data)
are this format; load them as ``load_tasks("bundled")``.
"""

from __future__ import annotations

from pathlib import Path

from .loaders import read_records
from .model import LoaderError, RowErrors, Task, TaskSet, TestCase

BUNDLED = Path(__file__).resolve().parent.parent / "data" / "problems.yaml"
_FIELDS = {"id", "kind", "prompt", "tests", "examples", "references", "entry_point", "setup",
           "starter_code", "program_prefix", "time_limit_s", "memory_limit_mb", "checker",
           "metadata"}


def _read(path: Path, name: str) -> list:
    if path.suffix in (".yaml", ".yml"):
        import yaml
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise LoaderError(f"{name}: cannot read {path}: {e}") from None
        except yaml.YAMLError as e:
            raise LoaderError(f"{name}: {path} is not valid YAML ({str(e).splitlines()[0]})") from None
        if not isinstance(data, list):
            raise LoaderError(f"{name}: {path} must hold a list of problems")
        return data
    return read_records(path, name)[0]


def _tests(rec: dict, key: str, where: str) -> list[TestCase]:
    raw = rec.get(key) or []
    if not isinstance(raw, list):
        raise LoaderError(f"{where}: {key} must be a list")
    out = []
    for j, t in enumerate(raw):
        if not isinstance(t, dict) or not ({"code"} <= set(t) or {"input", "output"} <= set(t)):
            raise LoaderError(f"{where}: {key}[{j}] needs input and output, or code")
        if "code" in t:
            out.append(TestCase(code=str(t["code"])))
        else:
            out.append(TestCase(input=str(t["input"]), output=str(t["output"])))
    return out


def load_native(source=None, name: str = "native", strict: bool = False) -> TaskSet:
    """Problems in the native format from a YAML/JSON/JSONL file. A record that cannot be used
    is skipped and counted (``strict``: its one-line error ends the load)."""
    if source is None:
        raise LoaderError(f"{name}: pass the path of a problems file (YAML, JSON or JSON Lines)")
    path = Path(source)
    if not path.exists():
        raise LoaderError(f"{name}: no such file {source!r}")
    tasks, seen, errors = [], set(), RowErrors(name, strict)
    for k, rec in errors.readable(enumerate(_read(path, name))):
        with errors.row(k, rec):
            where = f"{name} record {k}"
            if not isinstance(rec, dict):
                raise LoaderError(f"{where}: not a mapping")
            if "id" in rec:
                where += f" ({rec['id']})"
            unknown = sorted(set(rec) - _FIELDS)
            if unknown:
                raise LoaderError(f"{where}: unknown field(s) {', '.join(unknown)}")
            for key in ("id", "kind", "prompt", "tests"):
                if rec.get(key) in (None, ""):
                    raise LoaderError(f"{where}: missing field {key!r}")
            if rec["id"] in seen:
                raise LoaderError(f"{where}: duplicate id")
            seen.add(rec["id"])
            if rec["kind"] == "functional" and not rec.get("entry_point"):
                raise LoaderError(f"{where}: a functional problem needs entry_point")
            fields = {key: rec[key] for key in ("entry_point", "setup", "starter_code",
                                                 "program_prefix", "checker", "metadata") if key in rec}
            try:
                tasks.append(Task(id=str(rec["id"]), source=name, kind=rec["kind"],
                                  prompt=str(rec["prompt"]), tests=_tests(rec, "tests", where),
                                  examples=_tests(rec, "examples", where),
                                  references=[str(s) for s in rec.get("references") or []],
                                  time_limit_s=float(rec.get("time_limit_s", 1.0)),
                                  memory_limit_mb=int(rec.get("memory_limit_mb", 1024)),
                                  needs_checker=bool(rec.get("checker")), **fields))
            except LoaderError as e:
                raise LoaderError(f"{where}: {e}") from None
            except (TypeError, ValueError) as e:
                raise LoaderError(f"{where}: {e}") from None
    return TaskSet(name, str(path), tasks, skipped=errors.lines)


def load_bundled(source=None, strict: bool = False) -> TaskSet:
    """The bundled problems (or a native-format file given as ``source``)."""
    return load_native(source or BUNDLED, name="bundled", strict=strict)
