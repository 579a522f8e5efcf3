"""The daemon's rolling Parquet files: hive-partitioned, written whole or not at all, pruned by age and size.

Layout (the fleet reader relies on it exactly)::

    <root>/host=<hostname>/date=<YYYY-MM-DD>/hour=<HH>/part-<start_ns>-<pid>.parquet

``date`` and ``hour`` are UTC, of every row in the file (a segment that crosses an hour is split); ``start_ns`` is
the file's first ``ts_ns``; ``pid`` the daemon's. Columns: ``ts_ns`` int64, ``device`` int64 (-1: host),
``metric`` dictionary<int32, string>, ``value`` float64; zstd; rows in time order, one row group. Each file is
written to ``.part-...parquet.tmp`` in its directory, fsynced and renamed, so a crash leaves only complete files
(and perhaps a dot-file that readers skip and the next daemon removes).
"""

from __future__ import annotations

import calendar
import os
import re
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .files import PART, host_dir, list_files  # noqa: F401 - re-exported: store is where callers look
from .paths import open_private, private_dir

if TYPE_CHECKING:
    import pandas as pd  # the daemon writes without pandas; readers get tables

HOUR_NS = 3600 * 10**9
DICTIONARY_COLUMNS = ["ts_ns", "device", "metric"]
"""Dictionary-encoded columns (their values repeat). ``value`` is byte-stream-split instead: a dictionary of
float samples (pyarrow's default, every column) took 16-64 MB more RSS to write a minute of 8 GPUs
(telemetry-like and random values) and gave larger files (1 minute, 267 channels, telemetry-like values:
451 KB against 361 KB)."""
SCHEMA = pa.schema([("ts_ns", pa.int64()), ("device", pa.int64()),
                    ("metric", pa.dictionary(pa.int32(), pa.string())), ("value", pa.float64())])  # fmt: skip
TEMP = re.compile(r"^\.part-\d+-(\d+)\.parquet\.tmp$")


