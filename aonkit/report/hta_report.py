"""``aonkit hta-report``: HTA 0.5.0's CSV outputs (same file names, columns and semantics)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..analysis import hta_compat as hc
from ..analysis import hta_counters as hk
from ..analysis.cupti import cupti_counters
from ..trace import Trace


def _save(df: pd.DataFrame | None, path: Path) -> None:
    """Write like HTA's scripts: the index only when it is not a plain range."""
    if df is None:
        return
    df.to_csv(path, index=not isinstance(df.index, pd.RangeIndex))


def _per_rank(df: pd.DataFrame) -> pd.DataFrame:
    """Restart the index at 0 for each rank, as HTA's concatenated per-rank frames do."""
    if df.empty or df["rank"].nunique() <= 1:
        return df.reset_index(drop=True)
    return pd.concat([g.reset_index(drop=True) for _, g in df.groupby("rank", sort=False)])


def write_hta_report(traces: Mapping[int, Trace], out: Path, include_last_step: bool = False) -> list[Path]:
    """Run every HTA-compatible analysis on ``traces`` and write the CSVs into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    frames = hc.hta_frames(traces, include_last_step=include_last_step)
    idle, stats = hk.idle_time_breakdown(frames)
    stats = stats.set_index("idle_category") if not stats.empty else stats
    tables: dict[str, pd.DataFrame | None] = {
        "temporal_breakdown.csv": hc.temporal_breakdown(frames),
        "idle_time_breakdown.csv": _per_rank(idle),
        "idle_time_interval_stats.csv": stats,
        "gpu_kernel_breakdown_type.csv": hc.gpu_kernel_breakdown_type(frames),
        "gpu_kernel_breakdown_kernels.csv": hc.gpu_kernel_breakdown_kernels(frames),
        "gpu_kernel_breakdown_type_all.csv": hc.gpu_kernel_breakdown_type(frames),
        "gpu_kernel_breakdown_kernels_all.csv": hc.gpu_kernel_breakdown_kernels(
            frames, duration_ratio=1.0, num_kernels=1_000_000
        ),
        "comm_comp_overlap.csv": hc.comm_comp_overlap(frames),
        "cuda_kernel_launch_stats.csv": _per_rank(hk.cuda_kernel_launch_stats(frames)),
        "queue_length_summary.csv": _with_header(hk.queue_length_summary(frames), "queue_length"),
        "memory_bw_summary.csv": _with_header(hk.memory_bw_summary(frames), "memory_bw_gbps"),
    }
    ann = hc.gpu_user_annotation_breakdown(frames)
    if not ann.empty:
        tables["gpu_user_annotation_breakdown.csv"] = ann
    tables["profiler_steps.csv"] = pd.DataFrame({"profiler_step": hc.profiler_step_numbers(frames)})
    tables["time_spent_blocked_on_full_queue.csv"] = hk.time_blocked_on_full_queue(frames)
    cupti = [cupti_counters(t).assign(rank=r) for r, t in traces.items()]
    cupti = [c for c in cupti if len(c)]
    if cupti:
        tables["cupti_counter_data_with_operators.csv"] = pd.concat(cupti, ignore_index=True)
    written = []
    for name, df in tables.items():
        _save(df, out / name)
        written.append(out / name)
    return written


def _with_header(df: pd.DataFrame, top: str) -> pd.DataFrame:
    """Add the column level that pandas' ``groupby(...)[[col]].describe()`` gives HTA's summaries."""
    df = df.copy()
    df.columns = pd.MultiIndex.from_product([[top], list(df.columns)])
    # HTA's describe() of no rows has a plain range index, which its CSV leaves out
    return df.reset_index(drop=True) if df.empty else df
