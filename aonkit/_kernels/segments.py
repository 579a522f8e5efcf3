"""Flatten each CPU thread's nested events into the sequence of self-time segments (for the dependency graph).

Every instant of a thread between its first start and last end belongs to one
segment: a piece of the innermost open event, or a gap between top-level
events (owner -1). A leaf event always gets a segment, even of zero length
(launch and sync calls need a node). Events must come sorted by (thread,
start, longest first), as :func:`aonkit.analysis.columns.op_stack` orders them;
an event that outlives its parent is cut at the parent's end.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit, njit_inline


@njit_inline
def _close(top, th, cur, k, cut, first, last, s_thread, s_t0, s_t1, s_owner):
    """End the open event ``top``: its last piece (or, a leaf with none yet, a zero-length one); new (k, cur)."""
    if cut[top] > cur or last[top] < 0:
        s_thread[k], s_t0[k], s_t1[k], s_owner[k] = th, cur, cut[top], top
        if first[top] < 0:
            first[top] = k
        last[top] = k
        return k + 1, cut[top]
    return k, cur


@njit
def thread_segments(thread, ts, end):
    """Segments of every thread: ``(seg_thread, seg_t0, seg_t1, seg_owner, first_seg, last_seg)``.

    ``seg_owner`` is the position (in the input order) of the event owning the
    segment, -1 for a gap; ``first_seg[i]`` / ``last_seg[i]`` are the segments
    where event ``i`` starts and ends. Segments come in thread, then time order.
    """
    n = ts.shape[0]
    cap = 3 * n + 1
    s_thread = np.empty(cap, np.int64)
    s_t0 = np.empty(cap, np.int64)
    s_t1 = np.empty(cap, np.int64)
    s_owner = np.empty(cap, np.int64)
    first = np.full(n, -1, np.int64)
    last = np.full(n, -1, np.int64)
    stack = np.empty(n, np.int64)
    cut = np.empty(n, np.int64)  # each event's end, cut at its parent's
    k = 0
    i = 0
    while i < n:
        th = thread[i]
        depth = 0
        cur = ts[i]
        j = i
        while j < n and thread[j] == th:
            t = ts[j]
            while depth > 0 and cut[stack[depth - 1]] <= t:  # close what ended before j starts
                k, cur = _close(stack[depth - 1], th, cur, k, cut, first, last, s_thread, s_t0, s_t1, s_owner)
                depth -= 1
            if t > cur:  # the piece before j: the open event's, or a gap
                owner = stack[depth - 1] if depth > 0 else -1
                s_thread[k], s_t0[k], s_t1[k], s_owner[k] = th, cur, t, owner
                if owner >= 0:
                    if first[owner] < 0:
                        first[owner] = k
                    last[owner] = k
                k += 1
                cur = t
            e = end[j] if end[j] > t else t
            if depth > 0 and e > cut[stack[depth - 1]]:
                e = cut[stack[depth - 1]]
            cut[j] = e
            stack[depth] = j
            depth += 1
            j += 1
        while depth > 0:
            k, cur = _close(stack[depth - 1], th, cur, k, cut, first, last, s_thread, s_t0, s_t1, s_owner)
            depth -= 1
        i = j
    return s_thread[:k], s_t0[:k], s_t1[:k], s_owner[:k], first, last
