"""The NVML sampler over nvidia-ml-py's real code, on the C fake of libnvidia-ml (tests/fake_libnvml).

Each test runs a child process whose ``import pynvml`` loads the fake library: pynvml's structs, version fields,
error classes and function lookup run as on a GPU machine, and so do the sampler's direct readers
(:mod:`aonkit.sources.nvml_direct`), which a Python fake of pynvml cannot reach. Skipped without a C compiler.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from .fake_libnvml import NoCompiler, environ

ROOT = Path(__file__).resolve().parent.parent
GIB, MIB = 1 << 30, 1 << 20
PID, PID_BYTES = 4242, 3 * MIB


def child(code: str, **knobs: object) -> dict:
    """Run ``code`` (it prints one JSON line last) beside the fake library; its parsed output."""
    try:
        env = environ(**knobs)
    except NoCompiler as exc:
        pytest.skip(str(exc))
    env["PYTHONPATH"] = str(ROOT)
    prelude = "import ctypes, json, math, time\nimport pynvml\nfrom aonkit.sources.nvml import NvmlSampler\n"
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


SAMPLE_AND_COUNTERS = """
    lib = ctypes.CDLL("libnvidia-ml.so.1")  # the one pynvml loaded: same soname
    lib.aonkitFakeTicks.restype = lib.aonkitFakeGpmTicks.restype = ctypes.c_long
    s = NvmlSampler(pids=[PID], interval_s=0.1, slow_interval_s=0.1)
    time.sleep(0.25)
    row = s.sample()
    out = {"values": {f"{d}|{m}": (None if math.isnan(v) else v) for (d, m), v in zip(s.channels, row.tolist())},
           "ticks": [lib.aonkitFakeTicks(i) for i in s.devices],
           "gpm_ticks": [lib.aonkitFakeGpmTicks(i) for i in s.devices],
           "unsupported": s.unsupported.to_dict("records"), "names": s.device_names}
    s.close()
    print(json.dumps(out))
