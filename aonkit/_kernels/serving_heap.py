"""The min-heaps of the serving simulation (:mod:`.serving`): one row of a 2-D array each.

Row ``r`` of ``hk`` (keys) and ``hv`` (values) holds one heap, its size kept by the caller: a replica's decoding
sequences keyed by the decode-step count they finish at, or (row 0 of a one-row pair) the event loop's events keyed
by time. Items are ordered by key, then value, so the order they pop in does not depend on the heap's history.
Loops index with ``range(n)`` from 0.
"""

from __future__ import annotations

from ._jit import njit_leaf, njit_leaf_inline


@njit_leaf
def heap_push(hk, hv, r, n, key, val):
    """Push (key, val) onto the min-heap of ``n`` items in row ``r`` of ``hk``/``hv`` (ordered by key, then val).

    Equal keys pop in ``val`` order, whatever the heap's history: simultaneous step ends are handled lowest
    replica first.
    """
    j = n
    while j > 0:
        p = (j - 1) >> 1
        if hk[r, p] < key or (hk[r, p] == key and hv[r, p] < val):
            break
        hk[r, j] = hk[r, p]
        hv[r, j] = hv[r, p]
        j = p
    hk[r, j] = key
    hv[r, j] = val


@njit_leaf_inline
def sink(hk, hv, r, j, n, key, val):
    """Put (``key``, ``val``) in the hole at ``j`` of the min-heap of ``n`` items in row ``r``, moved down to its place.

    Inlined into its two callers: a call where :func:`heap_pop` runs (every step end and finish) made the whole
    simulation 0-10% slower (session 45, alternated runs).
    """
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and (hk[r, c + 1] < hk[r, c] or (hk[r, c + 1] == hk[r, c] and hv[r, c + 1] < hv[r, c])):
            c += 1
        if hk[r, c] > key or (hk[r, c] == key and hv[r, c] > val):
            break
        hk[r, j] = hk[r, c]
        hv[r, j] = hv[r, c]
        j = c
    hk[r, j] = key
    hv[r, j] = val


@njit_leaf
def sift_down(hk, hv, r, j, n):
    """Move item ``j`` of the min-heap of ``n`` items in row ``r`` down to its place."""
    sink(hk, hv, r, j, n, hk[r, j], hv[r, j])


@njit_leaf
def heap_pop(hk, hv, r, n):
    """Drop the root of the min-heap of ``n`` items in row ``r`` (read it first): the last item sinks from the root."""
    sink(hk, hv, r, 0, n - 1, hk[r, n - 1], hv[r, n - 1])
