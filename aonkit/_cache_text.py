"""A Parquet cache's event text (:mod:`aonkit.cache`), read whole or a few row groups at a time.

The text sits in a file of its own, ``<cache>.text.parquet``: ``event_json``
(each event's JSON text) and ``args_rel`` (where its ``args`` object starts
in it, -1: none), zstd-compressed in row groups of :data:`GROUP_ROWS` events.
An arg look-up over a few events, such as the ``Stream Wait Event`` rows a
job's dependency graph reads in every rank, decodes only the groups that hold
them (six scattered events of a 54 MB trace's text: 3.2 ms in groups of
2,048, 8.9 ms in groups of 8,192, against 32-40 ms for the whole text); the
last part read is kept for the next look-ups of the same events (a
collective's args are several look-ups). Once partial reads have decoded as
many groups as the file has, or a look-up needs more than half of them, the
whole text is read and kept. The file's size and CRC-32 are checked
against the sidecar when the cache is read (:mod:`aonkit._cache_read`),
before any of it is decoded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import TraceFormatError
from .event_text import PartlyRead, RawEvents

GROUP_ROWS = 4096
"""Events per row group of the text file: a few ms per look-up of scattered events, no slower whole."""
TEXT = "event_json"
ARGS = "args_rel"


def grouped(data: pa.Buffer, n: int, path: Path, what: str) -> tuple[pq.ParquetFile, np.ndarray]:
    """A cache part's Parquet file over ``data`` and the first row of each row group, then ``n``; checked.

    :class:`~aonkit.TraceFormatError` (naming ``path`` and ``what``) when Arrow cannot read it or it does not
    hold ``n`` rows.
    """
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)]
    except pa.ArrowException as exc:
        raise TraceFormatError(f"unreadable {what} in the cache ({exc})", path=str(path)) from None
    starts = np.cumsum([0, *sizes]).astype(np.int64)
    if starts[-1] != n:
        raise TraceFormatError(f"the cache's {what} has the wrong number of rows", path=str(path))
    return pf, starts


class CacheText(PartlyRead):
    """The :class:`~aonkit.trace.EventText` of a cache: its text file's bytes, mapped when the cache was read.

    Parameters
    ----------
    path : Path
        The text file (named in errors).
    data : pyarrow.Buffer
        Its bytes, mapped and checked when the cache was read (the mapping outlives a rename).
    n : int
        Events in the cache.
    """

    def __init__(self, path: Path, data: pa.Buffer, n: int) -> None:
        super().__init__(None, None, None, loader=self._whole)
        self._path, self._data, self._n = path, data, n
        self._file: pq.ParquetFile | None = None
        self._starts: np.ndarray | None = None  # first event of each row group, and n
        self._decoded = 0  # row groups decoded by partial reads so far
        self._held: tuple[np.ndarray, RawEvents] | None = None  # the last part read: its groups and text

    def _parquet(self) -> pq.ParquetFile:
        if self._file is None:
            self._file, self._starts = grouped(self._data, self._n, self._path, "event text")
        return self._file

    def _read(self, groups: list[int] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """(buffer, starts, ends, args offsets or None) of the events of row ``groups`` in order (None: all)."""
        pf = self._parquet()
        cols = [TEXT, ARGS] if ARGS in pf.schema_arrow.names else [TEXT]  # no offsets: nsys's text
        try:
            table = pf.read(columns=cols) if groups is None else pf.read_row_groups(groups, cols)
            arr = table.column(TEXT).combine_chunks()
        except (pa.ArrowException, KeyError) as exc:
            raise TraceFormatError(f"unreadable event text in the cache ({exc})", path=str(self._path)) from None
        if not pa.types.is_large_binary(arr.type):
            raise TraceFormatError(f"the cache's event text is {arr.type}, not large_binary", path=str(self._path))
        _, off_buf, data_buf = arr.buffers()
        offsets = np.frombuffer(off_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
        raw = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
        start, end = offsets[:-1], offsets[1:]
        if ARGS not in cols:
            return raw, start, end, None
        rel = table.column(ARGS).to_numpy()
        if rel.dtype != np.int64 or len(rel) != len(arr) or np.any((rel < -1) | (rel >= end - start)):
            raise TraceFormatError("the cache's args offsets do not fit its event text", path=str(self._path))
        return raw, start, end, np.where(rel >= 0, start + rel, -1)

    def _whole(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        return self._read(None)

    def subset(self, rows: np.ndarray) -> tuple[RawEvents, np.ndarray] | None:
        """The text of the row groups holding ``rows`` and the rows' positions in it; None: read the whole text."""
        if self._buf is not None or self._loader is None:
            return None
        rows = np.asarray(rows, dtype=np.int64)
        self._parquet()
        starts = self._starts
        assert starts is not None
        n_groups = len(starts) - 1
        if not len(rows) or rows.min() < 0 or rows.max() >= self._n:
            return None  # nothing to read, or rows out of range: the whole text's path says so
        g = np.searchsorted(starts, rows, "right") - 1
        groups = np.unique(g)
        if self._held is not None and np.isin(groups, self._held[0]).all():
            groups, part = self._held  # the last part read holds them (several look-ups of the same events)
        else:
            if 2 * len(groups) > n_groups or self._decoded + len(groups) > n_groups:
                return None
            self._decoded += len(groups)
            buf, start, end, at = self._read(groups.tolist())
            part = RawEvents(buf, start, end, args_at=at)
            self._held = (groups, part)
        sizes = starts[groups + 1] - starts[groups]
        first = np.cumsum(sizes) - sizes  # where each group begins in the part
        local = rows - starts[g] + first[np.searchsorted(groups, g)]
        return part, local
