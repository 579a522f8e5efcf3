"""What a ``LiveMonitor`` costs while it streams in JupyterLab: the page's main thread and the kernel, per second.

Usage: ``PYTHONPATH=. python bench/monitor_page.py [--seconds 30] [--gpus 8]``.

A notebook shows ``LiveMonitor`` of an ``NvmlSampler`` over ``--gpus`` fake GPUs (the tests' Python fake NVML,
``tests/fake_nvml.py``; 0: a ``HostSampler``), sampling at 10 Hz, the monitor pulling every 0.5 s (its defaults).
In a real JupyterLab in headless Chromium (``tests/browser.py``: the system Chromium, network closed), for
``--seconds`` each with the monitor streaming, then paused (its pause button), then streaming again:

* the page's main thread: Chrome's ``Performance.getMetrics`` over CDP (``TaskDuration``: all the main
  thread's work; ``ScriptDuration``, ``LayoutDuration``, ``RecalcStyleDuration``), in ms per second;
* the kernel: its process's CPU time (``psutil``), in ms per second;
* the renderer processes' CPU time, which includes raster and compositing off the main thread;
* how far behind the display is at the window's end: the page's clock minus the newest sample time drawn
  (the charts' ``data-xmax``), in ms. A display that cannot keep up falls further behind at each window.

Prints markdown; writes only a temporary notebook.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")


def cell(gpus: int) -> str:
    """The notebook cell that shows the monitor."""
    if gpus:
        return ("import sys; sys.path.insert(0, %r)\n"
                "from tests.fake_nvml import FakeGpu, FakeNvml\n"
                "from aonkit.sources.nvml import NvmlSampler\n"
                "from aonkit.widgets import LiveMonitor\n"
                "m = LiveMonitor(NvmlSampler(nvml=FakeNvml([FakeGpu() for _ in range(%d)]), interval_s=0.1))\n"
                "m") % (str(ROOT), gpus)  # fmt: skip
    return ("from aonkit.sources.samplers import HostSampler\nfrom aonkit.widgets import LiveMonitor\n"
            "m = LiveMonitor(HostSampler(interval_s=0.1))\nm")


LAG_JS = """() => { const el = [...document.querySelectorAll('.aon-charts')].map((c) => c.parentElement)
  .find((e) => e.dataset.xmax); return el ? Date.now() - Number(el.dataset.xmax) : null; }"""


def window(cdp, kernel, renderers, seconds: float) -> dict[str, float]:
    """ms of work per second over ``seconds``: the page's main thread by kind, the kernel, the renderers."""
    from bench._lab import page_metrics

    def metrics() -> dict[str, float]:
        got = page_metrics(cdp)
        return {k: got.get(k, 0.0) for k in METRICS}

    def cpu(ps) -> float:
        total = 0.0
        for p in ps:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except Exception:  # noqa: BLE001 - a renderer that went away
                pass
        return total

    m0, k0, r0, t0 = metrics(), cpu([kernel]), cpu(renderers), time.monotonic()
    time.sleep(seconds)
    m1, k1, r1, t1 = metrics(), cpu([kernel]), cpu(renderers), time.monotonic()
    dt = t1 - t0
    out = {k: (m1[k] - m0[k]) * 1e3 / dt for k in METRICS}
    out["kernel"] = (k1 - k0) * 1e3 / dt
    out["renderers"] = (r1 - r0) * 1e3 / dt
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--idle", action="store_true", help="a notebook without the monitor (the page's own cost)")
    args = ap.parse_args()
    import psutil

    from bench._lab import notebook_page

    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}; LiveMonitor of "
          f"{f'{args.gpus} fake GPUs' if args.gpus else 'the host'}, {args.seconds:g} s per window\n")
    source = "print('no monitor')" if args.idle else cell(args.gpus)
    with notebook_page([source], "monitor.ipynb") as page:
        page.wait_for_timeout(3000)
        kernel = next(p for p in psutil.process_iter(["cmdline"])
                      if "ipykernel" in " ".join(p.info["cmdline"] or []))  # fmt: skip
        renderers = [p for p in psutil.process_iter(["cmdline"])
                     if "--type=renderer" in " ".join(p.info["cmdline"] or [])]  # fmt: skip
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable", {"timeMetric": "threadTicks"})
        pause = page.locator("button", has_text="pause").first
        rows = []
        for label in (("idle", "idle") if args.idle else ("streaming", "paused", "streaming")):
            if label == "paused" or (rows and rows[-1][0] == "paused"):
                pause.click()
                page.wait_for_timeout(1000)
            r = window(cdp, kernel, renderers, args.seconds)
            r["lag"] = page.evaluate(LAG_JS)
            rows.append((label, r))
        print("| monitor | page main thread | script | layout | style | renderers' CPU | kernel CPU | display "
              "behind, ms |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for label, r in rows:
            lag = "-" if r["lag"] is None or label != "streaming" else f"{r['lag']:.0f}"
            print(f"| {label} | {r['TaskDuration']:.1f} | {r['ScriptDuration']:.1f} | "
                  f"{r['LayoutDuration']:.1f} | {r['RecalcStyleDuration']:.1f} | {r['renderers']:.1f} | "
                  f"{r['kernel']:.1f} | {lag} |")  # fmt: skip
        print("\nms of work per second of wall time (10 = 1% of a core).")
        errors = [e for e in page.aonkit_errors if e.startswith("page error")]
        if errors:
            print("page errors:", errors)


if __name__ == "__main__":
    main()
