"""What if the batch grew: per-kernel factors from the work each kernel's op does per sample, and the sweep.

The simulator's ground truth (the same job at another batch) is in ``tests/test_whatif_truth.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis.critical_path import what_if
from aonkit.analysis.whatif_batch import batch_rules, batch_scales, batch_sweep
from aonkit.analysis.whatif_hardware import hardware_rules, hardware_scales
from aonkit.errors import MissingInputError
from aonkit.model import device_spec

from .conftest import SAMPLE_TRACES

BF16, F32 = "c10::BFloat16", "float"
H100 = device_spec("H100 SXM")


def _x(name: str, cat: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def hand_trace(tmp_path: Path, gpu: str = "NVIDIA H100 80GB HBM3") -> aonkit.Trace:
    """One op per case, each launching one kernel (stream 7, one after the other); the kernel durations in us.

    A batch-1 ``linear`` (streams its 4096^2 bf16 weight: memory-bound), the weight gradient of a batch-1 token
    (``mm`` into a weight-shaped result: memory-bound on the result), an fp32 ``add`` of activations, an
    ``add_`` under ``Optimizer.step``, a foreach kernel, an all-reduce, a kernel of an op with no formula, and one
    shorter than the fixed part.
    """
    n = 1 << 23
    cases = [  # (op, dims, types, kernel, kernel us)
        ("aten::linear", [[1, 4096], [4096, 4096], [4096]], [BF16] * 3, "gemv_bf16", 20),
        ("aten::mm", [[4096, 1], [1, 4096]], [BF16] * 2, "gemm_wgrad_bf16", 15),
        ("aten::add", [[8, n // 8], [8, n // 8], []], [F32, F32, "Scalar"], "vectorized_elementwise_add", 40),
        ("aten::add_", [[4096, 4096], [4096, 4096], []], [BF16, BF16, "Scalar"], "optimizer_add", 30),
        ("aten::_foreach_add_", [[], []], ["TensorList", "Scalar"], "multi_tensor_apply_kernel<Adam>", 25),
        ("c10d::allreduce_", [], [], "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 50),
        ("my::custom", [], [], "my_custom_kernel", 12),
        ("aten::relu", [[64], []], [F32, "Scalar"], "tiny_kernel", 1),
    ]
    ev = [_x("Optimizer.step#AdamW.step", "user_annotation", 158, 34)]  # holds the add_ only
    for corr, (op, dims, types, _, _) in enumerate(cases, 1):
        ts = 40.0 * corr + (5 if op == "aten::add_" else 0)
        ev.append(_x(op, "cpu_op", ts, 20, **{"Input Dims": dims, "Input type": types}))
        ev.append(_x("cudaLaunchKernel", "cuda_runtime", ts + 5, 5, correlation=corr))
    g = 500.0
    for corr, (_, _, _, kernel, dur) in enumerate(cases, 1):
        ev.append(_x(kernel, "kernel", g, dur, tid=7, pid=0, correlation=corr, device=0, stream=7))
        g += dur + 2
    doc = {"deviceProperties": [{"id": 0, "name": gpu, "totalGlobalMem": 85_000_000_000, "numSms": 132}],
           "traceEvents": ev}  # fmt: skip
    (tmp_path / "t.json").write_text(json.dumps(doc))
    return aonkit.load(tmp_path / "t.json")


def _roof(flop: float, nbytes: float) -> float:
    return max(flop / H100.peak_flops["bf16"], nbytes / H100.memory_bandwidth)


def _scaled(dur_us: float, ratio: float, fixed_ns: float = 2_000.0) -> float:
    d = dur_us * 1e3
    f = min(d, fixed_ns)
    return (f + (d - f) * ratio) / d


def test_each_kernel_scales_by_what_carries_the_batch(tmp_path: Path) -> None:
    t = hand_trace(tmp_path)
    s = batch_scales(t, 8, overhead_ns=2_000).set_index("name")
    assert s.attrs == {"factor": 8.0, "overhead_ns": 2_000.0, "spec": "H100 SXM"}
    w = 4096 * 4096 * 2  # a bf16 weight
    # the batch-1 linear streams its weight and bias, which do not grow: 8x the activations barely matter
    x, bias, out = 4096 * 2, 4096 * 2, 4096 * 2
    ratio = _roof(8 * 2 * 4096 * 4096, w + bias + 8 * (x + out)) / _roof(2 * 4096 * 4096, w + bias + x + out)
    assert 1.0 < ratio < 1.01
    assert s.at["gemv_bf16", "scale"] == pytest.approx(_scaled(20, ratio))
    # the weight gradient: the two activation operands grow, the weight-shaped result does not
    ratio = _roof(8 * 2 * 4096 * 4096, w + 8 * 2 * (4096 * 2)) / _roof(2 * 4096 * 4096, w + 2 * 4096 * 2)
    assert s.at["gemm_wgrad_bf16", "scale"] == pytest.approx(_scaled(15, ratio))
    assert s.at["gemm_wgrad_bf16", "scale"] < 1.01  # a rule that scaled every byte would say ~8
    # activations only: 8x the bytes
    assert s.at["vectorized_elementwise_add", "scale"] == pytest.approx(_scaled(40, 8.0))
    assert s.at["vectorized_elementwise_add", "how"] == "its op's roofline time"
    # parameter-sized: under Optimizer.step, a foreach kernel; communication as comm_scale
    for name in ("optimizer_add", "multi_tensor_apply_kernel<Adam>"):
        assert s.at[name, "scale"] == 1.0 and s.at[name, "how"].startswith("parameter-sized")
    assert s.at["ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "scale"] == 1.0
    assert batch_scales(t, 8, comm_scale=8).set_index("name").at[
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "scale"] == 8.0  # fmt: skip
    # no formula: the whole variable part grows; shorter than the fixed part: unchanged
    assert s.at["my_custom_kernel", "scale"] == pytest.approx(_scaled(12, 8.0))
    assert s.at["my_custom_kernel", "how"] == "no cost formula: carries the batch"
    assert s.at["tiny_kernel", "scale"] == 1.0
    assert (s["new_dur_ns"] == (s["dur_ns"] * s["scale"]).round().astype(np.int64)).all()
    # the default fixed part: the shortest compute kernel (1 us here), at most 5 us
    assert batch_scales(t, 8).attrs["overhead_ns"] == 1_000.0
    # a smaller batch shrinks the same parts
    half = batch_scales(t, 0.5, overhead_ns=2_000).set_index("name")
    assert half.at["vectorized_elementwise_add", "scale"] == pytest.approx(_scaled(40, 0.5))
    assert half.at["optimizer_add", "scale"] == 1.0


def test_the_rules_retime_the_trace(tmp_path: Path) -> None:
    t = hand_trace(tmp_path)
    s = batch_scales(t, 4, overhead_ns=2_000)
    r = what_if(t, batch_rules(s))
    # one stream, its kernels back to back after their launches: the step grows by the kernels' added time
    added = float((s["dur_ns"] * (s["scale"].round(3) - 1)).sum())
    assert r.step_time_ns - r.model_ns == pytest.approx(added, abs=8)


def test_bad_input_says_why(tmp_path: Path) -> None:
    t = hand_trace(tmp_path, gpu="Some Future Accelerator")
    with pytest.raises(MissingInputError, match="pass spec="):  # its kernels are costed on an unknown GPU
        batch_scales(t, 2)
    assert batch_scales(t, 2, spec="H100 SXM")["scale"].notna().all()
    # no kernel costed from shapes (none recorded): the GPU is not needed
    doc = json.loads((tmp_path / "t.json").read_text())
    for e in doc["traceEvents"]:
        e["args"].pop("Input Dims", None)
    (tmp_path / "bare.json").write_text(json.dumps(doc))
    bare = batch_scales(aonkit.load(tmp_path / "bare.json"), 2, overhead_ns=2_000).set_index("name")
    assert bare.attrs["spec"] is None
    assert bare.at["gemv_bf16", "scale"] == pytest.approx(_scaled(20, 2.0))
    assert bare.at["optimizer_add", "scale"] == 1.0  # still under Optimizer.step
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="factor must be"):
            batch_scales(t, bad, spec="H100 SXM")
    for kw in ({"comm_scale": -1.0}, {"overhead_ns": float("nan")}, {"overhead_ns": -5.0}):
        with pytest.raises(ValueError, match=f"{next(iter(kw))} must be"):
            batch_scales(t, 2, spec="H100 SXM", **kw)


def test_the_sweep_finds_where_a_bigger_batch_stops_paying(tmp_path: Path) -> None:
    job = aonkit.load_job([SAMPLE_TRACES / f"gpu_synthetic_rank{r}.json.gz" for r in (0, 1)])
    s = batch_scales(job, 2)
    assert s["events"].sum() == sum(len(t.gpu_events) for t in job.values())
    sweep = batch_sweep(job, (0.5, 1, 2, 4), step=3)
    assert sweep["factor"].tolist() == [0.5, 1.0, 2.0, 4.0]
    one = sweep.set_index("factor").loc[1.0]
    assert one["step_ratio"] == 1.0 and one["throughput_ratio"] == 1.0
    assert one["step_ns"] == what_if(job, step=3).model_ns
    # the step grows less than the batch (the gradient all-reduce, the optimizer and the host stay), so
    # throughput rises, with diminishing returns as the GPU takes over the critical path
    assert sweep["step_ratio"].is_monotonic_increasing and (sweep["step_ratio"] < sweep["factor"]).iloc[2:].all()
    gains = sweep["throughput_ratio"].to_numpy()
    assert (np.diff(gains) > 0).all() and (np.diff(np.diff(gains[1:])) < 0).all()
    assert sweep["gpu_share"].is_monotonic_increasing
    # a lazy job: the same table, each rank costed in a worker
    lazy = aonkit.open_job([SAMPLE_TRACES / f"gpu_synthetic_rank{r}.json.gz" for r in (0, 1)], cache_dir=tmp_path)
    try:
        pd.testing.assert_frame_equal(batch_scales(lazy, 2), s)
    finally:
        lazy.close()


def test_the_panel_grows_the_batch(tmp_path: Path) -> None:
    from aonkit.widgets import WhatIfPanel

    t = hand_trace(tmp_path)
    p = WhatIfPanel(t, timeline=False)
    assert p.batch.value == 1.0 and 8.0 in p.batch.options
    p.batch.value = 4.0  # the observer re-times at once
    want = what_if(t, batch_rules(batch_scales(t, 4.0)))
    assert p.result.step_time_ns == want.step_time_ns > want.model_ns
    assert f"throughput (samples/s) <b>x{4 * want.model_ns / want.step_time_ns:.3f}</b>" in p.summary.value
    p.device.value = "H200 SXM"  # another GPU on top
    both = what_if(t, [*batch_rules(batch_scales(t, 4.0)), *hardware_rules(hardware_scales(t, "H200 SXM"))])
    assert p.result.step_time_ns == both.step_time_ns < want.step_time_ns
    p.device.value, p.batch.value = "as measured", 1.0
    assert p.result.step_time_ns == p.result.model_ns and "batch x" not in p.summary.value
    # costed kernels on a GPU aonkit does not know: the panel says why and keeps the last result
    (tmp_path / "u").mkdir()
    q = WhatIfPanel(hand_trace(tmp_path / "u", gpu="Some Future Accelerator"), timeline=False)
    q.batch.value = 2.0
    assert "cannot apply" in q.summary.value and "pass spec=" in q.summary.value


def _mem(ts: float, nbytes: int, addr: int, total: int, device_type: int = 1) -> dict:
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Total Reserved": 1 << 20, "Total Allocated": total, "Bytes": nbytes, "Addr": addr,
                     "Device Id": 0, "Device Type": device_type}}  # fmt: skip


def memory_trace(tmp_path: Path) -> aonkit.Trace:
    """1000 bytes allocated before the trace; an activation (400, freed after the peak), a gradient (200, under
    AccumulateGrad) and another activation (300) live at the 1900-byte peak; host memory beside."""
    ev = [_x("aten::linear", "cpu_op", 0, 20), _mem(5, 400, 1, 1400),
          _x("torch::autograd::AccumulateGrad", "cpu_op", 30, 20), _mem(35, 200, 2, 1600),
          _x("aten::relu", "cpu_op", 60, 20), _mem(65, 300, 3, 1900), _mem(66, 1 << 30, 9, 1 << 30, device_type=0),
          _mem(90, -400, 1, 1500),
          _x("gemm", "kernel", 100, 10, tid=7, pid=0, device=0, stream=7)]  # fmt: skip
    doc = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 5000}],
           "traceEvents": ev}  # fmt: skip
    (tmp_path / "m.json").write_text(json.dumps(doc))
    return aonkit.load(tmp_path / "m.json")


def test_the_memory_that_grows_with_the_batch(tmp_path: Path) -> None:
    from aonkit.analysis.whatif_batch_memory import batch_memory

    t = memory_trace(tmp_path)
    m = batch_memory(t, 3)
    # fixed: the 1000 bytes from before the trace and the gradient; growing: the two live activations
    assert m.to_dict("records") == [{"rank": -1, "device": 0, "peak_bytes": 1900, "fixed_bytes": 1200,
                                     "batch_bytes": 700, "projected_bytes": 1200 + 3 * 700, "capacity_bytes": 5000}]
    job = batch_memory({0: t, 5: t}, 0.5)
    assert job["rank"].tolist() == [0, 5] and job["projected_bytes"].tolist() == [1550, 1550]
    sweep = batch_sweep(t, (1, 4, 8)).set_index("factor")
    assert sweep["peak_bytes"].tolist() == [1900, 1200 + 4 * 700, 1200 + 8 * 700]
    assert (sweep["capacity_bytes"] == 5000).all()  # 8x does not fit
    assert batch_memory(hand_trace(tmp_path), 2).empty  # no profile_memory events: no rows
    assert batch_sweep(hand_trace(tmp_path), (2,))["peak_bytes"].tolist() == [-1]
    with pytest.raises(ValueError, match="factor must be"):
        batch_memory(t, 0)
    # the panel says it
    from aonkit.widgets import WhatIfPanel

    p = WhatIfPanel(t, timeline=False)
    p.batch.value = 2.0
    assert "peak GPU memory 0.0 GB of 0.0" in p.summary.value and "does not fit" not in p.summary.value
    p.batch.value = 8.0
    assert "(does not fit)" in p.summary.value


CUDA_SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces" / "cuda"


@pytest.mark.skipif(not (CUDA_SAMPLES / "gpt_b4.pt.trace.json.gz").is_file(),
                    reason="sample_traces/cuda is made on a GPU machine (tools/make_cuda_samples.py); not made yet")
def test_batch_4_predicts_batch_8_on_a_real_gpu() -> None:
    # GIVEN the same small GPT profiled on a real GPU (H200) at batch 4 and 8 (tools/make_cuda_samples.py): a
    # GPU-bound loop, so its throughput is the step period (one step's end to the next's)
    b4, b8 = (aonkit.load(CUDA_SAMPLES / f"gpt_b{b}.pt.trace.json.gz") for b in (4, 8))
    for src, dst, k in ((b4, b8, 2.0), (b8, b4, 0.5)):
        # WHEN one is re-timed with the batch what-if to the other's batch
        pred = what_if(src, batch_rules(batch_scales(src, k))).per_step().set_index("step")["period_ns"]
        meas = what_if(dst).per_step().set_index("step")["period_ns"]
        # THEN each step's period is the other's within 3% (measured on the 2026-12-04 bundle: 0.0% to 0.6%;
        # the optimizer's kernels, a third of batch 4's GPU time, hold while the rest doubles)
        both = (pred > 0) & (meas > 0)
        assert both.sum() == 2, (pred, meas)
        assert ((pred[both] / meas[both] - 1).abs() < 0.03).all(), (pred, meas)
        # AND the identity is not already that close: the batch changes the period by over 40%
        assert ((src_period := what_if(src).per_step().set_index("step")["period_ns"][both]) / meas[both] - 1
                ).abs().min() > 0.4, src_period
