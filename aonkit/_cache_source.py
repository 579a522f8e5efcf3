"""A cache's event text kept in its source: each event's span in the uncompressed JSON file, checked per chunk.

A cache of an uncompressed JSON trace written as a cache of that file (a job's caches, ``aonkit cache``) does
not copy the events' text, which is nearly the whole file (a 54 MB rank of ``bench/scale.py``'s job: 53.7 MB of
text, 64-73 ms a cache to compress and write). Its text file holds each event's span in the source instead
(``start``, ``end``, ``args_rel``; delta-coded, about 0.35 MB and 8 ms), and the sidecar the source's size and
a CRC-32 of every :data:`CHUNK_BYTES` of it, taken from the parser's bytes when the file still has the size and
mtime it had before the read (:func:`source_record`). A look-up reads the chunks its events touch (copied,
never mapped) and checks each before any of its bytes is used: a source edited, truncated or replaced since
is a :class:`~aonkit.TraceFormatError` naming it, never wrong text; a chunk once checked is kept. A look-up
over a few events (the stream waits a job's graph reads in every rank) reads only their chunks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ._cache_text import grouped
from ._filecheck import crc32_buffer, same_version
from .errors import TraceFormatError
from .event_text import PartlyRead, RawEvents

CHUNK_BYTES = 1 << 18
"""Bytes of the source per CRC-32 in the sidecar (216 for a 54 MB rank): a look-up of a few events reads and
checks a few of them (a MiB took 1.4 ms a rank to read in a job's graph)."""
GROUP_ROWS = 4096
"""Events per row group of the spans file: a look-up over a few events decodes only their groups."""
COLUMNS = ("start", "end", "args_rel")


def chunk_crcs(buf: Any, chunk: int) -> list[int]:
    """CRC-32 of each ``chunk`` bytes of ``buf`` (a bytes-like object), the last one possibly shorter."""
    view = memoryview(buf)
    return [crc32_buffer(view[i : i + chunk]) for i in range(0, len(view), chunk)]


def source_record(buf: np.ndarray, source: dict[str, Any]) -> dict[str, Any] | None:
    """The sidecar's record of the source as the text's home, or None when ``buf`` is not the file's bytes.

    ``buf`` is what the parser read and ``source`` the file's fingerprint taken before the read
    (:func:`aonkit._filecheck.fingerprint`). The file must still have that size and mtime, the size of ``buf``,
    and ``buf``'s first and last 4 KiB (a gzip source, a converted one such as nsys's, or a salvaged text that
    is not the file's bytes keeps its text in the cache). The checksums are ``buf``'s: the parser never writes
    to it, and reading the file again to check cost 17 ms a rank (a change made since, at the same size and
    nanosecond mtime, is caught when the text is read back: its chunk's CRC-32 differs).
    """
    path, n = source.get("path"), len(buf)
    if not n or not path or not same_version(path, source) or source.get("bytes") != n:
        return None
    edge = min(n, 4096)
    try:
        with open(path, "rb") as fh:
            head = fh.read(edge)
            fh.seek(n - edge)
            tail = fh.read(edge)
    except OSError:
        return None
    flat = np.ascontiguousarray(buf)
    if head != flat[:edge].tobytes() or tail != flat[n - edge :].tobytes():
        return None
    return {"bytes": n, "chunk_bytes": CHUNK_BYTES, "crc32": chunk_crcs(flat, CHUNK_BYTES)}


def spans_table(start: np.ndarray, end: np.ndarray, args_rel: np.ndarray) -> pa.Table:
    """The text file of a cache whose text stays in its source: every event's span, and its args' offset in it."""
    return pa.table({"start": np.asarray(start, np.int64), "end": np.asarray(end, np.int64),
                     "args_rel": np.asarray(args_rel, np.int64)})  # fmt: skip


def write_spans(table: pa.Table, path: Path) -> None:
    """Write :func:`spans_table`'s table (offsets delta-coded, LZ4: 0.35 MB for 185k events).

    zstd made it 0.15 MB but took 3.2 ms to read (a job's graph reads it in every rank), plain 4.4 MB.
    """
    pq.write_table(table, path, compression="lz4", use_dictionary=False, column_encoding="DELTA_BINARY_PACKED",
                   row_group_size=GROUP_ROWS)


class SourceText(PartlyRead):
    """The :class:`~aonkit.trace.EventText` of a cache whose text stays in its source file.

    Parameters
    ----------
    path : Path
        The cache's text file (the spans; named in errors).
    data : pyarrow.Buffer
        Its bytes, mapped and checked when the cache was read.
    n : int
        Events in the cache.
    source : Path or None
        Where the source is now (:func:`aonkit.cache.source_file`); None: not found.
    record : dict
        The sidecar's :func:`source_record`.
    """

    def __init__(self, path: Path, data: pa.Buffer, n: int, source: Path | None, record: dict[str, Any]) -> None:
        super().__init__(None, None, None, loader=self._whole)
        self._path, self._data, self._n, self._source, self._record = path, data, n, source, record
        self._spans: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._file: pq.ParquetFile | None = None
        self._starts: np.ndarray | None = None  # first event of each row group of the spans, and n
        self._groups: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # row groups read so far
        self._bytes: np.ndarray | None = None  # the source's bytes, filled as chunks are read
        self._view: np.ndarray | None = None  # the same, read-only
        self._checked: np.ndarray | None = None  # per chunk: read, and its CRC-32 matched

    def _parquet(self) -> pq.ParquetFile:
        if self._file is None:
            self._file, self._starts = grouped(self._data, self._n, self._path, "span file")
        return self._file

    def _decode(self, groups: list[int] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, ends, args offsets) of the events of row ``groups`` in order (None: all), checked."""
        pf = self._parquet()
        try:
            table = pf.read(columns=list(COLUMNS)) if groups is None else pf.read_row_groups(groups, list(COLUMNS))
            start, end, rel = (table.column(c).to_numpy() for c in COLUMNS)
        except (pa.ArrowException, KeyError) as exc:
            raise TraceFormatError(f"unreadable event spans in the cache ({exc})", path=str(self._path)) from None
        if not all(a.dtype == np.int64 for a in (start, end, rel)):
            raise TraceFormatError("the cache's event spans are not int64", path=str(self._path))
        if len(start) and (start.min() < 0 or np.any(end <= start) or end.max() > self._record.get("bytes")
                           or np.any((rel < -1) | (rel >= end - start))):  # fmt: skip
            raise TraceFormatError("the cache's event spans do not fit its source", path=str(self._path))
        return start, end, np.where(rel >= 0, start + rel, -1)

    def _read_spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._spans is None:
            self._spans = self._decode(None)
            self._groups.clear()
        return self._spans

    def _spans_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, ends, args offsets) of ``rows``: from the row groups holding them while few, else all."""
        if self._spans is None:
            self._parquet()
            starts = self._starts
            assert starts is not None
            g = np.searchsorted(starts, rows, "right") - 1
            groups = np.unique(g)
            missing = [k for k in groups.tolist() if k not in self._groups]
            if 2 * (len(self._groups) + len(missing)) <= len(starts) - 1:
                if missing:
                    parts = self._decode(missing)
                    bounds = np.cumsum([0, *(starts[k + 1] - starts[k] for k in missing)])
                    for j, k in enumerate(missing):
                        self._groups[k] = tuple(a[bounds[j] : bounds[j + 1]] for a in parts)  # type: ignore[assignment]
                out = [np.empty(len(rows), np.int64) for _ in range(3)]
                for k in groups.tolist():
                    here = g == k
                    for o, a in zip(out, self._groups[k]):
                        o[here] = a[rows[here] - starts[k]]
                return out[0], out[1], out[2]
        start, end, at = self._read_spans()
        return start[rows], end[rows], at[rows]

    def _store(self) -> np.ndarray:
        """The source's bytes as far as read: a buffer of its size in ordinary pages, filled chunk by chunk."""
        if self._bytes is None:
            size, step, crcs = (self._record[k] for k in ("bytes", "chunk_bytes", "crc32"))
            if not (isinstance(size, int) and isinstance(step, int) and step >= 1 and isinstance(crcs, list)
                    and len(crcs) == -(-size // step)):  # fmt: skip
                raise TraceFormatError("the cache's record of its source has the wrong chunks", path=str(self._path))
            from ._fresh import fresh

            self._bytes = fresh(size, np.uint8)  # untouched pages cost nothing: a look-up fills a few chunks
            self._view = self._bytes.view()
            self._view.flags.writeable = False  # what look-ups see (one kernel type, as a cache's text)
            self._checked = np.zeros(len(crcs), bool)
        return self._view

    def _fail(self, why: str) -> TraceFormatError:
        return TraceFormatError(f"the cache keeps its event text in its source, which {why}: load the source "
                                "again to re-create the cache", path=str(self._source or self._path))  # fmt: skip

    def _check(self, wanted: np.ndarray) -> None:
        """Read the chunks marked in ``wanted`` (bool per chunk) that are not yet, each checked against its CRC-32.

        The bytes are copied, not mapped: a source rewritten in place later (a profiler exporting to the same
        path) can neither change text already checked nor end a mapping under a reader.
        """
        view = self._store()
        step, crcs, size = self._record["chunk_bytes"], self._record["crc32"], self._record["bytes"]
        assert self._bytes is not None and self._checked is not None
        todo = np.flatnonzero(wanted & ~self._checked)
        if not len(todo):
            return
        if self._source is None:
            raise self._fail("is missing")
        try:
            with open(self._source, "rb") as fh:
                if (now := os.fstat(fh.fileno()).st_size) != size:
                    raise self._fail(f"has changed ({now} bytes, {size} when the cache was written)")
                breaks = np.flatnonzero(np.diff(todo) != 1) + 1  # runs of adjacent chunks: one read each
                for run in np.split(todo, breaks):
                    lo, hi = int(run[0]) * step, min(size, (int(run[-1]) + 1) * step)
                    fh.seek(lo)
                    if fh.readinto(memoryview(self._bytes[lo:hi])) != hi - lo:
                        raise self._fail(f"has changed (it ends before byte {hi})")
        except OSError as exc:
            raise self._fail(f"cannot be read ({exc.strerror or exc})") from None
        for k in todo.tolist():
            if crc32_buffer(view[k * step : (k + 1) * step]) != crcs[k]:
                raise TraceFormatError(f"the source has changed since its cache was written (bytes {k * step}.."
                                       f"{min((k + 1) * step, size)} differ): load the source again to "
                                       "re-create the cache", path=str(self._source))  # fmt: skip
            self._checked[k] = True

    def _whole(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        start, end, at = self._read_spans()
        buf = self._store()
        self._check(np.ones(len(self._record["crc32"]), bool))
        return buf, start, end, at

    def subset(self, rows: np.ndarray) -> tuple[RawEvents, np.ndarray] | None:
        """The spans of ``rows`` over the source's bytes, only their chunks read and checked; None: whole or range."""
        if self._buf is not None or self._loader is None:
            return None
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows) or rows.min() < 0 or rows.max() >= self._n:
            return None
        start, end, at = self._spans_of(rows)
        buf = self._store()
        step = self._record["chunk_bytes"]
        first, last = start // step, (end - 1) // step
        n = len(self._record["crc32"]) + 1  # chunks first..last of each row: +1 at first, -1 after last
        self._check(np.cumsum(np.bincount(first, minlength=n) - np.bincount(last + 1, minlength=n))[:-1] > 0)
        return RawEvents(buf, start, end, args_at=at), np.arange(len(rows), dtype=np.int64)
