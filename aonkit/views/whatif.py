"""What-if figures: the critical path's composition as horizontal bars (a table in, a bokeh figure out)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure

from . import theme

PART_COLORS = {"gpu computation": theme.CLASS_COLORS["computation"],
               "gpu communication": theme.CLASS_COLORS["communication"],
               "gpu memory": theme.CLASS_COLORS["memory"], "launch": "#CC79A7", "cpu": "#56B4E9",
               "host gap": "#999999", "collective wait": "#D55E00", "waits": "#F0E442"}  # fmt: skip
"""Colour per part of :func:`aonkit.analysis.critical_path.composition`."""
PARTS = tuple(PART_COLORS)


def composition_data(comp: pd.DataFrame) -> dict[str, list]:
    """A composition table as the bar source's columns: every part, in a fixed order, with ms and text."""
    t = comp.set_index("part").reindex(list(PARTS)).fillna(0)
    ms = t["time_ns"].to_numpy(np.float64) / 1e6
    return {"part": list(PARTS), "ms": ms.tolist(), "color": [PART_COLORS[p] for p in PARTS],
            "text": [f"{theme.fmt_ns(v * 1e6)} ({s:.0%})" for v, s in zip(ms, t["share"].to_numpy())]}


def composition_figure(comp: pd.DataFrame, width: int = theme.FIG_WIDTH) -> tuple[figure, ColumnDataSource]:
    """Horizontal bars of the critical path's time by part; stream new data into the returned source."""
    source = ColumnDataSource(composition_data(comp))
    fig = figure(y_range=list(reversed(PARTS)), height=260, width=width, tools="", toolbar_location=None,
                 x_axis_label="time on the critical path (ms)")
    fig.hbar(y="part", right="ms", height=0.7, color="color", source=source)
    fig.title.text = theme.plain("critical path by part")
    return fig, source
