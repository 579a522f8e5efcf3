"""The naming contract (docs/conventions.md) over every catalogued analysis, and the catalog against the code."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
import warnings
from typing import Any

import pandas as pd
import pytest

import aonkit
import aonkit.analysis as analysis
from aonkit.analysis.catalog import ENTRIES, HTA_NAMES_KEPT
from aonkit.analysis.hta_compat import hta_frames
from aonkit.analysis.projection import range_projection

from .conftest import ROOT, SAMPLE_TRACES

UNITS = ("ns", "us", "ms", "s")
TIME_WORDS = {"ts", "dur", "time", "start", "end", "delay", "span", "busy", "idle", "wait", "latency", "elapsed"}
NOT_TIMES = ("_share", "_fraction", "_pct", "_category", "_row", "_count", "_events", "_ops")
BARE_ROLES = {"op", "gpu", "launch", "kernel", "annotation", "index", "parent", "top_op"}
HELPERS = {  # public functions that are building blocks, not analyses (documented in their modules)
    "columns": "*", "memo": "*", "catalog": "*", "comm_match": "*", "distributed": "*", "critical_parts": "*",
    "collectives": {"collectives_from_tables", "stragglers_from", "offsets_from_tables"},
    "diff": {"mann_whitney_p", "diff_summary"},
    "flops": {"parents", "nearest_marked"}, "kernels": {"kernel_class", "gpu_class_table"}, "overview": {"idle_totals"},
    "roofline": {"trace_spec"}, "summary": {"busy_ns", "sorted_intervals"}, "depgraph": {"build_graph", "relabelled"},
    "critical_path": {"graph_of", "composition", "prepared"}, "depgraph_job": {"build_job_graph"},
    "whatif_mc": "*", "whatif_trace": "*", "job_stats": {"merge_kernel_stats", "rank_kernel_stats"},
    "depgraph_sync": "*", "depgraph_threads": "*", "depgraph_stitch": "*", "whatif_rules": "*", "depgraph_streams": "*",
    "whatif_steps": {"node_steps", "own_step_windows", "step_table", "window_nodes", "median_period_ns"},
    "steps": {"step_rows"}, "whatif_timing": "*",
    "combine": {"combined_categories", "pid_names", "combined_samples"},
    "step_lags": {"latest_rank"},  # reads a job's step_lags table (its finding is findings' late_rank)
    "correlation": {"enclosing_ops", "code_flags", "category_flags", "step_table", "step_numbers", "gpu_launch_rows",
                    "numpy_launch_candidates"},
    "queues": {"queue_sweep"}, "queue_sweep": "*",  # kernels or their stand-ins (analysis.standin):
    "standin": "*", "describe_stats": "*", "group_order": "*", "key_match": "*", "lane_gaps": "*", "time_weighted": "*",
    "enclosing": "*",
    "whatif_hardware": {"hardware_rules", "pool_scales", "resolve_spec"},
    "whatif_batch": {"batch_rules", "in_param_scope"}, "whatif_batch_memory": {"fullest"},
    "memory": {"live_at"},
    "sample_align": "*",  # needs a trace with GPU activity samples (docs/live.md), which the catalogue's subjects lack
}  # fmt: skip


@pytest.fixture(scope="module")
def subjects() -> dict[str, Any]:
    job = aonkit.load_job([SAMPLE_TRACES / f"gpu_synthetic_rank{r}.json.gz" for r in (0, 1)])
    return {"trace": job[0], "job": job, "frames": hta_frames(job[0]), "pair": (job[0], job[1]),
            "projection": range_projection(job[0])}


def _run(e: Any, subjects: dict[str, Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return e.resolve()(*subjects["pair"], **e.kwargs) if e.takes == "pair" else e.run(subjects[e.takes])


def _tables(obj: Any) -> list[pd.DataFrame]:
    if isinstance(obj, pd.DataFrame):
        return [obj]
    if isinstance(obj, pd.Series):
        return [obj.to_frame()]
    if isinstance(obj, tuple):
        return [t for o in obj for t in _tables(o)]
    if hasattr(obj, "__dataclass_fields__"):
        return [t for k in obj.__dataclass_fields__ for t in _tables(getattr(obj, k))]
    if hasattr(obj, "critical_path"):  # WhatIf: its table
        return [obj.critical_path]
    return []


def column_problems(columns: list[str]) -> list[str]:
    """What a table's column names break of the contract."""
    out, units = [], set()
    for c in map(str, columns):
        words = c.split("_")
        if c in BARE_ROLES:
            out.append(f"{c!r} is a bare role: end row numbers in _row and names in _name")
        if c.endswith("_per_s"):
            continue  # a rate (flop_per_s, bytes_per_s), not a time
        if words[-1] in UNITS:
            units.add(words[-1])
        elif TIME_WORDS & set(words) and not c.endswith(NOT_TIMES):
            out.append(f"{c!r} looks like a time but has no unit suffix")
    if len(units) > 1:
        out.append(f"mixes time units {sorted(units)}")
    return out


