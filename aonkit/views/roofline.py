"""Roofline chart: log-log FLOP/s over FLOP/byte, the device's roofs and one point per op or kernel.

Input is a :func:`aonkit.analysis.roofline.roofline_table`; nothing is
recomputed here except positions, sizes, colours and display text. Names
(op and kernel names can carry markup) reach the browser only as data fields:
hover tooltips use escaped ``@field`` values and the title and legend are
drawn on the canvas.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.plotting import figure

from ..model.hardware import DeviceSpec
from . import theme
from ._data import frame_source
from .roofline_data import POINT_COLUMNS, point_data, roof_data, span

__all__ = ["POINT_COLUMNS", "POINT_TOOLTIPS", "ROOF_TOOLTIPS", "point_data", "roof_data", "roofline_figure"]

POINT_TOOLTIPS = [
    ("name", "@name"), ("op", "@op_name"), ("dtype", "@dtype"), ("roof", "@roof"), ("work", "@flop_text"),
    ("traffic", "@bytes_text"), ("time", "@time_text"), ("achieved", "@achieved_text"),
    ("of roof", "@fraction_text"), ("bound", "@bound_label"),
]  # fmt: skip
ROOF_TOOLTIPS = [("roof", "@label"), ("ridge", "@ridge_text")]


def roofline_figure(
    table: pd.DataFrame,
    spec: DeviceSpec | None = None,
    *,
    ceilings: Mapping[str, float] | None = None,
    bandwidths: Mapping[str, float] | None = None,
    title: str | None = None,
    width: int = theme.FIG_WIDTH,
    height: int = theme.FIG_HEIGHT,
    size_range: tuple[float, float] = theme.POINT_SIZE,
) -> tuple[figure, ColumnDataSource]:
    """Roofline chart of a :func:`~aonkit.analysis.roofline.roofline_table` (per op or per kernel).

    Parameters
    ----------
    table : pandas.DataFrame
        ``roofline_table(trace, by="op" | "kernel")``.
    spec : DeviceSpec, optional
        Ceilings to draw; default ``table.attrs["spec"]``. Without one only the
        points and any ``ceilings``/``bandwidths`` show. Points keep the
        table's ``bound`` (grey when unknown): to judge them against other
        ceilings, pass the spec to ``roofline_table``.
    ceilings : mapping of str to float, optional
        Extra compute ceilings (FLOP/s) by label, e.g. measured peaks; dashed.
    bandwidths : mapping of str to float, optional
        Extra memory slopes (bytes/s) by label; dashed.
    title : str, optional
        Default: ``"Roofline: <device>"`` and what is missing.
    width, height : int
        Figure size in screen pixels.
    size_range : (float, float)
        Smallest and largest marker size.

    Returns
    -------
    figure : bokeh.plotting.figure
        Roofs (one per peak key in the table's ``roof`` column, all the
        spec's peaks when the table has none, plus the bandwidth slope) and the
        points, coloured by bound and sized by time.
    source : bokeh.models.ColumnDataSource
        The points (columns :data:`POINT_COLUMNS`; ``row`` is the table row),
        for linking selections.
    """
    spec = spec if spec is not None else table.attrs.get("spec")
    pts = point_data(table, size_range)
    keys = sorted({str(k) for k in table["roof"] if k}) if "roof" in table else []
    if spec is not None and not keys:
        keys = list(spec.peak_flops)
    bws = [spec.memory_bandwidth] if spec is not None else []
    bws += list((bandwidths or {}).values())
    ridges = [spec.ridge(k) for k in keys] if spec is not None else []
    ridges += [c / bws[0] for c in (ceilings or {}).values()] if bws else []
    x_range = span([*pts["intensity"], *ridges], (0.01, 1e4))
    roofs = roof_data(spec, keys, x_range, ceilings, bandwidths)
    peaks = [*pts["achieved"], *roofs.loc[roofs["kind"] == "compute", "value"]]
    y_lo = min([*pts["achieved"], *(x_range[0] * b for b in bws)], default=1e9) / 3
    y_range = (y_lo, max(peaks, default=1e15) * 3)
    if title is None:
        device = spec.name if spec is not None else "no device spec (roofs unknown)"
        empty = "" if len(pts) else (": no ops with shapes" if not len(table) else ": no op with FLOPs and time")
        title = f"Roofline: {device}{empty}"
    fig = figure(
        x_axis_type="log", y_axis_type="log", width=width, height=height,
        x_range=Range1d(*x_range), y_range=Range1d(*y_range),
        x_axis_label="arithmetic intensity (FLOP/byte)", y_axis_label="FLOP/s",
        tools="pan,wheel_zoom,box_zoom,box_select,tap,reset,save",
    )  # fmt: skip
    fig.title.text = theme.plain(title)
    roof_src = frame_source(roofs, "roofline_roofs")
    lines = fig.multi_line("xs", "ys", source=roof_src, line_color="color", line_dash="dash", line_width=2,
                           legend_field="label")  # fmt: skip
    fig.add_tools(HoverTool(renderers=[lines], tooltips=ROOF_TOOLTIPS))
    src = frame_source(pts, "roofline_points")
    dots = fig.scatter("intensity", "achieved", source=src, size="size", fill_color="color", line_color="color",
                       fill_alpha=0.55, legend_field="bound_label")  # fmt: skip
    fig.add_tools(HoverTool(renderers=[dots], tooltips=POINT_TOOLTIPS))
    fig.legend.location = "bottom_right"
    fig.legend.label_text_font_size = "8pt"
    return fig, src
