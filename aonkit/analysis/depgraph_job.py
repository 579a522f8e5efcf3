"""The dependency graph of a job: each rank's graph built on its own, put on one clock, collectives tied.

Each rank's graph (:func:`aonkit.analysis.depgraph.build_graph`) is built
where the rank is: in worker processes for a large job held in memory (or a
lazily loaded one), so the ranks' events are never combined for the graph.
The graphs are shifted by the ranks' clock offsets
(:func:`aonkit.analysis.collectives.clock_offsets`), their lanes and rows
renumbered as :func:`aonkit.analysis.combine.combine_ranks` numbers them, and
each collective matched across ranks (:func:`aonkit.analysis.comm_match.matched`)
becomes:

- each rank's kernel keeps its start (the rank's *arrival*) and no length;
- a **hub** node, measured at the last arrival, that every arrival leads to;
- per rank a **transfer** node after the hub, as long as the rank's kernel
  outlived the last arrival; whatever followed the kernel now follows it.

So a collective ends when its last rank arrives plus the transfer: a
straggler made faster moves every rank's collective, and a rule on
communication kernels scales the transfers. The job's nodes are numbered
in a topological order that takes each rank's own order in runs
(:func:`aonkit.analysis.depgraph_stitch.stitch`). The median launch delay that a
queued launch's latency is capped at (:mod:`aonkit.analysis.depgraph`) is each
rank's own.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

import numpy as np
import pandas as pd

from .._fresh import Arena, usable_cores
from ..trace import Trace
from .collectives import comm_kernels
from .combine import CombinedLater, combined_categories, pid_names
from .comm_match import assign_keys, clock_keys, matched, offsets
from .depgraph import KIND_HUB, DepGraph, build_graph
from .depgraph_stitch import RankGraph, stitch

PARALLEL_EVENTS = 1_000_000
"""A job held in memory with at least this many events builds its ranks' graphs in worker processes."""
AHEAD_BYTES_PER_EVENT = 110
"""The job graph's bytes per event written ahead (:class:`aonkit._fresh.Arena`): 1.25 nodes of 69 bytes (61
kept, 8 during the stitch) and 1.3 edges of 17, about the median of the shared traces' graphs (0.6-1.8
nodes and 0.6-1.9 edges per event)."""
_FORKED: Mapping[int, Trace] | None = None  # the job the forked workers read


def _graph_part(trace: Trace) -> tuple[DepGraph, int, pd.Index, pd.Index]:
    """One rank's graph as :func:`stitch` reads it (:func:`_slim`), its number of events, its pid and tid categories."""
    ev = trace.events
    g = build_graph(trace, numbered=True)  # numbered in its order: the job's order takes runs of it
    return _slim(g), len(ev), ev["pid"].array.categories, ev["tid"].array.categories


def _slim(g: DepGraph) -> DepGraph:
    """``g`` without what :func:`stitch` does not read, for the trip back from a worker (a third fewer bytes).

    Node and edge kinds as int8 (as the job's are); ``order`` and ``release_ns`` empty: the rank's order is
    ``arange`` after :func:`relabelled`, and the job's releases are made anew from its edges.
    """
    none = np.empty(0, np.int64)
    return dataclasses.replace(g, kind=g.kind.astype(np.int8), edge_kind=g.edge_kind.astype(np.int8), order=none,
                               release_ns=none)  # fmt: skip


def _rank_part(trace: Trace) -> tuple[DepGraph, pd.DataFrame, int, pd.Index, pd.Index]:
    """One rank's graph, its communication kernels, its number of events and its pid and tid categories."""
    g, n, pids, tids = _graph_part(trace)
    return g, comm_kernels(trace), n, pids, tids


def _forked_part(rank: int) -> tuple:
    return _rank_part(_FORKED[rank])  # type: ignore[index]


def _first_here(job: Any, rank: int) -> None:
    """``rank``'s part made in this process before the set's workers are forked: they inherit the Numba kernels.

    Its first call loads Numba and the graph's kernels (about a second), which each worker would otherwise
    load again; the stitch's kernel is loaded too (:func:`_load_stitch`). The part is remembered by the set.
    """
    g, ck, n, pids, tids = _rank_part(job[rank])
    job.remember(_rank_part, {rank: (g, ck, n, pids, tids)})
    job.remember(_graph_part, {rank: (g, n, pids, tids)})
    _load_stitch(g)


def _load_stitch(g: DepGraph) -> None:
    """Load the stitch's kernels in this process: stitch a graph of no nodes with ``g``'s array types."""
    empty = dataclasses.replace(g, **{f.name: v[:0] for f in dataclasses.fields(g)
                                      if isinstance(v := getattr(g, f.name), np.ndarray)})  # fmt: skip
    none = np.full(1, -1, np.int64)
    stitch([RankGraph(empty, 0, 0, 0, 0, none, none)], None)


