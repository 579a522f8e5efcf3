"""Rows of an nsys export's CUDA tables as columns of aonkit's events table.

Each ``read_*`` function turns one table into a :class:`Part`: the events
table's columns as numpy arrays plus a recipe for the event JSON text (made
lazily). Conventions, chosen to match Kineto so every analysis works unchanged:

* GPU rows (kernel, memcpy, memset, sync): ``pid`` = ``deviceId`` (the
  ``TARGET_INFO_GPU.id``), ``tid`` = ``streamId``; ``device``/``stream`` set.
* CPU rows (runtime/driver API): ``pid``/``tid`` decoded from ``globalTid``
  (bits 24-47 and 0-23).
* ``correlation`` = ``correlationId`` + (process ordinal << 32): correlation
  ids are unique only within a process, so links never cross processes. With
  one profiled process the ids are unchanged.
* ``ts_ns`` = ``utcEpochNs`` + ``start``; ``dur_ns`` = ``end - start``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ...errors import TraceFormatError
from .db import NsysDB
from .jsontext import JsonRows

_RUNTIME_SUFFIX = re.compile(r"_v\d{4,}$")
COPY_KINDS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}  # 11-13: unified memory
MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
             6: "Managed Static", 7: "Unknown"}
SYNC_KINDS = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
RUNTIME_CLASS, DRIVER_CLASS, BACKTRACE_CLASS = 0, 1, 67


@dataclass
class Part:
    """One table's rows as events-table columns (all int64 arrays of equal length)."""

    ph: str
    cat: str | list[str]
    names: np.ndarray
    name_dict: list[str]
    pid: np.ndarray
    tid: np.ndarray
    ts_ns: np.ndarray
    dur_ns: np.ndarray
    correlation: np.ndarray
    stream: np.ndarray
    device: np.ndarray
    args: Callable[[np.ndarray | None], JsonRows] = field(repr=False, default=lambda sel=None: JsonRows(0))
    """Builds the ``args`` members of every row, or of the rows ``sel`` (positions in this part)."""
    cat_codes: np.ndarray | None = None
    """Codes into ``cat`` when it is a list (one category per row); None when ``cat`` is one string."""
    process_key: np.ndarray | None = None
    """``globalPid >> 24`` of each row, for rows with correlation ids (see :func:`unique_correlations`)."""

    def __len__(self) -> int:
        return len(self.ts_ns)


class Context:
    """What every table reader shares: the database, the string table and the time base."""

    def __init__(self, db: NsysDB, t0_ns: int) -> None:
        self.db = db
        self.t0_ns = t0_ns
        self.string_ids, values = db.strings()
        self.string_values: list[str] = [*values, ""]  # the last entry stands for an unknown id

    def string_codes(self, ids: np.ndarray) -> np.ndarray:
        """Positions of StringIds ``ids`` in ``string_values`` (the final "" where unknown)."""
        if not len(self.string_ids):
            return np.full(len(ids), len(self.string_values) - 1, np.int64)
        pos = np.minimum(np.searchsorted(self.string_ids, ids), len(self.string_ids) - 1)
        return np.where(self.string_ids[pos] == ids, pos, len(self.string_values) - 1)


def unique_correlations(parts: list[Part]) -> np.ndarray:
    """Make correlation ids unique across processes (in place); return the sorted process keys."""
    keys = [pd.unique(p.process_key) for p in parts if p.process_key is not None and len(p)]
    uniq = np.sort(pd.unique(np.concatenate(keys))) if keys else np.empty(0, np.int64)
    if len(uniq) > 1:
        for p in parts:
            if p.process_key is not None:
                ordinal = np.searchsorted(uniq, p.process_key).astype(np.int64)
                p.correlation = np.where(p.correlation >= 0, p.correlation + (ordinal << 32), -1)
    return uniq


def decode_pid(g: np.ndarray) -> np.ndarray:
    """OS pid of a packed ``globalTid``/``globalPid``."""
    return (g >> 24) & 0xFFFFFF


