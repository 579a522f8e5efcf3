"""Live-monitor figures: samples in, one line plot per metric (a line per device) on a shared time axis out.

:func:`monitor_view` builds the plots and their empty source for a sampler's
channels, (device, metric) pairs; :func:`wide` turns long-form samples
(``ts_ns``, ``device``, ``metric``, ``value``; see :mod:`aonkit.sources.samplers`)
into rows for that source, one column per channel. Streaming, pausing and the
polling loop are the widget's (:class:`aonkit.widgets.LiveMonitor`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, DatetimeTickFormatter, LayoutDOM, NumeralTickFormatter
from bokeh.plotting import figure

from . import theme

PLOT_HEIGHT = 140
"""Height of each metric's plot, in pixels."""

Channel = tuple[int, str]
"""(device, metric): device -1 is the host, else the GPU index."""


def column_name(device: int, metric: str) -> str:
    """The source column of a channel."""
    return f"{metric}@{device}"


def device_label(device: int) -> str:
    """``host`` or ``GPU n``."""
    return "host" if device < 0 else f"GPU {device}"


def wide(samples: pd.DataFrame, channels: Sequence[Channel]) -> dict[str, np.ndarray]:
    """Long-form samples to columns ``t`` (ms since epoch, for a datetime axis) and one per channel."""
    names = [column_name(d, m) for d, m in channels]
    if samples.empty:
        return {"t": np.empty(0), **{n: np.empty(0) for n in names}}
    device = samples["device"].to_numpy(np.int64) if "device" in samples else np.full(len(samples), -1)
    key = pd.Series([column_name(int(d), str(m)) for d, m in zip(device, samples["metric"].astype(str))])
    table = pd.DataFrame({"ts_ns": samples["ts_ns"].to_numpy(), "key": key, "value": samples["value"].to_numpy()})
    table = table.pivot_table(index="ts_ns", columns="key", values="value", aggfunc="last")
    out = {"t": table.index.to_numpy(np.int64) / 1e6}
    for n in names:
        out[n] = table[n].to_numpy(np.float64) if n in table.columns else np.full(len(table), np.nan)
    return out


@dataclass
class MonitorView:
    """The monitor's bokeh models.

    Attributes
    ----------
    source : ColumnDataSource
        Columns ``t`` and one per channel (rows from :func:`wide`); stream into it.
    channels : list of (int, str)
        The channels shown, in source-column order.
    figures : list of bokeh figure
        One line plot per metric (a line per device, legend by device), x ranges shared.
    layout : LayoutDOM
        The figures in a column.
    """

    source: ColumnDataSource
    channels: list[Channel]
    figures: list
    layout: LayoutDOM


def monitor_view(channels: Sequence[Channel], width: int = theme.CARD_WIDTH * 2,
                 metrics: Sequence[str] | None = None) -> MonitorView:  # fmt: skip
    """An empty source and one plot per metric of ``channels`` (only ``metrics`` when given), a line per device."""
    shown = [(int(d), str(m)) for d, m in channels if metrics is None or m in metrics]
    source = ColumnDataSource(wide(pd.DataFrame(columns=["ts_ns", "device", "metric", "value"]), shown))
    devices = sorted({d for d, _ in shown})
    palette = theme.ROOF_COLORS[1:] or theme.ROOF_COLORS
    plots: list = []
    order = [m for m in (metrics or ()) if any(m == x for _, x in shown)] or dict.fromkeys(m for _, m in shown)
    for metric in order:  # the order asked for, else the sampler's
        shared = {"x_range": plots[0].x_range} if plots else {}
        fig = figure(height=PLOT_HEIGHT, width=width, x_axis_type="datetime", tools="xpan,xwheel_zoom,reset",
                     **shared)
        fig.title.text = theme.plain(metric)
        for d in (d for d, m in shown if m == metric):
            fig.line("t", column_name(d, metric), source=source, color=palette[devices.index(d) % len(palette)],
                     legend_label=device_label(d))
        fig.legend.location = "top_left"
        fig.legend.visible = len(devices) > 1
        # sub-second ticks with their second (bokeh's default drew "800ms 000ms 200ms" across a second)
        fig.xaxis.formatter = DatetimeTickFormatter(milliseconds="%H:%M:%S.%1N", seconds="%H:%M:%S",
                                                    minsec="%H:%M:%S")  # fmt: skip
        if metric.endswith("_bytes"):
            fig.yaxis.formatter = NumeralTickFormatter(format="0.0 ib")  # 1.7 GiB, not 1.784e+9
        plots.append(fig)
    return MonitorView(source, shown, plots, column(*plots))
