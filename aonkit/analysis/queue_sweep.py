"""The native queue counter's sweep: the Numba kernels, or numpy until they are compiled.

:func:`queue_sweep` groups the items by stream and merges each stream's
entries and exits (:func:`aonkit._kernels.step_series.queue_levels`, 1.1 ms
on 200,000 GPU events here, about 1 s to compile on a new machine); its inputs
come from :func:`aonkit._kernels.step_series.queue_inputs` (0.4 s to compile).
Until they are compiled :func:`numpy_queue_levels` (a stable sort per stream
and a running sum) and :func:`numpy_queue_inputs` stand in
(:mod:`.standin`), with the same results.
"""

from __future__ import annotations

import numpy as np

__all__ = ["numpy_queue_inputs", "numpy_queue_levels", "queue_sweep"]


def queue_sweep(keys: np.ndarray, up: np.ndarray, down: np.ndarray, flag: np.ndarray,
                store: bool) -> tuple[np.ndarray, ...]:
    """Per group of ``keys`` (ascending): the count of items entered (``up``) and not yet left (``down``).

    The items of each group ordered by entry time (the shared grouping of
    :func:`~aonkit.analysis.group_order.group_time_order`), then one merge
    per group of their entry and exit times
    (:func:`aonkit._kernels.step_series.queue_levels`); no ordering of the
    input is needed. Returns (times, levels, out offsets
    (groups + 1), group keys, items per group, items with ``flag`` per group,
    peak level, time-weighted mean level per group); with ``store`` False no
    times or levels are kept.
    """
    from .._kernels.step_series import queue_levels
    from .group_order import group_time_order
    from .standin import kernel_or_standin

    pos, offsets, gkeys = group_time_order(keys, up)
    t, level, out_off, peak, mean = kernel_or_standin(queue_levels, numpy_queue_levels, up, down, pos, offsets, store)
    items = np.diff(offsets)
    flagged = np.add.reduceat(flag[pos], offsets[:-1], dtype=np.int64) if flag.any() else np.zeros_like(items)
    return t, level, out_off, gkeys, items, flagged, peak, mean


def numpy_queue_inputs(gpu: np.ndarray, launch: np.ndarray, ts: np.ndarray, device: np.ndarray, stream: np.ndarray,
                       missing: int, window: int) -> tuple[np.ndarray, ...]:  # fmt: skip
    """:func:`aonkit._kernels.step_series.queue_inputs` in numpy (its stand-in).

    Returns (enqueue times, start times, launched-before flags, device, stream) of the events with a start.
    """
    start = ts[gpu]
    keep = start != missing
    rows, launch, down = gpu[keep], launch[keep], start[keep]
    before = launch < 0
    up = np.where(before, np.int64(window), np.minimum(ts[np.maximum(launch, 0)], down)) if len(rows) else down
    return up.astype(np.int64), down.astype(np.int64), before, device[rows], stream[rows]


def numpy_queue_levels(up: np.ndarray, down: np.ndarray, order: np.ndarray, offsets: np.ndarray,
                       store: bool) -> tuple[np.ndarray, ...]:  # fmt: skip
    """:func:`aonkit._kernels.step_series.queue_levels` in numpy (its stand-in): the same arrays, bit for bit.

    Per group, the entries (+1) and exits (-1) in time order and their running
    sum, kept after the last change at each instant; the time-weighted area is
    summed in the kernel's order (``np.cumsum``), so the mean rounds alike.
    """
    n_g = len(offsets) - 1
    times, levels = [], []
    out_off = np.zeros(n_g + 1, np.int64)
    peak = np.zeros(n_g, np.int64)
    mean = np.full(n_g, np.nan)
    for g in range(n_g):
        lo, hi = int(offsets[g]), int(offsets[g + 1])
        m = hi - lo
        out_off[g + 1] = out_off[g]
        if m == 0:
            continue
        u, d = up[order[lo:hi]], np.sort(down[order[lo:hi]], kind="stable")
        t = np.concatenate([u, d])
        o = np.argsort(t, kind="stable")
        t = t[o]
        c = np.cumsum(np.concatenate([np.ones(m, np.int64), np.full(m, -1, np.int64)])[o])
        last = np.flatnonzero(np.append(t[1:] != t[:-1], True))  # the level after every change at an instant
        t, c = t[last], c[last]
        peak[g] = c.max()
        area = np.cumsum(c[:-1].astype(np.float64) * np.diff(t).astype(np.float64))
        t_first, t_last = min(u[0], d[0]), max(u[-1], d[-1])
        if t_last > t_first:
            mean[g] = (area[-1] if len(area) else 0.0) / float(t_last - t_first)
        if store:
            times.append(t)
            levels.append(c)
            out_off[g + 1] += len(t)
    empty = np.empty(0, np.int64)
    return (np.concatenate(times) if times else empty, np.concatenate(levels) if levels else empty, out_off,
            peak, mean)  # fmt: skip
