"""Bokeh parts shared by the live and static timelines: the lane figure, its glyphs and hovers, counter figures.

Names reach the browser only as source data: lane labels are
:class:`~bokeh.models.PlainText` axis labels drawn on the canvas, tooltips are
escaped ``@field`` values, counter legends read a ``series`` data field, and
the highlight callback is the fixed text :data:`HIGHLIGHT_JS`.
"""

from __future__ import annotations

import html

import pandas as pd
from bokeh.models import (
    BoxAnnotation,
    CDSView,
    ColumnDataSource,
    CustomJS,
    Div,
    FixedTicker,
    GroupFilter,
    HoverTool,
    Legend,
    LegendItem,
    NumeralTickFormatter,
    Range,
    Range1d,
    TapTool,
    WheelZoomTool,
)
from bokeh.plotting import figure

from ..views import theme
from .view_data import BIN_TOOLTIPS, COUNTER_TOOLTIPS, EVENT_TOOLTIPS, LEGEND, TARGETS

ROW_PX = 16
"""Screen height of one lane row."""
COUNTER_HEIGHT = 130
EVENT_ALPHA, BIN_ALPHA = 0.9, 0.35
"""Fill opacity of single events (solid) and of per-pixel bins (light)."""
TOOLS = "xpan,xwheel_zoom,xbox_zoom,tap,reset,save"
HIGHLIGHT_COLUMNS = ("left", "right", "top", "bottom", "row", "target")
HIGHLIGHT_JS = """
const d = src.data, out = {left: [], right: [], top: [], bottom: [], row: [], target: []};
for (const i of src.selected.indices) {
  for (let t = 0; t < targets.length; t++) {
    const p = targets[t] + "_";
    const left = d[p + "left"][i];
    if (left == null || Number.isNaN(left)) continue;
    out.left.push(left); out.right.push(d[p + "right"][i]);
    out.top.push(d[p + "top"][i]); out.bottom.push(d[p + "bottom"][i]);
    out.row.push(d[row_columns[t]][i]); out.target.push(targets[t]);
  }
}
dst.data = out;
"""
"""Selection callback: args ``src`` (the quads), ``dst`` (the highlight source), ``targets`` and ``row_columns``.

Each selected glyph's launching op and launch call boxes (columns
``op_left`` ... ``launch_bottom``) become highlight rows."""


def empty_highlight() -> dict[str, list]:
    """Data of a highlight source with nothing selected."""
    return {c: [] for c in HIGHLIGHT_COLUMNS}


def edge_zoom(fig: figure) -> None:
    """Let the wheel zoom out at the trace's edge: the range stops at its bound instead of refusing to move.

    With bokeh's default (``maintain_focus``), a zoom that would pass a bound is
    dropped whole, so zooming out of a window that starts at the trace's start
    did nothing.
    """
    for tool in fig.select(type=WheelZoomTool):
        tool.maintain_focus = False


def lane_figure(slots: pd.DataFrame, x_range: Range, width: int) -> figure:
    """A figure with one band per lane (alternately shaded), its label at its middle, lane 0 on top."""
    n = max(int(slots["rows"].clip(lower=1).sum()), 1)
    fig = figure(width=width, height=min(max(ROW_PX * n + 60, 140), 1000), x_range=x_range, y_range=Range1d(n, 0),
                 tools=TOOLS, active_scroll="xwheel_zoom", x_axis_label="time since trace start (ms)")  # fmt: skip
    fig.yaxis.ticker = FixedTicker(ticks=[float(c) for c in slots["center"]])
    fig.yaxis.major_label_overrides = {float(c): theme.plain(lab) for c, lab in zip(slots["center"], slots["label"])}
    fig.ygrid.visible = False
    edge_zoom(fig)
    for k, (slot, rows) in enumerate(zip(slots["slot"], slots["rows"].clip(lower=1))):
        if k % 2:
            fig.add_layout(BoxAnnotation(top=float(slot), bottom=float(slot + rows), fill_color="#000000",
                                         fill_alpha=0.04, line_alpha=0, level="underlay"))  # fmt: skip
    return fig


