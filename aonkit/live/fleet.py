"""Many nodes' rolling Parquet sample files, read back as rows (:func:`history`) or bucket stats (:func:`aggregate`).

The files are those of the per-node daemon::

    <root>/host=<hostname>/date=<YYYY-MM-DD>/hour=<HH>/part-<start_ns>-<pid>.parquet

with columns ``ts_ns`` (int64, ns since the epoch), ``device`` (int64, -1 the host), ``metric`` (string,
dictionary-encoded) and ``value`` (float64), as :mod:`aonkit.live.store` writes them. What the reader relies on (the
writer's contract):

* ``date`` and ``hour`` are the UTC date and hour of every row of the file (the writer splits a segment that
  crosses an hour);
* ``start_ns`` is the file's first ``ts_ns``, and a file's rows come before the ``start_ns`` of the same process's
  next file (same host and pid);
* a file is complete once it has its final name (written to a dot-file, then renamed); names beginning with ``.``
  or ``_`` are ignored;
* a **compacted** hour: ``part-<first ts_ns>-0.parquet`` (pid 0, which no process has) holds every row of its
  partition; when one is present the reader reads it alone and ignores the files it merged, so a compactor may write
  it, then delete those files, without a reader ever seeing a row twice.

A file whose row-group statistics break the contract is still read, and named in a warning (windows that pruned it
by name missed its stray rows). A file that cannot be read (truncated, empty, not Parquet) is skipped with an
:class:`~aonkit.AonkitWarning` naming it, never an exception; ``attrs["skipped"]`` of the result lists
``(path, reason)``.

How a query is pruned, cheapest first:

1. **Listing.** Only the ``host=`` directories asked for, and only the ``date=/hour=`` directories of hours that
   meet ``[start, end)``, are listed; a window of up to 48 hours names its hour directories outright, a longer or
   open one lists ``date=`` then ``hour=`` levels, skipping dates outside it. The root is never listed recursively
   (on an object store that is one request per 1,000 keys of the whole fleet); listings run 16 at a time.
2. **File names.** A file is kept when ``[start_ns, next start_ns of its process or the end of its hour)`` meets
   ``[start, end)``.
3. **Partitions.** The files left form a ``pyarrow.dataset`` with hive partitioning (``host``, ``date``,
   ``hour``); :func:`partition_filter` is applied to its fragments (whole hours and hosts out).
4. **Row groups and rows.** Each file is scanned with ``ts_ns`` (row-group statistics skip whole row groups),
   ``metric`` and ``device`` filters pushed down.

The work is cut into units of one host and one UTC hour (one ``hour=`` partition), each with the files of that
partition that can hold rows of the window. Locally the units run on threads; with ``client=`` (a
``dask.distributed.Client``) one task per unit runs on the cluster and returns its filtered Arrow table (or, for
:func:`aggregate`, only its small per-bucket table). Both paths concatenate the units in the same order, so they give
the same frame.

Object stores: pass a URL, ``history("s3://bucket/fleet", ...)``, and ``pyarrow.fs.FileSystem.from_uri`` makes an
``S3FileSystem`` (credentials from the usual AWS environment, config files or instance role, resolved where the
filesystem is made); or pass ``filesystem=pyarrow.fs.S3FileSystem(region=..., endpoint_override=...)`` and the
path inside it (``"bucket/fleet"``). ``gs://`` works the same through ``GcsFileSystem``, and any fsspec
filesystem through ``pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(fs))``. With a Dask client the filesystem
object is pickled to the workers (an ``S3FileSystem`` made with explicit keys carries them; one made without
resolves credentials on each worker).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AonkitWarning

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

__all__ = ["COLUMNS", "Plan", "Unit", "aggregate", "history", "history_plan", "partition_filter"]

HOUR_NS = 3_600_000_000_000
COLUMNS = ("host", "ts_ns", "device", "metric", "value")
"""Columns of :func:`history`: host and metric categorical (categories sorted), int64 ns, int64 device, float64."""
_FILE_RE = re.compile(r"part-(\d+)-(\d+)\.parquet")
_DIRECT_HOURS = 48  # a window of at most this many hours names its hour directories; a longer one walks dates
_MAX_WARNINGS = 10
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


def _schemas() -> tuple[pa.Schema, Any]:
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

    schema, part = _schemas()
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

    Returns
    -------
    Plan
        ``plan.files`` are the files that will be opened; ``plan.listed`` the directory listings it took.
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


def _row_filter(unit: Unit, metrics: tuple[str, ...] | None, devices: tuple[int, ...] | None) -> pc.Expression:
    import pyarrow.compute as pc

    expr = (pc.field("ts_ns") >= unit.lo_ns) & (pc.field("ts_ns") < unit.hi_ns)
    if metrics is not None:
        expr = expr & pc.field("metric").isin(list(metrics))
    if devices is not None:
        expr = expr & pc.field("device").isin(list(devices))
    return expr


def _read_unit(unit: Unit, root: str, fs: Any, metrics: tuple[str, ...] | None,
               devices: tuple[int, ...] | None) -> tuple[pa.Table, list[tuple[str, str]]]:
    """The rows of ``unit`` (columns :data:`COLUMNS`; host and metric dictionary-encoded) and its files' problems.

    Problems are ``(path, reason)``: a reason beginning ``"skipped"`` lost the file's rows; others name a file read
    whose rows break the contract.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.dataset as ds

    flt = _row_filter(unit, metrics, devices)
    schema, _ = _schemas()
    schema = pa.schema(list(schema)[:4])  # the file columns
    problems: list[tuple[str, str]] = []
    tables = []
    fmt = ds.ParquetFileFormat()
    for path, s, b in unit.files:
        frag = fmt.make_fragment(path, filesystem=fs)
        try:
            t = frag.to_table(schema=schema, filter=flt, use_threads=False)
        except FileNotFoundError:
            problems.append((frag.path, "skipped, gone since it was listed (removed by retention?) or not visible "
                             "where the task ran (a Dask worker on another machine needs the same path)"))
            continue
        except (OSError, pa.ArrowException) as exc:
            problems.append((frag.path, f"skipped, not readable as Parquet: {str(exc).splitlines()[0]}"))
            continue
        tables.append(t)
        try:  # the footer is in memory after the scan
            st = [rg.statistics.get("ts_ns") for rg in frag.row_groups]
        except (OSError, pa.ArrowException):
            st = []
        if st and all(x is not None for x in st):
            t_min, t_max = min(x["min"] for x in st), max(x["max"] for x in st)
            if t_min < s or t_max >= b:
                problems.append((frag.path, f"rows from ts_ns {t_min} to {t_max} are outside [{s}, {b}), the span "
                                 "the reader gives this file (its name's start_ns up to its process's next file or "
                                 "the end of its hour); windows that pruned the file missed them"))
    empty = schema.empty_table()
    t = pa.concat_tables([empty, *tables]).combine_chunks() if tables else empty
    host = pa.DictionaryArray.from_arrays(pa.array(np.zeros(t.num_rows, np.int32)), pa.array([unit.host]))
    return t.add_column(0, "host", host), problems


