"""The fleet path at full size: bytes per GPU-hour at 10 Hz, write time, and query time for 64 nodes x 1 hour.

Usage: ``PYTHONPATH=. python bench/fleet.py [--nodes 64] [--hours 1] [--out DIR] [--keep] [--workers 2]``

(a) Writes ``nodes x hours`` simulated node-hours (``tests/gen_fleet.py``: host + 8 GPUs x 20 metrics = 163
channels at 10 Hz, a file per 60 s as the daemon flushes, zstd, as :mod:`aonkit.live.store` writes them) and times
generation and writing apart; one node-hour is also written through ``aonkit.live.store.write_segment`` (the
daemon's own writer, with its fsyncs) when it is importable. (b) The bytes: per node-hour, per GPU-hour, per row
and per column, then the same node-hour under other writer choices (file length, encodings, row order) to show what
they would save. (c) Queries through :func:`aonkit.live.fleet.history` and :func:`~aonkit.live.fleet.aggregate`,
in this process (threads) and on a Dask ``LocalCluster`` (``--workers`` processes of one thread), each run twice
(the table shows the second: warm page cache and warm workers; the files were just written, so reads hit memory,
as on a node whose object store is local; an object store adds its request latency, see ``docs/fleet.md``).

An existing ``--out`` holding the same fleet is reused (no rewrite). Prints markdown tables; record them yourself.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from aonkit.live.fleet import aggregate, history, history_plan  # noqa: E402
from tests import gen_fleet as gen  # noqa: E402


def write(out: Path, fleet: gen.Fleet) -> dict[str, float]:
    """Write the fleet; seconds generating and writing, files and bytes."""
    t_gen = t_write = 0.0
    files = []
    channels = fleet.channels()
    step = int(fleet.file_s * 1e9)
    for node in range(fleet.nodes):
        t = time.perf_counter()
        ts, values = gen.node_samples(fleet, node)
        t_gen += time.perf_counter() - t
        t = time.perf_counter()
        seg = (ts - ts[0]) // step * 10**6 + ts // gen.HOUR_NS % 10**6
        cuts = np.flatnonzero(np.diff(seg)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(ts)]):
            table = gen.segment_table(ts[lo:hi], values[lo:hi], channels)
            files.append(gen.write_file(out, fleet.host(node), 1000 + node, table))
        t_write += time.perf_counter() - t
    return {"gen_s": t_gen, "write_s": t_write, "files": len(files), "bytes": sum(p.stat().st_size for p in files)}


def column_bytes(files: list[Path]) -> dict[str, int]:
    """Compressed bytes of each column over ``files`` (pages only; the rest is footers and headers)."""
    out: dict[str, int] = {}
    for p in files:
        md = pq.ParquetFile(p).metadata
        for rg in range(md.num_row_groups):
            for c in range(md.num_columns):
                col = md.row_group(rg).column(c)
                out[col.path_in_schema] = out.get(col.path_in_schema, 0) + col.total_compressed_size
    return out


def variants(tmp: Path, fleet: gen.Fleet) -> list[tuple[str, int, int, float]]:
    """One node-hour under other writer choices: (name, files, bytes, seconds to write)."""
    one = dataclasses.replace(fleet, nodes=1, hours=1.0)
    ts, values = gen.node_samples(one, 0)
    channels = one.channels()
    rows = []

    def run(name: str, file_s: float, order: str = "sample", **parquet: object) -> None:
        d = tmp / name.replace(" ", "_")
        step = int(file_s * 1e9)
        seg = (ts - ts[0]) // step * 10**6 + ts // gen.HOUR_NS % 10**6
        cuts = np.flatnonzero(np.diff(seg)) + 1
        t = time.perf_counter()
        files = []
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(ts)]):
            table = gen.segment_table(ts[lo:hi], values[lo:hi], channels)
            if order == "channel":  # each channel's samples together, in time order
                idx = np.lexsort((table["ts_ns"].to_numpy(), table["metric"].combine_chunks().indices.to_numpy(),
                                  table["device"].to_numpy()))  # fmt: skip
                table = table.take(idx)
            files.append(gen.write_file(d, "node000", 1, table, **parquet))
        dt = time.perf_counter() - t
        rows.append((name, len(files), sum(p.stat().st_size for p in files), dt))
        shutil.rmtree(d)

    run("60 s files (the daemon)", 60.0)
    run("600 s files", 600.0)
    run("3600 s files", 3600.0)
    run("60 s, value not dictionary-encoded", 60.0, use_dictionary=["ts_ns", "device", "metric"])
    run("60 s, value BYTE_STREAM_SPLIT", 60.0, use_dictionary=["ts_ns", "device", "metric"],
        use_byte_stream_split=["value"])
    run("60 s, zstd level 9", 60.0, compression_level=9)
    run("60 s, rows by channel", 60.0, order="channel")
    return rows


def store_writer(tmp: Path, fleet: gen.Fleet) -> tuple[int, float] | None:
    """One node-hour through the daemon's own writer: (bytes, seconds), or None when it is not importable."""
    try:
        from aonkit.live import store
    except ImportError:
        return None
    one = dataclasses.replace(fleet, nodes=1, hours=1.0)
    ts, values = gen.node_samples(one, 0)
    step = int(one.file_s * 1e9)
    seg = (ts - ts[0]) // step
    cuts = np.flatnonzero(np.diff(seg)) + 1
    d = tmp / "store"
    t = time.perf_counter()
    total = 0
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(ts)]):
        total += sum(b for _, b in store.write_segment(d, "node000", ts[lo:hi], values[lo:hi], one.channels(), 1))
    dt = time.perf_counter() - t
    shutil.rmtree(d)
    return total, dt


