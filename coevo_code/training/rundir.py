"""Run directories: the metrics file, complete checkpoints, and what resume keeps.

A run directory holds ``config.yaml`` (the inputs that reproduce the run; resume reads it),
``resolved_config.json`` (every field after defaults), ``metrics.jsonl`` (one line per optimiser
step, steps from 1, every key on every line: a finite number or null), ``eval.jsonl`` (one line
per evaluation), ``checkpoint-N/`` (TRL/transformers checkpoints), ``final/`` (the last weights)
and, for the tiny model, ``initial-model/``.

A checkpoint is complete when its ``trainer_state.json`` (which transformers writes last, after
the weights, optimiser, scheduler and RNG states) parses and names step N. Resume continues from
the last complete checkpoint, moves any later, half-written one aside (``incomplete-checkpoint-N``)
and drops the metrics lines of steps after the checkpoint, which the resumed run writes again.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")  # transformers' PREFIX_CHECKPOINT_DIR + "-N"
STEP_KEYS_FIRST = ("step", "epoch", "generation", "wall_s")


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    """Where the checkpoint of ``step`` is (or will be) saved."""
    return Path(run_dir) / f"checkpoint-{step}"


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """Every ``checkpoint-N`` directory of a run, complete or not, as (N, path) by N."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = []
    for p in run_dir.iterdir():
        m = CHECKPOINT.match(p.name)
        if m and p.is_dir():
            found.append((int(m.group(1)), p))
    return sorted(found)


def checkpoint_step(path: Path) -> int | None:
    """N if ``path`` is a complete ``checkpoint-N``, else None."""
    m = CHECKPOINT.match(path.name)
    if not m or not path.is_dir():
        return None
    try:
        state = json.loads((path / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return None
    step = int(m.group(1))
    return step if state.get("global_step") == step else None


def last_complete_checkpoint(run_dir: Path) -> tuple[Path | None, list[Path]]:
    """(the last complete checkpoint or None, the checkpoints after it that are not complete)."""
    best, later = None, []
    for step, p in checkpoints(run_dir):
        if checkpoint_step(p) is not None:
            best, later = p, []
        else:
            later.append(p)
    return best, later


def refuse_existing_run(run_dir: Path) -> None:
    """A fresh run must not write into a directory that holds one (nothing gets overwritten)."""
    run_dir = Path(run_dir)
    if (run_dir / "metrics.jsonl").exists() or checkpoints(run_dir):
        raise FileExistsError(f"{run_dir} already holds a run; continue it with "
                              f"`coevo train --resume {run_dir}` or pick another --output_dir")


def set_aside(paths) -> list[Path]:
    moved = []
    for p in paths:
        dest = p.with_name("incomplete-" + p.name)
        k = 1
        while dest.exists():
            k += 1
            dest = p.with_name(f"incomplete{k}-{p.name}")
        p.rename(dest)
        moved.append(dest)
    return moved


def truncate_jsonl(path: Path, last_step: int) -> int:
    """Keep the lines of ``path`` whose ``step`` is at most ``last_step`` (and drop a torn last
    line); returns how many lines were dropped."""
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            dropped += 1
            continue
        if isinstance(rec, dict) and isinstance(rec.get("step"), int) and rec["step"] <= last_step:
            kept.append(line)
        else:
            dropped += 1
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(x + "\n" for x in kept), encoding="utf-8")
    os.replace(tmp, path)
    return dropped


def clean(value):
    """JSON-safe: finite floats, ints, strings, None; lists of those (matrices) kept as lists."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, int):
        return value
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    return x if math.isfinite(x) else None


class JsonlWriter:
    """Append-only JSON Lines, flushed and fsynced per line (a killed run loses no line)."""

    def __init__(self, path: Path, keys: tuple[str, ...]):
        self.path = Path(path)
        self.keys = keys
        self._f = None

    def write(self, record: dict) -> None:
        if self._f is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(self.path, "a", encoding="utf-8")
        line = {k: clean(record.get(k)) for k in self.keys}
        self._f.write(json.dumps(line) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def read_jsonl(path: Path) -> list[dict]:
    out = []
    for k, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                raise ValueError(f"{path} line {k} is not valid JSON") from None
    return out
