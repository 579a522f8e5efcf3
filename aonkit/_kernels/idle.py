"""Exact idle gaps of GPU lanes (a device, or a device's stream), classified by cause.

Rows are GPU events, grouped by lane (a device, or a device's stream) by the
caller: ``ts``, ``end`` (ns) and the start of each event's launch call in ``launch`` (``found``:
whether there is one). Loops index with ``range(n)`` from 0 or ``np.uintp``
(see :mod:`.keys`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

HOST_WAIT = 0
KERNEL_WAIT = 1
OTHER = 2


@njit
def lane_gaps(rows, offsets, ts, end, launch, found, delay):
    """Idle gaps of every lane: the holes in the union of its events' intervals.

    ``rows[offsets[s]:offsets[s + 1]]`` are lane s's events by start, stably
    (:func:`aonkit.analysis.group_order.group_time_order`). A gap runs from the
    latest end so far to the next start after it. It is ``HOST_WAIT`` when
    the launch call of an event starting there began after the gap began
    (the host had not yet asked for the work; the earliest launch among the
    events starting at that instant counts), else ``KERNEL_WAIT`` when
    shorter than ``delay`` ns, else ``OTHER``. Busy time plus the gaps is the
    lane's span, exactly.

    Returns
    -------
    span, busy : int64[L]
        First start to last end, and the union of the intervals.
    idle : int64[L, 3]
        Gap time per category.
    gaps : int64[G, 5]
        One row per gap: lane (its position in ``offsets``), start, end, category,
        and the row (into the inputs) of the event that ends it.
    """
    n = rows.shape[0]
    n_l = offsets.shape[0] - 1
    span = np.zeros(n_l, np.int64)
    busy = np.zeros(n_l, np.int64)
    idle = np.zeros((n_l, 3), np.int64)
    gaps = np.empty((n, 5), np.int64)
    g = 0
    for s in range(n_l):
        seg = rows[offsets[s] : offsets[s + 1]]
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
    return span, busy, idle, gaps[:g]
