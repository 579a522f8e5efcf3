"""aonkit's own ns queue length and copy bandwidth, against hand-computed values and slow references."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit import schema
from aonkit._kernels.step_series import group_time_order, step_levels, time_weighted
from aonkit.analysis import bandwidth, queues

from .conftest import SAMPLE_TRACES, load_events


def _launch(ts: float, corr: int, name: str = "cudaLaunchKernel") -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1,
            "args": {"correlation": corr}}  # fmt: skip


def _gpu(ts: float, dur: float, corr: int, stream: int = 7, name: str = "k", cat: str = "kernel", **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": stream, "device": 0, **args}}  # fmt: skip


def test_queue_length_hand_made(tmp_path: Path) -> None:
    t = load_events(tmp_path, [
        _launch(0, 1), _launch(10, 2), _gpu(20, 5, 1), _gpu(30, 5, 2),
        _gpu(25, 1, 99),  # launched before the window: queued from its start (0)
        _launch(35, 4), _launch(40, 3), _gpu(40, 1, 4), _gpu(45, 1, 3),  # a launch and a start at 40
        _launch(50, 5, "cudaGraphLaunch"), _gpu(60, 1, 5), _gpu(70, 1, 5),  # one graph launch, two kernels
        _launch(5, 6), _gpu(8, 1, 6, stream=9),
    ])  # fmt: skip
    q = queues.queue_length_series(t)
    s7 = q[q["stream"] == 7]
    assert s7["ts_ns"].tolist() == [0, 10_000, 20_000, 25_000, 30_000, 35_000, 40_000, 45_000, 50_000, 60_000, 70_000]
    assert s7["queue_length"].tolist() == [2, 3, 2, 1, 0, 1, 1, 0, 2, 1, 0]
    assert q[q["stream"] == 9]["queue_length"].tolist() == [1, 0]
    summ = queues.queue_length_summary(t).set_index("stream")
    assert summ.loc[7, ["ops", "launched_before_trace", "max_queue_length"]].tolist() == [7, 1, 3]
    levels = np.array([2, 3, 2, 1, 0, 1, 1, 0, 2, 1])
    widths = np.diff(s7["ts_ns"].to_numpy())
    assert summ.loc[7, "mean_queue_length"] == pytest.approx((levels * widths).sum() / 70_000)


def _queue_reference(trace: aonkit.Trace) -> pd.DataFrame:
    """Each GPU event from its launch's start (or the window start) to its own start, summed per instant."""
    ev = trace.events
    first = {}
    for i in np.flatnonzero(ev["cat"].isin(schema.RUNTIME_CATS).to_numpy()):
        first.setdefault(int(ev["correlation"].iat[i]), int(ev["ts_ns"].iat[i]))
    window = int(ev["ts_ns"].min())
    changes: dict[tuple[int, int], dict[int, int]] = {}
    for i in np.flatnonzero(ev["cat"].isin(schema.GPU_CATS).to_numpy()):
        key = (int(ev["device"].iat[i]), int(ev["stream"].iat[i]))
        start = int(ev["ts_ns"].iat[i])
        corr = int(ev["correlation"].iat[i])
        enq = min(first[corr], start) if corr in first and corr != -1 else window
        d = changes.setdefault(key, {})
        d[enq] = d.get(enq, 0) + 1
        d[start] = d.get(start, 0) - 1
    rows = []
    for (dev, st), d in sorted(changes.items()):
        level = 0
        for ts in sorted(d):
            level += d[ts]
            rows.append((dev, st, ts, level))
    return pd.DataFrame(rows, columns=["device", "stream", "ts_ns", "queue_length"])


def test_queue_length_equals_reference_on_sample() -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    got = queues.queue_length_series(t)
    pd.testing.assert_frame_equal(got, _queue_reference(t), check_dtype=False)


