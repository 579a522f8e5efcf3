"""Critical path and what-if of one trace, on its dependency graph (:mod:`aonkit.analysis.depgraph`).

>>> r = what_if(trace, [Rule(0.5, gpu_class="communication")], step=3)   # doctest: +SKIP
>>> r.step_time_ns, r.speedup, r.critical_path.head()                   # doctest: +SKIP

The graph is built once per trace (or job) and kept; a what-if re-times it in
one pass of :func:`aonkit._kernels.dag.schedule` over nodes numbered in
topological order. The edges are listed in :mod:`aonkit.analysis.depgraph`;
a job's ranks are tied at their matched collectives (:mod:`aonkit.analysis.depgraph_job`).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace import Trace
from .columns import names_of
from .depgraph import KIND_CPU, KIND_GAP, KIND_GPU, KIND_HUB, KIND_NAMES, DepGraph, build_graph
from .memo import remembered_object


@dataclass(frozen=True)
class Rule:
    """Scale the duration of the nodes that match every given condition.

    Attributes
    ----------
    scale : float
        Factor on the duration (0.5: twice as fast; 0: removed).
    kind : {"gpu", "cpu", "gap"}, optional
        GPU events, CPU self time, or untraced host time between top-level events.
    gpu_class : str, optional
        A kernel class of :func:`aonkit.analysis.kernels.kernel_class`
        (``computation``, ``communication``, ``memory``); GPU nodes only.
    name : str, optional
        A regular expression searched in the owning event's name.
    rank : int, optional
        Only this rank's nodes (a job; host gaps, which belong to no event, are not matched).
    tid : int or str, optional
        Only the CPU time and host gaps of this thread (its ``tid``).
    """

    scale: float
    kind: str | None = None
    gpu_class: str | None = None
    name: str | None = None
    rank: int | None = None
    tid: int | str | None = None


def graph_of(trace: Trace | Mapping[int, Trace]) -> DepGraph:
    """The dependency graph, nodes renumbered in topological order; built once per events table (or job)."""
    return prepared(trace)[1]


def prepared(subject: Trace | Mapping[int, Trace]) -> tuple[Trace, DepGraph]:
    """(the trace the graph describes, its graph), kept: a job is combined, its collectives tied across ranks.

    For a job the first is its combined trace, whose rows the critical path's ``row`` column refers to.
    A trace's graph is kept in :mod:`aonkit.analysis.memo` (rebuilt when ``trace.events`` is replaced).
    """
    if isinstance(subject, Trace):
        return subject, remembered_object(subject, ("depgraph",), lambda: _relabelled(build_graph(subject)))
    held = getattr(subject, "_aon_graph", None)
    if held is not None:
        return held
    from .depgraph_job import build_job_graph

    trace, g = build_job_graph(subject)
    g = _relabelled(g)
    try:
        subject._aon_graph = (trace, g)  # type: ignore[attr-defined]
    except AttributeError:  # a plain dict: no place to keep it
        pass
    return trace, g


def _relabelled(g: DepGraph) -> DepGraph:
    """``g`` with its nodes renumbered in topological order."""
    from .._kernels.dag import relabel

    o = g.order
    indptr, src, lat, edge_of = relabel(o, g.indptr, g.src, g.lat_ns)
    return DepGraph(g.kind[o], g.row[o], g.lane[o], g.start_ns[o], g.dur_ns[o], g.release_ns[o], indptr, src, lat,
                    g.edge_kind[edge_of], np.arange(len(o), dtype=np.int64), g.dropped_edges,
                    None if g.rank is None else g.rank[o])


def _code_values(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, values): a categorical column's codes and its categories with a trailing NaN (code -1)."""
    arr = col.array
    return np.asarray(arr.codes, np.int64), np.append(np.asarray(arr.categories, dtype=object), np.nan)


def _matches(values: np.ndarray, pattern: re.Pattern) -> np.ndarray:
    return np.array([bool(pattern.search(str(v))) for v in values], bool)


