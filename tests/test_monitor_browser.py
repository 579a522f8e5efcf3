"""``LiveMonitor`` in a real JupyterLab page when its sampler's channels change (a daemon's GPUs found late).

The daemon test (``tests/test_daemon_gpus_later.py``) checks the reader and the monitor's sources in process; this
checks what the person sees: the page builds the new GPU chart beside the host's, draws both, and keeps streaming.
The sampler in the notebook is a small stand-in behind the :class:`~aonkit.sources.samplers.Sampler` protocol
whose channels grow after a few reads, as :class:`~aonkit.live.reader.LiveReader`'s do when it follows the daemon
to its new ring.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aonkit.views.theme import DEVICE_COLORS

from .browser import browser_page, color_pixels, jupyter_lab, not_blank

pytestmark = pytest.mark.slow

CELL = """
import os
import time
import pandas as pd
from aonkit.widgets import LiveMonitor

class GpusFoundLate:
    # the host's CPU from the start; two GPUs' utilization from the first read after the test makes the file GROW
    # (the reader's channels after the daemon found its GPUs)
    def __init__(self):
        self.channels, self.metrics, self.reads = [(-1, "cpu_percent")], ("cpu_percent",), 0

    def start(self):
        pass

    def stop(self):
        pass

    def read(self, cursor=0):
        self.reads += 1
        if len(self.channels) == 1 and os.path.exists(GROW):
            self.channels = self.channels + [(0, "gpu_util_pct"), (1, "gpu_util_pct")]
            self.metrics = ("cpu_percent", "gpu_util_pct")
        now = time.time_ns()
        rows = [(now, d, m, 10.0 * (d + 2) + self.reads % 7) for d, m in self.channels]
        return pd.DataFrame(rows, columns=["ts_ns", "device", "metric", "value"]), cursor + 1

monitor = LiveMonitor(GpusFoundLate(), interval_s=0.2)
monitor
"""

CHARTS = """() => {
  const out = [...document.querySelectorAll('.jp-OutputArea .aon-charts')];
  return out.map((root) => ({drawn: Number(root.parentElement.dataset.drawn || 0),
                             titles: [...root.querySelectorAll('canvas')].map((c) => c.getAttribute('aria-label'))}));
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    root = tmp_path_factory.mktemp("monitor")
    (root / "notebooks").mkdir()
    source = f"GROW = {str(root / 'grow')!r}\n" + CELL.strip()
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}
    nb = {"cells": [cell], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                       "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    (root / "notebooks" / "monitor.ipynb").write_text(json.dumps(nb))
    with jupyter_lab(root) as server:
        base, token = server.split("|")
        yield base, token, root


def test_the_page_adds_the_gpu_chart_when_the_channels_grow_and_streams_on(lab: tuple[str, str, Path]) -> None:
    from .test_gallery_browser import run_all

    base, token, root = lab
    with browser_page(allow_hosts=(base,)) as (page, blocked):
        # GIVEN a live monitor over a sampler that has only the host's channel at first
        state = run_all(page, base, token, "monitor.ipynb")
        assert all(c["count"] and not c["errors"] for c in state["cells"]), state
        page.wait_for_function(f"() => ({CHARTS})().length === 1 && ({CHARTS})()[0].drawn > 3", timeout=30_000)
        assert page.evaluate(CHARTS)[0]["titles"] == ["cpu_percent"]  # the host's chart alone, drawing
        # WHEN the sampler's channels grow, THEN the page builds the GPU chart beside the host's
        (root / "grow").touch()
        page.wait_for_function(f"() => ({CHARTS})()[0].titles.length === 2", timeout=30_000)
        grown = page.evaluate(CHARTS)[0]
        assert grown["titles"] == ["cpu_percent", "gpu_util_pct"], grown
        # AND it keeps drawing the samples that arrive after
        deadline = time.monotonic() + 10
        while page.evaluate(CHARTS)[0]["drawn"] <= grown["drawn"] + 3 and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        assert page.evaluate(CHARTS)[0]["drawn"] > grown["drawn"] + 3
        # AND both charts draw their lines: the host's (blue) and each GPU's (orange, green: the palette's order).
        # A legend's swatch alone gives 17 pixels of its colour (seen with the GPUs' values NaN), the lines 190-540;
        # what the host's chart keeps across the change is checked in process
        lines = {"cpu_percent": DEVICE_COLORS[:1], "gpu_util_pct": DEVICE_COLORS[1:3]}
        for canvas in page.query_selector_all(".jp-OutputArea .aon-charts canvas"):
            canvas.scroll_into_view_if_needed()
            png, title = canvas.screenshot(), canvas.get_attribute("aria-label")
            assert not_blank(png) > 10, title
            drawn = {c: color_pixels(png, c) for c in lines[title]}
            assert min(drawn.values()) > 60, (title, drawn)
        assert not blocked, blocked
        assert not [e for e in page.aonkit_errors if e.startswith("page error")], page.aonkit_errors
