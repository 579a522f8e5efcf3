"""Read-only access to an Nsight Systems SQLite export, column by column.

Bulk reads go through the ADBC SQLite driver into Arrow and then numpy, so a
table with millions of rows is read without one Python object per row.
Columns are chosen by name (``PRAGMA table_info``), never by position, since
the schema drifts between nsys versions (``../shared/nsys/schema.md``); a
table that is absent (lazy exports omit empty tables) reads as no rows.

The file is opened with SQLite's ``mode=ro`` URI (``immutable=1`` as a fallback
when the directory is read-only and SQLite wants a lock file), so the user's
export is never written to.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import TraceFormatError
from . import SQLITE_MAGIC

_METADATA_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")


def _uri(path: Path, immutable: bool) -> str:
    quoted = urllib.parse.quote(str(path.resolve()))
    return f"file:{quoted}?mode=ro" + ("&immutable=1" if immutable else "")


def decode_texts(column: pa.ChunkedArray | pa.Array) -> list[str]:
    """Python strings of a text column; bytes that are not UTF-8 (a damaged file) become U+FFFD."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
            or pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        column = column.cast(pa.large_string())  # an empty result is typed int64 by the driver
    raw = column.cast(pa.large_binary()).to_pylist()
    return ["" if b is None else b.decode("utf-8", "replace") for b in raw]


class NsysDB:
    """An open nsys export: table and column discovery plus Arrow/numpy reads.

    Parameters
    ----------
    path : path-like
        The ``.sqlite`` export. It is opened read-only.

    Raises
    ------
    TraceFormatError
        When the file is not a SQLite database or not an nsys export.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with open(self.path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
        if head != SQLITE_MAGIC:
            raise TraceFormatError("not a SQLite database (an nsys export starts with 'SQLite format 3')",
                                   path=str(self.path), offset=0)
        self._meta = self._open_meta()
        self.tables: set[str] = {r[0] for r in self._meta_query("SELECT name FROM sqlite_master WHERE type='table'")}
        if "StringIds" not in self.tables or "TARGET_INFO_SESSION_START_TIME" not in self.tables:
            raise TraceFormatError("a SQLite database but not an Nsight Systems export (no StringIds or "
                                   "TARGET_INFO_SESSION_START_TIME table)", path=str(self.path))
        self._columns: dict[str, list[str]] = {}
        self._adbc: Any = None

    # -- small queries through the standard library -------------------------------------------
    def _open_meta(self) -> sqlite3.Connection:
        last: Exception | None = None
        for immutable in (False, True):
            try:
                con = sqlite3.connect(_uri(self.path, immutable), uri=True, check_same_thread=False)
                con.text_factory = lambda b: b.decode("utf-8", "replace")
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return con
            except sqlite3.DatabaseError as exc:
                last = exc
        raise TraceFormatError(f"cannot read the SQLite file: {last}", path=str(self.path)) from last

    def _meta_query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._meta.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(f"SQLite error ({exc}) in: {sql[:120]}", path=str(self.path)) from exc

    def query_rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of a small query (metadata tables, device lists) as Python tuples."""
        return self._meta_query(sql)

    def columns(self, table: str) -> list[str]:
        """Column names of ``table`` in file order; empty when the table is absent."""
        if table not in self.tables:
            return []
        if table not in self._columns:
            self._columns[table] = [r[1] for r in self._meta_query(f'PRAGMA table_info("{table}")')]
        return self._columns[table]

    def has(self, table: str, *columns: str) -> bool:
        """True when ``table`` exists and has every one of ``columns``."""
        cols = self.columns(table)
        return bool(cols) and all(c in cols for c in columns)

    def metadata(self) -> dict[str, str]:
        """The export's ``name -> value`` metadata (``META_DATA_EXPORT`` or the older ``EXPORT_META_DATA``)."""
        for table in _METADATA_TABLES:
            if self.has(table, "name", "value"):
                return {str(k): str(v) for k, v in self._meta_query(f'SELECT name, value FROM "{table}"')}
        return {}

    # -- bulk reads through ADBC/Arrow ---------------------------------------------------------
    def arrow(self, sql: str) -> pa.Table:
        """Run ``sql`` and return the result as an Arrow table (no Python object per row).

        Text columns must not start with NULLs (the driver infers types from
        the first rows): wrap them as ``COALESCE(col, '')``.
        """
        if self._adbc is None:
            import adbc_driver_sqlite.dbapi as adbc

            self._adbc = adbc.connect(_uri(self.path, False))
        cur = self._adbc.cursor()
        try:
            cur.execute(sql)
            return cur.fetch_arrow_table()
        except Exception as exc:  # the driver raises its own DB-API error classes
            raise TraceFormatError(f"SQLite error ({exc}) in: {sql[:160]}", path=str(self.path)) from exc
        finally:
            cur.close()

    def int_columns(self, sql: str, fill: int = -1) -> dict[str, np.ndarray]:
        """Integer columns of ``sql`` as int64 numpy arrays, NULL replaced by ``fill``."""
        table = self.arrow(sql)
        out: dict[str, np.ndarray] = {}
        for name, col in zip(table.column_names, table.columns):
            if pa.types.is_null(col.type):
                out[name] = np.full(len(col), fill, np.int64)
                continue
            if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
                raise TraceFormatError(f"column {name!r} holds {col.type} values where integers were expected",
                                       path=str(self.path))
            filled = col if col.null_count == 0 else col.fill_null(fill)
            values = filled.to_numpy()
            if pa.types.is_floating(col.type):  # a REAL where an INTEGER belongs: only whole numbers in range pass
                whole = np.isfinite(values) & (values == np.floor(values)) & (np.abs(values) < 2.0**63)
                if not whole.all():
                    raise TraceFormatError(f"column {name!r} holds values that are not integers where integers were "
                                           f"expected (first at row {int(np.flatnonzero(~whole)[0])} of its query)",
                                           path=str(self.path))  # fmt: skip
            out[name] = values.astype(np.int64, copy=False)
        return out

    def strings(self) -> tuple[np.ndarray, list[str]]:
        """``StringIds`` as (sorted ids, values): the one string table every name points into."""
        t = self.arrow("SELECT id, COALESCE(value, '') AS value FROM StringIds ORDER BY id")
        ids = t.column("id").fill_null(-1).to_numpy().astype(np.int64) if t.num_rows else np.empty(0, np.int64)
        return ids, decode_texts(t.column("value"))

    def close(self) -> None:
        """Close both connections."""
        self._meta.close()
        if self._adbc is not None:
            self._adbc.close()
            self._adbc = None

    def __enter__(self) -> NsysDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
