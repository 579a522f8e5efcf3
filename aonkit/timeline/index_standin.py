"""numpy stand-ins of the timeline index's pyramid kernels (:mod:`aonkit._kernels.pyramid`), until they compile.

The four kernels cost about 1.3 s to compile together on a new machine
(``bench/coldstart.py``), paid by the first timeline or dashboard of a
process; these give the same arrays, bit for bit (``tests/test_standin.py``).
Events of one track rarely overlap (a track is one nesting depth of one
lane), so a running maximum of ends is the end itself there; the tracks or
items where an end goes back are redone with ``np.maximum.accumulate`` each.
"""

from __future__ import annotations

import numpy as np

__all__ = ["numpy_build_level", "numpy_cut_scales", "numpy_depths", "numpy_running_max_end"]

_I64_MAX = np.iinfo(np.int64).max


def _segmented_cummax(v: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Running maximum of ``v`` restarted at each of ``starts`` (ascending, the first 0 when ``v`` is not empty)."""
    out = v.copy()
    back = np.flatnonzero(v[1:] < v[:-1]) + 1  # where the running maximum differs from v: only after a step back
    if len(back):
        seg = np.searchsorted(starts, back, side="right") - 1
        ends = np.append(starts[1:], len(v))
        for s in np.unique(seg).tolist():
            lo, hi = int(starts[s]), int(ends[s])
            out[lo:hi] = np.maximum.accumulate(v[lo:hi])
    return out


def numpy_depths(parent: np.ndarray, order: np.ndarray) -> np.ndarray:
    """:func:`aonkit._kernels.pyramid.depths`: nesting depth of each event (0 for roots), one step up per pass."""
    depth = np.zeros(len(parent), np.int64)
    up = parent.copy()
    has = up >= 0
    for _ in range(len(parent)):  # at most that many steps up: a parent before its child, no cycle
        if not has.any():
            break
        depth += has
        up = np.where(has, parent[np.maximum(up, 0)], -1)
        has = up >= 0
    return depth


def numpy_running_max_end(ts: np.ndarray, end: np.ndarray, track_off: np.ndarray) -> np.ndarray:
    """:func:`aonkit._kernels.pyramid.running_max_end`: per event, the track's largest ``max(end, ts + 1)`` so far."""
    v = np.maximum(end, ts + 1)
    starts = np.unique(track_off[:-1][np.diff(track_off) > 0])
    return _segmented_cummax(v, starts) if len(v) else v


def numpy_cut_scales(ts: np.ndarray, end: np.ndarray, track_off: np.ndarray, origin: int) -> np.ndarray:
    """:func:`aonkit._kernels.pyramid.cut_scales`: the smallest bucket that keeps each event with the one before."""
    cut = np.empty(len(ts), np.int64)
    if len(ts):
        a = ts - np.int64(origin)
        x = a[1:] ^ a[:-1]
        for sh in (1, 2, 4, 8, 16, 32):
            x |= x >> sh
        dur = end - ts
        cut[1:] = np.maximum(np.maximum(dur[1:], dur[:-1]), (x + 1) >> 1)
        cut[track_off[:-1][np.diff(track_off) > 0]] = _I64_MAX  # a track's first event
    return cut


def numpy_build_level(ts: np.ndarray, end: np.ndarray, cut: np.ndarray, g: int, n_items: int) -> np.ndarray:
    """:func:`aonkit._kernels.pyramid.build_level`: the items of the level with bucket ``g``, shape (8, n_items)."""
    n = len(ts)
    first = np.flatnonzero(cut >= g)
    items = np.empty((8, n_items), np.int64)
    if not n:
        return items
    stop = np.append(first[1:], n)
    item_of = np.repeat(np.arange(len(first)), stop - first)
    dur = end - ts
    items[0], items[1], items[2], items[3] = first, stop, ts[first], ts[stop - 1]
    items[4] = np.maximum(ts[first], np.maximum.reduceat(end, first))  # the kernel's end reach starts at ts
    track_first = np.flatnonzero(cut == _I64_MAX)  # cmax runs over a track's items, from its first event
    items[5] = _segmented_cummax(np.maximum(end, ts + 1), track_first)[stop - 1]
    reach = _segmented_cummax(end, first)  # the latest end in the item up to each event
    before = np.maximum(ts[first][item_of], np.append(np.int64(0), reach[:-1]))  # reach before each event
    before[first] = ts[first]
    items[6] = np.add.reduceat(np.maximum(0, end - np.maximum(ts, before)), first)
    longest = np.maximum.reduceat(dur, first)[item_of]
    items[7] = np.minimum.reduceat(np.where(dur == longest, np.arange(n), n), first)  # the first longest
    return items
