"""Seeded generator of simulated node-hours of daemon sample files, in the layout of :mod:`aonkit.live.store`.

``<root>/host=<host>/date=<YYYY-MM-DD>/hour=<HH>/part-<start_ns>-<pid>.parquet``: columns ``ts_ns`` int64,
``device`` int64 (-1: host), ``metric`` dictionary<int32, string>, ``value`` float64; zstd; one row group; rows in
time order, every channel of a sample sharing its ``ts_ns`` (the daemon's ring); a file per ``file_s`` seconds of
samples (the daemon's ``--flush``, default 60 s), split at UTC hours; written to a dot-file and renamed.

Values imitate NVML on a busy 8-GPU training node: integer utilisations in step-shaped phases, mostly constant
clocks and memory, power with mW resolution, a cumulative energy counter, full-precision GPM rates and PCIe/NVLink
throughputs. Their compressibility is what ``bench/fleet.py`` measures, so it matters that the constant metrics are
constant and the noisy ones noisy, as on a real node.

The full daemon rate (10 Hz, 3 host + 8 x 20 GPU channels, 60 s files) is 5.87M rows and 60 files per node-hour;
the tests use :data:`SMALL` (0.2 Hz, 2 GPUs x 4 metrics + 2 host metrics, 600 s files).

Usage: ``python tests/gen_fleet.py OUT [--nodes 64] [--hours 1] [--rate 10] [--gpus 8]``
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

HOUR_NS = 3600 * 10**9
HOST_METRICS = ("cpu_percent", "memory_percent", "memory_used_bytes")
GPU_METRICS = (
    "gpu_util_pct", "memory_util_pct", "memory_used_bytes", "memory_total_bytes", "power_w", "energy_j",
    "sm_clock_mhz", "memory_clock_mhz", "temperature_c", "clock_event_reasons_mask", "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s", "gpm_sm_util_pct",
    "gpm_sm_occupancy_pct", "gpm_tensor_util_pct", "gpm_dram_bw_util_pct", "gpm_graphics_util_pct",
    "gpm_fp16_util_pct",
)  # fmt: skip
SCHEMA = pa.schema([("ts_ns", pa.int64()), ("device", pa.int64()),
                    ("metric", pa.dictionary(pa.int32(), pa.string())), ("value", pa.float64())])  # fmt: skip
START = "2025-03-01T00:00:00Z"


@dataclass(frozen=True)
class Fleet:
    """What to generate; :data:`FULL` is the daemon's rate and metric set, :data:`SMALL` the tests'."""

    nodes: int = 64
    hours: float = 1.0
    rate_hz: float = 10.0
    gpus: int = 8
    gpu_metrics: tuple[str, ...] = GPU_METRICS
    host_metrics: tuple[str, ...] = HOST_METRICS
    file_s: float = 60.0
    start: str = START
    seed: int = 0
    restart: dict[int, float] = field(default_factory=dict)  # node -> hours after start when its daemon restarts

    def channels(self) -> list[tuple[int, str]]:
        """(device, metric) of each value column, host first, as the daemon's ring orders them."""
        return [(-1, m) for m in self.host_metrics] + [(g, m) for g in range(self.gpus) for m in self.gpu_metrics]

    def host(self, i: int) -> str:
        """The host name of node ``i``."""
        return f"node{i:03d}"


FULL = Fleet()
SMALL = Fleet(rate_hz=0.2, gpus=2, gpu_metrics=("gpu_util_pct", "power_w", "memory_used_bytes", "gpm_sm_util_pct"),
              host_metrics=("cpu_percent", "memory_used_bytes"), file_s=600.0)  # fmt: skip


def _steps(rng: np.random.Generator, n: int, lo: float, hi: float, mean_len: float) -> np.ndarray:
    """A piecewise-constant level in [lo, hi] changing after exponential runs of ``mean_len`` samples."""
    out = np.empty(n)
    i = 0
    while i < n:
        k = max(1, int(rng.exponential(mean_len)))
        out[i : i + k] = rng.uniform(lo, hi)
        i += k
    return out


