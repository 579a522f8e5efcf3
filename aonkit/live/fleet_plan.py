"""Which files a fleet query reads: the window and filters turned into units of one host-hour and their files.

:func:`history_plan` lists only the host and hour directories that can hold the window and drops files by name;
:func:`partition_filter` prunes a ``pyarrow.dataset`` by host and hour. The layout, its contract and the order
of pruning are in :mod:`aonkit.live.fleet`, which reads the planned units.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

__all__ = ["COLUMNS", "HOUR_NS", "Plan", "Unit", "history_plan", "partition_filter", "schemas"]

HOUR_NS = 3_600_000_000_000
COLUMNS = ("host", "ts_ns", "device", "metric", "value")
"""Columns of :func:`history`: host and metric categorical (categories sorted), int64 ns, int64 device, float64."""
_FILE_RE = re.compile(r"part-(\d+)-(\d+)\.parquet")
_DIRECT_HOURS = 48  # a window of at most this many hours names its hour directories; a longer one walks dates
_LIST_THREADS = 16  # concurrent directory listings
COMPACTED_PID = 0
"""The pid of a compacted file: ``part-<first ts_ns>-0.parquet`` holds every row of its hour partition and the
reader ignores the other files there (no process has pid 0, so the daemon never writes that name)."""


# ---------------------------------------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class Unit:
    """One host and one time slice ``[lo_ns, hi_ns)`` (inside one UTC hour) and the files that may hold its rows.

    ``files`` are ``(path, start_ns, bound_ns)``: the file's start from its name and the end the contract gives it.
    """

    host: str
    lo_ns: int
    hi_ns: int
    files: tuple[tuple[str, int, int], ...]


@dataclass
class Plan:
    """What a query will read: the units of work, and what listing cost.

    Attributes
    ----------
    root : str
        The data root inside ``filesystem``.
    filesystem : pyarrow.fs.FileSystem
        Where the files are.
    units : list of Unit
        In result order: by host, then time.
    listed : int
        Directory listings made (on an object store, at least one request each).
    candidates : int
        Files found in the listed directories, before pruning by name and partition.
    """

    root: str
    filesystem: Any
    units: list[Unit]
    listed: int = 0
    candidates: int = 0
    metrics: tuple[str, ...] | None = None
    devices: tuple[int, ...] | None = None

    @property
    def files(self) -> list[str]:
        """Every file some unit will open, each once, in path order."""
        return sorted({f for u in self.units for f, _, _ in u.files})


def _to_ns(t: Any, name: str) -> int | None:
    """``t`` as int ns since the epoch: an int (ns), or anything ``pandas.Timestamp`` takes (naive means UTC)."""
    if t is None:
        return None
    if isinstance(t, bool):
        raise TypeError(f"{name} must be int ns since the epoch or a timestamp, not a bool")
    import numpy as np

    if isinstance(t, (int, np.integer)):
        return int(t)
    if isinstance(t, (float, np.floating)):
        raise TypeError(f"{name}={t!r}: give int ns since the epoch (time.time_ns()) or a timestamp, not a float")
    import pandas as pd

    ts = pd.Timestamp(t)
    if ts.tzinfo is None:
        ts = ts.tz_localize("UTC")
    return int(ts.as_unit("ns").value)


def _listify(x: Any, kind: type) -> tuple | None:
    if x is None:
        return None
    if isinstance(x, (str, bytes, int)):
        x = [x]
    return tuple(kind(v) for v in x)


def _open_root(path_or_url: Any, filesystem: Any) -> tuple[Any, str]:
    import pyarrow.fs as pafs

    path = os.fspath(path_or_url)
    if filesystem is not None:
        if "://" in path:
            _, path = pafs.FileSystem.from_uri(path)  # the path part of the URL; the filesystem given wins
        return filesystem, path.rstrip("/")
    if "://" in path and not path.startswith("file://"):
        fs, root = pafs.FileSystem.from_uri(path)
        return fs, root.rstrip("/")
    if path.startswith("file://"):
        path = path[len("file://"):]
    return pafs.LocalFileSystem(), os.path.abspath(path)


def _hour_index(date: str, hour: str) -> int | None:
    """Hours since the epoch of a ``date=``/``hour=`` pair of names; None when they are not that."""
    try:
        day = _dt.date.fromisoformat(date)
        h = int(hour)
    except ValueError:
        return None
    if not 0 <= h < 24 or len(date) != 10:
        return None
    return (day - _dt.date(1970, 1, 1)).days * 24 + h


def _hour_names(index: int) -> tuple[str, str]:
    day = _dt.date(1970, 1, 1) + _dt.timedelta(days=index // 24)
    return day.isoformat(), f"{index % 24:02d}"


def partition_filter(hosts: Sequence[str] | None, lo_hour: int | None, hi_hour: int | None) -> pc.Expression:
    """The hive-partition expression for ``hosts`` and the UTC hours ``lo_hour..hi_hour`` (hours since the epoch).

    ``date`` is compared as text (``YYYY-MM-DD`` sorts as dates), so the expression needs no list of hours and
    pyarrow drops a fragment from its partition values alone. None means no bound.
    """
    import pyarrow.compute as pc

    expr = pc.scalar(True)
    if hosts is not None:
        expr = expr & pc.field("host").isin(list(hosts))
    if lo_hour is not None:
        d, h = _hour_names(lo_hour)
        expr = expr & ((pc.field("date") > d) | ((pc.field("date") == d) & (pc.field("hour") >= int(h))))
    if hi_hour is not None:
        d, h = _hour_names(hi_hour)
        expr = expr & ((pc.field("date") < d) | ((pc.field("date") == d) & (pc.field("hour") <= int(h))))
    return expr


def schemas() -> tuple[pa.Schema, Any]:
    """The files' Arrow schema and the hive partitioning (``host``, ``date``, ``hour``) over it."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    part = ds.HivePartitioning(pa.schema([("host", pa.string()), ("date", pa.string()), ("hour", pa.int32())]),
                               segment_encoding="none")
    schema = pa.schema([("ts_ns", pa.int64()), ("device", pa.int64()),
                        ("metric", pa.dictionary(pa.int32(), pa.string())), ("value", pa.float64()),
                        *part.schema])  # fmt: skip
    return schema, part