def _arena(n_events: int) -> Arena | None:
    """Memory for the job graph, written ahead while the parent makes the first rank's part (a core idles)."""
    if usable_cores() < 2:  # no core to spare: the thread would only slow the first rank down
        return None
    need = n_events * AHEAD_BYTES_PER_EVENT
    try:  # never more than a quarter of the memory free now (the rest is written when the graph is)
        ahead = min(need, os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4)
    except (ValueError, OSError):
        ahead = 0
    return Arena.create(ahead, 3 * need) if ahead >= 64 << 20 else None


def _rank_parts(job: Mapping[int, Trace], ranks: list[int]) -> tuple[dict[int, tuple], Arena | None]:
    """Each rank's part: a lazily loaded job's in its workers; a large one in memory's in forked workers.

    Also the arena for the job graph (None: none was worth it), when the parent made a rank's part first.
    """
    from ..lazyset import LazyTraceSet

    global _FORKED
    arena = None
    if isinstance(job, LazyTraceSet):
        if job.client is None and not job.has_workers and len(ranks) > 2:
            arena = _arena(job.n_events)
            with arena.filling() if arena else nullcontext():
                _first_here(job, ranks[0])
        if set(job.remembered(comm_kernels)) >= set(ranks):  # remembered from a load that parsed the ranks
            graphs, comms = job.map(_graph_part), job.map(comm_kernels)
            return {r: (graphs[r][0], comms[r], *graphs[r][1:]) for r in ranks}, arena
        parts = job.map(_rank_part)  # both from one read of each rank's cache
        job.remember(comm_kernels, {r: p[1] for r, p in parts.items()})
        return {r: parts[r] for r in ranks}, arena
    n_events = sum(len(job[r].events) for r in ranks)
    big = n_events >= PARALLEL_EVENTS
    arena = _arena(n_events) if big and len(ranks) > 2 else None
    with arena.filling() if arena else nullcontext():
        out = {ranks[0]: _rank_part(job[ranks[0]])}  # compiles what the workers then inherit
    rest = ranks[1:]
    pool = None
    if big and len(rest) > 1 and sys.platform.startswith("linux") and (os.cpu_count() or 1) > 1:
        from ..lazyjob import new_pool

        _FORKED = job
        pool = new_pool(len(rest), None)
    if pool is None:
        out.update((r, _rank_part(job[r])) for r in rest)
        return out, arena
    from ..lazyjob import run_each

    try:
        with pool:  # the graphs' arrays come back as shared-memory files (run_each, aonkit._shipping)
            out.update(zip(rest, run_each(_forked_part, rest, pool, None)))
    finally:
        _FORKED = None
    return out, arena


def build_job_graph(job: Mapping[int, Trace]) -> tuple[Trace, DepGraph]:
    """The job's combined trace (made when first read) and its dependency graph, collectives tied across ranks."""
    ranks = sorted(job)
    parts, arena = _rank_parts(job, ranks)
    per = {r: parts[r][1] for r in ranks}
    row_base = np.cumsum([0, *(parts[r][2] for r in ranks[:-1])])
    with_rows = {r: ck.assign(row=ck.index.to_numpy(np.int64) + int(b)) for (r, ck), b in zip(per.items(), row_base)}
    m = matched(assign_keys(with_rows)) if with_rows else pd.DataFrame()
    # the clock offsets from the same matching (offsets_from_tables would match the collectives again)
    steps = {r: ck.attrs.get("profiler_steps", {}) for r, ck in per.items()}
    off = offsets(m, steps, min(ranks), clock_keys(job)) if len(ranks) > 1 else pd.Series(0, index=ranks)
    pid_cats = [pd.Index(pid_names(parts[r][3], r)) for r in ranks]
    pids = combined_categories(job, "pid", pid_cats)
    tids = combined_categories(job, "tid", [parts[r][4] for r in ranks])
    rank_graphs = [RankGraph(parts[r][0], r, int(off.get(r, 0)), int(b), parts[r][2],
                             np.append(pids.get_indexer(own), -1), np.append(tids.get_indexer(parts[r][4]), -1))
                   for r, b, own in zip(ranks, row_base, pid_cats)]  # fmt: skip
    g = stitch(rank_graphs, m if (not m.empty and "row" in m) else None, arena)
    if arena is not None:
        arena.trim()
    return CombinedLater(job, off, dict(zip(ranks, row_base.tolist()))), g


__all__ = ["KIND_HUB", "PARALLEL_EVENTS", "build_job_graph"]
