"""Run Holistic Trace Analysis 0.5.0 on many trace folders in one process and write its CSVs (HTA's venv only).

Usage: ``HTA_PYTHON tools/hta_run.py DIR...``. Each DIR holds ``rank<N>.json``
(or ``.json.gz``) files; HTA's results go to ``DIR/hta/<file>.csv`` with the file names of
``aonkit hta-report``, and ``DIR/hta/_errors.json`` lists the calls HTA could
not answer (their CSVs are absent). Written for ``tools/hta_diff.py``; it
imports nothing of aonkit, which may not be installed in HTA's venv.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from pathlib import Path

import pandas as pd


def _save(df: pd.DataFrame | pd.Series | None, path: Path) -> None:
    """As aonkit's report writes: the index only when it is not a plain range."""
    if df is None:
        return
    if isinstance(df, pd.Series):
        df = df.to_frame()
    df.to_csv(path, index=not isinstance(df.index, pd.RangeIndex))


def run(folder: Path) -> dict[str, str]:
    from hta.trace_analysis import TraceAnalysis

    files = {int(p.name.split(".")[0].removeprefix("rank")): str(p) for p in sorted(folder.glob("rank*.json*"))}
    out = folder / "hta"
    out.mkdir(exist_ok=True)
    errors: dict[str, str] = {}
    try:
        ta = TraceAnalysis(trace_files=files, trace_dir=str(folder))
    except Exception as e:  # noqa: BLE001 - recorded for the comparison
        return {"load": f"{type(e).__name__}: {e}"}
    ranks = sorted(ta.t.traces)

    def launch_stats() -> pd.DataFrame | None:
        per = ta.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
        parts = [df.assign(rank=r)[["rank", *df.columns]] for r, df in per.items()]
        return pd.concat(parts) if parts else None

    def idle() -> None:
        df, stats = ta.get_idle_time_breakdown(ranks=ranks, visualize=False, show_idle_interval_stats=True)
        _save(df, out / "idle_time_breakdown.csv")
        _save(stats, out / "idle_time_interval_stats.csv")

    def kernels(tag: str, **kw: object):  # noqa: ANN202
        def f() -> None:
            types, per_kernel = ta.get_gpu_kernel_breakdown(visualize=False, **kw)
            _save(types, out / f"gpu_kernel_breakdown_type{tag}.csv")
            _save(per_kernel, out / f"gpu_kernel_breakdown_kernels{tag}.csv")

        return f

    calls = {
        "temporal_breakdown": lambda: _save(ta.get_temporal_breakdown(visualize=False),
                                            out / "temporal_breakdown.csv"),  # fmt: skip
        "idle_time_breakdown": idle,
        "gpu_kernel_breakdown": kernels(""),
        "gpu_kernel_breakdown_all": kernels("_all", duration_ratio=1.0, num_kernels=1_000_000),
        "comm_comp_overlap": lambda: _save(ta.get_comm_comp_overlap(visualize=False), out / "comm_comp_overlap.csv"),
        "cuda_kernel_launch_stats": lambda: _save(launch_stats(), out / "cuda_kernel_launch_stats.csv"),
        "queue_length_summary": lambda: _save(ta.get_queue_length_summary(ranks=ranks),
                                              out / "queue_length_summary.csv"),  # fmt: skip
        "memory_bw_summary": lambda: _save(ta.get_memory_bw_summary(ranks=ranks), out / "memory_bw_summary.csv"),
        "profiler_steps": lambda: _save(pd.DataFrame({"profiler_step": ta.get_profiler_steps()}),
                                        out / "profiler_steps.csv"),  # fmt: skip
    }
    for name, call in calls.items():
        try:
            call()
        except Exception as e:  # noqa: BLE001 - HTA fails on some inputs; the comparison skips those files
            errors[name] = f"{type(e).__name__}: {e}"
            errors[name + "_where"] = traceback.format_exc(limit=-2)[-600:]
    return errors


def main() -> None:
    logging.disable(logging.WARNING)
    for arg in sys.argv[1:]:
        folder = Path(arg)
        errors = run(folder)
        (folder / "hta").mkdir(exist_ok=True)
        (folder / "hta" / "_errors.json").write_text(json.dumps(errors, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