def test_bandwidth_hand_made(tmp_path: Path) -> None:
    mem = {"cat": "gpu_memcpy"}
    t = load_events(tmp_path, [
        _gpu(0, 1, 1, name="Memcpy HtoD (Pinned -> Device)", bytes=1_000, **mem),  # 1 us: 1 GB/s
        _gpu(0.5, 1, 2, name="Memcpy HtoD (Pageable -> Device)", bytes=4_000, **mem),  # 4 GB/s, overlaps
        _gpu(3, 2, 3, name="Memcpy DtoH (Device -> Pinned)", bytes=2_000, **mem),
        _gpu(5, 0, 4, name="Memset (Device)", cat="gpu_memset", bytes=10),  # 0 ns: counted, no rate
        _gpu(6, 1, 5, name="Memcpy HtoD (Pinned -> Device)", **mem),  # no bytes arg
    ])  # fmt: skip
    s = bandwidth.memory_bandwidth_summary(t).set_index("kind")
    assert s.loc["Memcpy HtoD", "copies"] == 3 and s.loc["Memcpy HtoD", "bytes"] == 5_000
    assert s.loc["Memcpy HtoD", "busy_ns"] == 3_000 and s.loc["Memcpy HtoD", "union_ns"] == 2_500
    assert s.loc["Memcpy HtoD", "mean_gbps"] == pytest.approx(2.5)  # 5000 B over the 2000 ns of sized copies
    assert s.loc["Memcpy HtoD", "peak_gbps"] == pytest.approx(5.0)
    assert s.loc["Memcpy DtoH", "mean_gbps"] == pytest.approx(1.0)
    assert s.loc["Memset", "copies"] == 1 and s.loc["Memset", "peak_gbps"] == 0.0
    series = bandwidth.memory_bandwidth_series(t)
    h = series[series["kind"] == "Memcpy HtoD"]
    assert h["ts_ns"].tolist() == [0, 500, 1_000, 1_500]
    assert h["copies"].tolist() == [1, 2, 1, 0]
    np.testing.assert_allclose(h["gbps"], [1.0, 5.0, 4.0, 0.0])


def test_bandwidth_series_matches_reference_on_sample() -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    c = bandwidth.copies(t)
    got = bandwidth.memory_bandwidth_series(t)
    for (dev, kind), g in c[c["gbps"].notna()].groupby(["device", "kind"]):
        d: dict[int, list] = {}
        for ts, dur, r in zip(g["ts_ns"], g["dur_ns"], g["gbps"]):
            d.setdefault(ts, [0, 0.0])[0] += 1
            d[ts][1] += r
            d.setdefault(ts + dur, [0, 0.0])[0] -= 1
            d[ts + dur][1] -= r
        mine = got[(got["device"] == dev) & (got["kind"] == kind)]
        assert mine["ts_ns"].tolist() == sorted(d)
        assert mine["copies"].tolist() == np.cumsum([d[k][0] for k in sorted(d)]).tolist()
        want = np.cumsum([d[k][1] for k in sorted(d)])
        np.testing.assert_allclose(mine["gbps"], np.where(mine["copies"] == 0, 0.0, want), atol=1e-9)


def test_step_kernels_against_reference(rng: np.random.Generator) -> None:
    n = 3000
    keys = rng.integers(0, 5, n) * 10**13
    t = rng.integers(0, 400, n)
    d = rng.choice([-1, 1], n)
    pos, offsets, gkeys = group_time_order(keys, t)
    assert pos.tolist() == sorted(range(n), key=lambda i: (keys[i], t[i], i))
    times, counts, values, out_off = step_levels(t, d, d.astype(float), pos, offsets)
    for g, k in enumerate(gkeys):
        sel = keys == k
        df = pd.DataFrame({"t": t[sel], "d": d[sel]}).groupby("t")["d"].sum().cumsum()
        assert times[out_off[g] : out_off[g + 1]].tolist() == df.index.tolist()
        assert counts[out_off[g] : out_off[g + 1]].tolist() == df.tolist()
    peak, mean = time_weighted(times, counts.astype(float), out_off)
    lv, tm = counts[out_off[0] : out_off[1]], times[out_off[0] : out_off[1]]
    assert peak[0] == lv.max() and mean[0] == pytest.approx((lv[:-1] * np.diff(tm)).sum() / (tm[-1] - tm[0]))


