"""Memory-copy bandwidth per copy kind in exact ns: aonkit's own semantics, next to HTA's.

A copy's kind is its name up to `` (``: ``Memcpy HtoD``, ``Memcpy DtoD``,
``Memset``... Its size is the profiler's ``bytes`` arg, its rate
``bytes / dur_ns`` (1 byte/ns = 1 GB/s). Unlike HTA's
(:func:`aonkit.analysis.hta_counters.memory_bw_summary`), which rounds to µs,
stretches 0-µs copies to 1 µs and summarises the levels of its step series,
this keeps ns, leaves 0-ns copies out of rates (they are still counted) and
reports totals per kind. Kinds are keyed by (``device``, ``kind``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..trace import Trace
from .columns import in_categories, pair_keys


def copies(trace: Trace) -> pd.DataFrame:
    """One row per memcpy/memset, with its size and rate.

    Columns: ``row`` (in ``trace.events``), ``device``, ``stream``, ``kind``,
    ``ts_ns``, ``dur_ns``, ``bytes`` (NaN when the trace lacks it) and
    ``gbps`` (NaN for 0 ns or no size). Remembered per trace
    (:mod:`aonkit.analysis.memo`): the summary and the series read the
    sizes from the events' text once.

    Parameters
    ----------
    trace : Trace
        Any trace; events of the memcpy and memset categories (``gpu_memcpy``, ``Memcpy``, ``gpu_memset``,
        ``Memset``) count, except those without a timestamp or a duration (``dur_ns`` -1).

    Returns
    -------
    pandas.DataFrame
        One row per copy, in ``trace.events`` order: ``row`` (int, row in ``trace.events``), ``device``,
        ``stream``, ``kind`` (str: the name up to `` (``, e.g. ``Memcpy HtoD``; ``""`` for an unnamed event),
        ``ts_ns`` and ``dur_ns`` (int, ns), ``bytes`` (float, the event's ``bytes`` arg; NaN when absent or not
        a number) and ``gbps`` (float, ``bytes / dur_ns`` in GB/s, 1 byte/ns = 1 GB/s; NaN when ``dur_ns`` is 0
        or the size is unknown).
    """
    from .memo import remembered

    return remembered(trace, "copies", lambda: _copies(trace))


def _copies(trace: Trace) -> pd.DataFrame:
    ev = trace.events
    rows = np.flatnonzero(in_categories(ev["cat"], schema.MEMCPY_CATS | schema.MEMSET_CATS))
    rows = rows[(ev["dur_ns"].to_numpy()[rows] >= 0) & (ev["ts_ns"].to_numpy()[rows] != schema.TS_MISSING)]
    names = ev["name"].array
    kinds = np.array([str(n).split(" (")[0] for n in names.categories] + [""], dtype=object)
    dur = ev["dur_ns"].to_numpy()[rows]
    size = trace.arg_numbers("bytes", rows) if len(rows) else np.empty(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(dur > 0, size / dur, np.nan)
    return pd.DataFrame({
        "row": rows, "device": ev["device"].to_numpy()[rows], "stream": ev["stream"].to_numpy()[rows],
        "kind": kinds[np.asarray(names.codes)[rows]], "ts_ns": ev["ts_ns"].to_numpy()[rows], "dur_ns": dur,
        "bytes": size, "gbps": rate,
    })  # fmt: skip


def _levels(c: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """Bandwidth in flight per (device, kind): (times, copies, GB/s, offsets, device of each, kind of each)."""
    from .._kernels.step_series import step_levels
    from .group_order import group_time_order

    c = c[c["gbps"].notna()]
    kind_codes, kinds = pd.factorize(c["kind"], sort=True)
    keys, decode = pair_keys(c["device"].to_numpy(), kind_codes.astype(np.int64))
    ts, end, rate = c["ts_ns"].to_numpy(), (c["ts_ns"] + c["dur_ns"]).to_numpy(), c["gbps"].to_numpy()
    n = len(c)
    times = np.concatenate([ts, end])
    d_count = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    pos, offsets, gkeys = group_time_order(np.concatenate([keys, keys]), times)
    t, count, level, out_off = step_levels(times, d_count, np.concatenate([rate, -rate]), pos, offsets)
    devices, codes = decode(gkeys)
    return t, count, level, out_off, devices, np.asarray(kinds, dtype=object)[codes.astype(np.int64)]


def memory_bandwidth_series(trace: Trace) -> pd.DataFrame:
    """Copy bandwidth in flight over time, as a step function per (``device``, ``kind``).

    One row per instant of change: ``ts_ns``, ``copies`` (running) and
    ``gbps`` (sum of their rates); sorted by device, kind, time.

    Parameters
    ----------
    trace : Trace
        Any trace. Only copies with a rate count (:func:`copies` rows whose ``gbps`` is not NaN: a known size
        and ``dur_ns > 0``); each runs over ``[ts_ns, ts_ns + dur_ns)``.

    Returns
    -------
    pandas.DataFrame
        ``device``, ``kind``, ``ts_ns`` (int, ns), ``copies`` (int, copies with a rate running after every
        change at that instant) and ``gbps`` (float, GB/s, the sum of their :func:`copies` rates; exactly 0
        when none runs). Kinds are in sorted order within a device.
    """
    t, count, level, out_off, devices, kinds = _levels(copies(trace))
    reps = np.diff(out_off)
    return pd.DataFrame({"device": np.repeat(devices, reps), "kind": np.repeat(kinds, reps), "ts_ns": t,
                         "copies": count, "gbps": level})  # fmt: skip


def memory_bandwidth_summary(trace: Trace) -> pd.DataFrame:
    """Copies, bytes, time and GB/s per (``device``, ``kind``).

    Columns: ``copies``, ``bytes``, ``busy_ns`` (summed durations),
    ``union_ns`` (time with a copy of the kind running), ``mean_gbps`` (bytes
    / their copies' ns), ``effective_gbps`` (bytes / union_ns) and
    ``peak_gbps`` (most bandwidth in flight at once). Sizes and rates use the
    copies with a known size.

    Parameters
    ----------
    trace : Trace
        Any trace; its copies are those of :func:`copies`.

    Returns
    -------
    pandas.DataFrame
        One row per (``device``, ``kind``), sorted by device then kind: ``device``, ``kind``, ``copies`` (int,
        every copy, 0-ns and unsized ones included), ``bytes`` (float, sum of the known sizes; 0.0 when none is
        known), ``busy_ns`` (int, ns, sum of all the copies' durations), ``union_ns`` (int, ns, length of the
        union of their ``[ts_ns, ts_ns + dur_ns)`` intervals), ``mean_gbps`` (float, GB/s: ``bytes`` over the
        summed duration of the copies with a known size; NaN when that is 0), ``effective_gbps`` (float, GB/s:
        ``bytes / union_ns``; NaN when ``union_ns`` is 0) and ``peak_gbps`` (float, GB/s: the highest ``gbps``
        of :func:`memory_bandwidth_series` for the pair; 0.0 when none of its copies has a rate).
    """
    from .._kernels.intervals import segment_unions
    from .time_weighted import time_weighted

    c = copies(trace)
    kind_codes, kinds = pd.factorize(c["kind"], sort=True)
    keys, decode = pair_keys(c["device"].to_numpy(), kind_codes.astype(np.int64))
    ts, dur, size = c["ts_ns"].to_numpy(), c["dur_ns"].to_numpy(), c["bytes"].to_numpy()
    order = np.lexsort((ts, keys))  # by (device, kind), each in time order
    gkeys, starts = np.unique(keys[order], return_index=True)
    if not len(gkeys):
        starts = np.zeros(0, np.int64)
    known = ~np.isnan(size[order])

    def total(values: np.ndarray) -> np.ndarray:
        return np.add.reduceat(values, starts) if len(starts) else values[:0]

    ts_o, dur_o = ts[order], dur[order]
    offsets = np.append(starts, len(order)).astype(np.int64)
    out = pd.DataFrame({"copies": np.diff(offsets), "bytes": total(np.where(known, size[order], 0.0)),
                        "busy_ns": total(dur_o), "sized_ns": total(np.where(known, dur_o, 0)),
                        "union_ns": segment_unions(ts_o, ts_o + dur_o, offsets)})  # fmt: skip
    devices, codes = decode(gkeys)
    out.insert(0, "kind", np.asarray(kinds, dtype=object)[codes.astype(np.int64)])
    out.insert(0, "device", devices)
    t, _, level, out_off, l_dev, l_kinds = _levels(c)
    peak, _ = time_weighted(t, level, out_off)
    peaks = pd.Series(peak, index=pd.MultiIndex.from_arrays([l_dev, l_kinds]))
    with np.errstate(divide="ignore", invalid="ignore"):
        out["mean_gbps"] = out["bytes"] / out["sized_ns"].where(out["sized_ns"] > 0)
        out["effective_gbps"] = out["bytes"] / out["union_ns"].where(out["union_ns"] > 0)
    out["peak_gbps"] = peaks.reindex(pd.MultiIndex.from_arrays([out["device"], out["kind"]])).fillna(0.0).to_numpy()
    return out.drop(columns="sized_ns")
