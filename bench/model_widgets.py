"""How long the model panels take to answer a change (issue 16's target: <= 100 ms per change).

Usage: ``PYTHONPATH=. python bench/model_widgets.py [--repeats 10] [--browser]``.

1. In this process: ``LLMModelPanel``, ``ServingPanel`` and ``DisaggPanel`` (their defaults: Llama-3 70B on H100s;
   the serving queue of Llama-3 8B on one H100 at 20 requests/s, 20,000 requests per simulation; Llama-3 8B
   colocated against disaggregated at 4 requests/s, 10,000 requests) get a scripted series of changes,
   control by control, each value set as a person's release of the control sets it (``widget.value = v``, which
   runs the panel's observer); the panel's own ``update_s`` (evaluation, figure sources and the summary) is
   collected. Median, 90th percentile and worst per control, in ms.
2. ``--browser``: the same panels in a real JupyterLab in headless Chromium (the tests' ``tests/browser.py``: the
   system Chromium, network closed). A dropdown of the panel is changed in the page (its ``<select>`` set and
   ``change`` dispatched, as a click does), and the page times until the panel's main BokehJS data source has new
   data and its summary text has changed (the kernel's answer has arrived and been applied), then until two
   animation frames later (drawn). That is what a person waits for: the message to the kernel, the evaluation, the
   messages back and BokehJS's redraw. The serving panel's own "computed in" figure is its evaluation in that
   kernel (which shares the machine with the Jupyter server and Chromium). Then the serving panel's rate slider
   is dragged with the mouse (25 moves of 1 px, 20 ms apart, then released), for the default panel (sliders
   answer while dragged) and one with ``live=False`` (on release): how long the drag took (the page handles each
   mouse move only when it is free), how many answers the page showed during it, and the time from the release to
   the final value's answer and to it drawn.

``--freeze-heap``: :func:`aonkit.widgets.freeze_heap` after each panel is built, so that Python's full garbage
collections (which walk the whole heap, 85-100 ms here) do not land in the timed changes.

The serving panels keep their sweeps' rows and replica searches for the last 8 settings (``keep_settings``): a
value set again within a control's cycle is then answered without a simulation. The ``all`` rows are split into
changes to a setting new to the panel and to one seen before (kept). ``--keep-settings 1`` keeps only the current
setting's rows, as the panels did before session 55 (every change of a control other than the rate simulates).

Prints markdown; writes only a temporary notebook.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LLM_CHANGES = {  # control -> values set in turn (each differs from the one before)
    "tp": [4, 2, 8],
    "pp": [8, 2, 4],
    "global_batch": [512, 2048, 1024],
    "device": ["A100 SXM4 80GB", "H200 SXM", "H100 SXM"],
    "preset": ["Llama-3 8B", "GPT-3 175B", "Llama-3 70B"],
    "recompute": ["full", "none", "selective"],
    "inference_context": [4096, 32768, 8192],
    "draft": ["Llama-3.2 1B", "no-cost draft", "off"],
}
SPECULATIVE_CHANGES = {"draft_k": [8, 2, 4], "acceptance": [0.5, 0.9, 0.7], "inference_batch": [64, 512, 1]}
"""LLMModelPanel's inference controls with a 1B draft chosen (the speculative curves and draft lengths computed)."""
SERVING_CHANGES = {
    "rate": [10.0, 40.0, 20.0],
    "cv": [2.0, 0.5, 1.0],
    "replicas": [2, 4, 1],
    "max_batch": [32, 128, 64],
    "prompt": [256, 2048, 512],
    "device": ["A100 SXM4 80GB", "H200 SXM", "H100 SXM"],
    "tp": [2, 4, 1],
    "slo": [0.2, 1.0, 0.5],
    "kv_policy": ["paged", "reserve", "paged", "reserve"],
    "max_new": [4096, 256, 1024],
    "prefix": [1500, 4000, 0],
    "prefix_cache": [False, True],
    "draft": ["Llama-3.2 1B", "no-cost draft", "off"],
}
DISAGG_CHANGES = {
    "rate": [2.0, 8.0, 4.0],
    "prompt": [1024, 8192, 4096],
    "n_prefill": [2, 3, 1],
    "n_decode": [1, 4, 2],
    "link": [10.0, 450.0, 50.0],
    "ttft_slo": [0.5, 2.0, 1.0],
    "tpot_slo": [0.015, 0.05, 0.025],
    "device": ["A100 SXM4 80GB", "H200 SXM", "H100 SXM"],
    "chunked": [False, True],
    "draft": ["Llama-3.2 1B", "no-cost draft", "off"],
}


