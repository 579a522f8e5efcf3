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
