"""Dependency-graph kernels for critical-path and what-if analysis.

A graph has ``n`` nodes with a duration ``dur[n]`` (int64 ns, >= 0) and an
earliest start ``release[n]`` (int64 ns; :data:`NO_RELEASE` when none). Edges
are stored **by destination** (CSR of incoming edges): the edges into ``v`` are
``indptr[v]:indptr[v + 1]``, with source ``src[e]`` and latency ``lat[e]`` (>= 0);
:func:`csr_by_dst` builds it from an edge list. Then::

    start[v] = max(release[v], max over edges e into v of finish[src[e]] + lat[e])
    finish[v] = start[v] + dur[v]

Every kernel is sequential, so results do not depend on thread count or CPU. A schedule touches
each node and edge once: with nodes numbered topologically (by start time, or after :func:`relabel`)
it reads memory sequentially, ~20 ms for 1M nodes and 3M edges on the 2-core dev machine, against
~140 ms with a random numbering, where every access misses the cache.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit, njit_inline

NO_RELEASE = np.int64(-(2**62))  # "no release": very negative, yet far from overflow when added to
UNSET = np.int64(-(2**63))  # start/finish/latest start of a node that a partial order did not reach


@njit
def csr_by_dst(n, src, dst, lat):
    """CSR of incoming edges by a stable counting sort on ``dst``.

    Returns ``(indptr[n + 1], src_sorted, lat_sorted, order_of_edges)``; ``order_of_edges[k]`` is the
    input index of sorted edge ``k``, and the edges into one node keep their input order.
    Raises ValueError on a node id outside ``[0, n)``.
    """
    m = dst.shape[0]
    indptr = np.zeros(n + 1, np.int64)
    for e in range(m):
        if dst[e] < 0 or dst[e] >= n or src[e] < 0 or src[e] >= n:
            raise ValueError("csr_by_dst: edge endpoint outside [0, n)")
        indptr[dst[e] + 1] += 1
    for v in range(n):
        indptr[v + 1] += indptr[v]
    fill = indptr[:n].copy()
    src_sorted = np.empty(m, np.int64)
    lat_sorted = np.empty(m, np.int64)
    order_of_edges = np.empty(m, np.int64)
    for e in range(m):
        k = fill[dst[e]]
        fill[dst[e]] = k + 1
        src_sorted[k] = src[e]
        lat_sorted[k] = lat[e]
        order_of_edges[k] = e
    return indptr, src_sorted, lat_sorted, order_of_edges


@njit
def _heap_push(heap, size, x):
    i = size
    while i > 0 and heap[(i - 1) >> 1] > x:
        heap[i] = heap[(i - 1) >> 1]
        i = (i - 1) >> 1
    heap[i] = x


@njit
def _heap_pop(heap, size):
    """Smallest of ``heap[:size]``, which then holds ``size - 1`` entries."""
    top = heap[0]
    x = heap[size - 1]
    i = 0
    while 2 * i + 1 < size - 1:
        c = 2 * i + 1
        if c + 1 < size - 1 and heap[c + 1] < heap[c]:
            c += 1
        if heap[c] >= x:
            break
        heap[i] = heap[c]
        i = c
    heap[i] = x
    return top


@njit
def topo_order(n, indptr, nbr):
    """Topological order of the graph given as CSR of incoming edges (``nbr`` = sources), by Kahn's algorithm.

    Deterministic: the ready node with the smallest index goes next (a min-heap), which makes this the
    lexicographically smallest topological order, ``arange(n)`` itself when the numbering is topological
    already (nodes numbered by start time), so that a schedule then reads memory sequentially.
    Returns ``(order[n], ok)``; on a cycle ``ok`` is False and ``order`` holds the nodes that could be
    ordered followed by -1s.
    """
    dst = np.empty(indptr[n], np.int64)
    for v in range(n):
        dst[indptr[v] : indptr[v + 1]] = v
    out_ptr, succ, _, _ = csr_by_dst(n, dst, nbr, dst)  # the transpose: successors of each node
    indeg = indptr[1:] - indptr[:n]
    heap = np.empty(n, np.int64)
    size = np.int64(0)  # not Literal[int](0): one compilation of the heap helpers
    for v in range(n):
        if indeg[v] == 0:
            _heap_push(heap, size, v)
            size += 1
    order = np.full(n, -1, np.int64)
    done = 0
    while size > 0:
        u = _heap_pop(heap, size)
        size -= 1
        order[done] = u
        done += 1
        for k in range(out_ptr[u], out_ptr[u + 1]):
            w = succ[k]
            indeg[w] -= 1
            if indeg[w] == 0:
                _heap_push(heap, size, w)
                size += 1
    return order, done == n


@njit
def relabel(order, indptr_in, src_in, lat_in):
    """The graph renumbered so that node ``order[i]`` becomes ``i`` (then ``arange(n)`` is a topological order).

    Returns ``(indptr, src, lat, edge_of)``, ``edge_of[k]`` the input CSR index of new edge ``k``; the edges
    into a node keep their order. Permute node arrays with ``x[order]``; results map back with
    ``out[order] = x`` and node ids with ``order[id]``. Worth it before retiming a large, randomly numbered
    graph many times (see the module's speed note). ``order`` must be complete.
    """
    n = order.shape[0]
    pos = np.full(n, -1, np.int64)
    for i in range(n):
        if order[i] < 0 or order[i] >= n or pos[order[i]] >= 0:
            raise ValueError("relabel: order is not a permutation of the nodes")
        pos[order[i]] = i
    m = indptr_in[n]
    indptr = np.empty(n + 1, np.int64)
    src = np.empty(m, np.int64)
    lat = np.empty(m, np.int64)
    edge_of = np.empty(m, np.int64)
    indptr[0] = 0
    k = 0
    for i in range(n):
        v = order[i]
        for e in range(indptr_in[v], indptr_in[v + 1]):
            src[k] = pos[src_in[e]]
            lat[k] = lat_in[e]
            edge_of[k] = e
            k += 1
        indptr[i + 1] = k
    return indptr, src, lat, edge_of


@njit_inline  # in the re-time's per-node loop: as a call it made the lean pass 1.8x slower (bench/RESULTS.md)
def scaled(d, f):
    """``d`` times factor ``f``: an IEEE float64 product rounded half to even; ``d`` itself when ``f`` is 1."""
    return d if f == 1.0 else np.int64(np.rint(np.float64(d) * f))


@njit
def scale_each(dur, factor):
    """Durations times per-node factors: ``rint(dur[v] * factor[v])``, ``dur[v]`` itself where the factor is 1.

    The product is an IEEE float64 multiplication rounded half to even (what ``np.rint`` gives); an untouched
    duration keeps every bit, even beyond 2**53 ns.
    """
    out = np.empty(dur.shape[0], np.int64)
    for v in range(dur.shape[0]):
        out[v] = scaled(dur[v], factor[v])
    return out


@njit_inline  # as scaled: inlined into schedule, finish_times and path_back
def latest_arrival(indptr, src, lat, finish, release, v):
    """``(start, edge)`` of node ``v`` once its predecessors have finished.

    The start is the largest ``finish[src] + lat`` over its incoming edges, and the edge the first such one in
    CSR order, when that is at least the release; else ``(release, -1)``. A predecessor beats an equal release.
    """
    s = release[v] - 1  # one below the release, so that an edge arriving exactly at it wins
    ce = -1
    for e in range(indptr[v], indptr[v + 1]):
        t = finish[src[e]] + lat[e]
        if t > s:
            s = t
            ce = e
    if ce < 0:
        s += 1
    return s, ce


@njit
def schedule(order, indptr_in, src_in, lat_in, dur, release):
    """Earliest start and finish of each node, in one pass over a topological ``order``.

    Returns ``(start, finish, crit_pred, crit_edge)``: ``crit_edge[v]`` is the CSR index of the incoming
    edge whose ``finish[src] + lat`` set ``start[v]`` and ``crit_pred[v]`` its source, both -1 when the
    release did or ``v`` has no incoming edge. Ties: a predecessor beats an equal release, and the first
    such edge in CSR order wins (the input edge order with :func:`csr_by_dst`; kept by :func:`relabel`).
    ``order`` may be a partial order from :func:`topo_order` (it stops at the first -1): nodes it does
    not reach get ``start = finish =`` :data:`UNSET` and -1 links. ``release`` must exceed :data:`UNSET`.
    """
    n = dur.shape[0]
    partial = n > 0 and (order.shape[0] < n or order[n - 1] < 0)  # then prefill what the order will not reach
    start = np.full(n, UNSET, np.int64) if partial else np.empty(n, np.int64)
    finish = np.full(n, UNSET, np.int64) if partial else np.empty(n, np.int64)
    crit_pred = np.full(n, -1, np.int64) if partial else np.empty(n, np.int64)
    crit_edge = np.full(n, -1, np.int64) if partial else np.empty(n, np.int64)
    for i in range(order.shape[0]):
        v = order[i]
        if v < 0:
            break
        s, ce = latest_arrival(indptr_in, src_in, lat_in, finish, release, v)
        start[v] = s
        finish[v] = s + dur[v]
        crit_pred[v] = src_in[ce] if ce >= 0 else -1
        crit_edge[v] = ce
    return start, finish, crit_pred, crit_edge


@njit
def critical_path(finish, crit_pred, end_node=-1):
    """Nodes from a source to ``end_node`` following ``crit_pred`` back, in forward order.

    ``end_node=-1`` picks the node with the latest finish (the smallest index on a tie); empty graph: empty.
    """
    n = finish.shape[0]
    if n == 0:
        return np.empty(0, np.int64)
    v = end_node
    if v >= n:
        raise ValueError("critical_path: end_node outside the graph")
    if v < 0:
        v = 0
        for u in range(1, n):
            if finish[u] > finish[v]:
                v = u
    k = 1
    u = v
    while crit_pred[u] >= 0 and k <= n:  # k bounds the walk should crit_pred hold a cycle
        u = crit_pred[u]
        k += 1
    k = min(k, n)
    path = np.empty(k, np.int64)
    u = v
    for i in range(k - 1, -1, -1):
        path[i] = u
        u = crit_pred[u]
    return path


@njit
def slack(order, indptr_in, src_in, lat_in, dur, start, finish):
    """Latest start of each node that does not delay the last finish, and its slack, by a backward pass.

    Returns ``(latest_start, slack)`` with ``slack = latest_start - start`` (>= 0; 0 on the critical path).
    Releases only bound starts from below, so they do not enter. Nodes not in ``order`` get :data:`UNSET`.
    """
    n = dur.shape[0]
    horizon = UNSET
    for v in range(n):
        horizon = max(horizon, finish[v])
    latest_finish = np.full(n, horizon, np.int64)
    latest_start = np.full(n, UNSET, np.int64)
    sl = np.full(n, UNSET, np.int64)
    done = 0
    while done < order.shape[0] and order[done] >= 0:
        done += 1
    for i in range(done - 1, -1, -1):
        w = order[i]
        ls = latest_finish[w] - dur[w]
        latest_start[w] = ls
        sl[w] = ls - start[w]
        for e in range(indptr_in[w], indptr_in[w + 1]):
            u = src_in[e]
            latest_finish[u] = min(latest_finish[u], ls - lat_in[e])
    return latest_start, sl
