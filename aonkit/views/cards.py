"""Summary cards: GPU busy, idle breakdown, kernel classes and overlap, top kernels and ops.

Each card is a small bar figure under a ``Div`` headline. Headlines hold only
fixed text and numbers (escaped all the same, with TeX parsing off); kernel and
op names appear only as data fields of the bar sources, drawn as canvas text
and escaped in hover tooltips.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource, Div, HoverTool, LayoutDOM, Range1d
from bokeh.plotting import figure

from ..analysis.overview import Overview
from ..units import cut_text
from . import theme
from ._data import frame_source
from .theme import fmt_ns, fmt_pct

BAR_TOOLTIPS = [("", "@name"), ("time", "@time_text"), ("share", "@share_text")]
LABEL_CHARS = 34
"""Bar labels longer than this are cut (the hover shows the whole name); the bar's numbers take the right side."""


def headline(title: str, value: str, detail: str = "", width: int = theme.CARD_WIDTH) -> Div:
    """A card's headline: title, big value and a detail line, each escaped; TeX parsing off."""
    parts = [f"<div style='font-size:0.85em;color:#555'>{html.escape(title)}</div>",
             f"<div style='font-size:1.6em;font-weight:600'>{html.escape(value)}</div>"]  # fmt: skip
    if detail:
        parts.append(f"<div style='font-size:0.8em;color:#777'>{html.escape(detail)}</div>")
    return Div(text="".join(parts), width=width, disable_math=True)


def bar_data(names: list[str], values: np.ndarray, shares: np.ndarray, colors: list[str]) -> pd.DataFrame:
    """Rows of a bar card: ``pos``, ``name``, ``label`` (cut), ``value_ns``, ``share`` and their display text.

    The display text is ``time_text``, ``share_text`` (for the hover) and ``value_text`` (both, drawn on the bar's row).
    """
    values = np.asarray(values, dtype=np.float64)
    shares = np.asarray(shares, dtype=np.float64)
    times, pcts = [fmt_ns(v) for v in values], [fmt_pct(s) for s in shares]
    return pd.DataFrame(
        {
            "pos": np.arange(len(names), dtype=np.float64),
            "name": [str(n) for n in names],
            "label": [cut_text(n, LABEL_CHARS) for n in map(str, names)],
            "value_ns": values,
            "share": shares,
            "time_text": times,
            "share_text": pcts,
            "value_text": [f"{t} · {p}" for t, p in zip(times, pcts)],
            "color": colors,
        }
    )


def bar_figure(data: pd.DataFrame, name: str, width: int = theme.CARD_WIDTH, rows: int | None = None) -> figure:
    """Horizontal bars of :func:`bar_data`, first row on top, labels drawn in the plot; source named ``name``."""
    n = max(rows if rows is not None else len(data), 1)
    top = max(float(data["value_ns"].max()) if len(data) else 0.0, 1.0) * 1.02
    fig = figure(width=width, height=max(60, 22 * n + 30), toolbar_location=None, tools="",
                 y_range=Range1d(n - 0.5, -0.5), x_range=Range1d(0, top),
                 x_axis_type=None, y_axis_type=None)  # no axes or grids: fewer models to build and send
    src = frame_source(data, name)
    bars = fig.hbar(y="pos", right="value_ns", height=0.75, source=src, fill_color="color", line_color=None,
                    fill_alpha=0.6)  # fmt: skip
    fig.text(x=0, y="pos", text="label", source=src, x_offset=3, text_baseline="middle", text_font_size="8pt")
    # each bar's time and share, right-aligned at the card's edge (readable without hovering)
    fig.text(x=top, y="pos", text="value_text", source=src, x_offset=-3, text_align="right", text_baseline="middle",
             text_font_size="8pt", text_color="#333333")
    fig.add_tools(HoverTool(renderers=[bars], tooltips=BAR_TOOLTIPS))
    fig.outline_line_color = None
    return fig


def busy_card(ov: Overview, width: int = theme.CARD_WIDTH) -> LayoutDOM:
    """GPU busy share of the GPU span (first to last kernel, memcpy or memset), with busy and idle bars."""
    busy, span = ov.gpu_busy_ns, ov.gpu_span_ns
    idle = span - busy
    share = np.array([busy, idle]) / span if span > 0 else np.full(2, np.nan)
    data = bar_data(["GPU work running", "GPU idle"], np.array([busy, idle]), share,
                    [theme.CLASS_COLORS["computation"], theme.IDLE_COLORS["other"]])  # fmt: skip
    value = fmt_pct(ov.gpu_busy_fraction) if span > 0 else "no GPU kernels"
    n = len(ov.gpu)  # one row per device (per rank and device in a job)
    where = "first to last GPU event" + (f", summed over {n} GPUs" if n > 1 else "")
    note = f"of the GPU span {fmt_ns(span)} ({where}); trace span {fmt_ns(ov.summary.span_ns)}"
    head = headline("GPU busy", value, note, width)
    return column(head, bar_figure(data, "card_busy", width))


