"""Reader of Chrome-trace / Kineto JSON (``.json``, ``.json.gz``, bare arrays).

The bytes go through one Numba pass (:func:`aonkit._kernels.trace_scan.scan_trace`);
this module turns its spans and symbol ids into the events table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .. import schema
from .._kernels import json_lex as lex
from .._kernels import trace_scan as ks
from ..errors import TraceFormatError
from ..trace import RawEvents, Trace, meta_from_top_level, no_duration
from . import _parallel, first_run
from ._io import line_col, read_buffer
from .quick_json import QuickScan, quick_scan

_ERR_TEXT = {
    lex.E_SYNTAX: "invalid JSON: unexpected character",
    lex.E_EOF: "the file ends before the JSON is complete (truncated trace?)",
    lex.E_DEPTH: f"JSON nested deeper than {lex.MAX_DEPTH} levels",
    lex.E_STRING: "invalid JSON string (bad escape or raw control character)",
    lex.E_NUMBER: "invalid JSON number",
    lex.E_NOT_TRACE: "not a trace: the top-level JSON value is neither an object nor an array",
    lex.E_TRAILING: "invalid JSON: extra data after the top-level value",
}
_CAT_KINDS = (ks.K_PH, ks.K_CAT, ks.K_NAME, ks.K_PID, ks.K_TID, ks.K_BP)
_TEXT_KINDS = {ks.K_PH, ks.K_CAT, ks.K_NAME, ks.K_BP}


def read_chrome_trace(
    path: str | os.PathLike[str],
    *,
    salvage: bool = False,
    max_decompressed_bytes: int | None = None,
    threads: int | None = None,
) -> Trace:
    """Read a Chrome-trace/Kineto JSON file into a :class:`~aonkit.Trace`.

    Parameters
    ----------
    path : path-like
        ``.json``, ``.json.gz`` (gzip is detected by content) or a bare array.
    salvage : bool
        When the file is cut short (a killed job), return every complete event
        before the cut and say so in ``trace.warnings`` instead of raising.
    max_decompressed_bytes : int, optional
        Cap on the decompressed size of gzip input.
    threads : int, optional
        Threads for scanning one large file (default: one per core, up to 8).

    Raises
    ------
    TraceFormatError
        Invalid JSON (with byte offset, line and column), a truncated file
        without ``salvage``, or a JSON document that is not a trace.
    """
    path = str(path)
    buf, warnings = read_buffer(path, max_decompressed_bytes)
    return parse_buffer(buf, path=path, salvage=salvage, warnings=warnings, threads=threads)


def parse_buffer(
    buf: np.ndarray,
    *,
    path: str | None = None,
    salvage: bool = False,
    warnings: list[str] | None = None,
    threads: int | None = None,
) -> Trace:
    """Parse trace JSON held in a ``uint8`` array (see :func:`read_chrome_trace`).

    ``threads`` caps the threads of the scan (default: one per core for
    buffers of 16 MB and more); the result does not depend on it.
    """
    warnings = list(warnings or [])
    buf = np.ascontiguousarray(buf, dtype=np.uint8)
    if not buf.flags.writeable:  # one compiled signature: writable C-contiguous uint8
        buf = buf.copy()
    threads = _parallel.default_threads(buf.shape[0]) if threads is None else threads
    if first_run.use_quick(buf.shape[0], threads):
        quick = quick_scan(buf)
        if quick is not None:
            first_run.read_quickly(buf.shape[0])
            return _quick_trace(buf, quick, path, warnings)
    err, pos, n_ev, i64, i32, sym, nsym, top, ntop, n_bad, layout = _parallel.scan(buf, threads)
    if err != lex.OK:
        if not (salvage and err == lex.E_EOF):
            _raise(buf, err, pos, path, n_ev if layout != 2 else None)
        line, col = line_col(buf, pos)
        warnings.append(
            f"truncated trace: the file ends at byte {pos} (line {line}, column {col}) inside the JSON; "
            f"kept the {n_ev:,} complete events before the cut; top-level keys after it are missing"
        )
    if i64.shape[1] > n_ev + n_ev // 4 + 64:  # the estimate was far off: do not keep the slack alive
        i64, i32 = i64[:, :n_ev].copy(), i32[:, :n_ev].copy()
    dec = _Decoder(buf, path)
    top_level = _decode_top(dec, top[:ntop])
    if layout == 2 and err == lex.OK:
        raise TraceFormatError("not a trace: the JSON object has no 'traceEvents' array", path=path)
    if n_bad:
        warnings.append(f"skipped {n_bad} traceEvents entries that are not JSON objects")
    layout_name = "array" if layout == 1 else "object"
    meta = meta_from_top_level(top_level, path, layout_name)
    if n_ev == 0:
        what = f"none of its {n_bad} traceEvents entries is an event object" if n_bad else \
            "its traceEvents array is empty"
        if err != lex.OK:
            what = "the file is cut before its first complete event"
        raise TraceFormatError(f"no trace events: {what}", path=path)
    i32 = i32[:, :n_ev]
    columns = []
    for kind, (mapping, values) in zip(_CAT_KINDS, _categories(dec, sym[:nsym], warnings).values()):
        ks.remap(i32[kind], mapping)
        columns.append((i32[kind], values))
    events = _events_frame(i64[:, :n_ev], i32[ks.S_FLAGS], columns, meta.base_time_ns, warnings, ks.add_base)
    dec.warn(warnings)
    if meta.base_time_ns is None and err != lex.OK and events["ts_ns"].gt(0).any():
        ts = events["ts_ns"][events["ts_ns"] != schema.TS_MISSING]
        if len(ts) and ts.max() < 10**15:  # < ~11 days of ns: relative times without their base
            warnings.append("timestamps look relative and baseTimeNanoseconds was lost with the cut")
    raw = RawEvents(buf, i64[ks.R_EV_START, :n_ev], i64[ks.R_EV_END, :n_ev], args_at=i64[ks.R_ARGS, :n_ev])
    top_level.pop("traceEvents", None)
    return Trace(events, meta, raw, metadata=top_level, warnings=warnings)


def _raise(buf: np.ndarray, err: int, pos: int, path: str | None, event_index: int | None) -> None:
    line, col = line_col(buf, pos)
    text = _ERR_TEXT.get(err, f"scanner error {err}")
    if err != lex.E_EOF and 0 <= pos < buf.shape[0]:
        text += f" {bytes(buf[pos : pos + 1])!r}"  # the byte only: the text around it may hold secrets
    raise TraceFormatError(
        text,
        path=path,
        offset=int(pos),
        line=line,
        column=col,
        event_index=event_index,
    )


class _Decoder:
    """Decodes the scanner's tokens; text that is not UTF-8 is replaced (U+FFFD) and counted, never fatal."""

    def __init__(self, buf: np.ndarray, path: str | None) -> None:
        self.buf, self.path = buf, path
        self.bad: list[int] = []  # offsets of tokens that held invalid UTF-8

    def token(self, s: int, e: int) -> Any:
        raw = self.buf[s:e].tobytes()
        try:
            try:
                if raw[:1] == b'"' and b"\\" not in raw:
                    return raw[1:-1].decode("utf-8")
                return json.loads(raw)
            except UnicodeDecodeError:
                text = raw.decode("utf-8", "replace")
                value = text[1:-1] if raw[:1] == b'"' and "\\" not in text else json.loads(text)
                self.bad.append(s)
                return value
        except ValueError as exc:
            line, col = line_col(self.buf, s)
            raise TraceFormatError(f"undecodable text: {exc}", path=self.path, offset=s, line=line,
                                   column=col) from None

    def warn(self, warnings: list[str]) -> None:
        if self.bad:
            line, col = line_col(self.buf, self.bad[0])
            warnings.append(
                f"{len(self.bad)} string(s) held bytes that are not UTF-8 (first at byte {self.bad[0]}, line {line}, "
                f"column {col}); decoded with U+FFFD in their place; trace.event_bytes(i) has the exact bytes"
            )


