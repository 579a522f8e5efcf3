"""Nsight Systems SQLite export -> :class:`~aonkit.Trace`, with the same events table as Kineto input.

``read_nsys_sqlite("report.sqlite")`` reads kernels, memcpy/memset,
synchronisation, CUDA runtime/driver calls and NVTX ranges/marks (see
:mod:`.parts` and :mod:`.nvtx` for the column conventions), names
the processes, threads, GPUs and streams with ``M`` events, and turns
``GPU_METRICS`` samples (when the export has them) into ``trace.samples``.

``trace.meta.device_properties`` lists every GPU of ``TARGET_INFO_GPU`` with
Kineto's keys (``id``, ``name``, ``totalGlobalMem``, ``numSms``,
``computeMajor``...) plus ``cuDevice``, ``busLocation``, ``memoryBandwidth``
and ``used`` (True when GPU activity ran on it): the table lists every GPU of
the node, not only the ones the program used.

Per-event JSON text (``trace.event_json(i)``, ``event_args``) is made from the
columns on first use (:mod:`.jsontext`). The file is only read
(:mod:`.db`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import TraceFormatError
from ...trace import RawEvents, Trace, TraceMeta, join_spans, no_duration, split_rows
from .db import NsysDB
from .jsontext import JsonRows, spans_of, us_text
from .metrics import read_gpu_metrics
from .nvtx import read_names, read_nvtx
from .parts import (
    Context,
    Part,
    read_kernels,
    read_memcpy,
    read_memset,
    read_runtime,
    read_sync,
    take,
    unique_correlations,
)  # fmt: skip

_GPU_KEYS = {"id": "id", "name": "name", "totalMemory": "totalGlobalMem", "smCount": "numSms",
             "computeMajor": "computeMajor", "computeMinor": "computeMinor", "l2CacheSize": "l2CacheSize",
             "clockRate": "clockRate", "memoryBandwidth": "memoryBandwidth", "cuDevice": "cuDevice",
             "busLocation": "busLocation", "uuid": "uuid", "chipName": "chipName"}
_CUDA_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")


def _session_start(db: NsysDB) -> int:
    rows = db.query_rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def _gpus(db: NsysDB, used: set[int]) -> list[dict[str, Any]]:
    if "TARGET_INFO_GPU" not in db.tables:
        return []
    cols = [c for c in _GPU_KEYS if c in db.columns("TARGET_INFO_GPU")]
    out = []
    for row in db.query_rows(f'SELECT {", ".join(cols)} FROM TARGET_INFO_GPU ORDER BY id'):
        d = {_GPU_KEYS[c]: v for c, v in zip(cols, row)}
        d["used"] = d.get("id") in used
        out.append(d)
    return out


def _categorical(codes: np.ndarray, values: list[Any]) -> pd.Categorical:
    """Categorical of ``values[codes]`` keeping only the values used (in their order)."""
    used = np.bincount(codes[codes >= 0], minlength=len(values)) > 0 if len(values) else np.zeros(0, bool)
    remap = np.cumsum(used) - 1
    codes = np.where(codes >= 0, remap[np.maximum(codes, 0)] if len(values) else -1, -1)
    kept = [v for v, u in zip(values, used.tolist()) if u]
    index = pd.Index(kept, dtype="str") if all(isinstance(v, str) for v in kept) else pd.Index(kept, dtype=object)
    return pd.Categorical.from_codes(codes, categories=index, validate=False)


def _merge_dicts(parts: list[Part], codes_of, dict_of) -> pd.Categorical:  # noqa: ANN001 - two accessors
    """One categorical from per-part (codes, dictionary) pairs."""
    dicts = [dict_of(p) for p in parts]
    uniq = pd.Index([v for d in dicts for v in d], dtype="str").unique()
    out = [uniq.get_indexer(pd.Index(d, dtype="str"))[codes_of(p)] if len(p) else np.empty(0, np.int64)
           for p, d in zip(parts, dicts)]
    codes = np.concatenate(out) if out else np.empty(0, np.int64)
    return _categorical(codes.astype(np.int64), list(uniq))


def _cat_dict(p: Part) -> list[str]:
    return [p.cat] if isinstance(p.cat, str) else p.cat


def _cat_codes(p: Part) -> np.ndarray:
    return p.cat_codes if p.cat_codes is not None else np.zeros(len(p), np.int64)


def _events(parts: list[Part], warnings: list[str]) -> pd.DataFrame:
    n = sum(len(p) for p in parts)
    cat = _merge_dicts(parts, _cat_codes, _cat_dict)
    cat = cat.set_categories([c for c in cat.categories if c != ""])  # M events: no category (NA), as in Kineto
    data: dict[str, Any] = {
        "ph": _merge_dicts(parts, lambda p: np.zeros(len(p), np.int64), lambda p: [p.ph]),
        "cat": cat,
        "name": _merge_dicts(parts, lambda p: p.names, lambda p: p.name_dict),
    }
    for col in ("pid", "tid"):
        values = np.concatenate([getattr(p, col) for p in parts]) if parts else np.empty(0, np.int64)
        codes, uniq = pd.factorize(values, sort=True)
        data[col] = _categorical(codes.astype(np.int64), np.asarray(uniq).tolist())
    for col in ("ts_ns", "dur_ns", "correlation"):
        data[col] = np.concatenate([getattr(p, col) for p in parts]) if parts else np.empty(0, np.int64)
    no_duration(data["dur_ns"], warnings)
    data["external_id"] = np.full(n, -1, np.int64)
    data["stream"] = np.concatenate([p.stream for p in parts]) if parts else np.empty(0, np.int64)
    data["device"] = np.concatenate([p.device for p in parts]) if parts else np.empty(0, np.int64)
    data["id"] = np.full(n, -1, np.int64)
    data["bp"] = pd.Categorical.from_codes(np.full(n, -1, np.int64), categories=pd.Index([], dtype="str"))
    return pd.DataFrame(data, copy=False)


def _event_text(p: Part, sel: np.ndarray | None = None) -> pa.Array:
    """JSON text of the part's rows (or of its rows ``sel``)."""
    c = take({"names": p.names, "pid": p.pid, "tid": p.tid, "ts": p.ts_ns, "dur": p.dur_ns, "cat": _cat_codes(p)}, sel)
    rows = JsonRows(len(c["ts"])).const("ph", p.ph)
    if isinstance(p.cat, str):
        if p.cat:
            rows.const("cat", p.cat)
    else:
        rows.strings("cat", c["cat"], p.cat)
    rows.strings("name", c["names"], p.name_dict).ints("pid", c["pid"]).ints("tid", c["tid"])
    if p.ph != "M":
        rows.raw("ts", us_text(c["ts"]))
    if p.ph == "X":
        dur = us_text(np.maximum(c["dur"], 0))
        rows.raw("dur", pc.if_else(pa.array(c["dur"] < 0), pa.scalar("null", pa.large_string()), dur))
    return rows.raw("args", p.args(sel).build()).build()


