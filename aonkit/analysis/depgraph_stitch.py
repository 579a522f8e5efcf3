"""One job graph from the ranks' graphs: shifted to one clock, numbered as one, collectives tied by hubs.

See :mod:`aonkit.analysis.depgraph_job` for what a hub and a transfer are.
An edge that now leaves a transfer starting at or after its destination's
start is dropped and counted, as one trace's graph drops edges that go back
in measured time: every edge then goes forward in (start, id) order where a
transfer's id is taken after every rank node's, which keeps the graph
acyclic. The job is numbered in a topological order made of runs of each
rank's own order (:func:`_merged`), so the re-time reads memory in order. The
work is done rank by rank into arrays allocated once; the second pass, which
writes each rank's nodes and edges to their places, is a kernel
(:func:`aonkit._kernels.stitch.place_rank`) run for several ranks at once on
threads, so the first touch of the job's new arrays (in ordinary pages:
:mod:`aonkit._fresh`) is shared between cores, unless they come from an
arena whose pages were written ahead (:class:`aonkit._fresh.Arena`).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._fresh import Arena, fresh, fresh_arange
from .depgraph import KIND_GPU, KIND_HUB, DepGraph

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


def _merged(parts: list[RankGraph], kl: list[np.ndarray], js: list[np.ndarray], hub_of_j: np.ndarray,
            size: np.ndarray) -> list[tuple[str, int, int, int]] | None:  # fmt: skip
    """The job's topological order as a list of items; None when the ranks cannot be merged.

    Items: ``("run", r, a, b)`` (rank ``r``'s nodes ``a..b-1``), ``("hub", h, 0, 0)``, ``("tr", j, 0, 0)`` (the
    transfer of tied kernel ``j``).
    Each rank is taken in its own order, each transfer right after its kernel; ranks are visited round-robin,
    each as far as it goes: up to a transfer whose hub waits for a rank that has not arrived. A hub goes
    right before the first transfer that needs it.
    """
    heads, nxt = [0] * len(parts), [0] * len(parts)
    arrived = np.zeros(len(size), np.int64)
    hub_done = np.zeros(len(size), bool)
    counted = np.zeros(len(hub_of_j), bool)
    items: list[tuple[str, int, int, int]] = []
    progress = True
    while progress:
        progress = False
        for r, p in enumerate(parts):
            n_r = len(p.graph)
            while True:
                if nxt[r] == len(kl[r]):
                    if heads[r] < n_r:
                        items.append(("run", r, heads[r], n_r))
                        heads[r], progress = n_r, True
                    break
                x, j = int(kl[r][nxt[r]]), int(js[r][nxt[r]])
                h = int(hub_of_j[j])
                if heads[r] <= x:  # up to and with the kernel: it arrives
                    items.append(("run", r, heads[r], x + 1))
                    heads[r], progress = x + 1, True
                if not counted[j]:
                    arrived[h], counted[j] = arrived[h] + 1, True
                if not hub_done[h]:
                    if arrived[h] < size[h]:
                        break
                    items.append(("hub", h, 0, 0))
                    hub_done[h] = True
                items.append(("tr", j, 0, 0))
                nxt[r] += 1
                progress = True
    if any(heads[r] < len(p.graph) or nxt[r] < len(kl[r]) for r, p in enumerate(parts)):
        return None
    return items


def _place(p: RankGraph, nw: np.ndarray, arrivals: np.ndarray, transfers: np.ndarray, drops: np.ndarray,
           out: tuple) -> None:  # fmt: skip
    """Rank ``p``'s nodes to ids ``nw`` and its kept edges to their places in ``out`` (:func:`place_rank`)."""
    from .._kernels.inputs import frozen
    from .._kernels.stitch import place_rank

    g = p.graph
    moved = np.full(len(g), -1, np.int64)
    moved[arrivals] = transfers
    keep = np.ones(len(g.src), np.bool_)
    keep[drops] = False
    meta = np.array([p.row_base, p.shift_ns, p.rank], np.int64)
    f = frozen
    place_rank(f(nw, np.int64), f(moved), f(keep), f(g.kind, np.int8), f(g.row, np.int64), f(g.lane, np.int64),
               f(g.start_ns, np.int64), f(g.dur_ns, np.int64), f(g.indptr, np.int64), f(g.src, np.int64),
               f(g.lat_ns, np.int64), f(g.edge_kind, np.int8), f(p.pid_map, np.int64), f(p.tid_map, np.int64),
               f(meta), *out)  # fmt: skip