def _run(fn: Any, plan: Plan, client: Any, threads: int | None, **kw: Any) -> list[Any]:
    """``fn(unit, root, fs, metrics, devices, **kw)`` for every unit of ``plan``, in order."""
    args = dict(root=plan.root, fs=plan.filesystem, metrics=plan.metrics, devices=plan.devices, **kw)
    if not plan.units:
        return []
    if client is not None:
        futures = client.map(fn, plan.units, pure=False, **args)
        return client.gather(futures)
    n = threads or min(len(plan.units), os.cpu_count() or 1)
    if n <= 1:
        return [fn(u, **args) for u in plan.units]
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda u: fn(u, **args), plan.units))


def _report(results: list[tuple[Any, list[tuple[str, str]]]], stacklevel: int = 3) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for _, probs in results:
        for path, why in probs:
            seen.setdefault(path, why)  # a file read by two units is named once
    problems = sorted(seen.items())
    for path, why in problems[:_MAX_WARNINGS]:
        warnings.warn(f"{path}: {why}", AonkitWarning, stacklevel=stacklevel)
    if len(problems) > _MAX_WARNINGS:
        warnings.warn(f"{len(problems) - _MAX_WARNINGS} more files with problems (see the result's "
                      "attrs['skipped'] and attrs['off_contract'])", AonkitWarning, stacklevel=stacklevel)
    return problems


