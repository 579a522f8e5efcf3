"""One job graph from the ranks' graphs: shifted to one clock, numbered as one, collectives tied by hubs.

See :mod:`aonkit.analysis.depgraph_job` for what a hub and a transfer are.
Node ids: the ranks' nodes in rank order, then per collective its hub and
its transfers. Every edge still goes forward in measured (start, node id)
order, which keeps the graph acyclic: an edge that now leaves a transfer
starting after its destination is dropped and counted, as in one trace's
graph. The work is done rank by rank into arrays allocated once, so that
each step runs over one rank's arrays while they are in cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .depgraph import KIND_CPU, KIND_GAP, KIND_GPU, KIND_HUB, DepGraph

EDGE_COLLECTIVE = 5


@dataclass
class RankGraph:
    """A rank's graph and how it enters the job's: clock shift, first event row, lane maps."""

    graph: DepGraph
    rank: int
    shift_ns: int
    row_base: int
    n_events: int
    pid_map: np.ndarray  # the rank's pid code -> the combined trace's (a trailing -1 for a missing pid)
    tid_map: np.ndarray

    def lanes(self) -> np.ndarray:
        """The nodes' lanes as the combined trace numbers them (streams get the rank in bits 48 and up)."""
        g = self.graph
        lane = g.lane.copy()
        cpu = ((g.kind == KIND_CPU) | (g.kind == KIND_GAP)) & (lane != -1)
        p, t = lane[cpu] >> 32, lane[cpu] & 0xFFFFFFFF
        t = np.where(t >= len(self.tid_map) - 1, -1, t)
        lane[cpu] = (self.pid_map[p].astype(np.int64) << 32) | self.tid_map[t].astype(np.int64)
        gpu = g.kind == KIND_GPU
        lane[gpu] = lane[gpu] | (np.int64(self.rank) << 48)
        return lane


def _hubs(parts: list[RankGraph], base: np.ndarray, m: pd.DataFrame) -> tuple:
    """The collectives to tie: those whose kernels are all graph nodes.

    Returns, per kernel grouped by collective: its global node, rank index, hub and transfer; per hub: its id,
    last arrival and number of kernels; and per kernel its measured end on the job's clock.
    """
    rows = m["row"].to_numpy(np.int64)
    bases = np.array([p.row_base for p in parts], np.int64)
    which = np.searchsorted(bases, rows, "right") - 1
    k = np.full(len(rows), -1, np.int64)
    for i, p in enumerate(parts):
        sel = np.flatnonzero(which == i)
        if not len(sel):
            continue
        g = p.graph
        node_of_row = np.full(p.n_events, -1, np.int64)
        gpu = np.flatnonzero(g.kind == KIND_GPU)
        node_of_row[g.row[gpu]] = gpu
        local = node_of_row[rows[sel] - p.row_base]
        k[sel] = np.where(local >= 0, local + base[i], -1)
    codes, _ = pd.MultiIndex.from_arrays([m["group"], m["seq"]]).factorize()  # first-appearance order
    bad = np.zeros(codes.max() + 2 if len(codes) else 1, bool)
    bad[codes[k < 0]] = True
    keep = ~bad[codes] & (codes >= 0)  # a group with a kernel outside the graph is not tied
    order = np.flatnonzero(keep)[np.argsort(codes[keep], kind="stable")]  # by group, members in m's order
    codes, k, which = codes[order], k[order], which[order]
    first = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else np.zeros(0, np.int64)
    size = np.diff(np.r_[first, len(codes)]).astype(np.int64)
    hub_ids = base[-1] + np.cumsum(np.r_[0, 1 + size[:-1]]).astype(np.int64) if len(size) else size
    hub_of = np.repeat(hub_ids, size)
    transfer = hub_of + 1 + (np.arange(len(codes)) - np.repeat(first, size))
    start, end = np.empty(len(k), np.int64), np.empty(len(k), np.int64)
    for i, p in enumerate(parts):
        sel = which == i
        local = k[sel] - base[i]
        start[sel] = p.graph.start_ns[local] - p.shift_ns
        end[sel] = start[sel] + p.graph.dur_ns[local]
    last = np.maximum.reduceat(start, first) if len(first) else np.zeros(0, np.int64)
    return k, which, hub_of, transfer, hub_ids, last, size, end