def idle_card(ov: Overview, width: int = theme.CARD_WIDTH) -> LayoutDOM:
    """GPU idle time within the GPU span, exact, by cause (host wait, kernel wait, other)."""
    idle = ov.idle
    cats = idle["idle_category"].tolist()
    data = bar_data([theme.IDLE_LABELS.get(c, c) for c in cats], idle["idle_ns"].to_numpy(), idle["share"].to_numpy(),
                    [theme.IDLE_COLORS.get(c, "#999999") for c in cats])  # fmt: skip
    head = headline("GPU idle", fmt_ns(float(idle["idle_ns"].sum())),
                    "no kernel, memcpy or memset on any stream, by cause", width)  # fmt: skip
    return column(head, bar_figure(data, "card_idle", width))


def overlap_card(ov: Overview, width: int = theme.CARD_WIDTH) -> LayoutDOM:
    """Communication/computation overlap and GPU time per kernel class."""
    c = ov.classes.set_index("class").reindex(list(theme.CLASS_COLORS))
    total = c["total_ns"].fillna(0).to_numpy(np.float64)
    share = total / total.sum() if total.sum() > 0 else np.full(len(total), np.nan)
    data = bar_data(list(theme.CLASS_COLORS), total, share, list(theme.CLASS_COLORS.values()))
    pct = ov.comm_overlap_pct
    value = fmt_pct(pct / 100) if np.isfinite(pct) else "no communication"
    head = headline("communication overlapped by computation", value, "GPU time per kernel class", width)
    return column(head, bar_figure(data, "card_classes", width))


def top_card(
    names: pd.Series, values: pd.Series, title: str, name: str, n: int = 5, width: int = theme.CARD_WIDTH
) -> LayoutDOM:
    """The ``n`` first rows (already sorted, most first) as bars; shares are of ``values``' total."""
    v = values.to_numpy(np.float64)
    total = v.sum()
    share = v / total if total > 0 else np.full(len(v), np.nan)
    k = min(n, len(v))
    data = bar_data(names.head(n).astype(str).tolist(), v[:k], share[:k], [theme.CLASS_COLORS["computation"]] * k)
    covered = float(share[:n].sum()) if len(v) else np.nan
    head = headline(title, f"{k} of {len(v)}", f"{fmt_pct(covered)} of the time" if k else "none", width)
    return column(head, bar_figure(data, name, width, rows=n))


def summary_cards(
    ov: Overview, n: int = 5, width: int = theme.CARD_WIDTH
) -> tuple[LayoutDOM, dict[str, ColumnDataSource]]:
    """All cards of an :class:`~aonkit.analysis.overview.Overview`.

    Parameters
    ----------
    ov : Overview
        From :func:`aonkit.analysis.overview.overview`.
    n : int
        Rows of the top-kernel and top-op cards.
    width : int
        Card width in pixels.

    Returns
    -------
    layout : bokeh.models.LayoutDOM
        Busy, idle and class cards in one row; top kernels and ops in the next.
    sources : dict of str to ColumnDataSource
        ``busy``, ``idle``, ``classes``, ``top_kernels``, ``top_ops``: one row
        per bar with ``name``, ``label``, ``value_ns``, ``share``, ``time_text``,
        ``share_text``, ``color``.
    """
    kernels = top_card(ov.kernels["name"], ov.kernels["total_ns"], "top kernels by GPU time", "card_top_kernels", n,
                       width)  # fmt: skip
    ops = top_card(ov.ops["op_name"], ov.ops["gpu_ns"], "top ops by GPU time launched", "card_top_ops", n, width)
    layout = column(row(busy_card(ov, width), idle_card(ov, width), overlap_card(ov, width)), row(kernels, ops))
    found = {m.name: m for m in layout.select({"type": ColumnDataSource})}
    keys = {"busy": "card_busy", "idle": "card_idle", "classes": "card_classes", "top_kernels": "card_top_kernels",
            "top_ops": "card_top_ops"}  # fmt: skip
    return layout, {k: found[v] for k, v in keys.items()}
