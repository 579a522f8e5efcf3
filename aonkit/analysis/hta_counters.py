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

from .columns import name_flags, rank_columns
from .hta_compat import IDLE_KERNEL_CATS, gpu_rows, index_correlation
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

    GPU events are the rows with a stream and one of HTA's kernel categories
    (:data:`~aonkit.analysis.hta_compat.IDLE_KERNEL_CATS`: kernels, memcpy,
    memset; not ``cuda_sync`` or GPU annotations). Each gap between
    consecutive GPU events of a stream (ordered by start, stably) is
    ``host_wait`` when the next event's launch call (the frame's
    ``index_correlation`` row, as HTA links it) started after the
    previous event ended, ``kernel_wait`` when it is shorter than
    ``consecutive_kernel_delay`` µs, else ``other``; the first event of a
    stream has no gap and counts as ``other``. A frame without ``cat``
    counts every row with a stream; one without ``index_correlation`` gets it
    from its own rows (:func:`~aonkit.analysis.hta_compat.index_correlation`).

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
    from .._kernels.gpu_streams import OTHER, idle_gaps
    from .describe_stats import describe
    from .lane_gaps import numpy_idle_gaps
    from .standin import kernel_or_standin

    ranks, streams, cats, times, ratios, stats = [], [], [], [], [], []
    for rank, df in frames.items():
        stream, ts, end, start, found = _idle_inputs(df)
        pos, offsets, s_vals = _streams_in_time_order(stream, ts)
        gaps, count, total = kernel_or_standin(idle_gaps, numpy_idle_gaps, pos, offsets, ts, end, start, found,
                                               float(consecutive_kernel_delay))  # fmt: skip
        s_idx, c_idx = np.nonzero(count)
        run_start = offsets[:-1, None] + np.cumsum(count, axis=1) - count
        desc = np.empty((len(s_idx), 8))
        for j, (s, c) in enumerate(zip(s_idx.tolist(), c_idx.tolist())):
            a = run_start[s, c]
            desc[j] = describe(gaps[a : a + count[s, c]], c == OTHER)
        t = total[s_idx, c_idx].astype(np.float64)
        per_stream = np.zeros(len(s_vals))
        np.add.at(per_stream, s_idx, t)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios.append(np.round(t / per_stream[s_idx], 2))
        ranks.append(np.full(len(s_idx), rank, dtype=np.int64))
        streams.append(s_vals[s_idx])
        cats.append(c_idx)
        times.append(t)
        stats.append(np.round(desc, 2))
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


