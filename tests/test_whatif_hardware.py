"""What if the trace had run on another GPU: per-kernel factors from the two rooflines, and the re-timed trace."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis.critical_path import graph_of, what_if
from aonkit.analysis.whatif_hardware import hardware_rules, hardware_scales
from aonkit.analysis.whatif_rules import Rule, factors
from aonkit.model import device_spec

from .conftest import SAMPLE_TRACES


def _x(name: str, cat: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _op(name: str, ts: float, corr: int, dims: list, types: list) -> list[dict]:
    """A CPU op [ts, ts + 20] launching one kernel (correlation ``corr``) from inside it."""
    return [_x(name, "cpu_op", ts, 20, **{"Input Dims": dims, "Input type": types}),
            _x("cudaLaunchKernel", "cuda_runtime", ts + 5, 5, correlation=corr)]  # fmt: skip


def hand_trace(tmp_path: Path, gpu: str = "NVIDIA H100 80GB HBM3") -> aonkit.Trace:
    """One op of each kind the projection tells apart, each kernel on stream 7 after the last.

    A 4096^3 bf16 matmul (compute-bound on every GPU here), a 16M-element fp32 add (memory-bound), and kernels
    the roofline cannot cost: an NCCL all-reduce, a custom attention kernel, a custom elementwise one, a host copy.
    """
    n = 1 << 24
    ev = [*_op("aten::mm", 0, 1, [[4096, 4096], [4096, 4096]], ["c10::BFloat16", "c10::BFloat16"]),
          *_op("aten::add", 30, 2, [[n], [n], []], ["float", "float", "Scalar"]),
          *_op("c10d::allreduce_", 60, 3, [], []), *_op("my::attention", 90, 4, [], []),
          *_op("my::scale", 120, 5, [], []), *_op("aten::copy_", 150, 6, [], [])]  # fmt: skip
    kernels = [("sm90_xmma_gemm_bf16bf16_bf16f32", 200), ("vectorized_elementwise_kernel", 120),
               ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 300), ("fmha_custom_fwd", 150),
               ("my_scale_kernel", 80)]  # fmt: skip
    t = 200.0
    for corr, (name, dur) in enumerate(kernels, 1):
        ev.append(_x(name, "kernel", t, dur, tid=7, pid=0, correlation=corr, device=0, stream=7))
        t += dur + 2
    ev.append(_x("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", t, 40, tid=7, pid=0, correlation=6, device=0,
                 stream=7, bytes=1 << 20))  # fmt: skip
    doc = {"deviceProperties": [{"id": 0, "name": gpu, "totalGlobalMem": 85_000_000_000, "numSms": 132}],
           "traceEvents": ev}  # fmt: skip
    (tmp_path / "t.json").write_text(json.dumps(doc))
    return aonkit.load(tmp_path / "t.json")


def test_each_kind_of_kernel_scales_by_its_roof(tmp_path: Path) -> None:
    t = hand_trace(tmp_path)
    h100, h200, a100 = device_spec("H100 SXM"), device_spec("H200 SXM"), device_spec("A100 SXM")
    bw_h200 = h100.memory_bandwidth / h200.memory_bandwidth
    # H100 -> H200: the same peaks, 1.43x the bandwidth
    s = hardware_scales(t, "H200 SXM").set_index("name")
    assert s.attrs == {"source": "H100 SXM", "target": "H200 SXM", "matrix_roof": "bf16"}
    assert s.at["sm90_xmma_gemm_bf16bf16_bf16f32", "scale"] == pytest.approx(1.0)  # compute-bound
    assert s.at["vectorized_elementwise_kernel", "scale"] == pytest.approx(bw_h200)  # memory-bound
    assert s.at["ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "scale"] == 1.0  # comm_scale
    assert s.at["fmha_custom_fwd", "scale"] == pytest.approx(1.0)  # uncosted, read as a matrix kernel: bf16 peaks
    assert s.at["my_scale_kernel", "scale"] == pytest.approx(bw_h200)  # uncosted: bandwidth
    assert s.at["Memcpy HtoD (Pageable -> Device)", "scale"] == 1.0  # the host link
    assert s.loc["sm90_xmma_gemm_bf16bf16_bf16f32", ["events", "dur_ns", "costed_dur_ns"]].tolist() == [1, 200_000,
                                                                                                       200_000]
    assert s.loc["fmha_custom_fwd", "how"].startswith("not costed; reads as a matrix kernel")
    # H100 -> A100: the bf16 peak drops 3.2x, the bandwidth 1.6x; the links as given
    a = hardware_scales(t, a100, comm_scale=2.0).set_index("name")
    peak = h100.peak_flops["bf16"] / a100.peak_flops["bf16"]
    assert a.at["sm90_xmma_gemm_bf16bf16_bf16f32", "scale"] == pytest.approx(peak)
    assert a.at["fmha_custom_fwd", "scale"] == pytest.approx(peak)
    bw_a100 = h100.memory_bandwidth / a100.memory_bandwidth
    assert a.at["vectorized_elementwise_kernel", "scale"] == pytest.approx(bw_a100)
    assert a.at["ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "scale"] == 2.0
    # a target without a bf16 peak: the GEMM stays as measured and says so, never a silent NaN
    no_bf16 = dataclasses.replace(h200, name="no-bf16", peak_flops={k: v for k, v in h200.peak_flops.items()
                                                                    if k != "bf16"})  # fmt: skip
    n = hardware_scales(t, no_bf16).set_index("name").loc["sm90_xmma_gemm_bf16bf16_bf16f32"]
    assert n["scale"] == 1.0 and "1 events on a roof no-bf16 has no peak for: unchanged" in n["how"]


def test_the_rules_scale_exactly_the_named_kernels(tmp_path: Path) -> None:
    t = hand_trace(tmp_path)
    rules = hardware_rules(hardware_scales(t, "A100 SXM"))
    assert len(rules) == 2 and all(r.kind == "gpu" for r in rules)  # the peak ratio and the bandwidth ratio
    g = graph_of(t)
    f = factors(t, g, rules)
    names = t.events["name"].astype(str).to_numpy()[np.maximum(g.row, 0)]
    s = hardware_scales(t, "A100 SXM").set_index("name")["scale"].round(3)
    gpu = np.flatnonzero((g.kind == 2) & (g.row >= 0))  # KIND_GPU
    assert len(gpu) == 6
    assert f[gpu].tolist() == [s[n] for n in names[gpu]]
    assert (np.delete(f, gpu) == 1.0).all()  # host work unchanged
    # a serial stream: the re-timed GPU time is the scaled one (launches are long done before the kernels)
    r = what_if(t, rules)
    measured = 200 + 120 + 300 + 150 + 80 + 40
    new = 200 * s["sm90_xmma_gemm_bf16bf16_bf16f32"] + 120 * s["vectorized_elementwise_kernel"] + 300 + \
        150 * s["fmha_custom_fwd"] + 80 * s["my_scale_kernel"] + 40
    assert r.step_time_ns - r.measured_ns == pytest.approx((new - measured) * 1e3, abs=2)
    # a rule given as a dict, its names as a list
    half = what_if(t, [{"scale": 0.5, "names": ["my_scale_kernel"]}])
    assert half.measured_ns - half.step_time_ns == 40_000
    assert what_if(t, [Rule(0.5, names=("no_such_kernel",))]).step_time_ns == half.measured_ns


def test_a_job_pools_its_ranks_and_a_faster_gpu_shortens_it(tmp_path: Path) -> None:
    job = aonkit.load_job([SAMPLE_TRACES / f"gpu_synthetic_rank{r}.json.gz" for r in (0, 1)])
    s = hardware_scales(job, "H200 SXM")
    assert s["events"].sum() == sum(len(t.gpu_events) for t in job.values())
    h200 = what_if(job, hardware_rules(s))
    bw = device_spec("H100 SXM").memory_bandwidth / device_spec("H200 SXM").memory_bandwidth
    # only the memory-bound kernels get faster (same tf32 peak): somewhat faster, far from the bandwidth ratio
    assert 1.0 < h200.speedup < 1 / bw
    assert what_if(job, hardware_rules(hardware_scales(job, "A100 SXM"))).speedup < 0.6  # 3.2x the tf32 time
    # a lazy job: the same table, each rank costed in a worker
    lazy = aonkit.open_job([SAMPLE_TRACES / f"gpu_synthetic_rank{r}.json.gz" for r in (0, 1)], cache_dir=tmp_path)
    try:
        pd.testing.assert_frame_equal(hardware_scales(lazy, "H200 SXM"), s)
    finally:
        lazy.close()


def test_an_unknown_gpu_says_what_to_pass(tmp_path: Path) -> None:
    t = hand_trace(tmp_path, gpu="Some Future Accelerator")
    with pytest.raises(ValueError, match="pass source="):
        hardware_scales(t, "H200 SXM")
    assert hardware_scales(t, "H200 SXM", source="H100 SXM")["scale"].notna().all()
    with pytest.raises(KeyError):
        hardware_scales(t, "no such GPU", source="H100 SXM")


def test_the_panel_runs_the_trace_on_another_gpu(tmp_path: Path) -> None:
    from aonkit.widgets import WhatIfPanel

    t = hand_trace(tmp_path)
    p = WhatIfPanel(t, timeline=False)
    assert p.device.value == "as measured" and "H200 SXM" in p.device.options
    p.device.value = "A100 SXM4 80GB"  # the observer re-times at once
    want = what_if(t, hardware_rules(hardware_scales(t, "A100 SXM4 80GB")))
    assert p.result.step_time_ns == want.step_time_ns > want.measured_ns and "for A100 SXM" in p.summary.value
    p.sliders["GPU communication"].value = 0.5  # the sliders apply on top
    both = what_if(t, [*hardware_rules(hardware_scales(t, "A100 SXM4 80GB")), Rule(0.5, kind="gpu",
                                                                             gpu_class="communication")])
    assert p.result.step_time_ns == both.step_time_ns == want.step_time_ns - 150_000
    p.device.value = "as measured"
    assert p.result.step_time_ns == p.result.measured_ns - 150_000
    # a trace whose GPU aonkit does not know: the panel says why and keeps the last result
    (tmp_path / "u").mkdir()
    q = WhatIfPanel(hand_trace(tmp_path / "u", gpu="Some Future Accelerator"), timeline=False)
    q.device.value = "H200 SXM"
    assert "cannot apply" in q.summary.value and "pass source=" in q.summary.value
