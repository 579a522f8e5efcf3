"""``Dashboard``: the linked dashboard of one trace as a notebook widget, with a live level-of-detail timeline.

The timeline is a :class:`~aonkit.widgets.timeline.TimelineCanvas` (canvases of aonkit's own module, fed typed
buffers); the cards, tables and roofline under it are bokeh, linked in the page.
"""

from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as w
from bokeh.document import Document

from ..analysis.combine import combine_ranks
from ..analysis.overview import Overview, overview
from ..analysis.roofline import roofline_table
from ..report.text import format_summary
from ..trace import Trace
from ..views.dashboard import dashboard
from ..views.linking import replay_selections
from ._bokehjs import BokehWidget, bokeh_model
from .timeline import TimelineCanvas


class Dashboard(BokehWidget, w.VBox):
    """Summary cards, timeline, kernel/op tables and roofline of ``trace``, selections linked.

    The timeline zooms (wheel) and pans (drag, shift+wheel) at once in the page; when the view rests the
    kernel sends :func:`aonkit.timeline_tiles` of the new window, so individual events appear as you zoom in.
    Hovering shows an event's details, clicking a kernel outlines the op that launched it. Rows picked in the
    kernel or op table (or the top-kernel card, or the roofline) become the timeline's focus: their events are
    marked at any zoom, the rest faded, and N/P in the timeline step from one to the next
    (:attr:`TimelineCanvas.focus <aonkit.widgets.timeline.TimelineCanvas.focus>`); a focus set otherwise (the find
    box's Enter, :meth:`select`) picks the rows of its names. Displayed outside a notebook front end (a terminal,
    CI logs), it shows the text summary instead.

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
        self.timeline: TimelineCanvas | None = None
        self._tables = ((self.sources["kernels"], "name"), (self.sources["ops"], "op_name"))
        self._mirrored: list[list[int]] | None = None  # the tables' picks as the focus last set them
        self._mirroring = False
        self._stale = False  # whether the tables were picked before that
        linked = timeline and len(trace.events)
        doc = Document()  # a selection made before the page draws (select() in the same cell) is shown once it has
        doc.add_root(layout)
        replay_selections(doc, [src.selected for src, _ in self._tables])
        self.bokeh = bokeh_model(layout, synced=[src.selected for src, _ in self._tables] if linked else ())
        parts: list[w.Widget] = [self.bokeh]
        if linked:
            self.timeline = TimelineCanvas(trace, width_px=width_px)
            for src, _ in self._tables:
                src.selected.on_change("indices", self._on_pick)
            self.timeline.observe(self._on_focus, names="focus")
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

    def select(self, *names: str) -> None:
        """Focus the timeline on the events of ``names`` and pick their rows in the tables, as a click would."""
        if self.timeline is None:
            raise ValueError("this dashboard has no timeline (timeline=False or a trace with no events)")
        self.timeline.focus = list(dict.fromkeys(str(n) for n in names))

    def _picks(self) -> list[list[int]]:
        return [list(src.selected.indices) for src, _ in self._tables]

    def _on_pick(self, _attr: str, _old: object, _new: object) -> None:
        picks = self._picks()
        if self._mirroring or picks == self._mirrored:  # the focus's own picks (or the page sending them back)
            return
        names = [str(src.data[col][i]) for (src, col), rows in zip(self._tables, picks) for i in rows]
        self._mirrored = picks
        self.timeline.focus = list(dict.fromkeys(names))  # type: ignore[union-attr]

    def _on_focus(self, change: dict) -> None:
        wanted = set(change["new"])
        picks = [[i for i, n in enumerate(src.data[col]) if n in wanted] for src, col in self._tables]
        self._mirrored, self._mirroring = picks, True
        try:
            for (src, _), rows in zip(self._tables, picks):
                if list(src.selected.indices) != rows:
                    src.selected.indices = rows
        finally:
            self._mirroring = False
        self._stale = not self.timeline.shown  # type: ignore[union-attr]  # picks before a page drew it: see below

    def _repr_mimebundle_(self, **kwargs: object) -> dict:
        # jupyter_bokeh's page drops the changes made before its view exists, and draws the document as it was
        # built: tables picked since then (select() in the cell that shows the dashboard) go into it now, once
        if self._stale:
            self.bokeh.update_from_model(self.bokeh._model)
            self._stale = False
        return super()._repr_mimebundle_(**kwargs)

    def plain_text(self) -> str:
        """The trace's summary as text."""
        return format_summary(self.overview.summary)
