"""How busy a set of intervals keeps each of many time windows (:mod:`aonkit.analysis.sample_align`).

A sample of GPU activity (NVML's utilization, a GPM metric, an nsys ``GPU_METRICS`` row) describes a window
of time; the trace says which part of that window had a kernel running. Lining the two up means asking that
for every window at each of a few hundred trial shifts: hundreds of thousands of windows, each a pair of
binary searches in the union of the trace's intervals.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .binning import search


@njit
def merge_intervals(start, end):
    """The union of ``[start[i], end[i])`` as disjoint intervals in time order; inputs sorted by start.

    Empty and negative intervals (``end <= start``) add nothing. Returns ``(starts, ends)``.
    """
    n = start.shape[0]
    out_s = np.empty(n, np.int64)
    out_e = np.empty(n, np.int64)
    k = 0
    for i in range(n):
        s, e = start[i], end[i]
        if e <= s:
            continue
        if k > 0 and s <= out_e[k - 1]:
            if e > out_e[k - 1]:
                out_e[k - 1] = e
        else:
            out_s[k] = s
            out_e[k] = e
            k += 1
    return out_s[:k], out_e[:k]


@njit
def _busy_until(ms, me, before, t):
    """Busy time of the disjoint intervals ``(ms, me)`` before ``t``; ``before[i]``: the lengths before ``i``."""
    j = search(ms, 0, ms.shape[0], t, True) - 1  # the last interval starting at or before t
    if j < 0:
        return np.int64(0)
    return before[j] + min(t, me[j]) - ms[j]


@njit
def lagged_busy(ms, me, w0, w1, lags):
    """Busy time inside each window ``[w0[k] - lag, w1[k] - lag)``, for each lag: shape ``(lags, windows)``.

    ``(ms, me)`` are disjoint intervals in time order (:func:`merge_intervals`).
    """
    n = ms.shape[0]
    before = np.empty(n, np.int64)
    acc = np.int64(0)
    for i in range(n):
        before[i] = acc
        acc += me[i] - ms[i]
    out = np.empty((lags.shape[0], w0.shape[0]), np.int64)
    for a in range(lags.shape[0]):
        lag = lags[a]
        for k in range(w0.shape[0]):
            out[a, k] = _busy_until(ms, me, before, w1[k] - lag) - _busy_until(ms, me, before, w0[k] - lag)
    return out
