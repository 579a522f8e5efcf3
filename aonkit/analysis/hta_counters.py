"""HTA 0.5.0-compatible counters: idle-time breakdown, launch statistics, queue lengths, memory bandwidth.

All functions take the per-rank frames of :func:`aonkit.analysis.hta_compat.hta_frames`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .hta_compat import gpu_rows


def _runtime_ts(df: pd.DataFrame, gpu: pd.DataFrame) -> np.ndarray:
    """Start of the CPU-side event with each GPU row's correlation (NaN when none)."""
    cpu = df[(df["stream"] == -1) & (df["correlation"] != -1)].drop_duplicates("correlation")
    lookup = pd.Series(cpu["ts"].to_numpy(float), index=cpu["correlation"].to_numpy())
    return lookup.reindex(gpu["correlation"].to_numpy()).to_numpy()


def _idle_per_stream(df: pd.DataFrame, delay: int) -> pd.DataFrame:
    gpu = gpu_rows(df)
    gpu = gpu.assign(ts_runtime=_runtime_ts(df, gpu))
    parts = []
    for stream in pd.unique(gpu["stream"]):
        k = gpu[gpu["stream"] == stream].sort_values("ts", kind="stable")
        prev_end = k["end"].shift(1)
        idle = k["ts"] - prev_end
        host = k["ts_runtime"] > prev_end
        cat = np.where(host, "host_wait", np.where(~host & (idle < delay), "kernel_wait", "other"))
        parts.append(pd.DataFrame({"stream": stream, "idle_category": cat, "idle_interval": idle.to_numpy()}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["stream", "idle_category",
                                                                                  "idle_interval"])  # fmt: skip


def idle_time_breakdown(
    frames: Mapping[int, pd.DataFrame], consecutive_kernel_delay: int = 30
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """HTA's ``get_idle_time_breakdown`` per rank and stream, with the interval statistics.

    Each gap between consecutive GPU events of a stream is ``host_wait`` when
    the next event's launch call started after the previous event ended,
    ``kernel_wait`` when it is shorter than ``consecutive_kernel_delay`` µs, else
    ``other`` (the first event of a stream has no gap and counts as ``other``).
    """
    out, stats = [], []
    for rank, df in frames.items():
        gaps = _idle_per_stream(df, consecutive_kernel_delay)
        for stream, g in gaps.groupby("stream", sort=False):
            by = g.groupby("idle_category")["idle_interval"]
            total = by.sum()
            res = pd.DataFrame({"rank": rank, "stream": stream, "idle_category": total.index,
                                "idle_time": total.to_numpy(float)})  # fmt: skip
            res["idle_time_ratio"] = (res["idle_time"] / res["idle_time"].sum()).round(2)
            out.append(res)
            d = by.describe().round(2)
            d.insert(0, "stream", stream)
            d.insert(0, "rank", rank)
            stats.append(d.reset_index())
    cols = ["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]
    return (pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols),
            pd.concat(stats, ignore_index=True) if stats else pd.DataFrame())  # fmt: skip


LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync")


def cuda_kernel_launch_stats(frames: Mapping[int, pd.DataFrame], apis: tuple[str, ...] = LAUNCH_APIS) -> pd.DataFrame:
    """HTA's ``get_cuda_kernel_launch_stats``: per launch, CPU and GPU duration and launch delay (µs).

    ``launch_delay`` is the gap from the end of the launch call to the start of
    the GPU event, floored at 0. Like HTA 0.5.0, only ``apis`` count by default
    (so HIP launches give no rows); pass more names for other runtimes.
    """
    parts = []
    for rank, df in frames.items():
        cpu = df[df["stream"] == -1]
        gpu = gpu_rows(df)
        corr = cpu.loc[cpu["name"].isin(apis), "correlation"]
        c = cpu[cpu["correlation"].isin(corr)][["correlation", "dur", "ts"]]
        g = gpu[gpu["correlation"].isin(corr)][["correlation", "dur", "ts"]]
        j = c.merge(g, on="correlation", how="inner", suffixes=("_cpu", "_gpu"))
        delay = np.maximum(j["ts_gpu"] - (j["ts_cpu"] + j["dur_cpu"]), 0)
        parts.append(pd.DataFrame({"rank": rank, "correlation": j["correlation"], "cpu_duration": j["dur_cpu"],
                                   "gpu_duration": j["dur_gpu"], "launch_delay": delay}))  # fmt: skip
    cols = ["rank", "correlation", "cpu_duration", "gpu_duration", "launch_delay"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


# launch calls that HTA 0.5.0 counts in queue lengths (not cudaGraphLaunch, not hipExtLaunchKernel)
QUEUE_APIS = (
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
    "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyWithStream", "hipMemcpyAsync", "hipMemsetAsync",
)  # fmt: skip


def queue_length_series(frames: Mapping[int, pd.DataFrame], apis: tuple[str, ...] = QUEUE_APIS) -> pd.DataFrame:
    """Outstanding GPU operations per stream: +1 at each launch call, -1 at each GPU event start.

    Launch calls are the CPU-side events named in ``apis`` whose correlation
    matches a GPU event; GPU events count when their launch does.

    One row per change: ``rank``, ``ts`` (µs), ``stream``, ``queue_length``.
    Launches and GPU events are ordered by time as HTA orders them (numpy's
    default sort, so ties fall the same way).
    """
    parts = []
    for rank, df in frames.items():
        gpu = gpu_rows(df)
        launches = df[(df["stream"] == -1) & df["name"].isin(apis)]
        launches = launches[launches["correlation"].isin(gpu["correlation"])]
        stream_of = gpu.drop_duplicates("correlation").set_index("correlation")["stream"]
        g = gpu[gpu["correlation"].isin(launches["correlation"])]
        ts = np.concatenate([launches["ts"].to_numpy(), g["ts"].to_numpy()])
        stream = np.concatenate([stream_of.reindex(launches["correlation"]).to_numpy(), g["stream"].to_numpy()])
        step = np.concatenate([np.ones(len(launches), np.int64), -np.ones(len(g), np.int64)])
        order = np.argsort(ts, kind="quicksort")
        s = pd.DataFrame({"ts": ts[order], "stream": stream[order], "step": step[order]})
        for st, sdf in s.groupby("stream"):
            parts.append(pd.DataFrame({"rank": rank, "ts": sdf["ts"].to_numpy(), "stream": st,
                                       "queue_length": sdf["step"].cumsum().to_numpy()}))  # fmt: skip
    return (
        pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["rank", "ts", "stream", "queue_length"])
    )


def queue_length_summary(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """HTA's ``get_queue_length_summary``: ``describe()`` of the queue length per rank and stream."""
    series = queue_length_series(frames)
    return series.groupby(["rank", "stream"])["queue_length"].describe()


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


def time_blocked_on_full_queue(frames: Mapping[int, pd.DataFrame], max_queue_length: int = 1024) -> pd.DataFrame:
    """HTA's ``get_time_spent_blocked_on_full_queue``: time each stream's launch queue was full (µs, share)."""
    series = queue_length_series(frames)
    rows = []
    for (rank, stream), s in series.groupby(["rank", "stream"]):
        dur = s["ts"].shift(-1) - s["ts"]
        full = dur[s["queue_length"] >= max_queue_length].sum()
        if full > 0:
            df = frames[rank]
            span = df["end"].max() - df["ts"].min()
            rows.append((rank, stream, full, full / span if span else 0.0))
    return pd.DataFrame(rows, columns=["rank", "stream", "duration_at_max_queue_length",
                                       "relative_duration_at_max_queue_length"])  # fmt: skip
