"""Annotation → GPU projection against a slow reference on random properly nested ranges."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

import aonkit
from aonkit.analysis.projection import range_projection, range_projection_summary


def _random_trace(rng: np.random.Generator, path: Path) -> tuple[list[dict], list[dict], list[dict]]:
    """Ranges, launches and kernels; tokens on each thread nest properly (open/close/launch)."""
    ranges, launches, kernels = [], [], []
    corr = 0
    for tid in (1, 2, 3):
        t, stack = 1000 * tid, []
        for _ in range(int(rng.integers(20, 60))):
            t += 10
            r = rng.random()
            if r < 0.35:
                stack.append({"name": f"r{int(rng.integers(0, 4))}", "tid": tid, "ts": t})
            elif r < 0.6 and stack:
                rg = stack.pop()
                rg["dur"] = t - rg["ts"]
                ranges.append(rg)
            else:
                corr += 1
                launches.append({"tid": tid, "ts": t, "dur": 5, "corr": corr})
                if rng.random() < 0.85:  # some launches have no GPU event
                    kernels.append({"ts": int(rng.integers(0, 5000)), "dur": int(rng.integers(1, 50)), "corr": corr})
        while stack:
            t += 10
            rg = stack.pop()
            rg["dur"] = t - rg["ts"]
            ranges.append(rg)
    kernels.append({"ts": 7, "dur": 3, "corr": 10_000})  # launched before the window
    ev = [{"ph": "X", "cat": "user_annotation", "name": r["name"], "pid": 1, "tid": r["tid"], "ts": r["ts"],
           "dur": r["dur"]} for r in ranges]
    ev += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": la["tid"], "ts": la["ts"],
            "dur": la["dur"], "args": {"correlation": la["corr"]}} for la in launches]
    ev += [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": k["ts"], "dur": k["dur"],
            "args": {"correlation": k["corr"], "stream": 7, "device": 0}} for k in kernels]
    path.write_text(json.dumps({"traceEvents": ev}))
    return ranges, launches, kernels


def _reference(ranges: list[dict], launches: list[dict], kernels: list[dict]) -> pd.DataFrame:
    by_corr = {k["corr"]: k for k in kernels}
    rows = []
    for r in ranges:
        inside = [by_corr[la["corr"]] for la in launches
                  if la["tid"] == r["tid"] and r["ts"] <= la["ts"] and la["ts"] + la["dur"] <= r["ts"] + r["dur"]
                  and la["corr"] in by_corr]
        first = min((k["ts"] for k in inside), default=-1)
        last = max((k["ts"] + k["dur"] for k in inside), default=-1)
        rows.append((r["tid"], r["ts"] * 1000, len(inside), sum(k["dur"] for k in inside) * 1000,
                     first * 1000 if inside else -1, last * 1000 if inside else -1))
    return pd.DataFrame(rows, columns=["tid", "ts_ns", "gpu_ops", "gpu_ns", "proj_start_ns", "proj_end_ns"])


def test_projection_matches_reference(tmp_path: Path, rng: np.random.Generator) -> None:
    for trial in range(5):
        ranges, launches, kernels = _random_trace(rng, tmp_path / f"t{trial}.json")
        got = range_projection(aonkit.load(tmp_path / f"t{trial}.json"))
        ref = _reference(ranges, launches, kernels)
        key = ["tid", "ts_ns", "gpu_ops"]
        got = got.assign(tid=got["tid"].astype(int)).sort_values(key, ignore_index=True)
        ref = ref.sort_values(key, ignore_index=True)
        assert len(got) == len(ref) == len(ranges)
        for col in ("tid", "ts_ns", "gpu_ops", "gpu_ns", "proj_start_ns", "proj_end_ns"):
            assert got[col].tolist() == ref[col].tolist(), col
        has = got["gpu_ops"] > 0
        assert (got.loc[has, "proj_dur_ns"] == got.loc[has, "proj_end_ns"] - got.loc[has, "proj_start_ns"]).all()
        assert (got.loc[~has, "proj_dur_ns"] == 0).all()


def test_summary_by_name(tmp_path: Path) -> None:
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 200, "dur": 100},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 210, "dur": 5,
         "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 50, "dur": 10,
         "args": {"correlation": 1, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 70, "dur": 20,
         "args": {"correlation": 2, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 400, "dur": 30,
         "args": {"correlation": 3, "stream": 7}},
    ]
    (tmp_path / "s.json").write_text(json.dumps({"traceEvents": ev}))
    s = range_projection_summary(range_projection(aonkit.load(tmp_path / "s.json"))).iloc[0]
    # instance 1: kernels 50..60 and 70..90 -> span 40 us, busy 30 us; instance 2: 400..430 -> 30 us
    assert s["name"] == "step" and s["instances"] == 2 and s["gpu_ops"] == 3
    assert s["proj_ns"] == 70_000 and s["gpu_ns"] == 60_000 and s["range_ns"] == 200_000
    assert s["proj_min_ns"] == 30_000 and s["proj_max_ns"] == 40_000 and s["proj_median_ns"] == 35_000
    assert abs(s["proj_std_ns"] - np.std([30_000, 40_000], ddof=1)) < 1e-6
