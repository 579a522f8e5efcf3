"""A traced job's folder as aonkit.load reads it, and the rank the job waited for at its step boundaries.

The manifest's lags as a table, the samples on each rank, the rule naming the latest rank, and the finding.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aonkit
from aonkit.analysis.combine import combine_ranks
from aonkit.analysis.findings import findings
from aonkit.analysis.step_lags import NOT_TOGETHER, latest_rank
from aonkit.analysis.steps import profiler_steps
from aonkit.errors import TraceFormatError
from aonkit.live.trace import latest_line, load_traced_job
from aonkit.sources.traced_job import JOB_MANIFEST, JOB_SAMPLES, read_job_manifest, step_lag_table
from aonkit.units import fmt_ns

from .conftest import SAMPLE_TRACES


def _ranks(*lags, hosts=None) -> list[dict]:
    return [{"rank": r, "pid": 100 + r, "boundary_lag_ms": lag, **({"host": hosts[r]} if hosts else {})}
            for r, lag in enumerate(lags)]  # fmt: skip


def test_the_table_keeps_every_rank_with_nan_for_a_lag_not_measured() -> None:
    t = step_lag_table([{"rank": 3, "host": "b", "boundary_lag_ms": 5.1}, {"rank": 0, "boundary_lag_ms": 0},
                        {"rank": 1, "host": "a", "boundary_lag_ms": None}, {"rank": None}])  # fmt: skip
    assert t["rank"].tolist() == [-1, 0, 1, 3] and t["host"].tolist() == ["", "", "a", "b"]
    assert [str(d) for d in t.dtypes] == ["int64", "object", "object", "float64"]
    lag = t["boundary_lag_ms"].to_numpy()
    assert np.isnan(lag[[0, 2]]).all() and lag[[1, 3]].tolist() == [0.0, 5.1]
    assert list(step_lag_table([]).columns) == ["rank", "host", "boot_id", "boundary_lag_ms"]


@pytest.mark.parametrize("bad", [{"rank": "1"}, {"rank": True}, {"rank": 1.0}, {"rank": 2**31}, {"rank": 2**63},
                                 {"rank": -2}, {"rank": 0, "boundary_lag_ms": "5"},
                                 {"rank": 0, "boundary_lag_ms": math.inf}, {"rank": 0, "boundary_lag_ms": True}, [0]])
def test_values_a_manifest_cannot_hold_are_refused(bad) -> None:
    with pytest.raises(ValueError, match="rank"):
        step_lag_table([bad])


def test_the_latest_rank_is_named_only_when_the_ranks_step_together_and_differ_by_a_millisecond() -> None:
    late = latest_rank(step_lag_table(_ranks(0.0, 0.4, 5.1, None)))
    assert late is not None and (late.rank, late.first, late.clocks) == (2, 0, 1)
    assert late.lag_ms == pytest.approx(5.1)
    assert latest_rank(step_lag_table(_ranks(0.3, 1.2))) is None  # 0.9 ms apart
    assert latest_rank(step_lag_table(_ranks(0.3, 1.3))).rank == 1  # 1.0 ms: named
    assert latest_rank(step_lag_table(_ranks(None, 7.0))) is None  # one lag known
    assert latest_rank(step_lag_table(_ranks(0.0, 5.1)), [f"rank 1 ...: it may not have traced {NOT_TOGETHER}"]) is None
    assert latest_rank(step_lag_table(_ranks(3.0, 0.0, 3.0))) == (0, 1, 3.0, 1)  # ties: the lowest rank
    assert latest_rank(step_lag_table(_ranks(0.0, 2.0, hosts=["a", "b"]))).clocks == 2


def _traced_job(tmp_path: Path, lags: list, hosts: list[str] | None = None, messages: list[str] = ()) -> Path:
    """A job folder as ``aonkit trace --job`` leaves it: rank<N>.json.gz and the manifest (the sample job's ranks)."""
    out = tmp_path / "job"
    out.mkdir()
    for r in range(len(lags)):
        shutil.copy(SAMPLE_TRACES / f"gpu_synthetic_rank{r}.json.gz", out / f"rank{r}.json.gz")
    manifest = {"status": "ok", "source": "aonkit trace --job", "job_id": "J1", "messages": list(messages),
                "ranks": _ranks(*lags, hosts=hosts)}  # fmt: skip
    (out / JOB_MANIFEST).write_text(json.dumps(manifest))
    return out


def test_a_traced_job_carries_its_lags_and_the_late_rank_is_a_finding(tmp_path: Path) -> None:
    job = load_traced_job(_traced_job(tmp_path, [0.0, 6.5]))
    assert job.step_lags["boundary_lag_ms"].tolist() == [0.0, 6.5] and list(job.trace_notes) == []
    f = findings(job).set_index("finding")
    step_ns = float(np.median(profiler_steps(job[0])["dur_ns"]))  # the earliest rank's median traced step
    assert f.loc["late_rank", "rank"] == 1
    assert f.loc["late_rank", "value"] == pytest.approx(6.5e6 / step_ns)
    text = f.loc["late_rank", "text"]
    assert text == (f"rank 1 passed each step's boundary 6.5 ms after rank 0 before the trace (8% of its median traced "
                    f"step, {fmt_ns(step_ns)}): the others wait about that long for it in each step's collectives")
    assert latest_line(json.loads((tmp_path / "job" / JOB_MANIFEST).read_text())["ranks"], []).startswith(
        "rank 1 passed each step's boundary 6.5 ms after rank 0 before the trace")


def test_ranks_on_two_hosts_are_said_to_include_their_clocks_offset(tmp_path: Path) -> None:
    f = findings(load_traced_job(_traced_job(tmp_path, [4.0, 0.0], hosts=["n1", "n2"])))
    text = f.loc[f["finding"] == "late_rank", "text"].iloc[0]
    assert text.startswith("rank 0 passed each step's boundary 4 ms after rank 1 ") and "clocks' offset" in text


def test_no_late_rank_when_the_trace_says_the_ranks_may_not_have_traced_the_same_steps(tmp_path: Path) -> None:
    note = ("rank 1's step boundaries are 30.0 ms from rank 0's, over a quarter of a step: it may not have traced "
            f"{NOT_TOGETHER}")
    job = load_traced_job(_traced_job(tmp_path, [0.0, 30.0], messages=[note]))
    assert list(job.trace_notes) == [note] and "late_rank" not in set(findings(job)["finding"])


def test_a_job_without_a_manifest_has_no_lags_and_a_broken_manifest_is_named(tmp_path: Path) -> None:
    out = _traced_job(tmp_path, [0.0, 6.5])
    (out / JOB_MANIFEST).unlink()
    job = aonkit.load_job(out)
    assert job.step_lags is None and "late_rank" not in set(findings(job)["finding"])
    for text in ("{not json", json.dumps({"ranks": [{"rank": 0, "boundary_lag_ms": "soon"}]}), json.dumps([1]),
                 json.dumps({"ranks": [3]}), json.dumps({"ranks": [], "messages": "one"})):  # fmt: skip
        (out / JOB_MANIFEST).write_text(text)
        for lazy in (False, True):
            with pytest.raises(TraceFormatError, match="not a job manifest") as e:
                aonkit.load(out, lazy=lazy)
            assert e.value.path == str(out / JOB_MANIFEST) and "as a list" in str(e.value)
    assert sorted(aonkit.load(sorted(out.glob("rank*.json.gz")))) == [0, 1]  # what the error suggests


def _samples(device: int, values: list[float]) -> pd.DataFrame:
    ts = 1_700_000_000_000_000_000 + np.arange(len(values), dtype=np.int64) * 100_000_000
    return pd.DataFrame({"ts_ns": ts, "device": device, "metric": "cpu_util_pct", "value": values})


def test_aonkit_load_of_a_traced_job_gives_each_rank_its_own_samples_else_the_jobs(tmp_path: Path) -> None:
    out = _traced_job(tmp_path, [0.0, 6.5])
    _samples(-1, [1.0, 2.0, 3.0]).to_parquet(out / JOB_SAMPLES)
    _samples(0, [7.0, 8.0]).to_parquet(out / "rank1.samples.parquet")  # rank 1's own node
    for job in (aonkit.load(out), aonkit.load_job(out), load_traced_job(out)):
        assert sorted(job) == [0, 1] and job.step_lags["boundary_lag_ms"].tolist() == [0.0, 6.5]
        assert job[0].samples["value"].tolist() == [1.0, 2.0, 3.0]
        assert job[1].samples["value"].tolist() == [7.0, 8.0]
    with aonkit.load(out, lazy=True, workers=1) as lazy:  # the lags now, a rank's samples when it is read
        assert lazy.step_lags["boundary_lag_ms"].tolist() == [0.0, 6.5] and lazy.held == []
        assert [lazy[r].samples["value"].tolist() for r in (1, 0, 1)] == [[7.0, 8.0], [1.0, 2.0, 3.0], [7.0, 8.0]]
        assert len(combine_ranks(lazy).samples) == 5  # two nodes (equal samples would be one)
        eager = lazy.eager()
        assert eager.step_lags.equals(lazy.step_lags) and len(eager[0].samples) == 3
    with aonkit.open_job(out, processes=1) as opened:  # the same call
        assert opened.step_lags["boundary_lag_ms"].tolist() == [0.0, 6.5] and len(opened[0].samples) == 3
    # each file on its own, as aonkit report and summary read a folder: the samples by the rank its name says
    each = {name.split(".")[0]: t for name, t in aonkit.load_each(out).items()}  # (some names: the lazy's caches)
    assert [each[f"rank{r}"].samples["value"].tolist() for r in (0, 1)] == [[1.0, 2.0, 3.0], [7.0, 8.0]]
    for bad in (b"PAR1 not parquet", _samples(0, [1.0]).drop(columns="value").to_parquet()):
        (out / "rank1.samples.parquet").write_bytes(bad)
        with pytest.raises(TraceFormatError, match="unreadable samples") as e:
            aonkit.load_job(out)
        assert e.value.path == str(out / "rank1.samples.parquet")


def test_a_lazy_traced_job_reads_each_samples_file_once(tmp_path: Path, monkeypatch) -> None:
    import aonkit.sources.traced_job as tj

    out = _traced_job(tmp_path, [0.0, 6.5])
    _samples(-1, [1.0, 2.0, 3.0]).to_parquet(out / JOB_SAMPLES)
    read = []
    real = tj._samples
    monkeypatch.setattr(tj, "_samples", lambda path: read.append(path.name) or real(path))
    # GIVEN a lazy job of a traced folder that keeps one rank in memory
    with aonkit.open_job(out, processes=1, keep=1) as lazy:
        # WHEN its ranks are read, dropped and read again
        got = [lazy[r].samples["value"].tolist() for r in (0, 1, 0, 1)]
        # THEN each gets the job's samples, read from the file once
        assert got == [[1.0, 2.0, 3.0]] * 4 and read == [JOB_SAMPLES]
        # AND a file written again is read again
        _samples(-1, [4.0]).to_parquet(out / JOB_SAMPLES)
        os.utime(out / JOB_SAMPLES, ns=(1, 1))
        assert lazy[0].samples["value"].tolist() == [4.0] and read == [JOB_SAMPLES] * 2


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                     max_leaves=12)  # fmt: skip
_RANK = st.fixed_dictionaries({}, optional={"rank": _JSON | st.integers(-2, 9) | st.integers(2**31 - 2, 2**64),
                                            "host": _JSON, "boot_id": _JSON,
                                            "boundary_lag_ms": _JSON | st.floats()})  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(manifest=_JSON | st.fixed_dictionaries({}, optional={"ranks": _JSON | st.lists(_RANK, max_size=4),
                                                            "messages": _JSON}))  # fmt: skip
