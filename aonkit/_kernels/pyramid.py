"""Per-track structures for level-of-detail queries: nesting depth, running max end, item levels.

A *track* is one row of a timeline lane (a lane at one nesting depth). Its
events are stored contiguously, sorted by start, in flat arrays; ``track_off``
(length tracks + 1) gives each track's range.

A *level* with bucket size ``g`` (a power of two) partitions every track into
*items*: runs of consecutive events that are all shorter than ``g`` and start in
the same ``g``-aligned bucket (measured from ``origin``), and single events.
:func:`cut_scales` computes, once, where each level cuts.
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
def cut_scales(ts, end, track_off, origin):
    """Per event, the smallest bucket size that keeps it in an item with the previous event of its track.

    Events k - 1 and k are cut apart at bucket size ``g`` (a power of two)
    exactly when ``cut[k] >= g``: one of them lasts ``g`` or more, or their
    starts differ in a bit worth ``g`` or more. The first event of a track has
    the largest int64.
    """
    cut = np.empty(ts.shape[0], np.int64)
    for t in range(track_off.shape[0] - 1):
        for k in range(track_off[t], track_off[t + 1]):
            if k == track_off[t]:
                cut[k] = np.iinfo(np.int64).max
                continue
            x = (ts[k] - origin) ^ (ts[k - 1] - origin)
            for sh in (1, 2, 4, 8, 16, 32):
                x |= x >> sh
            cut[k] = max(end[k] - ts[k], end[k - 1] - ts[k - 1], (x + 1) >> 1)
    return cut


@njit
def build_level(ts, end, cut, g, n_items):
    """Items of the level with bucket ``g``: events cut apart where ``cut >= g`` (``n_items`` of them).

    Returns
    -------
    items : int64[8, n_items]
        Rows ``first``, ``stop`` (the item's events are ``first <= k < stop``,
        positions in the flat arrays), ``first_ts``, ``last_ts`` (start of its
        first and last event), ``max_end`` (latest end), ``cmax`` (running max
        over the track's items of ``max(end, ts + 1)``), ``busy`` (length of the
        union of its events' intervals), ``dom`` (its longest event, the first
        one on ties).
    """
    items = np.empty((8, n_items), np.int64)
    n = ts.shape[0]
    j = -1
    cur = run = busy = best = np.int64(0)
    for k in range(n + 1):
        if k == n or cut[k] >= g:
            if j >= 0:  # close item j
                items[1, j], items[3, j], items[4, j] = k, ts[k - 1], cur
                items[5, j], items[6, j], items[7, j] = run, busy, best
            if k == n:
                break
            if cut[k] == np.iinfo(np.int64).max:
                run = np.iinfo(np.int64).min  # a new track
            j += 1
            items[0, j], items[2, j] = k, ts[k]
            cur, busy, best = ts[k], 0, k
        busy += max(0, end[k] - max(ts[k], cur))
        cur = max(cur, end[k])
        run = max(run, end[k], ts[k] + 1)
        if end[k] - ts[k] > end[best] - ts[best]:
            best = k
    return items