def in_process(repeats: int) -> None:
    """Time each control's changes in this process (the panels' own ``update_s``)."""
    from aonkit.widgets import DisaggPanel, LLMModelPanel, ServingPanel

    for name, make, changes in (("LLMModelPanel", LLMModelPanel, LLM_CHANGES),
                                ("ServingPanel", ServingPanel, SERVING_CHANGES),
                                ("DisaggPanel", DisaggPanel, DISAGG_CHANGES)):  # fmt: skip
        t0 = time.perf_counter()
        panel = make() if KEEP is None or make is LLMModelPanel else make(keep_settings=KEEP)
        print(f"\n### {name}: built in {time.perf_counter() - t0:.2f} s; update per change, ms\n")
        settle()
        print("| control | changes | median | p90 | worst |\n|---|---:|---:|---:|---:|")
        every: dict[str, list[float]] = {"": [], ", settings new": [], ", settings seen before": []}
        seen = {panel._inputs()} if hasattr(panel, "_inputs") else None
        for control, values in changes.items():
            widget = getattr(panel, control)
            if widget.value not in values:
                values = [*values, widget.value]
            got = []
            for _ in range(repeats):
                for v in values:
                    if widget.value == v:
                        continue
                    widget.value = v
                    got.append(panel.update_s * 1e3)
                    if seen is not None:
                        key = panel._inputs()
                        every[", settings seen before" if key in seen else ", settings new"].append(got[-1])
                        seen.add(key)
            every[""] += got
            print(f"| {control} | {len(got)} | {statistics.median(got):.1f} | {_q(got, 0.9):.1f} | {max(got):.1f} |")
        for kind, ms in every.items():
            if ms:
                print(f"| all{kind} | {len(ms)} | {statistics.median(ms):.1f} | {_q(ms, 0.9):.1f} | {max(ms):.1f} |")
        if name == "LLMModelPanel":
            speculative_rows(panel, repeats)
        if name == "ServingPanel":
            first_visits(panel)
            drag_rows(panel)
            replica_rows(repeats)


FREEZE = False
KEEP: int | None = None
"""``--keep-settings``: the serving panels' ``keep_settings`` (None: their default)."""
"""``--freeze-heap``: :func:`settle` freezes the heap (the panels' worst cases without full collections)."""


def settle() -> None:
    """With ``--freeze-heap``, :func:`aonkit.widgets.freeze_heap` (what is alive now leaves the collector's passes)."""
    if FREEZE:
        from aonkit.widgets import freeze_heap

        freeze_heap()


def speculative_rows(panel, repeats: int) -> None:
    """LLMModelPanel's changes with speculative decoding on (a 1B draft): its curves and draft lengths computed."""
    panel.draft.value = "Llama-3.2 1B"
    every = []
    for control, values in SPECULATIVE_CHANGES.items():
        widget, got = getattr(panel, control), []
        for _ in range(repeats):
            for v in values:
                if widget.value != v:
                    widget.value = v
                    assert not panel.error, panel.error
                    got.append(panel.update_s * 1e3)
        every += got
        print(f"| {control} (1B draft) | {len(got)} | {statistics.median(got):.1f} | {_q(got, 0.9):.1f} | "
              f"{max(got):.1f} |")  # fmt: skip
    print(f"| all with a draft | {len(every)} | {statistics.median(every):.1f} | {_q(every, 0.9):.1f} | "
          f"{max(every):.1f} |")  # fmt: skip
    panel.draft.value = "off"


