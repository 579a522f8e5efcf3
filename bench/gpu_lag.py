"""How late each NVML and GPM reading follows the GPU's kernels, and what each NVML call costs (a GPU machine).

Runs bursts of bf16 matrix products of known host times (``time.monotonic_ns`` around a
``torch.cuda.synchronize``, the clock aonkit's samplers stamp with) while a thread reads, every ``--tick-ms``
(10 ms by default, ten times aonkit's default rate):

- a GPM snapshot, with the GPM graphics and SM activity between it and the one before (``nvmlGpmMetricsGet``'s
  return code says when the two snapshots are alike);
- NVML's ``gpu_util_pct`` and instant power (field 186).

It prints, per metric, the delay from each burst's start to the first reading that rises above half the
burst's level and from its end to the first that falls below half (the readings' own stamps: the time the
call returned), and the instants at which GPM's snapshot changed (the driver's refresh period and phase).
Then each NVML call alone: wall and thread-CPU microseconds a call. Then the RSS of a fresh process by stage:
aonkit's daemon modules, ``nvmlInit``, a GPM computation, the daemon's ``NvmlSampler`` and a Parquet write. ``--json PATH`` keeps the raw readings.

Usage: ``python bench/gpu_lag.py [--bursts 6] [--tick-ms 10] [--json lag.json]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time

import numpy as np


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


RSS_CHILD = """
import sys, time
sys.path[:0] = {path!r}
def rss():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) for l in f if l.startswith('VmRSS')) / 1024
out = [('python', rss())]
import aonkit.live.daemon
out.append(('aonkit.live.daemon imported', rss()))
import pynvml
pynvml.nvmlInit()
out.append(('nvmlInit', rss()))
h = pynvml.nvmlDeviceGetHandleByIndex(0)
pynvml.nvmlDeviceGetUtilizationRates(h)
out.append(('a handle and one read', rss()))
try:
    from aonkit.sources.gpm import Gpm, gpm_metrics
    g = Gpm(pynvml, h, gpm_metrics(True), 0.1)
    g.start(h)
    g.probe(h)
    g.read(h, force=True)
    out.append(('GPM: two snapshots and a computation', rss()))
except Exception as exc:  # no GPM: say so
    out.append((f'GPM: {{exc}}', rss()))
from aonkit.sources.nvml import open_gpu_sampler
s, _ = open_gpu_sampler(interval_s=0.1, capacity=1, gpm_min_interval_s=1.0, slow_interval_s=10.0)
s.sample_list()
out.append(("the daemon's NvmlSampler, one tick", rss()))
import numpy as np, tempfile, pathlib
from aonkit.live import store
chans = [(-1, 'cpu_percent')] + [(0, m) for m in s.metrics]
store.write_segment(pathlib.Path(tempfile.mkdtemp()), 'h', np.arange(600, dtype=np.int64) * 100_000_000 + 1,
                    np.random.default_rng(0).random((600, len(chans))), chans)
