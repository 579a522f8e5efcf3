"""``Dashboard``: the linked dashboard of one trace as a notebook widget, with a live level-of-detail timeline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ipywidgets as w
from bokeh.layouts import column

from ..analysis.combine import combine_ranks
from ..analysis.overview import Overview, overview
from ..analysis.roofline import roofline_table
from ..report.text import format_summary
from ..timeline import TimelineView, add_critical_path, timeline_view
from ..trace import Trace
from ..views.dashboard import dashboard
from ._bokehjs import BokehWidget, bokeh_model
from ._loop import Debounce


class Dashboard(BokehWidget, w.VBox):
    """Summary cards, timeline, kernel/op tables and roofline of ``trace``, selections linked.

    Zooming or panning the timeline re-queries :func:`aonkit.timeline_tiles`
    for the new window (debounced), so individual events appear as you zoom
    in; selecting a kernel highlights the op that launched it. Displayed
    outside a notebook front end (a terminal, CI logs), it shows the text
    summary instead.

    Parameters
    ----------
    trace : Trace or TraceSet
        Any loaded trace (Kineto or nsys), or a job's ranks: they are put on
        one clock by :func:`aonkit.analysis.combine.combine_ranks` (cards and
        tables then sum over ranks; the timeline has each rank's lanes).
    width_px : int
        Timeline width in pixels (the level of detail follows it).
    timeline, roofline : bool
        Include the timeline / the roofline tab (roofline only when the trace
        recorded shapes).
    debounce_s : float
        Quiet time after the last zoom/pan event before the timeline re-queries.
    critical_path : bool
        Outline the critical path (:func:`aonkit.analysis.critical_path.critical_path`; for a job, across
        ranks) on the timeline.
    """

    def __init__(self, trace: Trace | Mapping[int, Trace], *, width_px: int = 1200, timeline: bool = True,
                 roofline: bool = True, debounce_s: float = 0.15, critical_path: bool = False) -> None:
        job = trace
        if not isinstance(trace, Trace):  # a job: every rank on one clock, lanes per rank
            trace = combine_ranks(trace)
        self.trace = trace
        self.overview: Overview = overview(trace)
        roof = roofline_table(trace) if roofline else None
        layout, self.sources = dashboard(self.overview, roof if roof is not None and len(roof) else None)
        parts = [layout]
        self.timeline: TimelineView | None = None
        if timeline and len(trace.events):
            self.timeline = timeline_view(trace, width_px=width_px)
            if critical_path:
                from ..analysis.critical_path import critical_path as path_of
                from ..analysis.critical_path import prepared

                drawn, _ = prepared(job)  # for a job: the combined trace the path's rows refer to
                self.critical = add_critical_path(self.timeline.figure, drawn, path_of(job))
            self._requery = Debounce(self.refresh_timeline, debounce_s)
            for attr in ("start", "end"):
                self.timeline.figure.x_range.on_change(attr, self._on_range)
            parts.insert(0, self.timeline.layout)
        self.bokeh = bokeh_model(column(*parts))
        super().__init__([self.bokeh])

    def _on_range(self, attr: str, old: Any, new: Any) -> None:
        self._requery()

    def refresh_timeline(self) -> None:
        """Re-query the timeline for its current x range (what a zoom or pan triggers)."""
        if self.timeline is not None:
            t0, t1 = self.timeline.range_window()
            w0, w1, _ = self.timeline.window
            if abs(t0 - w0) > 1 or abs(t1 - w1) > 1:  # :meth:`zoom` has drawn this window already
                self.timeline.update(t0, t1)

    def zoom(self, t0_ns: int, t1_ns: int) -> None:
        """Zoom the timeline to ``[t0_ns, t1_ns)`` (absolute ns), as a wheel zoom would, from Python."""
        if self.timeline is None:
            raise ValueError("this dashboard has no timeline (timeline=False or a trace with no events)")
        self.timeline.show(t0_ns, t1_ns)

    def plain_text(self) -> str:
        """The trace's summary as text."""
        return format_summary(self.overview.summary)