def first_visits(panel) -> None:
    """The device set to each device with a peak at the panel's precision (bf16: 13 of the 20) in turn: more than
    the panel keeps step times for (8), so each change tabulates the model again, as a device not chosen lately
    does (the rows above revisit three). The others (V100s, P100s) would be refused at once: left out."""
    from aonkit.model.hardware import devices

    names = [d.name for d in devices() if panel.dtype.value in d.peak_flops]
    got = []
    for d in names * 2:
        if panel.device.value != d:
            panel.device.value = d
            assert not panel.error, panel.error
            got.append(panel.update_s * 1e3)
    panel.device.value = "H100 SXM"
    print(f"| device, each of the {len(names)} with a {panel.dtype.value} peak in turn (model tabulated) | {len(got)} | "
          f"{statistics.median(got):.1f} | {_q(got, 0.9):.1f} | {max(got):.1f} |")  # fmt: skip


def replica_rows(repeats: int) -> None:
    """Device changes (the sweep and the replica search both run) of panels with more replicas, at 20 requests/s."""
    from aonkit.widgets import ServingPanel

    print("\n| replicas (20 requests/s), device changed | changes | median | p90 | worst |\n|---|---:|---:|---:|---:|")
    for replicas in (1, 2, 4, 8, 16, 64):
        panel = ServingPanel(replicas=replicas) if KEEP is None else ServingPanel(replicas=replicas, keep_settings=KEEP)
        settle()
        got = []
        for _ in range(repeats):
            for v in SERVING_CHANGES["device"]:
                panel.device.value = v
                got.append(panel.update_s * 1e3)
        print(f"| {replicas} | {len(got)} | {statistics.median(got):.1f} | {_q(got, 0.9):.1f} | {max(got):.1f} |")


