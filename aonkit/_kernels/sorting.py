"""Sorting of int64 arrays that are nearly sorted: natural merge sorts with TimSort's gallop.

Profiler buffers write events in block-displaced order (a stretch written
late), so per-stream times come as a few ascending runs. Merging the runs,
each merge skipping what is already in place, costs about the displaced
part. Random order is first sorted in blocks of 32 by insertion and then
merged (TimSort's plan): Numba's own ``np.sort``/``np.argsort`` would add
about 1.5 s of compilation to the first kernel of a process that sorts
(``bench/coldstart.py``). Indices are ``range(n)`` from 0 or ``np.uintp``
(see :mod:`.keys`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .arrays import copy_to, positions


@njit
def stable_argsort(keys):
    """Positions of ``keys`` sorted stably: a natural merge sort (blocks first when runs are short)."""
    idx = positions(keys.shape[0])
    sort_by(keys, idx)
    return idx


@njit
def sort_by(keys, idx):
    """Reorder the positions ``idx`` in place so that ``keys[idx]`` ascends, stably (as :func:`stable_argsort`).

    No gather of the keys and no new positions: a group of rows is put in time order where it lies.
    """
    runs, nr = _runs(keys, idx)
    if nr > _MANY_RUNS_PER * idx.shape[0]:
        runs, nr = _blocks(keys, idx)
    _merge_runs(keys, idx, runs, nr)


_MANY_RUNS_PER = 1.0 / 32  # more runs than this per element: random order, sort blocks first
_BLOCK = 32
_FEW_RUNS = 64  # run starts found in the first pass


@njit
def _blocks(keys, idx):
    """Sort ``idx`` in blocks of ``_BLOCK`` by stable insertion; return the blocks as runs (see :func:`_runs`)."""
    n = idx.shape[0]
    nr = (n + _BLOCK - 1) // _BLOCK
    runs = np.empty(nr + 1, np.int64)
    for b in range(nr):
        lo = b * _BLOCK
        hi = min(lo + _BLOCK, n)
        runs[b] = lo
        for i in range(lo + 1, hi):
            v = idx[np.uintp(i)]
            j = i - 1
            while j >= lo and _less(keys, v, idx[np.uintp(j)]):
                idx[np.uintp(j + 1)] = idx[np.uintp(j)]
                j -= 1
            idx[np.uintp(j + 1)] = v
    runs[nr] = n
    return runs, nr


@njit
def _runs(keys, idx):
    """(starts of the ascending runs of ``idx``'s keys, then its length; number of runs).

    One pass with each key read once records up to :data:`_FEW_RUNS` starts
    (the usual few runs); a second pass records more. With more runs than
    :func:`sort_by` merges (random order) the starts are left unfilled: it
    sorts blocks then.
    """
    n = idx.shape[0]
    few = np.empty(_FEW_RUNS + 1, np.int64)
    few[0] = 0
    nr = np.uintp(1 if n else 0)
    prev = _key(keys, idx, 0) if n else 0
    for i in range(1, n):  # branch-free: slot nr holds the latest position until a descent keeps it
        k = _key(keys, idx, i)
        few[min(nr, np.uintp(_FEW_RUNS))] = i
        nr += np.uintp(k < prev)
        prev = k
    if nr <= _FEW_RUNS:
        few[nr] = n
        return few, np.int64(nr)
    runs = np.empty(nr + 1, np.int64)
    if nr > _MANY_RUNS_PER * n:  # the caller sorts blocks instead: the starts are not needed
        return runs, np.int64(nr)
    nr = np.uintp(0)
    runs[0] = 0
    for i in range(1, n):
        if _key(keys, idx, i) < _key(keys, idx, i - 1):
            nr += np.uintp(1)
            runs[nr] = i
    nr += np.uintp(1)
    runs[nr] = n
    return runs, np.int64(nr)


@njit
def _merge_runs(keys, idx, runs, nr):
    """Merge the ascending runs of ``idx`` pairwise, in place and stably.

    The order is by ``keys[idx]``. Each merge first
    skips, by binary search, the head of the left run and the tail of the
    right run that are already in place (TimSort's gallop), so the
    block-displaced order of profiler buffers (a stretch of events written
    late) costs about the displaced part, not the whole array.
    """
    n = idx.shape[0]
    while nr > 1:
        out_r = 0
        for r in range(0, nr, 2):
            if r + 1 < nr:
                _merge(keys, idx, runs[r], runs[r + 1], runs[r + 2])
            runs[out_r] = runs[r]
            out_r += 1
        runs[out_r] = n
        nr = out_r


@njit
def _key(keys, idx, i):
    return keys[np.uintp(idx[np.uintp(i)])]


@njit
def _less(keys, x, y):
    return keys[np.uintp(x)] < keys[np.uintp(y)]


@njit
def _merge(keys, idx, a, m, b):
    """Stable in-place merge of the sorted runs ``idx[a:m]`` and ``idx[m:b]`` (left wins ties)."""
    pivot = _key(keys, idx, m)
    lo = a
    hi = m
    while lo < hi:  # the left run's head up to the right run's first key stays
        mid = (lo + hi) >> 1
        if _key(keys, idx, mid) > pivot:
            hi = mid
        else:
            lo = mid + 1
    if lo == m:
        return
    p = lo
    pivot = _key(keys, idx, m - 1)
    hi = b
    lo = m
    while lo < hi:  # the right run's tail from the left run's last key on stays
        mid = (lo + hi) >> 1
        if _key(keys, idx, mid) >= pivot:
            hi = mid
        else:
            lo = mid + 1
    q = lo
    left = idx[p:m].copy()
    nl = left.shape[0]
    i = 0
    j = m
    k = p
    while i < nl and j < q:  # branch-free: the right run is read ahead of every write
        r = idx[np.uintp(j)]
        lv = left[np.uintp(i)]
        take = _less(keys, r, lv)
        idx[np.uintp(k)] = r if take else lv
        j += take
        i += 1 - take
        k += 1
    copy_to(idx[k : k + nl - i], left[i:])
