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

from ..sources.samples import part_label, split_metric
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


def wide(samples: pd.DataFrame, channels: Sequence[Channel]) -> dict[str, np.ndarray]:
    """Long-form samples to columns ``t`` (ms since the epoch) and one per channel, a row per sample time.

    Rows are the distinct ``ts_ns`` in increasing order; a channel without a value at a time is NaN; of two
    values of one channel at one time, the later row's is kept. Samples of channels not in ``channels`` are left
    out. (:class:`WideLayout` does the same for a caller that asks again and again for the same channels.)
    """
    layout = WideLayout(channels)
    t, values = layout.block(samples)
    return {"t": t, **{n: values[:, i] for i, n in enumerate(layout.names)}}


class WideLayout:
    """:func:`wide` for fixed ``channels``, as one block: what depends only on the channels is worked out once.

    ``names``: the source columns of the channels (:func:`column_name`), in order.
    """

    def __init__(self, channels: Sequence[Channel]) -> None:
        self.channels = [(int(d), str(m)) for d, m in channels]
        self.names = [column_name(d, m) for d, m in self.channels]
        self._where = {c: i for i, c in enumerate(self.channels)}
        self._columns: dict[tuple, np.ndarray] = {}  # (metric names, span) -> column of each metric code x device
        self._picks: tuple[list, np.ndarray] | None = None  # a ring's channels -> the ring column of each channel

    def block(self, samples: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Times (ms since the epoch, increasing) and values (times x channels, NaN where none), as :func:`wide`."""
        width = len(self.names)
        if samples.empty:
            return np.empty(0), np.empty((0, width))
        ts = samples["ts_ns"].to_numpy(np.int64)
        device = samples["device"].to_numpy(np.int64) if "device" in samples else np.full(len(samples), -1, np.int64)
        m = samples["metric"]
        if isinstance(m.dtype, pd.CategoricalDtype):  # the samplers' tables: no strings to compare
            mcode, metrics = m.cat.codes.to_numpy(np.int64), m.cat.categories
        else:
            mcode, metrics = pd.factorize(m.astype(str), sort=True)
        mcode = np.where(mcode < 0, len(metrics), mcode).astype(np.int64)  # a missing metric: no channel's
        span = max(int(device.max()), -1) + 2
        key = (tuple(map(str, metrics)), span)
        table = self._columns.get(key)
        if table is None:  # every (metric code, device) pair's column, -1 for none; the last code: no metric
            names = [*key[0], ""]
            table = np.array([self._where.get((d - 1, name), -1) for name in names for d in range(span)], np.int64)
            if len(self._columns) > 8:
                self._columns.clear()
            self._columns[key] = table
        col = np.where(device < -1, -1, table[mcode * span + (np.maximum(device, -1) + 1)])  # none below the host
        times, row = np.unique(ts, return_inverse=True)
        keep = col >= 0
        flat = (row * width + col)[keep][::-1]  # reversed: the first of each cell below is the last row
        cells, first = np.unique(flat, return_index=True)
        out = np.full(len(times) * width, np.nan)
        out[cells] = samples["value"].to_numpy(np.float64)[keep][::-1][first]
        return times / 1e6, out.reshape(len(times), width)

    def rows(self, ts: np.ndarray, values: np.ndarray, channels: Sequence[Channel]) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`block`, of a ring's rows: ``ts`` (n,) in ns, ``values`` (n, len(channels)) in ``channels`` order.

        A time that repeats keeps its last row (as :meth:`block` keeps each channel's last value).
        """
        if self._picks is None or self._picks[0] != channels:
            where = {(int(d), str(m)): i for i, (d, m) in enumerate(channels)}
            self._picks = (list(channels), np.array([where.get(c, -1) for c in self.channels], np.int64))
        pick = self._picks[1]
        if len(ts) > 1 and not (ts[1:] > ts[:-1]).all():  # a clock stepped back: in time order, the last of each
            times, first = np.unique(ts[::-1], return_index=True)
            values = values[len(ts) - 1 - first]
            ts = times
        out = values[:, np.maximum(pick, 0)]
        out[:, pick < 0] = np.nan
        return ts / 1e6, out


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


DASHES = ([6, 3], [2, 2], [8, 3, 2, 3], [1, 4])
"""Line dashes of a device's parts, in turn (the whole device's line is solid, in the device's colour)."""


def monitor_view(channels: Sequence[Channel], width: int = theme.CARD_WIDTH * 2,
                 metrics: Sequence[str] | None = None) -> MonitorView:  # fmt: skip
    """One chart per metric of ``channels`` (only ``metrics`` when given, in that order), a line per device.

    A metric of part of a device (:func:`~aonkit.sources.samples.split_metric`: a MIG GPU instance, a process) is
    drawn in its metric's chart, in its device's colour, dashed, labelled ``GPU 1 gi2`` or ``GPU 0 pid 7``;
    ``metrics`` names the charts.
    """
    split = [(int(d), str(m), *split_metric(str(m))) for d, m in channels]  # (device, metric, base, tag)
    split = [c for c in split if metrics is None or c[2] in metrics]
    shown = [(d, m) for d, m, _, _ in split]
    devices = sorted({d for d, _ in shown})
    palette = theme.DEVICE_COLORS
    color = {d: palette[devices.index(d) % len(palette)] for d in devices}
    by_base: dict[str, list[tuple[int, str, str]]] = {}  # each chart's lines, in the sampler's order
    for d, m, base, tag in split:
        by_base.setdefault(base, []).append((d, m, tag))
    order = [m for m in (metrics or ()) if m in by_base] or by_base
    charts = []
    for base in order:  # the order asked for, else the sampler's
        lines = by_base[base]
        dash: dict[tuple[int, str], list[int]] = {}
        for d, _, tag in lines:
            if tag:
                dash[(d, tag)] = DASHES[sum(k[0] == d for k in dash) % len(DASHES)]
        style = [{"color": color[d], **({"dash": dash[(d, tag)]} if tag else {})} for d, _, tag in lines]
        marks = [{"kind": "line", "source": "s", "x": "t", "y": column_name(d, m), "line_width": 1.5, **st}
                 for (d, m, _), st in zip(lines, style)]  # fmt: skip
        legend = ({"location": "right", "items": [{"label": part_label(d, tag), **st}
                                                  for (d, _, tag), st in zip(lines, style)]}
                  if len(lines) > 1 or len(devices) > 1 else None)  # fmt: skip
        y = axis("linear", format="bytes") if base.endswith("_bytes") else axis("linear")  # 1.7 GiB, not 1.8e9
        spec = chart(base, axis("time", zoom=True), y, marks, width=width, height=PLOT_HEIGHT, legend=legend)
        spec["min_left"] = MIN_LEFT  # the same left margin: one instant at one x in every chart
        charts.append(spec)
    return MonitorView(shown, charts)
