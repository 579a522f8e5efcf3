"""Which step each node of a dependency graph belongs to (:mod:`aonkit.analysis.whatif_steps`).

Two passes over a graph of millions of nodes (a 64-rank job: 12M) that numpy
would make in a dozen whole-array temporaries: the window each node starts
in, by binary search in its rank's windows, then launches and collectives
followed in topological order.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit


@njit
def window_steps(rank, start, dur, is_gap, rank_lo, rank_hi, w_ts, w_end, w_step):
    """Per node, the step of its rank's window it starts in (-1: none).

    Windows are sorted by rank, then start; ``rank_lo[r]:rank_hi[r]`` are rank ``r``'s. A node is in the last
    of its rank's windows that starts at or before it when it starts before that window's end; a gap node
    (``is_gap``) that runs past the end is in none.
    """
    n = rank.shape[0]
    out = np.full(n, -1, np.int64)
    for v in range(n):
        r = rank[v]
        if r < 0 or r >= rank_lo.shape[0]:
            continue
        lo, hi = rank_lo[r], rank_hi[r]
        s = start[v]
        while lo < hi:  # first window starting after s
            mid = (lo + hi) >> 1
            if w_ts[mid] <= s:
                lo = mid + 1
            else:
                hi = mid
        j = lo - 1
        if j < rank_lo[r]:
            continue
        end = w_end[j]
        if s < end and not (is_gap[v] and s + dur[v] > end):
            out[v] = w_step[j]
    return out


@njit
def follow_launches(order, indptr, src, edge_kind, kind, step, launch_edge, coll_edge, gpu_kind, hub_kind):
    """``step`` with each GPU event moved to its launch's step and each collective to its arrivals'.

    In topological ``order``: a GPU node with a ``launch_edge`` takes its source's step; a hub the largest
    step of the nodes that arrive at it (``coll_edge`` into it); a GPU node fed by a hub (a transfer) the
    hub's. Other nodes keep theirs. Returns a new array.
    """
    out = step.copy()
    for i in range(order.shape[0]):
        v = order[i]
        k = kind[v]
        if k == hub_kind:
            best = np.int64(-1)
            for e in range(indptr[v], indptr[v + 1]):
                if edge_kind[e] == coll_edge and out[src[e]] > best:
                    best = out[src[e]]
            out[v] = best
        elif k == gpu_kind:
            for e in range(indptr[v], indptr[v + 1]):
                ek = edge_kind[e]
                if ek == launch_edge or (ek == coll_edge and kind[src[e]] == hub_kind):
                    out[v] = out[src[e]]
                    break
    return out


@njit
def group_span(code, n_groups, start, finish):
    """Per group ``0..n_groups-1``, the smallest ``start`` and largest ``finish`` of its nodes.

    ``code``: each node's group (-1: none). A group with no node keeps int64 max and min.
    """
    lo = np.full(n_groups, np.iinfo(np.int64).max, np.int64)
    hi = np.full(n_groups, np.iinfo(np.int64).min, np.int64)
    for v in range(code.shape[0]):
        c = code[v]
        if c < 0:
            continue
        if start[v] < lo[c]:
            lo[c] = start[v]
        if finish[v] > hi[c]:
            hi[c] = finish[v]
    return lo, hi


@njit
def latest_other_end(key, end, lane, group_lo, group_hi, cand_lane, lo, hi):
    """Per query, the position of the event that ends last in ``[lo, hi]`` on a lane other than ``cand_lane``.

    Events are sorted by ``key`` (a device), then ``end``; query ``q`` searches positions
    ``group_lo[q]:group_hi[q]`` (its device's). Returns -1 where there is none.
    """
    out = np.full(cand_lane.shape[0], -1, np.int64)
    for q in range(cand_lane.shape[0]):
        a, b = group_lo[q], group_hi[q]
        while a < b:  # first position ending after hi[q]
            mid = (a + b) >> 1
            if end[mid] <= hi[q]:
                a = mid + 1
            else:
                b = mid
        p = a - 1
        while p >= group_lo[q] and end[p] >= lo[q]:
            if lane[p] != cand_lane[q]:
                out[q] = p
                break
            p -= 1
    return out
