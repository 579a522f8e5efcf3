"""The HTML report's focus in headless Chromium: a pick's time to drawn, and zooms and steps with it shown.

Usage: ``PYTHONPATH=. python bench/report_focus.py [--traces sample,hta,1m] [--repeats 3]``

For each trace the report is written (``aonkit.to_html``) and opened in the system's Chromium; the kernel with the
most events is picked by setting the kernel table's selection from JavaScript (what a click sets), then timed
until two animation frames later: the focus callback (gather the pick's boxes in view, merge them per pixel,
the bar) plus BokehJS's repaint. Then the zoom sweep of ``bench/browser_zoom.py`` (eight depths, nine places
each) runs without and with the focus, and ▶ is pressed ten times (a step: pick the next box, set the view, both
callbacks, repaint). Prints the report's size with and without the focus's data, and markdown tables of medians.
``1m`` is ``../shared/tools/gen_trace.py``'s 1M-event trace (written to ``bench/out/``, about 300 MB).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TIMED = """async (code) => {
  const doc = Bokeh.documents[0], g = (n) => doc.get_model_by_name(n);
  const t0 = performance.now();
  new Function("g", code)(g);
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0;
}"""
TABLE = "[...Bokeh.documents[0].all_models].find((m) => m.name === 'kernel_table' && 'selected' in m)"
PICK = f"const s = {TABLE}; s.selected.indices = [s.data.name.indexOf(NAME)];"
CLEAR = f"{TABLE}.selected.indices = [];"
ZOOM = "const xr = g('timeline_x'); xr.have_updated_interactively = true; xr.setv({start: A, end: B});"
STEP = "g('timeline_focus_next').trigger_event(new (Bokeh.require('core/bokeh_events').ButtonClick)());"
STATE = """() => { const g = (n) => Bokeh.documents[0].get_model_by_name(n);
  return {boxes: g('timeline_focus').data.left.length, span: [g('timeline_x').start, g('timeline_x').end]}; }"""


def trace_path(key: str) -> Path:
    if key == "sample":
        return ROOT / "sample_traces" / "gpu_synthetic_rank0.json.gz"
    if key == "hta":
        return ROOT.parent / "shared" / "traces" / "hta" / "df_index_resolver" / "df_index_resolver.json.gz"
    out = ROOT / "bench" / "out" / "gen_1m.json"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(ROOT.parent / "shared" / "tools" / "gen_trace.py"), str(out)], check=True,
                       capture_output=True)  # fmt: skip
    return out


def main() -> None:
    from playwright.sync_api import sync_playwright

    import aonkit
    from aonkit.analysis.kernels import kernel_stats
    from aonkit.report import html_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="sample,hta,1m")
    ap.add_argument("--repeats", type=int, default=3, help="picks per trace (each cleared again before the next)")
    a = ap.parse_args()
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    rows = []
    for key in a.traces.split(","):
        trace = aonkit.load(trace_path(key))
        stats = kernel_stats(trace)
        top = stats.iloc[int(stats["count"].to_numpy().argmax())]  # the kernel with the most events
        pick = PICK.replace("NAME", json.dumps(str(top["name"])))
        page = out / f"report_focus_{key}.html"
        t = time.perf_counter()
        aonkit.to_html(trace, page)
        built = time.perf_counter() - t
        size = page.stat().st_size
        keep = html_report.static_timeline  # the same report without the focus, for its size
        html_report.static_timeline = lambda pyr, keep=keep, **kw: keep(pyr, **{**kw, "pickers": ()})
        try:
            bare = len(html_report.report_html(trace).encode())
        finally:
            html_report.static_timeline = keep
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
            pg = browser.new_page(viewport={"width": 1600, "height": 1100})
            pg.goto(page.as_uri())
            pg.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=300_000)
            pg.wait_for_selector("canvas", timeout=300_000)
            pg.wait_for_timeout(1000)
            lo, hi = pg.evaluate(STATE)["span"]
            picks = []
            for _ in range(a.repeats):
                picks.append(pg.evaluate(TIMED, pick))
                boxes = pg.evaluate(STATE)["boxes"]
                pg.evaluate(TIMED, CLEAR)
            sweeps = {}
            for focus in (False, True):
                if focus:
                    pg.evaluate(TIMED, pick)
                times = []
                for factor in (1, 4, 16, 64, 256, 1024, 4096, 16384):
                    width = (hi - lo) / factor
                    for k in range(9):
                        s = lo + (hi - lo - width) * k / 8
                        times.append(pg.evaluate(TIMED, ZOOM.replace("A", repr(s)).replace("B", repr(s + width))))
                sweeps[focus] = times
            steps = [pg.evaluate(TIMED, STEP) for _ in range(10)]
            browser.close()
        n = int(top["count"])
        rows.append((key, len(trace.events), n, boxes, size, bare, built, statistics.median(picks),
                     statistics.median(sweeps[False]), statistics.median(sweeps[True]), max(sweeps[True]),
                     statistics.median(steps)))  # fmt: skip
    print("| trace | events | picked kernel's events | boxes drawn | report MB (without focus) | built s | "
          "pick ms | zoom ms without / with | worst with | step ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key, ev, n, boxes, size, bare, built, pick, z0, z1, zmax, step in rows:
        print(f"| {key} | {ev:,} | {n:,} | {boxes:,} | {size / 1e6:.2f} ({bare / 1e6:.2f}) | {built:.1f} | "
              f"{pick:.1f} | {z0:.1f} / {z1:.1f} | {zmax:.1f} | {step:.1f} |")


if __name__ == "__main__":
    main()
