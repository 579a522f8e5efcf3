"""Summary analysis, interval kernel, CLI and demo on real and bundled traces."""

from __future__ import annotations

import json
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
    cached = aonkit.load(tmp_path / "out" / "gpu_synthetic_rank0.aon.parquet")
    assert cached.equals(aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"))
    assert len(aonkit.load(tmp_path / "out", separate=True)) == 4  # a 2-rank job and two CPU runs
    with pytest.raises(aonkit.JobError, match="cpu_mlp"):  # ... which are not one job
        aonkit.load(tmp_path / "out")
    report = (tmp_path / "out" / "gpu_synthetic_rank0.report.html").read_text(encoding="utf-8")
    assert "cdn.bokeh.org" not in report and "Bokeh" in report
    # the page links each report, shows shares as percentages and memory in units
    for name in ("gpu_synthetic_rank0", "gpu_synthetic_rank1", "cpu_mlp", "cpu_generate"):
        assert f"<a href='{name}.report.html'>" in page
    assert "85 GB" in page and "85018279936" not in page and " %</td>" in page
    # the demo says what the samples plant: the straggler, exposed communication, host-bound idle, the slow step,
    # the memory-bound kernel far below its roof
    out = proc.stdout[proc.stdout.index("What to look at first"):]
    assert "rank 1 arrives last at 95% of 132 collectives" in out
    assert "rank 0: 26% of the communication" in out and "waiting for the host" in out and "step 4 takes" in out
    assert "rank 0: 4 calls of one memory-bound reduction op run at 9% of the memory roof" in out
    assert "What to look at first" in page and "rank 1 arrives last" in page
    # and the generation's step times, fitted to its passes
    assert "cpu_generate.pt.trace.json.gz: step time fitted to 40 traced passes (dur_ns):" in out


def test_salvage_has_help_on_every_subcommand() -> None:
    import argparse

    from aonkit.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {name: next((a.help for a in p._actions if "--salvage" in a.option_strings), None)
             for name, p in sub.choices.items()}  # fmt: skip
    assert {n for n, h in helps.items() if h is not None} >= {"summary", "cache", "hta-report", "report"}
    assert all("truncated" in h for h in helps.values() if h is not None)


def test_hta_report_writes_to_a_default_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from aonkit.cli import build_parser

    monkeypatch.chdir(tmp_path)
    assert main(["hta-report", str(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")]) == 0
    assert (tmp_path / "hta-report" / "temporal_breakdown.csv").stat().st_size > 0
    assert "hta-report" in capsys.readouterr().out
    assert "default: hta-report/" in build_parser()._subparsers._group_actions[0].choices["hta-report"].format_help()


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aonkit: error: "), err
    return lines[0]


def test_cli_errors_are_one_line_with_file_and_advice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}, {"ph": "X", "na')
    assert main(["summary", str(cut)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "cut.json" in line and "--salvage" in line
    assert main(["summary", "--salvage", str(cut)]) == 0 and "truncated" in capsys.readouterr().out
    assert main(["summary", str(tmp_path / "nope.json")]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "nope.json" in line and "check the path" in line
    taken = tmp_path / "taken"
    taken.write_text("a file where the report's folder should go")
    assert main(["hta-report", str(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"), "--out", str(taken)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(taken) in line and "another path" in line


@pytest.mark.parametrize("case", ["missing", "corrupt", "out_is_a_file"])
def test_cli_process_fails_with_one_stderr_line(tmp_path: Path, case: str) -> None:
    bad = tmp_path / "corrupt.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00 this is not gzip data")
    taken = tmp_path / "taken.csv"
    taken.write_text("x")
    argv = {"missing": ["summary", str(tmp_path / "missing.json")], "corrupt": ["summary", str(bad)],
            "out_is_a_file": ["hta-report", str(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz"), "--out", str(taken)]}
    named = {"missing": "missing.json", "corrupt": "corrupt.json.gz", "out_is_a_file": "taken.csv"}[case]
    proc = subprocess.run([sys.executable, "-m", "aonkit.cli", *argv[case]], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)  # fmt: skip
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert named in _one_error_line(proc.stderr)


def test_summary_text_names_an_unlisted_device_in_one_pair_of_parentheses(tmp_path: Path) -> None:
    import json

    from aonkit.report.text import format_summary

    k = {"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 7, "ts": 10, "dur": 5,
         "args": {"device": 1, "stream": 7, "correlation": 1}}  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": [k]}))
    text = format_summary(summarize(aonkit.load(path)))
    assert "device 1 (not in deviceProperties)" in text and "((" not in text


def test_error_line_for_os_and_parquet_errors() -> None:
    import pyarrow as pa

    from aonkit.cli import error_line
    from aonkit.errors import TraceFormatError

    assert error_line(PermissionError(13, "Permission denied", "out/t.csv")) == (
        "out/t.csv: Permission denied; check the permissions")  # fmt: skip
    assert error_line(OSError(28, "No space left on device", "out/t.csv")).startswith("out/t.csv: No space left")
    arrow = error_line(pa.lib.ArrowInvalid("Parquet magic bytes not found\nin footer"), inputs=["t.aon.parquet"])
    assert "t.aon.parquet" in arrow and "\n" not in arrow and "re-create" in arrow
    assert error_line(TraceFormatError("cannot read the file (Permission denied)", path="t.json")).endswith(
        "(t.json); check that it exists and is readable")  # fmt: skip
    assert error_line(KeyError("a bug in aonkit")) is None  # bugs keep their traceback


def test_reader_warnings_are_raised_and_the_cli_says_each_once(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """What a reader says about its input is an AonkitWarning and in trace.warnings; the CLI prints one line of it."""
    import aonkit

    path = tmp_path / "neg.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "ts": i, "dur": -1} for i in range(3)]}))
    with pytest.warns(aonkit.AonkitWarning, match="negative dur") as got:
        trace = aonkit.load(path)
    assert [str(w.message) for w in got] == trace.warnings and len(trace.warnings) == 1
    assert main(["summary", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.count("negative dur") == 1 and "negative dur" not in err  # the summary lists it itself
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 0  # no lane to draw: still a page
    out, err = capsys.readouterr()
    assert err.count("aonkit: warning: 3 event(s) have a negative dur") == 1 and "Traceback" not in err
