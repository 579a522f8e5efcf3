"""Interning of raw JSON tokens: an open-addressing hash table over byte spans.

``sym`` rows are (start, end, kind) of the first occurrence of each distinct
token; ``last`` caches, per kind, the id of the previous token so runs of equal
values (``"ph": "X"``, one thread's ``tid``) skip hashing.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit, njit_inline
from .raw import byte_at, word_at

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@njit
def new_table():
    """Empty (hash table, sym, symh, last) with room to grow."""
    return np.full(1024, -1, np.int64), np.empty((256, 3), np.int64), np.empty(256, np.uint64), np.full(8, -1, np.int64)


@njit_inline
def _same(buf, a, b, ln):
    k = 0
    while k + 8 <= ln:
        if word_at(buf, a + k) != word_at(buf, b + k):
            return False
        k += 8
    while k < ln:
        if byte_at(buf, a + k) != byte_at(buf, b + k):
            return False
        k += 1
    return True


@njit_inline
def _hash(buf, s, e, kind):
    """FNV-style hash over 8-byte words, then the tail bytes."""
    h = _FNV_OFFSET ^ np.uint64(kind + 1)
    p = s
    while p + 8 <= e:
        h = (h ^ word_at(buf, p)) * _FNV_PRIME
        h ^= h >> np.uint64(29)
        p += 8
    while p < e:
        h = (h ^ np.uint64(byte_at(buf, p))) * _FNV_PRIME
        p += 1
    return h


@njit_inline
def intern(buf, s, e, kind, ht, sym, symh, nsym, last):
    """Id of token ``buf[s:e]`` of ``kind``, adding it when new. Returns (id, nsym).

    The caller guarantees room for one more symbol (see :func:`reserve`).
    """
    ln = e - s
    prev = last[kind]
    if prev >= 0 and sym[prev, 1] - sym[prev, 0] == ln and _same(buf, sym[prev, 0], s, ln):
        return prev, nsym
    h = _hash(buf, s, e, kind)
    mask = ht.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    while True:
        sid = ht[slot]
        if sid < 0:
            ht[slot] = nsym
            sym[nsym, 0] = s
            sym[nsym, 1] = e
            sym[nsym, 2] = kind
            symh[nsym] = h
            last[kind] = nsym
            return nsym, nsym + 1
        if (
            symh[sid] == h
            and sym[sid, 2] == kind
            and sym[sid, 1] - sym[sid, 0] == ln
            and _same(buf, sym[sid, 0], s, ln)
        ):
            last[kind] = sid
            return sid, nsym
        slot = (slot + 1) & mask


@njit
def reserve(ht, sym, symh, nsym, extra):
    """Grow the table so that ``extra`` more symbols fit. Returns (ht, sym, symh)."""
    if nsym + extra > sym.shape[0]:
        cap = max(sym.shape[0] * 2, nsym + extra)
        sym2 = np.empty((cap, 3), np.int64)
        symh2 = np.empty(cap, np.uint64)
        for r in range(nsym):  # loops, not slices: see trace_scan._grow
            sym2[r, 0] = sym[r, 0]
            sym2[r, 1] = sym[r, 1]
            sym2[r, 2] = sym[r, 2]
            symh2[r] = symh[r]
        sym, symh = sym2, symh2
    if (nsym + extra) * 2 > ht.shape[0]:
        size = ht.shape[0]
        while (nsym + extra) * 2 > size:
            size *= 4
        ht = np.full(size, -1, np.int64)
        mask = size - 1
        for sid in range(nsym):
            slot = np.int64(symh[sid] & np.uint64(mask))
            while ht[slot] >= 0:
                slot = (slot + 1) & mask
            ht[slot] = sid
    return ht, sym, symh