out.append(("a minute's Parquet file", rss()))
print(out)
"""


def costs(nvml, h, n: int = 200) -> list[tuple[str, float, float]]:
    """Wall and thread-CPU microseconds a call, alone, of the calls the sampler makes (the slow ones)."""
    a, b = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
    req = nvml.c_nvmlGpmMetricsGet_t()
    req.version, req.numMetrics = nvml.NVML_GPM_METRICS_GET_VERSION, 2
    req.metrics[0].metricId, req.metrics[1].metricId = 1, 2
    nvml.nvmlGpmSampleGet(h, a)
    time.sleep(0.11)
    nvml.nvmlGpmSampleGet(h, b)
    req.sample1, req.sample2 = a, b
    calls = {
        "nvmlGpmSampleGet": lambda: nvml.nvmlGpmSampleGet(h, b),
        "nvmlGpmMetricsGet (2 metrics)": lambda: nvml.nvmlGpmMetricsGet(req),
        "nvmlDeviceGetTotalEnergyConsumption": lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(h),
        "field 83 (total energy)": lambda: nvml.nvmlDeviceGetFieldValues(h, [83]),
        "field 186 (instant power)": lambda: nvml.nvmlDeviceGetFieldValues(h, [186]),
        "nvmlDeviceGetPowerUsage": lambda: nvml.nvmlDeviceGetPowerUsage(h),
        "nvmlDeviceGetPcieThroughput (TX)": lambda: nvml.nvmlDeviceGetPcieThroughput(h, 0),
        "nvmlDeviceGetUtilizationRates": lambda: nvml.nvmlDeviceGetUtilizationRates(h),
    }
    rows = []
    for name, call in calls.items():
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - a refused call is a row of its own
            rows.append((name, float("nan"), float("nan"), str(exc)))
            continue
        w0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(n):
            call()
        w1, c1 = time.perf_counter(), time.thread_time()
        rows.append((name, (w1 - w0) / n * 1e6, (c1 - c0) / n * 1e6, ""))
    nvml.nvmlGpmSampleFree(a)
    nvml.nvmlGpmSampleFree(b)
    return rows


class Reader(threading.Thread):
    """Reads every ``tick_ns`` on an absolute schedule until stopped."""

    def __init__(self, nvml, h, tick_ns: int) -> None:
        super().__init__(daemon=True)
        self.nvml, self.h, self.tick_ns = nvml, h, tick_ns
        self.rows: list[tuple[int, float, float, int, float, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        nvml, h = self.nvml, self.h
        snaps = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
        req = nvml.c_nvmlGpmMetricsGet_t()
        req.version, req.numMetrics = nvml.NVML_GPM_METRICS_GET_VERSION, 2
        req.metrics[0].metricId, req.metrics[1].metricId = 1, 2
        nvml.nvmlGpmSampleGet(h, snaps[0])
        nxt = time.monotonic_ns() + self.tick_ns
        while not self.stop.is_set():
            time.sleep(max(0, nxt - time.monotonic_ns()) / 1e9)
            nxt += self.tick_ns
            nvml.nvmlGpmSampleGet(h, snaps[1])
            req.sample1, req.sample2 = snaps[0], snaps[1]
            try:
                nvml.nvmlGpmMetricsGet(req)
                ret = max(req.metrics[0].nvmlReturn, req.metrics[1].nvmlReturn)
                gr, sm = req.metrics[0].value, req.metrics[1].value
            except nvml.NVMLError as exc:
                ret, gr, sm = int(exc.value), float("nan"), float("nan")
            util = nvml.nvmlDeviceGetUtilizationRates(h).gpu
            fv = nvml.nvmlDeviceGetFieldValues(h, [186])[0]
            power = fv.value.uiVal / 1e3 if fv.nvmlReturn == 0 else float("nan")
            self.rows.append((time.monotonic_ns(), gr, sm, ret, float(util), power))
            snaps.reverse()
        for s in snaps:
            nvml.nvmlGpmSampleFree(s)


def delays(ts: np.ndarray, v: np.ndarray, bursts: list[tuple[int, int]]) -> tuple[list[float], list[float]]:
    """Rise and fall delays (ms) of a reading around each burst: first reading past half the burst's level."""
    rise, fall = [], []
    for t0, t1 in bursts:
        inside = (ts > t0) & (ts <= t1 + 300_000_000)
        if not inside.any():
            continue
        level = np.nanmax(v[inside])
        if not np.isfinite(level) or level <= 0:
            continue
        half = level / 2
        up = np.flatnonzero((ts >= t0) & (v > half))
        down = np.flatnonzero((ts >= t1) & (v < half))
        if up.size:
            rise.append((ts[up[0]] - t0) / 1e6)
        if down.size:
            fall.append((ts[down[0]] - t1) / 1e6)
    return rise, fall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bursts", type=int, default=6)
    ap.add_argument("--tick-ms", type=float, default=10.0)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    try:
        import pynvml as nvml

        nvml.nvmlInit()
        import torch

        assert torch.cuda.is_available()
    except Exception as exc:  # noqa: BLE001
        print(f"no GPU here ({exc!r}): nothing measured")
        return
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    print(f"GPU: {nvml.nvmlDeviceGetName(h)}, driver {nvml.nvmlSystemGetDriverVersion()}\n")

    print("### NVML calls alone (200 each)\n\n| call | wall us | thread CPU us | note |\n|---|---:|---:|---|")
    for name, wall, cpu, note in costs(nvml, h):
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {note} |")

    r = subprocess.run([sys.executable, "-c", RSS_CHILD.format(path=sys.path[:3])], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    print(f"\nRSS of a fresh process, MB: {r.stdout.strip() or r.stderr[-2000:]}\n")

    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        y = x @ x
    torch.cuda.synchronize()
    reader = Reader(nvml, h, int(args.tick_ms * 1e6))
    reader.start()
    time.sleep(1.0)
    bursts = []
    lengths = [0.15, 0.25, 0.35, 0.45]
    for i in range(args.bursts):
        length = lengths[i % len(lengths)]
        t0 = time.monotonic_ns()
        until = time.perf_counter() + length
        while time.perf_counter() < until:
            for _ in range(4):
                y = x @ x
            torch.cuda.synchronize()
        bursts.append((t0, time.monotonic_ns()))
        time.sleep(0.55 + 0.037 * i)  # an idle gap that drifts against the 100 ms grid
    time.sleep(0.5)
    reader.stop.set()
    reader.join()
    del y
    rows = np.array(reader.rows, dtype=np.float64)
    ts = rows[:, 0].astype(np.int64)
    gr, sm, ret, util, power = rows[:, 1], rows[:, 2], rows[:, 3].astype(int), rows[:, 4], rows[:, 5]
    ok = ret == 0
    print(f"### {len(ts)} readings every {args.tick_ms} ms; {len(bursts)} bursts "
          f"({', '.join(f'{(b - a) / 1e6:.0f}' for a, b in bursts)} ms)\n")  # fmt: skip
    codes = {int(c): int((ret == c).sum()) for c in np.unique(ret)}
    print(f"GPM pairs by return code: {codes}")
    # the snapshot changed where a valid pair shows activity or where the pair's values differ from the last
    change = ts[ok & (np.abs(gr) > 0)]
    if change.size > 1:
        d = np.diff(change) / 1e6
        print(f"GPM pairs with graphics activity > 0: {change.size}; spacing ms: median {np.median(d):.1f}, "
              f"min {d.min():.1f}, max {d.max():.1f}; phase against a 100 ms grid (ms): "
              f"{np.round((change % 100_000_000) / 1e6, 1)[:20].tolist()}")  # fmt: skip
    print("\n| reading | rise delay ms (each burst) | fall delay ms (each burst) |\n|---|---|---|")
    for name, v in (("gpm graphics (pair)", np.where(ok, gr, np.nan)), ("gpm sm (pair)", np.where(ok, sm, np.nan)),
                    ("gpu_util_pct", util), ("power_instant_w", power - np.nanmin(power))):  # fmt: skip
        rise, fall = delays(ts, v, bursts)
        print(f"| {name} | {', '.join(f'{x:.0f}' for x in rise)} | {', '.join(f'{x:.0f}' for x in fall)} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bursts": bursts, "rows": reader.rows, "tick_ms": args.tick_ms}, f)


if __name__ == "__main__":
    main()