def _gpu_values(rng: np.random.Generator, n: int, dt: float, metrics: tuple[str, ...]) -> np.ndarray:
    """(n, len(metrics)) samples of one GPU under a training load with data-loader stalls."""
    busy = _steps(rng, n, 0.0, 1.0, 30.0 / dt) > 0.1  # mostly busy, stalls now and then
    load = np.where(busy, _steps(rng, n, 0.85, 1.0, 5.0 / dt), _steps(rng, n, 0.0, 0.1, 2.0 / dt))
    noise = rng.normal(0.0, 1.0, (n, 4))
    power = np.round(90.0 + 600.0 * load + 15.0 * noise[:, 0], 3)  # mW resolution
    temp = np.round(40.0 + 35.0 * pd.Series(load).ewm(halflife=60.0 / dt).mean().to_numpy())
    throttled = power > 680.0
    mem_used = np.round(_steps(rng, n, 60e9, 78e9, 600.0 / dt) / 2**21) * 2**21
    util = {
        "gpu_util_pct": np.clip(np.round(100.0 * load + 2.0 * noise[:, 1]), 0, 100),
        "memory_util_pct": np.clip(np.round(45.0 * load + 3.0 * noise[:, 2]), 0, 100),
        "memory_used_bytes": mem_used,
        "memory_total_bytes": np.full(n, 85_520_809_984.0),
        "power_w": power,
        "energy_j": np.floor(1.2e10 + np.cumsum(power) * dt * 1e3) / 1e3,  # mJ counter since driver load
        "sm_clock_mhz": np.where(throttled, 1755.0, 1980.0),
        "memory_clock_mhz": np.full(n, 2619.0),
        "temperature_c": temp,
        "clock_event_reasons_mask": np.where(throttled, 4.0, np.where(busy, 0.0, 1.0)),
        "pcie_tx_bytes_per_s": np.abs(2e8 * load + 5e7 * noise[:, 3]),
        "pcie_rx_bytes_per_s": np.abs(1e9 * load * rng.uniform(0.5, 1.5, n)),
        "nvlink_tx_bytes_per_s": np.abs(9e10 * load * rng.uniform(0.3, 1.0, n)),
        "nvlink_rx_bytes_per_s": np.abs(9e10 * load * rng.uniform(0.3, 1.0, n)),
        "gpm_sm_util_pct": np.clip(98.0 * load + rng.normal(0, 1.5, n), 0, 100),
        "gpm_sm_occupancy_pct": np.clip(40.0 * load + rng.normal(0, 2.0, n), 0, 100),
        "gpm_tensor_util_pct": np.clip(55.0 * load + rng.normal(0, 3.0, n), 0, 100),
        "gpm_dram_bw_util_pct": np.clip(35.0 * load + rng.normal(0, 2.0, n), 0, 100),
        "gpm_graphics_util_pct": np.clip(99.0 * load + rng.normal(0, 0.5, n), 0, 100),
        "gpm_fp16_util_pct": np.clip(20.0 * load + rng.normal(0, 1.0, n), 0, 100),
    }
    return np.column_stack([util.get(m, rng.uniform(0, 100, n)) for m in metrics])


def _host_values(rng: np.random.Generator, n: int, dt: float, metrics: tuple[str, ...]) -> np.ndarray:
    total = 2.0 * 2**40
    used = np.round(_steps(rng, n, 0.3, 0.6, 300.0 / dt) * total / 4096) * 4096
    cols = {"cpu_percent": np.clip(np.round(_steps(rng, n, 10, 60, 20.0 / dt) + rng.normal(0, 3, n), 1), 0, 100),
            "memory_percent": np.round(100.0 * used / total, 1), "memory_used_bytes": used}
    return np.column_stack([cols.get(m, rng.uniform(0, 100, n)) for m in metrics])


def node_samples(fleet: Fleet, node: int) -> tuple[np.ndarray, np.ndarray]:
    """``ts`` (n,) int64 ns and ``values`` (n, channels) of node ``node`` over the fleet's hours."""
    rng = np.random.default_rng([fleet.seed, node])
    dt = 1.0 / fleet.rate_hz
    t0 = int(pd.Timestamp(fleet.start).as_unit("ns").value)
    n = int(round(fleet.hours * 3600 * fleet.rate_hz))
    # the sampling thread wakes every dt with ~0.1-0.5 ms of lateness; each node starts at a random offset
    ts = t0 + int(rng.uniform(0, dt) * 1e9) + np.arange(n, dtype=np.int64) * int(dt * 1e9)
    ts += rng.integers(100_000, 500_000, n)
    parts = [_host_values(rng, n, dt, fleet.host_metrics)]
    parts += [_gpu_values(rng, n, dt, fleet.gpu_metrics) for _ in range(fleet.gpus)]
    return ts, np.hstack(parts)