def _dataset(paths: list[str], fs: Any, root: str) -> Any:
    """A ``pyarrow.dataset`` of ``paths`` with their hive partition expressions (no file is opened or stat'ed)."""
    import pyarrow.dataset as ds

    schema, part = schemas()
    n = len(root) + 1
    return ds.FileSystemDataset.from_paths(paths, schema=schema, format=ds.ParquetFileFormat(), filesystem=fs,
                                           partitions=[part.parse(p[n:]) for p in paths])  # fmt: skip


def history_plan(
    path_or_url: Any,
    hosts: str | Iterable[str] | None = None,
    start: Any = None,
    end: Any = None,
    metrics: str | Iterable[str] | None = None,
    devices: int | Iterable[int] | None = None,
    *,
    filesystem: Any = None,
) -> Plan:
    """What :func:`history` would read, without reading it (the same arguments; see there).

    Only directories are listed; no file is opened.

    Parameters
    ----------
    path_or_url : str or path
        The data root (``<root>/host=.../date=.../hour=.../part-*.parquet``): a local path, a ``file://`` URL, or
        a URL that ``pyarrow.fs.FileSystem.from_uri`` takes (``s3://bucket/prefix``, ...).
    hosts : str or iterable of str, optional
        Host names (the ``host=`` values); default every ``host=`` directory under the root.
    start, end : int or timestamp, optional
        The window ``[start, end)``: int ns since the epoch, or anything ``pandas.Timestamp`` takes (a naive one
        is UTC). Default unbounded. ``start == end`` gives an empty plan.
    metrics : str or iterable of str, optional
        Metric names; kept on the plan (``plan.metrics``, a tuple, or None for all) for the reader. They do not
        change which files are planned.
    devices : int or iterable of int, optional
        Devices (-1 the host, else the GPU index); kept on the plan (``plan.devices``) like ``metrics``.
    filesystem : pyarrow.fs.FileSystem, optional
        Read ``path_or_url`` from this filesystem; for a URL only its path part is used.

    Returns
    -------
    Plan
        ``plan.units`` by host, then hour: one :class:`Unit` per host and UTC hour that has files overlapping
        the window, its ``lo_ns``/``hi_ns`` the window clipped to the hour. ``plan.files`` are the files that
        will be opened; ``plan.listed`` the directory listings it took; ``plan.candidates`` the files found
        before pruning.

    Raises
    ------
    TypeError
        ``start`` or ``end`` is a bool or a float.
    ValueError
        ``end`` before ``start``.
    FileNotFoundError
        The root does not exist (not checked when ``start == end``).
    """
    import pyarrow.fs as pafs

    fs, root = _open_root(path_or_url, filesystem)
    lo, hi = _to_ns(start, "start"), _to_ns(end, "end")
    if lo is not None and hi is not None and hi < lo:
        raise ValueError(f"end ({end}) is before start ({start})")
    host_list = _listify(hosts, str)
    plan = Plan(root, fs, [], metrics=_listify(metrics, str), devices=_listify(devices, int))
    if lo is not None and hi is not None and hi == lo:
        return plan
    if fs.get_file_info(root).type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"{root}: no such directory (the root of the host=<name>/ folders)")

    listed: list[int] = []

    def ls(path: str) -> list[Any]:
        listed.append(1)  # list.append is atomic under the GIL; the listing threads share it
        return fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))

    if host_list is None:
        host_list = tuple(i.base_name[5:] for i in ls(root)
                          if i.type == pafs.FileType.Directory and i.base_name.startswith("host="))
    lo_h = None if lo is None else lo // HOUR_NS
    hi_h = None if hi is None else (hi - 1) // HOUR_NS
    part_expr = partition_filter(host_list, lo_h, hi_h)

    def hour_dirs(host: str) -> list[tuple[int, str]]:
        hdir = f"{root}/host={host}"
        if lo_h is not None and hi_h is not None and hi_h - lo_h < _DIRECT_HOURS:
            return [(h, "{}/date={}/hour={}".format(hdir, *_hour_names(h))) for h in range(lo_h, hi_h + 1)]
        out = []
        lo_d = None if lo_h is None else _hour_names(lo_h)[0]
        hi_d = None if hi_h is None else _hour_names(hi_h)[0]
        for d in ls(hdir):
            name = d.base_name[5:]
            if (d.type != pafs.FileType.Directory or not d.base_name.startswith("date=")
                    or (lo_d is not None and name < lo_d) or (hi_d is not None and name > hi_d)):
                continue
            for hd in ls(d.path):
                h = _hour_index(name, hd.base_name[5:]) if hd.base_name.startswith("hour=") else None
                if (h is not None and hd.type == pafs.FileType.Directory
                        and (lo_h is None or h >= lo_h) and (hi_h is None or h <= hi_h)):
                    out.append((h, hd.path))
        return out

    def partition_files(host: str, h: int, hd: str) -> tuple[int, list[tuple[str, int, int]]]:
        """(files listed, the files kept with their spans) of one ``hour=`` directory."""
        files: list[tuple[int, int, str]] = []  # (start_ns, pid, path)
        for f in ls(hd):
            if f.type != pafs.FileType.File or Path(f.base_name).suffix != ".parquet" or f.base_name[0] in "._":
                continue
            m = _FILE_RE.fullmatch(f.base_name)
            files.append((int(m[1]), int(m[2]), f.path) if m else (h * HOUR_NS, -1, f.path))  # off-pattern name
        n = len(files)
        if any(pid == COMPACTED_PID for _, pid, _ in files):  # a compacted hour stands for the files it merged
            files = [f for f in files if f[1] == COMPACTED_PID]
        files.sort()
        end_h, nxt = (h + 1) * HOUR_NS, {}
        a = h * HOUR_NS if lo is None else max(h * HOUR_NS, lo)
        z = end_h if hi is None else min(end_h, hi)
        kept = []
        for s, pid, path in reversed(files):  # a file ends where its process's next file starts, or at the hour
            b = min(nxt.get(pid, end_h), end_h) if pid >= 0 else end_h
            if pid >= 0:
                nxt[pid] = s
            if max(s, a) < min(b, z):
                kept.append((path, s, b))
        return n, kept[::-1]

    hosts_sorted = sorted(set(host_list))
    with ThreadPoolExecutor(_LIST_THREADS) as pool:  # on an object store each listing is a request: overlap them
        dirs = [(host, h, hd) for host, hds in zip(hosts_sorted, pool.map(hour_dirs, hosts_sorted)) for h, hd in hds]
        found = list(pool.map(lambda d: partition_files(*d), dirs))
    plan.listed = len(listed)
    plan.candidates = sum(n for n, _ in found)
    units = {(host, h): kept for (host, h, _), (_, kept) in zip(dirs, found) if kept}
    paths = [f[0] for fl in units.values() for f in fl]
    survivors = {f.path for f in _dataset(paths, fs, root).get_fragments(filter=part_expr)} if paths else set()
    for (host, h), fl in sorted(units.items()):  # pyarrow's partition pruning of what the listing kept
        fl = [f for f in fl if f[0] in survivors]
        if fl:
            a = h * HOUR_NS if lo is None else max(h * HOUR_NS, lo)
            z = (h + 1) * HOUR_NS if hi is None else min((h + 1) * HOUR_NS, hi)
            plan.units.append(Unit(host, a, z, tuple(fl)))
    return plan


# ---------------------------------------------------------------------------------------------------------- read
