"""Zoom redraw time of the self-contained report's timeline in headless Chromium (target: <= 200 ms).

Usage: ``PYTHONPATH=. python bench/browser_zoom.py [--events 1000000]``. Builds the static timeline of a
synthetic trace (``bench/views.py``'s generator), writes it with BokehJS inline to ``bench/out/``, opens it in
the system's Chromium through Playwright, and for a sweep of zooms and pans sets the x range from JavaScript
and times until two animation frames later: the level-of-detail callback (pick the level, decode the covering
tiles, replace the glyph source) plus BokehJS's repaint. Prints median and worst per zoom depth.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from views import synthetic_trace  # noqa: E402

ZOOM_JS = """async ([start, end]) => {
  const doc = Bokeh.documents[0];
  const xr = [...doc.all_models].find((m) => m.type === "DataRange1d");
  const t0 = performance.now();
  xr.setv({start, end});
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0;
}"""
SPAN_JS = """() => { const xr = [...Bokeh.documents[0].all_models].find((m) => m.type === "DataRange1d");
  return [xr.start, xr.end]; }"""


def main() -> None:
    from bokeh.embed import file_html
    from bokeh.resources import INLINE
    from playwright.sync_api import sync_playwright

    from aonkit.timeline.static import static_timeline

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--width", type=int, default=1600)
    a = ap.parse_args()
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    trace = synthetic_trace(a.events)
    t = time.perf_counter()
    page = out / f"zoom_{a.events}.html"
    page.write_text(file_html(static_timeline(trace, width_px=a.width), INLINE, "zoom bench"), encoding="utf-8")
    print(f"{a.events:,} events: page {page.stat().st_size / 1e6:.1f} MB built in {time.perf_counter() - t:.1f} s")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=args)
        pg = browser.new_page(viewport={"width": a.width + 200, "height": 900})
        t = time.perf_counter()
        pg.goto(page.as_uri())
        pg.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=120_000)
        pg.wait_for_selector("canvas", timeout=120_000)
        pg.wait_for_timeout(500)
        print(f"first render {time.perf_counter() - t:.2f} s")
        lo, hi = pg.evaluate(SPAN_JS)
        span = hi - lo
        print("| zoom (window / span) | moves | median ms | worst ms |")
        print("|---|---|---|---|")
        for factor in (1, 4, 16, 64, 256, 1024, 4096, 16384):
            width = span / factor
            times = []
            for k in range(9):  # zoom to 9 places across the trace: each move is a pan at this zoom
                start = lo + (span - width) * k / 8
                times.append(pg.evaluate(ZOOM_JS, [start, start + width]))
            print(f"| 1/{factor} | {len(times)} | {statistics.median(times):.1f} | {max(times):.1f} |")
        browser.close()


if __name__ == "__main__":
    main()
