"""The what-if hot path: a graph numbered in topological order re-timed in one lean pass.

:func:`aonkit._kernels.dag.schedule` writes four arrays per node (start,
finish, critical predecessor and edge). On a job of 12M nodes its time is
the memory traffic, so a slider's re-time uses :func:`finish_times`, which
writes only the finish and scales durations as it goes (per node a rule
code, per code a factor); starts, scaled durations and the critical path
are derived afterwards for the nodes that need them (:func:`path_back`
makes the same choice of edge as :func:`~aonkit._kernels.dag.schedule`).
Nodes are ``0..n-1`` in topological order (:func:`aonkit._kernels.dag.relabel`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .dag import latest_arrival, scaled


@njit
def finish_times(indptr, src, lat, dur, release, code, factor):
    """Finish of every node, with ``dur[v]`` scaled by ``factor[code[v]]``.

    The start of ``v`` is as in :func:`~aonkit._kernels.dag.schedule`: the largest ``finish[src] + lat``
    over its incoming edges, or its release when that is larger or it has none.
    Returns ``(finish, first_start, last_node)``: the smallest start, and the first node with the largest
    finish (-1 and zeros for an empty graph).
    """
    n = dur.shape[0]
    finish = np.empty(n, np.int64)
    first = np.int64(0)
    last = -1
    best = np.int64(0)
    for v in range(n):
        s, _ = latest_arrival(indptr, src, lat, finish, release, v)
        f = s + scaled(dur[v], factor[code[v]])
        finish[v] = f
        if last < 0 or s < first:
            first = s
        if last < 0 or f > best:
            best = f
            last = v
    if last < 0:
        first = 0
    return finish, first, last


@njit
def path_back(indptr, src, lat, release, finish, end):
    """The critical path to ``end`` from a schedule's finish times, in forward order: ``(nodes, edges)``.

    Each node's edge is the one :func:`~aonkit._kernels.dag.schedule` records: the first incoming edge with
    the largest ``finish[src] + lat``, when that is at least the node's release; -1 where the release set the
    start (the path's first node).
    """
    nodes = []
    edges = []
    v = end
    while v >= 0:
        _, ce = latest_arrival(indptr, src, lat, finish, release, v)
        nodes.append(v)
        edges.append(ce)
        v = src[ce] if ce >= 0 else -1
    k = len(nodes)
    out_n = np.empty(k, np.int64)
    out_e = np.empty(k, np.int64)
    for i in range(k):
        out_n[i] = nodes[k - 1 - i]
        out_e[i] = edges[k - 1 - i]
    return out_n, out_e