def segment_table(ts: np.ndarray, values: np.ndarray, channels: list[tuple[int, str]]) -> pa.Table:
    """The rows of samples ``ts``/``values`` as the daemon writes them (sample-major, channel order)."""
    names = list(dict.fromkeys(m for _, m in channels))
    devices = np.array([d for d, _ in channels], np.int64)
    codes = np.array([names.index(m) for _, m in channels], np.int32)
    n, m = len(ts), len(channels)
    return pa.table({"ts_ns": np.repeat(ts, m), "device": np.tile(devices, n),
                     "metric": pa.DictionaryArray.from_arrays(np.tile(codes, n), pa.array(names, pa.string())),
                     "value": values.reshape(-1)}, schema=SCHEMA)  # fmt: skip


def partition_dir(root: Path, host: str, ts_ns: int) -> Path:
    """``<root>/host=<host>/date=<UTC date>/hour=<UTC hour>`` of a time."""
    t = pd.Timestamp(int(ts_ns), tz="UTC")
    return root / f"host={host}" / f"date={t:%Y-%m-%d}" / f"hour={t:%H}"


def write_file(root: Path, host: str, pid: int, table: pa.Table, **parquet: object) -> Path:
    """Write one file atomically (dot-file, then rename); its name's ``start_ns`` is its first ``ts_ns``."""
    start = int(table["ts_ns"][0].as_py())
    folder = partition_dir(root, host, start)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"part-{start}-{pid}.parquet"
    tmp = folder / f".{final.name}.tmp"
    pq.write_table(table, tmp, compression="zstd", **parquet)  # type: ignore[arg-type]
    os.replace(tmp, final)
    return final


def write_node(root: str | Path, fleet: Fleet, node: int, **parquet: object) -> list[Path]:
    """Write node ``node``'s files (one per ``file_s`` of samples, split at hours); return their paths."""
    root = Path(root)
    ts, values = node_samples(fleet, node)
    channels = fleet.channels()
    step = int(fleet.file_s * 1e9)
    restart = fleet.restart.get(node)
    t0 = int(pd.Timestamp(fleet.start).as_unit("ns").value)
    # a segment ends at the next flush or hour; a restarted daemon (a new pid) flushes from its own start
    second = np.zeros(len(ts), bool) if restart is None else ts >= t0 + int(restart * HOUR_NS)
    since = np.where(second, ts - int(ts[second][0]) if second.any() else 0, ts - int(ts[0]))
    seg = since // step + second * 10**9
    cuts = np.flatnonzero((np.diff(seg) != 0) | (np.diff(ts // HOUR_NS) != 0)) + 1
    out = []
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(ts)]):
        pid = (2000 if second[lo] else 1000) + node
        out.append(write_file(root, fleet.host(node), pid, segment_table(ts[lo:hi], values[lo:hi], channels),
                              **parquet))  # fmt: skip
    return out


def write_fleet(root: str | Path, fleet: Fleet = SMALL, **parquet: object) -> list[Path]:
    """Write every node of ``fleet`` under ``root``; return the files written, in order."""
    return [p for i in range(fleet.nodes) for p in write_node(root, fleet, i, **parquet)]


def read_all(root: str | Path, files: list[Path] | None = None) -> pd.DataFrame:
    """Every row under ``root`` (or of ``files``), read naively file by file (the tests' oracle).

    Columns: host, ts_ns, device, metric (str), value.
    """
    frames = []
    for p in sorted(Path(root).rglob("part-*.parquet")) if files is None else files:
        t = pq.read_table(p).to_pandas()
        t.insert(0, "host", p.parent.parent.parent.name[5:])
        t["metric"] = t["metric"].astype(str)
        frames.append(t)
    return pd.concat(frames, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    """Write a simulated fleet."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--file-s", type=float, default=60.0)
    a = ap.parse_args(argv)
    fleet = Fleet(nodes=a.nodes, hours=a.hours, rate_hz=a.rate, gpus=a.gpus, file_s=a.file_s)
    files = write_fleet(a.out, fleet)
    print(f"{len(files)} files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB under {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
