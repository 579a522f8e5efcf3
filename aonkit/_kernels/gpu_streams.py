"""Per-stream sweeps over GPU events: idle gaps, launch-queue counters, launch/GPU correlation joins.

Rows are events of one rank: ``stream`` (-1 on the CPU side), ``ts``,
``end``, ``corr`` (correlation), all int64 and in the caller's row order.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .describe import describe_segment
from .keys import compact, group_rows

HOST_WAIT = 0
KERNEL_WAIT = 1
OTHER = 2


@njit
def launch_table_and_gpu_rows(stream, ts, corr):
    """Start of the first CPU-side row of each correlation (a table), and the GPU rows, in one pass.

    Returns (slot keys, lo, start per slot, found per slot, GPU rows): the
    slot of row i is ``slot[i] - lo`` where ``corr[i] != -1``; correlation -1
    never matches.
    """
    slot, lo, size = compact(corr, corr != -1)
    first = np.zeros(size, np.int64)
    seen = np.zeros(size, np.bool_)
    gpu = np.empty(stream.shape[0], np.int64)
    m = 0
    for i in range(stream.shape[0]):
        if stream[i] != -1:
            gpu[m] = i
            m += 1
        elif corr[i] != -1:
            j = slot[i] - lo
            if not seen[j]:
                seen[j] = True
                first[j] = ts[i]
    return slot, lo, first, seen, gpu[:m]


@njit
def idle_gaps(stream, ts, end, corr, delay):
    """Gaps between consecutive GPU events of each stream, classified as HTA classifies them.

    A gap is ``HOST_WAIT`` when the launch call of the next event (the first
    CPU-side row with its correlation) started after the previous event
    ended, else ``KERNEL_WAIT`` when shorter than ``delay``, else ``OTHER``.
    The first event of a stream has no gap (NaN) and counts as ``OTHER``.

    Returns
    -------
    streams : int64[S]
        Stream values in order of first appearance.
    present : bool[S, 3]
        Whether the stream has an event of each category (the NaN one included).
    total : int64[S, 3]
        Sum of the gaps per category.
    stats : float64[S, 3, 8]
        pandas' ``describe()`` of the gaps per category (count, mean, std, min, 25%, 50%, 75%, max).
    """
    slot, slot_lo, starts, found, gpu = launch_table_and_gpu_rows(stream, ts, corr)
    rows, offsets, streams = group_rows(stream, gpu, False, ts, True)
    n_s = streams.shape[0]
    n_g = n_s * 3  # group of (stream s, category c): s * 3 + c
    group = np.empty(rows.shape[0], np.int64)
    gap = np.zeros(rows.shape[0], np.int64)
    count = np.zeros(n_g, np.int64)
    total = np.zeros(n_g, np.int64)
    for s in range(n_s):
        lo = offsets[s]
        group[lo] = s * 3 + OTHER
        count[s * 3 + OTHER] += 1
        prev_end = end[rows[lo]]
        for k in range(lo + 1, offsets[s + 1]):
            i = rows[k]
            g = ts[i] - prev_end
            j = slot[i] - slot_lo
            if corr[i] != -1 and found[j] and starts[j] > prev_end:
                c = s * 3 + HOST_WAIT
            elif g < delay:
                c = s * 3 + KERNEL_WAIT
            else:
                c = s * 3 + OTHER
            group[k] = c
            gap[k] = g
            count[c] += 1
            total[c] += g
            prev_end = end[i]
    # each group's gaps in time order; a stream's first (NaN) slot holds 0 and leads its OTHER group
    goff = np.zeros(n_g + 1, np.int64)
    for c in range(n_g):
        goff[c + 1] = goff[c] + count[c]
    fill = goff[:-1].copy()
    vals = np.empty(rows.shape[0], np.int64)
    for k in range(rows.shape[0]):
        vals[fill[group[k]]] = gap[k]
        fill[group[k]] += 1
    stats = np.full((n_s, 3, 8), np.nan)
    for c in range(n_g):
        lo, hi = goff[c], goff[c + 1]
        if hi > lo:
            stats[c // 3, c % 3] = describe_segment(vals, lo, hi - lo, lo if c % 3 == OTHER else -1)
    return streams, (count > 0).reshape((n_s, 3)), total.reshape((n_s, 3)), stats
