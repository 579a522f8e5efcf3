"""MIG: a GPU split into instances is sampled per GPU instance (memory, GPM), and the GPUs' layout is seen to change.

On the tests' fake NVML (``tests/fake_nvml.py``), which answers the MIG calls as NVML documents them: the whole
GPU's utilization is refused in MIG mode, a MIG device's memory is its GPU instance's, and a destroyed instance's
handle no longer reads. The real path waits for a GPU with MIG (``docs/device-check.md``).
"""

from __future__ import annotations

import math

import pytest

from aonkit.sources.gpm import gpm_metrics
from aonkit.sources.nvml import NvmlSampler
from aonkit.sources.nvml_mig import gpu_layout

from .fake_nvml import GIB, MIB, FakeGpu, FakeNvml, gpm_value
from .test_nvml import values_of

MIG = [(1, 0), (2, 0), (2, 1)]  # GPU instance 1 (one compute instance) and 2 (two)


def test_a_gpu_in_mig_mode_is_sampled_per_gpu_instance_beside_a_whole_gpu() -> None:
    # GIVEN GPU 0 in MIG mode with three MIG devices on two GPU instances, and GPU 1 whole
    fake = FakeNvml([FakeGpu(mig=list(MIG)), FakeGpu()])
    s = NvmlSampler(nvml=fake, gpm_min_interval_s=0.0)
    # THEN the layout names each MIG device, and GPU 0's utilization is listed as NVML refuses it
    assert s.mig == {0: ((1, 0, "MIG-fake-0-1-0"), (2, 0, "MIG-fake-0-2-0"), (2, 1, "MIG-fake-0-2-1"))}
    off = {(d, m): why for d, m, why in s.unsupported.itertuples(index=False)}
    assert off == {(0, m): "Not Supported (NVML error 3)" for m in ("gpu_util_pct", "memory_util_pct")}
    # AND each GPU instance has its channels once (its compute instances share them), on the parent's index
    listed = list(zip(s.channel_devices.tolist(), (s.metrics[c] for c in s._channel_codes)))
    channels = set(listed)
    assert len(channels) == len(listed)
    core = [name for name, _, _ in gpm_metrics(True)]
    for gi in (1, 2):
        assert {(0, f"memory_used_bytes.gi{gi}"), (0, f"memory_total_bytes.gi{gi}")} <= channels
        assert {(0, f"{m}.gi{gi}") for m in core} <= channels
    assert not any(m.endswith(".gi0") or m.endswith(".gi3") for _, m in channels)
    assert not any(".gi" in m for d, m in channels if d == 1) and (1, "gpu_util_pct") in channels
    assert {(0, m) for m in ("power_w", "memory_used_bytes", "sm_clock_mhz", *core)} <= channels  # the whole GPU
    # WHEN it samples THEN each instance's values are its own
    for _ in range(3):
        v = values_of(s, s.sample())
        g = fake.gpus[0]
        for gi in (1, 2):
            reads = g.calls[f"memory of gi {gi}"]
            assert v[(0, f"memory_used_bytes.gi{gi}")] == gi * GIB + reads * MIB
            assert v[(0, f"memory_total_bytes.gi{gi}")] == 10 * gi * GIB
            k = g.mig_gpm_ticks[gi]
            assert v[(0, f"gpm_sm_util_pct.gi{gi}")] == gpm_value(0, 2, k - 1, k, gi)
        assert v[(0, "gpm_sm_util_pct")] == gpm_value(0, 2, g.gpm_ticks - 1, g.gpm_ticks)
    s.close()
    assert fake.gpm_freed == 2 * 4 and fake.inits == 0  # two snapshots each: 2 whole GPUs, 2 GPU instances


