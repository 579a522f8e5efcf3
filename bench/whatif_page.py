"""What a ``WhatIfPanel`` change costs in JupyterLab's page: time to the answer drawn, and the page's main thread.

Usage: ``PYTHONPATH=. python bench/whatif_page.py [--repeats 8] [--timeline]``.

The panel over the bundled two-rank job (``sample_traces/gpu_synthetic_rank*.json.gz``; without ``--timeline``
the re-timed timeline under the bars is left out, so that only the bars and numbers are timed) runs in a real
JupyterLab in headless Chromium (the tests' ``tests/browser.py``: the system Chromium, network closed).

1. The "run on" dropdown set in the page (``change`` dispatched, as a click does), between "as measured" and
   "H200 SXM": the time until the summary's text changed (the kernel's answer applied) and two animation frames
   later (drawn), and the page's main-thread time per change (CDP ``Performance.getMetrics`` ``TaskDuration``,
   over the whole series, idle waits included).
2. The "GPU computation" slider dragged with the mouse (25 moves of 2 px, 20 ms apart, then released): how long
   the drag took (the page handles a mouse move only when it is free; 25 moves take 500 ms at best), the answers
   shown during it, and the time from the release to the final value's answer (negative: it was shown before the
   release, the last moves keeping the slider's value).

Prints markdown; writes only a temporary notebook.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHANGE_JS = """async ([current, value]) => {
  const sel = [...document.querySelectorAll('.jp-OutputArea select')].find((s) => s.value === current);
  const summary = [...document.querySelectorAll('.widget-html-content')].find((e) => e.innerText.includes('speed-up'));
  if (!sel || !summary) return 'no select showing ' + current + ' or no summary';
  summary.scrollIntoView({block: 'center'});
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const before = summary.innerText;
  let changed = null, done;
  const got = new Promise((r) => { done = r; });
  const obs = new MutationObserver(() => { if (changed === null && summary.innerText !== before) { changed = performance.now(); done(); } });
  obs.observe(summary, {childList: true, subtree: true, characterData: true});
  const t0 = performance.now();
  sel.value = value;
  sel.dispatchEvent(new Event('change', {bubbles: true}));
  const r = await Promise.race([got, new Promise((r) => setTimeout(() => r('timeout'), 30000))]);
  obs.disconnect();
  if (r === 'timeout') return 'no answer in 30 s';
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return [changed - t0, performance.now() - t0];
}"""

HANDLE_JS = """() => {
  const slider = [...document.querySelectorAll('.widget-slider')].find((s) => s.innerText.includes('GPU computation'));
  const summary = [...document.querySelectorAll('.widget-html-content')].find((e) => e.innerText.includes('speed-up'));
  if (!slider || !summary) return 'no slider or summary';
  if (window.__aonObs) window.__aonObs.disconnect();
  const log = window.__aonDrag = [];
  window.__aonObs = new MutationObserver(() => log.push([performance.now(), summary.innerText]));
  window.__aonObs.observe(summary, {childList: true, subtree: true, characterData: true});
  slider.scrollIntoView({block: 'center'});
  const r = slider.querySelector('.noUi-handle').getBoundingClientRect();
  return [r.x + r.width / 2, r.y + r.height / 2];
}"""


def changes(page, cdp, repeats: int) -> None:
    from bench._lab import page_metrics

    got, m0 = [], page_metrics(cdp)
    for _ in range(repeats):
        for a, b in (("as measured", "H200 SXM"), ("H200 SXM", "as measured")):
            r = page.evaluate(CHANGE_JS, [a, b])
            if isinstance(r, str):
                sys.exit(r)
            got.append(r)
            page.wait_for_timeout(1200)  # past the timeline's debounced redraw, when there is one
    m1 = page_metrics(cdp)
    task = (m1["TaskDuration"] - m0["TaskDuration"]) * 1e3 / len(got)
    a, b = [g[0] for g in got], [g[1] for g in got]
    print(f"| run on: as measured <-> H200 SXM | {len(got)} | {statistics.median(a):.0f} | {max(a):.0f} | "
          f"{statistics.median(b):.0f} | {max(b):.0f} | {task:.0f} |")


def drags(page, repeats: int) -> None:
    rows = []
    for _ in range(repeats):
        x, y = page.evaluate(HANDLE_JS)
        page.mouse.move(x, y)
        page.mouse.down()
        t0 = page.evaluate("performance.now()")
        for k in range(25):
            page.mouse.move(x - 2 * (k + 1), y)
            page.wait_for_timeout(20)
        released = page.evaluate("performance.now()")
        page.mouse.up()
        page.wait_for_timeout(2500)
        log = page.evaluate("window.__aonDrag")
        final = log[-1][1] if log else None
        last = next((t for t, text in log if text == final), None)
        rows.append({"dragged": released - t0, "shown_during": len({t for _, t in log if _ < released}),
                     "settled": (last - released) if last is not None else float("nan")})
        # back to 1.0 for the next drag
        page.evaluate("""() => { const s = [...document.querySelectorAll('.widget-slider')].find((s) =>
            s.innerText.includes('GPU computation')); s.scrollIntoView({block: 'center'}); }""")
        page.mouse.move(x - 50, y)
        page.mouse.down()
        page.mouse.move(x, y, steps=3)
        page.mouse.up()
        page.wait_for_timeout(1500)
    d = [r["dragged"] for r in rows]
    print(f"| {len(rows)} | {statistics.median(d):.0f} | {min(r['shown_during'] for r in rows)}-"
          f"{max(r['shown_during'] for r in rows)} | {statistics.median(r['settled'] for r in rows):.0f} | "
          f"{max(r['settled'] for r in rows):.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--timeline", action="store_true", help="keep the re-timed timeline under the bars")
    a = ap.parse_args()
    from bench._lab import notebook_page

    cell = ("import aonkit\nfrom aonkit.widgets import WhatIfPanel\n"
            f"job = aonkit.load_job(['{ROOT}/sample_traces/gpu_synthetic_rank0.json.gz', "
            f"'{ROOT}/sample_traces/gpu_synthetic_rank1.json.gz'])\nWhatIfPanel(job, timeline={a.timeline})")
    with notebook_page([cell], "whatif.ipynb") as page:
        page.wait_for_function("() => [...document.querySelectorAll('.widget-html-content')].some((e) =>"
                               " e.innerText.includes('speed-up'))", timeout=60_000)
        page.wait_for_timeout(2000)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        print(f"\n### WhatIfPanel in JupyterLab (timeline {'on' if a.timeline else 'off'}), ms\n")
        print("| change | n | answer: median | worst | drawn: median | worst | page main thread per change |\n"
              "|---|---:|---:|---:|---:|---:|---:|")
        changes(page, cdp, a.repeats)
        print("\n| drags | drag ms (median) | answers shown while dragged | release to final answer: median | "
              "worst |\n|---:|---:|---:|---:|---:|")
        drags(page, max(2, a.repeats // 2))


if __name__ == "__main__":
    main()
