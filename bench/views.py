"""Timeline level-of-detail benchmark: index build and window queries on a synthetic 10,000,000-event trace.

Usage: ``PYTHONPATH=. python bench/views.py [--events N] [--width PX] [--reps R]``

The events table is made directly with numpy (no JSON): 4 GPU streams of
back-to-back kernels and 4 CPU threads of nested ops (up to 5 deep), log-normal
lengths and gaps, half the events on each side, over 60 s. It times
``timeline_index`` once and ``timeline_tiles`` at full zoom-out, mid zoom and
deep zoom (median and best of ``--reps``), the slowest of 25 window widths from
100 us to the whole trace, the full zoom-out without levels, and
``counter_tiles`` on 1,000,000 memory samples.

Then, on ``--report-events`` (default 1,000,000) events of the same kind, the
views: ``timeline_view`` (the live figure) and its ``update`` to a 60 ms
window, and the self-contained report: ``timeline_pyramid``, the size of
``bokeh.embed.file_html(static_timeline(...), resources=INLINE)`` and the time
to build it. ``--report-only`` skips the level-of-detail queries.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

from aonkit import schema
from aonkit.timeline.index import timeline_index
from aonkit.timeline.tiles import counter_tiles, timeline_tiles
from aonkit.trace import RawEvents, Trace, TraceMeta

BASE = 1_751_410_836_000_000_000
SPAN = 60_000_000_000


def _stream(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Back-to-back kernels: log-normal lengths (median 5 us), log-normal gaps filling SPAN."""
    dur = rng.lognormal(np.log(5_000), 1.0, n)
    gap = rng.lognormal(0, 1.5, n)
    gap *= max(SPAN - dur.sum(), 0.0) / gap.sum()
    ts = np.cumsum(gap + dur) - dur
    return BASE + ts.astype(np.int64), BASE + (ts + dur).astype(np.int64)


def _thread(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nested ops: top-level ops over SPAN, each split into 0-4 children, five levels deep."""
    n0 = max(1, n // 25)
    dur = rng.lognormal(0, 1.0, n0)
    gap = rng.lognormal(-1.5, 1.0, n0)
    start = np.cumsum(gap + dur) - dur
    scale = SPAN / (start[-1] + dur[-1])
    levels = [(start * scale, dur * scale)]
    while sum(len(s) for s, _ in levels) < n and len(levels) < 5:
        ps, pd_ = levels[-1]
        k = rng.integers(0, 5, len(ps))
        parent = np.repeat(np.arange(len(ps)), k)
        j = np.arange(len(parent)) - np.repeat(np.cumsum(k) - k, k)
        slot = pd_[parent] / k[parent]
        s = ps[parent] + j * slot + rng.uniform(0, 0.05, len(parent)) * slot
        levels.append((s, slot * rng.uniform(0.3, 0.9, len(parent))))
    s = np.concatenate([a for a, _ in levels])[:n]
    e = np.concatenate([a + b for a, b in levels])[:n]
    return BASE + np.floor(s).astype(np.int64), BASE + np.floor(e).astype(np.int64)


def synthetic_trace(n: int, seed: int = 5) -> Trace:
    """A trace of ``n`` complete events: half kernels on 4 streams, half nested CPU ops on 4 threads."""
    rng = np.random.default_rng(seed)
    parts, lane_of = [], []
    for lane, share in enumerate([0.25, 0.1, 0.1, 0.05, 0.3, 0.1, 0.05, 0.05]):
        m = int(n * share)
        parts.append((_stream if lane < 4 else _thread)(rng, m))
        lane_of.append(np.full(len(parts[-1][0]), lane))
    ts = np.concatenate([p[0] for p in parts])
    end = np.concatenate([p[1] for p in parts])
    lane = np.concatenate(lane_of)
    m = len(ts)
    gpu = lane < 4
    streams = np.array([7, 13, 20, 24, 4242, 4300, 4301, 4302])
    cat_codes = np.where(gpu, 0, np.where(rng.random(m) < 0.15, 2, 1))
    ev = {
        "ph": pd.Categorical.from_codes(np.zeros(m, np.int8), ["X"]),
        "cat": pd.Categorical.from_codes(cat_codes.astype(np.int8), ["kernel", "cpu_op", "cuda_runtime"]),
        "name": pd.Categorical.from_codes(rng.integers(0, 500, m).astype(np.int16), [f"op_{i}" for i in range(500)]),
        "pid": pd.Categorical.from_codes(np.where(gpu, 0, 1).astype(np.int8), [0, 4242]),
        "tid": pd.Categorical.from_codes(lane.astype(np.int8), streams.tolist()),
        "ts_ns": ts,
        "dur_ns": end - ts,
        "correlation": np.arange(m, dtype=np.int64),
        "external_id": np.full(m, -1, np.int64),
        "stream": np.where(gpu, streams[lane], -1),
        "device": np.where(gpu, 0, -1),
        "id": np.full(m, -1, np.int64),
        "bp": pd.Categorical.from_codes(np.full(m, -1, np.int8), ["e"]),
    }
    return Trace(pd.DataFrame(ev)[list(schema.EVENT_COLUMNS)], TraceMeta(rank=0), RawEvents(None, None, None))


def timed(fn, reps: int) -> tuple[float, float, object]:  # noqa: ANN001
    """Median and best wall time of ``reps`` calls (seconds), and the last result."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--report-events", type=int, default=1_000_000)
    ap.add_argument("--budget", type=int, default=16_000_000, help="static_timeline budget_bytes")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    if not args.report_only:
        lod(args)
    if args.report_events:
        report(args.report_events, args.width, args.budget)


