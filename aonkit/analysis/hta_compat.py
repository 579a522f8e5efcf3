"""Holistic Trace Analysis (HTA 0.5.0) semantics, for reports that match HTA's numbers.

HTA prepares each rank's events before any analysis; :func:`hta_frames` does
the same from aonkit's events table:

=====================  ==========================================================
HTA step               here
=====================  ==========================================================
drop events without    rows with ``dur_ns == -1``, no ``cat`` or ``cat == "Trace"``
``dur`` / ``cat``      are dropped (so flows, instants and metadata go)
float rounding         ``ts = ceil(ts)``, ``end = floor(ts + dur)`` in µs, computed
                       exactly from the file's ns (HTA rounds float64 µs, which can
                       differ by 1 µs on epoch-µs traces)
alignment              ``ts -= min(ts over all ranks)`` of the file's own ``ts``
                       (relative to ``baseTimeNanoseconds`` when present)
last-step filter       with more than one ``ProfilerStep#N``, CPU rows starting at
                       or after the last step's start are dropped, and GPU rows are
                       kept only when their ``correlation`` matches a kept CPU row
GPU rows               ``stream != -1``
=====================  ==========================================================

Frames have int64 ``ts``, ``dur``, ``end`` (µs, aligned), ``stream``,
``correlation``, ``device``, ``pid``/``tid`` as in the trace, and str ``name``,
``cat`` and ``kernel_type``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..trace import Trace
from ..traceset import TraceSet

COMMUNICATION = "COMMUNICATION"
MEMORY = "MEMORY"
COMPUTATION = "COMPUTATION"
_COMM_RE = re.compile(r"^nccl.*Kernel")
_MEM_RE = re.compile(r"^Memcpy|^Memset|^dma")
_STEP_RE = re.compile(r"ProfilerStep")


def kernel_type(name: str) -> str:
    """HTA's kernel class of a GPU event name."""
    if _COMM_RE.match(name):
        return COMMUNICATION
    if _MEM_RE.match(name):
        return MEMORY
    return COMPUTATION


def _as_mapping(traces: Trace | TraceSet | Mapping[int, Trace]) -> Mapping[int, Trace]:
    if isinstance(traces, Trace):
        return {traces.meta.rank if traces.meta.rank is not None else 0: traces}
    return traces


def _one_rank(trace: Trace) -> pd.DataFrame:
    ev = trace.events
    cat = ev["cat"]
    keep = (ev["dur_ns"].to_numpy() != -1) & cat.notna().to_numpy() & (cat != "Trace").to_numpy()
    ev = ev[keep]
    base = trace.meta.base_time_ns or 0
    t0 = ev["ts_ns"].to_numpy() - base
    end_ns = t0 + ev["dur_ns"].to_numpy()
    ts = -((-t0) // 1000)  # ceil
    end = end_ns // 1000  # floor
    names = ev["name"].astype(object).fillna("").astype(str)
    kinds = {n: kernel_type(n) for n in names.unique()}
    return pd.DataFrame(
        {
            "ts": ts,
            "dur": end - ts,
            "end": end,
            "name": names.to_numpy(),
            "cat": ev["cat"].astype(str).to_numpy(),
            "pid": ev["pid"].to_numpy(),
            "tid": ev["tid"].to_numpy(),
            "stream": ev["stream"].to_numpy(),
            "device": ev["device"].to_numpy(),
            "correlation": ev["correlation"].to_numpy(),
            "kernel_type": names.map(kinds).to_numpy(),
        }
    )


def _filter_last_step(df: pd.DataFrame) -> pd.DataFrame:
    cpu = df[df["stream"] == -1]
    steps = cpu[cpu["name"].str.contains(_STEP_RE)]
    if steps["name"].nunique() <= 1:
        return df
    cpu = cpu[cpu["ts"] < steps["ts"].max()]
    gpu = df[df["stream"] != -1]
    gpu = gpu.merge(cpu[["correlation"]], on="correlation", how="inner")
    return pd.concat([gpu, cpu], axis=0, ignore_index=True)


def hta_frames(
    traces: Trace | TraceSet | Mapping[int, Trace], include_last_step: bool = False
) -> dict[int, pd.DataFrame]:
    """Per-rank event frames prepared exactly as HTA 0.5.0 prepares them (see module doc)."""
    frames = {rank: _one_rank(t) for rank, t in _as_mapping(traces).items()}
    lows = [int(f["ts"].min()) for f in frames.values() if len(f)]
    low = min(lows) if lows else 0
    out = {}
    for rank, f in frames.items():
        f["ts"] -= low
        f["end"] -= low
        out[rank] = f if include_last_step else _filter_last_step(f)
    return out


def gpu_rows(df: pd.DataFrame) -> pd.DataFrame:
    """HTA's GPU events: rows with a stream."""
    return df[df["stream"] != -1]


def union_us(df: pd.DataFrame) -> int:
    """Length of the union of the rows' [ts, end) intervals."""
    from .._kernels.intervals import union_length

    order = np.argsort(df["ts"].to_numpy(), kind="stable")
    ts = np.ascontiguousarray(df["ts"].to_numpy()[order], dtype=np.int64)
    end = np.ascontiguousarray(df["end"].to_numpy()[order], dtype=np.int64)
    return int(union_length(ts, end))


def temporal_breakdown(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """HTA's ``get_temporal_breakdown``: idle, compute and other GPU time per rank (µs, %)."""
    rows = []
    for rank, df in frames.items():
        gpu = gpu_rows(df)
        if gpu.empty:
            continue
        kernel_time = int(gpu["end"].max() - gpu["ts"].min())
        idle = kernel_time - union_us(gpu)
        compute = union_us(gpu[gpu["kernel_type"] == COMPUTATION])
        rows.append((rank, idle, compute, kernel_time - compute - idle, kernel_time))
    out = pd.DataFrame(rows, columns=["rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)",
                                      "kernel_time(us)"])  # fmt: skip
    for col in ("idle_time", "compute_time", "non_compute_time"):
        out[f"{col}_pctg"] = (out[f"{col}(us)"] / out["kernel_time(us)"] * 100).round(2)
    return out
