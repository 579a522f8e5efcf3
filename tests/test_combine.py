"""A job's ranks as one trace on one clock: ids kept apart, lanes per rank, original text reachable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit.analysis.collectives import clock_offsets
from aonkit.analysis.combine import combine_ranks
from aonkit.analysis.correlation import gpu_links

from .conftest import ROOT, SAMPLE_TRACES
from .gen_ranks import write_job


@pytest.fixture(scope="module")
def job() -> aonkit.TraceSet:
    return aonkit.load([SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz", SAMPLE_TRACES / "gpu_synthetic_rank1.json.gz"])


def test_events_ids_and_text(job: aonkit.TraceSet) -> None:
    c = combine_ranks(job)
    rank = c.events["rank"].to_numpy()
    assert len(c.events) == sum(len(t.events) for t in job.values()) and set(rank) == {0, 1}
    # links never cross ranks, and each rank keeps as many as it had alone
    links = gpu_links(c)
    ok = links["launch_row"].to_numpy() >= 0
    assert (rank[links["gpu_row"].to_numpy()[ok]] == rank[links["launch_row"].to_numpy()[ok]]).all()
    assert ok.sum() == sum(int((gpu_links(t)["launch_row"] >= 0).sum()) for t in job.values())
    first1 = int(np.flatnonzero(rank == 1)[0])
    assert c.event_json(first1 + 7) == job[1].event_json(7)
    assert str(c.events["pid"].iloc[first1 + 7]).endswith("@rank1")


def test_clock_alignment_and_lanes(tmp_path: Path) -> None:
    # GIVEN a generated 4-rank job with known clock offsets
    truth = write_job(tmp_path, ranks=4, straggler=2, exposed_ranks=(1,), seed=3)
    job = aonkit.load(tmp_path)
    off = clock_offsets(job)
    c = combine_ranks(job)
    assert c.metadata["clock_offsets_ns"] == {int(r): int(v) for r, v in off.items()}
    assert all(abs((off[r] - off[0]) - (truth[r] - truth[0])) < 1_000 for r in job)  # found within 1 us
    for r in job:  # THEN each rank's events moved by exactly its offset
        mine = c.events["rank"].to_numpy() == r
        assert (c.events["ts_ns"].to_numpy()[mine] == job[r].events["ts_ns"].to_numpy() - int(off[r])).all()
    lanes = aonkit.timeline_index(c).lanes
    assert lanes["rank"].is_monotonic_increasing and set(lanes["rank"]) == {0, 1, 2, 3}
    assert all(lab.startswith(f"rank {r} ") for r, lab in zip(lanes["rank"], lanes["label"]))
    assert "@rank" not in " ".join(lanes["label"])


def test_combined_report_from_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "job.html"
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    for r in (0, 1):
        (job_dir / f"gpu_synthetic_rank{r}.json.gz").symlink_to(SAMPLE_TRACES / f"gpu_synthetic_rank{r}.json.gz")
    proc = subprocess.run([sys.executable, "-m", "aonkit.cli", "report", str(job_dir), "--combined", "-o",
                           str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    page = out.read_text(encoding="utf-8")
    assert "rank 1 GPU 0 stream 7" in page and "rank 0 GPU 0 stream 7" in page and 1e6 < len(page) < 20e6
    # sample_traces/ also holds an unrelated CPU run: it is refused as one job, in one line naming it
    proc = subprocess.run([sys.executable, "-m", "aonkit.cli", "report", str(SAMPLE_TRACES), "--combined", "-o",
                           str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600)  # fmt: skip
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1 and "cpu_mlp.pt.trace.json.gz" in proc.stderr


def test_dashboard_of_a_job_has_lanes_per_rank(job: aonkit.TraceSet) -> None:
    from aonkit.widgets import Dashboard

    d = Dashboard(job, width_px=600)
    labels = [lane["label"] for lane in d.timeline.lanes]
    assert labels[0] == "rank 0 GPU 0 stream 7" and "rank 1 GPU 0 stream 7" in labels
    assert d.overview.summary.n_events == sum(len(t.events) for t in job.values())


def test_text_of_some_rows_is_read_from_each_rank(job: aonkit.TraceSet, rng: np.random.Generator) -> None:
    c = combine_ranks(job)
    rows = np.sort(rng.choice(len(c.events), 300, replace=False))[::-1]  # out of order, both ranks
    some = [c.event_json(int(i)) for i in rows]
    args = c.arg_values("correlation", rows)
    assert c._raw._buf is None  # no concatenation of the ranks' texts so far
    buf, start, end = c._raw.spans()
    assert some == [json.loads(buf[start[i]:end[i]].tobytes()) for i in rows]
    assert args == c.arg_values("correlation", rows)
