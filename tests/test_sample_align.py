"""Activity samples against the kernels they describe: the busy-window kernels, and the shift that lines them up."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit._kernels.busy_windows import lagged_busy, merge_intervals
from aonkit.analysis.sample_align import EXPECTED_LAG_NS, alignment_curve, sample_alignment
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


def trace_with_samples(tmp_path, kernels, stamps, values, metric="SM Active", device=0):  # noqa: ANN001, ANN201
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
    assert row["r"] > 0.95 and row["interval_ns"] == 50 * MS and row["metric"] == "SM Active"
    assert row["aligned"] == (abs(late_ms) <= 50)
    assert row["r_zero"] <= row["r"]
    curve = alignment_curve(trace, max_lag_ns=250 * MS)
    assert len(curve) == 201 and curve["lag_ns"].diff().dropna().eq(2.5 * MS).all()


@pytest.mark.parametrize("late_ms", [0, 130])
def test_gpm_is_judged_against_the_drivers_own_delay(tmp_path, late_ms: int) -> None:  # noqa: ANN001
    # GIVEN a 10 Hz GPM-like sampler whose values trail the kernels by 130 ms (the driver's 78 ms plus the time
    # since its last refresh), or by nothing
    rng = np.random.default_rng(late_ms + 7)
    kernels = bursts(rng, 5_000)
    truth = np.arange(300, 4_700, 100) * MS
    share = np.array([busy_in(kernels, t - 100 * MS, t) / (100 * MS) for t in truth])
    rows = {}
    for metric in ("gpm_sm_util_pct", "SM Active"):
        trace = trace_with_samples(tmp_path / metric, kernels, truth + late_ms * MS, 100 * share, metric=metric)
        rows[metric] = sample_alignment(trace).iloc[0]
    # THEN both find the shift; GPM expects the driver's delay (128 ms) and a metric stamped by the hardware none
    for row in rows.values():
        assert abs(row["lag_ns"] - late_ms * MS) <= 5 * MS and row["r"] > 0.95, row
    gpm, hw = rows["gpm_sm_util_pct"], rows["SM Active"]
    assert gpm["expected_lag_ns"] == EXPECTED_LAG_NS["gpm_sm_util_pct"] and hw["expected_lag_ns"] == 0
    # AND "aligned" is judged against that: 130 ms late is GPM on the clock but not a hardware-stamped metric;
    # GPM on time (ahead of its driver by 128 ms, over one interval) is not either
    assert gpm["aligned"] == (late_ms == 130) and hw["aligned"] == (late_ms == 0)
    # AND with no expected delay given, GPM is judged as the others
    trace = trace_with_samples(tmp_path / "plain", kernels, truth + late_ms * MS, 100 * share, metric="gpm_sm_util_pct")
    assert sample_alignment(trace, expected_lag_ns={}).iloc[0]["aligned"] == (late_ms == 0)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_periodic_workload_takes_the_alias_nearest_the_expected_lag(tmp_path, seed: int) -> None:  # noqa: ANN001
    # GIVEN steps that repeat every 300 ms exactly (120 ms of kernels, then a wait) and a 50 ms sampler stamped
    # 20 ms late, searched 700 ms either way: shifts of 20 ms +- 300 k correlate about as well
    rng = np.random.default_rng(seed)
    kernels = [(t * MS, (t + 120) * MS) for t in range(0, 3_000, 300)]
    truth = np.arange(100, 2_900, 50) * MS
    share = np.array([busy_in(kernels, t - 50 * MS, t) / (50 * MS) for t in truth])
    trace = trace_with_samples(tmp_path, kernels, truth + 20 * MS, 100 * share + rng.normal(0, 2, len(share)))
    curve = alignment_curve(trace, max_lag_ns=700 * MS)
    peaks = curve[(curve["r"] > curve["r"].max() - 0.01)]
    assert (peaks["lag_ns"].abs() > 250 * MS).any()  # the aliases are there
    # THEN the peak nearest the expected lag (0) is taken, and it is the shift put in
    row = sample_alignment(trace, max_lag_ns=700 * MS).iloc[0]
    assert abs(row["lag_ns"] - 20 * MS) <= 2.5 * MS and row["aligned"], row


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
    assert "SM Active of GPU 0: best match +0.0 ms" in lines[1] and lines[1].endswith("on the trace's clock")
    late = trace_with_samples(tmp_path / "b", kernels, truth + 250 * MS, 100 * share)
    assert lines_end(alignment_lines(late), "NOT lined up with the kernels")
    flat = trace_with_samples(tmp_path / "c", kernels, truth, np.full(len(truth), 40.0))
    assert "no shift matches the kernels" in alignment_lines(flat)[1]
    host_only = trace_with_samples(tmp_path / "d", kernels, truth, share, metric="cpu_percent")
    assert alignment_lines(host_only) == []  # no GPU activity samples: nothing to say


def lines_end(lines: list[str], text: str) -> bool:
    return len(lines) == 2 and lines[1].endswith(text)
