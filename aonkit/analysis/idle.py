"""Where and why the GPU idles, in exact nanoseconds: gaps in the union of each device's (or stream's) GPU events.

A GPU (a device) is busy while any kernel, memcpy or memset runs on it, on
any stream; its span runs from its first event start to its last event end,
and everything in between that is not busy is idle, so ``busy + idle ==
span`` exactly, in integer ns. Each idle gap gets the cause HTA's idle-time
breakdown names (host wait, kernel wait, other), decided from the launch
call of the event that ends the gap:

- ``host_wait``: that launch call started after the gap began: the GPU ran
  dry because the host had not yet asked for the next work;
- ``kernel_wait``: the gap is shorter than ``consecutive_kernel_delay_ns``
  (launch overhead between back-to-back kernels) and the host did not start
  it: the work was queued, or its launch is not in the trace;
- ``other``: a longer gap whose work was queued (a dependency, a
  synchronisation, a copy on another engine...) or whose launch is not in
  the trace.

With ``by="stream"`` the lanes are (device, stream) pairs, as HTA's
breakdown; unlike HTA's, these figures use the file's exact ns (no µs
rounding), never count overlapping events twice, and take no last-step
filter. :func:`aonkit.analysis.hta_counters.idle_time_breakdown` gives HTA's
numbers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..trace import Trace
from .columns import pair_keys
from .correlation import gpu_launches
from .kernels import gpu_table

IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
_BY = ("device", "stream")


def _lanes(trace: Trace, by: str, delay_ns: int) -> tuple[list[str], list[np.ndarray], tuple[np.ndarray, ...]]:
    from .._kernels.inputs import owned
    from .group_order import group_time_order
    from .lane_gaps import lane_gaps

    if by not in _BY:
        raise ValueError(f"by must be one of {_BY}, not {by!r}")
    gpu = gpu_table(trace)  # GPU events with a duration (dur_ns >= 0), in the order of gpu_launches
    pairs = gpu_launches(trace)
    launch = pairs["launch_row"].to_numpy()[trace.events["dur_ns"].to_numpy()[pairs["gpu_row"].to_numpy()] >= 0]
    ts, end = gpu["ts_ns"].to_numpy(), gpu["end_ns"].to_numpy()
    ok = (gpu["dur_ns"].to_numpy() >= 0) & (ts != schema.TS_MISSING)
    keep = slice(None) if ok.all() else ok  # every event usually: no copies then
    device, stream = gpu["device"].to_numpy()[keep], gpu["stream"].to_numpy()[keep]
    ts, end = owned(ts[keep], np.int64), owned(end[keep], np.int64)  # writable, as the kernels were compiled for
    if by == "device":
        keys, decode = device.astype(np.int64), lambda k: (k,)
        cols = ["device"]
    else:
        keys, decode = pair_keys(device, stream)
        cols = ["device", "stream"]
    launch = launch[keep]
    found = launch >= 0
    launch_ts = np.where(found, trace.events["ts_ns"].to_numpy()[np.maximum(launch, 0)], 0) if len(launch) else launch
    order, offsets, lanes = group_time_order(keys, ts)
    out = lane_gaps(order, offsets, ts, end, np.ascontiguousarray(launch_ts, dtype=np.int64),
                    np.ascontiguousarray(found), delay_ns)  # fmt: skip
    lane_vals = [np.asarray(v) for v in decode(lanes)]
    rows = gpu.index.to_numpy()[keep]
    return cols, lane_vals, (*out, rows)


def idle_summary(trace: Trace, by: str = "device", consecutive_kernel_delay_ns: int = 30_000) -> pd.DataFrame:
    """GPU span, busy and idle time per device (or per stream), idle split by cause (module doc), exact ns.

    Parameters
    ----------
    trace : Trace
        One rank's trace (or a combined job's).
    by : {"device", "stream"}
        Lanes: devices (busy when any stream runs), or (device, stream) pairs.
    consecutive_kernel_delay_ns : int
        Gaps shorter than this, with the work already launched, are ``kernel_wait`` (HTA's 30 µs).

    Returns
    -------
    pandas.DataFrame
        ``device`` (and ``stream``), ``span_ns``, ``busy_ns``, ``idle_ns``,
        ``host_wait_ns``, ``kernel_wait_ns``, ``other_ns`` (int64, summing
        to ``idle_ns``), ``gaps`` and ``busy_fraction`` (busy over span).
    """
    cols, lanes, (span, busy, idle, gaps, _) = _lanes(trace, by, consecutive_kernel_delay_ns)
    out = pd.DataFrame({c: v for c, v in zip(cols, lanes)})
    out["span_ns"], out["busy_ns"], out["idle_ns"] = span, busy, idle.sum(axis=1)
    for j, c in enumerate(IDLE_CATEGORIES):
        out[f"{c}_ns"] = idle[:, j]
    out["gaps"] = np.bincount(gaps[:, 0], minlength=len(span)) if len(span) else np.empty(0, np.int64)
    out["busy_fraction"] = np.where(span > 0, busy / np.maximum(span, 1), np.nan)
    return out


def idle_series(trace: Trace, by: str = "device", consecutive_kernel_delay_ns: int = 30_000) -> pd.DataFrame:
    """Every idle gap of every device (or stream), in time order per lane (see :func:`idle_summary`).

    Parameters
    ----------
    trace : Trace
        One rank's trace (or a combined job's). Its GPU events (kernels, memcpys, memsets) with a timestamp
        and a duration count.
    by : {"device", "stream"}
        Lanes: devices (busy when any stream runs), or (device, stream) pairs. Default ``"device"``.
    consecutive_kernel_delay_ns : int
        A gap that is not ``host_wait`` is ``kernel_wait`` when shorter than this many ns, else ``other``.
        Default 30000 (HTA's 30 µs).

    Returns
    -------
    pandas.DataFrame
        One row per gap, lanes in ascending order (device, then stream), gaps in time order within a lane:
        ``device`` (and ``stream``), ``start_ns`` (end of the busy time before the gap), ``end_ns`` (start of
        the next event), ``dur_ns`` (``end_ns - start_ns``; all int64 ns), ``idle_category`` (categorical:
        ``host_wait``, ``kernel_wait``, ``other``) and ``next_row``: the row in ``trace.events`` of the
        event that ends the gap (its launch call decided the category). When several events start at that
        instant, ``next_row`` is the first of them in ``trace.events`` order and the earliest of their launch
        calls decides.

    Raises
    ------
    ValueError
        ``by`` is not ``"device"`` or ``"stream"``.
    """
    cols, lanes, (_, _, _, gaps, rows) = _lanes(trace, by, consecutive_kernel_delay_ns)
    lane = gaps[:, 0]
    out = pd.DataFrame({c: v[lane] for c, v in zip(cols, lanes)})
    out["start_ns"], out["end_ns"] = gaps[:, 1], gaps[:, 2]
    out["dur_ns"] = gaps[:, 2] - gaps[:, 1]
    out["idle_category"] = pd.Categorical.from_codes(gaps[:, 3], categories=list(IDLE_CATEGORIES))
    out["next_row"] = rows[gaps[:, 4]] if len(rows) else np.empty(0, np.int64)
    return out
