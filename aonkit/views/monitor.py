"""Live-monitor figures: samples in, one line chart per metric (a line per device) on a shared time axis out.

:func:`monitor_view` describes the charts (canvas chart specs, drawn by :class:`aonkit.widgets.charts.Charts`)
for a sampler's channels, (device, metric) pairs; :func:`wide` turns long-form samples (``ts_ns``, ``device``,
``metric``, ``value``; see :mod:`aonkit.sources.samplers`) into rows for their one source, ``"s"``, one column
per channel. Streaming, pausing and the polling loop are the widget's (:class:`aonkit.widgets.LiveMonitor`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import theme
from .model_charts import axis, chart

PLOT_HEIGHT = 140
"""Height of each metric's plot, in pixels."""
MIN_LEFT = 72
"""Left margin of every chart (px), wide enough for labels like ``7.45 GiB``: the time axes line up."""

Channel = tuple[int, str]
"""(device, metric): device -1 is the host, else the GPU index."""


def column_name(device: int, metric: str) -> str:
    """The source column of a channel."""
    return f"{metric}@{device}"


def device_label(device: int) -> str:
    """``host`` or ``GPU n``."""
    return "host" if device < 0 else f"GPU {device}"


def wide(samples: pd.DataFrame, channels: Sequence[Channel]) -> dict[str, np.ndarray]:
    """Long-form samples to columns ``t`` (ms since the epoch) and one per channel, a row per sample time.

    Rows are the distinct ``ts_ns`` in increasing order; a channel without a value at a time is NaN; of two
    values of one channel at one time, the later row's is kept. Samples of channels not in ``channels`` are left
    out.
    """
    names = [column_name(d, m) for d, m in channels]
    if samples.empty:
        return {"t": np.empty(0), **{n: np.empty(0) for n in names}}
    ts = samples["ts_ns"].to_numpy(np.int64)
    device = samples["device"].to_numpy(np.int64) if "device" in samples else np.full(len(samples), -1, np.int64)
    m = samples["metric"]
    if isinstance(m.dtype, pd.CategoricalDtype):  # the samplers' tables: no strings to compare
        mcode, metrics = m.cat.codes.to_numpy(np.int64), m.cat.categories.astype(str)
    else:
        mcode, metrics = pd.factorize(m.astype(str), sort=True)
    mcode = np.where(mcode < 0, len(metrics), mcode).astype(np.int64)  # a missing metric: no channel's
    metrics = [*map(str, metrics), ""]
    span = max(int(device.max()), -1) + 2
    pair = mcode * span + (np.maximum(device, -1) + 1)  # one code per (device, metric)
    pairs, pair_row = np.unique(pair, return_inverse=True)
    where = {(int(d), str(name)): i for i, (d, name) in enumerate(channels)}
    col_of = np.array([where.get((int(c % span) - 1, str(metrics[c // span])), -1) for c in pairs], np.int64)
    col = np.where(device < -1, -1, col_of[pair_row])  # no device below -1 (the host)
    times, row = np.unique(ts, return_inverse=True)
    keep = col >= 0
    flat = (row * len(names) + col)[keep][::-1]  # reversed: the first of each cell below is the last row
    cells, first = np.unique(flat, return_index=True)
    out = np.full(len(times) * len(names), np.nan)
    out[cells] = samples["value"].to_numpy(np.float64)[keep][::-1][first]
    out = out.reshape(len(times), len(names))
    return {"t": times / 1e6, **{n: out[:, i] for i, n in enumerate(names)}}


@dataclass
class MonitorView:
    """The monitor's charts.

    Attributes
    ----------
    channels : list of (int, str)
        The channels shown, in source-column order (columns of :func:`wide`).
    charts : list of dict
        One line chart spec per metric (a line per device, legend by device), on source ``"s"``; their time axes
        zoom and pan together.
    """

    channels: list[Channel]
    charts: list[dict]


def monitor_view(channels: Sequence[Channel], width: int = theme.CARD_WIDTH * 2,
                 metrics: Sequence[str] | None = None) -> MonitorView:  # fmt: skip
    """One chart per metric of ``channels`` (only ``metrics`` when given, in that order), a line per device."""
    shown = [(int(d), str(m)) for d, m in channels if metrics is None or m in metrics]
    devices = sorted({d for d, _ in shown})
    palette = theme.DEVICE_COLORS
    color = {d: palette[devices.index(d) % len(palette)] for d in devices}
    order = [m for m in (metrics or ()) if any(m == x for _, x in shown)] or dict.fromkeys(m for _, m in shown)
    charts = []
    for metric in order:  # the order asked for, else the sampler's
        devs = [d for d, m in shown if m == metric]
        marks = [{"kind": "line", "source": "s", "x": "t", "y": column_name(d, metric), "color": color[d],
                  "line_width": 1.5} for d in devs]  # fmt: skip
        legend = ({"location": "right", "items": [{"label": device_label(d), "color": color[d]} for d in devs]}
                  if len(devices) > 1 else None)  # fmt: skip
        y = axis("linear", format="bytes") if metric.endswith("_bytes") else axis("linear")  # 1.7 GiB, not 1.8e9
        spec = chart(metric, axis("time", zoom=True), y, marks, width=width, height=PLOT_HEIGHT, legend=legend)
        spec["min_left"] = MIN_LEFT  # the same left margin: one instant at one x in every chart
        charts.append(spec)
    return MonitorView(shown, charts)
