"""Cross-rank collectives on real 2-rank traces and on a generated 64-rank job with planted problems."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis.collectives import clock_offsets, collectives, comm_kernels, exposed_communication, stragglers

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


def _job(tmp_path: Path, **kw) -> tuple[aonkit.TraceSet, dict[int, int]]:
    offsets = write_job(tmp_path / "job", ranks=8, straggler=3, exposed_ranks=(), **kw)
    return aonkit.load(tmp_path / "job"), offsets


def _true(offsets: dict[int, int]) -> np.ndarray:
    return np.array([offsets[r] - offsets[0] for r in sorted(offsets)])


def test_sequence_numbers_match_across_a_late_window(tmp_path: Path) -> None:
    traces, offsets = _job(tmp_path, seq=True, late_ranks=(5,))
    coll, part = collectives(traces)
    assert len(coll) == 5 and (coll["match_by"] == "seq").all()  # seq 1 is missing on rank 5
    assert coll["seq"].tolist() == [2, 3, 4, 5, 6] and (coll["last_rank"] == 3).all()
    assert np.abs(clock_offsets(traces).to_numpy() - _true(offsets)).max() <= 1_000


def test_message_sizes_realign_a_late_window(tmp_path: Path) -> None:
    traces, offsets = _job(tmp_path, vary_sizes=True, late_ranks=(5, 6))
    coll, part = collectives(traces)
    assert len(coll) == 5 and (coll["last_rank"] == 3).all()
    assert np.allclose(coll["transfer_ns"], 400_000, atol=1_000)
    assert np.abs(clock_offsets(traces).to_numpy() - _true(offsets)).max() <= 1_000
    shifted = part.merge(coll[["group", "seq"]])  # every rank's arrival of a collective within the skew
    assert (shifted.groupby("seq")["arrival_ns"].agg(np.ptp) < 1_000_000).all()


def test_args_from_record_param_comms(tmp_path: Path) -> None:
    traces, _ = _job(tmp_path, args_on="param_comms", seq=True)
    k = comm_kernels(traces[0])
    assert (
        (k["coll"] == "allreduce").all()
        and (k["bytes"] == 25_000_000 * 4).all()
        and k["seq"].tolist() == list(range(1, 7))
    )
    coll, _ = collectives(traces)
    assert len(coll) == 6 and (coll["match_by"] == "seq").all()


def test_kernels_without_args_match_by_stream_and_order(tmp_path: Path) -> None:
    traces, offsets = _job(tmp_path, args_on="none")
    coll, _ = collectives(traces)
    assert len(coll) == 6 and (coll["match_by"] == "order").all() and (coll["bytes"] == -1).all()
    assert np.abs(clock_offsets(traces).to_numpy() - _true(offsets)).max() <= 1_000


def test_profiler_steps_align_ranks_without_collectives(tmp_path: Path) -> None:
    traces, offsets = _job(tmp_path, collectives=False, profiler_steps=True)
    got = clock_offsets(traces)
    assert set(got.attrs["method"].values()) == {"reference", "profiler_steps"}
    assert np.abs(got.to_numpy() - _true(offsets)).max() <= 20_000  # the annotations' jitter


def test_no_common_evidence_warns(tmp_path: Path) -> None:
    traces, _ = _job(tmp_path, collectives=False)
    with pytest.warns(UserWarning, match="not aligned"):
        got = clock_offsets(traces)
    assert (got == 0).all()


def test_best_shift() -> None:
    from aonkit.analysis.comm_match import best_shift

    ref = np.array([1, 2, 3, 4, 5, 6])
    assert best_shift(ref, ref[2:]) == -2 and best_shift(ref[1:], ref) == 1
    assert best_shift(np.ones(6), np.ones(5)) == 0  # no evidence: no shift


def test_real_two_rank_trace_offsets_agree_with_profiler_steps() -> None:
    from aonkit.analysis.comm_match import offsets, profiler_step_starts

    traces = aonkit.load(require_shared() / "hta/trace_filter")
    by_coll = clock_offsets(traces)
    assert by_coll.attrs["method"] == {0: "reference", 1: "collectives"}
    empty = pd.DataFrame(columns=["group", "seq", "rank", "end_ns"])
    by_steps = offsets(empty, {r: profiler_step_starts(t) for r, t in traces.items()}, 0)
    assert by_steps.attrs["method"][1] == "profiler_steps"
    assert abs(int(by_steps[1]) - int(by_coll[1])) < 1_000_000  # same clocks within a ms


def test_subgroups_match_among_their_own_ranks() -> None:
    from aonkit.analysis.comm_match import assign_keys, matched

    def table(pgs: list[str], t0: int) -> pd.DataFrame:
        n = len(pgs)
        return pd.DataFrame({"name": ["ncclDevKernel_AllReduce(x)"] * n, "stream": 20, "ts_ns": t0 + np.arange(n) * 10,
                             "end_ns": t0 + np.arange(n) * 10 + 5, "coll": "allreduce", "in_nelems": np.nan,
                             "out_nelems": np.nan, "pg": pgs, "seq": np.nan})  # fmt: skip

    per = {0: table(["0", "1", "0"], 0), 1: table(["0", "1", "0"], 3), 2: table(["0", "0"], 7), 3: table(["2"], 9)}
    m = matched(assign_keys(per))
    assert sorted(m.loc[m["group"] == "pg:1|allreduce", "rank"]) == [0, 1]  # a subgroup of ranks 0 and 1
    assert sorted(m.loc[m["group"] == "pg:0|allreduce", "rank"]) == [0, 0, 1, 1, 2, 2]
    assert "pg:2|allreduce" not in set(m["group"])  # one rank alone is no collective


def test_job_without_collectives_gives_empty_tables_and_one_warning(job, tmp_path: Path) -> None:
    from aonkit.errors import AonkitWarning

    write_job(tmp_path / "quiet", ranks=2, straggler=1, exposed_ranks=(), collectives=False)
    quiet = aonkit.load(tmp_path / "quiet")
    assert quiet.ranks == [0, 1] and sum(len(t.kernels) for t in quiet.values()) > 0  # compute kernels, no NCCL
    want_s = stragglers(job[0])
    want_c, want_p = collectives(job[0])
    with pytest.warns(AonkitWarning, match="no collectives in the job") as caught:
        s = stragglers(quiet)
    assert len(caught) == 1 and caught[0].filename == __file__  # points at the caller's line, says it once
    assert s.empty and list(s.columns) == list(want_s.columns) and (s.dtypes == want_s.dtypes).all()
    with pytest.warns(AonkitWarning, match="no collectives in the job"):
        coll, part = collectives(quiet)
    assert coll.empty and list(coll.columns) == list(want_c.columns) and part.empty
    assert list(part.columns) == list(want_p.columns) and (part.dtypes == want_p.dtypes).all()
    numeric = want_c.select_dtypes("number").columns  # "name" is categorical or str, depending on the ranks
    assert (coll[numeric].dtypes == want_c[numeric].dtypes).all()
