"""The NVML sampler: probing, channels per GPU, GPM, gaps and lost GPUs on a fake NVML; the real one on a GPU."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pynvml
import pytest

from aonkit.sources.gpm import GPM_METRICS, gpm_metrics
from aonkit.sources.nvml import NvmlSampler, NvmlUnavailable, open_gpu_sampler
from aonkit.sources.nvml_direct import Calls
from aonkit.sources.samplers import attach_samples

from .fake_nvml import GIB, FakeGpu, FakeNvml, gpm_value

BASIC = ("gpu_util_pct", "memory_util_pct", "memory_used_bytes", "memory_total_bytes", "power_w",
         "power_instant_w", "energy_j", "sm_clock_mhz", "memory_clock_mhz", "temperature_c", "clock_event_reasons_mask",
         "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")  # fmt: skip


def values_of(s: NvmlSampler, row: np.ndarray) -> dict[tuple[int, str], float]:
    """One ``sample()`` row by (device, metric)."""
    names = [s.metrics[c] for c in s._channel_codes]
    return {(int(d), m): float(v) for d, m, v in zip(s.channel_devices, names, row)}


def run_for(s: NvmlSampler, seconds: float) -> pd.DataFrame:
    with s:
        time.sleep(seconds)
    return s.read()[0]


def test_two_gpus_give_one_channel_per_gpu_and_metric_in_long_form() -> None:
    # GIVEN two fake GPUs that support every basic metric (no GPM, to keep to the basics)
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    s = NvmlSampler(nvml=fake, interval_s=0.02, gpm=False)
    # THEN there is a channel for every (GPU, metric) and the metrics are the distinct names
    assert s.metrics == BASIC and s.devices == (0, 1) and s.unsupported.empty
    assert list(s.channel_devices) == [0] * len(BASIC) + [1] * len(BASIC)
    # WHEN it samples on its thread
    frame = run_for(s, 0.3)
    n = len(frame) // (2 * len(BASIC))
    assert n >= 5 and len(frame) == n * 2 * len(BASIC)
    assert list(frame.columns) == ["ts_ns", "device", "metric", "value"] and frame["device"].dtype == np.int64
    # THEN each row carries its GPU: the fake's values depend on the index
    by = frame.groupby(["device", "metric"], observed=True)["value"]
    assert (by.get_group((0, "temperature_c")) == 40).all() and (by.get_group((1, "temperature_c")) == 41).all()
    assert (by.get_group((0, "power_w")) == 100).all() and (by.get_group((1, "power_w")) == 101).all()
    instant = by.get_group((1, "power_instant_w")).to_numpy()  # (150 + i) W + k mW: a new value every sample
    assert (instant // 1 == 151).all() and (np.diff(instant) > 0).all()
    assert (by.get_group((1, "sm_clock_mhz")) == 1979).all()
    assert (by.get_group((0, "memory_total_bytes")) == 80 * GIB).all()
    used = by.get_group((1, "memory_used_bytes")).to_numpy()
    assert (used // GIB == 2).all() and (np.diff(used) > 0).all()  # grows a MiB a tick on the fake
    assert (by.get_group((0, "clock_event_reasons_mask")) == pynvml.nvmlClocksEventReasonSwPowerCap).all()
    # rates from counters: PCIe 1 MB and NVLink 4 links x 100 KiB every 0.1 s of the field clock
    assert (by.get_group((0, "pcie_tx_bytes_per_s")) == 1e7).all()
    assert (by.get_group((1, "nvlink_tx_bytes_per_s")) == 4 * 100 * 1024 / 0.1).all()
    assert s.error is None and s.gaps.empty and s.cost_ns["n"] == n and s.cost_ns["mean"] > 0
    s.close()
    assert fake.inits == 0


def test_unsupported_metrics_are_skipped_and_listed_with_the_reason() -> None:
    # GIVEN GPU 1 without power, temperature, NVLink or PCIe counters; GPU 0 only without the newer temperature call
    gpus = [FakeGpu(unsupported={"nvmlDeviceGetTemperatureV"}),
            FakeGpu(nvlinks=0, pcie_counters=False, slow={"nvmlDeviceGetPcieThroughput": 0.004},
                    unsupported={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"},
                    power_instant=False)]
    s = NvmlSampler(nvml=FakeNvml(gpus), gpm=False, max_call_s=0.002)
    off = {(d, m): why for d, m, why in s.unsupported.itertuples(index=False)}
    # THEN GPU 1's refused metrics are listed with NVML's reason and have no channel; GPU 0 keeps them
    assert off[(1, "power_w")] == off[(1, "power_instant_w")] == "Not Supported (NVML error 3)"
    assert off[(1, "temperature_c")] == "Not Supported (NVML error 3)"  # both calls: each reason said once
    assert off[(1, "nvlink_tx_bytes_per_s")] == "no active NVLink"
    assert off[(1, "pcie_tx_bytes_per_s")].startswith("Not Supported (NVML error 3); too slow to sample: ")
    assert set(off) == {(1, m) for m in ("power_w", "power_instant_w", "temperature_c", "nvlink_tx_bytes_per_s",
                                          "nvlink_rx_bytes_per_s", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")}
    v = values_of(s, s.sample())
    assert (1, "power_w") not in v and v[(0, "power_w")] == 100 and v[(1, "gpu_util_pct")] >= 0
    assert v[(0, "temperature_c")] == 41  # the older call, when the newer one is refused
    assert len(v) == 2 * len(BASIC) - 7 and s.gaps.empty


def test_pcie_falls_back_to_the_throughput_call() -> None:
    s = NvmlSampler(nvml=FakeNvml([FakeGpu(pcie_counters=False)]), gpm=False)
    v = values_of(s, s.sample())
    assert v[(0, "pcie_tx_bytes_per_s")] == 2000 * 1024 and v[(0, "pcie_rx_bytes_per_s")] == 1000 * 1024


def test_a_slow_metric_may_take_longer_at_the_probe_than_one_read_every_sample() -> None:
    # GIVEN a GPU whose energy counter takes 4 ms a read (as an H200's does) and whose SM clock takes as long
    g = FakeGpu(slow={"nvmlDeviceGetTotalEnergyConsumption": 0.004, "nvmlDeviceGetClockInfo": 0.004})
    s = NvmlSampler(nvml=FakeNvml([g]), gpm=False, max_call_s=0.003)
    off = {m: why for _, m, why in s.unsupported.itertuples(index=False)}
    # THEN the energy counter, read once a second, is kept (up to 10 x 3 ms); the clocks, read every sample, are not
    assert "energy_j" in s.metrics and "energy_j" not in off
    assert off["sm_clock_mhz"].startswith("too slow to sample: ") and off["sm_clock_mhz"].endswith("(limit 3 ms)")
    s.close()


def test_gpm_metrics_come_from_two_snapshots_on_hopper_and_are_absent_before() -> None:
    # GIVEN a Hopper GPU (refusing SM occupancy) and an older one
    fake = FakeNvml([FakeGpu(gpm_unsupported={3}), FakeGpu(hopper=False)])
    s = NvmlSampler(nvml=fake, gpm_min_interval_s=0.0)
    core = [name for name, _, _ in gpm_metrics(True)]
    off = {(d, m): why for d, m, why in s.unsupported.itertuples(index=False)}
    assert off[(0, "gpm_sm_occupancy_pct")] == "Not Supported (NVML error 3)"
    assert all(off[(1, m)] == "no GPM on this GPU (Hopper or later)" for m in core)
    # WHEN it samples twice THEN every value is NVML's computation over the last two snapshots of that GPU
    for _ in range(2):
        v = values_of(s, s.sample())
        k = fake.gpus[0].gpm_ticks
        for name, metric_id, scale in gpm_metrics(True):
            if metric_id == 3:
                assert (0, name) not in v
            else:
                assert v[(0, name)] == gpm_value(0, metric_id, k - 1, k) * scale, name
        assert not any(m.startswith("gpm_") for d, m in v if d == 1)
    assert fake.gpus[1].calls["nvmlGpmSampleGet"] == 0
    s.close()
    assert fake.gpm_freed == 2 and fake.inits == 0


def test_gpm_holds_its_values_between_snapshots_closer_than_the_minimum() -> None:
    fake = FakeNvml([FakeGpu()])
    s = NvmlSampler(nvml=fake, gpm_min_interval_s=0.2)  # the probe waits 0.2 s once
    first, second = values_of(s, s.sample()), values_of(s, s.sample())
    assert fake.gpus[0].gpm_ticks == 2  # no snapshot after the probe's two: under 0.2 s since the last
    assert first[(0, "gpm_sm_util_pct")] == second[(0, "gpm_sm_util_pct")] == gpm_value(0, 2, 1, 2)
    time.sleep(0.2)
    assert values_of(s, s.sample())[(0, "gpm_sm_util_pct")] == gpm_value(0, 2, 2, 3)


def test_a_gpm_metric_failing_while_sampling_is_one_gap_until_it_is_computed_again() -> None:
    # GIVEN a GPU whose SM utilization NVML refuses from some point on, computed every 0.15 s and sampled more often
    fake = FakeNvml([FakeGpu()])
    s = NvmlSampler(nvml=fake, gpm_min_interval_s=0.15)
    fake.gpus[0].gpm_unsupported.add(2)
    rows = []
    for _ in range(12):  # about four computations, the samples between repeating their values
        rows.append(values_of(s, s.sample()))
        time.sleep(0.05)
    assert fake.gpus[0].gpm_ticks >= 4
    # THEN the failure is one gap (the repeated values are not the metric working again), NaN from its first
    # computation on; the other metrics go on
    assert [(g.device, g.metric) for g in s.gaps.itertuples()] == [(0, "gpm_sm_util_pct")]
    nan = [bool(np.isnan(r[(0, "gpm_sm_util_pct")])) for r in rows]
    assert nan[-1] and nan == sorted(nan) and not np.isnan(rows[-1][(0, "gpm_dram_bw_util_pct")])
    # AND once NVML computes it again, it is seen working: a later failure is a new gap
    fake.gpus[0].gpm_unsupported.clear()
    time.sleep(0.15)
    assert not np.isnan(values_of(s, s.sample())[(0, "gpm_sm_util_pct")])
    fake.gpus[0].gpm_unsupported.add(2)
    time.sleep(0.15)
    s.sample()
    assert len(s.gaps) == 2
    s.close()


def test_gpm_reads_at_a_10_hz_tick_a_little_under_the_minimum_after_the_last_snapshot() -> None:
    # GIVEN GPM's minimum of 0.1 s and ticks that come 90 ms apart (a 10 Hz timer's jitter, a late snapshot)
    fake = FakeNvml([FakeGpu()])
    s = NvmlSampler(nvml=fake, gpm_min_interval_s=0.1)
    ticks = fake.gpus[0].gpm_ticks
    time.sleep(0.09)
    # WHEN it samples THEN a new snapshot is taken and its values computed (not the last repeated)
    v = values_of(s, s.sample())
    assert fake.gpus[0].gpm_ticks == ticks + 1
    assert v[(0, "gpm_sm_util_pct")] == gpm_value(0, 2, ticks, ticks + 1)
    # AND at once after it is too soon: the values repeat, no snapshot
    assert values_of(s, s.sample())[(0, "gpm_sm_util_pct")] == v[(0, "gpm_sm_util_pct")]
    assert fake.gpus[0].gpm_ticks == ticks + 1
    s.close()


def test_a_gpm_snapshot_alike_the_last_repeats_the_values_and_keeps_the_older_snapshot() -> None:
    # GIVEN a GPU whose GPM counters the driver did not refresh between two snapshots (they come out alike, and
    # NVML computes every metric as exactly 0 with success, as measured on an H200)
    fake = FakeNvml([FakeGpu()])
    s = NvmlSampler(nvml=fake, gpm_min_interval_s=0.0)
    before = values_of(s, s.sample())
    k = fake.gpus[0].gpm_ticks
    fake.gpus[0].gpm_frozen = True
    # WHEN it samples THEN the last values repeat (no 0 for a busy GPU)
    frozen = values_of(s, s.sample())
    assert frozen[(0, "gpm_sm_util_pct")] == before[(0, "gpm_sm_util_pct")] != 0
    # AND the next computation spans from the older snapshot (k) to the new one, the time of both ticks
    fake.gpus[0].gpm_frozen = False
    after = values_of(s, s.sample())
    assert fake.gpus[0].gpm_ticks == k + 1
    assert after[(0, "gpm_sm_util_pct")] == gpm_value(0, 2, k, k + 1)
    # AND alike snapshots 0.2 s apart or more are an idle GPU's zeros, not a missed refresh: they are kept
    fake.gpus[0].gpm_frozen = True
    time.sleep(0.2)
    assert values_of(s, s.sample())[(0, "gpm_sm_util_pct")] == 0
    s.close()


def test_a_gpu_lost_mid_run_is_nan_and_one_gap_and_the_other_gpu_goes_on() -> None:
    # GIVEN GPU 1 lost after 2 probe reads and 3 ticks
    fake = FakeNvml([FakeGpu(), FakeGpu(lost_after=5)])
    s = NvmlSampler(nvml=fake, gpm_min_interval_s=0.0)
    rows = [values_of(s, s.sample()) for _ in range(3)]
    calls_before = sum(fake.gpus[1].calls.values())
    rows += [values_of(s, s.sample()) for _ in range(4)]
    # THEN GPU 1 has values for 3 ticks and NaN after; GPU 0 has values throughout
    assert all(not math.isnan(r[(1, "power_w")]) for r in rows[:3])
    assert all(math.isnan(v) for r in rows[3:] for (d, _), v in r.items() if d == 1)
    assert all(not math.isnan(v) for r in rows for (d, _), v in r.items() if d == 0)
    # AND one gap row says why; the lost GPU was not polled again (one call: the read that found it lost)
    gaps = s.gaps
    assert len(gaps) == 1 and tuple(gaps.loc[0, ["device", "metric"]]) == (1, "*")
    assert gaps.loc[0, "reason"].startswith("GPU is lost (NVML error 15); the GPU is tried again every 30 s")
    assert sum(fake.gpus[1].calls.values()) == calls_before + 1


def test_a_lost_gpu_is_tried_again_without_new_gaps() -> None:
    fake = FakeNvml([FakeGpu(lost_after=2)])
    s = NvmlSampler(nvml=fake, gpm=False, lost_retry_s=0.0)
    for _ in range(3):
        s.sample()
    assert fake.gpus[0].calls["nvmlDeviceGetHandleByIndex"] == 2 + 2  # at open (layout, GPU), then each tick
    assert len(s.gaps) == 1


def test_a_revived_gpu_repeats_no_slow_value_read_before_its_loss() -> None:
    gpu = FakeGpu(lost_after=3, power_instant=False)  # the probe reads utilisation twice: lost at the second tick
    s = NvmlSampler(nvml=FakeNvml([gpu]), gpm=False, interval_s=0.1, slow_interval_s=1.0, lost_retry_s=0.0)
    first = values_of(s, s.sample())  # fresh: the slow metrics are read
    assert first[(0, "temperature_c")] == 40
    lost = values_of(s, s.sample())
    assert all(math.isnan(v) for v in lost.values())
    gpu.lost, gpu.lost_after = False, None  # back: revived at the next tick, which is not a slow one
    back = values_of(s, s.sample())
    assert back[(0, "power_w")] == 100 and math.isnan(back[(0, "temperature_c")])
    assert [values_of(s, s.sample())[(0, "temperature_c")] for _ in range(8)][-1] == 40  # the next slow read


def test_an_error_mid_run_is_nan_for_that_tick_and_a_gap_once_per_run_of_failures() -> None:
    # GIVEN a GPU whose power reading (read every sample: no instant power here) fails for two ticks, works, then
    # fails with a non-NVML error
    gpu = FakeGpu(power_instant=False)
    s = NvmlSampler(nvml=FakeNvml([gpu]), gpm=False)
    gpu.failing["nvmlDeviceGetPowerUsage"] = pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
    bad = [values_of(s, s.sample()) for _ in range(2)]
    gpu.failing.clear()
    good = values_of(s, s.sample())
    gpu.failing["nvmlDeviceGetPowerUsage"] = ZeroDivisionError("boom")
    worse = values_of(s, s.sample())
    # THEN the failed ticks are NaN for that metric only, and each run of failures is one gap row
    assert all(math.isnan(r[(0, "power_w")]) and r[(0, "gpu_util_pct")] >= 0 for r in [*bad, worse])
    assert good[(0, "power_w")] == 100
    assert list(s.gaps["metric"]) == ["power_w", "power_w"]
    assert list(s.gaps["reason"]) == ["Unknown Error (NVML error 999)", "ZeroDivisionError: boom"]
    assert s.gaps["ts_ns"].is_monotonic_increasing


def test_the_sampling_thread_never_raises() -> None:
    # GIVEN a sampler whose every read fails on its thread
    gpu = FakeGpu()
    s = NvmlSampler(nvml=FakeNvml([gpu]), gpm=False, interval_s=0.01)
    gpu.failing = {fn: RuntimeError("bad driver") for fn in list(gpu.calls)}
    frame = run_for(s, 0.15)
    # THEN it kept sampling NaNs, and says why once per metric
    assert len(frame) >= 5 * len(s.metrics) and frame["value"].isna().all()
    assert s.error is None and len(s.gaps) == len(s.metrics)


def test_watched_processes_memory_per_gpu() -> None:
    gpus = [FakeGpu(processes={111: 3 * GIB, 222: None}), FakeGpu(processes={333: GIB, 444: 5})]
    s = NvmlSampler(nvml=FakeNvml(gpus), pids=[111, 222, 333], gpm=False)
    v = values_of(s, s.sample())
    assert v[(0, "process_memory_bytes.111")] == 3 * GIB and v[(1, "process_memory_bytes.111")] == 0
    assert math.isnan(v[(0, "process_memory_bytes.222")])  # NVML does not say (None)
    assert v[(1, "process_memory_bytes.333")] == GIB and v[(0, "process_memory_bytes.333")] == 0
    assert not any("444" in m for _, m in v)


def test_a_gpu_that_cannot_be_opened_is_listed_and_the_others_sampled() -> None:
    s = NvmlSampler(nvml=FakeNvml([FakeGpu(), FakeGpu(lost=True)]), gpm=False)
    assert s.devices == (0,) and set(s.channel_devices) == {0}
    assert s.unsupported.values.tolist() == [[1, "*", "cannot open the GPU: GPU is lost (NVML error 15)"]]
    with pytest.raises(NvmlUnavailable, match=r"no GPU could be opened \(cannot open the GPU: GPU is lost"):
        NvmlSampler(nvml=FakeNvml([FakeGpu(lost=True)]))


def test_one_gpu_sampler_feeds_the_live_monitor_figures() -> None:
    from aonkit.views.monitor import monitor_view, wide

    s = NvmlSampler(nvml=FakeNvml([FakeGpu(processes={7: GIB})]), pids=[7], interval_s=0.02)
    frame = run_for(s, 0.2)
    view = monitor_view(s.channels)
    data = wide(frame, s.channels)
    assert len(view.charts) == len(s.metrics) and set(data) == {"t", *(f"{m}@0" for m in s.metrics)}
    assert len(data["t"]) == s.read()[1] and (data["process_memory_bytes.7@0"] == GIB).all()
    assert (data["temperature_c@0"] == 40).all() and np.isfinite(data["gpm_sm_util_pct@0"]).all()


def test_two_gpus_are_two_lines_per_metric_and_export_as_a_bundle(tmp_path: Path) -> None:
    import aonkit
    from aonkit.views.monitor import monitor_view, wide
    from aonkit.widgets import LiveMonitor

    s = NvmlSampler(nvml=FakeNvml([FakeGpu(), FakeGpu(hopper=False)]), interval_s=0.02)
    frame = run_for(s, 0.2)
    view = monitor_view(s.channels, metrics=["temperature_c", "power_w"])
    assert [c["title"] for c in view.charts] == ["temperature_c", "power_w"]
    assert [[m["y"] for m in c["marks"]] for c in view.charts] == [["temperature_c@0", "temperature_c@1"],
                                                                   ["power_w@0", "power_w@1"]]  # a line per GPU
    assert [it["label"] for it in view.charts[0]["legend"]["items"]] == ["GPU 0", "GPU 1"]
    assert {c["min_left"] for c in view.charts} == {72} and all(c["x"]["zoom"] for c in view.charts)  # aligned, linked
    data = wide(frame, view.channels)
    assert np.isfinite(data["temperature_c@0"]).all() and np.isfinite(data["temperature_c@1"]).all()
    m = LiveMonitor(s, metrics=["temperature_c"])
    m.poll()
    shown = m.source.data["temperature_c@1"]  # the monitor's rows: what the sampler held (it samples on)
    np.testing.assert_array_equal(shown, wide(s.read(0)[0], m.view.channels)["temperature_c@1"][:len(shown)])
    assert len(shown) >= 5
    out = m.export(tmp_path / "last", minutes=5)
    t = aonkit.load(out)
    assert set(t.samples["device"]) == {0, 1} and t.events["name"].tolist() == ["aon_profile"]
    assert t.bundle["source"] == "LiveMonitor.export"
    m.close()


def test_open_gpu_sampler_says_why_it_cannot() -> None:
    no_lib = FakeNvml([FakeGpu()], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    assert open_gpu_sampler(nvml=no_lib) == (
        None, "no NVIDIA driver (NVML: NVML Shared Library Not Found); sampling the host only")
    no_driver = FakeNvml([FakeGpu()], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    assert open_gpu_sampler(nvml=no_driver)[1] == "no NVIDIA driver (NVML: Driver Not Loaded); sampling the host only"
    denied = FakeNvml([FakeGpu()], init_error=pynvml.NVML_ERROR_NO_PERMISSION)
    assert open_gpu_sampler(nvml=denied)[1] == (
        "NVML failed to start (Insufficient Permissions (NVML error 4)); sampling the host only")
    none = FakeNvml([])
    assert open_gpu_sampler(nvml=none) == (None, "no NVIDIA GPU found (NVML sees 0 devices); sampling the host only")
    assert none.inits == 0  # started, then shut down again
    s, note = open_gpu_sampler(nvml=FakeNvml([FakeGpu(), FakeGpu()]), gpm=False)
    assert isinstance(s, NvmlSampler)
    assert note == "sampling GPU 0, 1 through NVML: 15 metrics, 0 left out (see .unsupported)"


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match=r"no GPU \[2\] here: NVML sees 2"):
        NvmlSampler(nvml=FakeNvml([FakeGpu(), FakeGpu()]), devices=[0, 2])
    with pytest.raises(ValueError, match="gpm must be"):
        NvmlSampler(nvml=FakeNvml([FakeGpu()]), gpm="some")
    with pytest.raises(NvmlUnavailable):
        NvmlSampler(nvml=FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))


def test_real_pynvml_without_a_driver_falls_back() -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    sampler, why = open_gpu_sampler()
    assert sampler is None and why.startswith("no NVIDIA driver (NVML: ") and why.endswith("; sampling the host only")


def test_attach_samples_and_timeline_lanes_per_gpu(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    import aonkit
    from aonkit.timeline.view import timeline_view

    s = NvmlSampler(nvml=FakeNvml([FakeGpu(), FakeGpu()]), interval_s=0.02, gpm=False)
    with s:
        t0 = time.time_ns()
        time.sleep(0.3)
        t1 = time.time_ns()
    ev = [{"ph": "X", "cat": "cpu_op", "name": "step", "pid": 1, "tid": 1, "ts": t0 / 1000, "dur": (t1 - t0) / 1000}]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": ev}))
    trace = aonkit.load(tmp_path / "t.json")
    samples = attach_samples(trace, s)
    assert set(samples["device"]) == {0, 1} and len(samples) == len(s.read()[0])
    view = timeline_view(trace, width_px=400)
    assert {"gpu_util_pct (GPU 0)", "gpu_util_pct (GPU 1)", "power_w (GPU 1)"} <= set(view.counters)


def test_time_readers_lists_every_reader() -> None:
    s = NvmlSampler(nvml=FakeNvml([FakeGpu()]), gpm_min_interval_s=0.0)
    t = s.time_readers(repeat=3)
    assert len(t) == 12 and t["mean_us"].gt(0).all()  # 11 basic readers and GPM
    assert t.loc[t["metrics"] == "gpu_util_pct,memory_util_pct", "nvml_calls"].item() == 1
    assert t["metrics"].iloc[-1].startswith("gpm_graphics_util_pct,") and t["nvml_calls"].iloc[-1] == 2
    s.start()
    with pytest.raises(RuntimeError, match="stop the sampler"):
        s.time_readers()
    s.close()


def test_gpm_ids_are_pynvml_constants() -> None:
    assert all(getattr(pynvml, f"NVML_GPM_METRIC_{suffix}") == i for _, suffix, i, _, _ in GPM_METRICS)
    assert len({name for name, *_ in GPM_METRICS}) == len(GPM_METRICS)


def test_importing_the_sampler_does_not_import_pynvml() -> None:
    code = "import sys, aonkit.sources.nvml, aonkit.sources.gpm; print('pynvml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# -- on a real GPU (skipped elsewhere)


@pytest.mark.gpu
def test_real_gpus_give_the_basic_metrics() -> None:
    s = NvmlSampler(interval_s=0.05)
    try:
        frame = run_for(s, 0.6)
    finally:
        s.close()
    assert s.error is None and s.gaps.empty, s.gaps
    for device in s.devices:
        d = frame[frame["device"] == device]
        got = {m: g["value"].to_numpy() for m, g in d.groupby("metric", observed=True)}
        assert {"gpu_util_pct", "memory_used_bytes", "memory_total_bytes", "sm_clock_mhz"} <= set(got), s.unsupported
        assert ((got["gpu_util_pct"] >= 0) & (got["gpu_util_pct"] <= 100)).all()
        assert ((got["memory_used_bytes"] > 0) & (got["memory_used_bytes"] <= got["memory_total_bytes"])).all()
        assert (got["sm_clock_mhz"] > 0).all()
        for power in ("power_w", "power_instant_w"):
            if power in got:
                assert ((got[power] > 0) & (got[power] < 2000)).all(), power
        if "temperature_c" in got:
            assert ((got["temperature_c"] > 0) & (got["temperature_c"] < 120)).all()
        if "energy_j" in got:
            assert (np.diff(got["energy_j"]) >= 0).all()


@pytest.mark.gpu
def test_real_gpm_metrics_are_present_and_in_range() -> None:
    pynvml.nvmlInit()
    try:
        n = pynvml.nvmlDeviceGetCount()
        gpm = []
        for i in range(n):
            try:
                if pynvml.nvmlGpmQueryDeviceSupport(pynvml.nvmlDeviceGetHandleByIndex(i)).isSupportedDevice:
                    gpm.append(i)
            except pynvml.NVMLError:
                pass
    finally:
        pynvml.nvmlShutdown()
    if not gpm:
        pytest.skip("no GPU here supports GPM (Hopper or later)")
    s = NvmlSampler(devices=gpm, interval_s=0.1)
    try:
        frame = run_for(s, 0.8)
    finally:
        s.close()
    for device in gpm:
        d = frame[(frame["device"] == device) & frame["metric"].astype(str).str.startswith("gpm_")]
        got = {m: g["value"].to_numpy() for m, g in d.groupby("metric", observed=True)}
        assert {"gpm_sm_util_pct", "gpm_sm_occupancy_pct", "gpm_dram_bw_util_pct"} <= set(got), s.unsupported
        for m, v in got.items():
            assert np.isfinite(v).all(), m
            assert ((v >= 0) & (v <= 100.5)).all() if m.endswith("_pct") else (v >= 0).all(), (m, v)


@pytest.mark.gpu
def test_real_gpus_sample_through_the_batched_tick() -> None:
    # the driver's own structs and field values through FastTick (nvml_batch): every tick batched, and its
    # values those of the reader-by-reader tick taken just after (metrics that do not move within a tick)
    s = NvmlSampler(interval_s=0.1, slow_interval_s=0.3)
    try:
        assert s._fast is not None, "no batched tick on a real GPU"
        fast = s._fast
        tick, used = fast.tick, []
        fast.tick = lambda *a: (lambda got: (used.append(got is not None), got)[1])(tick(*a))
        rows = [s.sample_list() for _ in range(6)]
        s._fast = None
        plain = s.sample_list()
    finally:
        s.close()
    assert used == [True] * 6 and s.gaps.empty, s.gaps
    steady = ("memory_total_bytes", "clock_event_reasons_mask")
    for (device, metric), got, want in zip(s.channels, rows[-1], plain):
        if metric in steady:
            assert got == want, (device, metric)
        if metric == "power_instant_w":
            assert 0 < got < 2000 and got == pytest.approx(want, rel=0.5), (device, got, want)
        if metric in ("gpu_util_pct", "memory_util_pct"):
            assert 0 <= got <= 100


@pytest.mark.gpu
def test_real_cost_per_sample_is_small() -> None:
    s = NvmlSampler(interval_s=0.1)
    try:
        run_for(s, 1.5)
        cost = s.cost_ns
    finally:
        s.close()
    assert cost["n"] >= 10
    assert cost["mean"] / len(s.devices) < 5e6, cost  # under 5 ms a GPU


def test_power_w_is_slow_where_the_instant_power_is_read() -> None:
    # NVML's power usage is a 1 s average on Ampere and later: at 10 Hz the instant field is read, the average
    # at the slow interval; a GPU without the field reads the average at every sample
    fake = FakeNvml([FakeGpu(), FakeGpu(power_instant=False)])
    s = NvmlSampler(nvml=fake, gpm=False, interval_s=0.1, slow_interval_s=0.3)
    before = [g.calls["nvmlDeviceGetPowerUsage"] for g in fake.gpus]
    rows = [values_of(s, s.sample()) for _ in range(6)]
    assert [g.calls["nvmlDeviceGetPowerUsage"] - b for g, b in zip(fake.gpus, before)] == [2, 6]
    assert all(r[(0, "power_w")] == 100 and r[(1, "power_w")] == 101 for r in rows)
    assert (1, "power_instant_w") not in rows[0] and s.unsupported["metric"].tolist() == ["power_instant_w"]
    instant = [r[(0, "power_instant_w")] for r in rows]
    assert instant == sorted(set(instant)) and int(instant[0]) == 150


def test_slow_metrics_are_read_once_per_slow_interval_and_repeat_their_value_between() -> None:
    # GIVEN a sampler at 10 Hz whose slow metrics (temperature, energy, memory clock) are read every 0.3 s
    gpu = FakeGpu()
    s = NvmlSampler(nvml=FakeNvml([gpu]), gpm=False, interval_s=0.1, slow_interval_s=0.3)
    assert s.slow_every == 3
    energy0, util0 = gpu.calls["nvmlDeviceGetTotalEnergyConsumption"], gpu.calls["nvmlDeviceGetUtilizationRates"]
    rows = [values_of(s, s.sample()) for _ in range(7)]
    # THEN the energy counter is read at samples 0, 3 and 6 and repeated between; utilization at every sample
    assert gpu.calls["nvmlDeviceGetTotalEnergyConsumption"] - energy0 == 3
    assert gpu.calls["nvmlDeviceGetUtilizationRates"] - util0 == 7
    energy = [r[(0, "energy_j")] for r in rows]
    assert energy[0] == energy[1] == energy[2] < energy[3] == energy[4] == energy[5] < energy[6]
    assert all(r[(0, "temperature_c")] == 40 for r in rows)
    # a slow interval at or under the sampling interval reads everything at every sample
    assert NvmlSampler(nvml=FakeNvml([FakeGpu()]), gpm=False, interval_s=0.1, slow_interval_s=0.05).slow_every == 1


# -- the direct readers' unpacking (aonkit.sources.nvml_direct), over a stand-in for the C function


class _FieldCalls(Calls):
    """A :class:`~aonkit.sources.nvml_direct.Calls` whose nvmlDeviceGetFieldValues is Python writing ``rows``."""

    def __init__(self, rows: list[tuple[int, int, object, int]]) -> None:
        super().__init__(pynvml)
        self.rows = rows  # (valueType, nvmlReturn, value, timestamp) per field

    def fn(self, name: str):  # noqa: ANN201 - a ctypes-like function
        assert name == "nvmlDeviceGetFieldValues"

        def call(handle: object, count: object, ref: object) -> int:
            arr = ref._obj  # what byref() points at: the reader's own array
            assert count.value == len(arr) == len(self.rows)
            for v, (vtype, ret, value, ts) in zip(arr, self.rows):
                v.valueType, v.nvmlReturn, v.timestamp = vtype, ret, ts
                setattr(v.value, {0: "dVal", 1: "uiVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}.get(vtype, "ullVal"),
                        value)  # fmt: skip
            return 0

        return call


def test_direct_field_values_unpack_every_value_type_and_the_latest_timestamp() -> None:
    from aonkit.sources.nvml_direct import field_counters

    rows = [(3, 0, 2**60 + 1, 5), (0, 0, 2.5, 9), (4, 0, -7, 7), (5, 0, -3, 1), (1, 0, 4_000_000_000, 2)]
    ts, values = field_counters(_FieldCalls(rows), [(197, 0)] * len(rows))(None)
    assert ts == 9 and values == [float(2**60 + 1), 2.5, -7.0, -3.0, 4e9]
    ts, values = field_counters(_FieldCalls([(3, 0, 10, 0), (3, 0, 20, 0)]), [(197, 0), (198, 0)])(None)
    assert values == [10.0, 20.0] and ts > 1.6e15  # no timestamp from NVML: now, in microseconds


def test_direct_field_values_raise_nvml_errors_and_name_an_unknown_type() -> None:
    from aonkit.sources.nvml_direct import field_counters

    bad = _FieldCalls([(3, 0, 1, 1), (3, pynvml.NVML_ERROR_NOT_SUPPORTED, 0, 1)])
    with pytest.raises(pynvml.NVMLError_NotSupported):
        field_counters(bad, [(138, 0), (138, 1)])(None)
    with pytest.raises(ValueError, match="field value of unknown type 9"):
        field_counters(_FieldCalls([(3, 0, 1, 1), (9, 0, 1, 1)]), [(197, 0), (198, 0)])(None)


def test_a_direct_single_field_reads_each_value_type_and_raises_nvml_errors() -> None:
    from aonkit.sources.nvml_direct import field_value

    for vtype, value, want in [(1, 450_123, 450.123), (3, 2**40, 2**40 / 1e3), (0, 2.5, 2.5e-3), (4, -7, -7e-3)]:
        assert field_value(_FieldCalls([(vtype, 0, value, 1)]), 186, 0, per=1e3)(None) == (want,)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        field_value(_FieldCalls([(1, pynvml.NVML_ERROR_NOT_SUPPORTED, 0, 1)]), 186, 0)(None)
    with pytest.raises(ValueError, match="field value of unknown type 9"):
        field_value(_FieldCalls([(9, 0, 1, 1)]), 186, 0)(None)


def test_a_fake_or_an_uninitialised_pynvml_gets_no_direct_calls() -> None:
    from types import SimpleNamespace

    from aonkit.sources.nvml_direct import direct_calls

    assert direct_calls(FakeNvml([FakeGpu()])) is None
    binding = SimpleNamespace(nvmlLib=None, _nvmlGetFunctionPointer=pynvml._nvmlGetFunctionPointer,
                              NVMLError=pynvml.NVMLError)  # fmt: skip
    assert direct_calls(binding) is None  # before nvmlInit loads the library
    binding.nvmlLib = object()
    assert direct_calls(binding) is not None


def test_the_batched_tick_takes_a_field_value_by_its_type_and_hands_other_types_back() -> None:
    # GIVEN a batched instant-power field whose C function (a ctypes callback here) writes the value's type,
    # success and 8 bytes, of which an unsigned int's upper 4 are left unset (as NVML may)
    import ctypes
    import struct
    from types import SimpleNamespace

    from aonkit.sources.nvml_batch import FastTick
    from aonkit.sources.nvml_direct import RET_AT, TYPE_AT, field_value
    from aonkit.sources.nvml_metrics import Reader

    out = {"type": 1, "ret": 0, "value": 0xA5A5A5A5_00000000 | 151_234}

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
    def get(handle: object, count: int, at: int) -> int:
        assert count == 1
        struct.pack_into("=IIQ", (ctypes.c_char * 40).from_address(at), TYPE_AT, out["type"], out["ret"], out["value"])
        return 0

    class OneCall(Calls):
        def fn(self, name: str):  # noqa: ANN201 - a ctypes function
            assert name == "nvmlDeviceGetFieldValues"
            return get

    reader = Reader(("power_instant_w",), field_value(OneCall(pynvml), 186, 0, per=1e3))
    assert RET_AT == TYPE_AT + 4
    gpu = SimpleNamespace(handle=None, plan=[[reader.read, False, (math.nan,), (math.nan,), reader]], lost=False,
                          failing=set())  # fmt: skip
    fast = FastTick.build(SimpleNamespace(_gpus=[gpu]))
    # THEN it reads the low 4 bytes, as the reader itself does
    assert fast.tick(None, False) == [151.234] == [reader.read(None)[0]]
    # AND a field's own error hands the tick back (the sampler then reads it reader by reader)
    out["ret"] = 999
    assert fast.tick(None, False) is None and not fast.dead
    # AND a type it does not unpack (a double) hands every tick back from then on
    out["ret"], out["type"] = 0, 0
    assert fast.tick(None, False) is None and fast.dead


def test_a_sampler_blocked_in_nvml_does_not_hold_the_profile_at_its_stop(tmp_path: Path, monkeypatch) -> None:
    import os

    import aonkit
    from aonkit.profiling import Profile
    from aonkit.sources import ring_sampler as samplers  # where RingSampler.stop reads it

    monkeypatch.setattr(samplers, "STOP_WAIT_S", 0.3)
    gpu = FakeGpu(power_instant=False)
    sampler = NvmlSampler(nvml=FakeNvml([gpu]), gpm=False, interval_s=0.05)
    monkeypatch.setattr(Profile, "_gpu_sampler", lambda self: [sampler])
    prof = aonkit.profile(tmp_path / "run", trace=False, interval_s=0.05).start()
    time.sleep(0.4)
    gpu.slow["nvmlDeviceGetPowerUsage"] = 4.0  # the GPU stops answering: the next read blocks for 4 s
    time.sleep(0.2)
    t0 = time.monotonic()
    path = prof.stop()
    took = time.monotonic() - t0
    # THEN the stop waited about STOP_WAIT_S (0.3 s, and 5 intervals), not the driver's 4 s, and said so
    assert took < 3.0, took
    note = next(m for m in prof.messages if m.startswith("NvmlSampler: its thread was still taking a sample"))
    assert "0.3 s after the stop" in note and note.endswith("its samples until then are kept")
    bundle = aonkit.load(path)
    assert (bundle.samples["device"] == 0).any() and (bundle.samples["device"] == -1).any()
    # AND the thread, once the call returns, ends by itself and closes its pipe; NVML was left open meanwhile
    fds = sampler._orphaned_pipe
    assert fds is not None and sampler.stuck and sampler.nvml is not None
    pipes = [os.fstat(fd).st_ino for fd in fds]
    sampler.close()  # a close while it is still blocked leaves NVML open for it
    assert sampler._open
    deadline = time.monotonic() + 10
    while sampler._thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not sampler._thread.is_alive() and sampler._orphaned_pipe is None
    for fd, ino in zip(fds, pipes):  # closed (the number may be reused since, by another file)
        try:
            assert os.fstat(fd).st_ino != ino
        except OSError:
            pass
    assert sampler.stop() is True  # a later stop finds it ended
    sampler.close()
    assert not sampler._open


def test_a_live_monitor_stopped_over_a_blocked_sampler_says_so(monkeypatch) -> None:
    from aonkit.sources import ring_sampler as samplers  # where RingSampler.stop reads it
    from aonkit.widgets import LiveMonitor

    monkeypatch.setattr(samplers, "STOP_WAIT_S", 0.2)
    gpu = FakeGpu(power_instant=False)
    sampler = NvmlSampler(nvml=FakeNvml([gpu]), gpm=False, interval_s=0.05)
    monitor = LiveMonitor(sampler, interval_s=0.1)  # starts the sampler (no event loop here: polled by hand)
    time.sleep(0.3)
    gpu.slow["nvmlDeviceGetPowerUsage"] = 4.0
    time.sleep(0.15)
    t0 = time.monotonic()
    monitor.stop()
    assert time.monotonic() - t0 < 3.0
    assert monitor.status.value.startswith("stopped · ") and "still taking a sample 0.25 s after the stop" in (
        monitor.status.value), monitor.status.value
    gpu.slow.clear()
    deadline = time.monotonic() + 10
    while sampler._thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    sampler.close()
