"""``findings``: the planted problems of the sample job are found, with the numbers of the analyses behind them."""

from __future__ import annotations

import numpy as np
import pytest

import aonkit
from aonkit.analysis.collectives import exposed_communication, stragglers
from aonkit.analysis.findings import COLUMNS, findings
from aonkit.analysis.idle import idle_summary
from aonkit.analysis.roofline import roofline_table
from aonkit.analysis.steps import profiler_steps

from .conftest import SAMPLE_TRACES, load_events

RANKS = [SAMPLE_TRACES / f"gpu_synthetic_rank{r}.json.gz" for r in (0, 1)]


@pytest.fixture(scope="module")
def job() -> aonkit.TraceSet:
    return aonkit.load(RANKS)


def test_the_sample_jobs_planted_problems_are_found(job) -> None:
    f = findings(job)
    assert list(f.columns) == COLUMNS
    # the straggler: rank 1, with the share of collectives where it arrived last
    lag = f[f["finding"] == "straggler"]
    assert lag["rank"].tolist() == [1]
    s = stragglers(job).set_index("rank")
    assert lag["value"].iloc[0] == s.loc[1, "share_last"] > 0.9
    for rank in (0, 1):
        mine = f[f["rank"] == rank].set_index("finding")
        exp = exposed_communication(job[rank])
        assert mine.loc["exposed_communication", "value"] == pytest.approx(
            exp["exposed_comm_ns"].sum() / exp["comm_ns"].sum())
        idle = idle_summary(job[rank])
        assert mine.loc["gpu_idle", "value"] == pytest.approx(idle["idle_ns"].sum() / idle["span_ns"].sum())
        assert "waiting for the host" in mine.loc["gpu_idle", "text"]  # the data-loading stalls
        steps = profiler_steps(job[rank])
        assert mine.loc["slow_step", "value"] == pytest.approx(steps["dur_ns"].max() / np.median(steps["dur_ns"]))
        assert "step 4 " in mine.loc["slow_step", "text"]  # the planted 30 ms stall
        # the planted slow log_softmax: the one op far below its roof, at its roofline table's fraction
        roof = roofline_table(job[rank])
        soft = roof[roof["name"] == "aten::log_softmax"]
        below = f[(f["rank"] == rank) & (f["finding"] == "below_roof")]
        assert len(below) == 1 and "memory-bound reduction op" in below["text"].iloc[0]
        assert below["value"].iloc[0] == pytest.approx(soft["roofline_ns"].sum() / soft["dur_ns"].sum())
        assert below["value"].iloc[0] < 0.1
    # rank 0 waits for rank 1 at the all-reduces: more of its communication is exposed
    exposed = f[f["finding"] == "exposed_communication"].set_index("rank")["value"]
    assert exposed[0] > exposed[1]


def test_texts_carry_numbers_and_no_names_from_the_trace(job) -> None:
    text = " ".join(findings(job)["text"])
    names = set(job[0].kernels["name"].astype(str)) | set(job[0].cpu_ops["name"].astype(str))
    assert not any(n in text for n in names if len(n) > 3)


def test_a_steady_busy_trace_has_nothing_to_report(tmp_path) -> None:
    ev = []
    for i in range(50):  # back-to-back kernels, launched well ahead: no idle, no communication, no steps
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": i,
                   "dur": 0.5, "args": {"correlation": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 100 + 10 * i, "dur": 10,
                   "args": {"stream": 7, "correlation": i + 1, "device": 0}})
    f = findings(load_events(tmp_path, ev))
    assert f.empty and list(f.columns) == COLUMNS
