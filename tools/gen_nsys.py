"""Write a synthetic Nsight Systems SQLite export, for benchmarks and edge-case tests.

The tables and columns follow real exports (``../shared/nsys/schema.md``):
``META_DATA_EXPORT``, ``TARGET_INFO_SESSION_START_TIME``, ``StringIds``,
``TARGET_INFO_GPU``, ``CUPTI_ACTIVITY_KIND_KERNEL`` and ``_RUNTIME`` (one
``cudaLaunchKernel_v7000`` per kernel, same correlation id, same process),
optionally ``NVTX_EVENTS`` (one push/pop range around every 10 launches) and
``GPU_METRICS`` with ``TARGET_INFO_GPU_METRICS``. Several processes reuse the
same correlation ids, as real ones do. Rows are written through ADBC bulk
ingest, so 10 million kernels take seconds, not minutes.

Usage: ``python tools/gen_nsys.py OUT.sqlite --kernels 10000000 [--processes 2] [--nvtx] [--metrics]``
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa

T0_NS = 1_733_877_925_987_393_218
VM = 1 << 48
KERNEL_NAMES = ["ampere_sgemm_128x64_tn", "void at::native::vectorized_elementwise_kernel<4>(int)",
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm>(Params)", "reduce_kernel<512>"]
METRICS = ["SM Active", "DRAM Read Bandwidth", "GR Active"]


def _strings() -> tuple[list[str], dict[str, int]]:
    values = [*KERNEL_NAMES, *(n.split("(")[0].split("<")[0].split()[-1] for n in KERNEL_NAMES),
              "cudaLaunchKernel_v7000", "train_step", "python"]
    return values, {v: i for i, v in enumerate(values)}


def _ingest(con, name: str, table: pa.Table) -> None:  # noqa: ANN001 - an ADBC connection
    with con.cursor() as cur:
        cur.adbc_ingest(name, table, mode="create")
    con.commit()


def generate(path: str | Path, kernels: int, processes: int = 1, nvtx: bool = False, metrics: bool = False,
             seed: int = 7) -> Path:
    """Write the export to ``path`` (replaced if it exists) and return the path."""
    import adbc_driver_sqlite.dbapi as adbc

    path = Path(path)
    path.unlink(missing_ok=True)
    rng = np.random.default_rng(seed)
    values, sid = _strings()
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
        con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", [
            ("EXPORT_PRODUCT_VERSION", "2024.6.2.25"), ("EXPORT_SCHEMA_VERSION", "3.16.1"),
            ("EXPORT_PARAM_LAZY", "true")])
        con.execute("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT)")
        con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')", (T0_NS,))
        con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(enumerate(values)))
        con.execute("CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER, name TEXT, busLocation TEXT, "
                    "totalMemory INTEGER, smCount INTEGER, cuDevice INTEGER, computeMajor INTEGER, "
                    "computeMinor INTEGER, memoryBandwidth INTEGER)")
        con.executemany("INSERT INTO TARGET_INFO_GPU VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            (VM, d, "NVIDIA H100 80GB HBM3", f"0000:{d:02x}:00.0", 85899345920, 132, d, 9, 0, 3352320000000)
            for d in range(max(processes, 1))])
    n_per = kernels // processes
    kern, runt = [], []
    for p in range(processes):
        n = n_per + (kernels - n_per * processes if p == processes - 1 else 0)
        gpid = VM | ((1000 + p) << 24)
        gtid = gpid | (1000 + p)
        launch = np.cumsum(rng.integers(2_000, 9_000, n, dtype=np.int64)) + 1_000_000
        launch_dur = rng.integers(2_000, 6_000, n, dtype=np.int64)
        dur = rng.lognormal(9.5, 1.0, n).astype(np.int64) + 1_000
        start = np.maximum.accumulate(launch + launch_dur + 5_000)
        end = start + dur
        start[1:] = np.maximum(start[1:], end[:-1] + 500)  # one stream: kernels do not overlap
        end = start + dur
        corr = np.arange(1, n + 1, dtype=np.int64) * 2  # the same ids in every process
        name = rng.integers(0, len(KERNEL_NAMES), n)
        grid = rng.integers(1, 4096, n)
        kern.append(pa.table({
            "start": start, "end": end, "deviceId": np.full(n, p), "contextId": np.ones(n, np.int64),
            "streamId": np.full(n, 7), "correlationId": corr, "globalPid": np.full(n, gpid),
            "demangledName": name, "shortName": name + len(KERNEL_NAMES), "mangledName": name,
            "launchType": np.ones(n, np.int64), "registersPerThread": np.full(n, 64),
            "gridX": grid, "gridY": np.ones(n, np.int64), "gridZ": np.ones(n, np.int64),
            "blockX": np.full(n, 256), "blockY": np.ones(n, np.int64), "blockZ": np.ones(n, np.int64),
            "staticSharedMemory": np.zeros(n, np.int64), "dynamicSharedMemory": np.full(n, 1024),
        }))  # fmt: skip
        runt.append(pa.table({
            "start": launch, "end": launch + launch_dur, "eventClass": np.zeros(n, np.int64),
            "globalTid": np.full(n, gtid), "correlationId": corr, "nameId": np.full(n, sid["cudaLaunchKernel_v7000"]),
            "returnValue": np.zeros(n, np.int64),
        }))  # fmt: skip
    con = adbc.connect(str(path))
    try:
        _ingest(con, "CUPTI_ACTIVITY_KIND_KERNEL", pa.concat_tables(kern))
        _ingest(con, "CUPTI_ACTIVITY_KIND_RUNTIME", pa.concat_tables(runt))
        if nvtx:
            r = pa.concat_tables(runt)
            s, e = r.column("start").to_numpy()[::10], r.column("end").to_numpy()
            e = e[np.minimum(np.arange(len(s)) * 10 + 9, len(e) - 1)]
            g = r.column("globalTid").to_numpy()[::10]
            _ingest(con, "NVTX_EVENTS", pa.table({
                "start": s - 100, "end": e + 100, "eventType": np.full(len(s), 59), "text": ["train_step"] * len(s),
                "globalTid": g, "domainId": np.zeros(len(s), np.int64)}))  # fmt: skip
        if metrics:
            ts = np.arange(0, int(kern[0].column("end").to_numpy()[-1]), 100_000, dtype=np.int64)
            rows = [pa.table({"timestamp": ts, "typeId": np.full(len(ts), d), "metricId": np.full(len(ts), m),
                              "value": rng.integers(0, 101, len(ts))})
                    for d in range(processes) for m in range(len(METRICS))]
            _ingest(con, "GPU_METRICS", pa.concat_tables(rows))
            _ingest(con, "TARGET_INFO_GPU_METRICS", pa.table({
                "typeId": np.repeat(np.arange(processes), len(METRICS)),
                "metricId": np.tile(np.arange(len(METRICS)), processes),
                "metricName": METRICS * processes}))  # fmt: skip
    finally:
        con.close()
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--nvtx", action="store_true")
    ap.add_argument("--metrics", action="store_true")
    a = ap.parse_args()
    print(generate(a.out, a.kernels, a.processes, a.nvtx, a.metrics))


if __name__ == "__main__":
    main()