"""


def test_every_metric_reads_through_nvidia_ml_py_with_the_values_of_the_formulas() -> None:
    got = child(SAMPLE_AND_COUNTERS.replace("PID", str(PID)), gpus=2, processes=f"{PID}:{PID_BYTES}")
    assert got["unsupported"] == [] and got["names"] == {"0": "Fake H100 (C)", "1": "Fake H100 (C)"}
    v = got["values"]
    for i in range(2):
        k, g = got["ticks"][i], got["gpm_ticks"][i]
        expect = {
            "gpu_util_pct": (10 * i + k) % 101, "memory_util_pct": (5 * i + k) % 101,
            "memory_used_bytes": (i + 1) * GIB + k * MIB, "memory_total_bytes": 80 * GIB,
            "power_w": 100 + i, "power_instant_w": 150 + i + k / 1000, "energy_j": (i + 1) * 1000 + 10 * k,
            "sm_clock_mhz": 1980 - i,
            "memory_clock_mhz": 2619, "temperature_c": 40 + i, "clock_event_reasons_mask": 4,
            "pcie_tx_bytes_per_s": 1e7, "pcie_rx_bytes_per_s": 5e6,  # 1 MB and 0.5 MB per 0.1 s on the field clock
            "nvlink_tx_bytes_per_s": 4 * 100 * 1024 / 0.1, "nvlink_rx_bytes_per_s": 4 * 50 * 1024 / 0.1,
            f"process_memory_bytes.{PID}": PID_BYTES,
            "gpm_sm_util_pct": (2 + 10 * i + g) % 100,  # one snapshot apart: (id + 10 i + k2) % 100
            "gpm_dram_bw_util_pct": (10 + 10 * i + g) % 100,
            "gpm_nvlink_tx_bytes_per_s": (61 + 10 * i + g) % 100 * MIB,
        }  # fmt: skip
        for metric, want in expect.items():
            assert v[f"{i}|{metric}"] == pytest.approx(want, rel=1e-12), (i, metric)


def test_the_fast_metrics_skip_pynvml_wrappers_and_cost_fewer_calls() -> None:
    got = child("""
        wrapped = ["nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPowerUsage",
                   "nvmlDeviceGetClockInfo", "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetFieldValues",
                   "nvmlGpmSampleGet", "nvmlGpmMetricsGet"]
        s = NvmlSampler(interval_s=0.1, slow_interval_s=100.0, gpm_min_interval_s=0.0)
        calls = []
        for name in wrapped:  # count what goes through pynvml's Python from now on
            real = getattr(pynvml, name)
            setattr(pynvml, name, lambda *a, _n=name, _f=real: (calls.append(_n), _f(*a))[1])
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        lib.aonkitFakeCalls.restype = ctypes.c_ulonglong
        c0 = lib.aonkitFakeCalls()
        s.sample()  # every reader reads (the slow ones through pynvml's functions)
        c1, first = lib.aonkitFakeCalls(), list(calls)
        calls.clear()
        rows = [s.sample() for _ in range(3)]  # the slow ones repeat their values
        sm = s.channels.index((0, "gpm_sm_util_pct"))
        print(json.dumps({"wrapped": calls, "wrapped_first": first, "first": c1 - c0,
                          "later": (lib.aonkitFakeCalls() - c1) / 3, "gaps": len(s.gaps),
                          "gpm_ticks": lib.aonkitFakeGpmTicks(0), "sm": [float(r[sm]) for r in rows]}))
    """, gpus=1)  # fmt: skip
    # the direct GPM reads alternate two requests (the snapshots swap roles): each read is the last snapshot's
    # interval, in the right order (the library refuses an older second snapshot)
    g = got["gpm_ticks"]
    assert got["gaps"] == 0 and got["sm"] == [(2 + k) % 100 for k in (g - 2, g - 1, g)]
    assert got["wrapped"] == [] and got["wrapped_first"] == ["nvmlDeviceGetClockInfo"]  # the memory clock: slow
    # first sample: util, memory, power, instant power, energy, SM and memory clocks, temperature, reasons, PCIe,
    # NVLink, GPM x2
    assert got["first"] == 13
    # later: util, memory, instant power, SM clock, reasons, GPM x2; power (a 1 s average) and the PCIe and NVLink
    # counters are slow where the instant power and GPM measure the same
    assert got["later"] == 7


def test_a_gpu_lost_through_the_direct_calls_is_a_gap_and_the_other_goes_on() -> None:
    got = child("""
        s = NvmlSampler(interval_s=0.1, gpm=False, lost_retry_s=1000.0)
        rows = [s.sample() for _ in range(4)]
        util = [[r[s.channels.index((d, "gpu_util_pct"))] for r in rows] for d in (0, 1)]
        gaps = s.gaps
        print(json.dumps({"util": [[None if math.isnan(x) else x for x in u] for u in util],
                          "gaps": gaps[["device", "metric", "reason"]].to_dict("records")}))
    """, gpus=2, lost_after=3)  # fmt: skip
    # the probe read utilization twice; the sampler's first read is the third, then GPU 0 is lost
    assert got["util"][0][0] is not None and got["util"][0][1:] == [None, None, None]
    assert None not in got["util"][1]
    [gap] = got["gaps"]
    assert gap["device"] == 0 and gap["metric"] == "*" and "GPU is lost (NVML error 15)" in gap["reason"]


def test_before_hopper_gpm_is_listed_and_the_counters_stay_fast() -> None:
    got = child("""
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        lib.aonkitFakeFieldReads.restype = ctypes.c_long
        s = NvmlSampler(interval_s=0.1, slow_interval_s=100.0)
        f0 = lib.aonkitFakeFieldReads(0)
        row = [s.sample() for _ in range(3)][-1]
        print(json.dumps({"field_reads": lib.aonkitFakeFieldReads(0) - f0,
                          "unsupported": sorted(set(s.unsupported["reason"])),
                          "gpm": [m for _, m in s.channels if m.startswith("gpm_")],
                          "pcie": row[s.channels.index((0, "pcie_tx_bytes_per_s"))]}))
    """, gpus=1, hopper=0)  # fmt: skip
    assert got["unsupported"] == ["Not Supported (NVML error 3)", "no GPM on this GPU (Hopper or later)"]
    assert got["gpm"] == []
    assert got["field_reads"] == 6 and got["pcie"] == 1e7  # PCIe and NVLink counters at every sample


def test_without_a_driver_the_sampler_says_so() -> None:
    got = child("""
        from aonkit.sources.nvml import open_gpu_sampler
        s, why = open_gpu_sampler()
        print(json.dumps({"none": s is None, "why": why}))
    """, no_driver=1)  # fmt: skip
    assert got["none"] and got["why"].startswith("no NVIDIA driver (NVML: Driver Not Loaded)")


def test_the_daemon_samples_the_c_library_gpus_and_keeps_them_on_disk() -> None:
    import os
    import signal

    import pyarrow.dataset as ds

    from .live_helpers import Live

    live = Live()
    try:
        try:
            live.env = environ(gpus=2, base=live.env)
        except NoCompiler as exc:
            pytest.skip(str(exc))
        pid = live.start_daemon()
        live.wait(lambda: live.status().get("flushes", 0) >= 1)
        os.kill(pid, signal.SIGTERM)
        live.wait_stopped()
        st = live.status()
        frame = ds.dataset(live.data, format="parquet", partitioning="hive").to_table().to_pandas()
    finally:
        live.close()
    assert st["gpus"] == [0, 1] and st["gpu_names"] == {"0": "Fake H100 (C)", "1": "Fake H100 (C)"}
    assert st["gpu_unsupported"] == 0 and st["lost"] == 0
    util = frame[frame["metric"].astype(str) == "gpu_util_pct"]
    assert set(util["device"]) == {0, 1} and util["value"].notna().all()
    assert util.groupby("device")["ts_ns"].nunique().eq(st["samples"]).all()
    # GPU 1's utilization steps by one per read: (10 + k) % 101 for consecutive k
    steps = np.diff(util[util["device"] == 1].sort_values("ts_ns")["value"].to_numpy()) % 101
    assert (steps == 1).all()


TICKS_BOTH_WAYS = """
    s = NvmlSampler(pids=[PID], interval_s=0.1, slow_interval_s=0.3, gpm_min_interval_s=0.0, lost_retry_s=1000.0)
    made = type(s._fast).__name__
    if not BATCHED:
        s._fast = None  # every tick reader by reader
    batched = []
    if s._fast is not None:
        tick = s._fast.tick
        s._fast.tick = lambda *a: (lambda got: (batched.append(got is not None), got)[1])(tick(*a))
    rows = [[None if math.isnan(v) else v for v in s.sample_list()] for _ in range(TICKS)]
    print(json.dumps({"made": made, "rows": rows, "channels": s.channels, "batched": batched,
                      "calm": s._fast is not None and s._fast.calm(),
                      "gaps": s.gaps[["device", "metric", "reason"]].to_dict("records")}))