def timed(fn: Callable[..., Any], *args: Any, repeat: int = 2, **kw: Any) -> tuple[Any, float]:
    """(result, seconds of the last of ``repeat`` runs)."""
    for _ in range(repeat):
        t = time.perf_counter()
        res = fn(*args, **kw)
        dt = time.perf_counter() - t
    return res, dt


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--out", help="data directory (default: a temporary one, removed after)")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-variants", action="store_true")
    a = ap.parse_args(argv)
    fleet = dataclasses.replace(gen.FULL, nodes=a.nodes, hours=a.hours)
    out = Path(a.out or tempfile.mkdtemp(prefix="aonkit-fleet-"))
    marker = out / "_fleet.json"
    spec = json.dumps(dataclasses.asdict(fleet), sort_keys=True)
    print(f"{fleet.nodes} nodes x {fleet.hours:g} h, {len(fleet.channels())} channels "
          f"(host {len(fleet.host_metrics)} + {fleet.gpus} GPUs x {len(fleet.gpu_metrics)}) at {fleet.rate_hz:g} Hz, "
          f"{fleet.file_s:g} s files; {os.cpu_count()} cores; data in {out}\n")

    if marker.exists() and json.loads(marker.read_text())["spec"] == spec:
        w = json.loads(marker.read_text())["write"]
        print("(reusing the files written before)")
    else:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        w = write(out, fleet)
        marker.write_text(json.dumps({"spec": spec, "write": w}))
    node_hours = fleet.nodes * fleet.hours
    rows = node_hours * 3600 * fleet.rate_hz * len(fleet.channels())
    gpu_hours = node_hours * fleet.gpus
    b = w["bytes"]
    print("| written | value |\n|---|---|")
    print(f"| rows | {rows / 1e6:,.1f} M |")
    print(f"| files | {w['files']:,} ({w['files'] / node_hours:.0f} per node-hour) |")
    print(f"| bytes | {b / 1e9:.2f} GB |")
    print(f"| bytes per node-hour | {b / node_hours / 1e6:.1f} MB |")
    print(f"| bytes per GPU-hour (node bytes / {fleet.gpus}, host share included) | {b / gpu_hours / 1e6:.2f} MB |")
    print(f"| bytes per row | {b / rows:.2f} |")
    print(f"| bytes per node-day | {b / node_hours * 24 / 1e9:.2f} GB |")
    print(f"| generate (numpy, not the daemon's cost) | {w['gen_s']:.1f} s |")
    print(f"| write: build tables + Parquet zstd | {w['write_s']:.1f} s, {w['write_s'] / node_hours:.2f} s CPU per "
          f"node-hour = {100 * w['write_s'] / node_hours / 3600:.3f}% of a core |")
    per_file = sorted(p.stat().st_size for p in out.rglob("part-*.parquet"))
    print(f"| file size (median) | {per_file[len(per_file) // 2] / 1e3:.0f} kB |")
    first = sorted((out / f"host={fleet.host(0)}").rglob("part-*.parquet"))
    cols = column_bytes(first)
    node_b = sum(p.stat().st_size for p in first)
    for c, n in cols.items():
        print(f"| column {c} (node000) | {n / node_b:.1%} of its bytes |")
    print(f"| footers, headers, dictionaries (node000) | {1 - sum(cols.values()) / node_b:.1%} |")

    with tempfile.TemporaryDirectory() as tmp:
        st = store_writer(Path(tmp), fleet)
        if st is not None:
            print(f"| one node-hour through aonkit.live.store.write_segment (fsync each file) | {st[0] / 1e6:.1f} MB, "
                  f"{st[1]:.2f} s |")
        if not a.skip_variants:
            print("\n| one node-hour, writer choice | files | MB | MB per GPU-hour | vs the daemon | write s |")
            print("|---|---|---|---|---|---|")
            var = variants(Path(tmp), fleet)
            base = var[0][2]
            for name, nf, nb, dt in var:
                print(f"| {name} | {nf} | {nb / 1e6:.1f} | {nb / fleet.gpus / 1e6:.2f} | {nb / base:.0%} | {dt:.2f} |")

    hosts = [fleet.host(i) for i in range(fleet.nodes)]
    t0 = int(pd.Timestamp(fleet.start).as_unit("ns").value)
    m5 = t0 + 25 * 60 * 10**9
    queries = [
        ("one host, all metrics, 1 h", history, dict(hosts=hosts[0])),
        ("all hosts, gpu_util_pct, 1 h", history, dict(metrics="gpu_util_pct")),
        ("all hosts, 3 metrics of GPU 0, 1 h", history, dict(metrics=["gpu_util_pct", "power_w",
                                                                    "gpm_sm_occupancy_pct"], devices=0)),
        ("all hosts, all metrics, 5 min", history, dict(start=m5, end=m5 + 300 * 10**9)),
        ("all hosts, all metrics, 1 min", history, dict(start=m5, end=m5 + 60 * 10**9)),
        ("aggregate 1 min mean/p99, all, 1 h", aggregate, dict(freq="1min")),
        ("aggregate 1 min mean/p99, power_w, 1 h", aggregate, dict(freq="1min", metrics="power_w")),
    ]
    plan, dt_plan = timed(history_plan, out)
    print(f"\nplanning the whole fleet (listing {plan.listed} directories, {len(plan.files):,} files): "
          f"{dt_plan * 1e3:.0f} ms")
    print("\n| query | rows out | files | local s | Dask s | local M rows/s scanned |")
    print("|---|---|---|---|---|---|")
    results = {}
    for name, fn, q in queries:
        df, dt = timed(fn, out, **q)
        scanned = history_plan(out, **{k: v for k, v in q.items() if k in ("hosts", "start", "end")})
        n_scan = len(scanned.files) * (rows / w["files"])
        results[name] = [len(df), df.attrs["files"], dt, None, n_scan / dt / 1e6]
        del df
    try:
        import distributed
    except ImportError:
        distributed = None
    if distributed is not None:
        with distributed.LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                                      dashboard_address=None, memory_limit="8GiB") as cl:  # fmt: skip
            with distributed.Client(cl) as client:
                for name, fn, q in queries:
                    df, dt = timed(fn, out, client=client, **q)
                    results[name][3] = dt
                    del df
    for name, (n, nf, dl, dd, mrs) in results.items():
        print(f"| {name} | {n:,} | {nf:,} | {dl:.2f} | {'-' if dd is None else f'{dd:.2f}'} | {mrs:.0f} |")
    if not (a.keep or a.out):
        shutil.rmtree(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
