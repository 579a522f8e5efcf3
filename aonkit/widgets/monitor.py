"""``LiveMonitor``: a sampler's metrics streaming into a bokeh figure, with rollover and pause."""

from __future__ import annotations

import asyncio

import ipywidgets as w
import numpy as np
import pandas as pd
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, DatetimeTickFormatter
from bokeh.plotting import figure
from jupyter_bokeh.widgets import BokehModel

from ..sources.samplers import Sampler
from ..views import theme
from ._bokehjs import ensure_bokehjs


def wide(samples: pd.DataFrame, metrics: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Long-form samples to columns ``t`` (ms since epoch, for a datetime axis) and one per metric."""
    if samples.empty:
        return {"t": np.empty(0), **{m: np.empty(0) for m in metrics}}
    table = samples.pivot_table(index="ts_ns", columns="metric", values="value", observed=False, aggfunc="last")
    out = {"t": table.index.to_numpy(np.int64) / 1e6}
    for m in metrics:
        out[m] = table[m].to_numpy(np.float64) if m in table.columns else np.full(len(table), np.nan)
    return out


class LiveMonitor(w.VBox):
    """Stream ``sampler``'s metrics, one small plot per metric on a shared time axis.

    Parameters
    ----------
    sampler : Sampler
        Any :class:`aonkit.sources.samplers.Sampler`, e.g.
        :class:`~aonkit.sources.samplers.HostSampler`. Started here if it is not running.
    interval_s : float
        How often the plot pulls new samples.
    rollover : int
        Points kept in the browser per metric.
    """

    def __init__(self, sampler: Sampler, interval_s: float = 0.5, rollover: int = 600) -> None:
        self.sampler = sampler
        self.interval_s = interval_s
        self.rollover = rollover
        self.cursor = 0
        self.source = ColumnDataSource(wide(pd.DataFrame(columns=["ts_ns", "metric", "value"]), sampler.metrics))
        plots = []
        for i, metric in enumerate(sampler.metrics):
            shared = {"x_range": plots[0].x_range} if plots else {}
            fig = figure(height=140, width=theme.CARD_WIDTH * 2, x_axis_type="datetime",
                         tools="xpan,xwheel_zoom,reset", **shared)
            fig.title.text = theme.plain(metric)
            fig.line("t", metric, source=self.source, color=theme.ROOF_COLORS[1 + i % (len(theme.ROOF_COLORS) - 1)])
            fig.xaxis.formatter = DatetimeTickFormatter(seconds="%H:%M:%S", minsec="%H:%M:%S")
            plots.append(fig)
        self.pause = w.ToggleButton(value=False, description="pause", icon="pause", tooltip="stop updating the plots")
        self.status = w.Label(value="")
        self._task: asyncio.Task | None = None
        super().__init__([w.HBox([self.pause, self.status]), BokehModel(column(*plots))])
        sampler.start()
        self._start()

    def poll(self) -> int:
        """Move new samples into the plot (unless paused); return how many sample times arrived."""
        if self.pause.value:
            return 0
        frame, self.cursor = self.sampler.read(self.cursor)
        data = wide(frame, self.sampler.metrics)
        if len(data["t"]):
            self.source.stream(data, rollover=self.rollover)
        self.status.value = f"{self.cursor:,} samples"
        return len(data["t"])

    async def _run(self) -> None:
        while True:
            self.poll()
            await asyncio.sleep(self.interval_s)

    def _start(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no kernel loop (a script): call poll() yourself
        self._task = loop.create_task(self._run())

    def _repr_mimebundle_(self, **kwargs: object) -> dict:
        ensure_bokehjs()
        return super()._repr_mimebundle_(**kwargs)

    def close(self) -> None:
        """Stop polling and the sampler, and close the widget."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.sampler.stop()
        super().close()
