"""Call-stack structure from interval nesting."""

from __future__ import annotations

import numpy as np

from ._jit import njit


@njit
def parents(thread, ts, end, order):
    """Immediate enclosing event of each event on the same thread; -1 for roots.

    ``order`` sorts events by (thread, ts, -end) so that a parent precedes its
    children. An event encloses another when it starts no later and ends no
    earlier; partial overlaps (clock noise) are not nesting.
    """
    n = order.shape[0]
    parent = np.full(ts.shape[0], -1, np.int64)
    stack = np.empty(n, np.int64)
    depth = 0
    cur_thread = np.int64(-1)
    for k in range(n):
        i = order[k]
        if k == 0 or thread[i] != cur_thread:
            depth = 0
            cur_thread = thread[i]
        while depth > 0 and end[stack[depth - 1]] < end[i]:
            depth -= 1
        if depth > 0:
            parent[i] = stack[depth - 1]
        stack[depth] = i
        depth += 1
    return parent


@njit
def ancestors(parent, mask, order):
    """Per event: nearest and outermost ancestor-or-self with ``mask`` set (-1 if none).

    ``order`` must list parents before children (the order used by :func:`parents`).
    """
    n = parent.shape[0]
    near = np.full(n, -1, np.int64)
    top = np.full(n, -1, np.int64)
    for k in range(order.shape[0]):
        i = order[k]
        p = parent[i]
        if p >= 0:
            near[i] = near[p]
            top[i] = top[p]
        if mask[i]:
            near[i] = i
            if top[i] < 0:
                top[i] = i
    return near, top
