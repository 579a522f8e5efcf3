"""Widgets in a real IPython kernel: the live monitor's loop, pause, and the dashboard's display."""

from __future__ import annotations

from .kernel_run import run_cells, text_of


def test_live_monitor_streams_and_pauses() -> None:
    # GIVEN a monitor on the host sampler in a real kernel, WHEN the kernel's loop runs for a while
    out = run_cells(
        "import asyncio\nfrom aonkit.widgets import LiveMonitor\nfrom aonkit.sources.samplers import HostSampler\n"
        "m = LiveMonitor(HostSampler(interval_s=0.05), interval_s=0.1, rollover=5)\nm",
        "await asyncio.sleep(1.5)\nn1 = len(m.source.data['t'])\nprint('points', n1, m.sampler.read(0)[1] > 10)",
        "m.pause.value = True\nawait asyncio.sleep(0.3)\nk = len(m.source.data['t']); c = m.cursor\n"
        "await asyncio.sleep(0.6)\nprint('paused', c == m.cursor, len(m.source.data['t']) == k)\n"
        "m.close(); print('stopped', m.sampler._thread is None)",
    )
    # THEN it displays as a widget, keeps at most `rollover` points, and pausing stops the updates
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in out[0])
    assert text_of(out[1]).split() == ["points", "5", "True"]
    assert text_of(out[2]).split() == ["paused", "True", "True", "stopped", "True"]
