"""aonkit's HTA-compatible analyses against Holistic Trace Analysis 0.5.0 outputs in ../shared/golden."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis import hta_compat as hc
from aonkit.analysis import hta_counters as hk

from .conftest import SHARED, require_shared
from .hta_csv import tie_envelope

GOLDEN = SHARED / "golden"
SETS = sorted(p.name for p in GOLDEN.iterdir() if (p / "_run.json").exists()) if GOLDEN.is_dir() else []
FLOAT_US = {"a100_nccl_data_rank0", "mi250_rocm_minitoy", "mi300x_resnet_rank0", "ns_resolution_v100", "qwen_h100"}


def _load(name: str) -> dict[int, aonkit.Trace]:
    run = json.loads((GOLDEN / name / "_run.json").read_text())
    inp = run["input"]
    fix = lambda p: SHARED / "traces" / Path(p).relative_to("holdout/traces")  # noqa: E731
    if "trace_dir" in inp:
        ts = aonkit.load(fix(inp["trace_dir"]))
        return dict(ts.items())
    return {int(r): aonkit.load(fix(p)) for r, p in inp["trace_files"].items()}


@pytest.fixture(autouse=True)
def _shared_golden() -> None:
    """Every test here reads ../shared/golden and ../shared/traces: skip with the reason when absent."""
    require_shared("golden")
    require_shared("traces")


@pytest.fixture(scope="module")
def frames_cache() -> dict[str, dict[int, pd.DataFrame]]:
    return {}


def _golden(name: str, csv: str, **read_kw) -> pd.DataFrame:
    """A golden CSV, or skip when HTA wrote none (or only a header) for this set."""
    path = GOLDEN / name / csv
    if not path.exists() or path.stat().st_size < 10:
        pytest.skip(f"HTA produced no {csv} for {name} (see the golden README)")
    return pd.read_csv(path, **read_kw)


def _frames(name: str, cache: dict) -> dict[int, pd.DataFrame]:
    if name not in cache:
        cache[name] = hc.hta_frames(_load(name))
    return cache[name]


@pytest.mark.parametrize("name", SETS)
def test_alignment_origin_matches(name: str) -> None:
    run = json.loads((GOLDEN / name / "_run.json").read_text())
    traces = _load(name)
    from aonkit.analysis import hta_prepare

    frames = {r: hta_prepare._one_rank(t) for r, t in traces.items()}  # each rank before the alignment
    low = min(int(f["ts"].min()) for f in frames.values())
    assert low == int(run["min_ts_before_alignment"])


@pytest.mark.parametrize("name", SETS)
def test_temporal_breakdown(name: str, frames_cache: dict) -> None:
    want = _golden(name, "temporal_breakdown.csv")
    got = hc.temporal_breakdown(_frames(name, frames_cache))
    assert got["rank"].tolist() == want["rank"].tolist()
    tol = 0 if name not in FLOAT_US else None
    for col in ("idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)"):
        g, w = got[col].to_numpy(float), want[col].to_numpy(float)
        if tol == 0:
            np.testing.assert_array_equal(g, w, err_msg=col)
        else:
            n_gpu = sum(len(hc.gpu_rows(f)) for f in _frames(name, frames_cache).values())
            assert np.all(np.abs(g - w) <= n_gpu), col
    if tol == 0:
        for col in ("idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"):
            np.testing.assert_allclose(got[col], want[col], atol=0.0101, err_msg=col)


@pytest.mark.parametrize("suffix", ["", "_all"])
@pytest.mark.parametrize("name", SETS)
def test_gpu_kernel_breakdown_type(name: str, suffix: str, frames_cache: dict) -> None:
    want = _golden(name, f"gpu_kernel_breakdown_type{suffix}.csv")
    got = hc.gpu_kernel_breakdown_type(_frames(name, frames_cache))
    # HTA's unstable sort of equal edge times can add zero-length overlap rows; compare the rest exactly
    w = want[want["sum"] > 0].set_index("kernel_type")
    g = got[got["sum"] > 0].set_index("kernel_type")
    assert set(g.index) == set(w.index)
    if name in FLOAT_US:
        n_gpu = sum(len(hc.gpu_rows(f)) for f in _frames(name, frames_cache).values())
        assert (g["sum"] - w.loc[g.index, "sum"]).abs().max() <= n_gpu
        return
    assert g["sum"].to_dict() == w["sum"].to_dict()
    pct = g.loc[w.index, "percentage"].to_numpy(float)
    np.testing.assert_allclose(pct, w["percentage"].to_numpy(float), atol=0.051)


@pytest.mark.parametrize("suffix", ["", "_all"])
@pytest.mark.parametrize("name", SETS)
def test_gpu_kernel_breakdown_kernels(name: str, suffix: str, frames_cache: dict) -> None:
    want = _golden(name, f"gpu_kernel_breakdown_kernels{suffix}.csv", keep_default_na=False)
    kw = {"duration_ratio": 1.0, "num_kernels": 1_000_000} if suffix else {}
    got = hc.gpu_kernel_breakdown_kernels(_frames(name, frames_cache), **kw)
    assert len(got) == len(want)
    assert got["name"].tolist() == want["name"].tolist()
    assert got["kernel_type"].tolist() == want["kernel_type"].tolist()
    assert got["rank"].tolist() == want["rank"].tolist()
    if name in FLOAT_US:
        return  # sums differ by HTA's float rounding (<= 1 us per event); names and grouping are exact
    for col in ("sum (us)", "max (us)", "min (us)", "mean (us)", "stddev"):
        np.testing.assert_allclose(got[col].to_numpy(float), want[col].to_numpy(float), rtol=1e-9, err_msg=col)


@pytest.mark.parametrize("name", SETS)
def test_comm_comp_overlap(name: str, frames_cache: dict) -> None:
    want = _golden(name, "comm_comp_overlap.csv")
    got = hc.comm_comp_overlap(_frames(name, frames_cache))
    assert got["rank"].tolist() == want["rank"].tolist()
    g, w = got["comp_comm_overlap_pctg"].to_numpy(float), want["comp_comm_overlap_pctg"].to_numpy(float)
    assert np.array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_allclose(g[~np.isnan(g)], w[~np.isnan(w)], atol=0.0101 if name not in FLOAT_US else 0.5)


@pytest.mark.parametrize("name", SETS)
def test_idle_time_breakdown(name: str, frames_cache: dict) -> None:
    want = _golden(name, "idle_time_breakdown.csv")
    want = want.drop(columns=[c for c in want.columns if c.startswith("Unnamed")])
    got, stats = hk.idle_time_breakdown(_frames(name, frames_cache))
    key = ["rank", "stream", "idle_category"]
    assert got[key].values.tolist() == want[key].values.tolist()
    if name in FLOAT_US:
        return
    np.testing.assert_array_equal(got["idle_time"].to_numpy(float), want["idle_time"].to_numpy(float))
    np.testing.assert_allclose(got["idle_time_ratio"].to_numpy(float), want["idle_time_ratio"].to_numpy(float))
    want_stats = pd.read_csv(GOLDEN / name / "idle_time_interval_stats.csv")
    cols = ["idle_category", "rank", "stream", "count", "mean", "std", "min", "25%", "50%", "75%", "max"]
    assert stats[cols[:3]].values.tolist() == want_stats[cols[:3]].values.tolist()
    np.testing.assert_allclose(stats[cols[3:]].to_numpy(float), want_stats[cols[3:]].to_numpy(float), atol=0.011)


@pytest.mark.parametrize("name", SETS)
def test_cuda_kernel_launch_stats(name: str, frames_cache: dict) -> None:
    want = _golden(name, "cuda_kernel_launch_stats.csv")
    got = hk.cuda_kernel_launch_stats(_frames(name, frames_cache))
    if want.empty:
        assert got.empty
        return
    cols = ["rank", "correlation", "cpu_duration", "gpu_duration", "launch_delay"]
    assert got[["rank", "correlation"]].values.tolist() == want[["rank", "correlation"]].values.tolist()
    if name not in FLOAT_US:
        np.testing.assert_array_equal(got[cols].to_numpy(float), want[cols].to_numpy(float))


def _check_tie_envelope(name: str, want: pd.DataFrame, lo: pd.DataFrame, hi: pd.DataFrame, bounded: list[str]) -> None:
    problems = tie_envelope(want, lo, hi, bounded)
    assert not problems, f"{name}: {problems}"


@pytest.mark.parametrize("name", SETS)
def test_queue_length_summary(name: str, frames_cache: dict) -> None:
    want = _golden(name, "queue_length_summary.csv", header=[0, 1], index_col=[0, 1])
    want.columns = [c[1] for c in want.columns]
    frames = _frames(name, frames_cache)
    got = hk.queue_length_summary(frames)
    assert list(got.index) == [tuple(int(x) for x in i) for i in want.index]
    np.testing.assert_array_equal(got["count"].to_numpy(), want["count"].to_numpy())
    if name not in FLOAT_US:
        other = hk.queue_length_summary(frames, ties="start_first")
        _check_tie_envelope(name, want, got, other, ["count", "mean", "min", "25%", "50%", "75%", "max"])


@pytest.mark.parametrize("name", SETS)
def test_memory_bw_summary(name: str, frames_cache: dict) -> None:
    want = _golden(name, "memory_bw_summary.csv", header=[0, 1], index_col=[0, 1])
    want.columns = [c[1] for c in want.columns]
    frames = _frames(name, frames_cache)
    got = hk.memory_bw_summary(frames)
    assert [(int(r), n) for r, n in got.index] == [(int(r), n) for r, n in want.index]
    if name not in FLOAT_US:
        lo, hi = hk.memory_bw_summary(frames, ties="down_first"), hk.memory_bw_summary(frames, ties="up_first")
        _check_tie_envelope(name, want, lo, hi, ["count", "max"])


@pytest.mark.parametrize(
    "name", ["hta_sampled_2rank", "resnet_2080ti", "v100_trace_diff_test_rank1", "qwen_h100", "a100_cupti_profiler"]
)
def test_hta_report_cli_writes_hta_files(name: str, tmp_path: Path) -> None:
    from aonkit.cli import main

    run = json.loads((GOLDEN / name / "_run.json").read_text())
    inp = run["input"]
    fix = lambda p: str(SHARED / "traces" / Path(p).relative_to("holdout/traces"))  # noqa: E731
    args = [fix(inp["trace_dir"])] if "trace_dir" in inp else [fix(p) for p in inp["trace_files"].values()]
    assert main(["hta-report", *args, "--out", str(tmp_path)]) == 0
    for csv in sorted((GOLDEN / name).glob("*.csv")):
        if csv.name in {
            "profiler_steps.csv",
            "potential_stragglers.csv",
            "time_spent_blocked_on_full_queue.csv",
            "gpu_user_annotation_breakdown.csv",
            "cupti_counter_data_with_operators.csv",
        }:
            continue  # not written yet
        mine = tmp_path / csv.name
        assert mine.exists(), csv.name
        if csv.name == "cupti_counter_data_with_operators.csv":  # HTA dumps its internal frame: compare rows
            assert len(pd.read_csv(mine)) == len(pd.read_csv(csv))
            continue
        if csv.stat().st_size < 100 and csv.read_text().count("\n") <= 1:  # header only
            assert mine.read_text().splitlines()[0] == csv.read_text().splitlines()[0], csv.name
            continue
        want, got = pd.read_csv(csv, header=None), pd.read_csv(mine, header=None)
        assert want.shape == got.shape, csv.name
        assert want.iloc[:3, 0].astype(str).tolist() == got.iloc[:3, 0].astype(str).tolist(), csv.name
        assert want.iloc[0].astype(str).tolist() == got.iloc[0].astype(str).tolist(), csv.name  # header row


@pytest.mark.parametrize("name", SETS)
def test_profiler_steps_and_annotations(name: str, frames_cache: dict) -> None:
    frames = _frames(name, frames_cache)
    steps = GOLDEN / name / "profiler_steps.csv"
    if steps.exists():
        assert hc.profiler_step_numbers(frames) == pd.read_csv(steps)["profiler_step"].tolist()
    path = GOLDEN / name / "gpu_user_annotation_breakdown.csv"
    got = hc.gpu_user_annotation_breakdown(frames)
    if not path.exists():
        assert got.empty
        return
    want = pd.read_csv(path)
    assert got[["name", "rank"]].values.tolist() == want[["name", "rank"]].values.tolist()
    cols = ["sum (us)", "max (us)", "min (us)", "stddev", "mean (us)"]
    np.testing.assert_allclose(got[cols].to_numpy(float), want[cols].to_numpy(float), rtol=1e-9)


def test_cupti_counters_with_operators() -> None:
    from aonkit.analysis.cupti import cupti_counters

    want = pd.read_csv(GOLDEN / "a100_cupti_profiler" / "cupti_counter_data_with_operators.csv")
    got = cupti_counters(_load("a100_cupti_profiler")[0])
    assert got["row"].tolist() == want["index"].tolist()  # HTA calls the event row "index"
    assert got["index_runtime"].tolist() == want["index_runtime"].tolist()
    assert got["top_level_op"].tolist() == want["top_level_op"].tolist()
    assert got["bottom_level_op"].tolist() == want["bottom_level_op"].tolist()
    assert [str(s) for s in got["op_stack"]] == want["op_stack"].tolist()
    counters = [c for c in want.columns if c.startswith("smsp__")]
    np.testing.assert_array_equal(got[counters].to_numpy(float), want[counters].to_numpy(float))


@pytest.mark.parametrize("name", ["qwen_h100", "kineto_plugin_2020_resnet50"])
def test_answers_where_hta_fails(name: str, frames_cache: dict) -> None:
    if name == "kineto_plugin_2020_resnet50":  # a bare JSON array: HTA cannot load it at all
        path = SHARED / "traces/kineto-plugin-2020/samples/resnet50_num_workers_0/worker0.pt.trace.json.gz"
        frames = hc.hta_frames(aonkit.load(path))
    else:  # HTA asserts in its temporal breakdown
        frames = _frames(name, frames_cache)
    tb = hc.temporal_breakdown(frames).iloc[0]
    parts = [tb["idle_time(us)"], tb["compute_time(us)"], tb["non_compute_time(us)"]]
    assert min(parts) >= 0 and sum(parts) == tb["kernel_time(us)"] > 0
