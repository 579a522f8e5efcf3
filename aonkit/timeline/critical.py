"""The critical path drawn on a timeline: outlined boxes over the events it runs through.

:func:`critical_boxes` turns a critical-path table
(:func:`aonkit.analysis.critical_path.critical_path`, its ``row`` column)
into boxes in the timeline's coordinates (ms since the trace's origin, lane
slots); :func:`add_critical_path` outlines them on a lane figure, the live
view's or the static report's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure

from ..trace import Trace
from .tiles import index_of
from .view_data import event_boxes, lane_slots, span

CRITICAL_COLOR = "#D00000"
"""Outline of the critical path's events."""


def critical_boxes(trace: Trace, path: pd.DataFrame) -> dict[str, np.ndarray]:
    """``left``, ``right`` (ms), ``top``, ``bottom`` (slots) and ``name`` of the path's events on the timeline.

    Each event is boxed once, whole (a CPU op the path crosses several times
    is one box); host gaps and events on no lane are left out.

    Parameters
    ----------
    trace : Trace
        The trace the path was computed on; its timeline index is built on first use and kept
        (:func:`~aonkit.timeline.tiles.index_of`).
    path : pandas.DataFrame
        A critical-path table (:func:`aonkit.analysis.critical_path.critical_path`,
        :attr:`WhatIf.critical_path <aonkit.analysis.critical_path.WhatIf.critical_path>`). Only its ``row``
        column is read: rows of ``trace.events``, negative for steps that are no event (host gaps).

    Returns
    -------
    dict of str to numpy.ndarray
        One entry per boxed event, in the order of its first appearance on the path: ``left``, ``right``
        (float, ms since the timeline's origin, the start of its earliest lane event), ``top``, ``bottom``
        (float lane slots, as the lane figure's y axis) and ``name`` (object array of str).
    """
    index = index_of(trace)
    rows = pd.unique(path["row"].to_numpy(np.int64))
    rows = rows[rows >= 0]
    boxes = event_boxes(trace, index, lane_slots(index), rows, span(trace, index)[0])
    keep = ~np.isnan(boxes["left"])
    names = trace.events["name"].astype(object).to_numpy()[rows[keep]] if keep.any() else np.empty(0, object)
    return {**{k: v[keep] for k, v in boxes.items()}, "name": np.asarray([str(n) for n in names], dtype=object)}


def add_critical_path(fig: figure, trace: Trace, path: pd.DataFrame) -> ColumnDataSource:
    """Outline the path's events on the lane figure ``fig`` of ``trace``'s timeline; return their source.

    Parameters
    ----------
    fig : bokeh.plotting.figure
        The lane figure of ``trace``'s timeline (:attr:`TimelineView.figure
        <aonkit.timeline.view.TimelineView.figure>`, or the static report's): x in ms since the origin, y in
        lane slots.
    trace : Trace
        The drawn trace.
    path : pandas.DataFrame
        A critical-path table of ``trace``; see :func:`critical_boxes`.

    Returns
    -------
    bokeh.models.ColumnDataSource
        Named ``"timeline_critical_path"``, holding :func:`critical_boxes` of the path. The boxes are added to
        ``fig`` as one ``quad`` renderer named ``"critical_path"``: no fill, a 2-pixel :data:`CRITICAL_COLOR`
        outline.
    """
    src = ColumnDataSource(critical_boxes(trace, path), name="timeline_critical_path")
    fig.quad(left="left", right="right", top="top", bottom="bottom", source=src, fill_alpha=0,
             line_color=CRITICAL_COLOR, line_width=2, name="critical_path")
    return src
