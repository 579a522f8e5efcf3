"""Cross-rank collectives on real 2-rank traces and on a generated 64-rank job with planted problems."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit.analysis.collectives import clock_offsets, collectives, exposed_communication, stragglers

from .conftest import require_shared
from .gen_ranks import write_job


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[aonkit.TraceSet, dict[int, int]]:
    out = tmp_path_factory.mktemp("job64")
    offsets = write_job(out)
    return aonkit.load(out), offsets


def test_clock_offsets_recovered(job) -> None:
    traces, offsets = job
    assert traces.ranks == list(range(64))
    got = clock_offsets(traces)
    true = np.array([offsets[r] - offsets[0] for r in range(64)])
    assert np.abs(got.to_numpy() - true).max() <= 1_000  # within 1 us (ts are written in us with 3 decimals)


def test_planted_straggler_found(job) -> None:
    traces, _ = job
    coll, part = collectives(traces)
    assert len(coll) == 6 and (coll["last_rank"] == 37).all()
    assert (coll["skew_ns"] > 400_000).all()
    assert np.allclose(coll["transfer_ns"], 400_000, atol=1_000)
    assert np.allclose(coll["algbw_gbps"], 25_000_000 * 4 / 400_000, rtol=0.01)
    s = stragglers(traces)
    assert s.iloc[0]["rank"] == 37 and s.iloc[0]["share_last"] == 1.0 and s.iloc[0]["own_wait_ns"] == 0
    assert s.iloc[0]["imposed_wait_ns"] == part.loc[part["rank"] != 37, "wait_ns"].sum()


def test_planted_exposed_communication_found(job) -> None:
    traces, _ = job
    share = {r: exposed_communication(t)["exposed_share"].iloc[0] for r, t in traces.items()}
    assert share[5] == 1.0
    assert max(v for r, v in share.items() if r != 5) < 0.2


def test_real_two_rank_trace() -> None:
    traces = aonkit.load(require_shared() / "hta/trace_filter")
    coll, part = collectives(traces)
    assert len(coll) == 10 and set(part["rank"]) == {0, 1}
    assert (coll["skew_ns"] >= 0).all() and (part["wait_ns"] >= 0).all()
    s = stragglers(traces)
    assert s["times_last"].sum() == len(coll)


def test_job_files_are_small(job, tmp_path: Path) -> None:
    traces, _ = job
    assert sum(len(t) for t in traces.values()) == 64 * 6 * 10 - 6 * 1