class PartsText(RawEvents):
    """The :class:`~aonkit.trace.EventText` of an export: made from the parts on demand.

    ``select(rows)`` builds the JSON text of those rows only; the whole text
    is built (once) only for ``spans()`` / ``select(None)`` (the Parquet cache).
    """

    def __init__(self, parts: list[Part]) -> None:
        super().__init__(None, None, None, loader=lambda: spans_of([_event_text(p) for p in parts]))
        self._parts = parts
        self._bounds = np.cumsum([0, *(len(p) for p in parts)])

    def select(self, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Texts of ``rows`` only (built now), unless the whole text exists already."""
        if rows is None or self._buf is not None:
            return super().select(rows)
        groups, idx = split_rows(rows, self._bounds)
        buf, start, end = join_spans([spans_of([_event_text(self._parts[k], local)]) for k, local in groups])
        return buf, start, end, idx


def _warnings(db: NsysDB, parts: dict[str, Part | None], dropped: int, open_ranges: int) -> list[str]:
    out = []
    if not any(t in db.tables for t in _CUDA_TABLES):
        out.append("no CUDA activity in this export (no CUDA API or GPU tables): it was captured without "
                   "--trace=cuda, or the program used no GPU; the trace has no GPU events")
    elif parts["kernel"] is None or len(parts["kernel"]) == 0:
        n_api = len(parts["runtime"]) if parts["runtime"] is not None else 0
        out.append(f"no GPU kernels in this export ({n_api} CUDA API calls were traced but no kernel activity; "
                   "CUPTI kernel tracing may be unavailable there, e.g. under WSL2 or without profiling permission)")
    if dropped:
        out.append(f"{dropped} CUDA backtrace row(s) (eventClass 67) repeat API calls and were left out")
    if open_ranges:
        out.append(f"{open_ranges} NVTX range(s) never ended (end is NULL): dur_ns = -1")
    return out


def read_nsys_sqlite(path: str | Path) -> Trace:
    """Read an Nsight Systems SQLite export.

    Parameters
    ----------
    path : path-like
        A ``.sqlite`` file written by ``nsys export --type sqlite`` (nsys
        2022.2 and later). It is opened read-only.

    Returns
    -------
    Trace
        Events as for Kineto input (``meta.layout == "nsys-sqlite"``), GPU
        metric samples in ``trace.samples`` (None when the export has none),
        the export's metadata tables in ``trace.metadata`` (never printed:
        they hold the command line and environment).

    Raises
    ------
    TraceFormatError
        When the file is not a SQLite database or not an nsys export.
    """
    path = Path(path)
    try:
        return _read(path)
    except TraceFormatError:
        raise
    except (pa.ArrowException, sqlite3.Error, ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
        # a damaged file that SQLite still opens: say so, naming the file, rather than crash
        raise TraceFormatError(f"damaged or unexpected nsys export ({type(exc).__name__}: {exc})",
                               path=str(path)) from exc


def _read(path: Path) -> Trace:
    with NsysDB(path) as db:
        export_meta = db.metadata()
        t0 = _session_start(db)
        ctx = Context(db, t0)
        runtime, dropped = read_runtime(ctx)
        by_kind: dict[str, Part | None] = {
            "kernel": read_kernels(ctx), "memcpy": read_memcpy(ctx), "memset": read_memset(ctx),
            "sync": read_sync(ctx), "runtime": runtime,
        }  # fmt: skip
        nvtx, open_ranges = read_nvtx(ctx)
        keys = unique_correlations([*(p for p in by_kind.values() if p is not None), *nvtx])
        gpu_parts = [p for k, p in by_kind.items() if p is not None and k != "runtime"]
        used = {int(d) for k in ("kernel", "memcpy", "memset") if (p := by_kind[k]) is not None
                for d in pd.unique(p.device)}
        lane_keys = pd.unique(np.concatenate([(p.device << 32) | (p.stream & 0xFFFFFFFF) for p in gpu_parts])) \
            if gpu_parts else np.empty(0, np.int64)
        lanes = sorted((int(k) >> 32, int(k) & 0xFFFFFFFF) for k in lane_keys)
        lanes = [(d, s if s != 0xFFFFFFFF else -1) for d, s in lanes]
        gpus = _gpus(db, used)
        names = read_names(ctx, keys, lanes, {g["id"]: str(g.get("name")) for g in gpus})
        samples = read_gpu_metrics(db, t0)
        capture = dict(db.query_rows("SELECT name, value FROM META_DATA_CAPTURE")) if db.has(
            "META_DATA_CAPTURE", "name", "value") else {}
        warnings = _warnings(db, by_kind, dropped, open_ranges)
    parts = [*names, *(p for p in by_kind.values() if p is not None), *nvtx]
    if not any(len(p) for p in parts[len(names):]):
        raise TraceFormatError("no trace events: the export has no kernels, copies, CUDA API calls or NVTX ranges "
                               "(captured without --trace=cuda,nvtx, or the program used no GPU)", path=str(path))
    events = _events(parts, warnings)
    meta = TraceMeta(
        path=str(path), base_time_ns=t0, device_properties=gpus, layout="nsys-sqlite",
        versions={"nsys": export_meta.get("EXPORT_PRODUCT_VERSION"),
                  "nsys_export_schema": export_meta.get("EXPORT_SCHEMA_VERSION")},
    )  # fmt: skip
    raw = PartsText(parts)
    return Trace(events, meta, raw, metadata={"export": export_meta, "capture": capture}, warnings=warnings,
                 samples=samples)