def partition(root: Path, host: str, ts_ns: int) -> Path:
    """The ``date=/hour=`` directory (UTC) of a time."""
    t = time.gmtime(ts_ns // 10**9)
    return host_dir(root, host) / f"date={t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}" / f"hour={t.tm_hour:02d}"


def _column(typ: pa.DataType, a: np.ndarray) -> pa.Array:
    """An Arrow array over ``a``'s buffer (no copy; unlike ``pa.array``, it does not import pandas)."""
    a = np.ascontiguousarray(a, dtype=typ.to_pandas_dtype())
    return pa.Array.from_buffers(typ, len(a), [None, pa.py_buffer(a)])


def _strings(names: list[str]) -> pa.Array:
    """An Arrow string array of ``names``, built from its buffers (``pa.array`` would import pandas)."""
    data = [name.encode() for name in names]
    offsets = np.zeros(len(data) + 1, np.int32)
    offsets[1:] = np.cumsum([len(d) for d in data])
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def release_memory() -> None:
    """Give the memory Arrow freed back to the system (its allocator keeps it for reuse otherwise).

    After writing a minute of 8 GPUs, the process held 86.4 MiB, 80.3 MiB after this, for 0.05 ms of CPU
    (``bench/RESULTS.md``, session 31); the daemon calls it after each flush.
    """
    pa.default_memory_pool().release_unused()


def write_segment(root: Path, host: str, ts: np.ndarray, values: np.ndarray, channels: list[tuple[int, str]],
                  pid: int | None = None) -> list[tuple[Path, int]]:  # fmt: skip
    """Write samples (``ts`` (n,), ``values`` (n, channels)) as one file per UTC hour; return (path, bytes) each.

    Made without pandas: the daemon, which calls this, never imports it (about 40 MB of RSS).
    """
    pid = os.getpid() if pid is None else pid
    names = list(dict.fromkeys(m for _, m in channels))
    devices = np.array([d for d, _ in channels], np.int64)
    codes = np.array([names.index(m) for _, m in channels], np.int32)
    hours = ts // HOUR_NS
    out = []
    for hour in np.unique(hours):
        sel = hours == hour
        t, v = ts[sel], values[sel]
        n, m = len(t), len(channels)
        table = pa.Table.from_arrays([
            _column(pa.int64(), np.repeat(t, m)), _column(pa.int64(), np.tile(devices, n)),
            pa.DictionaryArray.from_arrays(_column(pa.int32(), np.tile(codes, n)), _strings(names)),
            _column(pa.float64(), v.reshape(-1)),
        ], schema=SCHEMA)  # fmt: skip
        folder = partition(root, host, int(t[0]))
        for p in (folder.parent.parent, folder.parent, folder):
            private_dir(p)
        final = folder / f"part-{int(t[0])}-{pid}.parquet"
        tmp = folder / f".{final.name}.tmp"
        fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            with os.fdopen(fd, "wb") as fh:
                pq.write_table(table, fh, compression="zstd", use_dictionary=DICTIONARY_COLUMNS,
                               column_encoding={"value": "BYTE_STREAM_SPLIT"})
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(folder)
        out.append((final, final.stat().st_size))
    return out


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temps(hdir: Path) -> int:
    """Delete temporary files left by daemons that no longer run; return how many."""
    n = 0
    for dirpath, _, files in os.walk(hdir):
        for name in files:
            if (m := TEMP.match(name)) and not _alive(int(m[1])):
                (Path(dirpath) / name).unlink(missing_ok=True)
                n += 1
    return n


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune(hdir: Path, cap_bytes: int | None, retention_s: float | None, now_ns: int | None = None,
          files: list[tuple[int, int, Path | str, int]] | None = None) -> list[Path]:  # fmt: skip
    """Delete this host's files that started over ``retention_s`` ago, then the oldest while over ``cap_bytes``.

    The newest file is always kept. Emptied partition directories are removed. Returns the files deleted.
    ``files``: the host's files as :func:`list_files` gives them, kept by the caller (the daemon adds each file it
    writes; its paths may be ``str``) and updated here; without it the directory is listed, a ``stat`` per file:
    a week of one-minute files is 10,080 of them, at every flush.
    """
    if files is None:
        files = list_files(hdir)
    now_ns = time.time_ns() if now_ns is None else now_ns
    gone = []
    total = sum(f[3] for f in files)
    for start, _, path, size in files[:-1]:
        old = retention_s is not None and start < now_ns - retention_s * 1e9
        if not old and (cap_bytes is None or total <= cap_bytes):
            break
        path = Path(path)
        path.unlink(missing_ok=True)
        gone.append(path)
        total -= size
    del files[: len(gone)]
    for folder in {p.parent for p in gone} | {p.parent.parent for p in gone}:
        try:
            folder.rmdir()  # only when empty
        except OSError:
            pass
    return gone


def read_window(root: Path, host: str, t0: int, t1: int) -> tuple[pd.DataFrame, dict[int, int]]:
    """Rows of this host's files with ``t0 <= ts_ns <= t1`` (long form) and the latest ``ts_ns`` read per pid."""
    hdir = host_dir(root, host)
    tables, latest = [], {}
    for start, pid, path, _ in list_files(hdir):
        if start > t1 or not _hour_overlaps(path, t0, t1):
            continue
        try:
            table = pq.read_table(path, filters=[("ts_ns", ">=", t0), ("ts_ns", "<=", t1)], schema=SCHEMA)
        except FileNotFoundError:  # pruned meanwhile
            continue
        if table.num_rows:
            tables.append(table)
            latest[pid] = max(latest.get(pid, t0), int(np.max(table.column("ts_ns").to_numpy())))
    if not tables:
        return SCHEMA.empty_table().to_pandas(), latest
    return pa.concat_tables(tables).to_pandas(), latest


def _hour_overlaps(path: Path, t0: int, t1: int) -> bool:
    try:
        day = path.parent.parent.name.removeprefix("date=")
        hour = int(path.parent.name.removeprefix("hour="))
        begin = (calendar.timegm(datetime.strptime(day, "%Y-%m-%d").timetuple()) + 3600 * hour) * 1_000_000_000
    except ValueError:
        return True
    return begin <= t1 and begin + HOUR_NS > t0
