"""A what-if's outcome as data: the re-timed trace (to view like any trace) and step times per rank."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Trace
from .depgraph import DepGraph


def event_times(g: DepGraph, n_rows: int, start: np.ndarray, finish: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per event row: re-timed start (first node's start) and end (last node's finish); -1 where no node."""
    t0 = np.full(n_rows, np.iinfo(np.int64).max, np.int64)
    t1 = np.full(n_rows, -1, np.int64)
    has = g.row >= 0
    np.minimum.at(t0, g.row[has], start[has])
    np.maximum.at(t1, g.row[has], finish[has])
    t0[t1 < 0] = -1
    return t0, t1


def retimed_trace(trace: Trace, g: DepGraph, start: np.ndarray, finish: np.ndarray) -> Trace:
    """A copy of ``trace`` whose events in the graph carry their re-timed ``ts_ns``/``dur_ns``.

    A CPU event spans its first segment's start to its last segment's finish,
    a GPU event its node; events outside the graph (instants, annotations,
    metadata) keep their measured times. The copy warns that it is a model.
    """
    t0, t1 = event_times(g, len(trace.events), start, finish)
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
    ev = trace.events
    own = trace.meta.rank if trace.meta.rank is not None else 0
    ranks = ev["rank"].to_numpy()[np.maximum(g.row, 0)] if "rank" in ev.columns else np.full(len(g), own)
    return np.where(g.row >= 0, ranks, -1)


def per_rank_ns(trace: Trace, g: DepGraph, start: np.ndarray, finish: np.ndarray,
                inside: np.ndarray) -> pd.Series:  # fmt: skip
    """Span (first start to last finish) of each rank's nodes in the window, indexed by rank."""
    rank = rank_of_nodes(trace, g)
    keep = inside & (rank >= 0)
    df = pd.DataFrame({"rank": rank[keep], "start": start[keep], "finish": finish[keep]})
    agg = df.groupby("rank").agg(start=("start", "min"), finish=("finish", "max"))
    return (agg["finish"] - agg["start"]).rename("step_time_ns")
