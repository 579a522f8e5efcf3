"""Arg look-ups in a trace's event text: ``args[key]`` of many events at once, by Numba kernels or the stdlib.

Each look-up goes straight to each event's ``args`` object when its offset is
known (recorded by the scanner, stored in caches), else walks the event's
text. While the kernels it needs would compile (neither compiled in this
process nor in Numba's on-disk cache) and the rows are few, the walk is done
by :mod:`aonkit.arg_text` (the stdlib's C JSON scanner, identical results)
instead. The :class:`~aonkit.trace.Trace` methods ``arg_values``,
``arg_numbers``, ``arg_ints`` and ``arg_ints_of`` call these.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import arg_text
from .event_text import EventText, RawEvents

Rows = np.ndarray | pd.Index | None


def walk_quickly(rows: int, *calls: tuple[Any, ...]) -> bool:
    """Whether an arg look-up over ``rows`` events runs in :mod:`aonkit.arg_text` rather than in kernels.

    ``calls``: ``(kernel, *args)`` for each kernel the other way would call. True while one of them would
    compile, the rows are few (:data:`~aonkit.arg_text.QUICK_ROWS`) and this process has not walked
    :data:`~aonkit.arg_text.QUICK_BUDGET_ROWS` events so already (past them, compiling is the cheaper way on),
    or has but a background compilation runs (it puts the kernels in the cache: compiling them here too would
    only repeat its work). ``AONKIT_QUICK_PARSE``: ``0`` never, ``1`` whenever the rows are few.
    """
    from ._kernels._ready import is_ready
    from .sources.first_run import background_compiling, mode

    if rows > arg_text.QUICK_ROWS:
        return False
    m = mode()
    if m != "auto":
        return m == "1"
    if all(is_ready(kernel, *args) for kernel, *args in calls):
        return False
    return arg_text.spend(rows) or background_compiling()


def span_ints(buf: np.ndarray, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact int64 of each value span and whether it is an integer that fits (kernel or stand-in)."""
    from ._kernels.args import span_ints as kernel

    if walk_quickly(len(spans), (kernel, buf, spans)):
        return arg_text.span_ints(buf, spans)
    return kernel(buf, spans)


def spans_of(raw: EventText, keys: Sequence[str], rows: Rows) -> tuple[np.ndarray, np.ndarray]:
    """Value spans of ``args[key]`` for each key, shape (rows, keys, 2) (-1: absent), and the text buffer."""
    from ._kernels.args import args_starts, find_args, find_args_at
    from ._kernels.inputs import frozen

    quoted = [np.frombuffer(json.dumps(k).encode(), np.uint8) for k in keys]
    key_off = np.concatenate([[0], np.cumsum([len(q) for q in quoted])]).astype(np.int64)
    flat = np.concatenate(quoted) if quoted else np.empty(0, np.uint8)
    texts = [q.tobytes() for q in quoted]
    if rows is not None and isinstance(raw, RawEvents) and (part := raw.subset(np.asarray(rows, np.int64))):
        raw, rows = part  # a few events of a text read in parts (a cache's): only the part that holds them
    if isinstance(raw, RawEvents) and raw.offsets_apply:  # straight to each event's args object
        buf, start, end = raw.spans()
        idx = np.arange(len(end), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        known = raw.known_args_offsets()
        at = end if known is None else known  # the same array type: what the readiness check needs
        look_up = (find_args_at, buf, frozen(end), frozen(at), frozen(idx), flat, key_off)
        finding = () if known is not None else ((args_starts, buf, np.ascontiguousarray(start, np.int64),
                                                 np.ascontiguousarray(end, np.int64)),)  # fmt: skip
        if walk_quickly(len(idx), look_up, *finding):
            try:
                return arg_text.find_args(buf, start, end, known, idx, texts), buf
            except arg_text.Declined:
                pass
        return find_args_at(buf, frozen(end), frozen(raw.args_offsets()), frozen(idx), flat, key_off), buf
    buf, start, end, idx = raw.select(None if rows is None else np.asarray(rows, dtype=np.int64))
    args = (buf, np.ascontiguousarray(start), np.ascontiguousarray(end), idx, flat, key_off)
    if walk_quickly(len(idx), (find_args, *args)):
        try:
            return arg_text.find_args(buf, start, end, None, idx, texts), buf
        except arg_text.Declined:
            pass
    return find_args(*args), buf


def values(raw: EventText, key: str, rows: Rows) -> list[Any]:
    """Decoded ``args[key]`` of the events ``rows`` (positions; all when None), None where absent."""
    spans, buf = _spans(raw, key, rows)
    return [None if s < 0 else json.loads(buf[s:e].tobytes()) for s, e in spans.tolist()]


def numbers(raw: EventText, key: str, rows: Rows) -> np.ndarray:
    """``args[key]`` as float64, NaN where absent or not a number (see ``Trace.arg_numbers``)."""
    from ._kernels.args import span_floats

    spans, buf = _spans(raw, key, rows)
    ints, ok = span_ints(buf, spans)
    out = ints.astype(np.float64)
    rest = np.flatnonzero(~ok & (spans[:, 0] >= 0))
    if len(rest):  # floats, where one IEEE operation gives them exactly (most of them)
        part = np.ascontiguousarray(spans[rest])
        if not walk_quickly(len(rest), (span_floats, buf, part)):  # else json.loads below: the same values
            floats, fok = span_floats(buf, part)
            out[rest[fok]] = floats[fok]
            rest = rest[~fok]
    if len(rest):  # the other values, decoded by one json.loads of them all as one array
        view = memoryview(buf)
        text = b"[" + b",".join([view[s:e] for s, e in spans[rest].tolist()]) + b"]"
        decoded = json.loads(text.decode("utf-8", "replace"))
        first = buf[spans[rest, 0]]
        if ((first == 45) | ((first >= 48) & (first <= 57))).all():  # JSON numbers only: no per-value checks
            out[rest] = np.array(decoded, dtype=np.float64)
        else:
            for r, v in zip(rest.tolist(), decoded):
                try:
                    out[r] = float(v) if not isinstance(v, (bool, dict, list, type(None))) else np.nan
                except ValueError:
                    out[r] = np.nan
    out[spans[:, 0] < 0] = np.nan
    return out


def ints(raw: EventText, key: str, rows: Rows) -> np.ndarray:
    """``args[key]`` as exact int64; -1 where absent or not an integer that fits."""
    spans, buf = _spans(raw, key, rows)
    found, ok = span_ints(buf, spans)
    return np.where(ok, found, -1)


def ints_of(raw: EventText, keys: Sequence[str], rows: Rows) -> dict[str, np.ndarray]:
    """:func:`ints` of several keys from one pass over the events' text: ``{key: int64 array}``."""
    spans, buf = spans_of(raw, keys, rows)
    out = {}
    for k, key in enumerate(keys):
        found, ok = span_ints(buf, np.ascontiguousarray(spans[:, k, :]))
        out[key] = np.where(ok, found, -1)
    return out


def _spans(raw: EventText, key: str, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
    spans, buf = spans_of(raw, [key], rows)
    return np.ascontiguousarray(spans[:, 0, :]), buf
