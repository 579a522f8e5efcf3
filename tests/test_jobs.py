"""Job directories: one trace per rank, a cache stands in for its source, different runs are refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import aonkit
from aonkit.cache import cache_path_for, sidecar_path
from aonkit.cli import main

from .conftest import ROOT, SAMPLE_TRACES


def write_rank(path: Path, rank: int | None = None, world: int | None = None, *, base_ns: int = 1_700_000_000 * 10**9,
               n: int = 5, extra: dict | None = None) -> Path:
    """A small Kineto trace: ``n`` kernels with launches, optionally with ``distributedInfo``."""
    ev = []
    for i in range(n):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                   "ts": 10.0 * i, "dur": 2, "args": {"correlation": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": f"k{i % 2}", "pid": 0, "tid": 7, "ts": 10.0 * i + 3,
                   "dur": 4 + (rank or 0), "args": {"correlation": i + 1, "device": 0, "stream": 7}})
    doc: dict = {"traceEvents": ev, "baseTimeNanoseconds": base_ns, **(extra or {})}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world or 2}
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    d = tmp_path / "job"
    d.mkdir()
    for r in (0, 1):
        write_rank(d / f"rank{r}.json", r, 2)
    return d


def test_a_cached_job_directory_keeps_its_ranks(job_dir: Path, tmp_path: Path) -> None:
    before = aonkit.load(job_dir)
    assert main(["cache", str(job_dir)]) == 0  # a directory, like every other command
    assert sorted(p.name for p in job_dir.iterdir()) == [
        "rank0.aon.meta.json", "rank0.aon.parquet", "rank0.aon.text.parquet", "rank0.json", "rank1.aon.meta.json",
        "rank1.aon.parquet", "rank1.aon.text.parquet", "rank1.json"]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fresh cache is used silently
        job = aonkit.load(job_dir)
    assert job.ranks == [0, 1]
    assert all(job[r]._raw._loader is not None for r in (0, 1))  # read from the caches, not the JSON
    assert all(job[r].equals(before[r]) for r in (0, 1))
    assert main(["hta-report", str(job_dir), "--out", str(tmp_path / "hta")]) == 0
    rows = (tmp_path / "hta" / "temporal_breakdown.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + 2  # header + one row per rank, not four


def test_a_stale_cache_is_left_for_its_source(job_dir: Path) -> None:
    main(["cache", str(job_dir)])
    write_rank(job_dir / "rank1.json", 1, 2, n=7)  # the trace is re-recorded after caching
    with pytest.warns(aonkit.AonkitWarning, match="rank1.aon.parquet.*stale"):
        job = aonkit.load(job_dir)
    assert len(job[1].kernels) == 7 and job[1]._raw._loader is None
    with pytest.warns(aonkit.AonkitWarning, match="stale"):  # the cache opened directly says so too
        assert len(aonkit.load(cache_path_for(job_dir / "rank1.json")).kernels) == 7


def test_unrelated_runs_are_not_one_job(tmp_path: Path) -> None:
    for k in range(4):
        write_rank(tmp_path / f"run{k}.json", base_ns=(1_700_000_000 + k) * 10**9)
    with pytest.raises(aonkit.JobError, match="none of the 4 traces names a rank") as info:
        aonkit.load(tmp_path)
    assert str(tmp_path) in str(info.value) and "separate=True" in str(info.value)
    each = aonkit.load(tmp_path, separate=True)
    assert list(each) == ["run0.json", "run1.json", "run2.json", "run3.json"]
    assert all(isinstance(t, aonkit.Trace) and not t.warnings for t in each.values())
    forced = aonkit.load(tmp_path, on_conflict="file-order")
    assert forced.ranks == [0, 1, 2, 3] and "file order" in forced[2].warnings[0]


def test_two_files_for_one_rank_is_an_error_unless_told(tmp_path: Path) -> None:
    a = write_rank(tmp_path / "a.json", 0, 2)
    b = write_rank(tmp_path / "b.json", 0, 2, n=3)
    write_rank(tmp_path / "c.json", 1, 2)
    os.utime(a, ns=(10**18, 10**18))
    with pytest.raises(aonkit.JobError, match=r"rank 0 is claimed by a\.json and b\.json"):
        aonkit.load(tmp_path)
    with pytest.warns(aonkit.AonkitWarning, match=r"kept the newer file b\.json, dropped a\.json"):
        job = aonkit.load(tmp_path, on_conflict="newest")
    assert job.ranks == [0, 1] and len(job[0].kernels) == 3
    assert aonkit.load([a, b], on_conflict="file-order").ranks == [0, 1]
    with pytest.raises(ValueError, match="on_conflict"):
        aonkit.load(tmp_path, on_conflict="oldest")


@pytest.mark.parametrize("case, match", [
    ("world", r"different world sizes \(2 in r0\.json, 4 in r1\.json\)"),
    ("run_id", r"run ids \(group_trace_id\) differ"),
    ("outside", r"claims rank 5, outside its world of 2"),
    ("no_info", r"r0\.json has distributedInfo and rank1\.json has none"),
    ("days", r"r1\.json starts 3\.0 days after r0\.json"),
])  # fmt: skip
def test_files_of_different_runs_are_refused(tmp_path: Path, case: str, match: str) -> None:
    write_rank(tmp_path / "r0.json", 0, 2, extra={"group_trace_id": "secret-job-a"})
    second = {
        "world": dict(rank=1, world=4, extra={"group_trace_id": "secret-job-a"}),
        "run_id": dict(rank=1, world=2, extra={"group_trace_id": "secret-job-b"}),
        "outside": dict(rank=5, world=2, extra={"group_trace_id": "secret-job-a"}),
        "no_info": dict(rank=None, extra={"group_trace_id": "secret-job-a"}),
        "days": dict(rank=1, world=2, extra={"group_trace_id": "secret-job-a"},
                     base_ns=(1_700_000_000 + 3 * 86400) * 10**9),
    }[case]
    write_rank(tmp_path / ("rank1.json" if case == "no_info" else "r1.json"), **second)  # the name gives rank 1
    with pytest.raises(aonkit.JobError, match=match) as info:
        aonkit.load(tmp_path)
    assert "secret" not in str(info.value)  # trace metadata is never echoed
    assert len(aonkit.load(tmp_path, separate=True)) == 2


def test_sample_traces_are_a_job_and_a_separate_run() -> None:
    with pytest.raises(aonkit.JobError, match=r"cpu_mlp\.pt\.trace\.json\.gz name\(s\) no rank"):
        aonkit.load(SAMPLE_TRACES)
    assert aonkit.load([SAMPLE_TRACES / f"gpu_synthetic_rank{r}.json.gz" for r in (0, 1)]).ranks == [0, 1]


def test_caches_of_another_format_are_replaced_without_a_warning(job_dir: Path) -> None:
    """An aonkit upgrade that changes the cache format re-reads each rank quietly: no warning per rank."""
    from aonkit._filecheck import crc32_buffer
    from aonkit.cache import READABLE, VERSION, read_sidecar

    def as_older(side: Path) -> None:
        doc = json.loads(side.read_text())
        doc.pop("check")
        doc["version"] = min(READABLE) - 1
        doc["check"] = crc32_buffer(json.dumps(doc).encode())
        side.write_text(json.dumps(doc))

    before = aonkit.load(job_dir)
    assert main(["cache", str(job_dir)]) == 0
    for side in job_dir.glob("*.aon.meta.json"):
        as_older(side)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = aonkit.load(job_dir)
        with aonkit.load(job_dir, lazy=True) as lazy:
            eager = lazy.eager()
    assert all(again[r].equals(before[r]) and eager[r].equals(before[r]) for r in before.ranks)
    assert all(read_sidecar(c)["version"] == VERSION for c in job_dir.glob("rank?.aon.parquet"))  # written anew
    as_older(sidecar_path(job_dir / "rank0.aon.parquet"))
    (job_dir / "rank0.json").unlink()
    with pytest.raises(aonkit.TraceFormatError, match="re-create the cache"):  # a cache alone still says why
        aonkit.load(job_dir / "rank0.aon.parquet")


def test_gitignore_matches_the_cache_names(job_dir: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a checkout")
    cache = cache_path_for(ROOT / "sample_traces" / "x.pt.trace.json.gz")
    names = [cache, sidecar_path(cache), cache.with_suffix(".samples.parquet"), cache.with_suffix(".text.parquet")]
    proc = subprocess.run(["git", "check-ignore", *map(str, names)], cwd=ROOT, capture_output=True, text=True)
    assert proc.stdout.split() == [str(p) for p in names]


def test_cache_command_is_idempotent_and_reports_up_to_date(job_dir: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["cache", str(job_dir)]) == 0
    first = capsys.readouterr().out
    assert main(["cache", str(job_dir / "rank0.json")]) == 0
    assert "(up to date)" in capsys.readouterr().out and "(up to date)" not in first
    out = job_dir.parent / "elsewhere"
    out.mkdir()
    assert main(["cache", str(job_dir), "--out", str(out)]) == 0
    with pytest.raises(aonkit.JobError):  # the caches alone still form the same job...
        aonkit.load([out / "rank0.aon.parquet", out / "rank0.aon.parquet"])
    assert aonkit.load(out).ranks == [0, 1]  # ... and load as it


def test_a_job_loads_the_same_in_parallel_processes(job_dir: Path) -> None:
    from aonkit.analysis.distributed import map_ranks, trace_files

    main(["cache", str(job_dir)])
    assert [Path(f).name for f in trace_files(job_dir)] == ["rank0.aon.parquet", "rank1.aon.parquet"]
    assert map_ranks(len, job_dir, processes=1) == {0: 10, 1: 10}
    write_rank(job_dir / "rank1-copy.json", 1, 2)
    with pytest.raises(aonkit.JobError, match="rank 1 is claimed by"):
        map_ranks(len, job_dir, processes=1)


def test_cli_errors_are_one_line(job_dir: Path) -> None:
    write_rank(job_dir / "extra.json")
    proc = subprocess.run([sys.executable, "-m", "aonkit.cli", "hta-report", str(job_dir), "--out",
                           str(job_dir.parent / "o")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1 and "extra.json" in proc.stderr


def test_one_loader_per_return_type(job_dir: Path) -> None:
    assert isinstance(aonkit.load_trace(job_dir / "rank0.json"), aonkit.Trace)
    with pytest.raises(TypeError, match="load_job or load_each"):
        aonkit.load_trace(job_dir)
    single = aonkit.load_job(job_dir / "rank1.json")
    assert isinstance(single, aonkit.TraceSet) and single.ranks == [1]
    assert aonkit.load_job(job_dir).ranks == [0, 1] == aonkit.load_job(sorted(job_dir.iterdir())).ranks
    each = aonkit.load_each(job_dir / "rank0.json")
    assert list(each) == ["rank0.json"] and list(aonkit.load_each(job_dir)) == ["rank0.json", "rank1.json"]
    no_rank = write_rank(job_dir.parent / "solo.json")
    assert aonkit.load_job(no_rank).ranks == [0]  # one trace naming no rank: rank 0


@pytest.mark.parametrize("lazy", [False, True])
def test_rank_assignment_warnings_point_at_the_callers_line(tmp_path: Path, lazy: bool) -> None:
    for k in range(2):
        write_rank(tmp_path / f"run{k}.json", base_ns=(1_700_000_000 + k) * 10**9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        aonkit.load(tmp_path, on_conflict="file-order", lazy=lazy, cache_dir=tmp_path / "c", workers=1)
    said = [w for w in caught if "keyed as ranks by file order" in str(w.message)]
    assert len(said) == 1 and said[0].filename == __file__  # through load (and open_job), at this line