def test_any_manifest_gives_a_table_or_an_error_naming_it(tmp_path_factory, manifest) -> None:
    folder = tmp_path_factory.mktemp("m")
    (folder / JOB_MANIFEST).write_text(json.dumps(manifest, allow_nan=True))
    try:
        table, notes = read_job_manifest(folder)
    except TraceFormatError as e:
        assert e.path == str(folder / JOB_MANIFEST)
        return
    assert list(table.columns) == ["rank", "host", "boot_id", "boundary_lag_ms"]
    assert all(isinstance(n, str) for n in notes) and all(isinstance(b, str) for b in table["boot_id"])
    assert table["rank"].dtype == np.int64 and np.isfinite(table["boundary_lag_ms"].dropna()).all()
    latest_rank(table, notes)  # and the rule reads any table it gives


def test_the_parallel_job_path_reads_the_hosts_too(tmp_path: Path) -> None:
    from aonkit.analysis.collectives import clock_offsets, collectives
    from aonkit.analysis.distributed import job_collectives

    from .gen_ranks import write_job

    write_job(tmp_path, ranks=3, seed=3, clocks={0: 0, 1: 2_000_000, 2: 2_400_000})
    manifest = {"ranks": [{"rank": r, "host": "n1" if r < 1 else "n2"} for r in range(3)], "messages": []}
    (tmp_path / JOB_MANIFEST).write_text(json.dumps(manifest))
    job = aonkit.load_job(tmp_path)
    off = clock_offsets(job)  # host n2: the median of its ranks' collectives (within 1 ms of each other)
    assert off.attrs["method"] == {0: "reference", 1: "collectives per host", 2: "collectives per host"}
    assert off.tolist() == [0, 2_200_000, 2_200_000]
    coll, part, _ = job_collectives(tmp_path, processes=1)
    want, want_part = collectives(job)
    assert coll.equals(want) and part.equals(want_part)
    job.hosts, job.clocks = {}, {}  # each rank on its own collectives: other arrivals
    assert clock_offsets(job).tolist() == [0, 2_000_000, 2_400_000]
    assert not collectives(job)[1]["arrival_ns"].equals(part["arrival_ns"])


