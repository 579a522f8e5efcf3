"""HTA 0.5.0-compatible counters: idle-time breakdown, launch statistics, queue lengths, memory bandwidth.

All functions take the per-rank frames of :func:`aonkit.analysis.hta_compat.hta_frames`. Idle time,
launch statistics and queue lengths run in Numba kernels (:mod:`aonkit._kernels.gpu_streams`,
:mod:`aonkit._kernels.joins`, :mod:`aonkit._kernels.queues`) and give the same frames, bit for bit,
as the obvious pandas code in ``tests/naive_hta.py``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ._frames import name_flags, rank_columns
from .hta_compat import gpu_rows
from .hta_queues import QUEUE_APIS, queue_length_series, queue_length_summary, time_blocked_on_full_queue

__all__ = [
    "LAUNCH_APIS", "QUEUE_APIS", "cuda_kernel_launch_stats", "idle_time_breakdown", "memory_bw_series",
    "memory_bw_summary", "memory_kernel_type", "queue_length_series", "queue_length_summary",
    "time_blocked_on_full_queue",
]  # fmt: skip

_IDLE_STR = pd.array(["host_wait", "kernel_wait", "other"], dtype="str")  # taken from, not converted per call
_STATS = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]


def idle_time_breakdown(
    frames: Mapping[int, pd.DataFrame], consecutive_kernel_delay: int = 30
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """HTA's ``get_idle_time_breakdown`` per rank and stream, with the interval statistics.

    Each gap between consecutive GPU events of a stream (ordered by start,
    stably) is ``host_wait`` when the next event's launch call (the first
    CPU-side row with its correlation) started after the previous event
    ended, ``kernel_wait`` when it is shorter than ``consecutive_kernel_delay``
    µs, else ``other``; the first event of a stream has no gap and counts as
    ``other``.

    Returns
    -------
    breakdown : pandas.DataFrame
        ``rank``, ``stream``, ``idle_category``, ``idle_time`` (µs) and
        ``idle_time_ratio`` (share of the stream's idle time, 2 decimals);
        streams in order of first appearance.
    stats : pandas.DataFrame
        ``idle_category``, ``rank``, ``stream`` and pandas' ``describe()`` of
        the gaps (count, mean, std, min, 25%, 50%, 75%, max), 2 decimals.
    """
    from .._kernels.gpu_streams import idle_gaps

    ranks, streams, cats, times, ratios, stats = [], [], [], [], [], []
    for rank, df in frames.items():
        stream, ts, end, corr = rank_columns(df, "stream", "ts", "end", "correlation")
        s_vals, present, total, desc = idle_gaps(stream, ts, end, corr, float(consecutive_kernel_delay))
        s_idx, c_idx = np.nonzero(present)
        t = total[s_idx, c_idx].astype(np.float64)
        per_stream = np.zeros(len(s_vals))
        np.add.at(per_stream, s_idx, t)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios.append(np.round(t / per_stream[s_idx], 2))
        ranks.append(np.full(len(s_idx), rank, dtype=np.int64))
        streams.append(s_vals[s_idx])
        cats.append(c_idx)
        times.append(t)
        stats.append(np.round(desc[s_idx, c_idx], 2))
    if sum(len(r) for r in ranks) == 0:
        return pd.DataFrame(columns=["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]), pd.DataFrame()
    rank_col, stream_col = np.concatenate(ranks), np.concatenate(streams)
    cat_col = _IDLE_STR.take(np.concatenate(cats))
    out = pd.DataFrame({"rank": rank_col, "stream": stream_col, "idle_category": cat_col,
                        "idle_time": np.concatenate(times), "idle_time_ratio": np.concatenate(ratios)},
                       copy=False)  # fmt: skip
    desc = np.concatenate(stats)
    st = pd.DataFrame({"idle_category": cat_col, "rank": rank_col, "stream": stream_col,
                       **{name: desc[:, j] for j, name in enumerate(_STATS)}}, copy=False)  # fmt: skip
    return out, st


LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync")


def cuda_kernel_launch_stats(frames: Mapping[int, pd.DataFrame], apis: tuple[str, ...] = LAUNCH_APIS) -> pd.DataFrame:
    """HTA's ``get_cuda_kernel_launch_stats``: per launch, CPU and GPU duration and launch delay (µs).

    CPU-side rows and GPU rows are joined on correlation, for the
    correlations of calls named in ``apis`` (pairs in CPU row order, then GPU
    row order, as pandas' inner merge). ``launch_delay`` is the gap from the
    end of the CPU row to the start of the GPU event, floored at 0. Like HTA
    0.5.0, only ``apis`` count by default (so HIP launches give no rows); pass
    more names for other runtimes.
    """
    from .._kernels.joins import launch_table

    cols = ["rank", "correlation", "cpu_duration", "gpu_duration", "launch_delay"]
    parts = []
    for rank, df in frames.items():
        stream, ts, dur, corr = rank_columns(df, "stream", "ts", "dur", "correlation")
        parts.append(launch_table(int(rank), stream, ts, dur, corr, *name_flags(df["name"], apis)))
    if not parts:
        return pd.DataFrame(columns=cols)
    table = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    return pd.DataFrame(table.T, columns=cols, copy=False)


def memory_kernel_type(name: str) -> str:
    """HTA's memory-operation label: ``Memcpy DtoH``, ``Memset``...; the part before `` (``."""
    return name.split(" (")[0]


def memory_bw_series(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Memory bandwidth over time per rank and copy kind (GB/s), HTA's step series.

    A copy adds its ``memory_bw_gbps`` at its start and removes it at its end
    (0-µs copies last 1 µs); float rounding below 0 is clipped to 0.
    """
    parts = []
    for rank, df in frames.items():
        mem = gpu_rows(df)
        mem = mem[mem["kernel_type"] == "MEMORY"]
        bw = mem["memory_bw_gbps"].to_numpy(np.float64)
        names = mem["name"].map(memory_kernel_type).to_numpy()
        dur = np.where(mem["dur"].to_numpy() == 0, 1, mem["dur"].to_numpy())
        ts = np.concatenate([mem["ts"].to_numpy(), mem["ts"].to_numpy() + dur])
        s = pd.DataFrame({"ts": ts, "name": np.concatenate([names, names]), "bw": np.concatenate([bw, -bw])})
        s = s.iloc[np.argsort(s["ts"].to_numpy(), kind="quicksort")]
        for name, g in s.groupby("name"):
            level = g["bw"].cumsum().to_numpy()
            parts.append(pd.DataFrame({"rank": rank, "ts": g["ts"].to_numpy(), "name": name,
                                       "memory_bw_gbps": np.where(level < 0, 0.0, level)}))  # fmt: skip
    cols = ["rank", "ts", "name", "memory_bw_gbps"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def memory_bw_summary(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """HTA's ``get_memory_bw_summary``: ``describe()`` of the non-zero bandwidth levels per rank and kind."""
    s = memory_bw_series(frames)
    s = s[s["memory_bw_gbps"] > 0]
    return s.groupby(["rank", "name"])["memory_bw_gbps"].describe()