"""


def both_ways(ticks: int, batched: bool, **knobs: object) -> dict:
    code = TICKS_BOTH_WAYS.replace("PID", str(PID)).replace("TICKS", str(ticks)).replace("BATCHED", str(batched))
    return child(code, processes=f"{PID}:{PID_BYTES}", **knobs)


def test_the_batched_tick_gives_what_the_reader_by_reader_tick_gives() -> None:
    fast, slow = both_ways(12, True, gpus=3), both_ways(12, False, gpus=3)
    assert fast["made"] == "FastTick" and fast["batched"] == [True] * 12 and fast["calm"]
    # the same values at every tick: fast and slow metrics (every third tick reads the slow ones), GPM, processes
    assert fast["rows"] == slow["rows"] and fast["channels"] == slow["channels"]
    assert fast["gaps"] == slow["gaps"] == []
    assert len(fast["rows"][0]) == len(fast["channels"]) > 3 * 30 and None not in fast["rows"][-1]


@pytest.mark.parametrize(("what", "metric"), [("clock", "sm_clock_mhz"), ("power", "power_instant_w")])
def test_a_direct_read_failing_while_batched_is_a_gap_and_the_batch_comes_back(what: str, metric: str) -> None:
    for batched in (True, False):
        got = both_ways(14, batched, gpus=2, flaky=f"{what}:5:3")
        ch = [tuple(c) for c in got["channels"]]
        util, value = ch.index((1, "gpu_util_pct")), ch.index((1, metric))
        for row in got["rows"]:
            k = row[util] - 10  # GPU 1's utilization reads so far: (10 + k) % 101
            assert (row[value] is None) == (5 <= k < 8), (batched, k, row[value])
            assert sum(v is None for v in row) == (5 <= k < 8)  # nothing else fails, on either GPU
        assert [(g["device"], g["metric"]) for g in got["gaps"]] == [(1, metric)]  # recorded once
        assert "Unknown Error (NVML error 999)" in got["gaps"][0]["reason"]
        if batched:  # a failing tick is read again reader by reader until the metric reads again
            b = got["batched"]
            assert b[:2] == [True] * 2 and False in b and b[-3:] == [True] * 3 and got["calm"]


def test_the_batched_tick_reads_gpm_only_when_it_is_due() -> None:
    got = child("""
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        lib.aonkitFakeGpmTicks.restype = ctypes.c_long
        s = NvmlSampler(interval_s=0.1, slow_interval_s=100.0, gpm_min_interval_s=0.3)
        [entry] = [e for e in s._gpus[0].plan if e[4].metrics[0].startswith("gpm_")]
        sm = s.channels.index((0, "gpm_sm_util_pct"))
        calls, read = [], entry[0]
        entry[0] = lambda h: (calls.append(1), read(h))[1]
        g0 = lib.aonkitFakeGpmTicks(0)
        rows = []
        for _ in range(16):
            rows.append(s.sample_list()[sm])
            time.sleep(0.1)
        print(json.dumps({"calls": len(calls), "computed": lib.aonkitFakeGpmTicks(0) - g0, "sm": rows,
                          "batched": s._fast is not None, "gaps": len(s.gaps)}))
    """, gpus=1)  # fmt: skip
    # every GPM read the tick made computed (a read before it is due would only repeat the values): about one in
    # three of the 10 Hz ticks, and the values change exactly there
    assert got["batched"] and got["gaps"] == 0
    assert got["calls"] == got["computed"] and 3 <= got["computed"] <= 7
    changes = sum(a != b for a, b in zip(got["sm"], got["sm"][1:]))
    assert changes in (got["computed"] - 1, got["computed"])


def test_mig_instances_read_through_nvidia_ml_py() -> None:
    # GIVEN GPU 0 of the C library in MIG mode (instance 1 with one compute instance, instance 2 with two)
    got = child("""
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        lib.aonkitFakeMigGpmTicks.restype = ctypes.c_long
        s = NvmlSampler(interval_s=0.1)
        time.sleep(0.25)
        row = s.sample()
        ticks = {gi: lib.aonkitFakeMigGpmTicks(gi) for gi in (1, 2)}
        migs = [m for m in s._gpus[0].readers if type(m[0]).__name__ == "MigGpm"]
        out = {"values": {f"{d}|{m}": (None if math.isnan(v) else v) for (d, m), v in zip(s.channels, row.tolist())},
               "unsupported": s.unsupported.to_dict("records"), "mig": {str(k): v for k, v in s.mig.items()},
               "layout": s.layout, "direct": [m[0]._direct is not None for m in migs], "ticks": ticks,
               "batched": [hasattr(r.read, "batch") for r, _ in s._gpus[0].readers if ".gi" in r.metrics[0]
                           and not r.metrics[0].startswith("gpm_")],
               "fast": s._fast is not None and len(s._fast.calls)}
        vals = []
        for _ in range(3):  # every MIG memory read through the batched tick, each a new read of the library's
            row = s.sample_list()
            vals.append([row[s.channels.index((0, f"memory_used_bytes.gi{gi}"))] for gi in (1, 2)])
        out["later"] = vals
        s.close()
        print(json.dumps(out))
    """, gpus=2, mig="1:0,2:0,2:1")
    # THEN pynvml's own MIG calls list them, and each GPU instance's memory and GPM land on GPU 0's channels
    assert got["mig"] == {"0": [[1, 0, "MIG-fake-c-0-1-0"], [2, 0, "MIG-fake-c-0-2-0"], [2, 1, "MIG-fake-c-0-2-1"]]}
    assert got["layout"] == [["GPU-fake-c-0", got["mig"]["0"]], ["GPU-fake-c-1", None]]
    assert {(r["device"], r["metric"]) for r in got["unsupported"]} == {(0, "gpu_util_pct"), (0, "memory_util_pct")}
    v = got["values"]
    for gi in (1, 2):
        assert v[f"0|memory_total_bytes.gi{gi}"] == 10 * gi * GIB
        assert (v[f"0|memory_used_bytes.gi{gi}"] - gi * GIB) % MIB == 0 and v[f"0|memory_used_bytes.gi{gi}"] > gi * GIB
        assert v[f"0|gpm_sm_util_pct.gi{gi}"] == (2 + 3 * gi + got["ticks"][str(gi)]) % 100  # one snapshot apart
    assert "1|gpm_sm_util_pct.gi1" not in v and v["1|gpu_util_pct"] is not None
    # AND the instances' GPM snapshots go to the C function directly, as the whole GPU's do, and their memory reads
    # are in the batched tick (one call per GPU instance more than the whole GPUs' own)
    assert got["direct"] == [True, True] and got["batched"] == [True, True]
    later = np.array(got["later"])
    assert (np.diff(later, axis=0) == MIB).all()  # one read a tick each
    whole = child("""
        s = NvmlSampler(interval_s=0.1)
        print(json.dumps({"fast": len(s._fast.calls)}))
        s.close()
    """, gpus=2)
    assert got["fast"] == whole["fast"] - 1 + 2  # GPU 0's utilization refused in MIG mode; 2 instances' memory
