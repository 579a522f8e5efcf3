"""Ranks known to share a host share its clock, and a job's samples are combined once per node."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis.collectives import clock_offsets
from aonkit.analysis.combine import combine_ranks, combined_samples
from aonkit.sources.samples import part_label, split_metric
from aonkit.timeline.view_data import counter_series

from .conftest import load_events

MS = 1_000_000
T0 = 1_000_000_000_000  # ns: small enough that the JSON's float microseconds keep every ns


def _steps(tmp_path, rank: int, start_ns: int, n: int = 4, step_ns: int = 50 * MS) -> aonkit.Trace:
    """A rank's trace of ``n`` ProfilerSteps from ``start_ns`` (its own clock), an op in each and one before."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": start_ns / 1e3 - 10, "dur": 1}]
    for k in range(n):
        ts = (start_ns + k * step_ns) / 1e3
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1, "ts": ts,
                   "dur": step_ns / 1e3 - 1})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts + 1, "dur": 1000})
    return load_events(tmp_path / f"r{rank}", ev)


def _job(tmp_path, starts: list[int], hosts: dict[int, str] | None = None) -> aonkit.TraceSet:
    job = aonkit.TraceSet({r: _steps(tmp_path, r, s) for r, s in enumerate(starts)})
    if hosts is not None:
        job.hosts = hosts
    return job


# rank 1 passes every boundary 5 ms after rank 0 on the same host; host b's clock is 1 s ahead
STARTS = [T0, T0 + 5 * MS, T0 + 1000 * MS + MS // 5, T0 + 1005 * MS]


def test_ranks_of_one_host_share_its_clock_so_a_late_rank_stays_late(tmp_path) -> None:
    plain = clock_offsets(_job(tmp_path / "a", STARTS))
    assert plain.tolist() == [0, 5 * MS, 1000 * MS + MS // 5, 1005 * MS]  # the step starts: lateness taken for clock
    assert set(plain.attrs["method"].values()) == {"reference", "profiler_steps"}
    job = _job(tmp_path / "b", STARTS, {0: "a", 1: "a", 2: "b", 3: "b"})
    off = clock_offsets(job)
    assert off.tolist() == [0, 0, 1002 * MS + MS // 2 + MS // 10, 1002 * MS + MS // 2 + MS // 10]  # b: the median
    assert off.attrs["method"] == {0: "reference", 1: "same_host", 2: "profiler_steps per host",
                                   3: "profiler_steps per host"}  # fmt: skip
    c = combine_ranks(job)
    steps = c.events[c.events["name"] == "ProfilerStep#0"].sort_values("rank")
    assert (steps["ts_ns"].to_numpy() - T0).tolist() == [0, 5 * MS, -2 * MS - 2 * MS // 5, 2 * MS + 2 * MS // 5]


def test_a_rank_with_no_estimate_takes_its_hosts_offset(tmp_path) -> None:
    ranks = {0: _steps(tmp_path, 0, STARTS[0]), 1: _steps(tmp_path, 1, STARTS[2], n=0),
             2: _steps(tmp_path, 2, STARTS[2])}
    job = aonkit.TraceSet(ranks)  # rank 1 has no step to align on: alone, it would not be aligned (a warning)
    with pytest.warns(aonkit.AonkitWarning, match=r"ranks \[1\] share no matched collective"):
        assert clock_offsets(job)[1] == 0
    job.hosts = {0: "a", 1: "b", 2: "b"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        off = clock_offsets(job)
    assert off[1] == off[2] == 1000 * MS + MS // 5 and off.attrs["method"][1] == "profiler_steps per host"


def _samples(values: list[float], device: int = 0, t0: int = T0, metric: str = "gpu_util_pct") -> pd.DataFrame:
    ts = t0 + np.arange(len(values), dtype=np.int64) * 100 * MS
    return pd.DataFrame({"ts_ns": ts, "device": device, "metric": metric, "value": values})


def test_one_nodes_samples_are_kept_once_and_two_nodes_are_two_series(tmp_path) -> None:
    job = _job(tmp_path, STARTS[:2], {0: "a", 1: "a"})
    job[0].with_samples(_samples([1.0, 2.0, 3.0]))
    job[1].with_samples(_samples([2.0, 3.0, 4.0], t0=T0 + 100 * MS))  # the same node over an overlapping window
    c = combine_ranks(job)
    assert c.samples["value"].tolist() == [1.0, 2.0, 3.0, 4.0] and set(c.samples["metric"]) == {"gpu_util_pct"}
    series = counter_series(c)
    assert [s[1] for s in series] == ["gpu_util_pct (GPU 0)"]
    # the same samples on two hosts: two nodes, each on its own clock, each its own series
    job.hosts = {0: "a", 1: "b"}
    job[1].samples = None
    job[1].with_samples(_samples([5.0, 6.0], t0=T0 + 1000 * MS))
    c = combine_ranks(job)
    off = c.metadata["clock_offsets_ns"]
    assert off[1] == 5 * MS  # profiler_steps per host: one rank on host b
    s = c.samples
    assert sorted(set(s["metric"])) == ["gpu_util_pct@r0", "gpu_util_pct@r1"]
    mine = s[s["metric"] == "gpu_util_pct@r1"]
    assert (mine["ts_ns"] - T0).tolist() == [995 * MS, 1095 * MS]  # shifted by rank 1's offset
    assert sorted(x[1] for x in counter_series(c)) == ["gpu_util_pct (GPU 0, node of rank 0)",
                                                       "gpu_util_pct (GPU 0, node of rank 1)"]  # fmt: skip


def test_without_hosts_equal_samples_are_one_node_and_different_ones_two(tmp_path) -> None:
    job = _job(tmp_path, [T0, T0])
    for r in (0, 1):
        job[r].with_samples(_samples([1.0, 2.0]))
    assert combine_ranks(job).samples["value"].tolist() == [1.0, 2.0]
    job[1].samples = None
    job[1].with_samples(_samples([1.0, 9.0]))
    assert sorted(set(combine_ranks(job).samples["metric"])) == ["gpu_util_pct@r0", "gpu_util_pct@r1"]
    assert combined_samples({0: job[0]}, pd.Series({0: 0})) is not None
    assert combine_ranks(_job(tmp_path / "none", [T0, T0])).samples is None


def test_a_nodes_suffix_is_read_back_with_the_parts_of_a_device() -> None:
    assert split_metric("memory_used_bytes.gi2@r12") == ("memory_used_bytes", "gi2@r12")
    assert split_metric("memory_used_bytes.4242@r3") == ("memory_used_bytes", "4242@r3")
    assert split_metric("gpu_util_pct@r1") == ("gpu_util_pct", "@r1")
    assert split_metric("memory_used_bytes.gi2") == ("memory_used_bytes", "gi2")
    assert split_metric("pcie.tx_bytes") == ("pcie.tx_bytes", "")  # a dot that is no part of a device
    assert part_label(1, "gi2@r12") == "GPU 1 gi2, node of rank 12"
    assert part_label(-1, "@r3") == "host, node of rank 3"
    assert part_label(0, "7") == "GPU 0 pid 7"
