"""Table slots for int64 keys (correlations, streams), stable bucketing, and a run-aware stable sort.

A key set whose range is compact indexes a table directly (``key - lo``); a
sparse one is first mapped to dense ids through an open-addressing hash
table. Both are O(n).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit
def compact(keys, mask):
    """(slot keys, lo, size): where ``mask[i]``, ``out[i] - lo`` is the key's slot in ``[0, size)``.

    A compact range (size <= 4 x count + 1024) returns ``keys`` itself; a
    sparse one returns hash ids in order of first appearance (lo = 0).
    """
    count = 0
    lo = np.iinfo(np.int64).max
    hi = np.iinfo(np.int64).min
    for i in range(keys.shape[0]):
        if mask[i]:
            lo = min(lo, keys[i])
            hi = max(hi, keys[i])
            count += 1
    if count == 0:
        return keys, np.int64(0), np.int64(0)
    if float(hi) - float(lo) <= 4.0 * count + 1024.0:
        return keys, lo, hi - lo + 1
    return _hash_ids(keys, mask, count)


@njit
def _hash_ids(keys, mask, count):
    bits = 1
    while (1 << bits) < 2 * count:
        bits += 1
    cap_mask = (1 << bits) - 1
    slots = np.full(1 << bits, -1, np.int64)
    uniq = np.empty(count, np.int64)
    ids = np.full(keys.shape[0], -1, np.int64)
    shift = np.uint64(64 - bits)
    nid = 0
    for i in range(keys.shape[0]):
        if mask[i]:
            k = keys[i]
            h = np.int64((np.uint64(k) * _GOLDEN) >> shift)
            while slots[h] >= 0 and uniq[slots[h]] != k:
                h = (h + 1) & cap_mask
            j = slots[h]
            if j < 0:
                j = nid
                slots[h] = j
                uniq[j] = k
                nid += 1
            ids[i] = j
    return ids, np.int64(0), np.int64(nid)


@njit
def group_rows(keys, rows, ascending, ts, by_time):
    """``rows`` grouped by ``keys[row]``, keeping their order within a group, or sorting it stably by ``ts``.

    Groups come in ascending key order, or by first appearance in ``rows``
    when not ``ascending``. With ``by_time``, each group is ordered stably by
    ``ts[row]`` (a group already in order costs one check, done while
    filling). Returns (grouped rows, offsets (groups + 1), group keys).
    """
    m = rows.shape[0]
    if m == 0:
        return rows.copy(), np.zeros(1, np.int64), np.empty(0, np.int64)
    lo = np.iinfo(np.int64).max
    hi = np.iinfo(np.int64).min
    for k in range(m):
        lo = min(lo, keys[rows[k]])
        hi = max(hi, keys[rows[k]])
    if float(hi) - float(lo) <= 4.0 * m + 1024.0:
        slot = keys
        size = hi - lo + 1
    else:
        slot, lo, size = _hash_ids(keys, np.ones(keys.shape[0], np.bool_), keys.shape[0])
    count = np.zeros(size, np.int64)
    first = np.zeros(size, np.int64)
    for k in range(m):
        j = slot[rows[k]] - lo
        if count[j] == 0:
            first[j] = k
        count[j] += 1
    used = np.flatnonzero(count)
    if ascending:
        gkeys = np.empty(used.shape[0], np.int64)
        for g in range(used.shape[0]):
            gkeys[g] = keys[rows[first[used[g]]]]
        used = used[np.argsort(gkeys)]
    else:
        used = used[np.argsort(first[used])]
    n_g = used.shape[0]
    group_of = np.zeros(size, np.int64)
    offsets = np.zeros(n_g + 1, np.int64)
    gkeys = np.empty(n_g, np.int64)
    for g in range(n_g):
        group_of[used[g]] = g
        offsets[g + 1] = offsets[g] + count[used[g]]
        gkeys[g] = keys[rows[first[used[g]]]]
    fill = offsets[:-1].copy()
    last = np.full(n_g, np.iinfo(np.int64).min)
    unsorted = np.zeros(n_g, np.bool_)
    out = np.empty(m, np.int64)
    for k in range(m):
        i = rows[k]
        g = group_of[slot[i] - lo]
        out[fill[g]] = i
        fill[g] += 1
        if by_time:
            unsorted[g] |= ts[i] < last[g]
            last[g] = ts[i]
    tmp = np.empty(m, np.int64)
    for g in range(n_g):
        if unsorted[g]:
            sort_segment(ts, out, offsets[g], offsets[g + 1], tmp)
    return out, offsets, gkeys


@njit
def sort_segment(keys, idx, lo, hi, tmp):
    """Stable in-place sort of ``idx[lo:hi]`` by ``keys[idx]``: natural merge sort (O(n) on few sorted runs).

    ``tmp`` is scratch space of at least ``hi - lo`` elements.
    """
    n = hi - lo
    if n < 2:
        return
    runs = np.empty(n + 1, np.int64)  # starts of ascending stretches, then hi
    nr = 0
    runs[0] = lo
    for i in range(lo + 1, hi):
        if keys[idx[i]] < keys[idx[i - 1]]:
            nr += 1
            runs[nr] = i
    nr += 1
    runs[nr] = hi
    while nr > 1:
        out_r = 0
        r = 0
        while r < nr:
            if r + 1 < nr:
                _merge(keys, idx, runs[r], runs[r + 1], runs[r + 2], tmp)
            runs[out_r] = runs[r]
            out_r += 1
            r += 2
        runs[out_r] = hi
        nr = out_r


@njit
def _merge(keys, idx, a, m, b, tmp):
    """Stable merge of sorted ``idx[a:m]`` and ``idx[m:b]`` (left wins ties)."""
    for k in range(a, m):
        tmp[k - a] = idx[k]
    i = 0
    n_left = m - a
    j = m
    k = a
    while i < n_left and j < b:
        if keys[idx[j]] < keys[tmp[i]]:
            idx[k] = idx[j]
            j += 1
        else:
            idx[k] = tmp[i]
            i += 1
        k += 1
    while i < n_left:
        idx[k] = tmp[i]
        i += 1
        k += 1
