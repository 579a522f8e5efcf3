"""A real torch.profiler run on the CPU, exported and read back, against the stdlib reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aonkit

from .naive import reference_events

torch = pytest.importorskip("torch")


def _profile(tmp_path: Path) -> Path:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 32)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True, profile_memory=True
    ) as prof:
        for step in range(3):
            with torch.profiler.record_function(f"ProfilerStep#{step}"):
                opt.zero_grad()
                model(x).square().mean().backward()
                opt.step()
    out = tmp_path / "cpu.pt.trace.json"
    prof.export_chrome_trace(str(out))
    return out


def test_real_cpu_profile_parses_like_the_reference(tmp_path: Path) -> None:
    path = _profile(tmp_path)
    trace = aonkit.load(path)
    ref, top = reference_events(path)
    assert len(trace) == len(ref) > 50
    for col in ("ts_ns", "dur_ns", "external_id", "id"):
        np.testing.assert_array_equal(trace.events[col].to_numpy(), ref[col].to_numpy(dtype=np.int64))
    assert trace.events["name"].astype(object).tolist() == ref["name"].tolist()
    names = set(trace.cpu_ops["name"].astype(str))
    assert {"aten::linear", "aten::relu"} <= names
    steps = trace.events[trace.events["name"].astype(str).str.startswith("ProfilerStep#")]
    assert len(steps) == 3 and (steps["dur_ns"] > 0).all()
    assert trace.meta.base_time_ns == top.get("baseTimeNanoseconds")
    # timestamps are absolute epoch ns close to now
    assert abs(int(trace.events["ts_ns"].max()) / 1e9 - __import__("time").time()) < 3600
