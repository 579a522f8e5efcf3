"""The tables a dashboard shows first, gathered in one pass: summary, kernels, ops, idle time, overlap.

Pure: :func:`overview` only calls other analyses and sums their outputs, so
views can draw an :class:`Overview` without computing anything themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace import Trace
from .hta_compat import comm_comp_overlap, hta_frames
from .hta_counters import idle_time_breakdown
from .kernels import gpu_time_per_op, kernel_stats
from .summary import TraceSummary, summarize

IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")


@dataclass
class Overview:
    """Headline tables of one trace.

    Attributes
    ----------
    summary : TraceSummary
        :func:`aonkit.analysis.summary.summarize` of the trace.
    kernels : pandas.DataFrame
        :func:`aonkit.analysis.kernels.kernel_stats` per name (every GPU event, ns).
    classes : pandas.DataFrame
        The same per kernel class (``computation``, ``communication``, ``memory``).
    ops : pandas.DataFrame
        :func:`aonkit.analysis.kernels.gpu_time_per_op` at ``level``.
    idle : pandas.DataFrame
        ``idle_category`` (host_wait, kernel_wait, other; always all three),
        ``idle_ns`` summed over GPU streams and ``share`` of that sum (NaN
        when there is no idle time), from HTA's idle-time breakdown over the
        whole trace (no last-step filter).
    comm_overlap_pct : float
        % of communication-kernel time overlapped by computation kernels (HTA's
        ``get_comm_comp_overlap``, NCCL kernels only); NaN without communication.
    """

    summary: TraceSummary
    kernels: pd.DataFrame
    classes: pd.DataFrame
    ops: pd.DataFrame
    idle: pd.DataFrame
    comm_overlap_pct: float

    @property
    def gpu_busy_fraction(self) -> float:
        """Kernel busy time over the trace span (NaN for an empty span)."""
        s = self.summary
        return s.gpu_busy_ns / s.span_ns if s.span_ns > 0 else math.nan


def idle_totals(breakdown: pd.DataFrame) -> pd.DataFrame:
    """Sum an :func:`~aonkit.analysis.hta_counters.idle_time_breakdown` (µs) per category, in ns."""
    per = breakdown.groupby("idle_category")["idle_time"].sum() if len(breakdown) else pd.Series(dtype=float)
    ns = per.reindex(list(IDLE_CATEGORIES)).fillna(0.0).to_numpy(np.float64) * 1000.0
    total = ns.sum()
    share = ns / total if total > 0 else np.full(len(ns), np.nan)
    ns_int = np.rint(ns).astype(np.int64)
    return pd.DataFrame({"idle_category": list(IDLE_CATEGORIES), "idle_ns": ns_int, "share": share})


def overview(trace: Trace, level: str = "top_op", consecutive_kernel_delay: int = 30) -> Overview:
    """Gather the :class:`Overview` of ``trace``.

    Parameters
    ----------
    trace : Trace
        One rank's trace.
    level : {"top_op", "op"}
        Op level of :func:`~aonkit.analysis.kernels.gpu_time_per_op`.
    consecutive_kernel_delay : int
        µs below which a gap between kernels counts as ``kernel_wait`` (HTA's default 30).

    Returns
    -------
    Overview
    """
    frames = hta_frames(trace, include_last_step=True)
    breakdown, _ = idle_time_breakdown(frames, consecutive_kernel_delay)
    overlap = comm_comp_overlap(frames)
    pct = float(overlap["comp_comm_overlap_pctg"].iloc[0]) if len(overlap) else math.nan
    return Overview(
        summary=summarize(trace),
        kernels=kernel_stats(trace),
        classes=kernel_stats(trace, by="class"),
        ops=gpu_time_per_op(trace, level=level),
        idle=idle_totals(breakdown),
        comm_overlap_pct=pct,
    )
