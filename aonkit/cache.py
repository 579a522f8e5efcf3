"""Parquet cache of a :class:`~aonkit.Trace`: columns in Parquet, metadata in a JSON sidecar.

Layout for ``trace.save("run.parquet")``:

``run.parquet``
    One row per event. Category columns are stored as their int32 codes,
    integer columns as int64, and ``event_json`` holds each event's original
    JSON text (zstd-compressed); it is read only when first needed.
``run.samples.parquet``
    Only when the trace carries metric samples (``trace.samples``, e.g. nsys
    ``GPU_METRICS``): that table as it is.
``run.meta.json``
    Format version, the categories of each category column (JSON keeps ints
    and strings apart), ``TraceMeta``, the file's top-level keys and warnings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from . import schema
from .errors import TraceFormatError
from .trace import RawEvents, Trace, TraceMeta

FORMAT = "aonkit-trace"
VERSION = 1
_TEXT = "event_json"


def sidecar_path(path: str | Path) -> Path:
    """Path of the JSON sidecar that goes with a Parquet cache file."""
    return Path(path).with_suffix(".meta.json")


def samples_path(path: str | Path) -> Path:
    """Path of the samples table that goes with a Parquet cache file (when the trace has samples)."""
    return Path(path).with_suffix(".samples.parquet")


def save_trace(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` to ``path`` (Parquet) and its sidecar; return ``path``."""
    from ._kernels.spans import gather_spans

    path = Path(path)
    ev = trace.events
    columns: dict[str, pa.Array] = {}
    categories: dict[str, list[Any]] = {}
    for col in schema.CATEGORY_COLUMNS:
        cat = ev[col].array
        columns[col] = pa.array(np.asarray(cat.codes, dtype=np.int32))
        categories[col] = list(cat.categories)
    for col in schema.INT_COLUMNS:
        columns[col] = pa.array(ev[col].to_numpy(dtype=np.int64))
    buf, start, end = trace._raw.spans()
    blob, offsets = gather_spans(buf, start, end)
    columns[_TEXT] = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(ev), [None, pa.py_buffer(offsets), pa.py_buffer(blob)]
    )
    compression = {name: "none" for name in columns}
    compression[_TEXT] = "zstd"
    pq.write_table(pa.table(columns), path, compression=compression, use_dictionary=False)
    side = {
        "format": FORMAT,
        "version": VERSION,
        "n_events": len(ev),
        "categories": categories,
        "meta": trace.meta.to_dict(),
        "metadata": trace.metadata,
        "warnings": trace.warnings,
    }
    sidecar_path(path).write_text(json.dumps(side))
    samples = samples_path(path)
    if trace.samples is not None:
        trace.samples.to_parquet(samples, index=False)
    elif samples.exists():
        samples.unlink()
    return path


def _text_loader(path: Path):  # noqa: ANN202 - closure for RawEvents
    def load() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        arr = pq.read_table(path, columns=[_TEXT]).column(_TEXT).combine_chunks()
        _, off_buf, data_buf = arr.buffers()
        offsets = np.frombuffer(off_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
        data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
        return data, offsets[:-1], offsets[1:]

    return load


def load_trace(path: str | Path) -> Trace:
    """Read a trace written by :func:`save_trace`."""
    path = Path(path)
    side_file = sidecar_path(path)
    try:
        side = json.loads(side_file.read_text())
    except FileNotFoundError:
        raise TraceFormatError(f"the cache's sidecar {side_file.name} is missing", path=str(path)) from None
    if side.get("format") != FORMAT or side.get("version") != VERSION:
        raise TraceFormatError("not an aonkit trace cache of a supported version", path=str(side_file))
    wanted = list(schema.CATEGORY_COLUMNS) + list(schema.INT_COLUMNS)
    table = pq.read_table(path, columns=wanted)
    data: dict[str, Any] = {}
    for col in schema.EVENT_COLUMNS:
        values = table.column(col).to_numpy()
        if col in schema.CATEGORY_COLUMNS:
            cats = side["categories"][col]
            text = col not in ("pid", "tid") or all(isinstance(v, str) for v in cats)
            index = pd.Index(cats, dtype="str" if text else object)
            data[col] = pd.Categorical.from_codes(values, categories=index, validate=False)
        else:
            data[col] = values
    events = pd.DataFrame(data, copy=False)
    meta = TraceMeta(**side["meta"])
    samples = pd.read_parquet(samples_path(path)) if samples_path(path).exists() else None
    return Trace(events, meta, RawEvents(None, None, None, _text_loader(path)), side["metadata"], side["warnings"],
                 samples=samples)
