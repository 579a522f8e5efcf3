"""What a person sees: the HTML report and a JupyterLab notebook in headless Chromium (network closed).

Checks: the plots render (non-blank screenshots, expected text), nothing is
fetched from the network (BokehJS inline / from the lab extension), and an
event name holding HTML/JavaScript markup is shown as text and never runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import aonkit
from aonkit.report.html_report import write_report

from .browser import MARKUP, browser_page, jupyter_lab, not_blank
from .conftest import SAMPLE_TRACES


def markup_trace(path: Path) -> Path:
    """A small GPU trace: a launch op, kernels on a stream, one kernel and one op named with markup."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 500,
           "args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}},
          {"ph": "X", "cat": "cpu_op", "name": MARKUP, "pid": 1, "tid": 1, "ts": 600, "dur": 300}]
    for i in range(40):
        ts = 10 + 20 * i
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts,
                   "dur": 5, "args": {"correlation": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": MARKUP if i % 4 == 0 else "volta_sgemm_128x64_nn", "pid": 0,
                   "tid": 7, "ts": 50 + 30 * i, "dur": 25, "args": {"correlation": i + 1, "stream": 7, "device": 0}})
    doc = {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "numSms": 108,
                                                    "totalGlobalMem": 42298834944}]}
    path.write_text(json.dumps(doc))
    return path


def test_report_renders_offline_and_shows_markup_as_text(tmp_path: Path) -> None:
    trace = aonkit.load(markup_trace(tmp_path / "m.json"))
    page_path = write_report(trace, tmp_path / "report.html")
    assert MARKUP not in page_path.read_text(encoding="utf-8").replace(json.dumps(MARKUP)[1:-1], "")
    with browser_page() as (page, blocked):
        page.goto(page_path.as_uri())
        page.wait_for_selector("canvas", timeout=30_000)
        page.wait_for_timeout(1500)
        assert not_blank(page.screenshot(full_page=True)) > 10
        # bokeh renders into shadow roots: Playwright's text locators pierce them, inner_text does not
        for text in ("aonkit report", "volta_sgemm_128x64_nn", "GPU busy", MARKUP):  # the markup name: as text
            assert page.get_by_text(text, exact=False).count() >= 1, text
        assert page.evaluate("window.__xss") is None and not page.aonkit_dialogs
        assert not blocked, blocked  # BokehJS inline: no CDN, no network at all
        assert not page.aonkit_errors, page.aonkit_errors


@pytest.mark.parametrize("name", ["gpu_synthetic_rank0.json.gz", "cpu_mlp.pt.trace.json.gz"])
def test_report_of_real_sample_traces(tmp_path: Path, name: str) -> None:
    # a GPU trace and a real CPU-only torch.profiler run (empty kernel cards, no roofline points)
    trace = aonkit.load(SAMPLE_TRACES / name)
    page_path = write_report(trace, tmp_path / "r.html")
    with browser_page() as (page, blocked):
        page.goto(page_path.as_uri())
        page.wait_for_selector("canvas", timeout=30_000)
        page.wait_for_timeout(1500)
        shot = page.screenshot(full_page=True)
        (tmp_path / "r.png").write_bytes(shot)
        assert not_blank(shot) > 10 and not blocked
        assert page.get_by_text("GPU busy").count() == 1
        assert not page.aonkit_errors, page.aonkit_errors


def test_diff_page_renders_offline_and_shows_markup_as_text(tmp_path: Path) -> None:
    from aonkit.analysis.diff import trace_diff
    from aonkit.report.diff_report import write_diff_report

    # GIVEN a diff whose kernel and page labels hold markup
    t = aonkit.load(markup_trace(tmp_path / "m.json"))
    page_path = write_diff_report(trace_diff(t, t), tmp_path / "d.html", MARKUP, "b.json")
    with browser_page() as (page, blocked):
        page.goto(page_path.as_uri())
        page.wait_for_selector("canvas", timeout=30_000)
        page.wait_for_timeout(1500)
        # THEN the picture and the table render, the markup shows as text and never runs
        assert not_blank(page.screenshot(full_page=True)) > 10
        for text in ("aonkit diff", "volta_sgemm_128x64_nn", MARKUP):
            assert page.get_by_text(text, exact=False).count() >= 1, text
        assert page.evaluate("window.__xss") is None and not page.aonkit_dialogs
        assert not blocked and not page.aonkit_errors, page.aonkit_errors