def decode_tid(g: np.ndarray) -> np.ndarray:
    """OS tid of a packed ``globalTid``."""
    return g & 0xFFFFFF


def _exprs(db: NsysDB, table: str, wanted: list[str]) -> str:
    have = db.columns(table)
    return ", ".join(f'"{c}"' if c in have else f'-1 AS "{c}"' for c in wanted)


def _select(db: NsysDB, table: str, wanted: list[str], *, rowid: bool = True,
            extra_sql: str = "") -> dict[str, np.ndarray]:
    """Integer columns by name (-1 for a column the table lacks) plus ``_rowid``, in start order.

    SQLite returns rows in rowid order, which is time order in real exports;
    they are sorted here only when they are not (an ORDER BY would double the
    read time).
    """
    head = "rowid AS _rowid, " if rowid else ""
    c = db.int_columns(f'SELECT {head}{_exprs(db, table, wanted)}{extra_sql} FROM "{table}"')
    start = c["start"]
    if len(start) > 1 and bool((start[1:] < start[:-1]).any()):
        order = np.argsort(start, kind="stable")
        c = {k: v[order] for k, v in c.items()}
    return c


def _lazy_select(path: Path, table: str, wanted: list[str], rowids: np.ndarray) -> Callable[[], dict[str, np.ndarray]]:
    """Columns read on first call (event text only), aligned to ``rowids``; the file is reopened then."""
    cache: dict[str, np.ndarray] = {}

    def get() -> dict[str, np.ndarray]:
        if not cache:
            try:
                with NsysDB(path) as db:
                    c = db.int_columns(f'SELECT rowid AS _rowid, {_exprs(db, table, wanted)} FROM "{table}" '
                                       "ORDER BY rowid")  # fmt: skip
            except TraceFormatError as exc:
                raise TraceFormatError(f"reading the rest of {table} for the event text: {exc.reason}",
                                       path=str(path)) from None  # fmt: skip
            except (OSError, sqlite3.Error, pa.ArrowException) as exc:
                raise TraceFormatError(f"the export is gone or changed since it was loaded, and the event text "
                                       f"reads the rest of {table} from it ({type(exc).__name__}: {exc})",
                                       path=str(path)) from None  # fmt: skip
            pos = np.minimum(np.searchsorted(c["_rowid"], rowids), max(len(c["_rowid"]) - 1, 0))
            if len(rowids) and (len(c["_rowid"]) == 0 or not np.array_equal(c["_rowid"][pos], rowids)):
                raise TraceFormatError(f"{table} changed since the export was loaded", path=str(path))
            cache.update({k: v[pos] for k, v in c.items()})
        return cache

    return get


_GPU_COLS = ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid"]


def _gpu_part(ctx: Context, c: dict[str, np.ndarray], cat: str, names: np.ndarray, name_dict: list[str],
              args: Callable[[], JsonRows]) -> Part:
    return Part(
        ph="X", cat=cat, names=names, name_dict=name_dict,
        pid=c["deviceId"], tid=c["streamId"],
        ts_ns=c["start"] + ctx.t0_ns, dur_ns=np.maximum(c["end"] - c["start"], 0),
        correlation=c["correlationId"], process_key=c["globalPid"] >> 24,
        stream=c["streamId"], device=c["deviceId"], args=args,
    )  # fmt: skip


def take(c: dict[str, np.ndarray], sel: np.ndarray | None) -> dict[str, np.ndarray]:
    """The rows ``sel`` of every column (all of them when ``sel`` is None)."""
    return c if sel is None else {k: v[sel] for k, v in c.items()}


def _gpu_args(c: dict[str, np.ndarray]) -> JsonRows:
    return (JsonRows(len(c["start"])).ints("device", c["deviceId"]).ints("context", c["contextId"])
            .ints("stream", c["streamId"]).ints("correlation", c["correlationId"])
            .ints("process", decode_pid(c["globalPid"])))


