"""Rows of a large split, one at a time, and fields decoded only when they are used.

A CodeContests train split is several GB of JSON (rows average 0.5 MB, nearly all of it tests and
solutions). Turning it into a list of dicts does not fit a training node's host memory. Here a
split is *iterated*: each row is parsed, what a task needs at once (name, statement, limits,
examples, counts) is kept, and the big fields (gold tests, reference solutions) become
:class:`RowField` sequences that re-read their row when used and keep nothing in between.

Where the format allows it:

- ``.jsonl``: rows are re-read at their byte offset (one line, one ``json.loads``);
- ``.parquet``: rows are re-read from their row group, only the columns needed (the last row
  group read is kept, so reading tasks in order reads each group once);
- a hub id: ``datasets`` keeps the split as memory-mapped Arrow; rows are re-read by index;
- ``.jsonl.gz`` and ``.json`` (a list) cannot be re-read in place: their fields are decoded at
  once (still one row at a time for ``.jsonl.gz``).
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .loaders import hub_dataset
from .model import LoaderError, TaskSet, Unreadable, read_json


# ---- re-reading one row ------------------------------------------------------------------------
class JsonlRow:
    """Row of a ``.jsonl`` file at a byte offset."""

    __slots__ = ("path", "offset")

    def __init__(self, path: str, offset: int):
        self.path, self.offset = path, offset

    def __call__(self) -> dict:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            return json.loads(f.readline())


class _ParquetFile:
    """One open parquet file, with the last row group read (columns asked for) cached."""

    _open: dict[str, "_ParquetFile"] = {}

    def __init__(self, path: str):
        import pyarrow.parquet as pq
        self.file = pq.ParquetFile(path)
        self.cached: tuple | None = None

    @classmethod
    def get(cls, path: str) -> "_ParquetFile":
        if path not in cls._open:
            cls._open[path] = cls(path)
        return cls._open[path]

    def row(self, group: int, index: int, columns: tuple[str, ...]) -> dict:
        key = (group, columns)
        if self.cached is None or self.cached[0] != key:
            self.cached = (key, self.file.read_row_group(group, columns=list(columns)))
        return self.cached[1].slice(index, 1).to_pylist()[0]


class ParquetRow:
    """Row ``index`` of row group ``group`` of a parquet file, read with ``columns`` only."""

    __slots__ = ("path", "group", "index", "columns")

    def __init__(self, path: str, group: int, index: int, columns: tuple[str, ...]):
        self.path, self.group, self.index, self.columns = path, group, index, columns

    def __call__(self) -> dict:
        return _ParquetFile.get(self.path).row(self.group, self.index, self.columns)


class HubRow:
    """Row ``index`` of a ``datasets`` split (memory-mapped Arrow)."""

    __slots__ = ("dataset", "index")

    def __init__(self, dataset, index: int):
        self.dataset, self.index = dataset, index

    def __call__(self) -> dict:
        return self.dataset[self.index]


class Decoded:
    """A row already in memory (formats that cannot be re-read in place)."""

    __slots__ = ("row",)

    def __init__(self, row: dict):
        self.row = row

    def __call__(self) -> dict:
        return self.row


class RowField(Sequence):
    """A list-like field of a task (its gold tests, its references) decoded from its row each
    time it is used: ``len`` is known without decoding; iteration, indexing and slicing decode
    the row, convert the field and keep nothing. ``convert(row)`` returns the whole list."""

    __slots__ = ("fetch", "convert", "n")

    def __init__(self, fetch: Callable[[], dict], convert: Callable[[dict], list], n: int):
        self.fetch, self.convert, self.n = fetch, convert, n

    def materialize(self) -> list:
        items = self.convert(self.fetch())
        if len(items) != self.n:
            raise LoaderError(f"a row changed on disk since it was loaded ({self.n} items "
                              f"expected, {len(items)} read)")
        return items

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator:
        return iter(self.materialize()) if self.n else iter(())

    def __reversed__(self) -> Iterator:
        return reversed(self.materialize()) if self.n else iter(())

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(self.n)
            if not len(range(start, stop, step)):
                return []
            return self.materialize()[i]
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return self.materialize()[i]

    def __eq__(self, other) -> bool:
        return list(self) == list(other) if isinstance(other, (list, RowField)) else NotImplemented

    def __repr__(self) -> str:
        return f"RowField({self.n} items, decoded when used)"


def field_of(fetch, convert, n: int, lazy: bool):
    """``RowField`` where rows can be re-read, else the decoded list."""
    return RowField(fetch, convert, n) if lazy else convert(fetch())


# ---- iterating a split -------------------------------------------------------------------------
def iter_rows(source: str | Path, name: str, split: str | None = None,
              columns: Sequence[str] | None = None,
              hub_config: str | None = None) -> tuple[Iterator[tuple[int, dict, Any]], str, bool]:
    """``(iterator of (k, row, fetch), origin, lazy)``: every row of a local file or a hub split,
    one at a time. ``fetch()`` re-reads the row (``lazy``) or returns it (not lazy). ``columns``:
    the columns a fetch needs (parquet reads only those)."""
    path = Path(source)
    if path.exists():
        return _iter_file(path, name, columns), str(path), _lazy_format(path)
    if re.fullmatch(r"[\w.-]+/[\w.-]+", str(source)):
        return _iter_hub(str(source), name, split, hub_config), f"hub:{source}", True
    raise LoaderError(f"{name}: no such file {source!r} (and it is not a hub id owner/name)")


def _lazy_format(path: Path) -> bool:
    return path.suffix in (".jsonl", ".parquet")


def _iter_file(path: Path, name: str, columns) -> Iterator[tuple[int, dict, Any]]:
    try:
        if path.suffix == ".parquet":
            yield from _iter_parquet(path, name, columns)
            return
        if path.suffix == ".jsonl":
            with open(path, "rb") as f:
                k, offset = 0, 0
                for n, line in enumerate(f, 1):  # a line that cannot be read: its row's error
                    if line.strip():
                        try:
                            row = read_json(line, f"{name}: {path} line {n}")
                        except LoaderError as e:
                            row = Unreadable(str(e))
                        yield k, row, JsonlRow(str(path), offset)
                        k += 1
                    offset += len(line)
            return
        if "".join(path.suffixes[-2:]) == ".jsonl.gz":
            with gzip.open(path, "rb") as f:
                k = 0
                for n, line in enumerate(f, 1):
                    if line.strip():
                        try:
                            row = read_json(line, f"{name}: {path} line {n}")
                        except LoaderError as e:
                            row = Unreadable(str(e))
                        yield k, row, Decoded(row)
                        k += 1
            return
        with open(path, "rb") as f:
            data = read_json(f.read(), f"{name}: {path}")
    except (OSError, EOFError) as e:
        raise LoaderError(f"{name}: cannot read {path}: {e}") from None
    if isinstance(data, dict):
        data = data.get("data", data.get("rows", [data]))
    if not isinstance(data, list):
        raise LoaderError(f"{name}: {path} holds no list of records")
    for k, row in enumerate(data):
        yield k, row, Decoded(row)


def _iter_parquet(path: Path, name: str, columns) -> Iterator[tuple[int, dict, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise LoaderError(f"{name}: reading {path} needs pyarrow (pip install pyarrow)") from None
    pf = pq.ParquetFile(path)
    have = pf.schema_arrow.names
    cols = tuple(c for c in (columns or have) if c in have)
    k = 0
    for group in range(pf.num_row_groups):
        for start, batch in _batches(pf, group):
            for i, row in enumerate(batch.to_pylist()):
                yield k, row, ParquetRow(str(path), group, start + i, cols)
                k += 1


def _batches(pf, group: int, size: int = 32):
    start = 0
    for batch in pf.iter_batches(batch_size=size, row_groups=[group]):
        yield start, batch
        start += batch.num_rows


def _iter_hub(hub_id: str, name: str, split: str | None,
              config: str | None) -> Iterator[tuple[int, dict, Any]]:
    ds = hub_dataset(hub_id, name, split, config)
    for k in range(len(ds)):
        yield k, ds[k], HubRow(ds, k)


# ---- what a load reports -----------------------------------------------------------------------
@dataclass
class ReportedTaskSet(TaskSet):
    """A task set with what its loader refused (reason -> problem ids, not loaded) and noted
    (reason -> problem ids, loaded), both shown by ``summary()``."""

    refused: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)

    def summary(self) -> str:
        s = super().summary()
        for title, groups in (("refused", self.refused), ("noted", self.notes)):
            if groups:
                s += f"; {title}: " + "; ".join(
                    f"{len(ids)} {reason} ({_ids(ids)})" for reason, ids in groups.items())
        return s


def _ids(ids: list[str], shown: int = 8) -> str:
    return ", ".join(ids[:shown]) + (f", ... {len(ids) - shown} more" if len(ids) > shown else "")
