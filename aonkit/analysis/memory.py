"""Device memory over time from the allocator's ``[memory]`` events (``profile_memory=True``).

Each event carries ``Bytes`` (negative for a free), ``Addr``, ``Device Type``
(0 CPU, 1 CUDA), ``Device Id`` and, in most traces, the allocator's running
``Total Allocated`` and ``Total Reserved``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Trace
from .columns import names_of
from .correlation import enclosing_ops


def memory_events(trace: Trace) -> pd.DataFrame:
    """One row per ``[memory]`` event, in time order.

    Parameters
    ----------
    trace : Trace
        A trace recorded with ``profile_memory=True`` (no rows otherwise).

    Returns
    -------
    pandas.DataFrame
        ``row`` (in ``trace.events``), ``ts_ns``, ``device`` (-1 for host memory, else the GPU id), ``bytes``
        (signed), ``addr``, ``allocated_bytes`` and ``reserved_bytes`` (the allocator's totals after the event;
        when a trace lacks them, allocated is the running sum of ``bytes`` per device and reserved is -1).
    """
    ev = trace.events
    rows = np.flatnonzero((ev["name"] == "[memory]").to_numpy())
    rows = rows[np.argsort(ev["ts_ns"].to_numpy()[rows], kind="stable")]
    a = trace.arg_ints_of(("Device Type", "Device Id", "Bytes", "Addr", "Total Allocated", "Total Reserved"), rows)
    out = pd.DataFrame(
        {
            "row": rows,
            "ts_ns": ev["ts_ns"].to_numpy()[rows],
            "device": np.where(a["Device Type"] == 0, -1, a["Device Id"]),
            "bytes": a["Bytes"],
            "addr": a["Addr"],
            "allocated_bytes": a["Total Allocated"],
            "reserved_bytes": a["Total Reserved"],
        }
    )
    missing = out["allocated_bytes"] < 0
    if missing.any():
        running = out.groupby("device")["bytes"].cumsum()
        out.loc[missing, "allocated_bytes"] = running[missing]
    return out


def live_at(events: pd.DataFrame, at: int) -> np.ndarray:
    """Positions in one device's :func:`memory_events` of the allocations live at position ``at``.

    An address is live when its last event up to and including ``at`` is an allocation (``bytes > 0``).
    """
    addr, nbytes = events["addr"].to_numpy()[: at + 1], events["bytes"].to_numpy()[: at + 1]
    last = ~pd.Series(addr).duplicated(keep="last").to_numpy()
    return np.flatnonzero(last & (nbytes > 0))


def memory_peaks(trace: Trace, n: int = 10) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Peak allocated memory per device, and the CPU ops holding the most memory at each peak.

    Parameters
    ----------
    trace : Trace
        A trace recorded with ``profile_memory=True``; its ``[memory]`` events are read as in
        :func:`memory_events` (both tables are empty, with their columns, when it has none).
    n : int
        Op names kept per device in ``holders``, most bytes first. Default 10.

    Returns
    -------
    peaks : pandas.DataFrame
        ``device``, ``peak_allocated_bytes``, ``peak_ts_ns`` (first time the
        peak is reached), ``peak_reserved_bytes`` (largest reserved total).
        One row per device in ascending order, -1 being host memory; ``peak_allocated_bytes`` is the largest
        ``allocated_bytes`` of :func:`memory_events`, ``peak_reserved_bytes`` is -1 when the trace lacks
        ``Total Reserved``.
    holders : pandas.DataFrame
        ``device``, ``op_name`` (name of the innermost CPU op around the
        allocation, ``"(no op)"`` outside any), ``bytes`` live at the peak and
        ``allocations``; the ``n`` largest per device.
        An address is live at the peak when its last ``[memory]`` event up to and including the peak event
        is an allocation (``Bytes > 0``); ``bytes`` sums those allocations' sizes and ``allocations`` counts
        them, per op name. Devices are in ascending order, each by ``bytes`` descending; a device with no
        live allocation has no rows.
    """
    mem = memory_events(trace)
    ops = enclosing_ops(trace, mem["row"].to_numpy()) if len(mem) else np.empty(0, np.int64)
    peaks, holders = [], []
    for device, d in mem.groupby("device", sort=True):
        alloc = d["allocated_bytes"].to_numpy()
        at = int(np.argmax(alloc))
        peaks.append((device, int(alloc[at]), int(d["ts_ns"].iloc[at]), int(d["reserved_bytes"].max())))
        live = live_at(d, at)
        nbytes = d["bytes"].to_numpy()
        if len(live):
            op_rows = ops[d.index.to_numpy()[live]]
            op = np.where(op_rows >= 0, names_of(trace.events, np.maximum(op_rows, 0)), "(no op)")
            h = pd.DataFrame({"bytes": nbytes[live], "op_name": op})
            h = h.groupby("op_name", as_index=False).agg(bytes=("bytes", "sum"), allocations=("bytes", "size"))
            h = h.sort_values("bytes", ascending=False, kind="stable").head(n)
            h.insert(0, "device", device)
            holders.append(h)
    peak_df = pd.DataFrame(peaks, columns=["device", "peak_allocated_bytes", "peak_ts_ns", "peak_reserved_bytes"])
    hold_df = (
        pd.concat(holders, ignore_index=True)
        if holders
        else pd.DataFrame(columns=["device", "op_name", "bytes", "allocations"])
    )
    return peak_df, hold_df