def _streams_in_time_order(stream: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows grouped by stream, streams in order of first appearance, each in ``ts`` order (stably).

    Returns (positions, offsets (streams + 1), stream values).
    """
    from .group_order import group_time_order

    pos, offsets, keys = group_time_order(stream, ts)
    if len(keys) < 2:
        return pos, offsets, keys
    order = np.argsort(np.minimum.reduceat(pos, offsets[:-1]))  # first rows differ: one order on any CPU
    if (order == np.arange(len(order))).all():
        return pos, offsets, keys
    sizes = np.diff(offsets)[order]
    new_offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return np.concatenate([pos[offsets[g] : offsets[g + 1]] for g in order]), new_offsets, keys[order]


def _linked_index(df: pd.DataFrame, index: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """The frame's ``index_correlation`` column, or HTA's linking of its own rows when it has none."""
    if "index_correlation" in df:
        return rank_columns(df, "index_correlation")[0]
    names = df["name"].array if isinstance(df["name"].array, pd.Categorical) else pd.Categorical(df["name"])
    return index_correlation(index, stream, rank_columns(df, "correlation")[0], names)


def _idle_inputs(df: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """HTA's idle-time GPU rows of one rank's frame: stream, ts, end, launch start and whether it was found."""
    from .key_match import first_match

    index, stream, ts, end = rank_columns(df, "index", "stream", "ts", "end") if "index" in df else (
        np.arange(len(df), dtype=np.int64), *rank_columns(df, "stream", "ts", "end"))  # fmt: skip
    launch = _linked_index(df, index, stream)
    is_gpu = stream != -1
    if "cat" in df:
        codes, flags = name_flags(df["cat"], IDLE_KERNEL_CATS)
        is_gpu &= flags[codes]
    rows = np.flatnonzero(is_gpu)
    # HTA joins the launch row by its label in the (filtered) frame: a row the filter dropped gives NaN
    start, found = first_match(index, ts, launch[rows])
    found &= launch[rows] >= 0
    return (np.ascontiguousarray(stream[rows]), np.ascontiguousarray(ts[rows]), np.ascontiguousarray(end[rows]),
            start, found)  # fmt: skip


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
    from .key_match import numpy_launch_table
    from .standin import kernel_or_standin

    cols = ["rank", "correlation", "cpu_duration", "gpu_duration", "launch_delay"]
    parts = []
    for rank, df in frames.items():
        stream, ts, dur, corr = rank_columns(df, "stream", "ts", "dur", "correlation")
        parts.append(kernel_or_standin(launch_table, numpy_launch_table, int(rank), stream, ts, dur, corr,
                                       *name_flags(df["name"], apis)))  # fmt: skip
    if not parts:
        return pd.DataFrame(columns=cols)
    table = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    return pd.DataFrame(table.T, columns=cols, copy=False)


def memory_kernel_type(name: str) -> str:
    """HTA's memory-operation label: ``Memcpy DtoH``, ``Memset``...; the part before `` (``."""
    return name.split(" (")[0]


MEMORY_TIES = ("stable", "up_first", "down_first")


def memory_bw_series(frames: Mapping[int, pd.DataFrame], ties: str = "stable") -> pd.DataFrame:
    """Memory bandwidth over time per rank and copy kind (GB/s), HTA's step series.

    A copy adds its ``memory_bw_gbps`` at its start and removes it at its end
    (0-µs copies last 1 µs); float rounding below 0 is clipped to 0.

    HTA orders the steps with numpy's unstable sort, so steps of one kind at
    the same µs (a copy ending as the next starts) come in an order that
    differs between numpy builds and CPUs, and so do the levels between
    them. Here ``ties`` fixes it on every machine: ``"stable"`` keeps HTA's
    row order (every start, then every end, each in frame order);
    ``"up_first"`` and ``"down_first"`` put the larger or the smaller steps
    first, the two extremes: at every position the level of any tie order
    lies between theirs (up to float rounding).
    """
    if ties not in MEMORY_TIES:
        raise ValueError(f"ties must be one of {MEMORY_TIES}, not {ties!r}")
    parts = []
    for rank, df in frames.items():
        mem = gpu_rows(df)
        mem = mem[mem["kernel_type"] == "MEMORY"]
        bw = mem["memory_bw_gbps"].to_numpy(np.float64)
        names = mem["name"].map(memory_kernel_type).to_numpy()
        dur = np.where(mem["dur"].to_numpy() == 0, 1, mem["dur"].to_numpy())
        ts = np.concatenate([mem["ts"].to_numpy(), mem["ts"].to_numpy() + dur])
        step = np.concatenate([bw, -bw])
        if ties == "stable":
            order = np.argsort(ts, kind="stable")
        else:  # by time, then by step (NaN steps last, as numpy sorts them), then row order
            order = np.lexsort((-step if ties == "up_first" else step, ts))
        s = pd.DataFrame({"ts": ts[order], "name": np.concatenate([names, names])[order], "bw": step[order]})
        for name, g in s.groupby("name"):
            level = g["bw"].cumsum().to_numpy()
            parts.append(pd.DataFrame({"rank": rank, "ts": g["ts"].to_numpy(), "name": name,
                                       "memory_bw_gbps": np.where(level < 0, 0.0, level)}))  # fmt: skip
    cols = ["rank", "ts", "name", "memory_bw_gbps"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def memory_bw_summary(frames: Mapping[int, pd.DataFrame], ties: str = "stable") -> pd.DataFrame:
    """HTA's ``get_memory_bw_summary``: ``describe()`` of the non-zero bandwidth levels per rank and kind.

    ``ties`` as in :func:`memory_bw_series`.
    """
    s = memory_bw_series(frames, ties)
    # one describe() per rank with copies, concatenated, as HTA does: a rank whose levels are all 0 adds an empty
    # frame, and pandas' concat then flattens or unnames the (rank, name) index of the others, which HTA's CSV shows
    parts = [g[g["memory_bw_gbps"] > 0].groupby(["rank", "name"])["memory_bw_gbps"].describe()
             for _, g in s.groupby("rank", sort=False)]  # fmt: skip
    if not parts:
        return s.groupby(["rank", "name"])["memory_bw_gbps"].describe()
    return pd.concat(parts) if len(parts) > 1 else parts[0]
