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
from .idle import IDLE_CATEGORIES, idle_summary
from .kernels import gpu_time_per_op, kernel_stats
from .summary import TraceSummary, summarize


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
        ``idle_ns`` summed over devices and ``share`` of that sum (NaN when
        there is no idle time): exact ns, from
        :func:`aonkit.analysis.idle.idle_summary` (a device idles when no
        kernel, memcpy or memset runs on any of its streams).
    gpu : pandas.DataFrame
        :func:`aonkit.analysis.idle.idle_summary` per device: ``span_ns``
        (first to last GPU event), ``busy_ns``, ``idle_ns`` and its causes.
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
    gpu: pd.DataFrame

    @property
    def gpu_span_ns(self) -> int:
        """First to last GPU event (kernels, memcpy, memset), summed over devices."""
        return int(self.gpu["span_ns"].sum())

    @property
    def gpu_busy_ns(self) -> int:
        """Time some GPU event ran, summed over devices (each device's union over its streams)."""
        return int(self.gpu["busy_ns"].sum())

    @property
    def gpu_busy_fraction(self) -> float:
        """Busy time over the GPU span (NaN without GPU events); ``busy + idle == span`` exactly."""
        span = self.gpu_span_ns
        return self.gpu_busy_ns / span if span > 0 else math.nan


def idle_totals(per_device: pd.DataFrame) -> pd.DataFrame:
    """Sum an :func:`~aonkit.analysis.idle.idle_summary` over its lanes per category (exact ns)."""
    ns = np.array([int(per_device[f"{c}_ns"].sum()) for c in IDLE_CATEGORIES], dtype=np.int64)
    total = ns.sum()
    share = ns / total if total > 0 else np.full(len(ns), np.nan)
    return pd.DataFrame({"idle_category": list(IDLE_CATEGORIES), "idle_ns": ns, "share": share})


def overview(trace: Trace, level: str = "top_op", consecutive_kernel_delay: int = 30) -> Overview:
    """Gather the :class:`Overview` of ``trace``.

    Parameters
    ----------
    trace : Trace
        One rank's trace.
    level : {"top_op", "op"}
        Op level of :func:`~aonkit.analysis.kernels.gpu_time_per_op`.
    consecutive_kernel_delay : int
        µs below which a gap with its work already launched counts as ``kernel_wait`` (HTA's default 30).

    Returns
    -------
    Overview
    """
    frames = hta_frames(trace, include_last_step=True)
    gpu = idle_summary(trace, "device", consecutive_kernel_delay * 1000)
    overlap = comm_comp_overlap(frames)
    pct = float(overlap["comp_comm_overlap_pctg"].iloc[0]) if len(overlap) else math.nan
    return Overview(
        summary=summarize(trace),
        kernels=kernel_stats(trace),
        classes=kernel_stats(trace, by="class"),
        ops=gpu_time_per_op(trace, level=level),
        idle=idle_totals(gpu),
        comm_overlap_pct=pct,
        gpu=gpu,
    )
