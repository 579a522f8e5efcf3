"""``Dashboard``: the linked dashboard of one trace as a notebook widget, with a live level-of-detail timeline.

The timeline is a :class:`~aonkit.widgets.timeline.TimelineCanvas` (canvases of aonkit's own module, fed typed
buffers); the cards, tables and roofline under it are bokeh, linked in the page.
"""

from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as w

from ..analysis.combine import combine_ranks
from ..analysis.overview import Overview, overview
from ..analysis.roofline import roofline_table
from ..report.text import format_summary
from ..trace import Trace
from ..views.dashboard import dashboard
from ._bokehjs import BokehWidget, bokeh_model
from .timeline import TimelineCanvas


class Dashboard(BokehWidget, w.VBox):
    """Summary cards, timeline, kernel/op tables and roofline of ``trace``, selections linked.

    The timeline zooms (wheel) and pans (drag, shift+wheel) at once in the page; when the view rests the
    kernel sends :func:`aonkit.timeline_tiles` of the new window, so individual events appear as you zoom in.
    Hovering shows an event's details, clicking a kernel outlines the op that launched it. Displayed
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
    critical_path : bool
        Outline the critical path (:func:`aonkit.analysis.critical_path.critical_path`; for a job, across
        ranks) on the timeline.
    """

    def __init__(self, trace: Trace | Mapping[int, Trace], *, width_px: int = 1200, timeline: bool = True,
                 roofline: bool = True, critical_path: bool = False) -> None:
        job = trace
        if not isinstance(trace, Trace):  # a job: every rank on one clock, lanes per rank
            trace = combine_ranks(trace)
        self.trace = trace
        self.overview: Overview = overview(trace)
        roof = roofline_table(trace) if roofline else None
        layout, self.sources = dashboard(self.overview, roof if roof is not None and len(roof) else None)
        self.bokeh = bokeh_model(layout)
        self.timeline: TimelineCanvas | None = None
        parts: list[w.Widget] = [self.bokeh]
        if timeline and len(trace.events):
            self.timeline = TimelineCanvas(trace, width_px=width_px)
            if critical_path:
                from ..analysis.critical_path import critical_path as path_of
                from ..analysis.critical_path import prepared

                drawn, _ = prepared(job)  # for a job: the combined trace the path's rows refer to
                self.timeline.outline(drawn, path_of(job))
            parts.insert(0, self.timeline)
        super().__init__(parts)

    def zoom(self, t0_ns: int, t1_ns: int) -> None:
        """Zoom the timeline to ``[t0_ns, t1_ns)`` (absolute ns), as a wheel zoom would, from Python."""
        if self.timeline is None:
            raise ValueError("this dashboard has no timeline (timeline=False or a trace with no events)")
        self.timeline.zoom(t0_ns, t1_ns)

    def plain_text(self) -> str:
        """The trace's summary as text."""
        return format_summary(self.overview.summary)
