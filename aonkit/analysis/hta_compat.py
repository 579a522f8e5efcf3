"""Holistic Trace Analysis (HTA 0.5.0) semantics, for reports that match HTA's numbers: the breakdowns.

The frames these tables are computed from are prepared as HTA prepares them
(:func:`aonkit.analysis.hta_prepare.hta_frames`, re-exported here with the
kernel types and the merge); the idle, launch, queue and memory tables are in
:mod:`aonkit.analysis.hta_counters` and :mod:`aonkit.analysis.hta_queues`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .columns import name_codes
from .correlation import step_table
from .hta_prepare import (  # noqa: F401 - re-exported: hta_compat is where callers find HTA's semantics
    COMMUNICATION,
    COMPUTATION,
    IDLE_KERNEL_CATS,
    MEMORY,
    OTHER,
    TYPE_CODE,
    gpu_rows,
    hta_frames,
    hta_merge,
    index_correlation,
    kernel_type,
    union_us,
)


def temporal_breakdown(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """HTA's ``get_temporal_breakdown``: idle, compute and other GPU time per rank (µs, %).

    HTA's arithmetic, negative sub-µs intervals included; where that breaks
    HTA's own checks (HTA raises: idle or compute above the total, or negative
    non-compute time) such intervals count as empty instead.
    """
    rows = []
    for rank, df in frames.items():
        gpu = gpu_rows(df)
        if gpu.empty:
            continue
        comp = gpu[gpu["kernel_type"] == COMPUTATION]
        starts, ends = hta_merge(gpu["ts"].to_numpy(), gpu["end"].to_numpy())
        kernel_time = int(ends[-1] - starts[0])
        for clamp in (False, True):
            idle = kernel_time - (union_us(gpu, clamp) if clamp else int((ends - starts).sum()))
            compute = union_us(comp, clamp)
            if idle <= kernel_time and compute <= kernel_time and kernel_time - compute - idle >= 0:
                break
        rows.append((rank, idle, compute, kernel_time - compute - idle, kernel_time))
    out = pd.DataFrame(rows, columns=["rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)",
                                      "kernel_time(us)"])  # fmt: skip
    for col in ("idle_time", "compute_time", "non_compute_time"):
        out[f"{col}_pctg"] = (out[f"{col}(us)"] / out["kernel_time(us)"] * 100).round(2)
    return out


_TYPE_BITS = {t: 1 << code for t, code in TYPE_CODE.items()}  # HTA labels overlaps in this order


def _label(state: int, types: list[str]) -> str:
    return " overlapping ".join(t for t in types if state & _TYPE_BITS[t])


def kernel_type_time(gpu: pd.DataFrame, types: list[str]) -> pd.DataFrame:
    """Time during which each combination of kernel types runs (HTA's overlap labels).

    Each type's intervals are merged, then a sweep over their edges (starts
    before ends at equal times, so abutting types give zero-length overlap
    rows as in HTA) sums the time per set of running types.
    """
    times, steps = [], []
    for t in types:
        sel = gpu[gpu["kernel_type"] == t]
        s, e = hta_merge(sel["ts"].to_numpy(), sel["end"].to_numpy())
        times += [s, e]
        steps += [np.full(s.shape[0], _TYPE_BITS[t]), np.full(e.shape[0], -_TYPE_BITS[t])]
    if not times:
        return pd.DataFrame({"kernel_type": [], "sum": []})
    time = np.concatenate(times)
    step = np.concatenate(steps)
    order = np.lexsort((step < 0, time))
    time, step = time[order], step[order]
    running = np.cumsum(step)
    dur = np.diff(time, append=time[-1] if time.shape[0] else 0)
    live = running > 0
    out = pd.DataFrame({"state": running[live], "sum": dur[live]}).groupby("state", as_index=False)["sum"].sum()
    out["kernel_type"] = [_label(int(s), types) for s in out["state"]]
    return out[["kernel_type", "sum"]]


def gpu_kernel_breakdown_type(frames: Mapping[int, pd.DataFrame], include_memory_kernels: bool = True) -> pd.DataFrame:
    """HTA's kernel-type breakdown: time per type and type overlap, summed over ranks."""
    types = [COMPUTATION, COMMUNICATION] + ([MEMORY] if include_memory_kernels else [])
    parts = [kernel_type_time(gpu_rows(df), types) for df in frames.values()]
    out = pd.concat(parts).groupby("kernel_type", as_index=False)["sum"].sum()
    out = out.sort_values("sum", ascending=False, kind="stable", ignore_index=True)
    out["percentage"] = (out["sum"] / out["sum"].sum() * 100).round(1)
    return out


