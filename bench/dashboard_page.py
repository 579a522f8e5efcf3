"""The live dashboard's zoom in JupyterLab: from a new view to the kernel's glyphs drawn, and what it costs.

Usage: ``PYTHONPATH=. python bench/dashboard_page.py [--trace PATH] [--zooms 12]``.

A ``Dashboard`` of a trace (default: the bundled ``sample_traces/gpu_synthetic_rank0.json.gz``) in a real
JupyterLab in headless Chromium (the tests' ``tests/browser.py``). The timeline is set from JavaScript to a
series of windows, each twice or half the last one (as wheel zooms make them; in by halves to 1/64 of the trace
and out to 0.87 of it, so that every step needs the kernel), and each is timed until the kernel's glyphs
for it are in the page and two animation frames later ("drawn"). Per zoom: the page's main-thread time (CDP
``TaskDuration``), the kernel's CPU time (its process), and the bytes of jupyter_bokeh events the page sent back.

Either timeline is measured, whichever the checkout's dashboard has: the canvas one (``TimelineCanvas``: its
view set through the element's test hook, as a wheel sets it; "first frame" is its redraw from the glyphs at
hand, before the kernel answers) or the bokeh one of session 34 and before (its x range set; no first frame).

``--picks N`` (canvas timeline only): then N rows of the kernel table are clicked, one after another, each timed
from the click to the timeline's focus on that kernel with the kernel's exact count for the view in the page
(the pick's way through jupyter_bokeh to the kernel, the focus's query, its glyphs and count back), and to drawn.

Prints markdown; writes only a temporary notebook.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ZOOM_JS = """async ([start, end]) => {
  let xr = null, src = null;
  for (const d of window.Bokeh.documents) {
    xr = xr || d.get_model_by_name('timeline_x');
    src = src || d.get_model_by_name('timeline_quads');
  }
  if (!xr || !src) return 'no timeline';
  const before = src.data;
  const t0 = performance.now();
  let done;
  const got = new Promise((r) => { done = r; });
  const seen = () => { if (src.data !== before) done(); };
  src.connect(src.properties.data.change, seen);
  xr.setv({start, end});
  const r = await Promise.race([got, new Promise((r) => setTimeout(() => r('timeout'), 30000))]);
  if (r === 'timeout') return 'no answer in 30 s';
  const answered = performance.now() - t0;
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return [answered, performance.now() - t0, xr.start, xr.end];
}"""

CANVAS_ZOOM_JS = """async ([start, end]) => {
  const el = document.querySelector('.aon-timeline').parentElement;
  const seq = Number(el.dataset.seq), drawn = Number(el.dataset.drawn);
  const t0 = performance.now();
  el.aonTimeline.setView(start, end);
  let first = null;
  const until = (f) => new Promise((r) => { const go = () => (f() ? r() : setTimeout(go, 1)); go(); });
  const r = await Promise.race([
    (async () => {
      await until(() => Number(el.dataset.drawn) > drawn); first = performance.now() - t0;
      await until(() => Number(el.dataset.seq) > seq); return performance.now() - t0;
    })(),
    new Promise((r) => setTimeout(() => r('timeout'), 30000))]);
  if (r === 'timeout') return 'no answer in 30 s';
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const v = el.aonTimeline.view;
  return [r, performance.now() - t0, v[0], v[1], first];
}"""

PICK_JS = """async (k) => {
  // click the k-th visible row of the kernel table (SlickGrid, inside BokehJS's shadow roots), time the focus
  const deep = (root, sel, out = []) => {
    out.push(...root.querySelectorAll(sel));
    for (const e of root.querySelectorAll('*')) if (e.shadowRoot) deep(e.shadowRoot, sel, out);
    return out;
  };
  const rows = deep(document, '.slick-row').filter((r) => r.offsetParent !== null);
  if (rows.length <= k) return 'no row ' + k;
  const cells = rows[k].querySelectorAll('.slick-cell');
  const name = cells[0].textContent.trim();
  const el = document.querySelector('.aon-timeline').parentElement;
  const seq = Number(el.dataset.seq);
  const until = (f) => new Promise((r) => { const go = () => (f() ? r() : setTimeout(go, 1)); go(); });
  const t0 = performance.now();
  cells[2].dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true, view: window}));
  const r = await Promise.race([
    (async () => {
      await until(() => { const f = el.aonTimeline.focus; return f.length === 1 && f[0] === name
        && Number(el.dataset.seq) > seq && el.dataset.focusExact === '1'; });
      return performance.now() - t0;
    })(),
    new Promise((r) => setTimeout(() => r('timeout'), 30000))]);
  if (r === 'timeout') {
    return `no focus on ${name} in 30 s: focus ${JSON.stringify(el.aonTimeline.focus)}, seq ${el.dataset.seq} (was ` +
           `${seq}), exact count ${el.dataset.focusExact === '1'}`;
  }
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return [r, performance.now() - t0];
}"""

SENT_JS = """() => {
  window.__aonSentBytes = 0;
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    const text = typeof data === 'string' ? data : new TextDecoder().decode(data);
    if (text.includes('"jsevent"')) window.__aonSentBytes += text.length;
    return send.call(this, data);
  };
}"""


def _kernel_cpu() -> float:
    import psutil

    total = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            if "ipykernel" in " ".join(p.cmdline()):
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            pass
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", default=str(ROOT / "sample_traces" / "gpu_synthetic_rank0.json.gz"))
    ap.add_argument("--zooms", type=int, default=12)
    ap.add_argument("--picks", type=int, default=0, help="then time N kernel-table picks (see the module doc)")
    a = ap.parse_args()
    from bench._lab import notebook_page, page_metrics

    cell = f"import aonkit\nfrom aonkit.widgets import Dashboard\nDashboard(aonkit.load({a.trace!r}))"
    with notebook_page([cell], "dashboard.ipynb") as page:
        canvas = page.evaluate("() => !!document.querySelector('.aon-timeline')")
        if canvas:
            page.wait_for_function("() => Number(document.querySelector('.aon-timeline').parentElement.dataset.seq)"
                                   " > 0", timeout=60_000)  # fmt: skip
        else:
            page.wait_for_function("() => window.Bokeh && [...window.Bokeh.documents].some((d) =>"
                                   " d.get_model_by_name('timeline_quads'))", timeout=60_000)
        page.wait_for_timeout(2000)
        page.evaluate(SENT_JS)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        task0 = page_metrics(cdp)["TaskDuration"]
        cpu0 = _kernel_cpu()
        if canvas:
            xr = page.evaluate("() => document.querySelector('.aon-timeline').parentElement.aonTimeline.view")
        else:
            xr = page.evaluate("() => { for (const d of window.Bokeh.documents) { const x = d.get_model_by_name("
                               "'timeline_x'); if (x) return [x.start, x.end]; } }")
        lo, hi = xr
        rows = []
        for k in range(1, a.zooms + 1):  # in by halves to 1/64 of the trace, then out again: each step 2x
            depth = k if k <= a.zooms // 2 else a.zooms - k  # (a step the glyphs at hand serve asks nothing)
            span = (hi - lo) / 2 ** min(depth, 6)
            mid = lo + (hi - lo) * 0.37
            r = page.evaluate(CANVAS_ZOOM_JS if canvas else ZOOM_JS, [max(lo, mid - span / 2), mid + span / 2])
            if isinstance(r, str):
                sys.exit(r)
            rows.append(r)
            page.wait_for_timeout(600)
        task = page_metrics(cdp)["TaskDuration"] - task0
        cpu = (_kernel_cpu() - cpu0) * 1e3 / len(rows)
        sent = page.evaluate("window.__aonSentBytes")
        ans, drawn = [r[0] for r in rows], [r[1] for r in rows]
        first = [r[4] for r in rows if len(r) > 4]
        print(f"\n### Dashboard zoom in JupyterLab ({'canvas' if canvas else 'bokeh'} timeline), ms per zoom\n")
        print("| zooms | first frame: median | answer: median | worst | drawn: median | worst | page main thread | "
              "kernel CPU | bytes sent back per zoom |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        print(f"| {len(rows)} | {f'{statistics.median(first):.0f}' if first else '-'} | {statistics.median(ans):.0f} "
              f"| {max(ans):.0f} | {statistics.median(drawn):.0f} | {max(drawn):.0f} | {task * 1e3 / len(rows):.0f} | "
              f"{cpu:.0f} | {sent / len(rows):,.0f} |")
        if a.picks and canvas:
            picks = []
            for k in range(a.picks):
                r = page.evaluate(PICK_JS, k % 8)  # eight different rows in turn
                if isinstance(r, str):
                    sys.exit(r)
                picks.append(r)
                page.wait_for_timeout(600)
            got, drawn = [r[0] for r in picks], [r[1] for r in picks]
            print("\n### A kernel-table pick to the timeline's focus, ms\n")
            print("| picks | focus with its count: median | worst | drawn: median | worst |\n|---:|---:|---:|---:|---:|")
            print(f"| {len(picks)} | {statistics.median(got):.0f} | {max(got):.0f} | {statistics.median(drawn):.0f} | "
                  f"{max(drawn):.0f} |")


if __name__ == "__main__":
    main()
