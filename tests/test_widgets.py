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
        "s = LiveMonitor(HostSampler(interval_s=0.05), interval_s=0.1)\nawait asyncio.sleep(0.5)\ns.stop()\n"
        "n = s.cursor\nawait asyncio.sleep(0.3)\n"
        "print('kept', s.sampler._thread is None, n == s.cursor > 0, s.status.value.startswith('stopped'),"
        " s.comm is not None)",
    )
    # THEN it displays as a widget, keeps at most `rollover` points, and pausing stops the updates
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in out[0])
    assert text_of(out[1]).split() == ["points", "5", "True"]
    assert text_of(out[2]).split() == ["paused", "True", "True", "stopped", "True"]
    # and stop() ends sampling but leaves the widget open (its plot stays on the page)
    assert text_of(out[3]).split() == ["kept", "True", "True", "True", "True"]


def test_dashboard_displays_and_timeline_requeries_on_zoom() -> None:
    # GIVEN the dashboard of the sample GPU trace in a real kernel
    out = run_cells(
        "import asyncio, aonkit\nfrom aonkit.widgets import Dashboard\n"
        "d = Dashboard(aonkit.load('sample_traces/gpu_synthetic_rank0.json.gz'), width_px=800)\nd",
        "tv = d.timeline\nw0 = tv.window\nlo, hi = tv.view\nmid = (lo + hi) / 2\n"
        "tv.set_state({'view': [mid, mid + (hi - lo) / 200]})\n"  # a 200x zoom, as the page's message sets it
        "w1 = tv.window\nprint('after', w1 != w0, (w1[1] - w1[0]) * 75 < (w0[1] - w0[0]) < (w1[1] - w1[0]) * 125)\n"
        "print('individual', int((tv.columns['count'] == 1).sum()) > 0, tv.seq)",
    )
    bundle = next(o["data"] for o in out[0] if "application/vnd.jupyter.widget-view+json" in o.get("data", {}))
    mime = "application/vnd.bokehjs_load.v0+json"
    loaders = [o["data"] for o in out[0] if mime in o.get("data", {})]
    # THEN BokehJS is put on the page first, inline (no CDN), once (not also as application/javascript),
    # then the widget with a text fallback
    assert len(loaders) == 1 and len(loaders[0][mime]) > 500_000 and "cdn.bokeh.org" not in loaders[0][mime]
    assert not any("application/javascript" in o.get("data", {}) for o in out[0])
    assert "GPU busy" in bundle["text/plain"]
    # and a new view from the page is answered with its window's glyphs (the window and its margin: 2x the view)
    assert text_of(out[1]).split() == ["after", "True", "True", "individual", "True", "2"]


def test_show_displays_any_bokeh_figure_with_bokehjs_once() -> None:
    # GIVEN two figures shown in one kernel session
    out = run_cells(
        "from bokeh.plotting import figure\nfrom aonkit.widgets import show\n"
        "f = figure(); f.line([0, 1], [0, 1])\nshow(f)",
        "g = figure(); g.scatter([0], [0])\nshow(g)",
        "try:\n    show('not a figure')\nexcept TypeError as e:\n    print('refused', 'str' in str(e))",
    )
    mime = "application/vnd.bokehjs_load.v0+json"
    # THEN each displays as a widget, and BokehJS comes once, with the first
    for cell in out[:2]:
        assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell)
    assert [sum(mime in o.get("data", {}) for o in cell) for cell in out[:2]] == [1, 0]
    assert text_of(out[2]).split() == ["refused", "True"]
