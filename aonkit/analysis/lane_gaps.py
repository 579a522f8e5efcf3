"""Idle gaps of GPU lanes and streams: the Numba sweeps, or numpy until they are compiled.

:func:`aonkit._kernels.idle.lane_gaps` sweeps each lane once (about 1 ms for
111,000 GPU events here; numpy 6.6 ms) but costs about 0.7 s to compile on a new machine,
the largest part of a first ``overview``; HTA's stream gaps
(:func:`aonkit._kernels.gpu_streams.idle_gaps`) cost 1.1-1.7 s. Until they are
compiled the numpy ways below stand in (:mod:`.standin`), with the same
integers.
"""

from __future__ import annotations

import numpy as np

__all__ = ["lane_gaps", "numpy_idle_gaps", "numpy_lane_gaps"]

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


def numpy_idle_gaps(rows: np.ndarray, offsets: np.ndarray, ts: np.ndarray, end: np.ndarray, start: np.ndarray,
                    found: np.ndarray, delay: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """:func:`aonkit._kernels.gpu_streams.idle_gaps` in numpy: each gap's category, then one stable sort.

    Returns (gaps: per stream, its category 0 gaps, then 1, then 2, each in
    time order, the first slot of 2 the stream's first event's 0; count and
    total per stream and category).
    """
    n_s = len(offsets) - 1
    sizes = np.diff(offsets)
    t, e, st, f = ts[rows], end[rows], start[rows], found[rows]
    prev_end = np.concatenate([[0], e[:-1]]).astype(np.int64) if len(rows) else e
    gap = t - prev_end  # from the previous event's end (not the latest end so far), as HTA
    host = f & (st > prev_end)
    cat = np.where(host, 0, np.where(gap < delay, 1, 2))
    first = offsets[:-1][sizes > 0]
    cat[first], gap[first] = 2, 0  # a stream's first event: no gap
    stream_of = np.repeat(np.arange(n_s), sizes)
    count = np.zeros((n_s, 3), np.int64)
    total = np.zeros((n_s, 3), np.int64)
    np.add.at(count, (stream_of, cat), 1)
    np.add.at(total, (stream_of, cat), gap)
    return gap[np.lexsort((cat, stream_of))], count, total
