"""Idle gaps between the GPU events of each stream, classified as HTA classifies them.

Rows are GPU events of one rank: ``stream``, ``ts``, ``end`` and the start
of the launch call, all int64 and in the caller's row order.
Loops index with ``range(n)`` from 0 or ``np.uintp`` (see :mod:`.keys`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .arrays import copy_to
from .describe import describe
from .keys import stream_groups
from .sorting import is_sorted, stable_argsort

HOST_WAIT = 0
KERNEL_WAIT = 1
OTHER = 2


@njit
def _by_stream(stream, ts, end, start, found):
    """GPU events' ts, end, launch start and found, grouped by stream (first appearance), by start within one (stably).

    Returns (ts, end, start, found, offsets, stream values).
    """
    slots, lo, group_of, offsets, streams = stream_groups(stream, np.bool_(False))
    m = offsets[-1]
    g_ts = np.empty(m, np.int64)
    g_end = np.empty(m, np.int64)
    g_start = np.empty(m, np.int64)
    g_found = np.empty(m, np.bool_)
    fill = offsets[:-1].copy()
    for i in range(stream.shape[0]):
        if stream[i] != -1:
            b = np.uintp(group_of[np.uintp(slots[i] - lo)])
            k = np.uintp(fill[b])
            fill[b] += 1
            g_ts[k] = ts[i]
            g_end[k] = end[i]
            g_start[k] = start[i]
            g_found[k] = found[i]
    for s in range(streams.shape[0]):  # usually in order already
        seg = slice(offsets[s], offsets[s + 1])
        if not is_sorted(g_ts[seg]):
            order = stable_argsort(g_ts[seg])
            copy_to(g_ts[seg], g_ts[seg][order])
            copy_to(g_end[seg], g_end[seg][order])
            copy_to(g_start[seg], g_start[seg][order])
            copy_to(g_found[seg], g_found[seg][order])
    return g_ts, g_end, g_start, g_found, offsets, streams


@njit
def _stream_gaps(ts, end, start, found, spare, delay):
    """Gaps before the events of one stream (time order), split by category, in place.

    ``start``/``found``: each event's launch call start, if any. The gaps of
    category 0 (host wait) go to the front of ``spare``, of 1 (kernel wait)
    of ``start``, of 2 (other) of ``ts``, each in time order; the first slot
    of OTHER is the stream's first event (no gap: 0 here). Every write lands
    at or before the element being read, so nothing unread is overwritten.
    Returns (count per category, sum per category).
    """
    n0 = np.uintp(0)
    n1 = np.uintp(0)
    n2 = np.uintp(1)
    t0 = np.int64(0)
    t1 = np.int64(0)
    t2 = np.int64(0)
    prev_end = end[0]
    ts[0] = 0
    for k in range(1, ts.shape[0]):
        g = ts[k] - prev_end
        host = found[k] & (start[k] > prev_end)
        short = g < delay
        is1 = (not host) & short
        is2 = not (host | short)
        prev_end = end[k]
        spare[n0] = g
        start[n1] = g
        ts[n2] = g
        n0 += np.uintp(host)
        n1 += np.uintp(is1)
        n2 += np.uintp(is2)
        t0 += g * host
        t1 += g * is1
        t2 += g * is2
    return np.array([n0, n1, n2], np.int64), np.array([t0, t1, t2])


@njit
def idle_gaps(stream, ts, end, start, found, delay):
    """Gaps between consecutive GPU events of each stream, classified as HTA classifies them.

    Rows are the GPU events (``stream != -1``; other rows are skipped), with
    the start of each one's launch call in ``start`` where ``found``. A gap
    is ``HOST_WAIT`` when the launch call of the next event started after
    the previous event ended, else ``KERNEL_WAIT`` when shorter than
    ``delay``, else ``OTHER``. The first event of a stream has no gap (NaN)
    and counts as ``OTHER``.

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
    g_ts, g_end, start, found, offsets, streams = _by_stream(stream, ts, end, start, found)
    spare = np.empty(g_ts.shape[0], np.int64)
    n_s = streams.shape[0]
    total = np.zeros((n_s, 3), np.int64)
    present = np.zeros((n_s, 3), np.bool_)
    stats = np.full((n_s, 3, 8), np.nan)
    for s in range(n_s):
        seg = slice(offsets[s], offsets[s + 1])
        runs = (spare[seg], start[seg], g_ts[seg])
        count, tot = _stream_gaps(runs[2], g_end[seg], runs[1], found[seg], runs[0], delay)
        copy_to(total[s], tot)
        for c in range(3):
            if count[c]:  # the stream's first (NaN) slot leads its OTHER run
                present[s, c] = True
                copy_to(stats[s, c], describe(runs[c][: count[c]], c == OTHER))
    return streams, present, total, stats
