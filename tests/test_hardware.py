"""Device ceilings table and name lookup (aonkit.model.hardware)."""

from __future__ import annotations

import copy
import math
import pickle

import pytest

import aonkit
from aonkit.analysis.roofline import trace_spec
from aonkit.model import PEAK_KEYS, DeviceSpec, device_spec, devices

from .conftest import require_shared


def test_table_has_required_devices_each_number_cited() -> None:
    names = {s.name for s in devices()}
    assert {"A100 SXM4 80GB", "H100 SXM", "H200 SXM", "B200", "L4", "MI300X"} <= names
    assert {"V100 SXM2", "A10", "P100 SXM2", "MI250X GCD"} <= names
    for s in devices():
        cited = set(s.peak_flops) | {"memory_bandwidth", "memory_bytes"}
        assert cited <= set(s.sources), s.name
        assert all(("https://" in s.sources[k]) or ("data sheet" in s.sources[k]) for k in cited), s.name
        assert set(s.peak_flops) <= set(PEAK_KEYS)
        # dense tensor figures never exceed twice the next-wider type (no sparse numbers slipped in)
        p = s.peak_flops
        if "bf16" in p and "tf32" in p:
            assert p["bf16"] == pytest.approx(2 * p["tf32"], rel=0.05), s.name
        if "fp8" in p:
            assert p["fp8"] == pytest.approx(2 * p["fp16"], rel=0.01), s.name


def test_dense_datasheet_values() -> None:
    h100 = device_spec("H100 SXM")
    assert h100.peak("bf16") == 1979e12 / 2  # datasheet 1,979 TFLOPS with sparsity
    assert h100.peak("fp8") == 3958e12 / 2
    assert h100.peak("fp32") == 67e12 and h100.peak("fp64_matrix") == 67e12
    assert h100.memory_bandwidth == 3.35e12 and h100.memory_bytes == 80 * 10**9
    a100 = device_spec("A100 SXM4 80GB")
    assert a100.peak("bf16") == 312e12 and a100.memory_bandwidth == 2039e9
    assert device_spec("H200 SXM").memory_bandwidth == 4.8e12 and device_spec("H200 SXM").peak("bf16") == 989.5e12
    assert device_spec("MI300X").peak("fp16") == 1307.4e12 and device_spec("MI300X").memory_bandwidth == 5.3e12
    assert device_spec("L4").peak("fp8") == 485e12 / 2 and device_spec("L4").memory_bandwidth == 300e9
    assert device_spec("B200").peak("bf16") == 2.25e15
    assert math.isnan(device_spec("L4").peak("fp64"))  # not published: no roof rather than a guess
    # ridge = peak / bandwidth: 989.5e12 / 3.35e12 FLOP/byte
    assert h100.ridge("bf16") == pytest.approx(295.373134, rel=1e-6)