def _kernel_stats(gpu: pd.DataFrame, duration_ratio: float, num_kernels: int) -> pd.DataFrame:
    g = gpu.groupby("name", observed=True)["dur"].agg(["sum", "max", "min", "mean", "std"]).reset_index()
    g["name"] = g["name"].astype(str)
    g = g.sort_values("sum", ascending=False, kind="stable", ignore_index=True)
    g["std"] = g["std"].fillna(0.0)
    if len(g) > num_kernels:
        cum = g["sum"].cumsum()
        q = cum.quantile(duration_ratio)
        g.loc[cum > q, "name"] = "others"
        g.loc[g.index >= num_kernels, "name"] = "others"
        g = g.groupby("name")["sum"].agg(["sum", "max", "min", "mean", "std"]).reset_index()
        g["std"] = g["std"].fillna(0.0)
    return g


def gpu_kernel_breakdown_kernels(
    frames: Mapping[int, pd.DataFrame],
    duration_ratio: float = 0.8,
    num_kernels: int = 10,
    include_memory_kernels: bool = True,
) -> pd.DataFrame:
    """HTA's per-kernel breakdown per rank and type; the tail beyond ``duration_ratio`` is ``others``.

    As in HTA, once kernels are lumped the statistics of every row are taken
    over the per-name sums, not over single launches.
    """
    types = [COMPUTATION, COMMUNICATION] + ([MEMORY] if include_memory_kernels else [])
    parts = []
    for rank, df in frames.items():
        gpu = gpu_rows(df)
        for t in types:
            g = _kernel_stats(gpu[gpu["kernel_type"] == t], duration_ratio, num_kernels)
            g["kernel_type"] = t
            g["rank"] = int(rank)
            parts.append(g)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    out = out.sort_values(["kernel_type", "name", "rank"], kind="stable", ignore_index=True)
    out = out.rename(columns={"sum": "sum (us)", "max": "max (us)", "min": "min (us)", "std": "stddev",
                              "mean": "mean (us)"})  # fmt: skip
    return out[["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "kernel_type", "rank"]]


def comm_comp_overlap(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """HTA's ``get_comm_comp_overlap``: % of communication time that overlaps computation, per rank."""
    from .._kernels.intervals import intersection_length

    rows = []
    for rank, df in frames.items():
        gpu = gpu_rows(df)
        comm = gpu[gpu["kernel_type"] == COMMUNICATION]
        comp = gpu[gpu["kernel_type"] == COMPUTATION]
        mc = hta_merge(comm["ts"].to_numpy(), comm["end"].to_numpy())
        mp = hta_merge(comp["ts"].to_numpy(), comp["end"].to_numpy())
        comm_time = int((mc[1] - mc[0]).sum())
        both = int(intersection_length(*(np.ascontiguousarray(x, dtype=np.int64) for x in (*mc, *mp))))
        with np.errstate(divide="ignore", invalid="ignore"):  # as HTA divides: x/0 is inf, 0/0 NaN
            pct = round(float(100 * np.float64(both) / np.float64(comm_time)), 2)
        rows.append((rank, pct))
    return pd.DataFrame(rows, columns=["rank", "comp_comm_overlap_pctg"])


def gpu_user_annotation_breakdown(
    frames: Mapping[int, pd.DataFrame], duration_ratio: float = 0.8, num_kernels: int = 10
) -> pd.DataFrame:
    """HTA's ``get_gpu_user_annotation_breakdown``: duration statistics per GPU annotation name and rank."""
    parts = []
    for rank, df in frames.items():
        ann = df[df["cat"] == "gpu_user_annotation"]
        if ann.empty:
            continue
        g = _kernel_stats(ann, duration_ratio, num_kernels)
        g["rank"] = int(rank)
        parts.append(g)
    cols = ["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "rank"]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True).sort_values(["name", "rank"], kind="stable", ignore_index=True)
    out = out.rename(columns={"sum": "sum (us)", "max": "max (us)", "min": "min (us)", "std": "stddev",
                              "mean": "mean (us)"})  # fmt: skip
    return out[cols]


def profiler_step_numbers(frames: Mapping[int, pd.DataFrame]) -> list[int]:
    """Step numbers N of the ``ProfilerStep#N`` annotations left after the last-step filter (CPU-side rows)."""
    from .._kernels.inputs import frozen
    from .._kernels.keys import codes_seen

    steps: set[int] = set()
    for df in frames.values():
        codes, names = name_codes(df["name"])
        nums = step_table(names)  # N per name code
        wanted = np.r_[False, nums >= 0]  # per code + 1
        # read-only views either way: one specialization whether pandas handed out writable arrays or not
        seen = codes_seen(frozen(codes, np.int32), wanted, frozen(df["stream"].to_numpy(), np.int64))
        steps.update(nums[seen[1:]].tolist())
    return sorted(steps)
