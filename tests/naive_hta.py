"""Slow, obvious pandas references for the HTA-semantics counters (aonkit's first, pandas-only versions).

The Numba-backed functions in :mod:`aonkit.analysis.hta_counters` must give
frames equal to these, bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from aonkit.analysis.hta_compat import IDLE_KERNEL_CATS, gpu_rows


def hta_index_correlation(df: pd.DataFrame) -> pd.Series:
    """HTA's ``transform_correlation_to_index`` for GPU rows, transcribed: the merge, ``.loc`` writes (last wins)."""
    index = df["index"] if "index" in df else pd.Series(np.arange(len(df)), index=df.index)
    d = pd.DataFrame({"index": index.to_numpy(), "correlation": df["correlation"].to_numpy(),
                      "stream": df["stream"].to_numpy(), "name": df["name"].astype(object).to_numpy()})  # fmt: skip
    d["index_correlation"] = np.minimum(d["correlation"], 0)
    corr = d[d["correlation"] != -1]
    gpu_side = ((corr["stream"] >= 0) & (corr["correlation"] >= 0)) | corr["name"].isin(["Event Sync", "Context Sync"])
    merged = corr[~gpu_side].merge(corr[gpu_side], on="correlation", how="inner")
    pos = pd.Series(np.arange(len(d)), index=d["index"].to_numpy())
    d.loc[pos[merged["index_y"]].to_numpy(), "index_correlation"] = merged["index_x"].to_numpy()
    # label 0 is the file's first event (index 0), as in HTA
    return d["index_correlation"].where(gpu_side.reindex(d.index, fill_value=False), -1)


def _runtime_ts(df: pd.DataFrame, gpu: pd.DataFrame) -> np.ndarray:
    launch = df["index_correlation"] if "index_correlation" in df else hta_index_correlation(df)
    index = df["index"] if "index" in df else pd.Series(np.arange(len(df)), index=df.index)
    lookup = pd.Series(df["ts"].to_numpy(float), index=index.to_numpy())
    lookup = lookup[~lookup.index.duplicated()]
    return lookup.reindex(launch.loc[gpu.index].to_numpy()).to_numpy()


def _idle_per_stream(df: pd.DataFrame, delay: int) -> pd.DataFrame:
    gpu = gpu_rows(df)
    if "cat" in df:
        gpu = gpu[gpu["cat"].isin(IDLE_KERNEL_CATS)]
    gpu = gpu.assign(ts_runtime=_runtime_ts(df, gpu))
    parts = []
    for stream in pd.unique(gpu["stream"]):
        k = gpu[gpu["stream"] == stream].sort_values("ts", kind="stable")
        prev_end = k["end"].shift(1)
        idle = k["ts"] - prev_end
        host = k["ts_runtime"] > prev_end
        cat = np.where(host, "host_wait", np.where(~host & (idle < delay), "kernel_wait", "other"))
        parts.append(pd.DataFrame({"stream": stream, "idle_category": cat, "idle_interval": idle.to_numpy()}))
    if not parts:
        return pd.DataFrame(columns=["stream", "idle_category", "idle_interval"])
    return pd.concat(parts, ignore_index=True)


def idle_time_breakdown(
    frames: Mapping[int, pd.DataFrame], consecutive_kernel_delay: int = 30
) -> tuple[pd.DataFrame, pd.DataFrame]:
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


def cuda_kernel_launch_stats(frames: Mapping[int, pd.DataFrame], apis: tuple[str, ...]) -> pd.DataFrame:
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


def queue_length_series(frames: Mapping[int, pd.DataFrame], apis: tuple[str, ...]) -> pd.DataFrame:
    parts = []
    for rank, df in frames.items():
        gpu = gpu_rows(df)
        launches = df[(df["stream"] == -1) & df["name"].isin(apis)]
        # HTA joins each launch with every GPU row of its correlation (a left join; no GPU row: no stream, dropped)
        launches = launches[["ts", "correlation"]].join(gpu.set_index("correlation")[["stream"]], on="correlation")
        launches = launches.dropna(subset=["stream"])
        g = gpu[gpu["correlation"].isin(launches["correlation"])]
        ts = np.concatenate([launches["ts"].to_numpy(), g["ts"].to_numpy()])
        stream = np.concatenate([launches["stream"].to_numpy(np.int64), g["stream"].to_numpy()])
        step = np.concatenate([np.ones(len(launches), np.int64), -np.ones(len(g), np.int64)])
        order = np.argsort(ts, kind="stable")  # HTA's sort, made stable: launches first at a tie (aonkit's rule)
        s = pd.DataFrame({"ts": ts[order], "stream": stream[order], "step": step[order]})
        for st, sdf in s.groupby("stream"):
            parts.append(pd.DataFrame({"rank": rank, "ts": sdf["ts"].to_numpy(), "stream": st,
                                       "queue_length": sdf["step"].cumsum().to_numpy()}))  # fmt: skip
    if not parts:
        return pd.DataFrame(columns=["rank", "ts", "stream", "queue_length"])
    return pd.concat(parts, ignore_index=True)


def queue_length_summary(frames: Mapping[int, pd.DataFrame], apis: tuple[str, ...]) -> pd.DataFrame:
    return queue_length_series(frames, apis).groupby(["rank", "stream"])["queue_length"].describe()
