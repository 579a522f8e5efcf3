"""CUPTI range-profiler counters (``cuda_profiler_range`` events) joined to the CPU ops that launched them.

Range-profiler traces carry one ``cuda_profiler_range`` event per profiled
kernel with hardware counters as args, but no correlation id. As in HTA, the
k-th range belongs to the k-th kernel launch call in time order; the op stack
is the chain of ``cpu_op`` events around that launch.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..trace import Trace
from .columns import category_flags, op_stack

KERNEL_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")


def cupti_counters(trace: Trace) -> pd.DataFrame:
    """One row per counter range, joined to the launch call and its op stack.

    Columns: ``row`` (the range event), ``name``, ``ts_ns``, ``dur_ns``, every counter,
    ``index_runtime`` (the launch call), ``op_stack`` (outermost first),
    ``top_level_op`` and ``bottom_level_op``.

    Parameters
    ----------
    trace : Trace
        A CUPTI range-profiler trace (``cuda_profiler_range`` events). Launch calls are the runtime/driver
        events named ``cudaLaunchKernel``, ``cudaLaunchKernelExC``, ``cuLaunchKernel`` or ``cuLaunchKernelEx``.

    Returns
    -------
    pandas.DataFrame
        One row per range, in ``ts_ns`` order (stable): ``row`` (row of the range in ``trace.events``),
        ``name`` (str), ``ts_ns`` and ``dur_ns`` (ns), one column per arg key of the ranges (the counters;
        NaN where a range lacks one), ``index_runtime`` (row of the k-th launch call in time order for the
        k-th range; -1 when there are fewer launch calls than ranges), ``op_stack`` (list of the names of
        the CPU ops (``cpu_op``/``Operator``) enclosing the launch call, outermost first; empty when none),
        ``top_level_op`` and ``bottom_level_op`` (first and last of ``op_stack``; ``""`` when it is empty).
        An empty frame without columns when the trace has no ``cuda_profiler_range`` event.
    """
    ev = trace.events
    ranges = np.flatnonzero((ev["cat"] == "cuda_profiler_range").to_numpy())
    ranges = ranges[np.argsort(ev["ts_ns"].to_numpy()[ranges], kind="stable")]
    if ranges.shape[0] == 0:
        return pd.DataFrame()
    launches = np.flatnonzero((ev["cat"].isin(schema.RUNTIME_CATS) & ev["name"].isin(KERNEL_LAUNCHES)).to_numpy())
    launches = launches[np.argsort(ev["ts_ns"].to_numpy()[launches], kind="stable")]
    n = min(ranges.shape[0], launches.shape[0])
    runtime = np.full(ranges.shape[0], -1, np.int64)
    runtime[:n] = launches[:n]
    rows, parent, _ = op_stack(trace)
    is_op = category_flags(ev["cat"], lambda c: c in schema.CPU_OP_CATS)[rows]
    names = ev["name"].array
    stacks = []
    for r in runtime.tolist():
        chain: list[str] = []
        pos = int(np.searchsorted(rows, r)) if r >= 0 else -1
        pos = parent[pos] if 0 <= pos < rows.shape[0] and rows[pos] == r else -1
        while pos >= 0:
            if is_op[pos]:
                chain.append(str(names[rows[pos]]))
            pos = parent[pos]
        stacks.append(chain[::-1])
    counters = pd.DataFrame([trace.event_args(int(i)) for i in ranges])
    out = pd.DataFrame(
        {
            "row": ranges,
            "name": ev["name"].astype(str).to_numpy()[ranges],
            "ts_ns": ev["ts_ns"].to_numpy()[ranges],
            "dur_ns": ev["dur_ns"].to_numpy()[ranges],
        }
    )
    out = pd.concat([out, counters], axis=1)
    out["index_runtime"] = runtime
    out["op_stack"] = stacks
    out["top_level_op"] = [s[0] if s else "" for s in stacks]
    out["bottom_level_op"] = [s[-1] if s else "" for s in stacks]
    return out