LABELS_STATE = """() => {
  for (const d of Bokeh.documents) {
    const lab = d.get_model_by_name('timeline_labels'), q = d.get_model_by_name('timeline_quads');
    const names = d.get_model_by_name('timeline_names');
    if (!lab || !q) continue;
    const xr = d.get_model_by_name('timeline_x');
    return {text: Array.from(lab.data.text), x: Array.from(lab.data.x), names: Array.from(names.data.name),
            left: Array.from(q.data.left), right: Array.from(q.data.right), count: Array.from(q.data.count),
            code: Array.from(q.data.name), start: xr.start, end: xr.end};
  }
  return null;
}"""


def check_labels(st: dict) -> set[str]:
    """Each label is its event's name or a cut of it that fits the bar's visible part; returns the whole names."""
    from aonkit.timeline.labels import CHAR_PX

    scale = 1600 / (st["end"] - st["start"])  # report width: at most this many px per ms
    whole = set()
    for text, x in zip(st["text"], st["x"]):
        bars = [g for g in range(len(st["left"])) if st["count"][g] == 1 and max(st["left"][g], st["start"]) == x]
        named = [g for g in bars if st["names"][st["code"][g]] == text
                 or (text.endswith("\u2026") and st["names"][st["code"][g]].startswith(text[:-1]))]
        fits = [g for g in named if len(text) * CHAR_PX <= (min(st["right"][g], st["end"]) - x) * scale + 1e-6]
        assert fits, f"label {text!r} at {x} names no bar starting there wide enough to hold it"
        if not text.endswith("\u2026"):
            whole.add(text)
    return whole


