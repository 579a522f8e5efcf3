"""Critical path and what-if of one trace, on its dependency graph (:mod:`aonkit.analysis.depgraph`).

>>> r = what_if(trace, [Rule(0.5, gpu_class="communication")], step=3)   # doctest: +SKIP
>>> r.step_time_ns, r.speedup, r.critical_path.head()                   # doctest: +SKIP

The graph is built once per trace (or job) and kept; a what-if re-times it in
one pass over nodes numbered in topological order
(:func:`aonkit._kernels.retime.finish_times`; the rules' masks are kept per
graph in :mod:`aonkit.analysis.whatif_rules`), and derives starts and the
critical path when they are read. The edges are listed in :mod:`aonkit.analysis.depgraph`;
a job's ranks are tied at their matched collectives (:mod:`aonkit.analysis.depgraph_job`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import MissingInputError
from ..trace import Trace
from .columns import names_and_cats
from .combine import CombinedLater
from .critical_parts import parts, path_composition
from .depgraph import KIND_CPU, KIND_GAP, KIND_GPU, KIND_HUB, KIND_NAMES, DepGraph, build_graph, relabelled
from .memo import remembered_object
from .whatif_rules import Rule
from .whatif_steps import window_nodes
from .whatif_timing import Timing, longest_tied


def graph_of(trace: Trace | Mapping[int, Trace]) -> DepGraph:
    """The dependency graph, nodes renumbered in topological order; built once per events table (or job)."""
    return prepared(trace)[1]


def prepared(subject: Trace | Mapping[int, Trace]) -> tuple[Trace, DepGraph]:
    """(the trace the graph describes, its graph), kept: a job's ranks are tied at their collectives.

    For a job the first is its combined trace (made when first read), whose rows the critical path's ``row``
    column refers to.
    A trace's graph is kept in :mod:`aonkit.analysis.memo` (rebuilt when ``trace.events`` is replaced).
    """
    if isinstance(subject, Trace):
        return subject, remembered_object(subject, ("depgraph",), lambda: build_graph(subject, numbered=True))
    held = getattr(subject, "_aon_graph", None)
    if held is not None:
        return held
    from .depgraph_job import build_job_graph

    trace, g = build_job_graph(subject)
    o = g.order  # the identity unless the ranks did not merge (clock garbage): then renumber
    if len(o) != len(g) or (len(o) and (o[0] != 0 or not (o[1:] > o[:-1]).all())):  # a permutation: rising = identity
        g = relabelled(g)
    try:
        subject._aon_graph = (trace, g)  # type: ignore[attr-defined]
    except AttributeError:  # a plain dict: no place to keep it
        pass
    return trace, g


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

    def __init__(self, step_time_ns: int, model_ns: int, measured_ns: int,
                 start_ns: np.ndarray | Callable[[], np.ndarray], finish_ns: np.ndarray,
                 path: Callable[[], pd.DataFrame], comp: Callable[[], pd.DataFrame] | None = None) -> None:  # fmt: skip
        self.step_time_ns, self.model_ns, self.measured_ns = step_time_ns, model_ns, measured_ns
        self._comp, self._comp_table = comp, None
        self._start = start_ns  # or how to make it: a slider's re-time leaves the starts for when they are read
        self.finish_ns = finish_ns
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

    def per_step(self) -> pd.DataFrame:
        """Every ProfilerStep's latency and period after the rules, next to the identity's and the measured.

        One re-time gives them all (the rules apply to the whole trace whatever window was asked for); steps
        hold what the ``"launched"`` scope gives them. See :func:`aonkit.analysis.whatif_steps.step_table`.
        """
        from .whatif_steps import step_table

        trace, g, _ = self._context  # type: ignore[misc]
        return step_table(trace, g, self.start_ns, self.finish_ns, _base_schedule(g)[0])

    @property
    def periods_ns(self) -> tuple[int, int]:
        """(median step period after the rules, the identity's): a step's end to the next's (-1s under two steps).

        The run's cadence when a GPU runs behind its host; steps as :meth:`per_step` holds them.
        """
        from .whatif_steps import median_period_ns

        trace, g, _ = self._context  # type: ignore[misc]
        return median_period_ns(trace, g, self.finish_ns), median_period_ns(trace, g, _base_schedule(g)[0][1])

    @property
    def start_ns(self) -> np.ndarray:
        """Every node's re-timed start."""
        if callable(self._start):
            self._start = self._start()
        return self._start

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

    def composition(self) -> pd.DataFrame:
        """:func:`composition` of :attr:`critical_path`, the same table, made without building the path's table."""
        if self._comp_table is None:
            self._comp_table = self._comp() if self._comp is not None else composition(self.critical_path)
        return self._comp_table

    def __repr__(self) -> str:
        return (f"WhatIf(step_time_ns={self.step_time_ns:,}, model_ns={self.model_ns:,}, "
                f"measured_ns={self.measured_ns:,}, speedup={self.speedup:.3f})")


def _names_and_cats(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``name`` and ``cat`` of events ``rows`` (object arrays); a job's from its ranks while not combined."""
    return trace.names_and_cats(rows) if isinstance(trace, CombinedLater) else names_and_cats(trace.events, rows)


def composition(path: pd.DataFrame) -> pd.DataFrame:
    """Time of a critical path by part, waits (edge latencies) apart: ``part``, ``time_ns``, ``share``."""
    by = path.groupby("part", sort=True)["dur_ns"].sum()
    waits = int(path["wait_ns"].clip(lower=0).sum())
    out = pd.DataFrame({"part": [*by.index, "waits"], "time_ns": [*by.to_numpy(np.int64), waits]})
    out["share"] = out["time_ns"] / (int(out["time_ns"].sum()) or 1)
    return out


_BASE: weakref.WeakKeyDictionary[DepGraph, tuple] = weakref.WeakKeyDictionary()


def _base_schedule(g: DepGraph) -> tuple:
    """The identity schedule of a graph, its model and measured spans and its last node, computed once."""
    from .._kernels.dag import schedule

    if g not in _BASE:
        base = schedule(g.order, g.indptr, g.src, g.lat_ns, g.dur_ns, g.release_ns)
        spans = (_span(base[0], base[1]), _span(g.start_ns, g.start_ns + g.dur_ns)) if len(g) else (0, 0)
        _BASE[g] = (base, spans, int(np.argmax(base[1])) if len(g) else -1)
    return _BASE[g]


def _span(start: np.ndarray, finish: np.ndarray) -> int:
    """Last finish minus first start, in Python ints (clock garbage spanning int64 must not wrap around)."""
    return int(finish.max()) - int(start.min())


def what_if(trace: Trace | Mapping[int, Trace], rules: Sequence[Rule | dict] = (), *, step: int | None = None,
            window: tuple[int, int] | None = None, scope: str = "start", samples: int = 0,
            seed: int = 0) -> WhatIf:  # fmt: skip
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
    scope : {"start", "launched"}
        What a step or window holds (:mod:`aonkit.analysis.whatif_steps`): the nodes that start in it, or its
        host work and the GPU work that work launched (the step's latency, to its last kernel's end).
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
    MissingInputError
        When ``step`` names no ``ProfilerStep`` of the trace, or no node of the dependency graph starts in the
        step or window (a ``ValueError``).
    """
    trace, g = prepared(trace)
    inside = window_nodes(trace, g, step, window, scope)
    if inside is not None and not inside.any():
        raise MissingInputError("no node of the dependency graph starts in the window")
    whole = inside is None or bool(inside.all())
    inside = None if whole else inside  # None: every node
    base, (model_all, measured_all), end_all = _base_schedule(g)
    t = Timing(trace, g, rules, base)
    finish = t.finish
    if whole:  # no window: whole arrays, no gathers (the slider's common case)
        end, step_ns = (end_all, model_all) if not rules else t.last()
        model_ns, measured = model_all, measured_all
    else:
        idx = np.flatnonzero(inside)
        end = int(idx[np.argmax(finish[idx])])
        step_ns, model_ns = _span(finish[idx] - t.dur_at(idx), finish[idx]), _span(base[0][idx], base[1][idx])
        measured = _span(g.start_ns[idx], (g.start_ns + g.dur_ns)[idx])

    found: list[tuple[np.ndarray, np.ndarray]] = []

    def path() -> tuple[np.ndarray, np.ndarray]:  # (nodes, edges into them), found once for the table and the bars
        if not found:
            nodes, edges = longest_tied(t, end, inside)
            found.append((nodes, edges) if inside is None else (nodes[inside[nodes]], edges[inside[nodes]]))
        return found[0]

    def waits(edges: np.ndarray) -> np.ndarray:
        if not len(g.lat_ns):
            return np.zeros(len(edges), np.int64)
        return np.where(edges >= 0, g.lat_ns[np.maximum(edges, 0)], 0)

    def comp() -> pd.DataFrame:
        nodes, edges = path()
        return path_composition(trace, g, nodes, t.dur_at(nodes), waits(edges))

    def table() -> pd.DataFrame:
        nodes, edges = path()
        from .whatif_trace import rank_of_nodes

        dur = t.dur_at(nodes)
        out = pd.DataFrame({
            "kind": np.array(KIND_NAMES, dtype=object)[g.kind[nodes]],
            "rank": rank_of_nodes(trace, g)[nodes],
            "name": np.where(g.row[nodes] >= 0, _names_and_cats(trace, np.maximum(g.row[nodes], 0))[0], "(host gap)"),
            "lane": g.lane[nodes], "row": g.row[nodes], "start_ns": finish[nodes] - dur, "dur_ns": dur,
            "wait_ns": waits(edges),
        })  # fmt: skip
        out.insert(1, "part", parts(trace, g, nodes))
        out["share"] = out["dur_ns"] / (int(out["dur_ns"].sum()) or 1)
        return out

    result = WhatIf(step_ns, model_ns, measured, t.start, finish, table, comp)
    result._context = (trace, g, inside)
    if samples:
        from .whatif_mc import step_time_samples

        codes = trace.events["name"].cat.codes.to_numpy()
        every = np.ones(len(g), bool) if inside is None else inside
        result.samples_ns = step_time_samples(g, codes, t.factor(), every, int(samples), seed)
    return result


def critical_path(trace: Trace, *, step: int | None = None, window: tuple[int, int] | None = None,
                  scope: str = "start") -> pd.DataFrame:  # fmt: skip
    """The measured trace's critical path over a ProfilerStep, a window or all of it (see :class:`WhatIf`)."""
    return what_if(trace, (), step=step, window=window, scope=scope).critical_path


__all__ = ["KIND_CPU", "KIND_GAP", "KIND_GPU", "KIND_HUB", "Rule", "WhatIf", "composition", "critical_path", "graph_of",
           "what_if"]