def stitch(parts: list[RankGraph], m: pd.DataFrame | None) -> DepGraph:
    """The job graph of the ranks' graphs (see the module doc); ``m``: matched collectives (combined rows), or None."""
    from .._kernels.dag import NO_RELEASE, merge_order, topo_order

    base = np.cumsum([0, *(len(p.graph) for p in parts)]).astype(np.int64)
    n0 = int(base[-1])
    e = np.zeros(0, np.int64)
    k, which, hub_of, transfer, hub_ids, last, size, k_end = (e, e, e, e, e, e, e, e)
    if m is not None and len(m):
        k, which, hub_of, transfer, hub_ids, last, size, k_end = _hubs(parts, base, m)
    last_of_k = np.repeat(last, size)
    n_new = len(hub_ids) + len(k)
    n = n0 + n_new
    m_edges = sum(len(p.graph.src) for p in parts) + 2 * len(k)
    kind, row, lane = np.empty(n, np.int8), np.empty(n, np.int64), np.empty(n, np.int64)
    start, dur, release = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    rank = np.empty(n, np.int32)
    indptr, src = np.empty(n + 1, np.int64), np.empty(m_edges, np.int64)
    lat, edge_kind = np.empty(m_edges, np.int64), np.empty(m_edges, np.int8)
    seq = np.empty(n0 + len(k), np.int64)
    seq_ptr = np.zeros(len(parts) + 1, np.int64)
    dropped, e_at, s_at = 0, 0, 0
    for i, p in enumerate(parts):
        g, lo, hi = p.graph, int(base[i]), int(base[i + 1])
        mine = which == i
        kl, tl = k[mine] - lo, transfer[mine]
        moved = np.full(len(g), -1, np.int64)
        moved[kl] = tl
        # what followed a kernel now follows its transfer; an edge that then goes back in time is dropped
        s_glob = g.src + lo
        hit = np.flatnonzero(moved[g.src] >= 0)
        s_glob[hit] = moved[g.src[hit]]
        keep = np.ones(len(g.src), bool)
        if len(hit):
            dst = np.searchsorted(g.indptr, hit, "right") - 1
            t_start = last_of_k[np.searchsorted(transfer, s_glob[hit])]
            keep[hit[t_start >= g.start_ns[dst] - p.shift_ns]] = False  # a transfer's id exceeds theirs: ties too
        n_keep = int(keep.sum())
        if n_keep == len(keep):  # nothing dropped: plain copies
            cum = g.indptr
            src[e_at:e_at + n_keep], lat[e_at:e_at + n_keep] = s_glob, g.lat_ns
            edge_kind[e_at:e_at + n_keep] = g.edge_kind
        else:
            cum = np.r_[0, np.cumsum(keep)][g.indptr]
            src[e_at:e_at + n_keep], lat[e_at:e_at + n_keep] = s_glob[keep], g.lat_ns[keep]
            edge_kind[e_at:e_at + n_keep] = g.edge_kind[keep]
        indptr[lo:hi] = cum[:-1] + e_at
        dropped += g.dropped_edges + len(g.src) - n_keep
        e_at += n_keep
        kind[lo:hi], row[lo:hi], lane[lo:hi] = g.kind, np.where(g.row >= 0, g.row + p.row_base, -1), p.lanes()
        start[lo:hi], dur[lo:hi], rank[lo:hi] = g.start_ns - p.shift_ns, g.dur_ns, p.rank
        dur[kl + lo] = 0  # an arrival has no length: the transfer has what the kernel outlived the last arrival
        no_pred = cum[1:] == cum[:-1]
        release[lo:hi] = np.where(no_pred, start[lo:hi], NO_RELEASE)
        # the rank's order, each transfer right after its kernel
        pos = np.empty(len(g), np.int64)
        pos[g.order] = np.arange(len(g))
        at = np.argsort(pos[kl], kind="stable")
        seq[s_at:s_at + len(g) + len(kl)] = np.insert(g.order + lo, pos[kl][at] + 1, tl[at])
        s_at += len(g) + len(kl)
        seq_ptr[i + 1] = s_at
    if len(k):  # hubs (arrivals in) and transfers (the hub in), after the ranks' nodes
        is_hub = np.zeros(n_new, bool)
        is_hub[hub_ids - n0] = True
        kind[n0:], row[n0:], lane[n0:], rank[n0:] = np.where(is_hub, KIND_HUB, KIND_GPU), -1, -1, -1
        start[n0:], dur[n0:], release[n0:] = np.repeat(last, 1 + size), 0, NO_RELEASE
        t = transfer - n0
        row[transfer], lane[transfer], rank[transfer] = row[k], lane[k], rank[k]
        dur[transfer] = np.maximum(0, k_end - last_of_k)
        counts = np.ones(n_new, np.int64)
        counts[hub_ids - n0] = size
        slot = e_at + np.r_[0, np.cumsum(counts)[:-1]]
        src[slot[hub_of - n0] + (transfer - hub_of - 1)] = k
        src[slot[t]] = hub_of
        lat[e_at:e_at + 2 * len(k)], edge_kind[e_at:e_at + 2 * len(k)] = 0, EDGE_COLLECTIVE
        indptr[n0:n] = slot
        e_at += 2 * len(k)
    indptr[n] = e_at
    src, lat, edge_kind = src[:e_at], lat[:e_at], edge_kind[:e_at]
    order, ok = merge_order(n, indptr, src, seq_ptr, seq, kind == KIND_HUB)
    if not ok:  # the ranks' orders do not merge (clock garbage): order the whole graph
        order, ok = topo_order(n, indptr, src)
        assert ok  # the forward rule keeps the graph acyclic
    return DepGraph(kind, row, lane, start, dur, release, indptr, src, lat, edge_kind, order, dropped, rank)
