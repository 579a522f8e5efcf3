"""Make the README's screenshots from real renders of the bundled rank-0 sample, in headless Chromium.

- ``--what dashboard`` (default): a notebook whose one cell is ``Dashboard(aonkit.load(...))`` is opened and run
  in a real JupyterLab (the gallery test's harness, ``tests/browser.py``), and the cell's output is saved as
  ``docs/img/dashboard.png``: cards, tables, timeline with its detail lanes, memory, exactly as a user sees them.
- ``--what focus``: the same dashboard with its timeline focused on the kernel with the most GPU time (as a click
  on its row in the kernel table does), saved as ``docs/img/dashboard_focus.png``.
- ``--what report``: the HTML report, opened from a file, with the first row of its kernel table clicked (the
  report's focus outlines that kernel on the timeline); the top of the page saved as ``docs/img/report.png``.

Needs Playwright and JupyterLab (``pip install -e .[test]``) and a Chromium (``AONKIT_CHROMIUM`` or ``chromium``
on the PATH); every network request but JupyterLab's own is refused.

Usage: ``python tools/readme_screenshot.py [--what dashboard|focus|report] [--out PNG] [--trace sample_traces/...]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def screenshot(trace_path: Path, out: Path, width: int = 1400, height: int = 980) -> Path:
    """Render the report of ``trace_path`` and save the top ``height`` pixels of the page as ``out``."""
    from playwright.sync_api import sync_playwright

    import aonkit
    from aonkit.report.html_report import write_report

    exe = os.environ.get("AONKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        raise SystemExit("no Chromium found: set AONKIT_CHROMIUM or install chromium")
    with tempfile.TemporaryDirectory() as d:
        page_path = write_report(aonkit.load(trace_path), Path(d) / "report.html", width_px=width - 160)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=ARGS)
            try:
                page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
                page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:", "blob:"))
                           else r.abort())  # fmt: skip
                page.goto(page_path.as_uri())
                page.wait_for_selector("canvas", timeout=60_000)
                page.wait_for_timeout(2500)  # the timeline's first level of detail and the cards draw
                # the kernel with the most GPU time picked in the kernel table: its events outlined on the timeline
                page.locator(".slick-row:visible").first.locator(".slick-cell").nth(2).click()
                page.evaluate("window.scrollTo(0, 0)")
                page.wait_for_timeout(800)
                out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": width, "height": height})
            finally:
                browser.close()
    return out


CELL = """import aonkit
from aonkit.widgets import Dashboard

dash = Dashboard(aonkit.load({trace!r}), width_px={width})
{select}dash"""
SELECT = "dash.select(dash.overview.kernels['name'].iloc[0])  # the kernel with the most GPU time\n"


def dashboard_screenshot(trace_path: Path, out: Path, width: int = 1100, max_height: int = 1000,
                         focus: bool = False) -> Path:  # fmt: skip
    """Run a one-cell notebook showing the Dashboard of ``trace_path`` in JupyterLab; save its output as ``out``.

    The top ``max_height`` pixels of the output: header, cards, timeline and memory (the tables go on below).
    ``focus``: the timeline focused on the kernel with the most GPU time.
    """
    import json

    sys.path.insert(0, str(ROOT))
    from tests.browser import browser_page, jupyter_lab
    from tests.test_gallery_browser import run_all

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "notebooks").mkdir()
        nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                         "source": CELL.format(trace=str(trace_path.resolve()), width=width,
                                               select=SELECT if focus else "")}],
              "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
              "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
        (root / "notebooks" / "dashboard.ipynb").write_text(json.dumps(nb))
        with jupyter_lab(root) as server:
            base, token = server.split("|")
            with browser_page(allow_hosts=(base,)) as (page, _blocked):
                page.set_viewport_size({"width": width + 800, "height": max_height + 600})
                state = run_all(page, base, token, "dashboard.ipynb", timeout_s=300)
                if any(c["errors"] for c in state["cells"]):
                    raise SystemExit(f"the dashboard cell failed: {state}")
                page.wait_for_selector(".jp-OutputArea canvas", timeout=120_000)
                page.wait_for_timeout(4000)  # every view's first draw
                area = next(a for a in page.query_selector_all(".jp-CodeCell .jp-OutputArea-output")
                            if a.query_selector("canvas") is not None)  # not the BokehJS loader's output
                page.evaluate("() => window.jupyterapp.shell.collapseLeft()")  # the file browser takes no room
                page.wait_for_timeout(1000)
                for _ in range(3):  # the notebook panel scrolls, not the page: bring its one cell to the top
                    page.evaluate("() => document.querySelectorAll('.jp-WindowedPanel-outer, .jp-Notebook')"
                                  ".forEach(e => { e.scrollTop = 0; })")
                    page.wait_for_timeout(700)
                box = area.bounding_box()
                boxes = [c.bounding_box() for c in area.query_selector_all("canvas")]  # Playwright sees shadow DOM
                right = max(b["x"] + b["width"] for b in boxes if b)
                box = {**box, "y": max(box["y"], 0), "height": min(box["height"], max_height),
                       "width": right - box["x"] + 40}  # the plots and their toolbars
                out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out), clip=box, animations="disabled")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--what", choices=("dashboard", "focus", "report"), default="dashboard")
    ap.add_argument("--out", type=Path, default=None, help="default: docs/img/<what>.png")
    ap.add_argument("--trace", type=Path, default=ROOT / "sample_traces" / "gpu_synthetic_rank0.json.gz")
    args = ap.parse_args(argv)
    out = args.out or ROOT / "docs" / "img" / {"focus": "dashboard_focus.png"}.get(args.what, f"{args.what}.png")
    if args.what == "report":
        path = screenshot(args.trace, out)
    else:
        focus = args.what == "focus"  # then the timeline and its memory chart only
        path = dashboard_screenshot(args.trace, out, max_height=450 if focus else 1000, focus=focus)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