def test_the_rules_can_fail() -> None:
    assert column_problems(["op", "start", "dur_ns", "gap_us"]) == [
        "'op' is a bare role: end row numbers in _row and names in _name",
        "'start' looks like a time but has no unit suffix", "mixes time units ['ns', 'us']"]  # fmt: skip
    assert column_problems(["op_row", "op_name", "ts_ns", "busy_fraction", "idle_category", "gaps", "flop_per_s"]) == []


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.function.split(".")[0] not in HTA_NAMES_KEPT],
                         ids=lambda e: f"{e.function}{e.kwargs or ''}")
def test_catalogued_outputs_follow_the_contract(entry: Any, subjects: dict[str, Any]) -> None:
    out = _run(entry, subjects)
    tables = _tables(out)
    if isinstance(out, aonkit.Trace):
        tables = [out.events]
    assert tables or isinstance(out, (str, list, dict)), f"{entry.function} returns {type(out).__name__}"
    for t in tables:
        assert column_problems(list(t.columns)) == [], entry.function


def _public_functions() -> dict[str, set[str]]:
    out = {}
    for m in pkgutil.iter_modules(analysis.__path__):
        if m.name.startswith("_"):
            continue
        mod = importlib.import_module(f"aonkit.analysis.{m.name}")
        out[m.name] = {n for n, f in vars(mod).items() if inspect.isfunction(f) and not n.startswith("_")
                       and f.__module__ == mod.__name__}
    return out


def test_every_public_analysis_is_catalogued() -> None:
    catalogued = {e.function for e in ENTRIES}
    missing = sorted(f"{m}.{n}" for m, names in _public_functions().items() for n in names
                     if f"{m}.{n}" not in catalogued and HELPERS.get(m) != "*" and n not in HELPERS.get(m, ())
                     and m not in HTA_NAMES_KEPT)
    assert not missing, f"add to aonkit/analysis/catalog.py (or HELPERS here): {missing}"
    for e in ENTRIES:
        assert callable(e.resolve()), e.function


def test_signatures_follow_the_contract() -> None:
    problems = []
    funcs = _public_functions()
    for m, names in funcs.items():
        mod = importlib.import_module(f"aonkit.analysis.{m}")
        for n in names:
            params = inspect.signature(getattr(mod, n)).parameters
            if any(p in params for p in ("top", "n_kernels", "top_n")):
                problems.append(f"{m}.{n}: top-N is `n=`")
            if n.endswith("_series") and m not in HTA_NAMES_KEPT and f"{n[:-7]}_summary" not in names:
                problems.append(f"{m}.{n} has no {n[:-7]}_summary")
    assert not problems, problems
    defs = [(m, n) for m, names in funcs.items() for n in names if n == "profiler_steps"]
    assert defs == [("steps", "profiler_steps")]  # one name, one return type


def test_analyses_doc_is_current() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "analyses_doc.py"), "--check"], capture_output=True,
                         text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr


def test_analysis_exposes_its_public_analyses() -> None:
    assert "kernel_stats" in analysis.__all__ and analysis.kernel_stats is importlib.import_module(
        "aonkit.analysis.kernels").kernel_stats
    assert all(callable(getattr(analysis, n)) for n in analysis.__all__)
    assert "queue_length_series" in analysis.__all__ and "temporal_breakdown" not in analysis.__all__  # HTA: module
