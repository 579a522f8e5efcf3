"""``LiveMonitor``: a sampler's metrics streaming into the monitor figures, with rollover, pause and export.

The charts are described in :mod:`aonkit.views.monitor` (one per metric, a line per GPU) and drawn on canvases
(:mod:`aonkit.widgets.charts`); this widget adds the polling loop, the pause button, the status line and
:meth:`LiveMonitor.export` (the last minutes as a bundle). Each poll sends the page only its new rows, and the
page draws once a frame whatever arrived: with eight GPUs (272 channels) bokeh figures fell behind the samples
by 0.7 s every second on a 2-CPU machine (``bench/monitor_page.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import ipywidgets as w
import numpy as np
import pandas as pd

from ..sources.samplers import Sampler
from ..views.monitor import WideLayout, monitor_view, wide
from ._bokehjs import TextWidget
from .charts import Charts

__all__ = ["LiveMonitor", "wide"]


class LiveMonitor(TextWidget, w.VBox):
    """Stream ``sampler``'s metrics, one small plot per metric on a shared time axis.

    Parameters
    ----------
    sampler : Sampler
        Any :class:`aonkit.sources.samplers.Sampler`, e.g.
        :class:`~aonkit.sources.samplers.HostSampler`. Started here if it is not running.
    interval_s : float
        How often the plot pulls new samples.
    rollover : int
        Points kept in the browser per channel.
    metrics : sequence of str, optional
        The metrics to plot (default: all of the sampler's). Every metric is
        still sampled and exported.

    Ctrl + wheel over a chart zooms the time axis of all charts, a drag pans it, a double click follows the
    samples again. When the sampler's channels change (a daemon's reader after GPUs appeared:
    :meth:`aonkit.live.reader.LiveReader.read`), the charts are laid out again for the new channels, and what
    they held is kept.
    """

    def __init__(self, sampler: Sampler, interval_s: float = 0.5, rollover: int = 600,
                 metrics: Sequence[str] | None = None) -> None:  # fmt: skip
        self.sampler = sampler
        self.interval_s = interval_s
        self.rollover = rollover
        self.cursor = 0
        channels = getattr(sampler, "channels", None) or [(-1, m) for m in sampler.metrics]
        self._channels, self._metrics = list(channels), metrics
        self.view = monitor_view(channels, metrics=metrics)
        self._layout = WideLayout(self.view.channels)
        self.charts = Charts(self.view.charts, {"s": wide(pd.DataFrame(), self.view.channels)}, columns=1)
        self.source = self.charts.sources["s"]
        self.pause = w.ToggleButton(value=False, description="pause", icon="pause", tooltip="stop updating the plots")
        self.status = w.Label(value="")
        self._task: asyncio.Task | None = None
        super().__init__([w.HBox([self.pause, self.status]), self.charts])
        sampler.start()
        self._start()

    def poll(self) -> int:
        """Move new samples into the plot (unless paused); return how many sample times arrived."""
        if self.pause.value:
            return 0
        read_rows = getattr(self.sampler, "read_rows", None)  # a ring's rows as they are: no long form between
        rows = read_rows(self.cursor) if callable(read_rows) else None
        if rows is not None:
            ts, block, channels, self.cursor = rows
        else:
            frame, self.cursor = self.sampler.read(self.cursor)
            channels = getattr(self.sampler, "channels", None)
        if channels and channels != self._channels:
            self._relayout(channels)
        # one block of rows x channels: no column by column on the way
        t, values = self._layout.rows(ts, block, channels) if rows is not None else self._layout.block(frame)
        if len(t):
            self.source.stream_array(self._columns, np.column_stack([t, values]), rollover=self.rollover)
        self.status.value = f"{self.cursor:,} samples"
        return len(t)

    @property
    def _columns(self) -> list[str]:
        return ["t", *self._layout.names]

    def _relayout(self, channels: Sequence[tuple[int, str]]) -> None:
        """Charts for ``channels`` in place of the old ones, holding what those held (NaN for a new channel).

        The page gets the new specs and the columns in one message and builds its canvases again; a zoomed time
        axis stays zoomed.
        """
        old = self.source.data
        self._channels = list(channels)
        self.view = monitor_view(channels, metrics=self._metrics)
        self._layout = WideLayout(self.view.channels)
        n = len(old["t"])
        names = list(wide(pd.DataFrame(), self.view.channels))
        with self.charts.hold_sync():
            self.charts.spec = {**self.charts.spec, "charts": list(self.view.charts)}
            self.source.data = {k: old[k] if k in old else np.full(n, np.nan) for k in names}

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

    def export(self, out: str | Path, minutes: float = 5.0) -> Path:
        """Write the sampler's last ``minutes`` as a bundle folder; return it.

        From a sampler's ring, all that it still holds of them; from a daemon's reader (a sampler with ``window``:
        :meth:`aonkit.live.reader.LiveReader.window`), its Parquet files too, so the minutes before a ring it
        followed (a restarted daemon, GPUs found late) are in. The bundle has no profiler trace: its trace is the
        exported span (see :mod:`aonkit.sources.bundle`); ``aonkit.load(out)`` gives it with the samples.
        """
        from ..sources.bundle import write_bundle
        from ..sources.samplers import samples_table

        t1 = time.time_ns()
        t0 = t1 - int(minutes * 60e9)
        window = getattr(self.sampler, "window", None)
        frame = samples_table(window(t0, t1) if callable(window) else self.sampler.read(0)[0])
        frame = frame[frame["ts_ns"] >= t0].reset_index(drop=True)
        if len(frame):
            t0 = int(frame["ts_ns"].iloc[0])
        manifest = {"status": "ok", "t0_ns": t0, "t1_ns": t1, "traced": False, "clock": "time.time_ns",
                    "source": "LiveMonitor.export", "samplers": [{"type": type(self.sampler).__name__,
                                                                  "metrics": list(self.sampler.metrics)}]}
        return write_bundle(Path(out), None, frame, manifest)


    def stop(self) -> None:
        """Stop polling and the sampler; the plots stay on the page with what they have drawn."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
            self.poll()  # the samples that arrived since the last poll
        ended = self.sampler.stop()
        self.pause.disabled = True
        stuck = f" · {self.sampler.stuck}" if ended is False and getattr(self.sampler, "stuck", None) else ""
        self.status.value = f"stopped · {self.cursor:,} samples{stuck}"

    def close(self) -> None:
        """Stop polling and the sampler, and close the widget (it leaves the page)."""
        self.stop()
        super().close()
