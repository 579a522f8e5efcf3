"""``pandas.Series.describe`` of int64 segments, bit for bit: numpy's pairwise sums, linear quantiles.

pandas computes a mean as numpy's pairwise float64 sum over the values (NaN
slots read as 0) divided by the count, the std by the two-pass formula with
the same summation, and quantiles with numpy's ``linear`` method. Doing the
same here gives identical floats. Quantiles come from a radix select (O(n)),
not a sort.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

_BLOCK = 128  # numpy's PW_BLOCKSIZE


@njit
def pairwise_sum(vals, lo, n, center, square, skip):
    """Pairwise float64 sum of ``vals[lo:lo+n]``, as numpy sums (``PW_BLOCKSIZE`` 128, 8 accumulators).

    With ``square``, the terms are squared deviations from ``center``. The
    element at ``skip`` (absolute position; -1 for none) counts as 0.
    """
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += _term(vals, i, center, square, skip)
        return res
    if n <= _BLOCK:
        r0 = _term(vals, lo, center, square, skip)
        r1 = _term(vals, lo + 1, center, square, skip)
        r2 = _term(vals, lo + 2, center, square, skip)
        r3 = _term(vals, lo + 3, center, square, skip)
        r4 = _term(vals, lo + 4, center, square, skip)
        r5 = _term(vals, lo + 5, center, square, skip)
        r6 = _term(vals, lo + 6, center, square, skip)
        r7 = _term(vals, lo + 7, center, square, skip)
        m = lo + n - n % 8
        i = lo + 8
        while i < m:
            r0 += _term(vals, i, center, square, skip)
            r1 += _term(vals, i + 1, center, square, skip)
            r2 += _term(vals, i + 2, center, square, skip)
            r3 += _term(vals, i + 3, center, square, skip)
            r4 += _term(vals, i + 4, center, square, skip)
            r5 += _term(vals, i + 5, center, square, skip)
            r6 += _term(vals, i + 6, center, square, skip)
            r7 += _term(vals, i + 7, center, square, skip)
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < lo + n:
            res += _term(vals, i, center, square, skip)
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return pairwise_sum(vals, lo, n2, center, square, skip) + pairwise_sum(vals, lo + n2, n - n2, center, square, skip)


@njit
def _term(vals, i, center, square, skip):
    if i == skip:
        return 0.0
    v = float(vals[i])
    if square:
        d = center - v
        return d * d
    return v


@njit
def _radix_shift(span, n):
    """Bit shift that puts ``span + 1`` values into at most about ``n`` buckets (64 to 2**20)."""
    limit = np.uint64(max(64, min(1 << 20, n)))
    shift = np.uint64(0)
    while (span >> shift) >= limit:
        shift += np.uint64(1)
    return shift


@njit
def _select(cur, k):
    """The ``k``-th smallest of ``cur`` (0-based), narrowing by radix buckets."""
    while True:
        vmin = cur.min()
        vmax = cur.max()
        if vmin == vmax:
            return vmin
        shift = _radix_shift(np.uint64(vmax - vmin), cur.shape[0])
        hist = np.zeros(np.int64(np.uint64(vmax - vmin) >> shift) + 1, np.int64)
        for v in cur:
            hist[np.int64(np.uint64(v - vmin) >> shift)] += 1
        b = 0
        while k >= hist[b]:
            k -= hist[b]
            b += 1
        if shift == np.uint64(0):
            return vmin + b
        nxt = np.empty(hist[b], np.int64)
        j = 0
        for v in cur:
            if np.int64(np.uint64(v - vmin) >> shift) == b:
                nxt[j] = v
                j += 1
        cur = nxt


@njit
def order_stats(vals, lo, n, skip, vmin, vmax, ks):
    """The ``ks``-th smallest (sorted, 0-based) of ``vals[lo:lo+n]`` without position ``skip``.

    One histogram pass over the segment places every k in a bucket; buckets
    wider than one value are narrowed on their own elements only.
    """
    out = np.empty(ks.shape[0], np.int64)
    shift = _radix_shift(np.uint64(vmax - vmin), n)
    hist = np.zeros(np.int64(np.uint64(vmax - vmin) >> shift) + 1, np.int64)
    for i in range(lo, lo + n):
        if i != skip:
            hist[np.int64(np.uint64(vals[i] - vmin) >> shift)] += 1
    b = 0
    below = 0  # values in buckets before b
    last_b = -1
    sub = np.empty(0, np.int64)
    for q in range(ks.shape[0]):
        while ks[q] >= below + hist[b]:
            below += hist[b]
            b += 1
        if shift == np.uint64(0):
            out[q] = vmin + b
            continue
        if b != last_b:
            sub = np.empty(hist[b], np.int64)
            j = 0
            for i in range(lo, lo + n):
                if i != skip and np.int64(np.uint64(vals[i] - vmin) >> shift) == b:
                    sub[j] = vals[i]
                    j += 1
            last_b = b
        out[q] = _select(sub, ks[q] - below)
    return out


@njit
def _lerp(a, b, t):
    """Linear interpolation between neighbours as numpy does it (``b - d(1-t)`` from ``t = 0.5`` up)."""
    d = b - a
    if t >= 0.5:
        return b - d * (1.0 - t)
    return a + d * t


@njit
def describe_segment(vals, lo, n, skip):
    """count, mean, std, min, 25%, 50%, 75%, max of ``vals[lo:lo+n]`` (int64); ``skip`` is a NaN slot or -1."""
    out = np.full(8, np.nan)
    count = n - (1 if lo <= skip < lo + n else 0)
    out[0] = count
    if count == 0:
        return out
    total = pairwise_sum(vals, lo, n, 0.0, False, skip)
    mean = total / count
    out[1] = mean
    if count > 1:
        out[2] = np.sqrt(pairwise_sum(vals, lo, n, mean, True, skip) / (count - 1))
    vmin = np.iinfo(np.int64).max
    vmax = np.iinfo(np.int64).min
    for i in range(lo, lo + n):
        if i != skip:
            vmin = min(vmin, vals[i])
            vmax = max(vmax, vals[i])
    out[3] = vmin
    out[7] = vmax
    qs = (0.25, 0.5, 0.75)
    ks = np.empty(6, np.int64)
    ts = np.empty(3, np.float64)
    for j in range(3):
        pos = qs[j] * (count - 1)
        below = np.int64(np.floor(pos))
        ts[j] = pos - below
        ks[2 * j] = below
        ks[2 * j + 1] = min(below + 1, count - 1)
    order = np.argsort(ks)
    v = np.empty(6, np.int64)
    v[order] = order_stats(vals, lo, n, skip, vmin, vmax, ks[order])
    for j in range(3):
        a = float(v[2 * j])
        out[4 + j] = a if ts[j] == 0.0 else _lerp(a, float(v[2 * j + 1]), ts[j])
    return out