@pytest.mark.parametrize(
    ("name", "mem", "cus", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", None, None, "H100 SXM"),
        ("NVIDIA H100", 102085492736, 132, "H100 SXM"),
        ("NVIDIA H100 PCIe", None, None, "H100 PCIe"),
        ("NVIDIA H200", None, None, "H200 SXM"),
        ("NVIDIA B200", None, None, "B200"),
        ("NVIDIA A100-SXM4-40GB", None, None, "A100 40GB"),
        ("NVIDIA A100-SXM4-80GB", None, None, "A100 SXM4 80GB"),
        ("NVIDIA A100 80GB PCIe", None, None, "A100 PCIe 80GB"),
        ("NVIDIA A100-PCIE-40GB", None, None, "A100 40GB"),
        ("NVIDIA A100-PG509-200", 42297524224, 108, "A100 40GB"),
        ("NVIDIA PG509-210", 85198045184, 108, "A100 SXM4 80GB"),
        ("NVIDIA L4", None, None, "L4"),
        ("NVIDIA A10", None, None, "A10"),
        ("Tesla V100-SXM2-16GB", None, None, "V100 SXM2"),
        ("Tesla V100-DGXS-32GB", None, None, "V100 SXM2"),
        ("Tesla V100-PCIE-32GB", None, None, "V100 PCIe"),
        ("Tesla V100S-PCIE-32GB", None, None, "V100S PCIe"),
        ("Tesla P100-SXM2-16GB", None, None, "P100 SXM2"),
        ("Tesla P100-PCIE-12GB", None, None, "P100 PCIe 12GB"),
        ("Quadro GP100", None, None, "Quadro GP100"),
        ("AMD Instinct MI300X", None, None, "MI300X"),
        ("AMD Instinct MI250X/MI250", 68702699520, 110, "MI250X GCD"),
        ("AMD Instinct MI250X/MI250", 68702699520, 104, "MI250 GCD"),
        ("AMD Instinct MI210", None, None, "MI210"),
        ("h100 sxm", None, None, "H100 SXM"),
    ],
)
def test_trace_names_resolve(name: str, mem: int | None, cus: int | None, expected: str) -> None:
    assert device_spec(name, mem, cus).name == expected


@pytest.mark.parametrize("name", ["NVIDIA GB200", "NVIDIA L40S", "NVIDIA A10G", "AMD Radeon Graphics", "ARTEMIS", ""])
def test_unknown_or_different_devices_raise(name: str) -> None:
    with pytest.raises(KeyError, match="DeviceSpec"):
        device_spec(name)


def test_user_given_and_measured_ceilings() -> None:
    mine = DeviceSpec("lab box", {"fp32": 2e12}, memory_bandwidth=1e11, sources={"fp32": "measured"})
    assert mine.ridge("fp32") == 20.0
    assert device_spec("lab box", table=(mine,)) is mine
    measured = device_spec("H100 SXM").with_ceilings(bf16=700e12, memory_bandwidth=2.9e12, source="nvbench 2026-01")
    assert measured.name == "H100 SXM (measured)"
    assert measured.peak("bf16") == 700e12 and measured.peak("fp8") == 1979e12
    assert measured.memory_bandwidth == 2.9e12
    assert measured.sources["bf16"] == measured.sources["memory_bandwidth"] == "nvbench 2026-01"
    assert "datasheet" in measured.sources["fp8"]
    with pytest.raises(ValueError, match="unknown peak keys"):
        DeviceSpec("bad", {"fp4": 1e15}, memory_bandwidth=1e12)
    with pytest.raises(ValueError, match="memory_bandwidth"):
        DeviceSpec("bad", {"fp32": 1e12}, memory_bandwidth=0)
    again = pickle.loads(pickle.dumps(measured))  # dask ships specs to workers
    assert again == measured and copy.deepcopy(measured) is measured and hash(again) == hash(measured)


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "H100 SXM"),
        ("tracelens/mi300/resnet_act_checkpoint.json.gz", "MI300X"),
        ("tracelens/mi210/gpu_only_trace/gpu_only_trace.json.gz", "MI210"),
        ("hta/critical_path/cuda_event_sync/event_sync_trace.json.gz", "A100 40GB"),
        ("gpupuzzlers/streams/blocking/blocking_streams.json.gz", "A100 SXM4 80GB"),
        ("hta/trace_diff/test/test.json.gz", "V100 SXM2"),
        ("hta/with_gpu_user_annotation/step_based_trace_2543932.json.gz", "Quadro GP100"),
        ("kineto-docs-traces/after_fix_trace.json", "H100 SXM"),
        ("param/linear_kineto.json.gz", None),  # GeForce RTX 2080 Ti: not in the table
        ("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", None),  # "AMD Radeon Graphics"
    ],
)
def test_spec_from_real_trace_device_properties(rel: str, expected: str | None) -> None:
    trace = aonkit.load(require_shared() / rel)
    spec = trace_spec(trace)
    assert (spec.name if spec else None) == expected
