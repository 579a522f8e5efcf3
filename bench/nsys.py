"""nsys SQLite import speed: aonkit.load against pandas.read_sql of the same tables, and SQLite's own scan.

Usage: ``PYTHONPATH=. python bench/nsys.py [--kernels 10000000]``. Writes a
synthetic export (``tools/gen_nsys.py``: kernels plus one runtime launch each,
NVTX every 10 launches) under ``bench/out/`` and measures, best of N:

* ``sqlite scan``: one ``SELECT TOTAL(...)`` per table over every column aonkit
  reads, so SQLite decodes every value once: the speed of SQLite itself;
* ``pandas.read_sql``: what a user's script does, ``SELECT`` of the same
  columns through ``sqlite3`` into DataFrames (names joined afterwards not
  counted);
* ``aonkit.load``: the whole import (events table, names resolved, links
  ready; the per-event JSON is made later, only when asked for).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from gen_nsys import generate  # noqa: E402

import aonkit  # noqa: E402

KERNEL_COLS = ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid", "demangledName",
               "shortName", "mangledName", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
               "registersPerThread", "staticSharedMemory", "dynamicSharedMemory", "launchType"]
RUNTIME_COLS = ["start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue"]
NVTX_COLS = ["start", "end", "eventType", "globalTid", "domainId", "text"]
TABLES = {"CUPTI_ACTIVITY_KIND_KERNEL": KERNEL_COLS, "CUPTI_ACTIVITY_KIND_RUNTIME": RUNTIME_COLS,
          "NVTX_EVENTS": NVTX_COLS}


def best(fn, repeat: int) -> float:  # noqa: ANN001 - a callable to time
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def sqlite_scan(path: Path) -> None:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        for table, cols in TABLES.items():
            expr = " + ".join(f'TOTAL(LENGTH("{c}"))' if c == "text" else f'TOTAL("{c}")' for c in cols)
            con.execute(f"SELECT {expr} FROM {table}").fetchone()


def pandas_read(path: Path) -> None:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        for table, cols in TABLES.items():
            pd.read_sql(f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM {table}', con)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"nsys_{a.kernels}.sqlite"
    if not path.exists():
        t0 = time.perf_counter()
        generate(path, a.kernels, processes=1, nvtx=True)
        print(f"generated {path.name} in {time.perf_counter() - t0:.1f} s")
    size = path.stat().st_size / 1e6
    print(f"export: {a.kernels:,} kernels + {a.kernels:,} launches + {a.kernels // 10:,} NVTX ranges, {size:.0f} MB; "
          f"{os.cpu_count()} CPUs")
    aonkit.load(path)  # warm up (imports, page cache)
    t_scan = best(lambda: sqlite_scan(path), a.repeat)
    t_aon = best(lambda: aonkit.load(path), a.repeat)
    t_pd = best(lambda: pandas_read(path), 1)
    print("| sqlite scan s | pandas.read_sql s | aonkit.load s | aonkit vs pandas | aonkit / sqlite scan |")
    print(f"| {t_scan:.2f} | {t_pd:.2f} | {t_aon:.2f} | {t_pd / t_aon:.1f}x | {t_aon / t_scan:.2f} |")


if __name__ == "__main__":
    main()
