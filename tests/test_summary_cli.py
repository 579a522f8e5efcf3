"""Summary analysis, interval kernel, CLI and demo on real and bundled traces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit._kernels.intervals import union_length
from aonkit.analysis.summary import summarize
from aonkit.cli import main

from .conftest import ROOT, SAMPLE_TRACES, require_shared


def _naive_union(start: np.ndarray, end: np.ndarray) -> int:
    covered: set[int] = set()
    for s, e in zip(start.tolist(), end.tolist()):
        covered.update(range(s, e))
    return len(covered)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 50, 300])
def test_union_length_matches_naive(rng: np.random.Generator, n: int) -> None:
    start = np.sort(rng.integers(0, 1000, n)).astype(np.int64)
    end = start + rng.integers(0, 60, n)
    assert union_length(start, end) == _naive_union(start, end)


@pytest.mark.parametrize("n", [0, 1, 7, 200])
def test_intersection_length_matches_naive(rng: np.random.Generator, n: int) -> None:
    from aonkit._kernels.intervals import intersection_length
    from aonkit.analysis.hta_compat import hta_merge

    def sets():
        s = rng.integers(0, 2000, n).astype(np.int64)
        return hta_merge(s, s + rng.integers(0, 80, n))

    (sa, ea), (sb, eb) = sets(), sets()
    pa = {t for a, b in zip(sa, ea) for t in range(a, b)}
    pb = {t for a, b in zip(sb, eb) for t in range(a, b)}
    assert intersection_length(sa, ea, sb, eb) == len(pa & pb)


@pytest.mark.parametrize("which", ["shared", "sample"])
def test_summary_busy_time_is_the_union_of_kernels(which: str) -> None:
    if which == "shared":  # a real 4-stream trace
        t = aonkit.load(require_shared() / "gpupuzzlers/streams/non_blocking/non_blocking_streams.json.gz")
    else:  # compute and NCCL streams overlap here
        t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    s = summarize(t)
    k = t.kernels
    assert s.gpu_busy_ns <= int(k["dur_ns"].sum())  # streams overlap: union <= sum
    # reference: walk the timeline's boundaries and add time where any kernel runs
    edges = sorted([(int(a), 1) for a in k["ts_ns"]] + [(int(a + d), -1) for a, d in zip(k["ts_ns"], k["dur_ns"])])
    busy, depth, last = 0, 0, None
    for t, step in edges:
        if depth > 0:
            busy += t - last
        depth += step
        last = t
    assert s.gpu_busy_ns == busy <= int(k["dur_ns"].sum())
    if which == "sample":
        assert busy < int(k["dur_ns"].sum())
    assert s.top_kernels["total_ns"].is_monotonic_decreasing
    assert abs(s.top_kernels["share"].sum() - s.top_kernels["total_ns"].sum() / k["dur_ns"].sum()) < 1e-9


def test_summary_cli_on_real_trace_prints_facts_not_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    shared = require_shared()
    path = shared / "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 80GB HBM3" in out and "18,221 events" in out and "top kernels" in out
    trace = aonkit.load(path)
    assert "metadata" in trace.metadata  # the file has an environment dump ...
    assert "redacted" not in out and "HF_TOKEN" not in out and "env" not in out  # ... never echoed


def test_summary_cli_reports_errors_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [}')
    assert main(["summary", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.json" in err and "line 1, column 18" in err


def test_demo_command_writes_an_openable_page(tmp_path: Path) -> None:
    if not SAMPLE_TRACES.is_dir():
        pytest.skip("sample_traces/ missing")
    proc = subprocess.run(
        [sys.executable, "-m", "aonkit.cli", "demo", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "out" / "summary.html").read_text()
    assert "NVIDIA H100 80GB HBM3" in page and "<script" not in page
    cached = aonkit.load(tmp_path / "out" / "gpu_synthetic_rank0.parquet")
    assert cached.equals(aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"))
    assert len(aonkit.load(tmp_path / "out")) == 3  # the cache folder loads as a TraceSet
    report = (tmp_path / "out" / "gpu_synthetic_rank0.report.html").read_text(encoding="utf-8")
    assert "cdn.bokeh.org" not in report and "Bokeh" in report
