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

import os
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..errors import AonkitWarning
from .fleet_plan import COLUMNS, HOUR_NS, Plan, Unit, history_plan, partition_filter, schemas  # noqa: F401

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

__all__ = ["COLUMNS", "Plan", "Unit", "aggregate", "history", "history_plan", "partition_filter"]

_MAX_WARNINGS = 10


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
    schema, _ = schemas()
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
