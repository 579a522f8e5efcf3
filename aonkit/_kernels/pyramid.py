"""Per-track structures for level-of-detail queries: nesting depth, running max end, item levels.

A *track* is one row of a timeline lane (a lane at one nesting depth). Its
events are stored contiguously, sorted by start, in flat arrays; ``track_off``
(length tracks + 1) gives each track's range.

A *level* with bucket size ``g`` partitions every track into *items*: runs of
consecutive events that are all shorter than ``g`` and start in the same
``g``-aligned bucket (measured from ``origin``), and single events. With ``g``
growing by an integer factor from one level to the next, every item boundary of
a coarser level is one of the finer level too, so an item is exactly covered by
items of any finer level.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

_I64_MIN = np.iinfo(np.int64).min


@njit
def depths(parent, order):
    """Nesting depth of each event (0 for roots); ``order`` lists parents before children."""
    depth = np.zeros(parent.shape[0], np.int64)
    for k in range(order.shape[0]):
        i = order[k]
        if parent[i] >= 0:
            depth[i] = depth[parent[i]] + 1
    return depth


@njit
def running_max_end(ts, end, track_off):
    """Per event, the largest ``max(end, ts + 1)`` of its track up to and including it.

    ``max(end, ts + 1)`` makes a zero-length event at ``ts`` visible in windows
    that contain ``ts``. The result is non-decreasing within a track, so a binary
    search finds the first event that can reach past a time.
    """
    out = np.empty(ts.shape[0], np.int64)
    for t in range(track_off.shape[0] - 1):
        m = np.int64(_I64_MIN)
        for k in range(track_off[t], track_off[t + 1]):
            v = max(end[k], ts[k] + 1)
            if v > m:
                m = v
            out[k] = m
    return out


@njit
def _is_cut(ts, end, k, origin, g):
    """True when events k - 1 and k belong to different items (same track assumed)."""
    if end[k] - ts[k] >= g or end[k - 1] - ts[k - 1] >= g:
        return True
    return (ts[k] - origin) // g != (ts[k - 1] - origin) // g


@njit
def build_level(ts, end, track_off, origin, g):
    """Items of the level with bucket ``g``.

    Returns
    -------
    item_off : int64[tracks + 1]
        Each track's range of items.
    first, stop : int64[items]
        The item's events are ``first <= k < stop`` (positions in the flat arrays).
    first_ts, last_ts : int64[items]
        Start of the item's first and last event.
    max_end : int64[items]
        Latest end of its events.
    cmax : int64[items]
        Running max over the track's items of ``max(end, ts + 1)`` of their events.
    busy : int64[items]
        Length of the union of its events' intervals.
    dom : int64[items]
        Position of its longest event (the first one on ties).
    """
    n_tracks = track_off.shape[0] - 1
    item_off = np.zeros(n_tracks + 1, np.int64)
    for t in range(n_tracks):
        count = 0
        for k in range(track_off[t], track_off[t + 1]):
            if k == track_off[t] or _is_cut(ts, end, k, origin, g):
                count += 1
        item_off[t + 1] = item_off[t] + count
    m = item_off[n_tracks]
    first = np.empty(m, np.int64)
    stop = np.empty(m, np.int64)
    j = 0
    for t in range(n_tracks):
        for k in range(track_off[t], track_off[t + 1]):
            if k == track_off[t] or _is_cut(ts, end, k, origin, g):
                if j > 0 and k != track_off[t]:
                    stop[j - 1] = k
                first[j] = k
                j += 1
            if k == track_off[t + 1] - 1:
                stop[j - 1] = k + 1
    first_ts = np.empty(m, np.int64)
    last_ts = np.empty(m, np.int64)
    max_end = np.empty(m, np.int64)
    cmax = np.empty(m, np.int64)
    busy = np.empty(m, np.int64)
    dom = np.empty(m, np.int64)
    for t in range(n_tracks):
        run = np.int64(_I64_MIN)
        for j in range(item_off[t], item_off[t + 1]):
            a = first[j]
            cur = ts[a]
            total = np.int64(0)
            top = np.int64(_I64_MIN)
            best = a
            for k in range(a, stop[j]):
                total += max(0, end[k] - max(ts[k], cur))
                cur = max(cur, end[k])
                top = max(top, end[k], ts[k] + 1)
                if end[k] - ts[k] > end[best] - ts[best]:
                    best = k
            first_ts[j] = ts[a]
            last_ts[j] = ts[stop[j] - 1]
            max_end[j] = cur
            run = max(run, top)
            cmax[j] = run
            busy[j] = total
            dom[j] = best
    return item_off, first, stop, first_ts, last_ts, max_end, cmax, busy, dom
