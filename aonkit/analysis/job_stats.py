"""Kernel statistics over a whole job, merged from each rank's own (so no rank's events leave its worker)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial

import numpy as np
import pandas as pd

from ..trace import Trace
from ..traceset import each_rank
from .kernels import COMM_PATTERN, kernel_stats

_COLUMNS = ["count", "total_ns", "min_ns", "max_ns", "mean_ns", "std_ns"]


def job_kernel_stats(job: Mapping[int, Trace], by: str = "name",
                     comm_pattern: re.Pattern[str] = COMM_PATTERN) -> pd.DataFrame:  # fmt: skip
    """:func:`~aonkit.analysis.kernels.kernel_stats` over every rank of a job, and how the ranks differ.

    Each rank's table is computed where the rank is (in a worker process for a
    :class:`~aonkit.LazyTraceSet`), then merged: counts, totals, minima and
    maxima add up exactly; the mean is the total over the count and the sample
    standard deviation is pooled from the ranks' (Chan's formula), equal to
    that of all the events together up to rounding.

    Parameters
    ----------
    job : TraceSet or mapping of int to Trace
        The ranks.
    by : {"name", "class"}
        As :func:`~aonkit.analysis.kernels.kernel_stats`.
    comm_pattern : re.Pattern
        As :func:`~aonkit.analysis.kernels.kernel_stats`.

    Returns
    -------
    pandas.DataFrame
        The columns of ``kernel_stats`` over the job (``share`` of the job's GPU
        event time), then ``ranks`` (ranks that ran it), ``rank_min_ns`` /
        ``rank_max_ns`` (the least and most total time on one rank; 0 for a
        rank without it) and ``max_rank`` (the rank with the most). Rows by
        total, descending (ties: by key).
    """
    per = each_rank(job, rank_kernel_stats(by, comm_pattern))
    return merge_kernel_stats(per, by)


def rank_kernel_stats(by: str = "name",
                      comm_pattern: re.Pattern[str] = COMM_PATTERN) -> Callable[[Trace], pd.DataFrame]:  # fmt: skip
    """The per-rank function :func:`job_kernel_stats` maps: a partial of ``kernel_stats`` (same arguments, same key)."""
    return partial(kernel_stats, by=by, comm_pattern=comm_pattern)


def merge_kernel_stats(per: Mapping[int, pd.DataFrame], by: str = "name") -> pd.DataFrame:
    """:func:`job_kernel_stats` from per-rank ``kernel_stats`` tables (computed anywhere)."""
    key = ["name", "class"] if by == "name" else ["class"]
    parts = [df.assign(rank=r) for r, df in per.items() if len(df)]
    if not parts:
        cols = key + _COLUMNS + ["share", "ranks", "rank_min_ns", "rank_max_ns", "max_rank"]
        return pd.DataFrame({c: pd.Series(dtype=object if c in key else np.float64) for c in cols})
    allr = pd.concat(parts, ignore_index=True)
    n = allr["count"].to_numpy(np.float64)
    m2 = allr["std_ns"].to_numpy(np.float64) ** 2 * np.maximum(n - 1, 0)
    g = allr.groupby(key, sort=True)
    gid = g.ngroup().to_numpy()
    out = g.agg(count=("count", "sum"), total_ns=("total_ns", "sum"), min_ns=("min_ns", "min"),
                max_ns=("max_ns", "max"), ranks=("rank", "nunique"), rank_max_ns=("total_ns", "max")).reset_index()
    cnt = out["count"].to_numpy(np.float64)
    mean = out["total_ns"].to_numpy(np.float64) / cnt
    out["mean_ns"] = mean
    # Chan et al.: M2 of all = sum of the ranks' M2 + sum of n_i (mean_i - mean)^2
    spread = n * (allr["mean_ns"].to_numpy(np.float64) - mean[gid]) ** 2
    m2_all = np.bincount(gid, weights=m2 + spread, minlength=len(out))
    with np.errstate(invalid="ignore", divide="ignore"):
        out["std_ns"] = np.where(cnt > 1, np.sqrt(m2_all / (cnt - 1)), 0.0)
    n_ranks = len(per)
    low = g["total_ns"].min().to_numpy()
    out["rank_min_ns"] = np.where(out["ranks"].to_numpy() < n_ranks, 0, low)
    out["max_rank"] = allr.loc[g["total_ns"].idxmax().to_numpy(), "rank"].to_numpy()
    grand = float(out["total_ns"].sum())
    out["share"] = out["total_ns"] / grand if grand else 0.0
    cols = key + _COLUMNS + ["share", "ranks", "rank_min_ns", "rank_max_ns", "max_rank"]
    return out.sort_values("total_ns", ascending=False, kind="stable", ignore_index=True)[cols]
