"""Icicle chart of the CPU call paths (:func:`~aonkit.analysis.op_tree.op_tree`), coloured by the GPU time they launch.

Roots on top, each path as wide as its CPU time, children below it longest
first. The colour says what share of a path's CPU time its launches kept the
GPU busy for (grey: none). Names are data: drawn as canvas text on boxes wide
enough to hold them, and in the hover as escaped fields.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.plotting import figure

from ..units import cut_text
from . import theme
from ._data import frame_source
from .theme import fmt_ns, fmt_pct

GPU_SHARE_COLORS = ("#CCCCCC", "#C6DBEF", "#9ECAE1", "#6BAED6", "#3182BD", "#08519C")
"""No GPU time, then GPU time up to 25%, 50%, 100%, 200% and above of the path's CPU time."""
_EDGES = np.array([0.0, 0.25, 0.5, 1.0, 2.0])
TOOLTIPS = [("", "@name"), ("calls", "@calls"), ("CPU time", "@cpu_text (self @self_text)"),
            ("GPU time launched", "@gpu_text")]  # fmt: skip
CHAR_PX = 6.5
"""Width of a label character at 8pt, to decide how much of a name fits on a box."""


def icicle_data(tree: pd.DataFrame, width_px: int, max_nodes: int = 4000) -> pd.DataFrame:
    """The rows drawn: the ``max_nodes`` longest paths, with box coordinates (ms), colours and texts."""
    df = tree.nlargest(max_nodes, "cpu_ns") if len(tree) > max_nodes else tree
    span = float(tree.loc[tree["parent_node"] < 0, "cpu_ns"].sum()) or 1.0
    share = np.where(df["cpu_ns"] > 0, df["gpu_ns"] / np.maximum(df["cpu_ns"], 1), 0.0)
    bucket = np.where(df["gpu_ns"] > 0, np.searchsorted(_EDGES, share, side="left").clip(1, 5), 0)
    fits = ((df["x1_ns"] - df["x0_ns"]) / span * width_px / CHAR_PX).astype(int).to_numpy()
    names = df["name"].astype(str).tolist()
    labels = [cut_text(n, k, min_chars=4) for n, k in zip(names, fits)]
    return pd.DataFrame({
        "left": df["x0_ns"].to_numpy() / 1e6, "right": df["x1_ns"].to_numpy() / 1e6,
        "top": df["depth"].to_numpy() + 0.05, "bottom": df["depth"].to_numpy() + 0.95, "name": names,
        "label": labels, "calls": df["calls"].to_numpy(), "cpu_ns": df["cpu_ns"].to_numpy(),
        "gpu_ns": df["gpu_ns"].to_numpy(), "color": [GPU_SHARE_COLORS[b] for b in bucket],
        "cpu_text": [fmt_ns(v) for v in df["cpu_ns"]], "self_text": [fmt_ns(v) for v in df["self_cpu_ns"]],
        "gpu_text": [f"{fmt_ns(g)} ({fmt_pct(s)} of its CPU time)" for g, s in zip(df["gpu_ns"], share)],
    })  # fmt: skip


def icicle_figure(tree: pd.DataFrame, width: int = theme.TABLE_WIDTH, max_depth: int = 24,
                  max_nodes: int = 4000) -> tuple[figure, ColumnDataSource]:  # fmt: skip
    """The icicle of an :func:`~aonkit.analysis.op_tree.op_tree`; its source is named ``icicle``.

    Parameters
    ----------
    tree : pandas.DataFrame
        From :func:`aonkit.analysis.op_tree.op_tree`.
    width : int
        Figure width in pixels.
    max_depth : int
        Levels shown before the figure stops growing (zoom and pan show the rest).
    max_nodes : int
        The longest paths kept (a path's ancestors are at least as long, so they stay).
    """
    data = icicle_data(tree, width, max_nodes)
    depth = int(tree["depth"].max()) + 1 if len(tree) else 1
    span_ms = float(tree.loc[tree["parent_node"] < 0, "cpu_ns"].sum()) / 1e6 if len(tree) else 1.0
    fig = figure(width=width, height=40 + 18 * min(depth, max_depth), x_range=Range1d(0, max(span_ms, 1e-6),
                 bounds=(0, max(span_ms, 1e-6))), y_range=Range1d(min(depth, max_depth), 0),
                 tools="xpan,xwheel_zoom,reset", active_scroll="xwheel_zoom", toolbar_location="right",
                 title="CPU time per call path (all threads), coloured by the GPU time it launched")  # fmt: skip
    src = frame_source(data, "icicle")
    boxes = fig.quad(left="left", right="right", top="top", bottom="bottom", source=src, fill_color="color",
                     line_color="white", line_width=0.5)  # fmt: skip
    fig.text(x="left", y="top", text="label", source=src, x_offset=2, y_offset=1, text_baseline="top",
             text_font_size="8pt")  # fmt: skip
    fig.add_tools(HoverTool(renderers=[boxes], tooltips=TOOLTIPS))
    fig.yaxis.visible = False
    fig.ygrid.visible = False
    fig.xaxis.axis_label = "summed CPU time (ms)"
    return fig, src
