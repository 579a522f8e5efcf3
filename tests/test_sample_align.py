"""Activity samples against the kernels they describe: the busy-window kernels, and the shift that lines them up."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit._kernels.busy_windows import lagged_busy, merge_intervals
from aonkit.analysis.sample_align import alignment_curve, sample_alignment
from tests.conftest import load_events

MS = 1_000_000


def busy_in(intervals: list[tuple[int, int]], a: int, b: int) -> int:
    """Plain Python: length of the union of ``intervals`` inside ``[a, b)``."""
    covered = 0
    cur_s = cur_e = None
    for s, e in sorted(intervals):
        s, e = max(s, a), min(e, b)
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                covered += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return covered + (cur_e - cur_s if cur_e is not None else 0)


@pytest.mark.parametrize("seed", range(6))
def test_kernels_match_plain_python(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    start = np.sort(rng.integers(0, 1_000, n)).astype(np.int64)
    end = start + rng.integers(-20, 120, n)  # empty and negative intervals too
    ms, me = merge_intervals(start, end)
    assert (ms[1:] > me[:-1]).all() and (me > ms).all()  # disjoint, in order, none empty
    kept = [(int(s), int(e)) for s, e in zip(start, end) if e > s]
    assert int((me - ms).sum()) == busy_in(kept, -10**9, 10**9)
    w0 = rng.integers(-100, 1_100, 40).astype(np.int64)
    w1 = w0 + rng.integers(0, 200, 40)
    lags = np.array([-300, -7, 0, 1, 55, 400], np.int64)
    got = lagged_busy(ms, me, w0, w1, lags)
    want = [[busy_in(kept, int(a) - lag, int(b) - lag) for a, b in zip(w0, w1)] for lag in lags]
    assert got.tolist() == want


def bursts(rng: np.random.Generator, t1_ms: int) -> list[tuple[int, int]]:
    """Busy and idle stretches of 20-200 ms, each busy one a row of 0.3-3 ms kernels with small gaps."""
    kernels, t, busy = [], 0, True
    while t < t1_ms * MS:
        length = int(rng.integers(20, 200)) * MS
        if busy:
            k = t
            while k < t + length:
                d = int(rng.integers(300_000, 3 * MS))
                kernels.append((k, min(k + d, t + length)))
                k += d + int(rng.integers(2_000, 20_000))
        t, busy = t + length, not busy
    return kernels


def trace_with_samples(tmp_path, kernels, stamps, values, metric="gpm_sm_util_pct", device=0):  # noqa: ANN001, ANN201
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": s / 1e3, "dur": (e - s) / 1e3,
               "args": {"device": device, "stream": 7}} for s, e in kernels]  # fmt: skip
    trace = load_events(tmp_path, events)
    return trace.with_samples(pd.DataFrame({"ts_ns": stamps, "device": device, "metric": metric, "value": values}))


@pytest.mark.parametrize("late_ms", [0, 30, -120, 70])
def test_the_shift_that_was_put_in_is_found(tmp_path, late_ms: int) -> None:  # noqa: ANN001 - pytest fixture
    # GIVEN kernels in bursts over 4 s and a 50 ms sampler of their busy share, stamped late_ms late
    rng = np.random.default_rng(late_ms + 1000)
    kernels = bursts(rng, 4_000)
    truth = np.arange(300, 3_700, 50) * MS  # what each sample describes: (truth - 50 ms, truth]
    share = np.array([busy_in(kernels, t - 50 * MS, t) / (50 * MS) for t in truth])
    values = 100 * share + rng.normal(0, 3, len(share))
    trace = trace_with_samples(tmp_path, kernels, truth + late_ms * MS, values)
    # WHEN the samples are lined up with the kernels (shifts of 2.5 ms up to 250 ms)
    row = sample_alignment(trace, max_lag_ns=250 * MS).iloc[0]
    # THEN the shift found is the one put in, the match is close, and "aligned" says whether it is within 50 ms
    assert abs(row["lag_ns"] - late_ms * MS) <= 2.5 * MS, row
    assert row["r"] > 0.95 and row["interval_ns"] == 50 * MS and row["metric"] == "gpm_sm_util_pct"
    assert row["aligned"] == (abs(late_ms) <= 50)
    assert row["r_zero"] <= row["r"]
    curve = alignment_curve(trace, max_lag_ns=250 * MS)
    assert len(curve) == 201 and curve["lag_ns"].diff().dropna().eq(2.5 * MS).all()


def test_a_driver_window_longer_than_the_interval_biases_the_shift_unless_given(tmp_path) -> None:  # noqa: ANN001
    # GIVEN NVML-like utilization: every 100 ms, the busy share of the last 1/6 s (the driver's own period)
    rng = np.random.default_rng(5)
    kernels = bursts(rng, 6_000)
    window = 166_666_667
    stamps = np.arange(400, 5_600, 100) * MS
    values = np.array([100 * busy_in(kernels, t - window, t) / window for t in stamps])
    trace = trace_with_samples(tmp_path, kernels, stamps, values, metric="gpu_util_pct")
    # THEN given the driver's window the samples line up; taken as "since the last sample" they seem late
    given = sample_alignment(trace, window_ns=window).iloc[0]
    assert abs(given["lag_ns"]) <= 5 * MS and given["r"] > 0.99
    assumed = sample_alignment(trace).iloc[0]
    assert 10 * MS <= assumed["lag_ns"] <= 60 * MS


def test_samples_that_do_not_follow_the_kernels_are_not_aligned(tmp_path) -> None:  # noqa: ANN001
    # GIVEN samples of noise beside kernels in bursts: the best shift, -40 ms, is within the 50 ms interval,
    # its correlation weak (0.24)
    rng = np.random.default_rng(6)
    kernels = bursts(rng, 3_000)
    stamps = np.arange(300, 2_700, 50) * MS
    row = sample_alignment(trace_with_samples(tmp_path, kernels, stamps, rng.uniform(0, 100, len(stamps)))).iloc[0]
    # THEN however near zero that shift is, the samples are not called aligned
    assert abs(row["lag_ns"]) <= row["interval_ns"] and row["r"] < 0.5 and not row["aligned"]


def test_a_gpu_busy_throughout_gives_no_shift(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    kernels = [(i * MS, (i + 1) * MS) for i in range(1_000)]
    stamps = np.arange(100, 900, 50) * MS
    row = sample_alignment(trace_with_samples(tmp_path, kernels, stamps, np.full(len(stamps), 99.0))).iloc[0]
    assert np.isnan(row["lag_ns"]) and np.isnan(row["r"]) and not row["aligned"]


def test_pairs_devices_and_says_what_is_missing(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    rng = np.random.default_rng(9)
    kernels = bursts(rng, 2_000)
    stamps = np.arange(300, 1_700, 50) * MS
    values = np.array([100 * busy_in(kernels, t - 50 * MS, t) / (50 * MS) for t in stamps])
    # the trace's GPU is CUDA device 0, the sampler's NVML device 3 (CUDA_VISIBLE_DEVICES=3): one each, paired
    trace = trace_with_samples(tmp_path, kernels, stamps, values)
    trace.samples = trace.samples.assign(device=3)
    row = sample_alignment(trace).iloc[0]
    assert (row["device"], row["trace_device"]) == (3, 0) and abs(row["lag_ns"]) <= 2.5 * MS
    other = sample_alignment(trace, devices={3: 1}).iloc[0]  # no kernels on device 1: nothing to match
    assert other["trace_device"] == 1 and np.isnan(other["lag_ns"]) and not other["aligned"]
    with pytest.raises(ValueError, match="no metric \\['power_w'\\]"):
        sample_alignment(trace, ["power_w"])
    trace.samples = trace.samples.assign(metric="cpu_percent")
    with pytest.raises(ValueError, match="none of the GPU activity metrics"):
        sample_alignment(trace)
    trace.samples = None
    with pytest.raises(ValueError, match="has no samples"):
        sample_alignment(trace)


CUDA_BUNDLE = Path(__file__).resolve().parent.parent / "sample_traces" / "cuda" / "profile"


@pytest.mark.skipif(not CUDA_BUNDLE.is_dir(), reason="sample_traces/cuda is made on a GPU machine "
                    "(tools/make_cuda_samples.py); not made yet")  # fmt: skip
def test_the_real_cuda_bundle_lines_up() -> None:
    # GIVEN the %%aon_profile bundle of a GPT trained on a real GPU (its steps wait 100 ms for "data" each)
    trace = aonkit.load(CUDA_BUNDLE)
    table = sample_alignment(trace)
    # THEN its GPM activity (when the GPU had GPM) matches the kernels within one sampling interval
    gpm = table[table["metric"].str.startswith("gpm_")]
    if gpm.empty:
        pytest.skip(f"the bundle's GPU had no GPM metrics: {sorted(table['metric'])}")
    assert gpm["aligned"].all() and (gpm["r"] > 0.5).all(), gpm


def test_the_profile_summary_says_whether_the_samples_line_up(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    from aonkit.profiling import alignment_lines

    rng = np.random.default_rng(21)
    kernels = bursts(rng, 3_000)
    truth = np.arange(300, 2_700, 100) * MS
    share = np.array([busy_in(kernels, t - 100 * MS, t) / (100 * MS) for t in truth])
    on_clock = trace_with_samples(tmp_path / "a", kernels, truth, 100 * share)
    lines = alignment_lines(on_clock)
    assert lines[0].startswith("GPU samples against the kernels") and len(lines) == 2
    assert "gpm_sm_util_pct of GPU 0: best match +0.0 ms" in lines[1] and lines[1].endswith("on the trace's clock")
    late = trace_with_samples(tmp_path / "b", kernels, truth + 250 * MS, 100 * share)
    assert lines_end(alignment_lines(late), "NOT lined up with the kernels")
    flat = trace_with_samples(tmp_path / "c", kernels, truth, np.full(len(truth), 40.0))
    assert "no shift matches the kernels" in alignment_lines(flat)[1]
    host_only = trace_with_samples(tmp_path / "d", kernels, truth, share, metric="cpu_percent")
    assert alignment_lines(host_only) == []  # no GPU activity samples: nothing to say


def lines_end(lines: list[str], text: str) -> bool:
    return len(lines) == 2 and lines[1].endswith(text)