def test_a_destroyed_instance_is_a_gap_and_the_rest_samples_on() -> None:
    fake = FakeNvml([FakeGpu(mig=list(MIG))])
    s = NvmlSampler(nvml=fake, gpm_min_interval_s=0.0)
    s.sample()
    # WHEN GPU instance 2 is destroyed (nvidia-smi mig -dgi) while sampled
    fake.gpus[0].mig = [(1, 0)]
    rows = [values_of(s, s.sample()) for _ in range(3)]
    # THEN its channels are NaN with one gap each, saying why; instance 1 and the whole GPU go on
    for v in rows:
        assert all(math.isnan(x) for (d, m), x in v.items() if m.endswith(".gi2"))
        assert all(not math.isnan(x) for (d, m), x in v.items() if m.endswith(".gi1"))
        assert not math.isnan(v[(0, "power_w")])
    gaps = s.gaps
    assert set(gaps["metric"]) == {m for (_, m) in rows[0] if m.endswith(".gi2")}
    assert len(gaps) == len(set(gaps["metric"]))  # once each
    reasons = dict(zip(gaps["metric"], gaps["reason"]))
    assert reasons["memory_used_bytes.gi2"].startswith("Invalid Argument")
    assert reasons["gpm_sm_util_pct.gi2"].startswith("Not Found")
    s.close()


def test_mig_that_cannot_be_listed_or_is_not_there() -> None:
    # GIVEN a GPU in MIG mode whose devices cannot be listed, and one before Ampere (no MIG at all)
    broken = FakeGpu(mig=list(MIG), unsupported={"nvmlDeviceGetMaxMigDeviceCount"})
    fake = FakeNvml([broken, FakeGpu(mig_capable=False)])
    s = NvmlSampler(nvml=fake, gpm=False)
    # THEN the first is sampled whole, its MIG said to be unreadable; the second as ever
    off = {(d, m): why for d, m, why in s.unsupported.itertuples(index=False)}
    assert off[(0, "mig.*")].startswith("MIG is enabled but its devices cannot be listed: Not Supported")
    assert set(off) == {(0, "mig.*"), (0, "gpu_util_pct"), (0, "memory_util_pct")}
    assert s.mig == {} and not any(".gi" in s.metrics[c] for c in s._channel_codes)
    assert not math.isnan(values_of(s, s.sample())[(0, "power_w")])
    s.close()


def test_the_layout_changes_with_a_gpu_added_or_removed_and_mig_reconfigured() -> None:
    fake = FakeNvml([FakeGpu(), FakeGpu(mig=list(MIG))])
    fake.nvmlInit()
    first = gpu_layout(fake)
    assert first == (("GPU-fake-0", None),
                     ("GPU-fake-1", ((1, 0, "MIG-fake-1-1-0"), (2, 0, "MIG-fake-1-2-0"), (2, 1, "MIG-fake-1-2-1"))))
    assert gpu_layout(fake) == first  # nothing changed: the same
    changes = [
        lambda: setattr(fake.gpus[1], "mig", [(1, 0), (2, 0)]),  # a compute instance destroyed
        lambda: setattr(fake.gpus[1], "mig", [(1, 0), (2, 0), (3, 0)]),  # a GPU instance made
        lambda: setattr(fake.gpus[1], "mig", None),  # MIG disabled
        lambda: setattr(fake.gpus[0], "mig", []),  # MIG enabled, no instance yet
        lambda: fake.gpus.append(FakeGpu(index=2)),  # a GPU added
        lambda: fake.gpus.pop(0),  # one removed
    ]
    seen = [first]
    for change in changes:
        change()
        now = gpu_layout(fake)
        assert now is not None and now not in seen
        seen.append(now)
    # AND an NVML that cannot answer tells nothing (None), rather than a change
    fake.gpus[0].failing["nvmlDeviceGetUUID"] = fake.NVMLError(fake.NVML_ERROR_GPU_IS_LOST)
    assert gpu_layout(fake) is None


@pytest.mark.parametrize("mig", [None, [], [(1, 0)]])
def test_the_sampler_keeps_the_layout_it_was_made_with(mig) -> None:
    fake = FakeNvml([FakeGpu(mig=mig)])
    s = NvmlSampler(nvml=fake, gpm=False)
    assert s.layout == gpu_layout(fake) and s.layout[0][1] == (None if mig is None else tuple(
        (gi, ci, f"MIG-fake-0-{gi}-{ci}") for gi, ci in mig))  # fmt: skip
    s.close()


