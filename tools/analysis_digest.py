"""Digest every public analysis on every shared trace, and diff two digests: the refactoring safety net.

Usage::

    PYTHONPATH=. python tools/analysis_digest.py --out bench/out/digests/BEFORE.json
    PYTHONPATH=. python tools/analysis_digest.py --out bench/out/digests/AFTER.json
    python tools/analysis_digest.py --compare bench/out/digests/BEFORE.json bench/out/digests/AFTER.json \\
        [--rename gpu_links.op=op_row ...] [--renames tools/renames-issue13.txt]

A digest holds, per trace and analysis, the row count and a hash of each
column's values (index dropped, floats to 17 significant digits), so a renamed
column can be matched by ``--rename analysis.old=new`` and everything else must
be equal. Job-level analyses (collectives, combine, diff) run on the sample
job and a generated 4-rank job. The equality check over all shared traces is
clean when ``--compare`` prints no difference and exits 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces"


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def digest_value(obj: Any) -> dict[str, Any]:
    """Row count and per-column hashes of a table; a hash of the repr of anything else."""
    import numpy as np
    import pandas as pd

    if isinstance(obj, pd.Series):
        obj = obj.to_frame(name=obj.name if obj.name is not None else "value")
    if isinstance(obj, pd.DataFrame):
        df = obj.reset_index(drop=True)
        cols = {}
        for c in df.columns:
            col = df[c]
            text = col.to_csv(index=False, header=False, float_format="%.17g") if len(col) else ""
            cols[str(c)] = _hash(f"{col.dtype.kind}|{text}")
        return {"rows": len(df), "columns": cols}
    if isinstance(obj, np.ndarray):
        return {"value": _hash(f"{obj.dtype}|{obj.tolist()!r}")}
    if isinstance(obj, (tuple, list)) and obj and all(isinstance(o, pd.DataFrame) for o in obj):
        return {"parts": [digest_value(o) for o in obj]}
    if hasattr(obj, "__dataclass_fields__"):
        return {"fields": {k: digest_value(getattr(obj, k)) for k in obj.__dataclass_fields__}}
    return {"value": _hash(repr(obj))}


def _fn(module: Any, *names: str) -> Callable[..., Any]:
    """The first of ``names`` the module has: the digest runs on commits before and after a rename."""
    for n in names:
        if hasattr(module, n):
            return getattr(module, n)
    raise AttributeError(f"{module.__name__} has none of {names}")


def trace_analyses() -> dict[str, Callable[[Any], Any]]:
    """Every public analysis of one trace, by a stable name (renamed functions found under either name)."""
    from aonkit.analysis import (
        bandwidth,
        collectives,
        correlation,
        cupti,
        flops,
        hta_compat,
        hta_counters,
        hta_queues,
        idle,
        kernels,
        memory,
        overview,
        projection,
        queues,
        roofline,
        steps,
        summary,
    )

    try:
        from aonkit.timeline import timeline_index, timeline_tiles
    except ImportError:  # before the timeline package
        from aonkit.analysis.lanes import timeline_index  # type: ignore[no-redef]
        from aonkit.analysis.timeline import timeline_tiles  # type: ignore[no-redef]

    def frames(t: Any) -> Any:
        return hta_compat.hta_frames(t)

    def tiles(t: Any) -> Any:
        idx = timeline_index(t)
        if not len(idx.ts):
            return None
        return timeline_tiles(idx, int(idx.ts.min()), int(idx.end.max()) + 1, 800)

    return {
        "copies": bandwidth.copies, "memory_bandwidth_series": bandwidth.memory_bandwidth_series,
        "memory_bandwidth": _fn(bandwidth, "memory_bandwidth_summary", "memory_bandwidth"),
        "comm_kernels": collectives.comm_kernels,
        "exposed_communication": collectives.exposed_communication, "gpu_links": correlation.gpu_links,
        "gpu_launches": correlation.gpu_launches, "cpu_stack": correlation.cpu_stack,
        "cupti_counters": cupti.cupti_counters, "op_costs": flops.op_costs,
        "hta_temporal": lambda t: hta_compat.temporal_breakdown(frames(t)),
        "hta_kernel_type": lambda t: hta_compat.gpu_kernel_breakdown_type(frames(t)),
        "hta_kernels": lambda t: hta_compat.gpu_kernel_breakdown_kernels(frames(t)),
        "hta_overlap": lambda t: hta_compat.comm_comp_overlap(frames(t)),
        "hta_annotations": lambda t: hta_compat.gpu_user_annotation_breakdown(frames(t)),
        "hta_profiler_steps": lambda t: _fn(hta_compat, "profiler_step_numbers", "profiler_steps")(frames(t)),
        "hta_idle": lambda t: hta_counters.idle_time_breakdown(frames(t)),
        "hta_launch": lambda t: hta_counters.cuda_kernel_launch_stats(frames(t)),
        "hta_memory_bw_series": lambda t: hta_counters.memory_bw_series(frames(t)),
        "hta_memory_bw_summary": lambda t: hta_counters.memory_bw_summary(frames(t)),
        "hta_queue_series": lambda t: hta_queues.queue_length_series(frames(t)),
        "hta_queue_summary": lambda t: hta_queues.queue_length_summary(frames(t)),
        "hta_blocked": lambda t: hta_queues.time_blocked_on_full_queue(frames(t)),
        "idle_summary_device": idle.idle_summary, "idle_summary_stream": lambda t: idle.idle_summary(t, by="stream"),
        "idle_series_device": idle.idle_series, "idle_series_stream": lambda t: idle.idle_series(t, by="stream"),
        "gpu_table": kernels.gpu_table, "kernel_stats": kernels.kernel_stats,
        "kernel_stats_class": lambda t: kernels.kernel_stats(t, by="class"),
        "gpu_time_per_op": kernels.gpu_time_per_op, "launch_stats": kernels.launch_stats,
        "memory_events": memory.memory_events, "memory_peaks": memory.memory_peaks,
        "overview": overview.overview, "range_projection": projection.range_projection,
        "range_projection_summary": lambda t: projection.range_projection_summary(projection.range_projection(t)),
        "queue_length": _fn(queues, "queue_length_series", "queue_length"),
        "queue_summary": _fn(queues, "queue_length_summary", "queue_summary"),
        "roofline_op": roofline.roofline_table, "roofline_kernel": lambda t: roofline.roofline_table(t, by="kernel"),
        "profiler_steps": steps.profiler_steps, "summary": summary.summarize, "top_kernels": summary.top_kernels,
        "timeline_tiles": tiles,
    }  # fmt: skip


def job_analyses() -> dict[str, Callable[[Any], Any]]:
    """Every public analysis of a job (a TraceSet)."""
    from aonkit.analysis import collectives, combine, diff

    return {
        "clock_offsets": collectives.clock_offsets, "collectives": collectives.collectives,
        "stragglers": collectives.stragglers, "combine_events": lambda j: combine.combine_ranks(j).events,
        "trace_diff": lambda j: diff.trace_diff(j[min(j)], j[max(j)]),
    }  # fmt: skip


def _run(fns: dict[str, Callable[[Any], Any]], obj: Any) -> dict[str, Any]:
    out = {}
    for name, fn in fns.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[name] = digest_value(fn(obj))
        except Exception as exc:  # noqa: BLE001 - an analysis that raises is recorded, and must keep raising
            out[name] = {"raises": type(exc).__name__}
    return out


def make_digest(limit_mb: float) -> dict[str, Any]:
    import aonkit
    from tests.gen_ranks import write_job

    result: dict[str, Any] = {}
    files = sorted(p for p in SHARED.rglob("*") if p.is_file() and p.name != "SOURCES.md"
                   and p.stat().st_size < limit_mb * 1e6) if SHARED.is_dir() else []
    files += sorted((ROOT / "sample_traces").glob("*.json.gz"))
    fns = trace_analyses()
    for p in files:
        key = str(p.relative_to(SHARED) if SHARED in p.parents else p.relative_to(ROOT))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = aonkit.load(p)
        except Exception as exc:  # noqa: BLE001
            result[key] = {"load": {"raises": type(exc).__name__}}
            continue
        result[key] = {"events": digest_value(t.events), **_run(fns, t)}
        print(f"{key}: {len(t):,} events", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        write_job(Path(tmp), ranks=4, steps=3, straggler=2, exposed_ranks=(1,), seed=3)
        jobs = {"job:sample": aonkit.load([ROOT / "sample_traces" / f"gpu_synthetic_rank{r}.json.gz" for r in (0, 1)]),
                "job:generated4": aonkit.load(tmp)}
        for key, job in jobs.items():
            result[key] = _run(job_analyses(), job)
    return result


def _leaves(value: Any, path: str) -> dict[str, Any]:
    """Tables (``rows``/``columns``) and values of a digest entry, by path (``overview/ops``, ``memory_peaks/1``)."""
    if isinstance(value, dict) and "parts" in value:
        return {k: v for i, p in enumerate(value["parts"]) for k, v in _leaves(p, f"{path}/{i}").items()}
    if isinstance(value, dict) and "fields" in value:
        return {k: v for f, p in value["fields"].items() for k, v in _leaves(p, f"{path}/{f}").items()}
    return {path: value}


def compare(a: dict[str, Any], b: dict[str, Any], renames: dict[str, dict[str, str]]) -> list[str]:
    """Differences between digests ``a`` (before) and ``b`` (after).

    A column renamed on purpose is matched by ``renames[analysis]`` (it applies
    to every table of that analysis, nested ones included).
    """
    out = []
    for trace in sorted(set(a) | set(b)):
        ta, tb = a.get(trace, {}), b.get(trace, {})
        for name in sorted(set(ta) | set(tb)):
            la, lb = _leaves(ta.get(name), name), _leaves(tb.get(name), name)
            for path in sorted(set(la) | set(lb)):
                va, vb = la.get(path), lb.get(path)
                if isinstance(va, dict) and isinstance(vb, dict) and "columns" in va and "columns" in vb:
                    cols = {renames.get(name, {}).get(c, c): h for c, h in va["columns"].items()}
                    if va["rows"] != vb["rows"] or cols != vb["columns"]:
                        diff = sorted(c for c in set(cols) | set(vb["columns"])
                                      if cols.get(c) != vb["columns"].get(c))
                        out.append(f"{trace} {path}: rows {va['rows']}->{vb['rows']}, columns differ: {diff}")
                elif va != vb:
                    out.append(f"{trace} {path}: {str(va)[:80]} -> {str(vb)[:80]}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the digest of the working tree here")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--rename", action="append", default=[], help="analysis.old=new: a column renamed on purpose")
    ap.add_argument("--renames", help="a file of analysis.old=new lines (e.g. tools/renames-issue13.txt)")
    ap.add_argument("--limit-mb", type=float, default=400.0, help="skip shared files larger than this")
    args = ap.parse_args()
    if args.compare:
        renames: dict[str, dict[str, str]] = {}
        lines = Path(args.renames).read_text().split() if args.renames else []
        for r in [*args.rename, *lines]:
            key, new = r.split("=")
            name, old = key.split(".", 1)
            renames.setdefault(name, {})[old] = new
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        diffs = compare(a, b, renames)
        print("\n".join(diffs) if diffs else f"equal: {len(a)} inputs, every analysis")
        return 1 if diffs else 0
    sys.path.append(str(ROOT))  # for tests.gen_ranks; aonkit itself comes from PYTHONPATH when set
    digest = make_digest(args.limit_mb)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(digest, indent=1, sort_keys=True))
    print(f"wrote {args.out}: {len(digest)} inputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
