"""Step functions per group from +/- changes at event times: queue lengths, bandwidth in flight.

Indices are ``range(n)`` from 0 or ``np.uintp`` (see :mod:`.keys`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .arrays import copy_to, positions
from .keys import group_rows
from .sorting import sort_by


@njit
def group_time_order(keys, t):
    """Positions grouped by ``keys`` (ascending), each group ordered stably by ``t``.

    Returns (positions, offsets (groups + 1), group keys).
    """
    pos, offsets, gkeys = group_rows(keys, np.bool_(True))
    for g in range(gkeys.shape[0]):
        sort_by(t, pos[offsets[g] : offsets[g + 1]])  # rows in time order stay as they are: one pass
    return pos, offsets, gkeys


@njit
def step_levels(t, d_count, d_value, pos, offsets):
    """The levels of each group after all of its changes at each distinct time.

    ``pos[offsets[g]:offsets[g+1]]`` lists group g's changes in time order;
    change i adds ``d_count[i]`` to a count and ``d_value[i]`` to a value.
    The value is set to exactly 0 whenever the count returns to 0, so float
    residue cannot accumulate between busy periods.

    Returns
    -------
    times, counts, values : arrays
        One entry per (group, distinct time), groups in order.
    out_offsets : int64[groups + 1]
        Where each group's entries start.
    """
    n = pos.shape[0]
    times = np.empty(n, np.int64)
    counts = np.empty(n, np.int64)
    values = np.empty(n, np.float64)
    out_offsets = np.zeros(offsets.shape[0], np.int64)
    k = 0
    for g in range(offsets.shape[0] - 1):
        seg = pos[offsets[g] : offsets[g + 1]]
        c = np.int64(0)
        v = 0.0
        for j in range(seg.shape[0]):
            i = np.uintp(seg[j])
            c += d_count[i]
            v += d_value[i]
            if c == 0:
                v = 0.0
            last = j + 1 == seg.shape[0] or t[np.uintp(seg[j + 1])] != t[i]
            if last:
                times[np.uintp(k)] = t[i]
                counts[np.uintp(k)] = c
                values[np.uintp(k)] = v
                k += 1
        out_offsets[g + 1] = k
    return times[:k], counts[:k], values[:k], out_offsets


@njit
def time_weighted(times, levels, offsets):
    """Per group: maximum level and its time-weighted mean from the first to the last change (0 span: NaN)."""
    n_g = offsets.shape[0] - 1
    peak = np.zeros(n_g, np.float64)
    mean = np.full(n_g, np.nan)
    for g in range(n_g):
        lo, hi = offsets[g], offsets[g + 1]
        if hi == lo:
            continue
        t = times[lo:hi]
        lv = levels[lo:hi]
        top = lv[0]
        for j in range(1, lv.shape[0]):  # a loop: Numba's max() compiles seconds of generic code
            if lv[j] > top or np.isnan(lv[j]):  # a NaN wins, as in max()
                top = lv[j]
        peak[g] = top
        area = 0.0
        for j in range(t.shape[0] - 1):
            area += lv[j] * float(t[j + 1] - t[j])
        span = t[t.shape[0] - 1] - t[0]
        if span > 0:
            mean[g] = area / span
    return peak, mean


@njit
def queue_inputs(gpu, launch, ts, device, stream, missing, window):
    """Enqueue and start times of GPU events for the native queue counter.

    ``gpu``: event rows; ``launch``: their launch call rows (-1 when the call
    precedes the window). Events whose start is ``missing`` are left out. An
    event enters its queue at its launch call's start (no later than its own
    start), or at ``window`` (the trace's first timestamp) when launched before it.
    Returns (enqueue times, start times, launched-before flags, device, stream) of the kept events.
    """
    n = gpu.shape[0]
    dev = np.empty(n, device.dtype)
    st = np.empty(n, stream.dtype)
    up = np.empty(n, np.int64)
    down = np.empty(n, np.int64)
    before = np.empty(n, np.bool_)
    k = 0
    for j in range(n):
        start = ts[np.uintp(gpu[j])]
        if start == missing:
            continue
        lr = launch[j]
        dev[k] = device[np.uintp(gpu[j])]
        st[k] = stream[np.uintp(gpu[j])]
        down[k] = start
        before[k] = lr < 0
        up[k] = window if lr < 0 else min(ts[np.uintp(lr)], start)
        k += 1
    return up[:k], down[:k], before[:k], dev[:k], st[:k]


@njit
def queue_levels(up, down, order, offsets, store):
    """Per group: the count of items entered (at ``up``) and not yet left (at ``down``).

    Group g's items are ``order[offsets[g]:offsets[g + 1]]``, in ascending
    entry time (``up[order[k]]``). Their exit times are sorted here where
    they are not ascending in that order (a GPU stream starts its work in
    launch order, so they usually are). One entry per distinct change time of
    a group, holding the level after every change at that time (so ties have
    one answer). With ``store`` False the entries are not kept, only the
    per-group figures.

    Returns (times, levels, out offsets (groups + 1), peak level per group,
    time-weighted mean level per group from its first change to its last (NaN
    over 0 ns)). The peak and mean equal :func:`time_weighted` of the entries.
    """
    n = order.shape[0]
    n_g = offsets.shape[0] - 1
    cap = 2 * n if store else 0
    times = np.empty(cap, np.int64)
    levels = np.empty(cap, np.int64)
    out_offsets = np.zeros(n_g + 1, np.int64)
    peak = np.zeros(n_g, np.int64)
    mean = np.full(n_g, np.nan)
    end = np.iinfo(np.int64).max  # sentinel after each sorted list
    k = np.uintp(0)
    for g in range(n_g):
        m = offsets[g + 1] - offsets[g]
        u = np.empty(m + 1, np.int64)
        d = np.empty(m + 1, np.int64)
        lo = offsets[g]
        descents = 0
        prev = np.iinfo(np.int64).min
        for q in range(m):  # the group's entry and exit times, gathered in entry order
            r = np.uintp(order[np.uintp(lo + q)])
            u[q] = up[r]
            dq = down[r]
            d[q] = dq
            descents += dq < prev
            prev = dq
        if descents:  # exits out of order: sort them (values: any stable order gives the one answer)
            idx = positions(m)
            sort_by(d, idx)
            copy_to(d, d[idx])
        u[m] = end
        d[m] = end
        i = np.uintp(0)
        j = np.uintp(0)
        c = np.int64(0)
        top = np.iinfo(np.int64).min
        area = 0.0
        t = min(u[0], d[0])
        t_first = t
        for _ in range(2 * m):  # a branch-free merge of the two lists; an entry after the last change at a time
            ui = u[i]
            dj = d[j]
            take_u = ui <= dj
            c += 2 * np.int64(take_u) - 1
            i += np.uintp(take_u)
            j += np.uintp(not take_u)
            nt = min(u[i], d[j])
            if nt != t:
                top = max(top, c)
                if nt != end:
                    area += float(c) * float(nt - t)
                if store:
                    times[k] = t
                    levels[k] = c
                    k += np.uintp(1)
                t = nt
        out_offsets[g + 1] = k
        if m:
            peak[g] = top
            t_last = max(u[m - 1], d[m - 1])
            if t_last > t_first:
                mean[g] = area / float(t_last - t_first)
    return times[:k], levels[:k], out_offsets, peak, mean
