"""Byte-span helpers: gather scattered spans into one contiguous blob."""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .arrays import copy_to


@njit
def _span_offsets(buf, start, end):
    """Offsets[n+1] of the spans ``buf[start[i]:end[i]]`` laid end to end (a span outside ``buf`` counts 0)."""
    n = start.shape[0]
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        ln = end[i] - start[i]
        if ln < 0 or start[i] < 0 or end[i] > buf.shape[0]:
            ln = 0
        offsets[i + 1] = offsets[i] + ln
    return offsets


@njit
def _copy_spans(buf, start, offsets, blob):
    for i in range(start.shape[0]):
        o = offsets[i]
        copy_to(blob[o : offsets[i + 1]], buf[start[i] : start[i] + offsets[i + 1] - o])  # no slice assignment


@njit
def gather_spans(buf, start, end):
    """Concatenate ``buf[start[i]:end[i]]`` for every i; return (blob, offsets[n+1])."""
    offsets = _span_offsets(buf, start, end)
    blob = np.empty(offsets[start.shape[0]], np.uint8)
    _copy_spans(buf, start, offsets, blob)
    return blob, offsets


@njit
def gather_spans_into(buf, start, end, blob):
    """:func:`gather_spans` into ``blob`` (room for every span, as counted there); returns the offsets[n+1].

    Raises ValueError when ``blob`` is too small. For a caller that reuses one buffer from call to call: a new
    blob's first write costs more than the copy on some machines (its pages are faulted in one by one).
    """
    offsets = _span_offsets(buf, start, end)
    if offsets[start.shape[0]] > blob.shape[0]:
        raise ValueError("gather_spans_into: the blob is too small")
    _copy_spans(buf, start, offsets, blob)
    return offsets
