"""Byte-span helpers: gather scattered spans into one contiguous blob."""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .arrays import copy_to


@njit
def span_offsets(buf, start, end):
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
def copy_spans(buf, start, offsets, blob):
    """Write the spans that :func:`span_offsets` laid out (``offsets``) into ``blob``, which must hold them.

    Raises ValueError when ``blob`` is too small. For a caller that reuses one buffer from call to call: a new
    blob's first write costs more than the copy on some machines (its pages are faulted in one by one).
    """
    n = start.shape[0]
    if offsets[n] > blob.shape[0]:
        raise ValueError("copy_spans: the blob is too small")
    for i in range(n):
        o = offsets[i]
        copy_to(blob[o : offsets[i + 1]], buf[start[i] : start[i] + offsets[i + 1] - o])  # no slice assignment


@njit
def gather_spans(buf, start, end):
    """Concatenate ``buf[start[i]:end[i]]`` for every i; return (blob, offsets[n+1])."""
    offsets = span_offsets(buf, start, end)
    blob = np.empty(offsets[start.shape[0]], np.uint8)
    copy_spans(buf, start, offsets, blob)
    return blob, offsets