def _decode_top(dec: _Decoder, top: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k_s, k_e, v_s, v_e in top.tolist():
        key = dec.token(k_s, k_e)
        if key == "traceEvents" and dec.buf[v_s] == 91:
            out[key] = None  # parsed by the scanner
            continue
        out[key] = dec.token(v_s, v_e)
    return out


def _categories(dec: _Decoder, sym: np.ndarray, warnings: list[str]) -> dict[int, tuple[np.ndarray, list[Any]]]:
    """Per symbol kind: (global id -> category code map, category values).

    Values that compare equal across types (``1``, ``1.0``, ``true``) share the
    first one's category (a category set holds each value once), and ``NaN``
    is missing, as null is; each with a warning.
    """
    buf = dec.buf
    nsym = sym.shape[0]
    result = {}
    for kind, column in zip(_CAT_KINDS, schema.CATEGORY_COLUMNS):
        mapping = np.full(nsym, -1, np.int32)
        values: list[Any] = []
        index: dict[Any, int] = {}
        merged: list[str] = []
        nan = False
        for sid in np.flatnonzero(sym[:, 2] == kind).tolist():
            s, e = int(sym[sid, 0]), int(sym[sid, 1])
            value = dec.token(s, e)
            if kind in _TEXT_KINDS and not isinstance(value, str):
                value = buf[s:e].tobytes().decode("utf-8", "replace")
            elif isinstance(value, (dict, list)):
                value = buf[s:e].tobytes().decode("utf-8", "replace")
            elif value != value:  # NaN: a category set holds no NaN; missing, as null is
                nan = True
                continue
            code = index.get(value)
            if code is None:
                code = len(values)
                index[value] = code
                values.append(value)
            elif type(values[code]) is not type(value) and len(merged) < 3:
                merged.append(f"{value!r} as {values[code]!r}")
            mapping[sid] = code
        if merged:
            warnings.append(f"{column} values of different JSON types compare equal and share one category "
                            f"({', '.join(merged)}); trace.event_json(i) keeps the file's value")
        if nan:
            warnings.append(f"{column} values NaN are treated as missing; trace.event_json(i) keeps the file's value")
        result[kind] = (mapping, values)
    return result


def _categorical(codes: np.ndarray, values: list[Any], text: bool) -> pd.Categorical:
    if text or all(isinstance(v, str) for v in values):
        cats = pd.Index(values, dtype="str")
    else:
        cats = pd.Index(values, dtype=object)
    return pd.Categorical.from_codes(codes, categories=cats, validate=False)


def _add_base(ts: np.ndarray, base: int) -> None:
    ts[ts != schema.TS_MISSING] += base


def _quick_trace(buf: np.ndarray, quick: QuickScan, path: str | None, warnings: list[str]) -> Trace:
    """The trace from :func:`~aonkit.sources.quick_json.quick_scan`'s columns (as :func:`parse_buffer` builds it)."""
    if quick.n_bad:
        warnings.append(f"skipped {quick.n_bad} traceEvents entries that are not JSON objects")
    meta = meta_from_top_level(quick.top_level, path, "array" if quick.layout == 1 else "object")
    events = _events_frame(quick.i64, quick.flags, quick.categories, meta.base_time_ns, warnings, _add_base)
    i64 = quick.i64
    raw = RawEvents(buf, i64[ks.R_EV_START], i64[ks.R_EV_END], args_at=i64[ks.R_ARGS])
    top_level = dict(quick.top_level)
    top_level.pop("traceEvents", None)
    return Trace(events, meta, raw, metadata=top_level, warnings=warnings)


def _events_frame(
    i64: np.ndarray,
    flags: np.ndarray,
    columns: list[tuple[np.ndarray, list[Any]]],
    base_ns: int | None,
    warnings: list[str],
    add_base: Callable[[np.ndarray, int], None],
) -> pd.DataFrame:
    """Columns as views of the scanner's matrices (no copies), base time added in place.

    ``columns``: per symbol kind (``K_*`` order), the category codes and values.
    """
    data: dict[str, Any] = {}
    for name, kind, (codes, values) in zip(schema.CATEGORY_COLUMNS, _CAT_KINDS, columns):
        data[name] = _categorical(codes, values, kind in _TEXT_KINDS)
    ts = i64[ks.R_TS]
    if base_ns:
        add_base(ts, base_ns)
    data["ts_ns"] = ts
    for name, row in (
        ("dur_ns", ks.R_DUR), ("correlation", ks.R_CORR), ("external_id", ks.R_EXT),
        ("stream", ks.R_STREAM), ("device", ks.R_DEVICE), ("id", ks.R_ID),
    ):  # fmt: skip
        data[name] = i64[row]
    _flag_warnings(flags, warnings)
    no_duration(data["dur_ns"], warnings)
    return pd.DataFrame({c: data[c] for c in schema.EVENT_COLUMNS}, copy=False)


def _flag_warnings(flags: np.ndarray, warnings: list[str]) -> None:
    checks = (
        (ks.F_TIME_ROUNDED, "ts/dur values had digits below 1 ns and were rounded half to even"),
        (ks.F_TIME_NOT_NUMBER, "ts/dur values were not numbers and are treated as missing"),
        (ks.F_TIME_OVERFLOW, "ts/dur values overflow int64 nanoseconds and are treated as missing"),
        (ks.F_OVERFLOW, "integer ids (correlation, External id, stream, device, flow id) exceed int64; "
         "set to -1 in the typed columns, exact in event_args()"),
    )  # fmt: skip
    if not flags.any():
        return
    for bit, text in checks:
        hits = np.flatnonzero(flags & bit)
        if hits.shape[0]:
            warnings.append(f"{hits.shape[0]} event(s) (first: event {int(hits[0])}): {text}")
