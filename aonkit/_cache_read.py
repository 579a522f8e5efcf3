"""Reading a Parquet trace cache whose bytes have been checked against its sidecar (see :mod:`aonkit.cache`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from . import schema
from ._filecheck import crc32_buffer
from .errors import TraceFormatError
from .trace import RawEvents, Trace, TraceMeta

_TEXT = "event_json"
_ARGS = "args_rel"


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
    from .cache import samples_path

    _mapped(path, side.get("data"), "data")
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


def _read(path: Path, side: dict[str, Any]) -> Trace:
    from .cache import samples_path

    data = _mapped(path, side.get("data"), "data")
    wanted = list(schema.CATEGORY_COLUMNS) + list(schema.INT_COLUMNS)
    table = pq.read_table(pa.BufferReader(data), columns=wanted)
    n = side["n_events"]
    if table.num_rows != n:
        raise TraceFormatError(f"the cache holds {table.num_rows} rows, its sidecar says {n}", path=str(path))
    cols: dict[str, Any] = {}
    for col in schema.EVENT_COLUMNS:
        values = table.column(col).to_numpy()
        if col in schema.CATEGORY_COLUMNS:
            cats = side["categories"][col]
            if values.dtype != np.int32 or (n and (values.min() < -1 or values.max() >= len(cats))):
                raise TraceFormatError(f"column {col!r} has codes outside its categories", path=str(path))
            text = col not in ("pid", "tid") or all(isinstance(v, str) for v in cats)
            index = pd.Index(cats, dtype="str" if text else object)
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
    trace = Trace(events, meta, RawEvents(None, None, None, _text_loader(path, data, n)), side["metadata"],
                  side["warnings"], samples=samples)
    trace.source = side.get("source")
    return trace


def _text_loader(path: Path, data: pa.Buffer, n: int):  # noqa: ANN202 - closure for RawEvents
    """Reads the event texts from the very bytes that were checked (the mapping outlives a rename)."""

    def load() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        try:
            pf = pq.ParquetFile(pa.BufferReader(data))
            cols = [_TEXT, _ARGS] if _ARGS in pf.schema_arrow.names else [_TEXT]
            table = pf.read(columns=cols)
            arr = table.column(_TEXT).combine_chunks()
        except pa.ArrowException as exc:
            raise TraceFormatError(f"unreadable event text in the cache ({exc})", path=str(path)) from None
        if len(arr) != n:
            raise TraceFormatError("the cache's event text has the wrong number of rows", path=str(path))
        _, off_buf, data_buf = arr.buffers()
        offsets = np.frombuffer(off_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
        raw = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
        start, end = offsets[:-1], offsets[1:]
        at = None
        if _ARGS in cols:
            rel = table.column(_ARGS).to_numpy()
            if rel.dtype != np.int64 or len(rel) != n or np.any((rel < -1) | (rel >= end - start)):
                raise TraceFormatError("the cache's args offsets do not fit its event text", path=str(path))
            at = np.where(rel >= 0, start + rel, -1)
        return raw, start, end, at

    return load
