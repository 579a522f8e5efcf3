"""On a real NVIDIA GPU (skipped elsewhere): CUDA kernels and live samples on one clock, the daemon on real NVML.

``tools/device_check.py`` runs these with ``-rP``, so what they print (margins, the alignment table, the daemon's
channels) lands in its report.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aonkit
import aonkit.live
from aonkit.analysis.sample_align import sample_alignment
from tests.live_helpers import Live, live_world

pytestmark = pytest.mark.gpu


def cuda_torch() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


def test_cuda_kernels_lie_between_the_host_clock_readings_around_them(tmp_path: Path) -> None:
    # GIVEN five rounds of GPU work, each between time.time_ns() readings with the GPU idle at both
    torch = cuda_torch()
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(2048, 2048, device="cuda")
    torch.cuda.synchronize()
    marks = []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            torch.cuda.synchronize()
            a = time.time_ns()
            for _ in range(10):
                x = torch.tanh(x @ x * (1 / 2048))
            torch.cuda.synchronize()
            marks.append((a, time.time_ns()))
            time.sleep(0.02)
    prof.export_chrome_trace(str(tmp_path / "clock.json"))
    # THEN every kernel on the trace lies inside the round that ran it, as the host's clock saw it
    k = aonkit.load(tmp_path / "clock.json").kernels
    start = k["ts_ns"].to_numpy()
    end = start + k["dur_ns"].to_numpy()
    slack = 100_000  # 100 us: Kineto's GPU-to-host clock conversion; a sampling interval is 100 ms
    rounds = np.zeros(len(k), np.int64)
    for a, b in marks:
        mine = (start >= a - slack) & (end <= b + slack)
        rounds += mine
        assert mine.sum() >= 30, (mine.sum(), len(k))  # a matmul, a scale and a tanh, ten times
        print(f"round {b - a} ns: first kernel {start[mine].min() - a} ns after it began, "
              f"last ends {b - end[mine].max()} ns before it ended")
    assert (rounds == 1).all(), f"{(rounds != 1).sum()} of {len(k)} kernels outside their round"


def test_gpu_samples_line_up_with_the_kernels_they_describe(tmp_path: Path) -> None:
    # GIVEN an aonkit.profile run at 10 Hz (GPU sampler and torch.profiler with CUDA) of six 0.4 s bursts of
    # matrix products, each followed by 0.4 s with the GPU idle (10 Hz: NVML refreshes GPM every 100 ms)
    torch = cuda_torch()
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    with aonkit.profile(tmp_path / "run", interval_s=0.1) as p:
        for _ in range(6):
            until = time.perf_counter() + 0.4
            while time.perf_counter() < until:
                for _ in range(4):
                    y = x @ x
                torch.cuda.synchronize()  # a short queue: the burst ends when the host stops
            time.sleep(0.4)
    del y
    trace = aonkit.load(p.path)
    assert trace.samples is not None and len(trace.kernels) > 100, p.messages
    # WHEN the GPU activity samples are lined up with the kernels
    table = sample_alignment(trace, max_lag_ns=400_000_000)
    print(table.to_string())
    assert not table.empty, sorted(map(str, trace.samples["metric"].unique()))
    # THEN instant power, the reading with the least driver delay (25-40 ms measured), is on the trace's clock
    # within one interval: the clock check
    power = table[table["metric"] == "power_instant_w"]
    assert power.empty or (power["aligned"].all() and (power["r"] > 0.8).all()), power
    # AND GPM's activity is within one interval of the driver's own delay (78 ms after its 100 ms refresh), and
    # never ahead of the kernels; a new GPM value at every 10 Hz sample (no value held over a tick's jitter)
    gpm = table[table["metric"].str.startswith("gpm_")]
    if len(gpm):
        assert gpm["aligned"].all() and (gpm["r"] > 0.9).all() and (gpm["lag_ns"] >= 0).all(), gpm
        sm = trace.samples[trace.samples["metric"] == "gpm_sm_util_pct"].sort_values("ts_ns")["value"].to_numpy()
        busy = sm[1:] > 1
        held = (sm[1:] == sm[:-1]) & busy
        assert held.sum() <= max(1, busy.sum() // 10), sm
    # AND NVML's utilization, averaged over the driver's own period, follows the bursts
    util = table[table["metric"] == "gpu_util_pct"]
    assert len(util) and (util["r"] > 0.5).all(), util


@pytest.fixture
def live() -> Iterator[Live]:
    yield from live_world()


def test_the_daemon_samples_the_real_gpus(live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the daemon on the real NVML (no fake) at 20 Hz
    pid = live.start_daemon(AONKIT_FAKE_NVML="")
    live.wait(lambda: live.status().get("flushes", 0) >= 1 and live.status().get("samples", 0) >= 20)
    # THEN a reader sees every GPU's basic metrics
    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    reader = aonkit.live.attach()
    frame, _ = reader.read(0)
    gpus = sorted(d for d in frame["device"].unique() if d >= 0)
    assert gpus, frame["metric"].unique()
    for d in gpus:
        names = set(frame.loc[frame["device"] == d, "metric"].astype(str))
        assert {"gpu_util_pct", "memory_used_bytes", "sm_clock_mhz"} <= names, names
    print(live.cli("daemon", "status").stdout)
    # AND SIGTERM stops it with every sample on disk
    os.kill(pid, signal.SIGTERM)
    live.wait_stopped()
    status = live.status()
    assert status["state"] == "stopped" and status["lost"] == 0