def add_quads(fig: figure, src: ColumnDataSource, highlight: ColumnDataSource, tooltips: tuple[list, list] = (
        EVENT_TOOLTIPS, BIN_TOOLTIPS), formatters: dict | None = None, color: str | dict | None = "color",
        callback: CustomJS | None = None) -> CustomJS:  # fmt: skip
    """Events (solid) and per-pixel bins (light) from ``src``, their hovers, and the op/launch highlight.

    Parameters
    ----------
    fig, src, highlight
        The lane figure, the displayed quads (a ``kind`` column: ``"event"`` or ``"bin"``) and the highlight source.
    tooltips : tuple of list
        Event and bin tooltips (default: the live view's text fields).
    formatters : dict, optional
        The hovers' field formatters.
    color : str or dict or None
        Fill colour spec: a column of CSS colours, a field with a colour mapper, or None (no fill: the caller
        paints the glyphs, the quads serve hover and selection).
    callback : CustomJS, optional
        Selection callback; default :data:`HIGHLIGHT_JS` over the box columns of ``src``.

    Returns
    -------
    bokeh.models.CustomJS
        The selection callback.
    """
    box = {"left": "left", "right": "right", "top": "top", "bottom": "bottom", "source": src}
    renderers = []
    for kind, alpha, tips in (("event", EVENT_ALPHA, tooltips[0]), ("bin", BIN_ALPHA, tooltips[1])):
        view = CDSView(filter=GroupFilter(column_name="kind", group=kind))
        r = fig.quad(**box, view=view, fill_color=color, line_color=None, fill_alpha=alpha)  # no stroke: fill only
        fig.add_tools(HoverTool(renderers=[r], tooltips=tips, formatters=formatters or {}))
        renderers.append(r)
    fig.select_one({"type": TapTool}).renderers = renderers
    fig.quad(left="left", right="right", top="top", bottom="bottom", source=highlight, fill_alpha=0,
             line_color="#000000", line_width=2.5)  # fmt: skip
    if callback is None:
        callback = CustomJS(args={"src": src, "dst": highlight, "targets": list(TARGETS),
                                  "row_columns": ["launch_op", "launch"]}, code=HIGHLIGHT_JS)  # fmt: skip
    src.selected.js_on_change("indices", callback)
    return callback


def counter_figures(groups: dict[str, list[tuple[str, ColumnDataSource]]], x_range: Range,
                    width: int) -> list[figure]:  # fmt: skip
    """One figure per counter group (``"memory"``, then one per metric), a line per series, legend from data."""
    figs = []
    for group, series in groups.items():
        fig = figure(width=width, height=COUNTER_HEIGHT, x_range=x_range, tools="xpan,xwheel_zoom,reset",
                     active_scroll="xwheel_zoom")  # fmt: skip
        edge_zoom(fig)
        items = []
        for k, (label, src) in enumerate(series):
            color = theme.ROOF_COLORS[(k // 2 if group == "memory" else k) % len(theme.ROOF_COLORS)]
            dash = "dashed" if group == "memory" and label.endswith("reserved") else "solid"
            r = fig.step(x="x", y="value", source=src, mode="after", line_color=color, line_dash=dash)
            items.append(LegendItem(label={"field": "series"}, renderers=[r], index=0))
            fig.add_tools(HoverTool(renderers=[r], tooltips=COUNTER_TOOLTIPS, mode="vline"))
        # above the plot, in a row: inside it, the legend hid the first peak
        fig.add_layout(Legend(items=items, orientation="horizontal", location="top_left", label_text_font_size="7pt",
                              padding=2, margin=0, border_line_alpha=0), "above")
        if group == "memory":
            fig.yaxis.formatter = NumeralTickFormatter(format="0.0 b")
        fig.xaxis.visible = False
        figs.append(fig)
    return figs


def color_legend(palette: list[str] | None = None) -> Div:
    """The timeline's colour key as a row of swatches; only the colours in ``palette`` (all when None).

    Fixed labels and theme colours only: nothing from the trace.

    Parameters
    ----------
    palette : list of str, optional
        CSS colours the drawn glyphs use (e.g. :attr:`Pyramid.palette <aonkit.timeline.pyramid.Pyramid.palette>`),
        compared case-insensitively with the key's colours. None (default) shows every entry; an empty list
        shows none.

    Returns
    -------
    bokeh.models.Div
        Named ``"timeline_legend"`` (math rendering off): one swatch and label per entry kept, in the key's
        fixed order (GPU computation, communication, memory copy / set, CPU op, annotation, runtime / driver
        call, Python function, other).
    """
    used = None if palette is None else {c.lower() for c in palette}
    items = [(label, color) for label, color in LEGEND if used is None or color.lower() in used]
    cells = "".join(f"<span style='margin-right:14px;white-space:nowrap'><span style='display:inline-block;width:11px;"
                    f"height:11px;margin-right:4px;vertical-align:-1px;background:{html.escape(color)}'></span>"
                    f"{html.escape(label)}</span>" for label, color in items)  # fmt: skip
    return Div(text=f"<div style='font-size:0.8em;color:#444'>{cells}</div>", disable_math=True, name="timeline_legend")