def report(n: int, width: int, budget: int) -> None:
    """Time the live timeline view and the static report on ``n`` events; size of the report's HTML."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    from aonkit.timeline.pyramid import timeline_pyramid
    from aonkit.timeline.static import static_timeline
    from aonkit.timeline.view import timeline_view

    small = synthetic_trace(20_000, seed=1)
    file_html(static_timeline(small, width_px=width), INLINE, "warm-up")  # compile or load the kernels
    trace = synthetic_trace(n)
    steps = []

    def step(name: str, fn):  # noqa: ANN001, ANN202
        t = time.perf_counter()
        out = fn()
        steps.append((name, time.perf_counter() - t))
        return out

    index = step("timeline_index", lambda: timeline_index(trace))
    view = step(f"timeline_view, {width} px, whole trace", lambda: timeline_view(trace, width, index=index))
    whole = len(view.source.data["row"])
    mid = (view.origin_ns + view.end_ns) // 2
    step("update to a 60 ms window", lambda: view.update(mid, mid + SPAN // 1000, width))
    pyr = step(f"timeline_pyramid, budget {budget / 1e6:g} MB",
               lambda: timeline_pyramid(trace, width, budget_bytes=budget, index=index))  # fmt: skip
    layout = step("static_timeline (models)", lambda: static_timeline(pyr))
    page = step("file_html(..., INLINE)", lambda: file_html(layout, INLINE, "timeline"))
    print(f"\nviews on {len(trace):,} synthetic events, width {width} px")
    for name, sec in steps:
        print(f"  {name:44} {sec:8.2f} s")
    glyphs = pyr.tiles["stop"] - pyr.tiles["start"]
    print(f"  live view: {whole:,} glyphs whole trace, "
          f"{len(view.source.data['row']):,} after the update (window + margins)")  # fmt: skip
    print(f"  pyramid: {pyr.levels} levels{' (budget reached)' if pyr.truncated else ''}, {len(pyr.tiles)} tiles, "
          f"{int(glyphs.sum()):,} glyphs (per level {glyphs.groupby(pyr.tiles['level']).sum().tolist()}), "
          f"{len(pyr.names)} names, {len(pyr.stack_parent):,} stack nodes; measured {pyr.nbytes / 1e6:.2f} MB")  # fmt: skip
    print(f"  report HTML: {len(page.encode()) / 1e6:.2f} MB (BokehJS inline included)")


def lod(args: argparse.Namespace) -> None:
    """The level-of-detail queries on ``args.events`` events."""
    t = time.perf_counter()
    trace = synthetic_trace(args.events)
    print(f"synthetic trace: {len(trace):,} events, made in {time.perf_counter() - t:.1f} s")
    small = synthetic_trace(20_000, seed=1)
    timeline_tiles(timeline_index(small), BASE, BASE + SPAN, args.width)  # compile or load the kernels
    counter_tiles(np.arange(10), np.arange(10.0), 0, 10, 5)
    t = time.perf_counter()
    index = timeline_index(trace)
    build = time.perf_counter() - t
    nbytes = sum(a.nbytes for a in vars(index).values() if isinstance(a, np.ndarray))
    print(f"timeline_index: {build:.2f} s once; {len(index.lanes)} lanes, {len(index.track_lane)} rows, "
          f"levels {index.level_ns.tolist()} ns, {index.items.shape[1]:,} items, {nbytes / 2**20:.0f} MiB")  # fmt: skip
    t0, t1 = int(index.ts.min()), int(index.end.max()) + 1
    mid = (t0 + t1) // 2
    windows = {
        "full zoom-out (60 s)": (t0, t1),
        "mid zoom (60 ms)": (mid, mid + SPAN // 1000),
        "deep zoom (100 us)": (mid, mid + 100_000),
    }
    print(f"{'query, width ' + str(args.width) + ' px':34} {'median ms':>10} {'best ms':>8} {'level':>5} "
          f"{'events':>11} {'glyphs':>8} {'individual':>10}")  # fmt: skip
    for name, (a, b) in windows.items():
        med, best, out = timed(lambda a=a, b=b: timeline_tiles(index, a, b, args.width), args.reps)
        assert isinstance(out, pd.DataFrame)
        print(f"{name:34} {med * 1e3:10.2f} {best * 1e3:8.2f} {index.level_for(a, b, args.width):5d} "
              f"{int(out['count'].sum()):11,} {len(out):8,} {int((out['count'] == 1).sum()):10,}")  # fmt: skip
    sweep = []
    for w in np.geomspace(100_000, t1 - t0, 25).astype(np.int64):
        a = max(t0, mid - int(w) // 2)
        sweep.append((*timed(lambda a=a, w=w: timeline_tiles(index, a, a + int(w), args.width), 5)[:2], w))
    med, best, w = max(sweep)
    print(f"{'worst of 25 zooms, 100 us .. 60 s':34} {med * 1e3:10.2f} {best * 1e3:8.2f} "
          f"{index.level_for(mid, mid + int(w), args.width):5d}  (window {w / 1e9:.3g} s)")  # fmt: skip
    med, best, _ = timed(lambda: timeline_tiles(index, t0, t1, args.width, level=0), 3)
    print(f"{'full zoom-out from single events':34} {med * 1e3:10.2f} {best * 1e3:8.2f} {0:5d}  (no levels)")
    rng = np.random.default_rng(2)
    mem_ts = np.sort(BASE + rng.integers(0, SPAN, 1_000_000))
    mem = np.cumsum(rng.normal(0, 1e6, len(mem_ts))) + 2e9
    med, best, out = timed(lambda: counter_tiles(mem_ts, mem, t0, t1, args.width), args.reps)
    print(f"{'counter_tiles, 1M samples, full':34} {med * 1e3:10.2f} {best * 1e3:8.2f} {'':5} {1_000_000:11,} "
          f"{len(out):8,}")  # fmt: skip


if __name__ == "__main__":
    main()