def test_queue_kernels_against_reference(rng: np.random.Generator) -> None:
    from aonkit._kernels.step_series import queue_inputs
    from aonkit.analysis.queues import queue_sweep

    n_ev, n = 500, 300
    ts = rng.integers(0, 1_000, n_ev)
    ts[rng.random(n_ev) < 0.05] = schema.TS_MISSING
    gpu = rng.choice(n_ev, n, replace=False)
    launch = np.where(rng.random(n) < 0.2, -1, rng.integers(0, n_ev, n))
    device, stream = rng.integers(0, 2, n_ev), rng.integers(0, 3, n_ev) * 10**12  # sparse stream ids
    window = ts[ts != schema.TS_MISSING].min()
    up, down, before, dev, st = queue_inputs(gpu, launch, ts, device, stream, schema.TS_MISSING, window)
    want = [
        (window if lr < 0 else min(ts[lr], ts[g]), ts[g], lr < 0, device[g], stream[g])
        for g, lr in zip(gpu, launch)
        if ts[g] != schema.TS_MISSING
    ]
    assert list(zip(up, down, before, dev, st)) == want
    keys = dev * 3 + st // 10**12
    flag = rng.random(len(up)) < 0.3
    times, levels, out_off, gkeys, items, flagged, peak, mean = queue_sweep(keys, up, down, flag, True)
    want_peak, want_mean = time_weighted(times, levels.astype(np.float64), out_off)
    np.testing.assert_array_equal(peak, want_peak.astype(np.int64))
    np.testing.assert_array_equal(mean, want_mean)  # the same sum in the same order: equal to the bit
    stats_only = queue_sweep(keys, up, down, flag, False)
    assert len(stats_only[0]) == 0 and all(np.array_equal(a, b, equal_nan=True) for a, b in
                                           zip(stats_only[2:], (out_off * 0, gkeys, items, flagged, peak, mean)))
    assert gkeys.tolist() == sorted(set(keys.tolist()))
    for g, k in enumerate(gkeys):
        sel = keys == k
        d: dict[int, int] = {}
        for u, v in zip(up[sel], down[sel]):
            d[u] = d.get(u, 0) + 1
            d[v] = d.get(v, 0) - 1
        assert times[out_off[g] : out_off[g + 1]].tolist() == sorted(d)
        assert levels[out_off[g] : out_off[g + 1]].tolist() == np.cumsum([d[t] for t in sorted(d)]).tolist()
        assert items[g] == sel.sum() and flagged[g] == flag[sel].sum()


def test_launch_join_kernels_against_reference(rng: np.random.Generator) -> None:
    from aonkit._kernels.joins import launch_columns
    from aonkit.analysis.correlation import gpu_launch_rows

    n = 2_000
    for spread in (50, 10**15):  # a compact correlation range (direct table) and a sparse one (hash table)
        codes = rng.integers(-1, 6, n).astype(np.int8)  # -1: missing category
        is_gpu = np.array([1, 1, 0, 0, 0, 0, 0], bool)  # one flag per code, then the flag of code -1
        is_launch = np.array([0, 0, 1, 1, 0, 0, 0], bool)
        corr = rng.integers(-1, 40, n) * (spread // 50 + 1)
        gpu, launch = gpu_launch_rows(codes, is_gpu, is_launch, corr)
        assert gpu.tolist() == [i for i in range(n) if codes[i] in (0, 1)]
        launch_rows = [i for i in range(n) if codes[i] in (2, 3)]
        want = [next((j for j in launch_rows if corr[j] == corr[g]), -1) if corr[g] >= 0 else -1 for g in gpu]
        assert launch.tolist() == want
        api_code = np.array([-1, -1, 0, -1, -1, -1, -1])  # only code 2 is an API of interest
        ts, dur = rng.integers(0, 10**6, n), rng.integers(0, 100, n)
        cols = launch_columns(gpu, launch, codes, api_code, ts, dur, corr)
        sel = [(g, lr) for g, lr in zip(gpu, launch) if lr >= 0 and codes[lr] == 2]
        want_cols = [[g for g, _ in sel], [lr for _, lr in sel], [0] * len(sel), [corr[g] for g, _ in sel],
                     [dur[lr] for _, lr in sel], [dur[g] for g, _ in sel],
                     [ts[g] - ts[lr] - dur[lr] for g, lr in sel]]  # fmt: skip
        assert [c.tolist() for c in cols] == want_cols