def test_the_instances_are_drawn_in_their_metrics_charts() -> None:
    from aonkit.sources.samples import split_metric
    from aonkit.views.monitor import monitor_view

    assert split_metric("memory_used_bytes.gi2") == ("memory_used_bytes", "gi2")
    assert split_metric("process_memory_bytes.7") == ("process_memory_bytes", "7")
    assert split_metric("gpu_util_pct") == ("gpu_util_pct", "") and split_metric("a.b") == ("a.b", "")
    fake = FakeNvml([FakeGpu(mig=list(MIG)), FakeGpu()])
    s = NvmlSampler(nvml=fake, gpm_min_interval_s=0.0)
    view = monitor_view(s.channels)
    titles = [c["title"] for c in view.charts]
    assert len(titles) == len(set(titles)) and not any(".gi" in t for t in titles)  # one chart per metric
    mem = view.charts[titles.index("memory_used_bytes")]
    assert [m["y"] for m in mem["marks"]] == ["memory_used_bytes@0", "memory_used_bytes.gi1@0",
                                              "memory_used_bytes.gi2@0", "memory_used_bytes@1"]  # fmt: skip
    items = mem["legend"]["items"]
    assert [it["label"] for it in items] == ["GPU 0", "GPU 0 gi1", "GPU 0 gi2", "GPU 1"]
    assert items[0]["color"] == items[1]["color"] == items[2]["color"] != items[3]["color"]
    assert "dash" not in items[0] and items[1]["dash"] != items[2]["dash"] and "dash" not in items[3]
    assert mem["y"]["format"] == "bytes"
    # the charts asked for by metric name take the instances' lines too
    only = monitor_view(s.channels, metrics=["gpm_sm_util_pct"])
    assert [m["y"] for m in only.charts[0]["marks"]] == ["gpm_sm_util_pct@0", "gpm_sm_util_pct.gi1@0",
                                                         "gpm_sm_util_pct.gi2@0", "gpm_sm_util_pct@1"]  # fmt: skip
    s.close()


@pytest.mark.gpu
def test_real_gpus_layout_and_mig_state() -> None:
    import time

    s = NvmlSampler(interval_s=0.1, gpm=False)
    try:
        layout = s.layout
        assert layout is not None and len(layout) >= len(s.devices)
        assert all(uuid.startswith("GPU-") for uuid, _ in layout), layout
        for i, (_, migs) in enumerate(layout):  # a lent GPU's MIG setting is left as it is: either way is checked
            if migs is None:
                assert i not in s.mig
            else:
                assert s.mig[i] == migs and all(u.startswith("MIG-") for *_, u in migs), migs
                assert any(m.endswith(".gi" + str(migs[0][0])) for d, m in s.channels if d == i)
        n, t0 = 20, time.perf_counter()
        for _ in range(n):
            assert gpu_layout(s.nvml) == layout  # nothing changes between looks
        print(f"\ngpu_layout: {(time.perf_counter() - t0) / n * 1e3:.3f} ms a look over {len(layout)} GPUs; "
              f"MIG: {s.mig or 'none'}")  # fmt: skip
    finally:
        s.close()


