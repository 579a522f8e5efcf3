"""The trace diff as a picture: what got slower or faster, by how much in total and per call, and how sure it is.

:func:`diff_figure` draws a :func:`aonkit.analysis.diff.trace_diff` table: one
row per name (the largest changes of total time first), on the left the total
time in the base and the new trace side by side, on the right the change of
the mean per call in percent with its 95% bootstrap interval. Rows whose
change is significant are coloured (slower: vermillion, faster: bluish green);
the others are grey. The hover has the whole name and every number.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from bokeh.layouts import row
from bokeh.models import (
    DataTable,
    Dodge,
    FixedTicker,
    HoverTool,
    LayoutDOM,
    NumberFormatter,
    Range1d,
    Span,
    TableColumn,
    Whisker,
)
from bokeh.plotting import figure

from ..units import cut_text
from . import theme
from ._data import frame_source
from .tables import data_table, name_column, time_columns

__all__ = ["DIFF_COLORS", "diff_figure", "diff_frame", "diff_table", "short_name"]

DIFF_COLORS: dict[str, str] = {"slower": "#D55E00", "faster": "#009E73", "unsure": "#BBBBBB", "base": "#999999"}
"""Colour of a significant slow-down, a significant speed-up, a change that is not significant, and the base bar."""

NAME_CHARS = 48
"""Characters of a name on the axis (the hover has it whole)."""

TOOLTIPS = [("name", "@name"), ("calls", "@count_base → @count_new"), ("total", "@total_text"),
            ("mean per call", "@mean_text"), ("change of the mean", "@pct_text"), ("p", "@p_text")]  # fmt: skip


def diff_frame(diff: pd.DataFrame, top: int = 15) -> pd.DataFrame:
    """The rows :func:`diff_figure` draws: the ``top`` first rows of ``diff`` with positions, colours and texts."""
    d = diff.head(int(top)).reset_index(drop=True)
    base_mean = d["mean_base_ns"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = 100.0 * d["ci_low_ns"].to_numpy(dtype=np.float64) / base_mean
        hi = 100.0 * d["ci_high_ns"].to_numpy(dtype=np.float64) / base_mean
    pct = d["delta_mean_pct"].to_numpy(dtype=np.float64)
    sig = d["significant"].to_numpy(dtype=bool)
    color = np.where(~sig, DIFF_COLORS["unsure"], np.where(pct > 0, DIFF_COLORS["slower"], DIFF_COLORS["faster"]))
    finite = np.isfinite(pct)  # a name in one trace only has no change of the mean
    return pd.DataFrame({
        "y": np.arange(len(d), dtype=np.float64), "name": d["name"].astype(str),
        "label": [short_name(n) for n in d["name"].astype(str)],
        "count_base": d["count_base"], "count_new": d["count_new"],
        "base_ms": d["total_base_ns"] / 1e6, "new_ms": d["total_new_ns"] / 1e6,
        "pct": np.where(finite, pct, 0.0), "lo": np.where(finite & np.isfinite(lo), lo, 0.0),
        "hi": np.where(finite & np.isfinite(hi), hi, 0.0), "color": color,
        "total_text": [f"{theme.fmt_ns(a)} → {theme.fmt_ns(b)}" for a, b in zip(d["total_base_ns"], d["total_new_ns"])],
        "mean_text": [f"{_ns(a)} → {_ns(b)}" for a, b in zip(d["mean_base_ns"], d["mean_new_ns"])],
        "pct_text": [f"{p:+.1f}% (95%: {a:+.1f}% to {b:+.1f}%)" if np.isfinite(p) else "only in one trace"
                     for p, a, b in zip(pct, lo, hi)],
        "p_text": [f"{p:.2g}" + (" (significant)" if s else "") for p, s in zip(d["p_value"], sig)],
    })  # fmt: skip


def short_name(name: str, chars: int = NAME_CHARS) -> str:
    """``name`` cut in the middle to ``chars`` characters (kernel names differ as often at the end as at the start)."""
    return cut_text(name, chars, middle=True)


def _ns(v: float) -> str:
    return theme.fmt_ns(float(v)) if np.isfinite(v) else theme.MISSING


def diff_figure(diff: pd.DataFrame, top: int = 15, width_px: int = 1000, title: str = "") -> LayoutDOM:
    """Picture of a trace diff: total time base vs new, and the change per call with its interval.

    Parameters
    ----------
    diff : pandas.DataFrame
        :func:`aonkit.analysis.diff.trace_diff` (sorted by the change of total time).
    top : int
        Rows drawn (the largest changes of total time).
    width_px : int
        Width of both panels together.
    title : str
        Shown over the left panel (e.g. the two traces' names).

    Returns
    -------
    bokeh.models.LayoutDOM
        Two figures side by side sharing the rows; the source is named ``diff_rows``.
    """
    frame = diff_frame(diff, top)
    src = frame_source(frame, "diff_rows")
    n = max(len(frame), 1)
    height = 60 + 26 * n
    y_range = Range1d(n - 0.5, -0.5)
    left = figure(width=int(width_px * 0.58), height=height, y_range=y_range, tools="", toolbar_location=None,
                  x_axis_label="total time (ms): base, then new", title=title or None)  # fmt: skip
    left.hbar(y="y", left=0, right="base_ms", height=0.36, source=src, color=DIFF_COLORS["base"], alpha=0.7,
              legend_label="base")  # fmt: skip
    new = left.hbar(y={"field": "y", "transform": _shift(0.38)}, left=0, right="new_ms", height=0.36, source=src,
                    color="color", legend_label="new (coloured: significant change)")  # fmt: skip
    left.legend.location = "bottom_right"
    left.yaxis.ticker = FixedTicker(ticks=list(frame["y"] + 0.19))
    left.yaxis.major_label_overrides = {float(y) + 0.19: theme.plain(t) for y, t in zip(frame["y"], frame["label"])}
    ends = np.concatenate([[0.0], frame["lo"], frame["hi"], frame["pct"]])
    lo, hi = float(ends.min()), float(ends.max())
    pad = 0.06 * (hi - lo) or 1.0
    right = figure(width=int(width_px * 0.42), height=height, y_range=y_range, tools="", toolbar_location=None,
                   x_range=Range1d(lo - pad, hi + pad), x_axis_label="change of the mean per call (%), 95% interval")
    right.yaxis.visible = False
    right.add_layout(Span(location=0, dimension="height", line_color="#444444", line_width=1))
    dots = right.scatter(x="pct", y={"field": "y", "transform": _shift(0.19)}, size=9, color="color", source=src)
    right.add_layout(Whisker(source=src, base={"field": "y", "transform": _shift(0.19)}, lower="lo", upper="hi",
                             dimension="width", line_color="color"))  # fmt: skip
    for fig, r in ((left, new), (right, dots)):
        fig.add_tools(HoverTool(renderers=[r], tooltips=TOOLTIPS))
        fig.ygrid.visible = False
    return row(left, right)


def _shift(by: float) -> Dodge:
    return Dodge(value=by)


def diff_table(diff: pd.DataFrame, width: int = 1100, height: int = 320) -> DataTable:
    """Every row of ``diff`` as a sortable table (source ``diff_table``).

    Counts, totals and means in one time unit, the change of the mean in percent, p and whether it is significant.
    """
    df = diff.reset_index(drop=True).copy()
    times = time_columns(df, [("total_base_ns", "total_base", "total base"),
                               ("total_new_ns", "total_new", "total new"), ("mean_base_ns", "mean_base", "mean base"),
                               ("mean_new_ns", "mean_new", "mean new")])  # fmt: skip
    df["significant"] = df["significant"].map({True: "yes", False: "no"})
    df["p"] = [f"{p:.2g}" for p in df["p_value"]]  # 1e-12, not 0.0000
    cols = [name_column("name", "name", 380), TableColumn(field="count_base", title="calls base", width=70),
            TableColumn(field="count_new", title="calls new", width=70), *times,
            TableColumn(field="delta_mean_pct", title="mean change (%)", width=90,
                        formatter=NumberFormatter(format="+0.0")),
            TableColumn(field="p", title="p", width=70),
            TableColumn(field="significant", title="significant", width=70)]  # fmt: skip
    keep = ["name", "count_base", "count_new", "total_base", "total_new", "mean_base", "mean_new", "delta_mean_pct",
            "p", "significant"]  # fmt: skip
    return data_table(df[keep], cols, "diff_table", width, height)
