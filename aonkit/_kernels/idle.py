"""Exact idle gaps of GPU lanes (a device, or a device's stream), classified by cause.

Rows are GPU events: ``group`` (the lane, any int64 key), ``ts``, ``end``
(ns) and the start of each event's launch call in ``launch`` (``found``:
whether there is one). Loops index with ``range(n)`` from 0 or ``np.uintp``
(see :mod:`.keys`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .arrays import copy_to
from .keys import key_groups
from .sorting import is_sorted, stable_argsort

HOST_WAIT = 0
KERNEL_WAIT = 1
OTHER = 2


@njit
def lane_gaps(group, ts, end, launch, found, delay):
    """Idle gaps of every lane: the holes in the union of its events' intervals.

    Events of a lane are taken by start (stably). A gap runs from the
    latest end so far to the next start after it. It is ``HOST_WAIT`` when
    the launch call of an event starting there began after the gap began
    (the host had not yet asked for the work; the earliest launch among the
    events starting at that instant counts), else ``KERNEL_WAIT`` when
    shorter than ``delay`` ns, else ``OTHER``. Busy time plus the gaps is the
    lane's span, exactly.

    Returns
    -------
    keys : int64[L]
        Lane keys, ascending.
    span, busy : int64[L]
        First start to last end, and the union of the intervals.
    idle : int64[L, 3]
        Gap time per category.
    gaps : int64[G, 5]
        One row per gap: lane (position in ``keys``), start, end, category,
        and the row (into the inputs) of the event that ends it.
    """
    slots, lo, group_of, offsets, keys = key_groups(group, np.bool_(True))
    n = group.shape[0]
    rows = np.empty(n, np.int64)
    fill = offsets[:-1].copy()
    for i in range(n):
        b = np.uintp(group_of[np.uintp(slots[i] - lo)])
        rows[fill[b]] = i
        fill[b] += 1
    n_l = keys.shape[0]
    span = np.zeros(n_l, np.int64)
    busy = np.zeros(n_l, np.int64)
    idle = np.zeros((n_l, 3), np.int64)
    gaps = np.empty((n, 5), np.int64)
    g = 0
    for s in range(n_l):
        seg = rows[offsets[s] : offsets[s + 1]]
        t = ts[seg]
        if not is_sorted(t):
            copy_to(seg, seg[stable_argsort(t)])
        first = ts[seg[0]]
        reach = end[seg[0]]
        covered = reach - first  # the union, summed as it grows (not span minus gaps)
        k = 1
        while k < seg.shape[0]:
            i = seg[k]
            if ts[i] > reach:
                # the earliest launch among the events that start at this instant
                best = np.int64(0)
                has = False
                j = k
                while j < seg.shape[0] and ts[seg[j]] == ts[i]:
                    r = seg[j]
                    if found[r] and (not has or launch[r] < best):
                        best = launch[r]
                        has = True
                    j += 1
                gap = ts[i] - reach
                if has and best > reach:
                    c = HOST_WAIT
                elif gap < delay:
                    c = KERNEL_WAIT
                else:
                    c = OTHER
                idle[s, c] += gap
                gaps[g, 0] = s
                gaps[g, 1] = reach
                gaps[g, 2] = ts[i]
                gaps[g, 3] = c
                gaps[g, 4] = i
                g += 1
            if end[i] > reach:
                covered += end[i] - max(ts[i], reach)
                reach = end[i]
            k += 1
        span[s] = reach - first
        busy[s] = covered
    return keys, span, busy, idle, gaps[:g]