def _categorical(values: Any, categories: Iterable[str] | None = None) -> Any:
    """``values`` (a pandas Categorical or strings) as a Categorical with its categories sorted by name."""
    import pandas as pd

    cat = values if isinstance(values, pd.Categorical) else pd.Categorical(values)
    cats = sorted({str(c) for c in (cat.categories if categories is None else categories)})
    return cat.rename_categories([str(c) for c in cat.categories]).set_categories(cats)


def history(
    path_or_url: Any,
    hosts: str | Iterable[str] | None = None,
    start: Any = None,
    end: Any = None,
    metrics: str | Iterable[str] | None = None,
    devices: int | Iterable[int] | None = None,
    client: Any = None,
    *,
    filesystem: Any = None,
    threads: int | None = None,
) -> pd.DataFrame:
    """Samples of many nodes in ``[start, end)``: one row per sample, from the daemon's Parquet files.

    Parameters
    ----------
    path_or_url : str or path
        The data root (``<root>/host=.../date=.../hour=.../part-*.parquet``): a local path, or a URL that
        ``pyarrow.fs.FileSystem.from_uri`` takes (``s3://bucket/prefix``, ``gs://...``, ``file:///...``).
    hosts : str or iterable of str, optional
        Host names (the ``host=`` values); default every host under the root.
    start, end : int or timestamp, optional
        The window ``[start, end)``: int ns since the epoch (``time.time_ns()``), or anything
        ``pandas.Timestamp`` takes (a naive one is UTC). Default unbounded.
    metrics : str or iterable of str, optional
        Metric names to keep (``"gpu_util_pct"``, ...); default all.
    devices : int or iterable of int, optional
        Devices to keep (-1 the host, else the GPU index); default all.
    client : dask.distributed.Client, optional
        Read on this Dask cluster: one task per (host, hour), each returning its filtered rows.
    filesystem : pyarrow.fs.FileSystem, optional
        Read ``path_or_url`` (a path inside it) from this filesystem (S3 with explicit options, fsspec, ...).
    threads : int, optional
        Local reader threads (default one per core); unused with ``client``.

    Returns
    -------
    pandas.DataFrame
        :data:`COLUMNS`: ``host`` (categorical), ``ts_ns``, ``device``, ``metric`` (categorical), ``value``;
        ordered by host, then time (rows of one sample in the file's order). ``attrs["files"]`` is the number of
        files opened; ``attrs["skipped"]`` lists ``(path, reason)`` for files that could not be read (each also
        an :class:`~aonkit.AonkitWarning`); ``attrs["off_contract"]`` files read whose rows break the contract.

    Raises
    ------
    FileNotFoundError
        The root does not exist.
    ValueError
        ``end`` before ``start``.
    """
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    plan = history_plan(path_or_url, hosts, start, end, metrics, devices, filesystem=filesystem)
    results = _run(_read_unit, plan, client, threads)
    problems = _report(results)
    if results:
        table = pa.concat_tables([t for t, _ in results]).unify_dictionaries()
        host = table["host"].to_pandas().array
        metric = table["metric"].to_pandas().array
        df = pd.DataFrame({"host": _categorical(host), "ts_ns": table["ts_ns"].to_numpy(),
                           "device": table["device"].to_numpy(), "metric": _categorical(metric),
                           "value": table["value"].to_numpy()})  # fmt: skip
        del table
        codes, ts = df["host"].cat.codes.to_numpy(), df["ts_ns"].to_numpy()
        if len(ts) > 1 and bool(np.any((ts[1:] < ts[:-1]) & (codes[1:] == codes[:-1]))):  # overlapping files
            df = df.iloc[np.lexsort((ts, codes))].reset_index(drop=True)
    else:
        df = pd.DataFrame({"host": _categorical([]), "ts_ns": np.zeros(0, np.int64),
                           "device": np.zeros(0, np.int64), "metric": _categorical([]),
                           "value": np.zeros(0, np.float64)})  # fmt: skip
    df.attrs["files"] = len(plan.files)
    df.attrs["skipped"] = [p for p in problems if p[1].startswith("skipped")]
    df.attrs["off_contract"] = [p for p in problems if not p[1].startswith("skipped")]
    return df


# ----------------------------------------------------------------------------------------------------- aggregate


def _freq_ns(freq: Any) -> int:
    import pandas as pd

    ns = int(freq * 1e9) if isinstance(freq, (int, float)) else int(pd.Timedelta(freq).as_unit("ns").value)
    if ns <= 0 or HOUR_NS % ns:
        raise ValueError(f"freq={freq!r} must divide one hour (1s, 10s, 1min, 5min, 15min, 1h, ...), so that no "
                         "bucket spans two units of work")
    return ns


