"""Profiler steps (``ProfilerStep#N``): their spans and the GPU work launched in each."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Trace
from .correlation import gpu_links, step_numbers


def step_rows(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``trace.events`` that are host ``ProfilerStep#N`` annotations, and their N."""
    ev = trace.events
    nums = step_numbers(ev["name"])
    is_step = (nums >= 0) & (ev["ph"] == "X").to_numpy() & (ev["cat"] != "gpu_user_annotation").to_numpy()
    rows = np.flatnonzero(is_step)
    return rows, nums[rows]


def profiler_steps(trace: Trace) -> pd.DataFrame:
    """One row per ``ProfilerStep#N`` annotation, with the GPU work launched inside it.

    Parameters
    ----------
    trace : Trace
        A torch.profiler trace (no rows when it has no ``ProfilerStep#N`` annotations).

    Returns
    -------
    pandas.DataFrame
        ``step``, ``ts_ns``, ``dur_ns``, and of the GPU events launched in the step ``gpu_events``, ``gpu_ns``
        (sum of durations) and ``gpu_end_ns`` (when the last one finished; -1 when none).
    """
    ev = trace.events
    rows, nums = step_rows(trace)
    steps = pd.DataFrame({
        "step": nums,
        "ts_ns": ev["ts_ns"].to_numpy()[rows],
        "dur_ns": ev["dur_ns"].to_numpy()[rows],
    })  # fmt: skip
    if not len(rows):  # no steps: nothing to attribute GPU work to, so no correlation needed
        return steps.assign(gpu_events=np.int64(0), gpu_ns=np.int64(0), gpu_end_ns=np.int64(-1))
    links = gpu_links(trace)
    ts, dur = ev["ts_ns"].to_numpy(), np.maximum(ev["dur_ns"].to_numpy(), 0)
    g = pd.DataFrame({"step": links["step"], "dur": dur[links["gpu_row"]],
                      "end": ts[links["gpu_row"]] + dur[links["gpu_row"]]})
    agg = g[g["step"] >= 0].groupby("step").agg(gpu_events=("dur", "size"), gpu_ns=("dur", "sum"),
                                                 gpu_end_ns=("end", "max"))  # fmt: skip
    out = steps.merge(agg, left_on="step", right_index=True, how="left")
    out = out.fillna({"gpu_events": 0, "gpu_ns": 0, "gpu_end_ns": -1}).astype(
        {"gpu_events": np.int64, "gpu_ns": np.int64, "gpu_end_ns": np.int64}
    )
    return out.sort_values("ts_ns", kind="stable", ignore_index=True)
