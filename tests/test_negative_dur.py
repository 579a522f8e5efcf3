"""One rule for events without a duration: ``dur_ns < 0`` (absent, or negative in the file) adds to no sum.

Three kernels of one name on one stream; the middle one has no usable
duration. Whether its ``dur`` is absent (``dur_ns == -1``), negative in the
file, or set to another negative value, every analysis must give the
figures of the two good kernels alone: 20 µs of kernel time in a 50 µs span.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit import timeline
from aonkit.analysis import hta_compat, hta_counters, idle, kernels, summary
from aonkit.report.hta_report import write_hta_report

GOOD_NS = 20_000  # two 10 µs kernels
SPAN_NS = 50_000  # first start (100 µs) to last end (150 µs)


def _trace(tmp_path: Path, middle: str) -> aonkit.Trace:
    """``middle``: ``"absent"`` (no ``dur`` key), ``"file"`` (``"dur": -5`` in the file) or ``"set"`` (-5000 ns)."""
    events = []
    for corr, ts in enumerate((100, 120, 140), start=1):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": ts - 20, "dur": 5, "args": {"correlation": corr}})  # fmt: skip
        k = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": ts, "dur": 10,
             "args": {"device": 0, "stream": 7, "correlation": corr}}  # fmt: skip
        if corr == 2:
            if middle == "absent":
                del k["dur"]
            else:
                k["dur"] = -5
        events.append(k)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{middle}.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t = aonkit.load(path)
    if middle == "set":  # a negative value other than the loader's -1, as a user's edit of the table can leave
        ev = t.events.copy()
        ev.loc[ev["dur_ns"] < 0, "dur_ns"] = -5_000
        t.events = ev  # a new table: the memo recomputes
    assert (t.kernels["dur_ns"] < 0).sum() == 1  # "file": -1 with a load warning, or -5000 from older loaders
    return t


CASES = ["absent", "file", "set"]


@pytest.mark.parametrize("middle", CASES)
def test_kernel_stats_leave_it_out(tmp_path: Path, middle: str) -> None:
    ks = kernels.kernel_stats(_trace(tmp_path, middle))
    assert ks[["name", "count", "total_ns", "min_ns", "max_ns"]].values.tolist() == [["gemm", 2, GOOD_NS, 10_000,
                                                                                       10_000]]  # fmt: skip
    s = summary.summarize(_trace(tmp_path, middle))
    assert s.top_kernels[["count", "total_ns"]].values.tolist() == [[2, GOOD_NS]] and s.gpu_busy_ns == GOOD_NS


@pytest.mark.parametrize("middle", CASES)
def test_hta_kernel_breakdown_leaves_it_out(tmp_path: Path, middle: str) -> None:
    frames = hta_compat.hta_frames(_trace(tmp_path, middle))
    kb = hta_compat.gpu_kernel_breakdown_kernels(frames)
    assert kb[["name", "sum (us)", "min (us)", "max (us)"]].values.tolist() == [["gemm", 20, 10, 10]]
    tb = hta_compat.temporal_breakdown(frames)
    assert tb[["compute_time(us)", "idle_time(us)", "kernel_time(us)"]].values.tolist() == [[20, 30, 50]]
    assert hta_counters.idle_time_breakdown(frames)[0]["idle_time"].sum() == 30
    assert len(hta_counters.cuda_kernel_launch_stats(frames)) == 2


@pytest.mark.parametrize("middle", CASES)
def test_hta_report_csv_sums_leave_it_out(tmp_path: Path, middle: str) -> None:
    write_hta_report({0: _trace(tmp_path, middle)}, tmp_path / "out")
    for name in ("gpu_kernel_breakdown_kernels.csv", "gpu_kernel_breakdown_kernels_all.csv"):
        csv = pd.read_csv(tmp_path / "out" / name)
        assert csv["sum (us)"].tolist() == [20] and csv["min (us)"].tolist() == [10]
    kinds = pd.read_csv(tmp_path / "out" / "gpu_kernel_breakdown_type.csv")
    assert kinds["sum"].sum() == 20


@pytest.mark.parametrize("middle", CASES)
def test_idle_busy_time_leaves_it_out(tmp_path: Path, middle: str) -> None:
    t = _trace(tmp_path, middle)
    for by in ("device", "stream"):
        s = idle.idle_summary(t, by=by)
        assert s[["span_ns", "busy_ns", "idle_ns"]].values.tolist() == [[SPAN_NS, GOOD_NS, SPAN_NS - GOOD_NS]]
    gaps = idle.idle_series(t)
    assert gaps[["start_ns", "end_ns"]].values.tolist() == [[110_000, 140_000]]
    tiles = timeline.timeline_tiles(t, 0, 10**9, 10_000)
    gpu_lane = tiles[tiles["row"].isin(np.flatnonzero(t.events["cat"] == "kernel"))]
    assert gpu_lane["busy_ns"].sum() == GOOD_NS


@pytest.mark.parametrize("middle", ["file", "set"])
def test_any_negative_is_the_same_as_absent(tmp_path: Path, middle: str) -> None:
    absent, other = _trace(tmp_path / "a", "absent"), _trace(tmp_path / "b", middle)
    pd.testing.assert_frame_equal(kernels.kernel_stats(absent), kernels.kernel_stats(other))
    pd.testing.assert_frame_equal(idle.idle_summary(absent), idle.idle_summary(other))
    pd.testing.assert_frame_equal(hta_compat.hta_frames(absent)[0], hta_compat.hta_frames(other)[0])
    la, lo = kernels.launch_stats(absent), kernels.launch_stats(other)
    assert la["gpu_dur_ns"].tolist() == lo["gpu_dur_ns"].tolist() == [10_000, -1, 10_000]
