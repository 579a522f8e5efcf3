"""Idle gaps of GPU lanes: the Numba sweep, or numpy per lane until it is compiled.

:func:`aonkit._kernels.idle.lane_gaps` sweeps each lane once (about 1 ms for
111,000 GPU events here; numpy 6.6 ms) but costs about 0.7 s to compile on a new machine,
the largest part of a first ``overview``; until it is compiled the numpy way
below stands in (:mod:`.standin`), with the same integers.
"""

from __future__ import annotations

import numpy as np

__all__ = ["lane_gaps", "numpy_lane_gaps"]

_NONE = np.iinfo(np.int64).max


def numpy_lane_gaps(rows: np.ndarray, offsets: np.ndarray, ts: np.ndarray, end: np.ndarray, launch: np.ndarray,
                    found: np.ndarray, delay: int) -> tuple[np.ndarray, ...]:  # fmt: skip
    """:func:`aonkit._kernels.idle.lane_gaps` with numpy: running maxima and reductions over runs, per lane."""
    n_l = len(offsets) - 1
    span, busy = np.zeros(n_l, np.int64), np.zeros(n_l, np.int64)
    idle = np.zeros((n_l, 3), np.int64)
    parts = [np.empty((0, 5), np.int64)]
    for s in range(n_l):
        seg = rows[offsets[s] : offsets[s + 1]]
        t, e = ts[seg], end[seg]
        reach = np.maximum.accumulate(e)  # the latest end up to each event
        prev = reach[:-1]  # before events 1..m-1
        tk, ek = t[1:], e[1:]
        busy[s] = (e[0] - t[0]) + int(np.where(ek > prev, ek - np.maximum(tk, prev), 0).sum())
        span[s] = reach[-1] - t[0]
        at = np.flatnonzero(tk > prev) + 1  # events that end a gap (each the first at its instant)
        if not len(at):
            continue
        starts = np.flatnonzero(np.concatenate(([True], t[1:] != t[:-1])))  # runs of one start time
        run = np.searchsorted(starts, at)  # at is a run start: its run's index
        f = found[seg]
        best = np.minimum.reduceat(np.where(f, launch[seg], _NONE), starts)[run]
        has = np.logical_or.reduceat(f, starts)[run]
        before = reach[at - 1]
        gap = t[at] - before
        cat = np.where(has & (best > before), 0, np.where(gap < delay, 1, 2))
        for c in range(3):
            idle[s, c] = gap[cat == c].sum()
        parts.append(np.column_stack([np.full(len(at), s), before, t[at], cat, seg[at]]).astype(np.int64))
    return span, busy, idle, np.concatenate(parts)


def lane_gaps(rows: np.ndarray, offsets: np.ndarray, ts: np.ndarray, end: np.ndarray, launch: np.ndarray,
              found: np.ndarray, delay: int) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Idle gaps of every lane (see :func:`aonkit._kernels.idle.lane_gaps`): kernel, or numpy until it is compiled.

    Returns (span, busy, idle per category, gaps: lane, start, end, category, row).
    """
    from .._kernels.idle import lane_gaps as kernel
    from .standin import kernel_or_standin

    return kernel_or_standin(kernel, numpy_lane_gaps, rows, offsets, ts, end, launch, found, np.int64(delay))