def _quantile_name(q: float) -> str:
    return f"p{q * 100:g}"


def _aggregate_unit(unit: Unit, root: str, fs: Any, metrics: tuple[str, ...] | None, devices: tuple[int, ...] | None,
                    freq_ns: int, quantiles: tuple[float, ...]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Per (device, metric, bucket) stats of ``unit``'s rows; only this small frame leaves the worker."""
    import pandas as pd

    t, problems = _read_unit(unit, root, fs, metrics, devices)
    df = pd.DataFrame({"device": t["device"].to_numpy(), "metric": t["metric"].to_pandas().array,
                       "ts_ns": t["ts_ns"].to_numpy() // freq_ns * freq_ns, "value": t["value"].to_numpy()})
    g = df.groupby(["device", "metric", "ts_ns"], observed=True, sort=True)["value"]
    out = g.agg(["count", "mean", "min", "max"])
    for q in quantiles:
        out[_quantile_name(q)] = g.quantile(q)
    out = out.reset_index()
    out["metric"] = out["metric"].astype(str)
    out.insert(0, "host", unit.host)
    return out, problems


def aggregate(
    path_or_url: Any,
    hosts: str | Iterable[str] | None = None,
    start: Any = None,
    end: Any = None,
    metrics: str | Iterable[str] | None = None,
    devices: int | Iterable[int] | None = None,
    client: Any = None,
    *,
    freq: Any = "1min",
    quantiles: Sequence[float] = (0.99,),
    filesystem: Any = None,
    threads: int | None = None,
) -> pd.DataFrame:
    """Per host, device, metric and time bucket: count, mean, min, max and quantiles of the samples.

    Each unit of work (a host and an hour) reduces its own rows where it runs (on the cluster with ``client``),
    so only the per-bucket table comes back: 64 nodes x 1 hour x 163 channels at 1-minute buckets is 626k rows
    instead of 375M. Buckets divide the hour, so no bucket spans two units and every statistic is exact.

    Parameters
    ----------
    path_or_url, hosts, start, end, metrics, devices, client, filesystem, threads
        As for :func:`history`.
    freq : str, float or timedelta
        Bucket width, dividing one hour (``"10s"``, ``"1min"``, ``"5min"``; a number is seconds).
    quantiles : sequence of float
        Quantiles to compute (linear interpolation), each a column ``p<100 q>`` (``p99``, ``p99.9``).

    Returns
    -------
    pandas.DataFrame
        ``host`` (categorical), ``device``, ``metric`` (categorical), ``ts_ns`` (bucket start), ``count``
        (samples that are not NaN), ``mean``, ``min``, ``max``, then the quantiles; ordered by host, device, metric,
        ``ts_ns``. A bucket cut by ``start`` or ``end`` holds only the rows inside the window. ``attrs`` as for
        :func:`history`.
    """
    import pandas as pd

    freq_ns = _freq_ns(freq)
    quantiles = tuple(float(q) for q in quantiles)
    plan = history_plan(path_or_url, hosts, start, end, metrics, devices, filesystem=filesystem)
    results = _run(_aggregate_unit, plan, client, threads, freq_ns=freq_ns, quantiles=quantiles)
    problems = _report(results)
    cols = ["host", "device", "metric", "ts_ns", "count", "mean", "min", "max", *map(_quantile_name, quantiles)]
    frames = [f for f, _ in results if len(f)]
    if frames:
        df = pd.concat(frames, ignore_index=True)
        df = df.sort_values(["host", "device", "metric", "ts_ns"], kind="stable", ignore_index=True)
    else:
        df = pd.DataFrame({c: pd.Series(dtype="int64" if c in ("device", "ts_ns", "count") else "float64")
                           for c in cols if c not in ("host", "metric")})
        df.insert(0, "host", "")
        df.insert(2, "metric", "")
    df["host"] = _categorical(df["host"].astype(str).to_numpy())
    df["metric"] = _categorical(df["metric"].astype(str).to_numpy())
    df = df[cols]
    df.attrs["files"] = len(plan.files)
    df.attrs["skipped"] = [p for p in problems if p[1].startswith("skipped")]
    df.attrs["off_contract"] = [p for p in problems if not p[1].startswith("skipped")]
    return df