def _bytes_args(c: dict[str, np.ndarray]) -> JsonRows:
    """GPU args plus ``bytes`` and Kineto's ``memory bandwidth (GB/s)`` (bytes per ns)."""
    dur = np.maximum(c["end"] - c["start"], 0)
    bw = np.divide(c["bytes"], dur, out=np.zeros(len(dur)), where=dur > 0)
    return _gpu_args(c).ints("bytes", c["bytes"]).floats("memory bandwidth (GB/s)", bw)


def read_kernels(ctx: Context) -> Part | None:
    """``CUPTI_ACTIVITY_KIND_KERNEL``: name = demangled name; short and mangled names in args."""
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    if table not in ctx.db.tables:
        return None
    extra = ["contextId", "shortName", "mangledName", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
             "registersPerThread", "staticSharedMemory", "dynamicSharedMemory", "localMemoryPerThread",
             "localMemoryTotal", "launchType", "gridId", "graphNodeId"]
    have = ctx.db.columns(table)
    names = [f'"{n}"' for n in ("demangledName", "shortName") if n in have] or ["-1"]
    eager = [col for col in _GPU_COLS if col != "contextId"]  # the context is only an arg: read it lazily
    c = _select(ctx.db, table, eager, extra_sql=f", COALESCE({', '.join(names)}, -1) AS _name")
    name_id = c["_name"]
    lazy = _lazy_select(ctx.db.path, table, extra, c["_rowid"])
    eager_cols = c

    def args(sel: np.ndarray | None = None) -> JsonRows:
        sv = ctx.string_values
        c = take({**eager_cols, **lazy()}, sel)
        return (_gpu_args(c).int_list("grid", c["gridX"], c["gridY"], c["gridZ"])
                .int_list("block", c["blockX"], c["blockY"], c["blockZ"])
                .ints("registers per thread", c["registersPerThread"])
                .ints("shared memory", c["staticSharedMemory"] + c["dynamicSharedMemory"])
                .ints("static shared memory", c["staticSharedMemory"])
                .ints("dynamic shared memory", c["dynamicSharedMemory"])
                .ints("local memory per thread", c["localMemoryPerThread"])
                .ints("local memory total", c["localMemoryTotal"])
                .ints("launch type", c["launchType"]).ints("grid id", c["gridId"])
                .ints("graph node id", c["graphNodeId"])
                .strings("short name", ctx.string_codes(c["shortName"]), sv)
                .strings("mangled name", ctx.string_codes(c["mangledName"]), sv))

    return _gpu_part(ctx, c, "kernel", ctx.string_codes(name_id), ctx.string_values, args)


def _kind_names(keys: np.ndarray, make: Callable[[int], str]) -> tuple[np.ndarray, list[str]]:
    uniq, codes = np.unique(keys, return_inverse=True)
    return codes.astype(np.int64), [make(int(k)) for k in uniq]


def read_memcpy(ctx: Context) -> Part | None:
    """``CUPTI_ACTIVITY_KIND_MEMCPY``, named as Kineto does: ``Memcpy HtoD (Pageable -> Device)``."""
    table = "CUPTI_ACTIVITY_KIND_MEMCPY"
    if table not in ctx.db.tables:
        return None
    c = _select(ctx.db, table, _GPU_COLS + ["bytes", "copyKind", "srcKind", "dstKind", "srcDeviceId", "dstDeviceId"])
    cols = c
    key = (c["copyKind"] & 0xFF) << 16 | (c["srcKind"] & 0xFF) << 8 | (c["dstKind"] & 0xFF)

    def name(k: int) -> str:
        kind, src, dst = COPY_KINDS.get(k >> 16, "Unknown"), MEM_KINDS.get((k >> 8) & 0xFF, "Unknown"), \
            MEM_KINDS.get(k & 0xFF, "Unknown")
        return f"Memcpy {kind} ({src} -> {dst})"

    codes, names = _kind_names(key, name)

    def args(sel: np.ndarray | None = None) -> JsonRows:
        c = take(cols, sel)
        rows = _bytes_args(c).ints("copy kind", c["copyKind"]).ints("src kind", c["srcKind"])
        rows.ints("dst kind", c["dstKind"]).ints("src device", c["srcDeviceId"])
        return rows.ints("dst device", c["dstDeviceId"])

    return _gpu_part(ctx, c, "gpu_memcpy", codes, names, args)


