"""Reading a Parquet trace cache whose bytes have been checked against its sidecar (see :mod:`aonkit.cache`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from . import schema
from ._cache_source import SourceText
from ._cache_text import CacheText
from ._filecheck import crc32_buffer
from .errors import TraceFormatError
from .trace import Trace, TraceMeta


def _mapped(path: Path, check: Any, what: str) -> pa.Buffer:
    """The file memory-mapped, after its size and CRC-32 matched ``check`` (the sidecar's record)."""
    if not isinstance(check, dict):
        raise TraceFormatError(f"the sidecar has no checksum of the {what}", path=str(path))
    try:
        buf = pa.memory_map(str(path), "r").read_buffer()
    except (OSError, pa.ArrowException) as exc:
        raise TraceFormatError(f"cannot read the cache's {what} ({exc})", path=str(path)) from None
    if buf.size != check.get("bytes") or crc32_buffer(buf) != check.get("crc32"):
        raise TraceFormatError(
            f"the cache's {what} does not match its sidecar (size or CRC-32 differ: corrupt, truncated, "
            "or written by another process); delete the cache or re-create it",
            path=str(path),
        )
    return buf


def check_files(path: Path, side: dict[str, Any]) -> None:
    """Check the cache's files against the sidecar's sizes and checksums (without decoding them)."""
    from .cache import samples_path, text_path

    _mapped(path, side.get("data"), "data")
    _mapped(text_path(path), side.get("text"), "event text")
    if side.get("samples") is not None:
        _mapped(samples_path(path), side["samples"], "samples table")


def read_checked(path: Path, side: dict[str, Any]) -> Trace:
    """Build the trace from cache ``path`` and its decoded sidecar ``side``; every failure names the file."""
    try:
        return _read(path, side)
    except TraceFormatError:
        raise
    except (pa.ArrowException, OSError, KeyError, TypeError, ValueError) as exc:
        raise TraceFormatError(f"unreadable cache ({type(exc).__name__}: {exc})", path=str(path)) from None


def _text(cache: Path, side: dict[str, Any], n: int) -> CacheText | SourceText:
    """The cache's event text: mapped and checked now (the bytes of this cache even if it is rewritten), read later.

    When the text stays in the source (``text_source``), the source is found now and read (in parts) on first use.
    """
    from .cache import source_file, text_path

    path = text_path(cache)
    data = _mapped(path, side.get("text"), "event text")
    record = side.get("text_source")
    if record is None:
        return CacheText(path, data, n)
    if not isinstance(record, dict) or not {"bytes", "chunk_bytes", "crc32"} <= record.keys():
        raise TraceFormatError("the sidecar's record of the text's source is malformed", path=str(cache))
    return SourceText(path, data, n, source_file(side, cache), record)


def _read(path: Path, side: dict[str, Any]) -> Trace:
    from .cache import samples_path

    data = _mapped(path, side.get("data"), "data")
    n = side["n_events"]
    text = _text(path, side, n)
    wanted = list(schema.CATEGORY_COLUMNS) + list(schema.INT_COLUMNS)
    table = pq.read_table(pa.BufferReader(data), columns=wanted)
    if table.num_rows != n:
        raise TraceFormatError(f"the cache holds {table.num_rows} rows, its sidecar says {n}", path=str(path))
    cols: dict[str, Any] = {}
    for col in schema.EVENT_COLUMNS:
        chunked = table.column(col)  # one row group: its chunk's buffer as is (ChunkedArray.to_numpy copies)
        values = chunked.chunk(0).to_numpy() if chunked.num_chunks == 1 else chunked.to_numpy()
        if col in schema.CATEGORY_COLUMNS:
            cats = side["categories"][col]
            if values.dtype != np.int32 or (n and (values.min() < -1 or values.max() >= len(cats))):
                raise TraceFormatError(f"column {col!r} has codes outside its categories", path=str(path))
            named = col not in ("pid", "tid") or all(isinstance(v, str) for v in cats)
            index = pd.Index(cats, dtype="str" if named else object)
            if not index.is_unique:
                raise TraceFormatError(f"column {col!r} has repeated categories", path=str(path))
            cols[col] = pd.Categorical.from_codes(values, categories=index, validate=False)
        else:
            if values.dtype != np.int64:
                raise TraceFormatError(f"column {col!r} is {values.dtype}, not int64", path=str(path))
            cols[col] = values
    events = pd.DataFrame(cols, copy=False)
    meta = TraceMeta(**side["meta"])
    samples = None
    if side.get("samples") is not None:
        sbuf = _mapped(samples_path(path), side["samples"], "samples table")
        samples = pq.read_table(pa.BufferReader(sbuf)).to_pandas()
    trace = Trace(events, meta, text, side["metadata"], side["warnings"], samples=samples)
    trace.source = side.get("source")
    return trace
