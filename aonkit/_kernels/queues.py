"""Launch-queue counters per stream: +1 at a launch call, -1 when its GPU event starts.

Rows are events of one rank: ``stream`` (-1 on the CPU side), ``ts``,
``corr`` (correlation), and launch calls flagged per name code
(``is_api[codes[i]]``; code -1 reads the last flag). Loops index with
``range(n)`` from 0 or ``np.uintp`` (see :mod:`.keys`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .arrays import copy_to, positions, total
from .keys import first_match, group_rows, match_counts
from .sorting import stable_argsort


@njit
def queue_events(stream, ts, corr, codes, is_api):
    """The +1/-1 events of HTA's queue length: launches first, then GPU starts, each in row order.

    Launches are CPU-side API rows whose correlation some GPU row has, each
    counted once per such GPU row, on that row's stream (HTA joins them). GPU
    rows count when a launch has their correlation. Returns (ts, stream,
    step) of the events.
    """
    n = stream.shape[0]
    g = np.empty((3, n), np.int64)  # GPU rows: corr, ts, stream
    a = np.empty((2, n), np.int64)  # API rows: corr, ts
    m = 0
    q = 0
    for i in range(n):
        if stream[i] != -1:
            g[0, m] = corr[i]
            g[1, m] = ts[i]
            g[2, m] = stream[i]
            m += 1
        elif is_api[codes[i]]:
            a[0, q] = corr[i]
            a[1, q] = ts[i]
            q += 1
    g_corr, g_ts, g_stream = g[0, :m], g[1, :m], g[2, :m]
    a_corr, a_ts = a[0, :q], a[1, :q]
    a_stream, launched = first_match(g_corr, g_stream, a_corr)
    _, counted = first_match(a_corr[launched], a_corr, g_corr)
    reps = match_counts(g_corr, a_corr)  # HTA's join repeats a launch once per GPU row of its correlation
    n_l = total(reps)
    n_launched = 0  # loops, not np.count_nonzero (its generic code compiles for seconds)
    for j in range(q):
        n_launched += launched[j]
    n = n_l
    for j in range(counted.shape[0]):
        n += counted[j]
    e_ts = np.empty(n + 1, np.int64)
    e_stream = np.empty(n + 1, np.int64)
    e_step = np.empty(n + 1, np.int64)
    e_step[:n_l] = 1
    e_step[n_l:] = -1
    k = np.uintp(0)
    if n_l == n_launched:  # one GPU row per launch, the usual case
        for j in range(q):  # branch-free compaction (one spare slot at the end)
            e_ts[k] = a_ts[j]
            e_stream[k] = a_stream[j]
            k += np.uintp(launched[j])
    else:  # a launch per GPU row of its correlation, each on that row's stream, in GPU row order
        pos, offsets, keys = group_rows(g_corr, np.bool_(True))
        group, _ = first_match(keys, positions(keys.shape[0]), a_corr)
        for j in range(q):
            if launched[j]:
                for t in range(offsets[group[j]], offsets[group[j] + 1]):
                    e_ts[k] = a_ts[j]
                    e_stream[k] = g_stream[pos[t]]
                    k += np.uintp(1)
    for j in range(m):
        e_ts[k] = g_ts[j]
        e_stream[k] = g_stream[j]
        k += np.uintp(counted[j])
    return e_ts[:n], e_stream[:n], e_step[:n]


@njit
def by_stream(order, e_stream):
    """``order`` split by stream, ascending stream values, keeping ``order``'s sequence in a stream.

    Returns (positions, offsets, stream values).
    """
    pos, offsets, streams = group_rows(e_stream[order], np.bool_(True))
    return order[pos], offsets, streams


@njit
def stable_time_order(e_ts, e_stream, e_step):
    """Events grouped by stream (ascending), stably by time within one; and whether ties matter.

    ``mixed_ties`` tells whether a stream has a launch and a GPU start at the
    same time: then the order of those ties changes the counter, and the
    returned order is incomplete (the caller takes HTA's instead).
    Returns (positions, offsets, stream values, mixed_ties).
    """
    pos, offsets, streams = group_rows(e_stream, np.bool_(True))
    for s in range(streams.shape[0]):
        seg = pos[offsets[s] : offsets[s + 1]]
        done = _merge_runs(e_ts, e_step, seg)
        if done < 0:
            return pos, offsets, streams, True
        if done == 0:  # launches or starts out of order: a general stable sort
            t = e_ts[seg]
            order = stable_argsort(t)
            copy_to(seg, seg[order])
            if _mixed_ties(t[order], e_step, seg):
                return pos, offsets, streams, True
    return pos, offsets, streams, False


@njit
def _merge_runs(e_ts, e_step, seg):
    """Merge a stream's launches and GPU starts (each a run in ``seg``, launches first) by time, in place.

    Returns 1 when merged, 0 when a run is not in time order (nothing
    changed), -1 at the first launch that ties in time with a GPU start.
    """
    split = 0
    while split < seg.shape[0] and e_step[np.uintp(seg[split])] > 0:
        split += 1
    left = seg[:split].copy()
    right = seg[split:]
    for k in range(1, left.shape[0]):
        if e_ts[np.uintp(left[k])] < e_ts[np.uintp(left[k - 1])]:
            return 0
    for k in range(1, right.shape[0]):
        if e_ts[np.uintp(right[k])] < e_ts[np.uintp(right[k - 1])] or e_step[np.uintp(right[k])] > 0:
            return 0
    i = 0
    j = 0
    for k in range(seg.shape[0]):
        if i < left.shape[0] and j < right.shape[0]:
            a = e_ts[np.uintp(left[i])]
            b = e_ts[np.uintp(right[j])]
            if a == b:
                return -1
            take_left = a < b
        else:
            take_left = i < left.shape[0]
        if take_left:
            seg[k] = left[i]
            i += 1
        else:
            seg[k] = right[j]
            j += 1
    return 1


@njit
def _mixed_ties(t, e_step, seg):
    """Whether two neighbours of a time-ordered stream tie in time with different steps."""
    for k in range(1, t.shape[0]):
        if t[k] == t[k - 1] and e_step[np.uintp(seg[k])] != e_step[np.uintp(seg[k - 1])]:
            return True
    return False


@njit
def queue_table(rank, e_ts, e_step, pos, offsets, streams):
    """Rows (rank, ts, stream, queue length) of the counter, restarted per stream; shape (4, events)."""
    out = np.empty((4, pos.shape[0]), np.int64)
    out[0] = rank
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        seg = pos[lo : offsets[s + 1]]
        acc = 0
        for k in range(seg.shape[0]):
            j = np.uintp(seg[k])
            acc += e_step[j]
            out[1, np.uintp(lo + k)] = e_ts[j]
            out[2, np.uintp(lo + k)] = streams[s]
            out[3, np.uintp(lo + k)] = acc
    return out


@njit
def levels(e_step, pos, offsets):
    """Running sum of ``e_step`` in the order ``pos``, restarted at each stream's offset."""
    out = np.empty(pos.shape[0], np.int64)
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        seg = pos[lo : offsets[s + 1]]
        acc = 0
        for k in range(seg.shape[0]):
            acc += e_step[np.uintp(seg[k])]
            out[np.uintp(lo + k)] = acc
    return out