def test_ranks_said_to_share_a_host_whose_collectives_disagree_keep_their_own_clocks(tmp_path: Path) -> None:
    from aonkit.analysis.collectives import clock_offsets

    from .gen_ranks import write_job

    write_job(tmp_path, ranks=3, seed=3, clocks={0: 0, 1: 1_500_000, 2: 300_000})  # the manifest: one host
    manifest = {"ranks": [{"rank": r, "host": "n1"} for r in range(3)], "messages": []}
    (tmp_path / JOB_MANIFEST).write_text(json.dumps(manifest))
    with pytest.warns(aonkit.AonkitWarning, match=r"ranks \[1\] are said to share a host"):
        off = clock_offsets(aonkit.load_job(tmp_path))
    assert off.attrs["method"] == {0: "reference", 1: "collectives", 2: "same_host"}  # 0.3 ms: within tolerance
    assert off.tolist() == [0, 1_500_000, 0]


def test_aonkit_summary_of_a_traced_job_ends_with_the_job(tmp_path: Path, capsys) -> None:
    from aonkit.cli import main

    note = "rank 1 (n2): no aonkit daemon on its node: no samples"
    out = _traced_job(tmp_path, [0.0, 6.5], hosts=["n1", "n2"], messages=[note])
    assert main(["summary", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rank 0" in text and "rank 1" in text  # each rank's summary first
    tail = text[text.index("job traced by aonkit trace"):].splitlines()
    assert tail == ["job traced by aonkit trace: 2 rank(s) on 2 host(s)",
                    "  rank 1 passed each step's boundary 6.5 ms after rank 0 before the trace (the latest: the others "
                    "wait for it in each step's collectives) (on each node's clock: the gap includes their clocks' "
                    "offset)", f"  note: {note}"]  # fmt: skip
    assert main(["summary", str(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")]) == 0  # not a job folder: no lines
    assert "job traced" not in capsys.readouterr().out
