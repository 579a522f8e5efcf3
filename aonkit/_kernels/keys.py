"""Table slots for int64 keys (correlations, streams), first-match lookups and stable grouping.

A key set whose range is compact indexes a table directly (``key - lo``); a
sparse one is first mapped to dense ids through an open-addressing hash
table. Both are O(n).

Speed note: Numba adds negative-index wraparound to every access through a
signed index it cannot prove non-negative, which here cost 10x. Loops run
over ``range(n)`` from 0 and computed indices are cast with ``np.uintp``.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .sorting import stable_argsort

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit
def compact(keys):
    """(slot keys, lo, size): ``out[i] - lo`` is the slot of ``keys[i]`` in ``[0, size)``.

    A compact range (size <= 4 x n + 1024) returns ``keys`` itself; a sparse
    one returns hash ids in order of first appearance (lo = 0).
    """
    lo = np.iinfo(np.int64).max
    hi = np.iinfo(np.int64).min
    for i in range(keys.shape[0]):
        lo = min(lo, keys[i])
        hi = max(hi, keys[i])
    if keys.shape[0] == 0:
        return keys, np.int64(0), np.int64(0)
    if float(hi) - float(lo) <= 4.0 * keys.shape[0] + 1024.0:
        return keys, lo, hi - lo + 1
    return _hash_ids(keys)


@njit
def _hash_ids(keys):
    n = keys.shape[0]
    bits = 1
    while (1 << bits) < 2 * n:
        bits += 1
    cap_mask = np.uint64((1 << bits) - 1)
    slots = np.full(1 << bits, -1, np.int64)
    uniq = np.empty(n, np.int64)
    ids = np.empty(n, np.int64)
    shift = np.uint64(64 - bits)
    nid = 0
    for i in range(n):
        k = keys[i]
        h = (np.uint64(k) * _GOLDEN) >> shift
        while slots[h] >= 0 and uniq[np.uintp(slots[h])] != k:
            h = (h + np.uint64(1)) & cap_mask
        j = slots[h]
        if j < 0:
            j = nid
            slots[h] = j
            uniq[np.uintp(j)] = k
            nid += 1
        ids[i] = j
    return ids, np.int64(0), np.int64(nid)


@njit
def _join_slots(keys, probe):
    """(key slots, probe slots, lo, size): ``slot - lo`` in ``[0, size)``, equal values in equal slots.

    A value range up to 8 x the entries indexes a table directly; a sparser
    one goes through hash ids (lo = 0).
    """
    nk = keys.shape[0]
    lo = np.iinfo(np.int64).max
    hi = np.iinfo(np.int64).min
    for i in range(nk):
        lo = min(lo, keys[i])
        hi = max(hi, keys[i])
    for i in range(probe.shape[0]):
        lo = min(lo, probe[i])
        hi = max(hi, probe[i])
    if float(hi) - float(lo) <= 8.0 * (nk + probe.shape[0]) + 4096.0:
        return keys, probe, lo, hi - lo + 1
    ids, _, size = _hash_ids(np.concatenate((keys, probe)))
    return ids[:nk], ids[nk:], np.int64(0), size


@njit
def first_match(keys, values, probe):
    """For each ``probe`` value: ``values`` at the first position of ``keys`` holding it, and whether any does.

    Returns (matched values, found); unmatched probes get 0. The table holds
    int32 first positions (4 bytes a slot, :func:`_join_slots`).
    """
    nk = keys.shape[0]
    if nk >= 2**31:
        raise ValueError("first_match: at most 2**31 - 1 keys")
    out = np.zeros(probe.shape[0], values.dtype)
    found = np.zeros(probe.shape[0], np.bool_)
    if nk + probe.shape[0] == 0:
        return out, found
    kslot, pslot, lo, size = _join_slots(keys, probe)
    first = np.full(size, -1, np.int32)
    for i in range(nk - 1, -1, -1):  # backwards: the first position is written last
        first[np.uintp(kslot[i] - lo)] = i
    for i in range(probe.shape[0]):
        f = first[np.uintp(pslot[i] - lo)]
        if f >= 0:
            out[i] = values[np.uintp(f)]
            found[i] = True
    return out, found


@njit
def match_counts(keys, probe):
    """For each ``probe`` value, how many entries of ``keys`` equal it (a table, as :func:`first_match`)."""
    out = np.zeros(probe.shape[0], np.int64)
    if keys.shape[0] + probe.shape[0] == 0:
        return out
    kslot, pslot, lo, size = _join_slots(keys, probe)
    table = np.zeros(size, np.int64)
    for i in range(keys.shape[0]):
        table[np.uintp(kslot[i] - lo)] += 1
    for i in range(probe.shape[0]):
        out[i] = table[np.uintp(pslot[i] - lo)]
    return out


@njit
def counts(slots, lo, size):
    """Occurrences of each ``slots - lo`` in ``[0, size)``; four interleaved tables keep repeats off one counter."""
    c4 = np.zeros(4 * size, np.int64)
    for k in range(slots.shape[0]):
        c4[np.uintp((k & 3) * size + slots[k] - lo)] += 1
    return c4[:size] + c4[size : 2 * size] + c4[2 * size : 3 * size] + c4[3 * size :]


@njit
def _order_groups(keys, slots, lo, count, ascending):
    """Used slots (count > 0) ordered by key or by first appearance; and their keys."""
    n_used = 0
    for j in range(count.shape[0]):  # np.flatnonzero, without compiling its generic code
        n_used += count[j] > 0
    used = np.empty(n_used, np.int64)
    n_used = 0
    for j in range(count.shape[0]):
        if count[j] > 0:
            used[n_used] = j
            n_used += 1
    first = np.full(count.shape[0], -1, np.int64)
    found = 0
    i = 0
    while found < used.shape[0]:
        j = np.uintp(slots[i] - lo)
        if first[j] < 0 and count[j] > 0:
            first[j] = i
            found += 1
        i += 1
    gkeys = np.empty(used.shape[0], np.int64)
    for g in range(used.shape[0]):
        gkeys[g] = keys[np.uintp(first[used[g]])]
    order = stable_argsort(gkeys) if ascending else stable_argsort(first[used])  # unique keys
    return used[order], gkeys[order]


@njit
def group_rows(keys, ascending):
    """Positions ``0..m-1`` grouped by ``keys``, in input order within a group.

    Groups come in ascending key order, or by first appearance when not
    ``ascending``. Returns (positions, offsets (groups + 1), group keys).
    """
    m = keys.shape[0]
    if m == 0:
        return np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64)
    slots, lo, size = compact(keys)
    count = counts(slots, lo, size)
    used, gkeys = _order_groups(keys, slots, lo, count, ascending)
    n_g = used.shape[0]
    offsets = np.zeros(n_g + 1, np.int64)
    for g in range(n_g):
        offsets[g + 1] = offsets[g] + count[np.uintp(used[g])]
    out = np.empty(m + 1, np.int64)  # + 1: the branch-free passes write one past a group
    if n_g <= 8:  # one branch-free pass per group
        for g in range(n_g):
            pos = np.uintp(offsets[g])
            want = used[g] + lo
            for k in range(m):
                out[pos] = k
                pos += np.uintp(slots[k] == want)
    else:
        group_of = np.zeros(size, np.int64)
        for g in range(n_g):
            group_of[np.uintp(used[g])] = g
        fill = offsets[:-1].copy()
        for k in range(m):
            g = np.uintp(group_of[np.uintp(slots[k] - lo)])
            out[np.uintp(fill[g])] = k
            fill[g] += 1
    return out[:m], offsets, gkeys


@njit
def codes_seen(codes, wanted, stream):
    """Per code + 1 (code -1 first): whether a row with that code and ``stream == -1`` exists, for ``wanted`` codes.

    ``wanted`` is indexed like the result; rows of other codes are only read
    (one predictable branch a row), so a few wanted codes among many rows cost one pass.
    """
    seen = np.zeros(wanted.shape[0], np.bool_)
    for i in range(codes.shape[0]):
        c = np.uintp(codes[i] + 1)
        if wanted[c] and stream[i] == -1:
            seen[c] = True
    return seen


@njit
def pair_codes(a, b):
    """One int64 key per (a, b) pair, ordered like the pairs: ``(a - a_lo) * width + (b - b_lo)``.

    Returns (keys, a_lo, b_lo, width, ok); ``ok`` is False (and keys empty)
    when the two ranges' product reaches 2**62, for the caller to factorize.
    """
    n = a.shape[0]
    if n == 0:
        return np.empty(0, np.int64), np.int64(0), np.int64(0), np.int64(1), True
    a_lo = np.int64(a[0])
    a_hi = a_lo
    b_lo = np.int64(b[0])
    b_hi = b_lo
    for i in range(n):
        a_lo = min(a_lo, np.int64(a[i]))
        a_hi = max(a_hi, np.int64(a[i]))
        b_lo = min(b_lo, np.int64(b[i]))
        b_hi = max(b_hi, np.int64(b[i]))
    if (float(a_hi) - float(a_lo) + 1.0) * (float(b_hi) - float(b_lo) + 1.0) >= 2.0**62:  # floats: no wraparound
        return np.empty(0, np.int64), a_lo, b_lo, np.int64(1), False
    width = b_hi - b_lo + 1
    keys = np.empty(n, np.int64)
    for i in range(n):
        keys[i] = (np.int64(a[i]) - a_lo) * width + (np.int64(b[i]) - b_lo)
    return keys, a_lo, b_lo, width, True
