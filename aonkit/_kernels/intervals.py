"""Interval arithmetic on sorted int64 arrays."""

from __future__ import annotations

import numpy as np

from ._jit import njit


@njit
def union_length(start, end):
    """Total length covered by the union of [start[i], end[i]); inputs sorted by start."""
    total = np.int64(0)
    n = start.shape[0]
    if n == 0:
        return total
    cur_s = start[0]
    cur_e = end[0]
    for i in range(1, n):
        s = start[i]
        e = end[i]
        if s > cur_e:
            total += cur_e - cur_s
            cur_s = s
            cur_e = e
        elif e > cur_e:
            cur_e = e
    total += cur_e - cur_s
    return total


@njit
def intersection_length(sa, ea, sb, eb):
    """Length of the intersection of two sets of disjoint intervals, each sorted by start."""
    i = 0
    j = 0
    total = np.int64(0)
    while i < sa.shape[0] and j < sb.shape[0]:
        lo = max(sa[i], sb[j])
        hi = min(ea[i], eb[j])
        if hi > lo:
            total += hi - lo
        if ea[i] < eb[j]:
            i += 1
        else:
            j += 1
    return total


@njit
def segment_unions(start, end, offsets):
    """:func:`union_length` of each segment ``[offsets[g], offsets[g + 1])``; each segment sorted by start."""
    out = np.zeros(offsets.shape[0] - 1, np.int64)
    for g in range(offsets.shape[0] - 1):
        out[g] = union_length(start[offsets[g] : offsets[g + 1]], end[offsets[g] : offsets[g + 1]])
    return out
