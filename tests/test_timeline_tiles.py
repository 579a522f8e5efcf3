"""Timeline lanes, per-pixel binning and counter decimation against slow references."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit import schema
from aonkit._kernels.pyramid import build_level, cut_scales
from aonkit.timeline.detail import tile_details
from aonkit.timeline.index import build_index, timeline_index
from aonkit.timeline.tiles import counter_tiles, timeline_tiles
from aonkit.trace import RawEvents, Trace, TraceMeta

from .conftest import SAMPLE_TRACES

BASE = 1_739_000_000_000_000_000  # absolute epoch ns: beyond float64's exact integers


def _naive_depth(lane: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    order = sorted(range(len(ts)), key=lambda i: (lane[i], ts[i], -end[i], i))
    pos = {i: k for k, i in enumerate(order)}
    depth = {}
    for i in order:  # parent: the latest earlier event on the lane that encloses it
        encl = [j for j in order[: pos[i]] if lane[j] == lane[i] and ts[j] <= ts[i] and end[j] >= end[i]]
        depth[i] = depth[max(encl, key=pos.get)] + 1 if encl else 0
    return np.array([depth[i] for i in range(len(ts))], np.int64)


def _union(iv: list[tuple[int, int]]) -> int:
    total, cur = 0, None
    for s, e in sorted(iv):
        if cur is None or s > cur[1]:
            total += 0 if cur is None else cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (0 if cur is None else cur[1] - cur[0])


def _naive_tiles(lane, depth, ts, end, t0, t1, width, min_px=1.0, g=0) -> pd.DataFrame:  # noqa: ANN001
    """The rule of aonkit._kernels.binning, unit by unit (events, or groups of a level with buckets of g ns)."""
    scale = width / float(t1 - t0)
    origin = int(ts.min()) if len(ts) else 0
    out = []
    for ln, d in sorted(set(zip(lane.tolist(), depth.tolist()))):
        evs = sorted(np.flatnonzero((lane == ln) & (depth == d)).tolist(), key=lambda i: (ts[i], -end[i], i))
        groups = [[evs[0]]] if evs else []
        for p, i in zip(evs, evs[1:]):
            small = g and end[p] - ts[p] < g and end[i] - ts[i] < g
            if small and (ts[p] - origin) // g == (ts[i] - origin) // g:
                groups[-1].append(i)
            else:
                groups.append([i])
        last_x, members, cell = -2.0, [], -1

        def flush(ln: int, d: int, members: list[tuple[int, int, int]]) -> None:
            if members:
                dom = max(members, key=lambda m: (m[1] - m[0], -members.index(m)))
                out.append((ln, d, members[0][0], max(m[1] for m in members), dom[2], len(members),
                            _union([m[:2] for m in members])))  # fmt: skip

        for grp in groups:
            if len(grp) >= 2 and all(t0 <= ts[i] < t1 and end[i] <= t1 for i in grp):  # a group: all to one bin
                c = min(int((int(ts[grp[0]]) - t0) * scale), width - 1)
                if c != cell:
                    flush(ln, d, members)
                    members, cell = [], c
                members += [(int(ts[i]), int(end[i]), i) for i in grp]
                continue
            for i in grp:
                s, e = int(ts[i]), int(end[i])
                if not (s < t1 and max(e, s + 1) > t0):
                    continue
                cs, ce = max(s, t0), min(e, t1)
                x = (cs - t0) * scale
                if (ce - cs) * scale >= min_px and x >= last_x + 1.0:
                    out.append((ln, d, cs, ce, i, 1, ce - cs))
                    last_x = x
                    continue
                c = min(int(x), width - 1)
                if c != cell:
                    flush(ln, d, members)
                    members, cell = [], c
                members.append((cs, ce, i))
        flush(ln, d, members)
    cols = ["lane", "depth", "start_ns", "end_ns", "row", "count", "busy_ns"]
    return pd.DataFrame(out, columns=cols).astype("int64")


def _random_events(rng: np.random.Generator, n: int, lanes: int = 3) -> tuple[np.ndarray, ...]:
    """Clustered events: log-normal lengths and gaps, some nested, overlapping, zero-length."""
    lane = rng.integers(0, lanes, n)
    gaps = np.where(rng.random(n) < 0.05, rng.lognormal(11, 1, n), rng.lognormal(4, 1.5, n)).astype(np.int64)
    ts = BASE + np.cumsum(gaps)
    dur = rng.lognormal(4, 2.5, n).astype(np.int64)
    dur[rng.random(n) < 0.05] = 0
    return lane, ts, ts + dur


def _index(lane: np.ndarray, ts: np.ndarray, end: np.ndarray, lanes: int = 3):  # noqa: ANN202
    table = pd.DataFrame({"label": [f"L{i}" for i in range(lanes)]})
    return build_index(lane, ts, end, np.arange(len(ts)), len(ts), table)


@pytest.mark.parametrize("n", [0, 1, 7, 200])
def test_depth_matches_naive(rng: np.random.Generator, n: int) -> None:
    lane, ts, end = _random_events(rng, n)
    idx = _index(lane, ts, end)
    np.testing.assert_array_equal(idx.depth_of, _naive_depth(lane, ts, end))
    np.testing.assert_array_equal(idx.lane_of, lane)
    assert idx.lanes["rows"].tolist() == [int(idx.depth_of[lane == k].max(initial=-1)) + 1 for k in range(3)]
    for t in range(len(idx.track_lane)):  # each track: one lane and row, sorted by start
        k = idx.row[idx.track_off[t] : idx.track_off[t + 1]]
        assert (lane[k] == idx.track_lane[t]).all() and (idx.depth_of[k] == idx.track_depth[t]).all()
        assert (np.diff(ts[k]) >= 0).all()


@pytest.mark.parametrize("g", [256, 4096, 65536])
def test_levels_match_naive_groups(rng: np.random.Generator, g: int) -> None:
    lane, ts, end = _random_events(rng, 1500)
    idx = _index(lane, ts, end)
    cut = cut_scales(idx.ts, idx.end, idx.track_off, int(idx.ts.min()))
    items = build_level(idx.ts, idx.end, cut, g, int((cut >= g).sum()))
    want, run = [], []
    for t in range(len(idx.track_lane)):
        a, b = idx.track_off[t], idx.track_off[t + 1]
        s, e, bucket = idx.ts[a:b].tolist(), idx.end[a:b].tolist(), ((idx.ts[a:b] - idx.ts.min()) // g).tolist()
        groups: list[list[int]] = []
        for k in range(b - a):
            same = k and bucket[k] == bucket[k - 1] and e[k] - s[k] < g and e[k - 1] - s[k - 1] < g
            groups[-1].append(k) if same else groups.append([k])
        for grp in groups:
            top = max(max(e[k], s[k] + 1) for k in grp)
            run.append(top if grp[0] == 0 else max(run[-1], top))
            dom = max(grp, key=lambda k: (e[k] - s[k], -k))
            want.append([a + grp[0], a + grp[-1] + 1, s[grp[0]], s[grp[-1]], max(e[k] for k in grp), run[-1],
                         _union([(s[k], e[k]) for k in grp]), a + dom])  # fmt: skip
    np.testing.assert_array_equal(items.T, np.array(want, np.int64).reshape(-1, 8))
    vis = np.maximum(idx.end, idx.ts + 1)
    np.testing.assert_array_equal(idx.cmax, [vis[idx.track_off[t] : k + 1].max() for t in range(len(idx.track_lane))
                                             for k in range(idx.track_off[t], idx.track_off[t + 1])])  # fmt: skip


def _check_invariants(got: pd.DataFrame, lane, depth, ts, end, t0: int, t1: int, width: int) -> None:  # noqa: ANN001
    vis = (ts < t1) & (np.maximum(end, ts + 1) > t0)
    assert got["count"].sum() == vis.sum()  # every overlapping event once...
    single = got.loc[got["count"] == 1, "row"].to_numpy()
    assert vis[got["row"]].all() and len(np.unique(single)) == len(single)  # ...and none twice individually
    assert (got["start_ns"] >= t0).all() and (got["end_ns"] <= t1).all() and (got["start_ns"] <= got["end_ns"]).all()
    assert (got["busy_ns"] <= got["end_ns"] - got["start_ns"]).all()
    cell = np.minimum(((got["start_ns"] - t0) * (width / float(t1 - t0))).astype(np.int64), width - 1)
    assert got.groupby([got["lane"], got["depth"], cell]).size().to_numpy().max(initial=0) <= 2  # per pixel per row
    for (ln, d), g in got.groupby(["lane", "depth"]):
        k = np.flatnonzero(vis & (lane == ln) & (depth == d))
        clipped = [(max(int(ts[i]), t0), min(int(end[i]), t1)) for i in k]
        assert _union(clipped) <= g["busy_ns"].sum() <= sum(e - s for s, e in clipped)


@pytest.mark.parametrize("n", [0, 1, 50, 3000])
def test_tiles_match_naive_at_every_level(rng: np.random.Generator, n: int) -> None:
    lane, ts, end = _random_events(rng, n)
    idx = _index(lane, ts, end)
    lo, hi = (int(ts.min()), int(end.max()) + 1) if n else (BASE, BASE + 10)
    windows = [(lo, hi, 1600), (lo, hi, 7), (lo - 5, lo + 3, 1)]
    for _ in range(25):
        a, b = np.sort(rng.integers(lo - 1000, hi + 1000, 2))
        windows.append((int(a), int(b) + 1, int(rng.choice([1, 3, 64, 640, 1600]))))
    for t0, t1, width in windows:
        for level in range(idx.level_for(t0, t1, width) + 1):
            g = int(idx.level_ns[level - 1]) if level else 0
            want = _naive_tiles(lane, idx.depth_of, ts, end, t0, t1, width, g=g)
            _check_invariants(want, lane, idx.depth_of, ts, end, t0, t1, width)
            got = timeline_tiles(idx, t0, t1, width, level=level)
            pd.testing.assert_frame_equal(got, want, check_dtype=False)
    if n == 3000:
        assert len(idx.level_ns) >= 3 and max(idx.level_for(*w) for w in windows) >= 2  # the levels were exercised


def test_min_px_and_lane_subset(rng: np.random.Generator) -> None:
    lane, ts, end = _random_events(rng, 2000)
    idx = _index(lane, ts, end)
    t0, t1 = int(ts[100]), int(ts[1500])
    for min_px in (0.25, 3.0):
        lv = idx.level_for(t0, t1, 500, min_px)
        g = int(idx.level_ns[lv - 1]) if lv else 0
        got = timeline_tiles(idx, t0, t1, 500, min_px=min_px)
        pd.testing.assert_frame_equal(got, _naive_tiles(lane, idx.depth_of, ts, end, t0, t1, 500, min_px, g),
                                      check_dtype=False)  # fmt: skip
    sub = timeline_tiles(idx, t0, t1, 500, lanes=[2, "L0"])
    full = timeline_tiles(idx, t0, t1, 500)
    pd.testing.assert_frame_equal(sub, full[full["lane"] != 1].reset_index(drop=True))


def test_zoomed_in_every_event_is_individual() -> None:
    ts = BASE + np.arange(0, 100_000, 50)  # 50 ns apart, 20 ns long
    idx = _index(np.zeros(len(ts), np.int64), ts, ts + 20, 1)
    far = timeline_tiles(idx, BASE, BASE + 100_000, 100, level=0)
    assert far["count"].tolist() == [20] * 100 and far["busy_ns"].tolist() == [400] * 100
    assert idx.level_for(BASE, BASE + 100_000, 100) == 1 and idx.level_ns[0] == 256  # groups of 5-6 events
    grouped = timeline_tiles(idx, BASE, BASE + 100_000, 100)
    assert len(grouped) == 100 and grouped["count"].sum() == 2000 and grouped["busy_ns"].sum() == 40_000
    assert (grouped["end_ns"] - grouped["start_ns"] <= 1000 + 256).all()  # a bin reaches at most g past its pixel
    near = timeline_tiles(idx, BASE, BASE + 100_000, 10_000)
    assert (near["count"] == 1).all() and near["row"].tolist() == list(range(len(ts)))
    assert near["start_ns"].tolist() == ts.tolist() and (near["end_ns"] - near["start_ns"] == 20).all()


def test_edge_cases() -> None:
    ts = BASE + np.array([0, 100, 100, 100, 5000, 0])
    end = ts + np.array([0, 0, 0, 10, 0, 10_000])  # instants, a zero-length pile, one event over everything
    lane = np.array([0, 0, 0, 0, 0, 1])
    idx = _index(lane, ts, end, 3)  # lane 2 is empty
    got = timeline_tiles(idx, BASE + 50, BASE + 6000, 100)
    assert got.loc[got["lane"] == 1, ["start_ns", "end_ns", "count", "busy_ns"]].values.tolist() == [
        [BASE + 50, BASE + 6000, 1, 5950]]  # spans the window: one glyph, clipped
    zero = got[got["lane"] == 0]
    assert zero["count"].sum() == 4 and 2 not in set(got["lane"])  # t=0 is outside; the empty lane gives nothing
    assert timeline_tiles(idx, BASE + 1, BASE + 99, 100, lanes=[0]).empty
    assert timeline_tiles(idx, BASE + 5000, BASE + 5001, 1, lanes=[0])["row"].tolist() == [4]  # instant at t0
    assert timeline_tiles(idx, BASE + 4000, BASE + 5000, 1, lanes=[0]).empty  # ... but not at t1
    with pytest.raises(ValueError, match="t0_ns < t1_ns"):
        timeline_tiles(idx, BASE + 10, BASE + 10, 100)
    with pytest.raises(ValueError, match="width_px"):
        timeline_tiles(idx, BASE, BASE + 10, 0)
    with pytest.raises(ValueError, match="unknown lane"):
        timeline_tiles(idx, BASE, BASE + 10, 10, lanes=["nope", 7])
    with pytest.raises(ValueError, match="too coarse"):
        timeline_tiles(idx, BASE, BASE + 10, 10, level=1)
    empty = _index(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64), 0)
    assert timeline_tiles(empty, BASE, BASE + 10, 10).empty


def test_merged_item_ending_at_t1() -> None:
    ts = BASE + np.concatenate([np.arange(0, 250, 10), [255], np.arange(256, 10_000, 10)])
    end = ts + 2
    end[25] = ts[25]  # a zero-length event at t1 closes the first 256 ns bucket: it is not in the window
    idx = _index(np.zeros(len(ts), np.int64), ts, end, 1)
    t0, t1 = BASE - 1000, BASE + 255
    assert idx.level_ns[0] == 256 and idx.level_for(t0, t1, 1) == 1
    for level in (0, 1):
        assert timeline_tiles(idx, t0, t1, 1, level=level)["count"].tolist() == [25]


def _trace(rows: list[tuple]) -> Trace:
    cols = ["ph", "cat", "name", "pid", "tid", "ts_ns", "dur_ns", "device", "stream"]
    df = pd.DataFrame(rows, columns=cols)
    for c in ("correlation", "external_id", "id"):
        df[c] = -1
    df["bp"] = None
    for c in schema.CATEGORY_COLUMNS:
        df[c] = df[c].astype("category")
    return Trace(df[list(schema.EVENT_COLUMNS)], TraceMeta(rank=3), RawEvents(None, None, None))


def test_lanes_of_a_trace() -> None:
    t = _trace([
        ("X", "cpu_op", "outer", 10, 11, 1000, 500, -1, -1),
        ("X", "cpu_op", "inner", 10, 11, 1100, 100, -1, -1),
        ("X", "cuda_runtime", "launch", 10, 11, 1150, 10, -1, -1),
        ("i", "cpu_instant_event", "[memory]", 10, 11, 1120, -1, -1, -1),
        ("i", "cpu_instant_event", "mark", 10, 12, 1300, -1, -1, -1),
        ("X", "kernel", "k", 1, "stream 20", 1200, 50, 1, 20),
        ("X", "kernel", "k", 0, 7, 1200, 50, 0, 7),
        ("X", "gpu_user_annotation", "ann", 0, 7, 1190, 100, -1, -1),
        ("s", "ac2g", "flow", 10, 11, 1150, -1, -1, -1),
    ])  # fmt: skip
    idx = timeline_index(t)
    assert idx.lanes["label"].tolist() == ["rank 3 GPU 0 stream 7", "rank 3 GPU 1 stream 20",
                                           "rank 3 CPU 10 thread 11", "rank 3 CPU 10 thread 12"]  # fmt: skip
    assert idx.lane_of.tolist() == [2, 2, 2, -1, 3, 1, 0, 0, -1]
    assert idx.depth_of.tolist() == [0, 1, 2, -1, 0, 0, 1, 0, -1]
    assert idx.stack(2) == [0, 1, 2] and idx.stack(6) == [7, 6]
    assert idx.lanes["rows"].tolist() == [2, 1, 3, 1] and idx.lanes["events"].tolist() == [2, 1, 3, 1]
    got = timeline_tiles(t, 1000, 1500, 500)  # the index is built once and kept
    assert got["row"].tolist() == [7, 6, 5, 0, 1, 2, 4]
    assert timeline_index(t, instants=False).lane_of[4] == -1


def test_sample_trace_levels_agree() -> None:
    idx = timeline_index(aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"))
    t0, t1 = int(idx.ts.min()), int(idx.end.max()) + 1
    full = timeline_tiles(idx, t0, t1, 1600)
    assert full["count"].sum() == len(idx.ts) and len(full) < len(idx.ts) / 4
    level = idx.level_for(t0, t1, 1600 // 50)
    g = int(idx.level_ns[level - 1])
    full = timeline_tiles(idx, t0, t1, 1600 // 50)
    assert level > 0 and full["count"].sum() == len(idx.ts) and len(full) < 2 * 32 * len(idx.track_lane)
    rows = idx.row
    ts, end = np.zeros(idx.lane_of.shape, np.int64), np.zeros(idx.lane_of.shape, np.int64)
    ts[rows], end[rows] = idx.ts, idx.end
    want = _naive_tiles(idx.lane_of[rows], idx.depth_of[rows], ts[rows], end[rows], t0, t1, 1600 // 50, g=g)
    want["row"] = rows[want["row"]]
    pd.testing.assert_frame_equal(full, want, check_dtype=False)
    assert idx.lanes["kind"].tolist()[:2] == ["gpu", "gpu"]


def _naive_m4(ts: np.ndarray, val: np.ndarray, t0: int, t1: int, width: int) -> list[tuple]:
    out = []
    before = [i for i in range(len(ts)) if ts[i] < t0 and not np.isnan(val[i])]
    if before:
        i = max(before, key=lambda i: (ts[i], i))
        out.append((-1, 1, val[i], val[i], val[i], val[i]))
    for c in range(width):
        k = [i for i in range(len(ts)) if t0 <= ts[i] < t1 and not np.isnan(val[i])
             and min(int((ts[i] - t0) * (width / float(t1 - t0))), width - 1) == c]  # fmt: skip
        if k:
            v = val[k]
            out.append((c, len(k), v[0], v[-1], v.min(), v.max()))
    return out


def test_counter_tiles_match_naive(rng: np.random.Generator) -> None:
    ts = np.sort(BASE + rng.choice(100_000, 500, replace=False))
    val = rng.normal(size=500).round(1)
    val[rng.random(500) < 0.1] = np.nan
    for t0, t1, width in [(BASE, BASE + 100_000, 50), (BASE + 30_000, BASE + 31_000, 1600), (BASE - 9, BASE, 3)]:
        got = counter_tiles(ts, val, t0, t1, width)
        want = _naive_m4(ts, val, t0, t1, width)
        assert [tuple(r) for r in got[["px", "count", "first", "last", "min", "max"]].itertuples(index=False)] == want
        assert (got["min"] == val[np.searchsorted(ts, got["ts_min_ns"])]).all()
    perm = rng.permutation(500)
    pd.testing.assert_frame_equal(counter_tiles(ts[perm], val[perm], BASE, BASE + 100_000, 50),
                                  counter_tiles(ts, val, BASE, BASE + 100_000, 50))  # fmt: skip
    with pytest.raises(ValueError, match="one length"):
        counter_tiles(ts, val[:3], BASE, BASE + 1, 1)


def test_tile_details_hover_and_launch() -> None:
    t = _trace([
        ("X", "cpu_op", "outer", 10, 11, 1000, 500, -1, -1),
        ("X", "cpu_op", "inner", 10, 11, 1100, 100, -1, -1),
        ("X", "cuda_runtime", "cudaLaunchKernel", 10, 11, 1150, 10, -1, -1),
        ("X", "kernel", "gemm", 0, 7, 1200, 50, 0, 7),
        ("X", "kernel", "orphan", 0, 7, 1300, 50, 0, 7),
        ("X", "gpu_user_annotation", "ann", 0, 7, 1190, 100, -1, -1),
    ])  # fmt: skip
    t.events.loc[[2, 3], "correlation"] = 99
    idx = timeline_index(t)
    got = tile_details(t, idx, timeline_tiles(idx, 1000, 1500, 500)).set_index("row")
    assert got.loc[3, ["name", "cat", "dur_ns", "correlation", "stack", "launch", "launch_op"]].tolist() == [
        "gemm", "kernel", 50, 99, "outer > inner", 2, 1]  # fmt: skip
    assert got.loc[2, "stack"] == "outer > inner > cudaLaunchKernel" and got.loc[2, "launch_op"] == -1
    assert got.loc[4, "stack"] == "" and got.loc[4, "launch"] == -1 and got.loc[5, "stack"] == ""


def test_tile_details_on_sample_trace() -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    idx = timeline_index(t)
    t0 = int(np.median(idx.ts))
    got = tile_details(t, idx, timeline_tiles(idx, t0, t0 + 5_000_000, 1600))
    names = t.events["name"].astype(str).to_numpy()
    kernels = got[(got["cat"] == "kernel") & (got["launch_op"] >= 0)]
    assert len(kernels) > 10 and (kernels["launch"] >= 0).all()
    for r in kernels.itertuples():
        assert r.stack == " > ".join(names[idx.stack(r.launch_op)])
    cpu = got[idx.lanes["kind"].to_numpy()[got["lane"]] == "cpu"].head(50)
    assert [s.split(" > ")[-1] for s in cpu["stack"]] == cpu["name"].tolist()


def test_cpu_lane_labels_name_threads_and_kinetos_own_markers() -> None:
    from aonkit.timeline.index import cpu_label

    assert cpu_label(9001, 9001) == "CPU 9001 thread 9001"
    assert cpu_label("48213", "48332") == "CPU 48213 thread 48332"
    assert cpu_label("Spans", "PyTorch Profiler") == "Spans: PyTorch Profiler"  # not "CPU Spans thread ..."
    assert cpu_label("", "") == "events without pid and tid"  # not "CPU  thread"
    labels = aonkit.timeline_index(aonkit.load(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz")).lanes["label"].tolist()
    assert labels[0].startswith("CPU ") and not any(lb.startswith("CPU  ") or "CPU Spans" in lb for lb in labels)
