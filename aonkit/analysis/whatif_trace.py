"""A what-if's outcome as data: the re-timed trace (to view like any trace) and step times per rank."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..trace import Trace
from .columns import thread_keys
from .depgraph import DepGraph


def call_starts(g: DepGraph, start: np.ndarray, finish: np.ndarray) -> np.ndarray:
    """Each node's start as a call on its thread.

    For a blocking call (a node with a sync edge in) that is the moment its thread reached it (its thread
    predecessor's finish plus the edge's latency), not the wake-up its node starts at.
    """
    out = start.copy()
    dst = np.repeat(np.arange(len(g), dtype=np.int64), np.diff(g.indptr))
    synced = np.zeros(len(g), np.bool_)
    synced[dst[g.edge_kind == 3]] = True
    on_thread = (g.edge_kind == 0) & synced[dst]
    reached = finish[g.src[on_thread]] + g.lat_ns[on_thread]
    np.minimum.at(out, dst[on_thread], reached)
    return out


def event_times(g: DepGraph, n_rows: int, start: np.ndarray, finish: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per event row: re-timed start (first node's start as a call) and end (last node's finish); -1 where no node.

    A blocking call (``cudaDeviceSynchronize`` and the like) starts where its thread reached it and ends when it
    woke (:func:`call_starts`).
    """
    t0 = np.full(n_rows, np.iinfo(np.int64).max, np.int64)
    t1 = np.full(n_rows, -1, np.int64)
    has = g.row >= 0
    start = call_starts(g, start, finish)
    np.minimum.at(t0, g.row[has], start[has])
    np.maximum.at(t1, g.row[has], finish[has])
    t0[t1 < 0] = -1
    return t0, t1


def enclosing_times(ev: pd.DataFrame, moved: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> None:
    """Re-time, in ``t0``/``t1``, the spans outside the graph that enclose moved events of their thread.

    A ``ProfilerStep`` or ``record_function`` annotation is not a graph node;
    it moves with what it encloses: its start by the shift of the first moved
    event of its thread that starts inside it, its end by the shift of the
    last one's end (so its untraced head and tail keep their lengths). Spans
    that enclose nothing moved keep their times (``t1`` stays -1).
    """
    ts, dur = ev["ts_ns"].to_numpy(), ev["dur_ns"].to_numpy()
    span = ~moved & (dur > 0) & (ts != schema.TS_MISSING)
    if not span.any() or not moved.any():
        return
    codes = thread_keys(ev)
    mv = np.flatnonzero(moved)
    mv = mv[np.lexsort((ts[mv], codes[mv]))]  # moved events by thread, then measured start
    mcode, mts = codes[mv], ts[mv]
    for i in np.flatnonzero(span):
        c, a, b = codes[i], ts[i], ts[i] + dur[i]
        lo = np.searchsorted(mcode, c, "left")
        hi = np.searchsorted(mcode, c, "right")
        j0 = lo + np.searchsorted(mts[lo:hi], a, "left")
        j1 = lo + np.searchsorted(mts[lo:hi], b, "left")
        if j0 >= j1:
            continue
        inside = mv[j0:j1]
        first = inside[0]
        last = inside[np.argmax(ts[inside] + dur[inside])]
        t0[i] = a + (t0[first] - ts[first])
        t1[i] = max(b + (t1[last] - (ts[last] + dur[last])), t0[i])


def retimed_trace(trace: Trace, g: DepGraph, start: np.ndarray, finish: np.ndarray) -> Trace:
    """A copy of ``trace`` whose events in the graph carry their re-timed ``ts_ns``/``dur_ns``.

    A CPU event spans its first segment's start to its last segment's finish,
    a GPU event its node; spans outside the graph that enclose graph events of
    their thread (``ProfilerStep``, ``record_function`` annotations) move with
    them (:func:`enclosing_times`); other events (instants, metadata) keep
    their measured times. The copy warns that it is a model.
    """
    t0, t1 = event_times(g, len(trace.events), start, finish)
    graph = t1 >= 0
    enclosing_times(trace.events, graph, t0, t1)
    moved = t1 >= 0
    ev = trace.events.copy()
    ts, dur = ev["ts_ns"].to_numpy().copy(), ev["dur_ns"].to_numpy().copy()
    ts[moved], dur[moved] = t0[moved], t1[moved] - t0[moved]
    ev["ts_ns"], ev["dur_ns"] = ts, dur
    out = Trace(ev, trace.meta, trace._raw, trace.metadata, [*trace.warnings, "re-timed by aonkit.what_if: a model, "
                f"not a measurement ({int(moved.sum())} events moved)"], samples=trace.samples)  # fmt: skip
    return out


def rank_of_nodes(trace: Trace, g: DepGraph) -> np.ndarray:
    """Rank of each node (a job's ``rank`` column; the trace's own rank, else 0); -1 for nodes with no event."""
    if g.rank is not None:  # a job's graph knows its nodes' ranks: no need to read the combined events
        return np.where(g.row >= 0, g.rank, -1)
    ev = trace.events
    own = trace.meta.rank if trace.meta.rank is not None else 0
    ranks = ev["rank"].to_numpy()[np.maximum(g.row, 0)] if "rank" in ev.columns else np.full(len(g), own)
    return np.where(g.row >= 0, ranks, -1)


def per_rank_ns(trace: Trace, g: DepGraph, start: np.ndarray, finish: np.ndarray,
                inside: np.ndarray | None) -> pd.Series:  # fmt: skip
    """Span (first start to last finish) of each rank's nodes in the window (None: all), indexed by rank."""
    rank = rank_of_nodes(trace, g)
    keep = rank >= 0 if inside is None else inside & (rank >= 0)
    df = pd.DataFrame({"rank": rank[keep], "start": start[keep], "finish": finish[keep]})
    agg = df.groupby("rank").agg(start=("start", "min"), finish=("finish", "max"))
    return (agg["finish"] - agg["start"]).rename("step_time_ns")