def read_memset(ctx: Context) -> Part | None:
    """``CUPTI_ACTIVITY_KIND_MEMSET``, named ``Memset (Device)`` after its memory kind."""
    table = "CUPTI_ACTIVITY_KIND_MEMSET"
    if table not in ctx.db.tables:
        return None
    c = _select(ctx.db, table, _GPU_COLS + ["bytes", "value", "memKind"])
    codes, names = _kind_names(c["memKind"], lambda k: f"Memset ({MEM_KINDS.get(k, 'Unknown')})")

    def args(sel: np.ndarray | None = None) -> JsonRows:
        k = take(c, sel)
        return _bytes_args(k).ints("value", k["value"]).ints("mem kind", k["memKind"])

    return _gpu_part(ctx, c, "gpu_memset", codes, names, args)


def read_sync(ctx: Context) -> Part | None:
    """``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` as Kineto's ``cuda_sync`` events (not GPU work)."""
    table = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    if table not in ctx.db.tables:
        return None
    c = _select(ctx.db, table, _GPU_COLS + ["syncType", "eventId"])
    c["streamId"] = np.where((c["streamId"] < 0) | (c["streamId"] >= 0xFFFFFFFF), -1, c["streamId"])  # no stream
    codes, names = _kind_names(c["syncType"], lambda k: SYNC_KINDS.get(k, f"Sync {k}"))

    def args(sel: np.ndarray | None = None) -> JsonRows:
        k = take(c, sel)
        return _gpu_args(k).ints("sync type", k["syncType"]).ints("event", k["eventId"])

    return _gpu_part(ctx, c, "cuda_sync", codes, names, args)


def read_runtime(ctx: Context) -> tuple[Part | None, int]:
    """``CUPTI_ACTIVITY_KIND_RUNTIME`` without backtrace rows; returns the part and how many rows were dropped.

    Runtime API names lose nsys's version suffix (``cudaLaunchKernel_v7000`` ->
    ``cudaLaunchKernel``, as Kineto names them); the full name stays in
    ``args["nsys name"]``. Driver API names are kept (``cuGetProcAddress_v2``
    is the real name).
    """
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if table not in ctx.db.tables:
        return None, 0
    c = _select(ctx.db, table, ["start", "end", "eventClass", "globalTid", "correlationId", "nameId",
                                "returnValue"], rowid=False)
    keep = c["eventClass"] != BACKTRACE_CLASS  # filtered here, not in SQL: one pass over the table, no COUNT(*)
    dropped = int(len(keep) - keep.sum())
    if dropped:
        c = take(c, np.flatnonzero(keep))
    raw = ctx.string_codes(c["nameId"])
    driver = c["eventClass"] == DRIVER_CLASS
    stripped = [_RUNTIME_SUFFIX.sub("", s) for s in ctx.string_values]
    name_dict = ctx.string_values + stripped
    names = np.where(driver, raw, raw + len(ctx.string_values))
    cats = np.where(driver, 1, 0)
    pid, tid = decode_pid(c["globalTid"]), decode_tid(c["globalTid"])

    def args(sel: np.ndarray | None = None) -> JsonRows:
        k = take({**c, "_raw": raw}, sel)
        return (JsonRows(len(k["_raw"])).ints("correlation", k["correlationId"])
                .strings("nsys name", k["_raw"], ctx.string_values).ints("return value", k["returnValue"])
                .ints("event class", k["eventClass"]))

    part = Part(
        ph="X", cat=["cuda_runtime", "cuda_driver"], cat_codes=cats, names=names, name_dict=name_dict, pid=pid, tid=tid,
        ts_ns=c["start"] + ctx.t0_ns, dur_ns=np.maximum(c["end"] - c["start"], 0),
        correlation=c["correlationId"], process_key=c["globalTid"] >> 24,
        stream=np.full(len(pid), -1, np.int64), device=np.full(len(pid), -1, np.int64), args=args,
    )  # fmt: skip
    return part, dropped
