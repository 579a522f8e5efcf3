"""Idle gaps between the GPU events of each stream, classified as HTA classifies them.

Rows are GPU events of one rank, grouped by stream and in time order within
one (:func:`aonkit.analysis.group_order.group_time_order`): ``ts``, ``end``
and the start of the launch call, int64, and whether it was found.
Loops index with ``range(n)`` from 0 or ``np.uintp`` (see :mod:`.keys`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .arrays import copy_to

HOST_WAIT = 0
KERNEL_WAIT = 1
OTHER = 2


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
def idle_gaps(rows, offsets, ts, end, start, found, delay):
    """Gaps between consecutive GPU events of each stream, classified as HTA classifies them.

    ``rows`` are the GPU events grouped by stream (group s is
    ``rows[offsets[s]:offsets[s + 1]]``), each group in time order, with the
    start of each one's launch call in ``start`` where ``found``. A gap is
    ``HOST_WAIT`` when the launch call of the next event started after the
    previous event ended, else ``KERNEL_WAIT`` when shorter than ``delay``,
    else ``OTHER``. The first event of a stream has no gap (a NaN for pandas)
    and counts as ``OTHER``.

    Returns
    -------
    gaps : int64[n]
        Per stream, in its rows' slots: its gaps of category 0, then 1, then
        2, each in time order; the first slot of category 2 is the first
        event's (0 here, NaN for pandas).
    count, total : int64[S, 3]
        Slots and sum of the gaps per stream and category.
    """
    n = rows.shape[0]
    n_s = offsets.shape[0] - 1
    g_ts = np.empty(n, np.int64)  # the rows' columns in group order (overwritten by the gaps)
    g_end = np.empty(n, np.int64)
    g_start = np.empty(n, np.int64)
    g_found = np.empty(n, np.bool_)
    for k in range(n):
        r = np.uintp(rows[k])
        g_ts[k] = ts[r]
        g_end[k] = end[r]
        g_start[k] = start[r]
        g_found[k] = found[r]
    spare = np.empty(n, np.int64)
    gaps = np.empty(n, np.int64)
    count = np.zeros((n_s, 3), np.int64)
    total = np.zeros((n_s, 3), np.int64)
    for s in range(n_s):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi == lo:
            continue
        c, t = _stream_gaps(g_ts[lo:hi], g_end[lo:hi], g_start[lo:hi], g_found[lo:hi], spare[lo:hi], delay)
        k = lo
        copy_to(gaps[k : k + c[0]], spare[lo : lo + c[0]])
        k += c[0]
        copy_to(gaps[k : k + c[1]], g_start[lo : lo + c[1]])
        k += c[1]
        copy_to(gaps[k : k + c[2]], g_ts[lo : lo + c[2]])
        copy_to(count[s], c)
        copy_to(total[s], t)
    return gaps, count, total
