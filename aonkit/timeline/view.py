"""Live timeline: GPU streams and CPU threads as lanes of quads, counters below, re-queried on zoom.

:func:`timeline_view` draws what :func:`~aonkit.timeline.tiles.timeline_tiles`
returns for a window: events at least a pixel wide as solid quads, per-pixel
bins of smaller events as light quads (hover: count and busy time, and the
longest event's details). :meth:`TimelineView.update` re-queries a new window
and replaces the sources' data in place; a notebook widget calls it (debounced)
when the x range changes. Selecting a GPU glyph outlines the CPU op that
launched it and the launch call, in the browser (fixed-code ``CustomJS``), so
this also works in saved HTML. For a report with no Python kernel see
:func:`aonkit.timeline.static.static_timeline`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, LayoutDOM, Range1d
from bokeh.plotting import figure

from ..analysis.correlation import gpu_links
from ..trace import Trace
from ..views._data import frame_source
from .detail import tile_details
from .index import TimelineIndex
from .labels import add_bar_labels
from .tiles import index_of, timeline_tiles
from .view_data import counter_frame, counter_points, counter_series, glyph_frame, lane_slots, padded_window, span
from .view_figs import add_quads, counter_figures, empty_highlight, lane_figure

__all__ = ["TimelineView", "timeline_view"]


@dataclass
class TimelineView:
    """A timeline figure and the sources :meth:`update` refills.

    Built by :func:`timeline_view`, which makes the figures and sources and fills them; constructing one
    directly stores the arguments and draws nothing.

    Parameters
    ----------
    figure, layout, source, highlight, counters, counter_figures, lanes, index, trace, origin_ns, end_ns
        The fields of the same names, described under Attributes.
    window : tuple of (int, int, int)
        ``(t0_ns, t1_ns, width_px)`` of the last drawn window; default ``(0, 1, 1)``.
    margin : float
        Default 0.5; see Attributes.
    _links : pandas.DataFrame, optional
        Private: :func:`~aonkit.analysis.correlation.gpu_links` of ``trace``, computed on the first query when
        None (default).
    _series : list
        Private: the counter series (:func:`~aonkit.timeline.view_data.counter_series` of ``trace``) the
        queries decimate; default empty (no counters).

    Attributes
    ----------
    figure : bokeh.plotting.figure
        The lanes: y slots per lane row (labels on the axis), x in ms since ``origin_ns``.
    layout : bokeh.models.LayoutDOM
        ``figure`` over the counter figures (one x range).
    source : ColumnDataSource
        The quads: columns of :func:`~aonkit.timeline.view_data.glyph_frame`.
    highlight : ColumnDataSource
        Boxes of the selected glyphs' launching op and launch call (filled in the browser).
    counters : dict of str to ColumnDataSource
        One source per counter series (``"GPU 0 allocated"``, ``"<metric> (GPU 0)"``): ``x``, ``rel_ns``,
        ``value``, ``series``, ``value_text``.
    counter_figures : list of bokeh.plotting.figure
    lanes : pandas.DataFrame
        ``index.lanes`` with ``slot`` and ``center`` (y of the label).
    index : TimelineIndex
    trace : Trace
    origin_ns, end_ns : int
        The trace's span (x = 0 is ``origin_ns``).
    window : tuple of int
        The window last drawn (absolute ns) and its width in pixels.
    margin : float
        Share of the window queried on each side beyond it, so short pans show glyphs before the next update.
    """

    figure: figure
    layout: LayoutDOM
    source: ColumnDataSource
    highlight: ColumnDataSource
    counters: dict[str, ColumnDataSource]
    counter_figures: list[figure]
    lanes: pd.DataFrame
    index: TimelineIndex
    trace: Trace
    origin_ns: int
    end_ns: int
    window: tuple[int, int, int] = (0, 1, 1)
    margin: float = 0.5
    _links: pd.DataFrame | None = field(default=None, repr=False)
    _series: list = field(default_factory=list, repr=False)

    def query(self, t0_ns: int, t1_ns: int, width_px: int) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
        """The glyph frame and the counter frames of a window (with the margin), without touching the sources."""
        a, b, px = padded_window(t0_ns, t1_ns, width_px, self.margin, self.origin_ns, self.end_ns)
        if self._links is None:
            self._links = gpu_links(self.trace)
        details = tile_details(self.trace, self.index, timeline_tiles(self.index, a, b, px), self._links)
        glyphs = glyph_frame(self.trace, self.index, self.lanes, details, self.origin_ns)
        counters = {label: counter_frame(label, unit, counter_points(ts, v, a, b, px, self.origin_ns))
                    for _, label, unit, ts, v in self._series}  # fmt: skip
        return glyphs, counters

    def update(self, t0_ns: int, t1_ns: int, width_px: int | None = None) -> None:
        """Re-query the window ``[t0_ns, t1_ns)`` (absolute ns) at ``width_px`` and replace the sources' data.

        The x range is left as it is (the caller's zoom); the selection and highlight are cleared.
        """
        width = int(width_px) if width_px is not None else self.window[2]
        glyphs, counters = self.query(t0_ns, t1_ns, width)
        self.source.selected.indices = []
        self.highlight.data = empty_highlight()
        self.source.data = dict(frame_source(glyphs, "tmp").data)
        for label, frame in counters.items():
            self.counters[label].data = dict(frame_source(frame, "tmp").data)
        self.window = (int(t0_ns), int(t1_ns), width)

    def show(self, t0_ns: int, t1_ns: int, width_px: int | None = None) -> None:
        """Zoom to ``[t0_ns, t1_ns)`` (absolute ns): set the figure's x range and draw that window.

        What a notebook cell calls to zoom; :meth:`update` alone refills the
        glyphs and leaves the axis where the user's zoom put it.
        """
        t0, t1 = int(t0_ns), int(t1_ns)
        if not t0 < t1:
            raise ValueError(f"the window must have t0_ns < t1_ns, got {t0} and {t1}")
        self.update(t0, t1, width_px)
        xr = self.figure.x_range
        xr.update(start=(t0 - self.origin_ns) / 1e6, end=(t1 - self.origin_ns) / 1e6)

    def retime(self, trace: Trace) -> None:
        """Draw ``trace``, the same events at other times, in place of the current one.

        For :meth:`aonkit.analysis.critical_path.WhatIf.retimed_trace`: the
        same figure, lanes and sources, and the same window from the origin.

        Raises ``ValueError`` when its lanes differ from the drawn ones (then build a new :func:`timeline_view`).
        """
        index = index_of(trace)
        slots = lane_slots(index)
        if not slots[["label", "rows"]].equals(self.lanes[["label", "rows"]]):
            raise ValueError("the trace's lanes differ from the drawn ones: build a new timeline_view for it")
        w0, w1, width = self.window
        rel0, rel1 = w0 - self.origin_ns, w1 - self.origin_ns  # the window, from the origin
        origin, end = span(trace, index)
        self.trace, self.index, self.origin_ns, self.end_ns = trace, index, origin, end
        self._series = counter_series(trace)  # the event rows (and so the GPU links) are the same: _links stays
        self.figure.x_range.bounds = (0.0, (end - origin) / 1e6)
        t0 = origin + max(rel0, 0)
        self.update(t0, max(min(origin + rel1, end), t0 + 1), width)

    def range_window(self) -> tuple[int, int]:
        """The figure's current x range as absolute ns (what a widget passes to :meth:`update`)."""
        xr = self.figure.x_range
        return self.origin_ns + round(xr.start * 1e6), self.origin_ns + round(xr.end * 1e6)


def timeline_view(trace: Trace, width_px: int = 1200, t0_ns: int | None = None, t1_ns: int | None = None, *,
                  index: TimelineIndex | None = None) -> TimelineView:  # fmt: skip
    """The timeline of ``trace`` in ``[t0_ns, t1_ns)`` (default: the whole trace) at ``width_px`` pixels.

    Parameters
    ----------
    trace : Trace
        The trace (its :func:`~aonkit.timeline.index.timeline_index` is built once and kept).
    width_px : int
        Figure width in screen pixels (also the query width).
    t0_ns, t1_ns : int, optional
        Initial window in absolute ns.
    index : TimelineIndex, optional
        ``timeline_index(trace)`` when already built.

    Returns
    -------
    TimelineView
    """
    index = index_of(trace) if index is None else index
    origin, end = span(trace, index)
    t0 = origin if t0_ns is None else int(t0_ns)
    t1 = end if t1_ns is None else int(t1_ns)
    if t0 >= t1:
        raise ValueError(f"the window must have t0_ns < t1_ns, got {t0} and {t1}")
    slots = lane_slots(index)
    x_range = Range1d((t0 - origin) / 1e6, (t1 - origin) / 1e6, bounds=(0.0, (end - origin) / 1e6), name="timeline_x")
    fig = lane_figure(slots, x_range, int(width_px))
    view = TimelineView(figure=fig, layout=fig, source=ColumnDataSource(name="timeline_quads"),
                        highlight=ColumnDataSource(empty_highlight(), name="timeline_highlight"), counters={},
                        counter_figures=[], lanes=slots, index=index, trace=trace, origin_ns=origin, end_ns=end,
                        _series=counter_series(trace))  # fmt: skip
    glyphs, counters = view.query(t0, t1, int(width_px))
    view.source.data = dict(frame_source(glyphs, "tmp").data)
    add_quads(fig, view.source, view.highlight)
    add_bar_labels(fig, view.source, x_range, int(width_px))
    groups: dict[str, list[tuple[str, ColumnDataSource]]] = {}
    for group, label, *_ in view._series:
        view.counters[label] = frame_source(counters[label], f"timeline_counter_{len(view.counters)}")
        groups.setdefault(group, []).append((label, view.counters[label]))
    view.counter_figures = counter_figures(groups, x_range, int(width_px))
    view.layout = column(fig, *view.counter_figures) if view.counter_figures else fig
    view.window = (t0, t1, int(width_px))
    return view
