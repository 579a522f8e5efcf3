"""Every shared nsys export against ../shared/nsys/reference.json (values from plain SQL)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit.analysis.correlation import gpu_links
from aonkit.analysis.projection import range_projection, range_projection_summary

from .conftest import SHARED

NSYS = SHARED / "nsys"


def _reference() -> dict:
    path = NSYS / "reference.json"
    return json.loads(path.read_text())["files"] if path.exists() else {}


REF = _reference()
FILES = sorted(REF)


def _load(name: str) -> tuple[aonkit.Trace, dict]:
    if not (NSYS / name).exists():
        pytest.skip(f"shared nsys export not found at {NSYS / name} (clone with ../shared beside the repo)")
    return aonkit.load(NSYS / name), REF[name]


def _cat(t: aonkit.Trace, *cats: str):  # noqa: ANN202
    return t.events[t.events["cat"].isin(cats)]


def _rel(t: aonkit.Trace, ts: np.ndarray) -> np.ndarray:
    return ts - t.meta.base_time_ns


def test_reference_present() -> None:
    if not NSYS.is_dir():
        pytest.skip(f"../shared/nsys not found at {NSYS}")
    assert len(FILES) >= 4


@pytest.mark.parametrize("name", FILES)
def test_counts_and_sums(name: str) -> None:
    t, r = _load(name)
    k = _cat(t, "kernel")
    if r["kernel_count"] is None:
        assert k.empty and any("no GPU kernels" in w for w in t.warnings)
    else:
        assert len(k) == r["kernel_count"]
        assert int(k["dur_ns"].sum()) == r["kernel_total_ns"]
        assert len(set(t.arg_values("short name", k.index))) == r["kernel_distinct_short_names"]
        assert k["device"].nunique() == r["kernel_distinct_devices"]
        assert k["stream"].nunique() == r["kernel_distinct_streams"]
        assert int(_rel(t, k["ts_ns"].to_numpy()).min()) == r["kernel_min_start"]
        assert int(_rel(t, (k["ts_ns"] + k["dur_ns"]).to_numpy()).max()) == r["kernel_max_end"]
    api = _cat(t, "cuda_runtime", "cuda_driver")
    assert len(api) == r["runtime_api_count"] == r["runtime_count"] - r["runtime_backtrace_rows"]
    if r["runtime_backtrace_rows"]:
        assert any(f"{r['runtime_backtrace_rows']} CUDA backtrace" in w for w in t.warnings)
    assert api["pid"].nunique() == r["runtime_distinct_processes"]
    assert int(_rel(t, api["ts_ns"].to_numpy()).min()) == r["runtime_min_start"]
    assert int(_rel(t, (api["ts_ns"] + api["dur_ns"]).to_numpy()).max()) == r["runtime_max_end"]
    for kind, cat in (("memcpy", "gpu_memcpy"), ("memset", "gpu_memset")):
        rows = _cat(t, cat)
        assert len(rows) == (r[f"{kind}_count"] or 0)
        assert np.nansum(t.arg_numbers("bytes", rows.index)) == (r[f"{kind}_bytes"] or 0)
    mc = _cat(t, "gpu_memcpy")
    assert int(mc["dur_ns"].sum()) == (r["memcpy_total_ns"] or 0)


@pytest.mark.parametrize("name", FILES)
def test_gpu_activity_devices_and_time(name: str) -> None:
    t, r = _load(name)
    g = t.gpu_events
    assert g["device"].nunique() == r["gpu_activity_distinct_devices"]
    assert len(g.groupby(["device", "stream"]).size()) == r["gpu_activity_distinct_streams"]
    assert int(_rel(t, g["ts_ns"].to_numpy()).min()) == r["gpu_activity_min_start"]
    assert int(_rel(t, (g["ts_ns"] + g["dur_ns"]).to_numpy()).max()) == r["gpu_activity_max_end"]
    props = t.meta.device_properties
    assert len(props) == r["target_gpu_count"]
    assert [p["name"] for p in props] == r["gpu_names"]
    assert {p["id"] for p in props if p["used"]} == set(g["device"].unique().tolist())
    assert t.meta.base_time_ns == r["session_start_utc_ns"]
    assert t.meta.versions == {"nsys": r["nsys_version"], "nsys_export_schema": r["schema_version"]}


@pytest.mark.parametrize("name", FILES)
def test_launch_links_stay_in_process(name: str) -> None:
    t, r = _load(name)
    if not r["kernel_count"]:
        pytest.skip("no kernels in this export")
    links = gpu_links(t)
    k = links[t.events["cat"].to_numpy()[links["gpu_row"]] == "kernel"]
    assert int((k["launch_row"] >= 0).sum()) == r["kernels_with_runtime_same_process"]
    # one launch per kernel: the backtrace duplicates that double a plain join are gone
    assert r["kernel_runtime_join_rows"] >= len(k) == k["gpu_row"].nunique()
    names = t.events["name"].to_numpy()[k["launch_row"]]
    assert all(not str(n).endswith(("_v7000", "_v3020")) for n in names)


@pytest.mark.parametrize("name", FILES)
def test_nvtx(name: str) -> None:
    t, r = _load(name)
    ann = _cat(t, "user_annotation")
    ranges, marks = ann[ann["ph"] == "X"], ann[ann["ph"] == "i"]
    assert len(ranges) == (r["nvtx_range_count"] or 0)
    assert len(marks) == (r["nvtx_mark_count"] or 0)
    assert int((ranges["dur_ns"] == -1).sum()) == (r["nvtx_range_unterminated"] or 0)
    assert int(ranges.loc[ranges["dur_ns"] >= 0, "dur_ns"].sum()) == (r["nvtx_range_total_ns"] or 0)
    if len(ranges):
        assert int(_rel(t, ranges["ts_ns"].to_numpy()).min()) >= r["nvtx_min_start"]


@pytest.mark.parametrize("name", FILES)
def test_every_event_has_valid_json(name: str) -> None:
    t, _ = _load(name)
    for i in range(len(t.events)):
        e = t.event_json(i)
        assert e["ph"] == t.events["ph"].iloc[i] and e["name"] == t.events["name"].iloc[i]


def test_kernel_args_and_names() -> None:
    t, _ = _load("hpcgroup__pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    k = _cat(t, "kernel")
    args = t.event_args(int(k.index[0]))
    assert args["short name"] == "saxpy" and args["mangled name"] == "_Z5saxpyPdS_S_di"
    assert k["name"].iloc[0] == "saxpy(double *, double *, double *, double, int)"
    assert len(args["grid"]) == 3 and len(args["block"]) == 3 and args["registers per thread"] > 0
    mc = _cat(t, "gpu_memcpy")
    assert set(mc["name"]) == {"Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)"}
    ann = _cat(t, "user_annotation")
    mpi = ann[ann["name"].astype(str).str.startswith("MPI_")]
    assert len(mpi) == 17 and {t.event_args(int(i))["domain"] for i in mpi.index} == {"MPI"}
    names = t.events[(t.events["ph"] == "M") & (t.events["name"] == "thread_name")]
    assert "MPI Rank 0" in {t.event_args(int(i))["name"] for i in names.index}


def test_device_id_is_target_info_id_not_cuda_ordinal() -> None:
    t, _ = _load("hpcgroup__pipit/perlmutter-cloverleaf-cuda.sqlite")
    props = {p["id"]: p for p in t.meta.device_properties}
    assert len(props) == 4 and t.kernels["device"].unique().tolist() == [0]
    assert props[0]["used"] and props[0]["cuDevice"] == 3 and not any(props[i]["used"] for i in (1, 2, 3))
    sync = _cat(t, "cuda_sync")
    assert len(sync) == 1312 and not set(sync.index) & set(t.gpu_events.index)


def test_nvtx_projection_matches_kernel_time() -> None:
    t, r = _load("hpcgroup__pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    proj = range_projection(t)
    summ = range_projection_summary(proj).set_index("name")
    # each "saxpy" NVTX range launches one saxpy kernel; MPI ranges launch none
    assert summ.loc["saxpy", "instances"] == 5 and summ.loc["saxpy", "gpu_ops"] == 5
    assert summ.loc["saxpy", "gpu_ns"] == summ.loc["saxpy", "proj_ns"] == r["kernel_total_ns"]
    assert summ.loc["MPI_Send", "gpu_ops"] == 0 and summ.loc["MPI_Send", "instances"] == 10


def test_file_is_not_modified() -> None:
    name = "NVIDIA__Fuser/64ee035/report1.sqlite"
    path = NSYS / name
    if not path.exists():
        pytest.skip("shared nsys export absent")
    before = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    t = aonkit.load(path)
    t.event_json(0)
    after = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    assert before == after
    assert not Path(str(path) + "-journal").exists() and not Path(str(path) + "-wal").exists()


def test_downstream_analyses_run(tmp_path: Path) -> None:
    from aonkit.analysis import hta_compat, kernels, summary

    t, r = _load("hpcgroup__pipit/perlmutter-cloverleaf-cuda.sqlite")
    s = summary.summarize(t)
    assert s.gpu_busy_ns > 0 and s.top_kernels["count"].sum() <= r["kernel_count"]
    ks = kernels.kernel_stats(t, by="class").set_index("class")
    assert ks.loc["computation", "count"] == r["kernel_count"] and ks.loc["memory", "count"] == r["memcpy_count"]
    temporal = hta_compat.temporal_breakdown(hta_compat.hta_frames({0: t}))
    assert 0 < temporal["kernel_time(us)"].iloc[0]
    ls = kernels.launch_stats(t)
    assert len(ls) == r["kernel_count"] and (ls["api"] == "cudaLaunchKernel").all()
    back = aonkit.load(t.save(tmp_path / "c.parquet"))
    assert back.equals(t) and back.event_json(100) == t.event_json(100)
