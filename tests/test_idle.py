"""Native idle time (aonkit.analysis.idle): hand-made cases, a slow reference, invariants on every shared trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis.idle import IDLE_CATEGORIES, idle_series, idle_summary

from .adversarial import adversarial_job
from .conftest import SAMPLE_TRACES, load_events, shared_trace_files


def _launch(ts: float, corr: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 0.5,
            "args": {"correlation": corr}}  # fmt: skip


def _gpu(ts: float, dur: float, corr: int, stream: int = 7, device: int = 0, cat: str = "kernel") -> dict:
    return {"ph": "X", "cat": cat, "name": "k", "pid": device, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": stream, "device": device}}  # fmt: skip


def test_hand_made_causes(tmp_path: Path) -> None:
    t = load_events(tmp_path, [
        _launch(0, 1), _launch(1, 2), _launch(2, 3), _launch(200, 4),
        _gpu(10, 5, 1),                     # [10, 15)
        _gpu(15.3, 4.7, 2),                 # gap 0.3 µs, launched at 1: kernel wait 300 ns
        _gpu(100, 10, 3),                   # gap 80 µs, launched at 2: other (queued, waited long)
        _gpu(205, 1, 4),                    # gap 95 µs, launched at 200 > 110: host wait
        _gpu(206.5, 2, 99, stream=9),       # another stream: launch not in the trace; gap 0.5 µs: kernel wait
        _gpu(103, 2, 5, cat="gpu_memcpy"),  # inside [100, 110): no gap
    ])  # fmt: skip
    dev = idle_summary(t).iloc[0]
    assert dev["span_ns"] == 208_500 - 10_000
    assert (dev["host_wait_ns"], dev["kernel_wait_ns"], dev["other_ns"]) == (95_000, 300 + 500, 80_000)
    assert dev["busy_ns"] + dev["idle_ns"] == dev["span_ns"] and dev["gaps"] == 4
    gaps = idle_series(t)
    assert gaps["idle_category"].tolist() == ["kernel_wait", "other", "host_wait", "kernel_wait"]
    assert gaps["dur_ns"].tolist() == [300, 80_000, 95_000, 500]
    ev = t.events
    assert ev.loc[gaps["next_row"].iloc[2], "ts_ns"] == 205_000
    per_stream = idle_summary(t, by="stream")
    assert per_stream[["device", "stream"]].values.tolist() == [[0, 7], [0, 9]]
    assert per_stream["span_ns"].tolist() == [206_000 - 10_000, 2_000]


def test_overlap_is_never_counted_twice(tmp_path: Path) -> None:
    # two kernels of one stream overlapping by 227 ns (a real ROCm trace has such a pair), then a 1 µs gap
    t = load_events(tmp_path, [_launch(0, 1), _launch(0, 2), _launch(0, 3), _gpu(10, 1, 1), _gpu(10.773, 1, 2),
                         _gpu(12.773, 1, 3)])  # fmt: skip
    s = idle_summary(t, by="stream").iloc[0]
    assert (s["busy_ns"], s["idle_ns"], s["kernel_wait_ns"]) == (2_773, 1_000, 1_000)
    assert (idle_series(t)["dur_ns"] >= 0).all()


def _slow(trace: aonkit.Trace, by: str, delay: int) -> pd.DataFrame:
    """The obvious loop: per lane, events by start; a gap where a start passes the latest end."""
    ev = trace.events
    from aonkit.analysis.correlation import gpu_launches

    pairs = gpu_launches(trace)
    rows = []
    for gpu_row, launch_row in zip(pairs["gpu_row"], pairs["launch_row"]):
        e = ev.loc[gpu_row]
        if e["dur_ns"] < 0:
            continue
        launch = ev.loc[launch_row, "ts_ns"] if launch_row >= 0 else None
        key = (e["device"],) if by == "device" else (e["device"], e["stream"])
        rows.append((key, e["ts_ns"], e["ts_ns"] + e["dur_ns"], launch))
    out = []
    for key in sorted({r[0] for r in rows}):
        lane = sorted((r for r in rows if r[0] == key), key=lambda r: r[1])
        reach, idle = lane[0][2], dict.fromkeys(IDLE_CATEGORIES, 0)
        for _, ts, end, _ in lane[1:]:
            if ts > reach:
                launches = [r[3] for r in lane if r[1] == ts and r[3] is not None]
                cat = ("host_wait" if launches and min(launches) > reach else
                       "kernel_wait" if ts - reach < delay else "other")  # fmt: skip
                idle[cat] += ts - reach
            reach = max(reach, end)
        out.append((*key, reach - lane[0][1], *idle.values()))
    cols = ["device"] + (["stream"] if by == "stream" else []) + ["span_ns"] + [f"{c}_ns" for c in IDLE_CATEGORIES]
    return pd.DataFrame(out, columns=cols)


@pytest.mark.parametrize("by", ["device", "stream"])
def test_equals_the_slow_loop_on_the_sample(by: str) -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    want = _slow(t, by, 30_000)
    got = idle_summary(t, by=by)[want.columns]
    pd.testing.assert_frame_equal(got.astype(np.int64), want.astype(np.int64))


SHARED = [p for p in shared_trace_files() if ".json" in p.name and "broken" not in str(p)]


@pytest.mark.parametrize("path", SHARED, ids=[p.name for p in SHARED])
def test_invariants_on_shared_traces(path: Path) -> None:
    """busy + idle == span exactly, causes sum to idle, and every figure an integer ns, on every real trace."""
    try:
        t = aonkit.load(path)
    except aonkit.TraceFormatError:
        pytest.skip("not a loadable trace (a broken file kept on purpose)")
    if isinstance(t, aonkit.TraceSet):
        pytest.skip("a job; its ranks are checked one by one")
    _check_invariants(t)


@pytest.mark.parametrize("seed", range(0, 400, 10))
def test_invariants_on_adversarial_traces(seed: int, tmp_path: Path) -> None:
    """The same on the differential test's generator: overlaps, sub-µs and zero-length events, several streams."""
    for rank, doc in adversarial_job(seed).items():
        _check_invariants(load_events(tmp_path / str(rank), doc["traceEvents"]))


def _check_invariants(t: aonkit.Trace) -> None:
    for by in ("device", "stream"):
        s = idle_summary(t, by=by)
        for c in ("span_ns", "busy_ns", "idle_ns", *(f"{k}_ns" for k in IDLE_CATEGORIES)):
            assert s[c].dtype == np.int64 and (s[c] >= 0).all(), c
        assert (s["busy_ns"] + s["idle_ns"] == s["span_ns"]).all()
        assert (s[[f"{k}_ns" for k in IDLE_CATEGORIES]].sum(axis=1) == s["idle_ns"]).all()
        g = idle_series(t, by=by)
        assert (g["dur_ns"] > 0).all() and int(g["dur_ns"].sum()) == int(s["idle_ns"].sum())
    gpu = t.gpu_events
    gpu = gpu[gpu["dur_ns"] >= 0]
    s = idle_summary(t)
    if len(gpu):  # a device's span is its first start to its last end
        ends = (gpu["ts_ns"] + gpu["dur_ns"]).groupby(gpu["device"]).max()
        starts = gpu["ts_ns"].groupby(gpu["device"]).min()
        assert s.set_index("device")["span_ns"].to_dict() == (ends - starts).to_dict()
