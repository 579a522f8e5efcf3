"""Live-monitor figures: a samples table in, one small line plot per metric on a shared time axis out.

:func:`monitor_view` builds the plots and their empty source; :func:`wide`
turns long-form samples (``ts_ns``, ``metric``, ``value``; see
:mod:`aonkit.sources.samplers`) into rows for that source. Streaming, pausing
and the polling loop are the widget's (:class:`aonkit.widgets.LiveMonitor`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, DatetimeTickFormatter, LayoutDOM
from bokeh.plotting import figure

from . import theme

PLOT_HEIGHT = 140
"""Height of each metric's plot, in pixels."""


def wide(samples: pd.DataFrame, metrics: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Long-form samples to columns ``t`` (ms since epoch, for a datetime axis) and one per metric."""
    if samples.empty:
        return {"t": np.empty(0), **{m: np.empty(0) for m in metrics}}
    table = samples.pivot_table(index="ts_ns", columns="metric", values="value", observed=False, aggfunc="last")
    out = {"t": table.index.to_numpy(np.int64) / 1e6}
    for m in metrics:
        out[m] = table[m].to_numpy(np.float64) if m in table.columns else np.full(len(table), np.nan)
    return out


@dataclass
class MonitorView:
    """The monitor's bokeh models.

    Attributes
    ----------
    source : ColumnDataSource
        Columns ``t`` and one per metric (rows from :func:`wide`); stream into it.
    figures : list of bokeh figure
        One line plot per metric, x ranges shared.
    layout : LayoutDOM
        The figures in a column.
    """

    source: ColumnDataSource
    figures: list
    layout: LayoutDOM


def monitor_view(metrics: tuple[str, ...], width: int = theme.CARD_WIDTH * 2) -> MonitorView:
    """An empty source and one line plot per metric of ``metrics`` on a shared datetime axis."""
    source = ColumnDataSource(wide(pd.DataFrame(columns=["ts_ns", "metric", "value"]), metrics))
    plots: list = []
    for i, metric in enumerate(metrics):
        shared = {"x_range": plots[0].x_range} if plots else {}
        fig = figure(height=PLOT_HEIGHT, width=width, x_axis_type="datetime", tools="xpan,xwheel_zoom,reset",
                     **shared)
        fig.title.text = theme.plain(metric)
        fig.line("t", metric, source=source, color=theme.ROOF_COLORS[1 + i % (len(theme.ROOF_COLORS) - 1)])
        fig.xaxis.formatter = DatetimeTickFormatter(seconds="%H:%M:%S", minsec="%H:%M:%S")
        plots.append(fig)
    return MonitorView(source, plots, column(*plots))
