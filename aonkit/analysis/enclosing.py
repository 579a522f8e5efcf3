"""Each event's immediate enclosing event on its thread: the Numba stack walk, or numpy until it is compiled.

:func:`aonkit._kernels.nesting.parents` walks the events once with a stack
(0.4-0.6 s to compile on a new machine, paid by the first timeline, op stack or
GPU link table of a process); until it is compiled :func:`numpy_parents`
stands in (:mod:`.standin`), with the same rows.
"""

from __future__ import annotations

import numpy as np

__all__ = ["numpy_parents", "parents"]


def numpy_parents(thread: np.ndarray, ts: np.ndarray, end: np.ndarray, order: np.ndarray) -> np.ndarray:
    """:func:`aonkit._kernels.nesting.parents` in numpy: the nearest earlier event that ends no earlier.

    In ``order`` (by thread, start, then longest first) the stack walk's
    parent of an event is the nearest event before it on its thread whose end
    is at least its own. Found for all events at once by binary lifting over a
    table of range maxima of the ends (``log2(n)`` arrays of up to ``n``).
    """
    parent = np.full(len(ts), -1, np.int64)
    n = len(order)
    if n == 0:
        return parent
    e = end[order]
    th = thread[order]
    starts = np.flatnonzero(np.concatenate(([True], th[1:] != th[:-1])))
    first = np.repeat(starts, np.diff(np.append(starts, n)))  # where each event's thread begins in the order
    table = [e]  # table[l][j]: the latest end of positions j .. j + 2**l - 1
    while (1 << len(table)) <= n:
        prev, half = table[-1], 1 << (len(table) - 1)
        table.append(np.maximum(prev[:-half], prev[half:]))
    pos = np.arange(n)
    for lvl in range(len(table) - 1, -1, -1):  # the longest run before each event that ends earlier than it
        j = pos - (1 << lvl)
        ok = j >= first
        ok &= table[lvl][np.where(ok, j, 0)] < e
        pos = np.where(ok, j, pos)
    j = pos - 1
    has = j >= first
    parent[order[has]] = order[j[has]]
    return parent


def parents(thread: np.ndarray, ts: np.ndarray, end: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Immediate enclosing event of each event on the same thread, -1 for roots (kernel or stand-in).

    ``order`` sorts the events by (thread, ts, -end); see :func:`aonkit._kernels.nesting.parents`.
    """
    from .._kernels.nesting import parents as kernel
    from .standin import kernel_or_standin

    return kernel_or_standin(kernel, numpy_parents, thread, ts, end, order)
