"""Roofline model and roofline_table: hand-computed points on a small trace, and real shared traces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit.analysis.flops import op_costs
from aonkit.analysis.roofline import roofline_table
from aonkit.model import DeviceSpec, device_spec
from aonkit.model.roofline import attainable, bound, roof_key

from .conftest import require_shared

H100 = device_spec("H100 SXM")  # bf16 989.5e12, fp32 67e12 FLOP/s, 3.35e12 B/s


def test_roof_key_by_unit_and_dtype() -> None:
    assert roof_key("gemm", "bf16", H100) == "bf16"
    assert roof_key("gemm", "fp32", H100) == "fp32" and roof_key("conv", "fp32", H100, tf32=True) == "tf32"
    assert roof_key("gemm", "fp64", H100) == "fp64_matrix"
    assert roof_key("gemm", "fp32", device_spec("MI300X")) == "fp32_matrix"
    assert roof_key("elementwise", "bf16", H100) == "fp32"  # pointwise math runs in fp32 on the vector units
    assert roof_key("reduction", "fp64", H100) == "fp64"
    assert roof_key("gemm", "int64", H100) is None
    assert math.isnan(device_spec("V100 SXM2").peak(roof_key("gemm", "bf16", device_spec("V100 SXM2"))))


def test_attainable_and_bound_around_the_ridge() -> None:
    peak, bw = 989.5e12, 3.35e12  # ridge at 295.37 FLOP/byte
    i = np.array([100.0, 295.0, 296.0, 1000.0, np.nan])
    np.testing.assert_allclose(attainable(i, peak, bw), [3.35e14, 295 * 3.35e12, peak, peak, np.nan])
    assert bound(i, peak, bw).tolist() == ["memory", "memory", "compute", "compute", ""]


def _x(name: str, ts: float, dur: float, cat: str = "cpu_op", **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _kernel(name: str, ts: float, dur: float, corr: int) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "device": 0, "stream": 7}}  # fmt: skip


def _small_trace(tmp_path: Path, props: bool = True) -> Path:
    bf = "c10::BFloat16"
    events = [
        _x("aten::linear", 0, 100, **{"Input Dims": [[64, 128], [256, 128], [256]], "Input type": [bf, bf, bf]}),
        _x("aten::addmm", 10, 80, **{"Input Dims": [[256], [64, 128], [128, 256], [], []],
                                     "Input type": [bf, bf, bf, "Scalar", "Scalar"]}),  # fmt: skip
        _x("cudaLaunchKernel", 20, 5, "cuda_runtime", correlation=7),
        _x("cudaLaunchKernel", 40, 5, "cuda_runtime", correlation=8),
        _kernel("gemm_a", 200, 1.5, 7),
        _kernel("bias_b", 202, 0.5, 8),
        _x("aten::relu", 200, 3, **{"Input Dims": [[64, 256]], "Input type": [bf], "flops": 20000}),
        _x("cudaLaunchKernel", 300, 5, "cuda_runtime", correlation=9),  # launched outside any op
        _kernel("orphan", 310, 1, 9),
        _x("aten::view", 400, 1, **{"Input Dims": [[64, 256], []], "Input type": [bf, "ScalarList"]}),
    ]
    top: dict = {"traceEvents": events}
    if props:
        top["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936,
                                    "numSms": 132}]  # fmt: skip
    path = tmp_path / "small.json"
    path.write_text(json.dumps(top))
    return path


def test_op_costs_counts_the_outermost_op_and_uses_the_flops_arg(tmp_path: Path) -> None:
    c = op_costs(aonkit.load(_small_trace(tmp_path))).set_index("name")
    assert c.loc["aten::linear", "counted"] and not c.loc["aten::addmm", "counted"]
    assert c.loc["aten::linear", "flop"] == c.loc["aten::addmm", "flop"] == 2 * 64 * 256 * 128
    assert c.loc["aten::relu", "flop"] == 20000 and c.loc["aten::relu", "formula_flop"] == 64 * 256
    assert "aten::view" not in c.index


def test_roofline_by_op_hand_computed(tmp_path: Path) -> None:
    r = roofline_table(aonkit.load(_small_trace(tmp_path)))
    assert r.attrs["spec"].name == "H100 SXM"
    assert (r.attrs["gpu_ns"], r.attrs["gpu_ns_modelled"]) == (3000, 2000)
    lin, relu = r.set_index("name").loc["aten::linear"], r.set_index("name").loc["aten::relu"]
    # linear: 2*64*256*128 FLOPs; (64*128 + 256*128 + 256 + 64*256) * 2 bytes; kernels 1500 + 500 ns
    assert (lin["flop"], lin["bytes"], lin["dur_ns"]) == (4194304, 115200, 2000)
    assert (lin["timing"], lin["gpu_events"]) == ("gpu", 2)
    assert lin["intensity_flop_per_byte"] == pytest.approx(36.408889, rel=1e-6)
    assert lin["achieved_flop_per_s"] == pytest.approx(2.097152e12)
    assert lin["attainable_flop_per_s"] == pytest.approx(36.408889 * 3.35e12, rel=1e-6)
    assert lin["roofline_ns"] == pytest.approx(115200 / 3.35e12 * 1e9)  # 34.388 ns: memory time dominates
    assert lin["fraction_of_roof"] == pytest.approx(34.388060 / 2000, rel=1e-6)
    assert (lin["roof"], lin["bound"]) == ("bf16", "memory")
    # relu: no kernel -> its own CPU duration; the flops arg (20000) replaces 64*256; bf16 pointwise -> fp32 roof
    assert (relu["flop"], relu["bytes"], relu["dur_ns"], relu["timing"]) == (20000, 65536, 3000, "cpu")
    assert relu["roof"] == "fp32" and relu["peak_flop_per_s"] == 67e12
    assert relu["roofline_ns"] == pytest.approx(65536 / 3.35e12 * 1e9)
    assert relu["fraction_of_roof"] == pytest.approx(19.562985 / 3000, rel=1e-6)


def test_roofline_by_kernel_splits_by_duration(tmp_path: Path) -> None:
    k = roofline_table(aonkit.load(_small_trace(tmp_path)), by="kernel").set_index("name")
    assert list(k.index) == ["gemm_a", "bias_b"]  # relu launched nothing, orphan has no op
    assert k.loc["gemm_a", "flop"] == 0.75 * 4194304 and k.loc["bias_b", "bytes"] == 0.25 * 115200
    assert k.loc["gemm_a", "dur_ns"] == 1500 and (k["op_name"] == "aten::linear").all()
    assert k["fraction_of_roof"].to_numpy() == pytest.approx([34.388060 / 2000] * 2, rel=1e-6)


def test_spec_choices(tmp_path: Path) -> None:
    bare = aonkit.load(_small_trace(tmp_path, props=False))
    r = roofline_table(bare)
    assert r.attrs["spec"] is None and r["attainable_flop_per_s"].isna().all() and (r["bound"] == "").all()
    assert r["intensity_flop_per_byte"].notna().all()
    mi = roofline_table(bare, spec="MI300X").set_index("name")
    assert mi.loc["aten::linear", "peak_flop_per_s"] == 1307.4e12
    mine = DeviceSpec("toy", {"bf16": 1e12, "fp32": 1e11}, memory_bandwidth=1e10)  # ridge 100 FLOP/byte
    t = roofline_table(bare, spec=mine).set_index("name")
    # intensity 36.4 < ridge 100: the memory time 115200 B / 1e10 B/s = 11520 ns beats 4194304 / 1e12 s = 4194 ns
    assert t.loc["aten::linear", "roofline_ns"] == pytest.approx(11520.0)
    assert t.loc["aten::linear", "bound"] == "memory"
    with pytest.raises(ValueError, match="by must be"):
        roofline_table(bare, by="name")


# --- real shared traces ------------------------------------------------------------------------------------


def test_qwen_h100_linear_and_causal_attention() -> None:
    t = aonkit.load(require_shared() / "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    r = roofline_table(t)
    assert r.attrs["spec"].name == "H100 SXM"
    row = r[(r["name"] == "aten::linear") & (r["input_dims"] == "[[16, 559, 1024], [1024, 1024], [1024]]")].iloc[0]
    assert row["flop"] == 2 * (16 * 559) * 1024 * 1024  # 18,756,927,488
    assert row["bytes"] == (2 * 16 * 559 * 1024 + 1024 * 1024 + 1024) * 2
    assert (row["dtype"], row["roof"], row["timing"]) == ("bf16", "bf16", "gpu")
    # is_causal=True over q, k, v (16, 16, 559, 64): 256 heads x 559*560/2 pairs x 2 x (64 + 64)
    att = r[r["name"] == "aten::scaled_dot_product_attention"].iloc[0]
    assert att["flop"] == 2 * 256 * (559 * 560 // 2) * 128 and att["bytes"] == 4 * 16 * 16 * 559 * 64 * 2
    assert t.event_args(int(att["op_row"]))["Concrete Inputs"][5] == "True"
    # kernel rows carry exactly the GPU-timed ops' work
    k = roofline_table(t, by="kernel")
    gpu = r[r["timing"] == "gpu"]
    assert k["flop"].sum() == pytest.approx(gpu["flop"].sum()) and k["dur_ns"].sum() == gpu["dur_ns"].sum()
    assert k["dur_ns"].sum() == r.attrs["gpu_ns_modelled"]
    assert (gpu["fraction_of_roof"] > 0).all()


def test_mi300x_strided_conv_and_backward() -> None:
    t = aonkit.load(require_shared() / "tracelens/mi300/resnet_act_checkpoint.json.gz")
    r = roofline_table(t)
    assert r.attrs["spec"].name == "MI300X"
    conv = r[(r["name"] == "aten::conv2d") & (r["input_dims"].str.startswith("[[10, 256, 14, 14], [512, 256, 3, 3]"))]
    row = conv.iloc[0]
    assert t.event_args(int(row["op_row"]))["Concrete Inputs"][3:5] == ["[2, 2]", "[1, 1]"]  # stride 2, padding 1
    assert row["flop"] == 2 * (10 * 512 * 7 * 7) * (256 * 3 * 3)  # 14 -> 7
    assert row["bytes"] == (10 * 256 * 14 * 14 + 512 * 256 * 9 + 10 * 512 * 7 * 7) * 2
    assert (row["roof"], row["bound"]) == ("bf16", "compute")
    assert (r["name"] == "aten::convolution_backward").sum() == 60


def test_a100_fp32_gemms_on_tf32_kernels_get_the_tf32_roof() -> None:
    t = aonkit.load(require_shared() / "hta/trace_diff/control/control.json.gz")  # "NVIDIA A100-PG509-200", 40 GB
    r = roofline_table(t)
    assert r.attrs["spec"].name == "A100 40GB"
    row = r[(r["name"] == "aten::mm") & (r["input_dims"] == "[[1024, 128], [128, 1024]]")].iloc[0]
    assert row["flop"] == 2 * 1024 * 128 * 1024 and row["bytes"] == (2 * 1024 * 128 + 1024 * 1024) * 4
    kernels = roofline_table(t, by="kernel")
    names = kernels.loc[kernels["op_row"] == row["op_row"], "name"]
    assert names.str.contains("tensorop_s1688gemm").all()  # CUTLASS TF32 tensor-core kernels
    assert (row["roof"], row["peak_flop_per_s"]) == ("tf32", 156e12)
    # intensity 51.2 FLOP/byte < ridge 156e12 / 1555e9: memory time 5242880 B / 1555 GB/s = 3371.6 ns of 12000 ns
    assert row["fraction_of_roof"] == pytest.approx(5242880 / 1555e9 * 1e9 / row["dur_ns"])
    forced = roofline_table(t, tf32=False).set_index("op_row").loc[row["op_row"]]
    assert forced["roof"] == "fp32" and forced["fraction_of_roof"] > 1  # the FP32 roof cannot explain the speed
    assert (r.loc[r["dtype"] == "fp32", "roof"].isin(["tf32", "fp32"])).all()


def test_trace_without_modelled_ops_gives_an_empty_table(tmp_path: Path) -> None:
    import json

    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 5, "args": {"stream": 7}},
          {"ph": "X", "cat": "cpu_op", "name": "my::thing", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]
    (tmp_path / "n.json").write_text(json.dumps({"traceEvents": ev}))
    table = roofline_table(aonkit.load(tmp_path / "n.json"))
    assert len(table) == 0 and "fraction_of_roof" in table.columns
