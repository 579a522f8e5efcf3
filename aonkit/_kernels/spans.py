"""Byte-span helpers: gather scattered spans into one contiguous blob."""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .arrays import copy_to


@njit
def gather_spans(buf, start, end):
    """Concatenate ``buf[start[i]:end[i]]`` for every i; return (blob, offsets[n+1])."""
    n = start.shape[0]
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        ln = end[i] - start[i]
        if ln < 0 or start[i] < 0 or end[i] > buf.shape[0]:
            ln = 0
        offsets[i + 1] = offsets[i] + ln
    blob = np.empty(offsets[n], np.uint8)
    for i in range(n):
        o = offsets[i]
        copy_to(blob[o : offsets[i + 1]], buf[start[i] : start[i] + offsets[i + 1] - o])  # no slice assignment
    return blob, offsets
