"""``pandas.Series.describe`` of int64 arrays, bit for bit: numpy's pairwise sums, linear quantiles.

pandas computes a mean as numpy's pairwise float64 sum over the values (NaN
slots read as 0) divided by the count, the std by the two-pass formula with
the same summation, and quantiles with numpy's ``linear`` method. Doing the
same here gives identical floats. Quantiles come from a radix select (O(n)),
not a sort. :func:`group_stats` gives pandas' grouped count, sum, min, max,
mean and std the same way (its std is pandas' grouped Welford update).
Indices are ``range(n)`` from 0 or ``np.uintp`` (see :mod:`.keys`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .arrays import positions
from .keys import compact

_BLOCK = 128  # numpy's PW_BLOCKSIZE


@njit
def _min_max(vals):
    """(min, max) of a non-empty int64 array in one loop (Numba's ``min``/``max`` compile seconds of generic code)."""
    lo = vals[0]
    hi = vals[0]
    for i in range(1, vals.shape[0]):
        v = vals[i]
        lo = min(lo, v)
        hi = max(hi, v)
    return lo, hi


@njit
def pairwise_sum(vals, center, square, skip_first):
    """Pairwise float64 sum of ``vals``, as numpy sums (``PW_BLOCKSIZE`` 128, 8 accumulators).

    With ``square``, the terms are squared deviations from ``center``; with
    ``skip_first`` the first term counts as 0 (pandas' NaN slot). numpy
    recurses on halves (rounded down to a multiple of 8) above 128 elements;
    this walks the same tree with an explicit stack (Numba caches recursive
    functions badly).
    """
    n = vals.shape[0]
    if n <= _BLOCK:
        return _block_sum(vals, np.int64(0), n, center, square, skip_first)
    f_lo = np.empty(64, np.int64)
    f_n = np.empty(64, np.int64)
    f_left = np.empty(64, np.float64)
    f_right = np.zeros(64, np.bool_)  # the frame is its parent's right half
    depth = 0
    f_lo[0] = 0
    f_n[0] = n
    while True:
        if f_n[depth] > _BLOCK:  # descend into the left half
            half = f_n[depth] // 2
            half -= half % 8
            f_lo[depth + 1] = f_lo[depth]
            f_n[depth + 1] = half
            f_right[depth + 1] = False
            depth += 1
            continue
        r = _block_sum(vals, f_lo[depth], f_n[depth], center, square, skip_first)
        while True:  # hand r to the parent frames
            depth -= 1
            if depth < 0:
                return r
            if not f_right[depth + 1]:  # r is the parent's left half: go to its right half
                f_left[depth] = r
                half = f_n[depth] // 2
                half -= half % 8
                f_lo[depth + 1] = f_lo[depth] + half
                f_n[depth + 1] = f_n[depth] - half
                f_right[depth + 1] = True
                depth += 1
                break
            r = f_left[depth] + r


@njit
def _block_sum(vals, lo, n, center, square, skip_first):
    """Sum of at most 128 terms as numpy does it: sequential below 8, else 8 interleaved accumulators."""
    seg = vals[lo : lo + n]
    skip = 0 if (skip_first and lo == 0) else -1
    if n < 8:
        res = 0.0
        for i in range(n):
            res += _term(seg, i, center, square, skip)
        return res
    i0 = np.int64(0)  # not the literals 0..7: each would compile its own _term (18 in all)
    r0 = _term(seg, i0, center, square, skip)
    r1 = _term(seg, i0 + 1, center, square, skip)
    r2 = _term(seg, i0 + 2, center, square, skip)
    r3 = _term(seg, i0 + 3, center, square, skip)
    r4 = _term(seg, i0 + 4, center, square, skip)
    r5 = _term(seg, i0 + 5, center, square, skip)
    r6 = _term(seg, i0 + 6, center, square, skip)
    r7 = _term(seg, i0 + 7, center, square, skip)
    m = n - n % 8
    for i in range(8, m, 8):
        r0 += _term(seg, i, center, square, skip)
        r1 += _term(seg, i + 1, center, square, skip)
        r2 += _term(seg, i + 2, center, square, skip)
        r3 += _term(seg, i + 3, center, square, skip)
        r4 += _term(seg, i + 4, center, square, skip)
        r5 += _term(seg, i + 5, center, square, skip)
        r6 += _term(seg, i + 6, center, square, skip)
        r7 += _term(seg, i + 7, center, square, skip)
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(m, n):
        res += _term(seg, i, center, square, skip)
    return res


@njit
def _term(seg, i, center, square, skip):
    if i == skip:
        return 0.0
    v = float(seg[np.uintp(i)])
    if square:
        d = center - v
        return d * d
    return v


_RADIX = 4096  # buckets per level: the four count tables stay in L2 (128 KB)


@njit
def _buckets(vals, vmin, vmax):
    """Histogram of ``vals`` in buckets of ``2**shift`` values (at most ``_RADIX`` buckets)."""
    span = np.uint64(vmax - vmin)
    shift = np.uint64(0)
    while (span >> shift) >= np.uint64(_RADIX):
        shift += np.uint64(1)
    nb = np.uintp(span >> shift) + np.uintp(1)
    h4 = np.zeros(4 * nb, np.int64)  # four interleaved tables keep repeats off one counter
    for k in range(vals.shape[0]):
        h4[np.uintp(k & 3) * nb + np.uintp(np.uint64(vals[k] - vmin) >> shift)] += 1
    return h4[:nb] + h4[nb : 2 * nb] + h4[2 * nb : 3 * nb] + h4[3 * nb :], shift


@njit
def order_stats(vals, ks):
    """The ``ks``-th smallest (``ks`` ascending, 0-based) of ``vals``: radix select, O(n).

    One histogram places every k in a bucket; one more pass copies the
    values of those buckets (at most one per k), which are narrowed on
    their own elements only.
    """
    nq = ks.shape[0]
    out = np.empty(nq, np.int64)
    if vals.shape[0] == 0:
        return out
    vmin, vmax = _min_max(vals)
    hist, shift = _buckets(vals, vmin, vmax)
    bucket = np.empty(nq, np.int64)  # the bucket of each k and its rank there
    rank = np.empty(nq, np.int64)
    b = 0
    below = 0  # values in buckets before b
    for q in range(nq):
        while ks[q] >= below + hist[b]:
            below += hist[b]
            b += 1
        bucket[q] = b
        rank[q] = ks[q] - below
    if shift == np.uint64(0):  # one value per bucket
        for q in range(nq):
            out[q] = vmin + bucket[q]
        return out
    slot = np.full(hist.shape[0], -1, np.int64)  # the distinct buckets wanted, in order
    starts = np.zeros(nq + 1, np.int64)
    nw = 0
    for q in range(nq):
        if slot[bucket[q]] < 0:
            slot[bucket[q]] = nw
            starts[nw + 1] = starts[nw] + hist[bucket[q]]
            nw += 1
    sub = np.empty(starts[nw] + 1, np.int64)  # + 1: the branch-free copy writes one past
    fill = starts[:nw].copy()
    trash = starts[nw]
    for k in range(vals.shape[0]):
        w = slot[np.uintp(np.uint64(vals[k] - vmin) >> shift)]
        dst = trash if w < 0 else fill[np.uintp(w)]
        sub[np.uintp(dst)] = vals[k]
        if w >= 0:
            fill[np.uintp(w)] += 1
    for q in range(nq):
        w = slot[bucket[q]]
        out[q] = _select(sub[starts[w] : starts[w + 1]], rank[q])
    return out


@njit
def _select(cur, k):
    """The ``k``-th smallest of ``cur`` (0-based), narrowing by radix buckets."""
    while True:
        if cur.shape[0] <= 32:
            return _small_select(cur, k)
        vmin, vmax = _min_max(cur)
        if vmin == vmax:
            return vmin
        hist, shift = _buckets(cur, vmin, vmax)
        b = 0
        while k >= hist[b]:
            k -= hist[b]
            b += 1
        if shift == np.uint64(0):
            return vmin + b
        cur = _in_bucket(cur, vmin, shift, b)


@njit
def _small_select(cur, k):
    """The ``k``-th smallest of a few values: an insertion sort of a copy (compiles in a fraction of np.sort)."""
    a = cur.copy()
    for i in range(1, a.shape[0]):
        x = a[i]
        j = i - 1
        while j >= 0 and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x
    return a[k]


@njit
def _in_bucket(vals, vmin, shift, b):
    """The values of ``vals`` in bucket ``b``."""
    out = np.empty(vals.shape[0], np.int64)
    j = np.uintp(0)
    for k in range(vals.shape[0]):
        out[j] = vals[k]
        j += np.uintp((np.uint64(vals[k] - vmin) >> shift) == np.uint64(b))
    return out[:j]


@njit
def _lerp(a, b, t):
    """Linear interpolation between neighbours as numpy does it (``b - d(1-t)`` from ``t = 0.5`` up)."""
    d = b - a
    if t >= 0.5:
        return b - d * (1.0 - t)
    return a + d * t


@njit
def describe(vals, skip_first):
    """count, mean, std, min, 25%, 50%, 75%, max of int64 ``vals``; ``skip_first``: vals[0] is a NaN slot."""
    out = np.full(8, np.nan)
    valid = vals[1:] if skip_first else vals
    count = valid.shape[0]
    out[0] = count
    if count == 0:
        return out
    mean = pairwise_sum(vals, 0.0, np.bool_(False), skip_first) / count
    out[1] = mean
    if count > 1:
        out[2] = np.sqrt(pairwise_sum(vals, mean, np.bool_(True), skip_first) / (count - 1))
    out[3], out[7] = _min_max(valid)
    ks = np.empty(6, np.int64)
    ts = np.empty(3, np.float64)
    for j in range(3):
        pos = (0.25 * (j + 1)) * (count - 1)
        below = np.int64(np.floor(pos))
        ts[j] = pos - below
        ks[2 * j] = below
        ks[2 * j + 1] = min(below + 1, count - 1)
    order = positions(np.int64(6))  # ks in order, by insertion (stable); a general sort costs seconds to compile
    for a in range(1, 6):
        b = a
        while b > 0 and ks[order[b - 1]] > ks[order[b]]:
            order[b - 1], order[b] = order[b], order[b - 1]
            b -= 1
    v = np.empty(6, np.int64)
    got = order_stats(valid, ks[order])
    for q in range(6):  # a loop, not ``v[order] = got``: see arrays.copy_to
        v[order[q]] = got[q]
    for j in range(3):
        a = float(v[2 * j])
        out[4 + j] = a if ts[j] == 0.0 else _lerp(a, float(v[2 * j + 1]), ts[j])
    return out


@njit
def group_stats(keys, values):
    """The ``groupby(keys, sort=False)[values].agg(count, sum, min, max, mean, std)`` of pandas, bit for bit.

    ``values`` are int64. Groups come in order of first appearance. The mean
    is the exact integer sum over the count; the sample std is pandas'
    Welford update (``group_var``) in row order, NaN for one value.
    Returns (group keys, count, sum, min, max, mean, std).
    """
    slots, lo, size = compact(keys)
    gid = np.full(size, -1, np.int64)
    n_g = 0
    for i in range(keys.shape[0]):
        s = np.uintp(slots[i] - lo)
        if gid[s] < 0:
            gid[s] = n_g
            n_g += 1
    gkeys = np.empty(n_g, np.int64)
    count = np.zeros(n_g, np.int64)
    total = np.zeros(n_g, np.int64)
    vmin = np.full(n_g, np.iinfo(np.int64).max)
    vmax = np.full(n_g, np.iinfo(np.int64).min)
    mean_w = np.zeros(n_g, np.float64)  # Welford's running mean and sum of squared deviations
    m2 = np.zeros(n_g, np.float64)
    for i in range(keys.shape[0]):
        g = np.uintp(gid[np.uintp(slots[i] - lo)])
        v = values[i]
        gkeys[g] = keys[i]
        count[g] += 1
        total[g] += v
        vmin[g] = min(vmin[g], v)
        vmax[g] = max(vmax[g], v)
        x = float(v)
        old = mean_w[g]
        mean_w[g] += (x - old) / count[g]
        m2[g] += (x - mean_w[g]) * (x - old)
    mean = np.empty(n_g, np.float64)
    std = np.full(n_g, np.nan)
    for g in range(n_g):
        mean[g] = float(total[g]) / count[g]
        if count[g] > 1:
            std[g] = np.sqrt(m2[g] / (count[g] - 1))
    return gkeys, count, total, vmin, vmax, mean, std