def _factors(trace: Trace, g: DepGraph, rules: Sequence[Rule | dict]) -> np.ndarray:
    """Each node's duration factor: the product of the rules that match it.

    Names and classes are tested once per distinct name (or category and name pair), not per node, and the
    trace's events are read only when a rule needs them (a job's combined trace is then built).
    """
    from .kernels import kernel_class

    factor = np.ones(len(g), np.float64)
    if not rules:
        return factor
    rules = [r if isinstance(r, Rule) else Rule(**r) for r in rules]
    rows = np.maximum(g.row, 0)
    for r in rules:
        hit = np.ones(len(g), bool)
        if r.kind is not None:
            hit &= g.kind == KIND_NAMES.index(r.kind)
        if r.gpu_class is not None:
            n_codes, n_vals = _code_values(trace.events["name"])
            c_codes, c_vals = _code_values(trace.events["cat"])
            gpu = np.flatnonzero((g.kind == KIND_GPU) & hit & (g.row >= 0))
            pairs = c_codes[rows[gpu]] * len(n_vals) + n_codes[rows[gpu]]
            uniq, inv = np.unique(pairs, return_inverse=True)
            klass = np.array([kernel_class(str(c_vals[u // len(n_vals)]), str(n_vals[u % len(n_vals)]))
                              for u in uniq], dtype=object)  # fmt: skip
            on = np.zeros(len(g), bool)
            on[gpu] = (klass == r.gpu_class)[inv.reshape(-1)] if len(gpu) else False
            hit &= on
        if r.name is not None:
            pat = re.compile(r.name)
            n_codes, n_vals = _code_values(trace.events["name"])
            by_code = _matches(n_vals, pat)
            hit &= np.where(g.row >= 0, by_code[n_codes[rows]], bool(pat.search("")))
        if r.rank is not None:
            from .whatif_trace import rank_of_nodes

            hit &= rank_of_nodes(trace, g) == r.rank
        if r.tid is not None:  # a CPU thread's own time and gaps: the lane holds (pid code, tid code)
            tids = np.asarray(trace.events["tid"].cat.categories, dtype=object)
            codes = (g.lane & 0xFFFFFFFF).astype(np.int64)
            on = (g.kind != KIND_GPU) & (g.kind != KIND_HUB) & (codes < len(tids))
            by_code = np.append(np.array([str(v) == str(r.tid) for v in tids], bool), False)
            hit &= on & by_code[np.where(on, codes, len(tids))]
        factor[hit] *= float(r.scale)
    return factor


class WhatIf:
    """A re-timed trace.

    Attributes
    ----------
    step_time_ns : int
        Span of the window's nodes after the rules (first start to last finish).
    model_ns : int
        The same span with no rule: the graph's own reproduction of the window.
    measured_ns : int
        The window's span as measured.
    start_ns, finish_ns : numpy.ndarray
        Every node's re-timed start and finish.
    samples_ns : numpy.ndarray or None
        With ``samples=``: step times with kernel durations redrawn per name.
    """

    def __init__(self, step_time_ns: int, model_ns: int, measured_ns: int, start_ns: np.ndarray,
                 finish_ns: np.ndarray, path: Callable[[], pd.DataFrame]) -> None:  # fmt: skip
        self.step_time_ns, self.model_ns, self.measured_ns = step_time_ns, model_ns, measured_ns
        self.start_ns, self.finish_ns = start_ns, finish_ns
        self._path = path
        self._table: pd.DataFrame | None = None
        self.samples_ns: np.ndarray | None = None  # Monte Carlo step times, when asked for
        self._context: tuple | None = None  # (trace, graph, window mask), set by what_if

    def retimed_trace(self) -> Trace:
        """The trace re-timed by the rules (a job: its combined trace), to view and analyse like a measurement.

        See :func:`aonkit.analysis.whatif_trace.retimed_trace`.
        """
        from .whatif_trace import retimed_trace

        trace, g, _ = self._context  # type: ignore[misc]
        return retimed_trace(trace, g, self.start_ns, self.finish_ns)

    @property
    def per_rank_ns(self) -> pd.Series:
        """Each rank's span in the window after the rules (one entry for a single trace), by rank."""
        from .whatif_trace import per_rank_ns

        trace, g, inside = self._context  # type: ignore[misc]
        return per_rank_ns(trace, g, self.start_ns, self.finish_ns, inside)

    @property
    def speedup(self) -> float:
        """``model_ns / step_time_ns``: above 1 when the rules make the window faster."""
        return self.model_ns / self.step_time_ns if self.step_time_ns else float("inf")

    @property
    def critical_path(self) -> pd.DataFrame:
        """The path after the rules, built on first use.

        Columns: ``kind``, ``part`` (``gpu <kernel class>``, ``launch``,
        ``cpu``, ``host gap``, ``collective wait``), ``rank``, ``name``, ``lane``, ``row``, ``start_ns``,
        ``dur_ns``, ``wait_ns`` (latency of the edge into it), ``share``.
        """
        if self._table is None:
            self._table = self._path()
        return self._table

    def __repr__(self) -> str:
        return (f"WhatIf(step_time_ns={self.step_time_ns:,}, model_ns={self.model_ns:,}, "
                f"measured_ns={self.measured_ns:,}, speedup={self.speedup:.3f})")


def _parts(trace: Trace, g: DepGraph, nodes: np.ndarray) -> np.ndarray:
    """What each path node is, for the composition: ``gpu <kernel class>``, ``launch``, ``cpu``, ``host gap``."""
    from .kernels import kernel_class

    ev = trace.events
    rows = np.maximum(g.row[nodes], 0)
    names = names_of(ev, rows)
    cats = ev["cat"].astype(object).to_numpy()[rows] if len(rows) else np.empty(0, object)
    out = []
    for k, n, c in zip(g.kind[nodes], names, cats):
        if k == KIND_GPU:
            out.append(f"gpu {kernel_class(str(c), str(n))}")
        elif k == KIND_GAP:
            out.append("host gap")
        elif k == KIND_HUB:
            out.append("collective wait")
        else:
            out.append("launch" if "Launch" in str(n) else "cpu")
    return np.array(out, dtype=object)


def composition(path: pd.DataFrame) -> pd.DataFrame:
    """Time of a critical path by part, waits (edge latencies) apart: ``part``, ``time_ns``, ``share``."""
    by = path.groupby("part", sort=True)["dur_ns"].sum()
    waits = int(path["wait_ns"].clip(lower=0).sum())
    out = pd.DataFrame({"part": [*by.index, "waits"], "time_ns": [*by.to_numpy(np.int64), waits]})
    out["share"] = out["time_ns"] / (int(out["time_ns"].sum()) or 1)
    return out


_BASE: weakref.WeakKeyDictionary[DepGraph, tuple] = weakref.WeakKeyDictionary()


def _base_schedule(g: DepGraph) -> tuple:
    """The identity schedule of a graph, computed once."""
    from .._kernels.dag import schedule

    if g not in _BASE:
        _BASE[g] = schedule(g.order, g.indptr, g.src, g.lat_ns, g.dur_ns, g.release_ns)
    return _BASE[g]


def _window(trace: Trace, g: DepGraph, step: int | None, window: tuple[int, int] | None) -> np.ndarray:
    if step is not None:
        from .steps import profiler_steps

        s = profiler_steps(trace)
        s = s[s["step"] == step]
        if s.empty:
            steps = sorted(set(profiler_steps(trace)["step"].tolist()))
            raise ValueError(f"no ProfilerStep#{step} in the trace (steps: {steps[:10]})")
        window = (int(s["ts_ns"].min()), int((s["ts_ns"] + s["dur_ns"]).max()))  # every rank's, in a job
    if window is None:
        return np.ones(len(g), bool)
    return (g.start_ns >= window[0]) & (g.start_ns < window[1])


def _span(start: np.ndarray, finish: np.ndarray) -> int:
    """Last finish minus first start, in Python ints (clock garbage spanning int64 must not wrap around)."""
    return int(finish.max()) - int(start.min())


def what_if(trace: Trace | Mapping[int, Trace], rules: Sequence[Rule | dict] = (), *, step: int | None = None,
            window: tuple[int, int] | None = None, samples: int = 0, seed: int = 0) -> WhatIf:  # fmt: skip
    """Re-time a trace or a job with ``rules`` (``[]``: the identity) over a ProfilerStep, a window or all of it.

    A job (a :class:`~aonkit.TraceSet` of ranks) is put on one clock and its
    collectives are tied across ranks (:mod:`aonkit.analysis.depgraph_job`);
    windows are on that clock (the lowest rank's). With ``samples``, also a
    Monte Carlo spread (:mod:`aonkit.analysis.whatif_mc`): ``result.samples_ns``
    holds that many step times with kernel durations redrawn per name (seeded).

    Parameters
    ----------
    trace : Trace or TraceSet
        A trace, or a job's ranks.
    rules : sequence of Rule or dict
        Each scales the durations of the nodes it matches (kernel class, name pattern, kind, rank, thread, host
        gaps; see :class:`Rule`); a node matched by several rules takes their product. ``[]`` is the identity.
    step : int, optional
        Time only ``ProfilerStep#step``.
    window : tuple of int, optional
        Time only the nodes that start in ``[t0_ns, t1_ns)`` (absolute ns).
    samples : int
        Monte Carlo draws of the step time (0: none).
    seed : int
        Seed of those draws.

    Returns
    -------
    WhatIf
        ``step_time_ns`` after the rules, ``model_ns`` (the identity's) and ``measured_ns``, ``speedup``,
        ``critical_path``, ``per_rank_ns``, ``retimed_trace()`` and, with ``samples``, ``samples_ns``.

    Raises
    ------
    ValueError
        When no node of the dependency graph starts in the step or window.
    """
    from .._kernels.dag import critical_path as path_of
    from .._kernels.dag import schedule

    trace, g = prepared(trace)
    inside = _window(trace, g, step, window)
    if not inside.any():
        raise ValueError("no node of the dependency graph starts in the window")
    base = _base_schedule(g)
    factor = _factors(trace, g, rules)
    dur = np.rint(g.dur_ns * factor).astype(np.int64) if rules else g.dur_ns
    start, finish, pred, edge = schedule(g.order, g.indptr, g.src, g.lat_ns, dur, g.release_ns) if rules else base
    if inside.all():  # no window: whole arrays, no gathers (the slider's common case)
        end = int(np.argmax(finish))
        step_ns, model_ns = _span(start, finish), _span(base[0], base[1])
        measured = _span(g.start_ns, g.start_ns + g.dur_ns)
    else:
        idx = np.flatnonzero(inside)
        end = int(idx[np.argmax(finish[idx])])
        step_ns, model_ns = _span(start[idx], finish[idx]), _span(base[0][idx], base[1][idx])
        measured = _span(g.start_ns[idx], (g.start_ns + g.dur_ns)[idx])

    def table() -> pd.DataFrame:
        nodes = path_of(finish, pred, end)
        nodes = nodes[inside[nodes]]
        from .whatif_trace import rank_of_nodes

        out = pd.DataFrame({
            "kind": np.array(KIND_NAMES, dtype=object)[g.kind[nodes]],
            "rank": rank_of_nodes(trace, g)[nodes],
            "name": np.where(g.row[nodes] >= 0, names_of(trace.events, np.maximum(g.row[nodes], 0)), "(host gap)"),
            "lane": g.lane[nodes], "row": g.row[nodes], "start_ns": start[nodes], "dur_ns": dur[nodes],
            "wait_ns": (np.where(edge[nodes] >= 0, g.lat_ns[np.maximum(edge[nodes], 0)], 0) if len(g.lat_ns)
                        else np.zeros(len(nodes), np.int64)),
        })  # fmt: skip
        out.insert(1, "part", _parts(trace, g, nodes))
        out["share"] = out["dur_ns"] / (int(out["dur_ns"].sum()) or 1)
        return out

    result = WhatIf(step_ns, model_ns, measured, start, finish, table)
    result._context = (trace, g, inside)
    if samples:
        from .whatif_mc import step_time_samples

        codes = trace.events["name"].cat.codes.to_numpy()
        result.samples_ns = step_time_samples(g, codes, factor, inside, int(samples), seed)
    return result


def critical_path(trace: Trace, *, step: int | None = None, window: tuple[int, int] | None = None) -> pd.DataFrame:
    """The measured trace's critical path over a ProfilerStep, a window or all of it (see :class:`WhatIf`)."""
    return what_if(trace, (), step=step, window=window).critical_path


__all__ = ["KIND_CPU", "KIND_GAP", "KIND_GPU", "KIND_HUB", "Rule", "WhatIf", "composition", "critical_path", "graph_of",
           "what_if"]
