"""Peak and time-weighted mean of step series per group: the Numba kernel, or numpy until it is compiled."""

from __future__ import annotations

import numpy as np

__all__ = ["numpy_time_weighted", "time_weighted"]


def numpy_time_weighted(times: np.ndarray, levels: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`aonkit._kernels.step_series.time_weighted` in numpy, bit for bit.

    The area is summed in the kernel's order (``np.cumsum`` adds one term
    after the other), so the mean rounds alike; a NaN level is the peak, as in
    the kernel and ``max()``.
    """
    n_g = len(offsets) - 1
    peak = np.zeros(n_g, np.float64)
    mean = np.full(n_g, np.nan)
    for g in range(n_g):
        lo, hi = int(offsets[g]), int(offsets[g + 1])
        if hi == lo:
            continue
        t, lv = times[lo:hi], levels[lo:hi]
        peak[g] = np.max(lv)
        span = t[-1] - t[0]
        if span > 0:
            area = np.cumsum(lv[:-1] * np.diff(t).astype(np.float64))
            mean[g] = area[-1] / span
    return peak, mean


def time_weighted(times: np.ndarray, levels: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group (``offsets``): the highest level and its time-weighted mean from the first change to the last.

    The kernel takes 0.7 s to compile on a new machine; until it is compiled
    :func:`numpy_time_weighted` stands in (:mod:`.standin`). Returns (peak,
    mean), float64; the mean is NaN over a span of 0 ns.
    """
    from .._kernels.step_series import time_weighted as kernel
    from .standin import kernel_or_standin

    return kernel_or_standin(kernel, numpy_time_weighted, times, levels, offsets)