def drag_rows(panel) -> None:
    """The rate set as a dragged slider sets it: one step (0.05 of a decade, exponents ``-1 + 0.05 k``) at a time,
    up 24 steps from 20/s to new values, back down over them, and on 24 steps below. The rows above revisit three
    rates, whose sweeps are kept after their first change; these show what a drag costs."""
    seen: set[float] = set()
    got: dict[str, list[float]] = {"new rates": [], "rates seen before": []}
    sims: dict[str, int] = {"new rates": 0, "rates seen before": 0}
    for k in [*range(47, 71), *range(69, 46, -1), *range(46, 22, -1)]:
        rate = 10 ** (-1 + 0.05 * k)
        kind = "rates seen before" if rate in seen else "new rates"
        seen.add(rate)
        before = panel.rows.simulated
        panel.rate.value = rate
        got[kind].append(panel.update_s * 1e3)
        sims[kind] += panel.rows.simulated - before
    print("\n| rate dragged one slider step a change | changes | simulated rates per change | median | p90 | worst |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, ms in got.items():
        print(f"| {kind} | {len(ms)} | {sims[kind] / len(ms):.2f} | {statistics.median(ms):.1f} | "
              f"{_q(ms, 0.9):.1f} | {max(ms):.1f} |")  # fmt: skip


def _q(x: list[float], q: float) -> float:
    s = sorted(x)
    return s[min(len(s) - 1, int(q * len(s)))]


CHANGE_JS = """async ([mark, current, value, summaryMark]) => {
  const area = [...document.querySelectorAll('.jp-CodeCell .jp-OutputArea')].find((a) => a.innerText.includes(mark));
  if (!area) return 'no output area with ' + mark;
  const sel = [...area.querySelectorAll('select')].find((s) => s.value === current);
  if (!sel) return 'no select showing ' + current;
  const charts = area.querySelector('.aon-charts');  // the panel's first charts (LLM: training; serving: all)
  const summary = [...area.querySelectorAll('.widget-html-content')].find((e) => e.innerText.includes(summaryMark));
  if (!charts || !summary) return 'no charts or summary';
  // in sight: charts out of sight are drawn only when they come back
  charts.scrollIntoView({block: 'center'});
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  // event-driven, no polling (the page must not take CPU from the kernel): the charts drew new data (their
  // "aon-drawn" event, sent after the canvas calls), the summary's text replaced
  let dataAt = null, textAt = null, drawMs = null, done;
  const both = new Promise((r) => { done = r; });
  const check = () => { if (dataAt !== null && textAt !== null) done(); };
  const slot = (ev) => { if (dataAt === null) { dataAt = performance.now(); drawMs = ev.detail; check(); } };
  charts.parentElement.addEventListener('aon-drawn', slot);
  const obs = new MutationObserver(() => { if (textAt === null) { textAt = performance.now(); check(); } });
  obs.observe(summary, {childList: true, subtree: true, characterData: true});
  const t0 = performance.now();
  sel.value = value;
  sel.dispatchEvent(new Event('change', {bubbles: true}));
  const timeout = new Promise((r) => setTimeout(() => r('timeout'), 30000));
  const got = await Promise.race([both, timeout]);
  obs.disconnect();
  charts.parentElement.removeEventListener('aon-drawn', slot);
  if (got === 'timeout') return 'no answer in 30 s';
  const t1 = Math.max(dataAt, textAt);
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const m = /computed in (\\d+) ms/.exec(summary.innerText);
  return [t1 - t0, performance.now() - t0, m ? Number(m[1]) : null, drawMs];
}"""

BROWSER_CHANGES = [  # (panel, panel's output text, summary text, [(select showing, value to pick)...])
    ("llm", "memory per GPU", "step time", [("H100 SXM", "A100 SXM4 80GB")]),
    ("serving", "replicas for p99 TTFT", "replicas for p99 TTFT", [("H100 SXM", "A100 SXM4 80GB"), ("1", "2")]),
]

HANDLE_JS = """([mark, label, summaryMark]) => {
  const area = [...document.querySelectorAll('.jp-CodeCell .jp-OutputArea')].find((a) => a.innerText.includes(mark));
  const slider = area && [...area.querySelectorAll('.widget-slider')].find((s) => s.innerText.includes(label));
  const summary = area && [...area.querySelectorAll('.widget-html-content')].find((e) => e.innerText.includes(summaryMark));
  if (!slider || !summary) return 'no slider ' + label + ' or summary';
  // every answer shown: when its summary text changed (event-driven, no polling)
  if (window.__aonObs) window.__aonObs.disconnect();
  const log = window.__aonDrag = {text: []};
  const obs = window.__aonObs = new MutationObserver(() => log.text.push([performance.now(), summary.innerText]));
  obs.observe(summary, {childList: true, subtree: true, characterData: true});
  window.__aonSummary = summary;
  window.__aonReadout = slider.querySelector('.widget-readout');
  slider.scrollIntoView({block: 'center'});
  const r = slider.querySelector('.noUi-handle').getBoundingClientRect();
  return [r.x + r.width / 2, r.y + r.height / 2];
}"""

SETTLED_JS = """async ([released]) => {
  // the answer for the slider's final value: the summary's rate equals the readout, then two frames (drawn)
  const shown = () => Number((/at ([0-9.e+-]+) req\\/s/.exec(window.__aonSummary.innerText) || [])[1]);
  const want = () => Number(window.__aonReadout.innerText.trim());
  const deadline = performance.now() + 30000;
  while (!(Math.abs(shown() - want()) <= 0.006 * want())) {  // both printed to 3 significant digits
    if (performance.now() > deadline) return 'no answer for ' + want() + ': ' + window.__aonSummary.innerText;
    await new Promise((r) => setTimeout(r, 5));
  }
  const settled = performance.now();
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const log = window.__aonDrag;
  const text = log.text.map((t) => t[0]);
  return {shown: new Set(log.text.map((t) => t[1])).size, shown_during: new Set(log.text.filter((t) => t[0] < released).map((t) => t[1])).size,
          settled: settled - released, rate: want(), drawn: performance.now() - released};
}"""


def drag(page, repeats: int, mark: str, px: int = 1, moves: int = 25, every_ms: int = 20) -> list[dict]:
    """Drag the rate slider of the serving panel whose output shows ``mark`` (``moves`` mouse moves ``every_ms``
    apart), release it, and time the answers shown."""
    rows = []
    for i in range(repeats):
        xy = page.evaluate(HANDLE_JS, [mark, "arrival rate", "replicas for p99 TTFT"])
        if isinstance(xy, str):
            sys.exit(xy)
        x, y = xy
        sign = 1 if i % 2 == 0 else -1  # right, then back left
        page.mouse.move(x, y)
        page.mouse.down()
        t0 = page.evaluate("performance.now()")
        for k in range(1, moves + 1):
            page.mouse.move(x + sign * px * k, y)
            page.wait_for_timeout(every_ms)
        page.mouse.up()
        released = page.evaluate("performance.now()")
        r = page.evaluate(SETTLED_JS, [released])
        if isinstance(r, str):
            sys.exit(r)
        rows.append({**r, "dragged": released - t0})
        page.wait_for_timeout(500)
    return rows


def drags(page, repeats: int) -> None:
    """The live panel and an on-release one (``live=False``), dragged in turn."""
    got: dict[str, list[dict]] = {"live": [], "on release": []}
    for _ in range(repeats):
        for kind, mark in (("live", "replicas for p99 TTFT"), ("on release", "answers on release")):
            got[kind] += drag(page, 2, mark)  # right, then back left
    print("\n### In JupyterLab: the serving panel's rate slider dragged (25 mouse moves of 1 px, 20 ms apart) and "
          "released\n")
    print("| sliders | drags | drag ms (median) | answers shown while dragged | release to final answer ms: median "
          "| worst | to drawn: median | worst |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind, rows in got.items():
        col = {k: [r[k] for r in rows] for k in ("dragged", "shown_during", "settled", "drawn")}
        print(f"| {kind} | {len(rows)} | {statistics.median(col['dragged']):.0f} | {min(col['shown_during'])}-"
              f"{max(col['shown_during'])} | {statistics.median(col['settled']):.0f} | {max(col['settled']):.0f} "
              f"| {statistics.median(col['drawn']):.0f} | {max(col['drawn']):.0f} |")


def in_browser(repeats: int) -> None:
    """Time dropdown changes made in the page of a real JupyterLab, to the redrawn figure."""
    from bench._lab import notebook_page

    cells = ["from aonkit.widgets import LLMModelPanel\nLLMModelPanel()",
             "from aonkit.widgets import ServingPanel\nServingPanel()",
             "print('answers on release')\nServingPanel(live=False)"]
    with notebook_page(cells, "panels.ipynb") as page:
        page.wait_for_function("() => document.querySelectorAll('.aon-charts').length >= 4",
                               timeout=60_000)  # the LLM panel's two tabs, two serving panels
        page.wait_for_timeout(2000)
        print("\n### In JupyterLab (headless Chromium): a dropdown changed in the page, ms\n")
        print("| panel | change | n | to new data: median | worst | to drawn: median | worst | kernel's computation:"
              " median | canvas calls: median |\n|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, mark, summary, steps in BROWSER_CHANGES:
            for current, value in steps:
                got = []
                for _ in range(repeats):  # there and back: each a change
                    for a, b in ((current, value), (value, current)):
                        r = page.evaluate(CHANGE_JS, [mark, a, b, summary])
                        if isinstance(r, str):
                            sys.exit(f"{mark}: {r}")
                        got.append(r)
                        page.wait_for_timeout(200)
                a, b = [g[0] for g in got], [g[1] for g in got]
                k = [g[2] for g in got if g[2] is not None]
                d = [g[3] for g in got if g[3] is not None]
                dm = f"{statistics.median(d):.1f}" if d else "-"
                print(f"| {name} | {current} <-> {value} | {len(got)} | "
                      f"{statistics.median(a):.0f} | {max(a):.0f} | {statistics.median(b):.0f} | "
                      f"{max(b):.0f} | {statistics.median(k) if k else '-'} | "
                      f"{dm} |")  # fmt: skip
        drags(page, max(2, repeats // 2))
        errors = [e for e in page.aonkit_errors if e.startswith("page error")]
        if errors:
            print("page errors:", errors)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--browser", action="store_true", help="also time changes made in JupyterLab's page")
    ap.add_argument("--browser-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--keep-settings", type=int, default=None,
                    help="the serving panels' keep_settings (1: every setting but the current one forgotten)")
    ap.add_argument("--freeze-heap", action="store_true",
                    help="in this process, aonkit.widgets.freeze_heap() after each panel is built")
    args = ap.parse_args()
    global FREEZE, KEEP
    FREEZE, KEEP = args.freeze_heap, args.keep_settings
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}" + (", heap frozen" if FREEZE else "")
          + (f", keep_settings={KEEP}" if KEEP is not None else ""))
    if not args.browser_only:
        in_process(args.repeats)
    if args.browser or args.browser_only:
        in_browser(args.repeats)


if __name__ == "__main__":
    main()
