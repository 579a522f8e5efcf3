"""What a person asks of a trace first: devices, ranks, span, counts, top kernels."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import schema
from ..trace import Trace


@dataclass
class TraceSummary:
    """Headline facts of one trace.

    Made by :func:`summarize`. Each parameter sets the attribute of the same name (see Attributes).

    Parameters
    ----------
    path : str or None
    rank, world_size : int or None
    n_events, span_ns, gpu_busy_ns : int
    gpus, categories, top_kernels : pandas.DataFrame
    warnings : list of str, optional
        Default: a new empty list.

    Attributes
    ----------
    path : str or None
        The file the trace was read from (``trace.meta.path``).
    rank, world_size : int or None
        From the trace's ``distributedInfo`` (``trace.meta``).
    n_events : int
        Rows of ``trace.events`` (metadata events included).
    gpus : pandas.DataFrame
        ``device``, ``name``, ``used`` (the device ran at least one GPU event),
        ``sms``, ``memory_bytes``. One row per ``deviceProperties`` entry (``name`` ``"(unnamed)"`` when empty;
        ``sms`` and ``memory_bytes`` -1 when not listed), then one per device that ran GPU events but is not
        listed there (``name`` ``"(not in deviceProperties)"``, ``sms`` and ``memory_bytes`` -1).
    span_ns : int
        From the first event start to the last event end (metadata events excluded;
        events without a timestamp left out, negative durations counted as 0); 0 for no such event.
    categories : pandas.DataFrame
        ``cat`` (``"(none)"`` for events without one), ``events`` per category, most first.
    top_kernels : pandas.DataFrame
        ``name``, ``count``, ``total_ns``, ``mean_ns``, ``share`` of kernel time (:func:`top_kernels`).
    gpu_busy_ns : int
        Time during which at least one kernel ran (union over devices and streams; memcpys, memsets and
        kernels without a duration or timestamp are not counted).
    warnings : list of str
        A copy of the reader's ``trace.warnings``.
    """

    path: str | None
    rank: int | None
    world_size: int | None
    n_events: int
    span_ns: int
    gpus: pd.DataFrame
    categories: pd.DataFrame
    top_kernels: pd.DataFrame
    gpu_busy_ns: int
    warnings: list[str] = field(default_factory=list)


def _span_ns(ev: pd.DataFrame) -> int:
    timed = ev[(ev["ts_ns"] != schema.TS_MISSING) & (ev["ph"] != "M")]
    if timed.empty:
        return 0
    ts = timed["ts_ns"].to_numpy()
    end = ts + np.maximum(timed["dur_ns"].to_numpy(), 0)
    return int(end.max()) - int(ts.min())  # in Python ints: a clock-garbage span must not wrap around


def _gpus(trace: Trace) -> pd.DataFrame:
    used = set(trace.gpu_events["device"].unique().tolist()) - {-1}
    rows = []
    for i, props in enumerate(trace.meta.device_properties):
        dev = props.get("id", i)
        rows.append(
            {
                "device": dev,
                "name": str(props.get("name", "")) or "(unnamed)",
                "used": dev in used,
                "sms": props.get("numSms", -1),
                "memory_bytes": props.get("totalGlobalMem", -1),
            }
        )
    listed = {r["device"] for r in rows}
    rows += [{"device": d, "name": "(not in deviceProperties)", "used": True, "sms": -1, "memory_bytes": -1}
             for d in sorted(used - listed)]  # fmt: skip
    return pd.DataFrame(rows, columns=["device", "name", "used", "sms", "memory_bytes"])


def sorted_intervals(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The events' ``[ts_ns, ts_ns + dur_ns)`` intervals sorted by start (int64, contiguous); untimed ones left out."""
    ok = (events["dur_ns"].to_numpy() >= 0) & (events["ts_ns"].to_numpy() != schema.TS_MISSING)
    start = events["ts_ns"].to_numpy()[ok]
    order = np.argsort(start, kind="stable")
    start = np.ascontiguousarray(start[order], np.int64)
    return start, np.ascontiguousarray(start + events["dur_ns"].to_numpy()[ok][order], np.int64)


def busy_ns(events: pd.DataFrame) -> int:
    """Length of the union of the events' ``[ts_ns, ts_ns + dur_ns)`` intervals."""
    from .._kernels.intervals import union_length

    return int(union_length(*sorted_intervals(events)))


def top_kernels(trace: Trace, n: int = 10) -> pd.DataFrame:
    """The ``n`` kernel names with the most total GPU time.

    Parameters
    ----------
    trace : Trace
        Any trace (kernels with a negative duration are left out).
    n : int
        Rows kept.

    Returns
    -------
    pandas.DataFrame
        ``name``, ``count``, ``total_ns``, ``mean_ns`` and ``share`` (of all kernel time), by ``total_ns``
        descending (ties: first seen first).
    """
    k = trace.kernels
    k = k[k["dur_ns"] >= 0]
    total = float(k["dur_ns"].sum())
    g = k.groupby("name", observed=True)["dur_ns"].agg(["count", "sum", "mean"])
    g = g.sort_values("sum", ascending=False, kind="stable").head(n).reset_index()
    g.columns = ["name", "count", "total_ns", "mean_ns"]
    g["name"] = g["name"].astype(str)
    g["share"] = g["total_ns"] / total if total else 0.0
    return g


def summarize(trace: Trace, n: int = 10) -> TraceSummary:
    """Headline facts of ``trace``.

    Parameters
    ----------
    trace : Trace
        Any loaded trace.
    n : int
        Kernels listed in ``top_kernels`` (:func:`top_kernels`).

    Returns
    -------
    TraceSummary
        GPUs, rank, span, events per category, GPU busy time, top kernels and the reader's warnings;
        :func:`aonkit.report.format_summary` prints it.
    """
    ev = trace.events
    cats = ev["cat"].astype(object).fillna("(none)").value_counts()
    categories = pd.DataFrame({"cat": cats.index.astype(str), "events": cats.to_numpy()})
    k = trace.kernels
    return TraceSummary(
        path=trace.meta.path,
        rank=trace.meta.rank,
        world_size=trace.meta.world_size,
        n_events=len(ev),
        span_ns=_span_ns(ev),
        gpus=_gpus(trace),
        categories=categories,
        top_kernels=top_kernels(trace, n),
        gpu_busy_ns=busy_ns(k),
        warnings=list(trace.warnings),
    )
