"""Roofline chart: log-log FLOP/s over FLOP/byte, the device's roofs and one point per op or kernel.

Input is a :func:`aonkit.analysis.roofline.roofline_table`; nothing is
recomputed here except positions, sizes, colours and display text. Names
(op and kernel names can carry markup) reach the browser only as data fields:
hover tooltips use escaped ``@field`` values and the title and legend are
drawn on the canvas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.plotting import figure

from ..model.hardware import DeviceSpec
from . import theme
from ._data import frame_source
from .theme import fmt_bytes, fmt_flop, fmt_flop_rate, fmt_ns, fmt_pct, fmt_si

POINT_TOOLTIPS = [
    ("name", "@name"), ("op", "@op_name"), ("dtype", "@dtype"), ("roof", "@roof"), ("work", "@flop_text"),
    ("traffic", "@bytes_text"), ("time", "@time_text"), ("achieved", "@achieved_text"),
    ("of roof", "@fraction_text"), ("bound", "@bound_label"),
]  # fmt: skip
ROOF_TOOLTIPS = [("roof", "@label"), ("ridge", "@ridge_text")]
POINT_COLUMNS = (
    "row", "name", "op_name", "kind", "dtype", "roof", "timing", "intensity", "achieved", "flop", "bytes", "dur_ns",
    "fraction", "bound", "bound_label", "color", "size", "flop_text", "bytes_text", "time_text", "achieved_text",
    "fraction_text",
)  # fmt: skip


def point_data(table: pd.DataFrame, size_range: tuple[float, float] = theme.POINT_SIZE) -> pd.DataFrame:
    """The plottable rows of a roofline table with marker sizes, colours and display text.

    A row is plottable when its intensity and achieved FLOP/s are finite and
    positive (log axes). ``row`` is the row's position in ``table``; ``size``
    grows with the square root of ``dur_ns`` (marker area with time) from
    ``size_range[0]`` to ``size_range[1]`` at the longest point.
    """
    x = table["intensity_flop_per_byte"].to_numpy(np.float64) if len(table) else np.empty(0)
    y = table["achieved_flop_per_s"].to_numpy(np.float64) if len(table) else np.empty(0)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    t = table[keep]
    dur = t["dur_ns"].to_numpy(np.float64) if len(t) else np.empty(0)
    lo, hi = size_range
    scale = np.sqrt(dur / dur.max()) if len(dur) and dur.max() > 0 else np.zeros(len(dur))
    bound = t["bound"].astype(str).to_numpy() if len(t) else np.empty(0, dtype=object)
    by_kernel = "op_name" in t.columns
    frac = t["fraction_of_roof"].to_numpy(np.float64) if len(t) else np.empty(0)
    out = pd.DataFrame(
        {
            "row": np.flatnonzero(keep),
            "name": t["name"].astype(str).to_numpy() if len(t) else [],
            "op_name": t["op_name" if by_kernel else "name"].astype(str).to_numpy() if len(t) else [],
            **{c: t[c].astype(str).to_numpy() if len(t) else [] for c in ("kind", "dtype", "roof", "timing")},
            "intensity": x[keep],
            "achieved": y[keep],
            "flop": t["flop"].to_numpy(np.float64) if len(t) else [],
            "bytes": t["bytes"].to_numpy(np.float64) if len(t) else [],
            "dur_ns": dur,
            "fraction": frac,
            "bound": bound,
            "bound_label": [theme.BOUND_LABELS.get(b, b) for b in bound],
            "color": [theme.BOUND_COLORS.get(b, theme.BOUND_COLORS[""]) for b in bound],
            "size": np.clip(lo + (hi - lo) * scale, lo, hi),
        }
    )
    out["flop_text"] = [fmt_flop(v) for v in out["flop"]]
    out["bytes_text"] = [fmt_bytes(v) for v in out["bytes"]]
    out["time_text"] = [fmt_ns(v) for v in out["dur_ns"]]
    out["achieved_text"] = [fmt_flop_rate(v) for v in out["achieved"]]
    out["fraction_text"] = [fmt_pct(v) for v in out["fraction"]]
    return out[list(POINT_COLUMNS)]


def _span(values: list[float], default: tuple[float, float]) -> tuple[float, float]:
    v = [x for x in values if math.isfinite(x) and x > 0]
    return (min(v) / 3, max(v) * 3) if v else default


def roof_data(
    spec: DeviceSpec | None,
    keys: list[str],
    x_range: tuple[float, float],
    ceilings: Mapping[str, float] | None = None,
    bandwidths: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Roof segments: memory slopes (spec bandwidth, L2, ``bandwidths``) and compute roofs (``keys``, ``ceilings``).

    Compute roofs start at their ridge point (``spec.ridge(key)`` for the
    spec's peaks, the ceiling over the spec's bandwidth for user ceilings) and
    run to the right edge; slopes run from the left edge up to the highest roof.
    """
    slopes: list[tuple[str, float, str]] = []
    if spec is not None:
        slopes.append(("memory", spec.memory_bandwidth, "solid"))
        if spec.l2_bandwidth:
            slopes.append(("L2", spec.l2_bandwidth, "dotted"))
    slopes += [(str(k), float(v), "dashed") for k, v in (bandwidths or {}).items()]
    roofs = [(k, spec.peak(k), spec.ridge(k), "solid") for k in keys] if spec is not None else []
    main_bw = slopes[0][1] if slopes else math.nan
    roofs += [(str(k), float(v), float(v) / main_bw, "dashed") for k, v in (ceilings or {}).items()]
    roofs = [r for r in roofs if math.isfinite(r[1]) and r[1] > 0]
    x_lo, x_hi = x_range
    top = max((r[1] for r in roofs), default=math.nan)
    rows = []
    for label, bw, dash in slopes:
        end = top / bw if math.isfinite(top) else x_hi
        rows.append((f"{label} {fmt_si(bw, 'B/s')}", "memory", bw, math.nan, [x_lo, end], [x_lo * bw, end * bw], dash))
    for label, peak, ridge, dash in roofs:
        start = ridge if math.isfinite(ridge) else x_lo
        rows.append((f"{label} {fmt_flop_rate(peak)}", "compute", peak, ridge, [start, x_hi], [peak, peak], dash))
    df = pd.DataFrame(rows, columns=["label", "kind", "value", "ridge", "xs", "ys", "dash"])
    df["ridge_text"] = [f"{r:.3g} FLOP/byte" if math.isfinite(r) else "" for r in df["ridge"]]
    df["color"] = [theme.ROOF_COLORS[i % len(theme.ROOF_COLORS)] for i in range(len(df))]
    return df


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
        points (grey, bound unknown) and any ``ceilings``/``bandwidths`` show.
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
    x_range = _span([*pts["intensity"], *ridges], (0.01, 1e4))
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