@pytest.mark.parametrize("root", [False, True])
def test_process_memory_on_a_gpu_in_mig_mode_sums_its_mig_devices(root) -> None:
    # GIVEN pid 7 on two MIG devices of GPU 0 (one with its memory hidden for pid 9), pid 8 on GPU 1 only
    gpu = FakeGpu(mig=list(MIG), mig_root=root,
                  mig_processes={(1, 0): {7: 2 * GIB}, (2, 1): {7: GIB, 9: None}})  # fmt: skip
    fake = FakeNvml([gpu, FakeGpu(processes={8: 3 * GIB})])
    s = NvmlSampler(nvml=fake, pids=[7, 8, 9], gpm=False)
    v = values_of(s, s.sample())
    # THEN the GPU's line is the sum over its MIG devices whether or not NVML gives the whole GPU's list
    assert v[(0, "process_memory_bytes.7")] == 3 * GIB and v[(0, "process_memory_bytes.8")] == 0
    assert math.isnan(v[(0, "process_memory_bytes.9")]) and v[(1, "process_memory_bytes.8")] == 3 * GIB
    assert not any(m.startswith("process_memory") for _, m in s.unsupported[["device", "metric"]].itertuples(
        index=False))  # fmt: skip
    # AND without root it read each MIG device; with root the whole GPU's list once
    assert (gpu.calls["nvmlDeviceGetComputeRunningProcesses"] > 3) != root
    s.close()


def test_the_timeline_draws_an_instances_counter_in_its_metrics_chart() -> None:
    from pathlib import Path

    import pandas as pd

    import aonkit
    from aonkit.timeline import canvas_timeline

    t = aonkit.load(Path(__file__).resolve().parent.parent / "sample_traces" / "cpu_mlp.pt.trace.json.gz")
    t0 = int(t.events["ts_ns"].min())
    rows = [(t0 + k * 1_000_000, d, m, float(k)) for k in range(5) for d, m in (
        (0, "memory_used_bytes"), (0, "memory_used_bytes.gi2"), (0, "memory_used_bytes.gi1"), (1, "memory_used_bytes"),
        (0, "process_memory_bytes.7"), (-1, "cpu_percent"))]  # fmt: skip
    t.with_samples(pd.DataFrame(rows, columns=["ts_ns", "device", "metric", "value"]))
    groups = {g["name"]: [s["label"] for s in g["series"]] for g in canvas_timeline(t).groups()}
    assert groups["memory_used_bytes"] == ["memory_used_bytes (GPU 0)", "memory_used_bytes (GPU 0 gi1)",
                                           "memory_used_bytes (GPU 0 gi2)", "memory_used_bytes (GPU 1)"]  # fmt: skip
    assert groups["process_memory_bytes"] == ["process_memory_bytes (GPU 0 pid 7)"]
    assert groups["cpu_percent"] == ["cpu_percent (host)"] and not any("." in name for name in groups)


def test_instances_gpm_computations_are_spread_over_their_interval() -> None:
    import time

    # GIVEN a GPU with 4 GPU instances, their GPM every 0.4 s (the whole GPU's every tick)
    gpu = FakeGpu(mig=[(1, 0), (2, 0), (3, 0), (4, 0)])
    s = NvmlSampler(nvml=FakeNvml([gpu]), gpm_min_interval_s=0.0, mig_gpm_interval_s=0.4)
    due = sorted(g.due_at() for g, _ in s._gpus[0].readers if hasattr(g, "gi"))
    assert len(due) == 4 and all(0.09 < b - a < 0.11 for a, b in zip(due, due[1:]))  # 0.1 s apart
    # WHEN it samples every 20 ms for 1.2 s THEN no tick computes more than one instance's GPM
    per_tick = []
    end = time.monotonic() + 1.2
    while time.monotonic() < end:
        before = gpu.calls["nvmlGpmMigSampleGet"]
        s.sample_list()
        per_tick.append(gpu.calls["nvmlGpmMigSampleGet"] - before)
        time.sleep(0.02)
    assert max(per_tick) == 1 and 8 <= sum(per_tick) <= 13  # about 3 computations each
    s.close()
    # AND mig_gpm=False reads no instance's GPM (their memory still)
    s = NvmlSampler(nvml=FakeNvml([FakeGpu(mig=list(MIG))]), gpm_min_interval_s=0.0, mig_gpm=False)
    names = [s.metrics[c] for c in s._channel_codes]
    assert "memory_used_bytes.gi2" in names and not any(m.startswith("gpm_") and ".gi" in m for m in names)
    s.close()
