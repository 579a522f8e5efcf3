"""``LiveMonitor``: a sampler's metrics streaming into the monitor figures, with rollover and pause.

The figures are built in :mod:`aonkit.views.monitor`; this widget adds the polling loop, the pause button and
the status line.
"""

from __future__ import annotations

import asyncio

import ipywidgets as w
from jupyter_bokeh.widgets import BokehModel

from ..sources.samplers import Sampler
from ..views.monitor import monitor_view, wide
from ._bokehjs import ensure_bokehjs

__all__ = ["LiveMonitor", "wide"]


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
        self.view = monitor_view(sampler.metrics)
        self.source = self.view.source
        self.pause = w.ToggleButton(value=False, description="pause", icon="pause", tooltip="stop updating the plots")
        self.status = w.Label(value="")
        self._task: asyncio.Task | None = None
        super().__init__([w.HBox([self.pause, self.status]), BokehModel(self.view.layout)])
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
