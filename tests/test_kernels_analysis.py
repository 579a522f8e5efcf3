"""aonkit's native kernel breakdowns, GPU time per op and launch statistics."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis.kernels import COMM_PATTERN, gpu_time_per_op, kernel_class, kernel_stats, launch_stats

from .conftest import SAMPLE_TRACES, load_events, require_shared


def test_kernel_class_rule() -> None:
    assert kernel_class("kernel", "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)") == "communication"
    assert kernel_class("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)") == "communication"
    assert kernel_class("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)") == "memory"
    assert kernel_class("kernel", "ampere_sgemm_128x64_nn") == "computation"


def test_kernel_stats_sum_to_trace_totals() -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    by_name = kernel_stats(t)
    g = t.gpu_events
    assert by_name["count"].sum() == len(g) and by_name["total_ns"].sum() == g["dur_ns"].sum()
    row = by_name.iloc[0]
    d = g.loc[g["name"] == row["name"], "dur_ns"]
    assert (row["min_ns"], row["max_ns"]) == (d.min(), d.max())
    assert np.isclose(row["std_ns"], d.std(), rtol=1e-12)
    by_class = kernel_stats(t, by="class").set_index("class")
    assert by_class.loc["communication", "count"] == g["name"].astype(str).str.startswith("nccl").sum()


def test_gpu_time_per_op_accounts_for_every_gpu_event() -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    for level in ("op", "top_op"):
        per = gpu_time_per_op(t, level)
        assert per["gpu_events"].sum() == len(t.gpu_events)
        assert per["gpu_ns"].sum() == t.gpu_events["dur_ns"].clip(lower=0).sum()
    assert "(launched before the trace)" in set(per["op_name"])


def test_launch_stats_include_hip() -> None:
    t = aonkit.load(require_shared() / "tracelens/mi300/resnet_act_checkpoint.json.gz")
    ls = launch_stats(t)
    assert {"hipLaunchKernel", "hipExtModuleLaunchKernel"} <= set(ls["api"])
    ev = t.events
    i = int(ls.index[0])
    assert ls.loc[i, "launch_delay_ns"] == ev["ts_ns"].iloc[ls.loc[i, "gpu_row"]] - (
        ev["ts_ns"].iloc[ls.loc[i, "launch_row"]] + ev["dur_ns"].iloc[ls.loc[i, "launch_row"]]
    )
    assert np.median(ls["launch_delay_ns"]) > 0


def test_profiler_steps_on_sample() -> None:
    from aonkit.analysis.correlation import gpu_links
    from aonkit.analysis.steps import profiler_steps

    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    st = profiler_steps(t)
    assert len(st) >= 3 and st["step"].is_monotonic_increasing and (st["dur_ns"] > 0).all()
    links = gpu_links(t)
    assert st["gpu_events"].sum() == (links["step"] >= 0).sum()
    assert (st["gpu_end_ns"] >= st["ts_ns"]).all()


def test_profiler_steps_without_steps_skips_the_correlation(monkeypatch) -> None:
    from aonkit.analysis import correlation, memo, steps

    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    with_steps = steps.profiler_steps(t)
    t.events = t.events[~t.events["name"].astype(str).str.startswith("ProfilerStep")].reset_index(drop=True)
    memo.clear(t)
    monkeypatch.setattr(correlation, "_gpu_links", lambda tr: pytest.fail("gpu_links computed"))
    none = steps.profiler_steps(t)
    assert none.empty and list(none.columns) == list(with_steps.columns)
    assert (none.dtypes == with_steps.dtypes).all()


def _launch(corr: int, ts: float, dur: float | None, gpu_ts: float) -> list[dict]:
    call = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts,
            "args": {"correlation": corr}}  # fmt: skip
    if dur is not None:
        call["dur"] = dur
    return [call, {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": gpu_ts, "dur": 3,
                   "args": {"device": 0, "stream": 7, "correlation": corr}}]  # fmt: skip


def test_negative_launch_delays_are_kept_and_flagged(tmp_path: Path) -> None:
    from aonkit.errors import AonkitWarning

    events = (_launch(1, 100, 5, 110) + _launch(2, 200, 5, 203)  # after the call; while the call returns
              + _launch(3, 300, 5, 299) + _launch(4, 400, None, 402))  # fmt: skip  # before the call; no call dur
    t = load_events(tmp_path, events)
    with pytest.warns(AonkitWarning, match="1 of 4 GPU events start before their launch call") as caught:
        ls = launch_stats(t)
    assert caught[0].filename == __file__
    assert ls["launch_delay_ns"].tolist() == [5_000, -2_000, -6_000, 2_000]  # as measured, not clamped
    assert ls["before_return"].tolist() == [False, True, True, False]
    assert ls["clock_skew"].tolist() == [False, False, True, False]
    assert ls["cpu_dur_ns"].tolist() == [5_000, 5_000, 5_000, -1]


def test_negative_launch_delay_on_a_real_trace_is_not_skew() -> None:
    from aonkit.errors import AonkitWarning

    t = aonkit.load(require_shared() / "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    with warnings.catch_warnings():
        warnings.simplefilter("error", AonkitWarning)  # no skew here, so no warning
        ls = launch_stats(t)
    neg = ls[ls["launch_delay_ns"] < 0]
    assert neg["launch_delay_ns"].tolist() == [-883] and neg["before_return"].all()
    assert (ls["before_return"] == (ls["launch_delay_ns"] < 0)).all() and not ls["clock_skew"].any()
    ev = t.events
    g, call = int(neg["gpu_row"].iloc[0]), int(neg["launch_row"].iloc[0])
    assert ev["ts_ns"].iloc[call] < ev["ts_ns"].iloc[g] < ev["ts_ns"].iloc[call] + ev["dur_ns"].iloc[call]


@pytest.mark.parametrize("name", ["gpu_synthetic_rank0.json.gz", "shared:hta/nccl_parser_config/nccl_data.json.gz",
                                  "shared:hta/trace_filter/sampled_rank-0.json.gz"])  # fmt: skip
def test_a_class_table_is_the_gpu_table_rows_of_that_class(name: str) -> None:
    """Made alone or cut from the remembered whole table: the rows, columns, dtypes and index of the mask."""
    from aonkit.analysis import memo
    from aonkit.analysis.kernels import gpu_class_table, gpu_table

    path = require_shared() / name[7:] if name.startswith("shared:") else SAMPLE_TRACES / name
    t = aonkit.load(path)
    alone = {c: gpu_class_table(t, c) for c in ("communication", "computation", "memory")}
    assert memo.peek(t, ("gpu_table", COMM_PATTERN.pattern, COMM_PATTERN.flags)) is None  # nothing made whole
    whole = gpu_table(t)
    assert sum(len(x) for x in alone.values()) == len(whole)
    for c, part in alone.items():
        want = whole[whole["class"] == c]
        pd.testing.assert_frame_equal(part, want)
        pd.testing.assert_frame_equal(gpu_class_table(t, c), want)  # now from the remembered table
    if "nccl" in name:
        assert len(alone["communication"]) > 0
    with pytest.raises(ValueError, match="no kernel class 'comm'"):
        gpu_class_table(t, "comm")