def test_report_timeline_draws_names_on_wide_bars_at_every_zoom(tmp_path: Path) -> None:
    # GIVEN the report of the sample GPU trace
    page_path = write_report(aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"), tmp_path / "r.html")
    with browser_page() as (page, blocked):
        page.goto(page_path.as_uri())
        page.wait_for_selector("canvas", timeout=30_000)
        page.wait_for_timeout(1500)
        # THEN the whole-trace view names the steps and the long ops, each label fitting its bar
        st = page.evaluate(LABELS_STATE)
        assert "ProfilerStep#2" in check_labels(st) and len(st["text"]) < 100
        # WHEN zoomed to 2 ms (the range set as a wheel zoom would) THEN the labels are recomputed for that view
        page.evaluate("""() => { for (const d of Bokeh.documents) { const xr = d.get_model_by_name('timeline_x');
                          if (xr) { xr.have_updated_interactively = true; xr.setv({start: 145.0, end: 147.0}); } } }""")
        page.wait_for_timeout(800)
        zoomed = page.evaluate(LABELS_STATE)
        assert zoomed["start"] == pytest.approx(145.0) and zoomed["text"] != st["text"]
        assert any(t.startswith("ncclDevKernel_AllReduce") for t in zoomed["text"])
        check_labels(zoomed)
        assert not blocked and not page.aonkit_errors, page.aonkit_errors


def test_report_tables_filter_by_name_and_show_whole_names_on_hover(tmp_path: Path) -> None:
    from aonkit.analysis.kernels import kernel_stats

    trace = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    names = kernel_stats(trace)["name"].astype(str)
    page_path = write_report(trace, tmp_path / "r.html", timeline=False)
    count = ("Array.from(Bokeh.documents[0].all_models)"  # the table (its source has the same name)
             ".find((m) => m.name === 'kernel_table' && 'reorderable' in m).view.filter.indices.length")
    with browser_page() as (page, blocked):
        page.goto(page_path.as_uri())
        page.wait_for_selector("canvas", timeout=30_000)
        page.wait_for_timeout(1000)
        assert page.evaluate(count) == len(names)
        page.get_by_placeholder("filter kernels and ops by name").fill("GEMM")  # any case
        page.wait_for_timeout(500)
        assert page.evaluate(count) == names.str.lower().str.contains("gemm").sum() > 0
        # a cut name keeps the whole name as the cell's tooltip
        longest = max((n for n in names if "gemm" in n), key=len)
        assert page.locator(f"span[title={json.dumps(longest)}]").count() >= 1
        page.get_by_placeholder("filter kernels and ops by name").fill("")
        page.wait_for_timeout(300)
        assert page.evaluate(count) == len(names)
        assert not any("jquery" in w.lower() for w in page.aonkit_warnings), page.aonkit_warnings
        assert not page.aonkit_errors and not blocked


@pytest.mark.slow
def test_dashboard_widget_is_the_first_output_in_jupyterlab(tmp_path: Path) -> None:
    # GIVEN a notebook whose first aonkit output is the dashboard widget (no output_notebook, no CDN)
    trace_path = markup_trace(tmp_path / "m.json")
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                     "source": f"import aonkit\nfrom aonkit.widgets import Dashboard\n"
                               f"Dashboard(aonkit.load({str(trace_path)!r}), width_px=900)"}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "dash.ipynb").write_text(json.dumps(nb))
    with jupyter_lab(tmp_path) as server:
        base, token = server.split("|")
        with browser_page(allow_hosts=(base,)) as (page, blocked):
            page.goto(f"{base}/lab/tree/dash.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator, .jp-Toolbar", timeout=60_000)
            page.wait_for_timeout(3000)  # kernel start
            page.click(".jp-Cell .jp-InputArea-editor")
            page.keyboard.press("Shift+Enter")
            # WHEN it runs THEN the bokeh canvas renders inside the cell's output
            out = page.wait_for_selector(".jp-OutputArea-output canvas", timeout=120_000)
            page.wait_for_timeout(3000)
            area = page.query_selector(".jp-Cell .jp-OutputArea")
            shot = area.screenshot()
            (tmp_path / "lab.png").write_bytes(shot)
            assert out is not None and not_blank(shot) > 10
            cell = page.locator(".jp-Cell .jp-OutputArea")
            assert cell.get_by_text("GPU busy").count() >= 1 and cell.get_by_text(MARKUP).count() >= 1
            assert page.evaluate("window.__xss") is None and not page.aonkit_dialogs
            assert not blocked, blocked
            assert not [e for e in page.aonkit_errors if e.startswith("page error")], page.aonkit_errors


def test_readme_screenshot_script_renders_the_report_and_the_dashboard(tmp_path: Path) -> None:
    import subprocess
    import sys

    from PIL import Image

    from .browser import chromium_path

    # GIVEN the script that makes the README's pictures, WHEN it runs against fresh output paths
    env = {**os.environ, "AONKIT_CHROMIUM": chromium_path()}
    for what in ("report", "dashboard"):
        out = tmp_path / f"{what}.png"
        proc = subprocess.run([sys.executable, "tools/readme_screenshot.py", "--what", what, "--out", str(out)],
                              capture_output=True, text=True, timeout=400, env=env,
                              cwd=Path(__file__).resolve().parent.parent)  # fmt: skip
        # THEN each is a picture of a rendered page (not a blank one), at the size the README shows
        assert proc.returncode == 0, proc.stderr
        size = Image.open(out).size
        if what == "report":
            assert size == (1400, 980)
        else:  # the Dashboard's output in JupyterLab: its plots' width and the top 1,000 px
            assert size[1] == 1000 and 900 < size[0] < 1600, size
        assert not_blank(out.read_bytes()) > 20
