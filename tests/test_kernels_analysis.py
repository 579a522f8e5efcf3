"""aonkit's native kernel breakdowns, GPU time per op and launch statistics."""

from __future__ import annotations

import numpy as np
import pytest

import aonkit
from aonkit.analysis.kernels import gpu_time_per_op, kernel_class, kernel_stats, launch_stats

from .conftest import SAMPLE_TRACES, require_shared


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
    assert "(launched before the trace)" in set(per["op"])


def test_launch_stats_include_hip() -> None:
    t = aonkit.load(require_shared() / "tracelens/mi300/resnet_act_checkpoint.json.gz")
    ls = launch_stats(t)
    assert {"hipLaunchKernel", "hipExtModuleLaunchKernel"} <= set(ls["api"])
    ev = t.events
    i = int(ls.index[0])
    assert ls.loc[i, "launch_delay_ns"] == ev["ts_ns"].iloc[ls.loc[i, "gpu"]] - (
        ev["ts_ns"].iloc[ls.loc[i, "launch"]] + ev["dur_ns"].iloc[ls.loc[i, "launch"]]
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
