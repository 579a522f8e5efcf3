"""The kernel's side of a live-timeline zoom: the bokeh timeline's update against the canvas widget's, in process.

Usage: ``PYTHONPATH=. python bench/timeline_query.py [--trace PATH ...] [--zooms 12] [--repeats 3]``.

Per trace (default: the bundled ``gpu_synthetic_rank0`` and, when ``../shared`` is present, HTA's 216,000-event
``df_index_resolver``), the same series of windows as ``bench/dashboard_page.py`` (in by halves to 1/64 of the
trace, then out), each answered at 1,200 pixels of time axis:

- **bokeh**: ``TimelineView.update`` of ``aonkit.timeline.timeline_view`` inside jupyter_bokeh's ``BokehModel``
  (what the dashboard did until session 34): the query, the text columns, and the document patch serialized as
  the widget sends it (the patch's bytes counted; no kernel, so nothing is sent);
- **canvas**: ``TimelineCanvas.update`` (the query, the typed columns, the message packed; its bytes counted).

Prints the median ms per update (best of ``--repeats`` passes) and the bytes per update, and their ratios.

``--focus``: instead, what a focus costs the canvas widget (``TimelineCanvas.focus``, ``aonkit.timeline.focus``)
on the name with the most events on the lanes: each zoom's update without and with the focus (its boxes and
overview added to the message, and the exact count sent for the view), setting the focus, and a step (N).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WIDTH = 1200


def windows(origin: int, end: int, n: int) -> list[tuple[int, int]]:
    out = []
    for k in range(n):
        depth = k if k < n // 2 else n - k
        span = (end - origin) / 2 ** min(depth, 6)
        mid = origin + (end - origin) * 0.37
        out.append((int(max(origin, mid - span / 2)), int(mid + span / 2)))
    return out


def bokeh_pass(trace, wins) -> tuple[list[float], list[int]]:
    from jupyter_bokeh.widgets import BokehModel

    from aonkit.timeline import timeline_view

    sent: list[int] = []

    class Counted(BokehModel):
        def send(self, content, buffers=None):  # the patch as jupyter_bokeh sends it
            sent.append(len(json.dumps(content)) + sum(len(b) for b in buffers or []))

    view = timeline_view(trace, width_px=WIDTH)
    Counted(view.layout)
    times, sizes = [], []
    for t0, t1 in wins:
        n = len(sent)
        s = time.perf_counter()
        view.update(t0, t1, WIDTH)
        times.append(time.perf_counter() - s)
        sizes.append(sum(sent[n:]))
    return times, sizes


def canvas_pass(trace, wins, focus: list[str] | None = None) -> tuple[list[float], list[int]]:
    from aonkit.widgets.timeline import LAYOUT, TimelineCanvas

    sent: list[int] = []

    class Counted(TimelineCanvas):
        def send(self, content, buffers=None):
            sent.append(len(json.dumps(content)) + sum(len(b) for b in buffers or []))

    w = Counted(trace, width_px=WIDTH + LAYOUT["gutter"])
    if focus:
        w.focus = focus
    times, sizes = [], []
    for t0, t1 in wins:
        n = len(sent)
        s = time.perf_counter()
        w.update(t0, t1)
        if focus:
            w._count()  # what a view the page sets adds: the exact count of the focused events in it
        times.append(time.perf_counter() - s)
        sizes.append(sum(sent[n:]))
    return times, sizes


def focus_report(path: str, trace, wins, repeats: int) -> None:
    """One row of the --focus table: a zoom without and with a focus, setting it, a step."""
    import numpy as np

    from aonkit.widgets.timeline import LAYOUT, TimelineCanvas

    class Quiet(TimelineCanvas):
        def send(self, content, buffers=None):
            pass

    w = Quiet(trace, width_px=WIDTH + LAYOUT["gutter"])
    idx = w.timeline.index
    codes = np.asarray(trace.events["name"].array.codes, np.int64)[idx.row]
    top = int(np.bincount(codes[codes >= 0]).argmax())
    name = str(trace.events["name"].cat.categories[top])
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeats):
        for key, names in (("plain", None), ("focus", [name])):  # alternated
            times, sizes = canvas_pass(trace, wins, names)
            ms = statistics.median(times) * 1e3
            if key not in best or ms < best[key][0]:
                best[key] = (ms, statistics.median(sizes))
    sets, steps = [], []
    for _ in range(5):
        s = time.perf_counter()
        w.focus = [name]
        sets.append(time.perf_counter() - s)
        s = time.perf_counter()
        w.step(1)
        steps.append(time.perf_counter() - s)
        w.focus = []
    f = w.timeline.set_focus([name])
    (pm, pb), (fm, fb) = best["plain"], best["focus"]
    print(f"| {Path(path).name} | {len(trace.events):,} | {len(f):,} | {pm:.1f} / {fm:.1f} | {pb:,.0f} / {fb:,.0f} | "
          f"{min(sets) * 1e3:.1f} | {min(steps) * 1e3:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    shared = ROOT.parent / "shared" / "traces" / "hta" / "df_index_resolver" / "df_index_resolver.json.gz"
    default = [str(ROOT / "sample_traces" / "gpu_synthetic_rank0.json.gz")] + ([str(shared)] if shared.exists() else [])
    ap.add_argument("--trace", nargs="*", default=default)
    ap.add_argument("--zooms", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--focus", action="store_true", help="what a focus adds (see the module doc)")
    a = ap.parse_args()
    import aonkit
    from aonkit.timeline import index_of
    from aonkit.timeline.view_data import span

    if a.focus:
        print("| trace | events | focused | zoom ms, median: plain / focus | bytes: plain / focus | set focus ms |"
              " step ms |")
        print("|---|---:|---:|---:|---:|---:|---:|")
    else:
        print("| trace | events | bokeh ms (median) | canvas ms | ratio | bokeh bytes | canvas bytes | ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for path in a.trace:
        trace = aonkit.load(path)
        origin, end = span(trace, index_of(trace))
        wins = windows(origin, end, a.zooms)
        canvas_pass(trace, wins[:2])  # compiled and warm: the index, the links, the kernels
        if a.focus:
            focus_report(path, trace, wins, a.repeats)
            continue
        bokeh_pass(trace, wins[:2])
        best: dict[str, tuple[float, float]] = {}
        for _ in range(a.repeats):
            for name, run in (("bokeh", bokeh_pass), ("canvas", canvas_pass)):  # alternated
                times, sizes = run(trace, wins)
                ms, size = statistics.median(times) * 1e3, statistics.median(sizes)
                if name not in best or ms < best[name][0]:
                    best[name] = (ms, size)
        (bm, bb), (cm, cb) = best["bokeh"], best["canvas"]
        print(f"| {Path(path).name} | {len(trace.events):,} | {bm:.1f} | {cm:.1f} | {bm / cm:.1f}x | {bb:,.0f} | "
              f"{cb:,.0f} | {bb / max(cb, 1):.1f}x |")


if __name__ == "__main__":
    main()
