"""M4 decimation of counter samples (sampler metrics, allocator totals) per pixel."""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .binning import search


@njit
def m4(ts, val, t0, t1, width):
    """First, last, min and max sample (value and time) of each non-empty pixel of ``[t0, t1)``.

    ``ts`` is sorted. Sample ``i`` falls in pixel ``floor((ts[i] - t0) * width / (t1 - t0))``.
    NaN values are skipped.

    Returns
    -------
    before : int
        Index of the last non-NaN sample before ``t0`` (the value in force when
        the window opens); -1 when none.
    px, count : int64[cells]
        Pixel and number of samples of each non-empty pixel.
    idx : int64[cells, 4]
        Sample indices of the first, last, minimum and maximum value (first
        occurrence on ties).
    """
    lo = search(ts, np.int64(0), ts.shape[0], t0, np.bool_(False))
    hi = search(ts, lo, ts.shape[0], t1, np.bool_(False))
    before = np.int64(-1)
    for i in range(lo - 1, -1, -1):
        if not np.isnan(val[i]):
            before = i
            break
    scale = width / float(t1 - t0)
    px = np.empty(min(width, hi - lo), np.int64)
    count = np.empty(px.shape[0], np.int64)
    idx = np.empty((px.shape[0], 4), np.int64)
    n = 0
    for i in range(lo, hi):
        v = val[i]
        if np.isnan(v):
            continue
        c = min(np.int64((ts[i] - t0) * scale), width - 1)
        if n == 0 or px[n - 1] != c:
            px[n] = c
            count[n] = 0
            idx[n, 0] = idx[n, 2] = idx[n, 3] = i
            n += 1
        k = n - 1
        count[k] += 1
        idx[k, 1] = i
        if v < val[idx[k, 2]]:
            idx[k, 2] = i
        if v > val[idx[k, 3]]:
            idx[k, 3] = i
    return before, px[:n], count[:n], idx[:n]
