"""FLOPs of a real torch.profiler CPU run (record_shapes=True, with_flops=True) against the profiler's own count.

torch 2.13 computes ``flops`` (``FunctionEvent.flops``) for mm, addmm, bmm,
baddbmm, conv2d, add and mul, but does not write it into the exported trace,
so the formulas are compared with the profiler's in-memory events.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

import aonkit
from aonkit.analysis.flops import op_costs
from aonkit.analysis.roofline import roofline_table
from aonkit.model import DeviceSpec

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _run(tmp_path: Path) -> tuple[Path, dict]:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(6, 4, (3, 5), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
    lin = torch.nn.Linear(32, 16)
    x, a, b = torch.randn(2, 6, 10, 12), torch.randn(3, 5, 7), torch.randn(3, 7, 2)
    q = torch.randn(2, 4, 8, 16)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True, with_flops=True
    ) as prof:
        y = conv(x)
        h = lin(torch.randn(5, 32))
        out = (y * y).sum() + h.sum() + torch.bmm(a, b).sum() + torch.baddbmm(torch.randn(3, 5, 2), a, b).sum()
        out = out + torch.matmul(torch.randn(4, 3, 6), torch.randn(6, 2)).sum() + torch.mm(h.T, h).sum()
        out = out + torch.addmm(torch.randn(4), torch.randn(6, 5), torch.randn(5, 4)).sum()
        out = out + F.scaled_dot_product_attention(q, q, q, is_causal=True).sum()
        out.backward()
    path = tmp_path / "cpu_flops.pt.trace.json"
    prof.export_chrome_trace(str(path))
    counted: dict[tuple[str, str], set[int]] = defaultdict(set)
    for e in prof.events():
        if e.flops:
            counted[(e.name, str(e.input_shapes))].add(int(e.flops))
    return path, counted


def test_formulas_equal_the_profilers_flops(tmp_path: Path) -> None:
    path, profiler = _run(tmp_path)
    costs = op_costs(aonkit.load(path))
    ours: dict[tuple[str, str], set[float]] = defaultdict(set)
    for name, dims, flop in zip(costs["name"], costs["input_dims"], costs["formula_flop"]):
        ours[(name, dims)].add(flop)
    names = {n for n, _ in profiler}
    assert {"aten::conv2d", "aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::add", "aten::mul"} <= names
    for key, flops in profiler.items():
        assert ours[key] == flops, key
    conv = next(v for (n, _), v in profiler.items() if n == "aten::conv2d")
    assert conv == {2 * (2 * 4 * 5 * 8) * (3 * 3 * 5)}  # out (2, 4, 5, 8), weight (4, 3, 3, 5): 28800


def test_roofline_of_a_cpu_trace_with_a_user_spec(tmp_path: Path) -> None:
    path, _ = _run(tmp_path)
    cpu = DeviceSpec("this CPU (assumed)", {"fp32": 1e11, "fp32_matrix": 1e11}, memory_bandwidth=2e10)
    r = roofline_table(aonkit.load(path), spec=cpu)
    assert (r["timing"] == "cpu").all() and (r["gpu_events"] == 0).all()
    names = set(r["name"])
    assert {"aten::conv2d", "aten::linear", "aten::scaled_dot_product_attention", "aten::convolution_backward"} <= names
    assert "aten::addmm" in names  # the explicit torch.addmm call; the one inside linear is not counted twice
    assert not ({"aten::convolution", "aten::mkldnn_convolution", "aten::_convolution"} & names)
    att = r[r["name"] == "aten::scaled_dot_product_attention"].iloc[0]
    assert att["flop"] == 2 * 8 * (8 * 9 // 2) * 32  # causal: 36 of the 64 score pairs
    ok = r[r["dur_ns"] > 0]
    assert (ok["fraction_of_roof"] == ok["roofline_ns"] / ok["dur_ns"]).all()
    lin = r[r["name"] == "aten::linear"].iloc[0]
    assert lin["roofline_ns"] == pytest.approx(max(2 * 5 * 16 * 32 / 1e11, lin["bytes"] / 2e10) * 1e9)
