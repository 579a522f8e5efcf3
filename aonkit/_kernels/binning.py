"""Per-pixel binning of timeline tracks for a time window (level of detail).

Rule, per track, over the events that overlap ``[t0, t1)`` in start order (an
event ``[s, e)`` overlaps when ``s < t1`` and ``max(e, s + 1) > t0``; times are
clipped to the window, ``x = (cs - t0) * width / (t1 - t0)`` is the clipped
start in pixels and its cell is ``floor(x)``):

* an event at least ``min_px`` pixels wide whose ``x`` is at least one pixel
  after the previous individual event's is returned *individually*;
* every other event joins the *bin* of its cell; a bin is returned when the
  next binned event falls in another cell or the track ends, as an individual
  event when it holds one event.

So a track yields at most two glyphs per pixel. Bins carry count, union length
of their events (``busy``) and their longest event.

From a coarser level (:func:`aonkit._kernels.pyramid.build_level`, buckets of
``g`` ns) the units are items instead of events: an item of two or more events
that lies inside the window joins, whole, the bin of its first event's cell;
other items are taken event by event as above. The cost is then one step per
item, and a bin may reach up to ``g`` past its cell.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit


@njit
def search(a, lo, hi, v, right):
    """First position p in [lo, hi) with a[p] > v (``right``) or a[p] >= v; hi if none."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v or (right and a[mid] == v):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit
def tiles(tracks, t0, t1, width, min_px, level, track_off, ts, end, cmax, item_off, items):
    """Glyphs of ``tracks`` in ``[t0, t1)`` at ``width`` pixels, from ``level`` (0: single events).

    ``item_off`` is (levels, tracks + 1); ``items`` holds the item columns of all
    levels (rows first, stop, first_ts, last_ts, max_end, cmax, busy, dom).

    Returns (track, start, end, pos, count, busy): clipped start and end, the
    event's position (a bin's longest event), events represented, union length.
    """
    first, stop, first_ts, last_ts = items[0], items[1], items[2], items[3]
    max_end, icmax, busy_of, dom_of = items[4], items[5], items[6], items[7]
    scale = width / float(t1 - t0)
    cap = tracks.shape[0] * (2 * width + 2)
    o_track = np.empty(cap, np.int64)
    o_start = np.empty(cap, np.int64)
    o_end = np.empty(cap, np.int64)
    o_pos = np.empty(cap, np.int64)
    o_count = np.empty(cap, np.int64)
    o_busy = np.empty(cap, np.int64)
    n = 0
    for q in range(tracks.shape[0]):
        t = tracks[q]
        last_x = -2.0
        b_count = 0
        b_cell = b_start = b_end = b_cur = b_busy = b_dom = b_dur = np.int64(0)
        if level == 0:
            lo = search(cmax, track_off[t], track_off[t + 1], t0, np.bool_(True))
            hi = search(ts, lo, track_off[t + 1], t1, np.bool_(False))
        else:
            lo = search(icmax, item_off[level - 1, t], item_off[level - 1, t + 1], t0, np.bool_(True))
            hi = search(first_ts, lo, item_off[level - 1, t + 1], t1, np.bool_(False))
        for j in range(lo, hi + 1):
            whole = False
            a = b = j
            if j < hi:
                a, b = (j, j + 1) if level == 0 else (first[j], stop[j])
                whole = b - a >= 2 and first_ts[j] >= t0 and max_end[j] <= t1 and last_ts[j] < t1
            cell = np.int64(-1)  # j == hi: flush the bin
            if whole:
                cell = min(np.int64((first_ts[j] - t0) * scale), width - 1)
            for k in range(a, b + (j == hi)):
                if not whole and j < hi:
                    s, e = ts[k], end[k]
                    if s >= t1 or max(e, s + 1) <= t0:
                        continue
                    cs, ce = max(s, t0), min(e, t1)
                    x = (cs - t0) * scale
                    if (ce - cs) * scale >= min_px and x >= last_x + 1.0:
                        o_track[n], o_start[n], o_end[n], o_pos[n], o_count[n], o_busy[n] = t, cs, ce, k, 1, ce - cs
                        n += 1
                        last_x = x
                        continue
                    cell = min(np.int64(x), width - 1)
                if b_count > 0 and cell != b_cell:
                    o_track[n], o_start[n], o_end[n], o_pos[n] = t, b_start, b_end, b_dom
                    o_count[n], o_busy[n] = b_count, b_busy
                    n += 1
                    b_count = 0
                if cell < 0:
                    break
                cs, ce = max(ts[k], t0), min(end[k], t1)
                if b_count == 0:
                    b_cell, b_start, b_end, b_cur, b_busy, b_dur = cell, cs, ce, cs, 0, -1
                if whole and k == a and first_ts[j] >= b_cur:  # the item at once: its union is disjoint
                    b_busy += busy_of[j]
                    b_cur = b_end = max(b_end, max_end[j])
                    b_count += b - a
                    if end[dom_of[j]] - ts[dom_of[j]] > b_dur:
                        b_dom, b_dur = dom_of[j], end[dom_of[j]] - ts[dom_of[j]]
                    break
                b_busy += max(0, ce - max(cs, b_cur))
                b_cur = max(b_cur, ce)
                b_end = max(b_end, ce)
                b_count += 1
                if ce - cs > b_dur:
                    b_dom, b_dur = k, ce - cs
    return o_track[:n], o_start[:n], o_end[:n], o_pos[:n], o_count[:n], o_busy[:n]