def stitch(parts: list[RankGraph], m: pd.DataFrame | None, arena: Arena | None = None) -> DepGraph:
    """The job graph of the ranks' graphs (see the module doc); ``m``: matched collectives (combined rows), or None.

    ``arena``: where the job's arrays are taken from (:class:`aonkit._fresh.Arena`); else new ordinary pages.

    The ranks' graphs must be numbered in topological order. The job's nodes are numbered in the order of
    :func:`_merged` (topological, each rank's nodes in runs), so no renumbering follows; should the ranks not
    merge, they are numbered rank by rank and ``order`` comes from :func:`aonkit._kernels.dag.topo_order`.
    """
    from .._kernels.dag import NO_RELEASE, topo_order

    base = np.cumsum([0, *(len(p.graph) for p in parts)]).astype(np.int64)
    n0 = int(base[-1])
    e = np.zeros(0, np.int64)
    k, which, hub_of, transfer, hub_ids, last, size, k_end = (e, e, e, e, e, e, e, e)
    if m is not None and len(m):
        k, which, hub_of, transfer, hub_ids, last, size, k_end = _hubs(parts, base, m)
    last_of_k = np.repeat(last, size)
    hub_index = np.repeat(np.arange(len(size)), size)  # per tied kernel j: its collective
    n_new = len(hub_ids) + len(k)
    n = n0 + n_new
    # pass 1, per rank: its tied kernels (local ids, in order) and the edges that now go back in time
    kl, js, drops = [], [], []
    for i, p in enumerate(parts):
        g = p.graph
        j = np.flatnonzero(which == i)
        j = j[np.argsort(k[j], kind="stable")]
        kl.append(k[j] - base[i]), js.append(j)
        moved = np.full(len(g), -1, np.int64)
        moved[kl[-1]] = j
        hit = np.flatnonzero(moved[g.src] >= 0)
        dst = np.searchsorted(g.indptr, hit, "right") - 1
        t_start = last_of_k[moved[g.src[hit]]]
        drops.append(hit[t_start >= g.start_ns[dst] - p.shift_ns])  # a transfer's id exceeds theirs: ties too
    items = _merged(parts, kl, js, hub_index, size)
    topological = items is not None
    if items is None:  # clock garbage: rank by rank, then the collectives, ordered below
        items = [("run", r, 0, len(p.graph)) for r, p in enumerate(parts)]
        items += [x for h in range(len(size)) for x in [("hub", h, 0, 0)] + [("tr", int(j), 0, 0)
                  for j in np.flatnonzero(hub_index == h)]]  # fmt: skip
    # new ids, in item order
    hub_new, tr_new = np.empty(len(size), np.int64), np.empty(len(k), np.int64)
    runs: list[list[tuple[int, int, int]]] = [[] for _ in parts]
    at = 0
    for what, x, a, b in items:
        if what == "run":
            runs[x].append((a, b, at))
            at += b - a
        elif what == "hub":
            hub_new[x], at = at, at + 1
        else:
            tr_new[x], at = at, at + 1
    k_new = np.empty(len(k), np.int64)
    indptr = fresh(n + 1, np.int64, arena)
    counts = indptr[1:]  # each node's count, then summed in place
    new_all = fresh(n0, np.int64, arena)  # each rank node's new id, rank by rank; written run by run, no temporaries
    ids = np.arange(max((len(p.graph) for p in parts), default=0), dtype=np.int64)
    for i, p in enumerate(parts):
        g = p.graph
        local_new = new_all[base[i] : base[i + 1]]
        for a, b, at in runs[i]:
            np.add(ids[a:b], at - a, out=local_new[a:b])
        k_new[js[i]] = local_new[kl[i]]
        c = np.diff(g.indptr)
        if len(drops[i]):
            np.subtract.at(c, np.searchsorted(g.indptr, drops[i], "right") - 1, 1)
        counts[local_new] = c
    counts[hub_new] = size
    counts[tr_new] = 1
    np.cumsum(counts, out=counts)
    m_edges = int(indptr[-1])
    kind, row, lane = fresh(n, np.int8, arena), fresh(n, np.int64, arena), fresh(n, np.int64, arena)
    start, dur, release = fresh(n, np.int64, arena), fresh(n, np.int64, arena), fresh(n, np.int64, arena)
    rank = fresh(n, np.int32, arena)
    src, lat = fresh(m_edges, np.int64, arena), fresh(m_edges, np.int64, arena)
    edge_kind = fresh(m_edges, np.int8, arena)
    dropped = sum(p.graph.dropped_edges + len(d) for p, d in zip(parts, drops))
    out = (indptr, kind, row, lane, start, dur, release, rank, src, lat, edge_kind)
    # pass 2, per rank: nodes and edges to their new places (threads: each first-touches what it writes)
    with ThreadPoolExecutor(min(len(parts), os.cpu_count() or 1) or 1) as pool:
        list(pool.map(lambda i: _place(parts[i], new_all[base[i] : base[i + 1]], kl[i], tr_new[js[i]], drops[i], out),
                      range(len(parts))))
    if arena is not None:
        arena.give_back(new_all)
    if len(k):  # hubs (arrivals in) and transfers (the hub in)
        kind[hub_new], row[hub_new], lane[hub_new], rank[hub_new] = KIND_HUB, -1, -1, -1
        start[hub_new], dur[hub_new] = last, 0
        kind[tr_new], row[tr_new], lane[tr_new], rank[tr_new] = KIND_GPU, row[k_new], lane[k_new], rank[k_new]
        start[tr_new], dur[tr_new] = last_of_k, np.maximum(0, k_end - last_of_k)
        member = transfer - hub_of - 1
        src[indptr[hub_new[hub_index]] + member] = k_new
        src[indptr[tr_new]] = hub_new[hub_index]
        for arr, v in ((lat, 0), (edge_kind, EDGE_COLLECTIVE)):
            arr[indptr[hub_new[hub_index]] + member] = v
            arr[indptr[tr_new]] = v
    if len(k):
        release[hub_new], release[tr_new] = NO_RELEASE, NO_RELEASE
    if topological:
        order = fresh_arange(n, arena)
    else:
        order, ok = topo_order(n, indptr, src)
        assert ok  # the forward rule keeps the graph acyclic
    return DepGraph(kind, row, lane, start, dur, release, indptr, src, lat, edge_kind, order, dropped, rank)
