"""A lazily loaded job (``aonkit.load(dir, lazy=True)``) against the eager one: same ranks, events and answers."""

from __future__ import annotations

import gc
import json
import os
import pickle
import warnings
import weakref
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis.collectives import clock_offsets, collectives, comm_kernels, stragglers
from aonkit.analysis.combine import combine_ranks
from aonkit.analysis.job_stats import job_kernel_stats
from aonkit.analysis.kernels import kernel_stats
from aonkit.lazyjob import default_cache_dir

from .conftest import require_shared
from .gen_ranks import write_job

# every folder of ../shared/traces with several trace files: one job, or files that are not one job
SHARED_DIRS = ["hta/trace_filter", "gpupuzzlers/d2h_sync", "gpupuzzlers/streams", "kineto-docs-traces",
               "kineto-tb_plugin/samples/resnet50_num_workers_0", "kineto-tb_plugin/test", "param", "tracelens/h100"]


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lazyjob")
    write_job(out, ranks=8, straggler=3, profiler_steps=True, launches=True)
    return out


def _same_trace(a: aonkit.Trace, b: aonkit.Trace) -> None:
    pd.testing.assert_frame_equal(a.events, b.events)
    assert a.meta == b.meta and a.warnings == b.warnings
    rows = np.flatnonzero(a.events["cat"].isin(["kernel", "cuda_runtime"]).to_numpy())[:50]
    if len(rows):
        for key in ("correlation", "stream", "device"):
            assert a.arg_values(key, rows) == b.arg_values(key, rows)


def _outcome(fn, *args, **kw):  # noqa: ANN001, ANN202 - the value, or the error's type and text
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kw)
    except (aonkit.JobError, aonkit.TraceFormatError) as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize("name", SHARED_DIRS)
@pytest.mark.parametrize(("on_conflict", "scan"), [("error", "parse"), ("newest", "parse"), ("error", "head")])
def test_lazy_equals_eager_on_shared_folders(name: str, on_conflict: str, scan: str, tmp_path: Path) -> None:
    folder = require_shared() / name
    eager = _outcome(aonkit.load, folder, on_conflict=on_conflict)
    lazy = _outcome(aonkit.open_job, folder, cache_dir=tmp_path, on_conflict=on_conflict, scan=scan)
    if isinstance(eager, tuple):  # not one job, or a broken file: the same error, naming the same files
        assert lazy == eager
        return
    assert isinstance(lazy, aonkit.LazyTraceSet) and lazy.ranks == eager.ranks
    for r in eager:
        _same_trace(eager[r], lazy[r])
    assert lazy.n_events == sum(len(t) for t in eager.values())
    if len(eager) > 1:
        for fn in (clock_offsets, stragglers):
            got, want = _outcome(fn, lazy), _outcome(fn, eager)
            same = pd.testing.assert_series_equal if isinstance(want, pd.Series) else pd.testing.assert_frame_equal
            same(got, want)
    assert not list(folder.glob("*.aon.*")), "caches written into a read-only folder"
    lazy.close()


def test_lazy_job_answers_as_eager(job_dir: Path) -> None:
    eager = aonkit.load(job_dir)
    with aonkit.load(job_dir, lazy=True, workers=2) as lazy:
        assert repr(lazy).startswith("<aonkit.LazyTraceSet 8 rank(s)") and lazy.held == []
        for a, b in zip(collectives(eager), collectives(lazy)):
            pd.testing.assert_frame_equal(a, b)
        s = stragglers(lazy)
        pd.testing.assert_frame_equal(s, stragglers(eager))
        assert s.iloc[0]["rank"] == 3  # the planted straggler
        assert lazy.map(len, processes=1) == {r: len(t) for r, t in eager.items()}
        assert lazy.held == []  # map reads each rank for its function only, even in this process


def test_job_kernel_stats_equal_all_events_together(job_dir: Path) -> None:
    eager = aonkit.load(job_dir)
    job = job_kernel_stats(eager)
    together = kernel_stats(combine_ranks(eager, align=False))
    m = job.merge(together, on=["name", "class"], suffixes=("", "_all"), validate="one_to_one")
    assert len(m) == len(job) == len(together)
    for col in ("count", "total_ns", "min_ns", "max_ns"):
        assert (m[col] == m[f"{col}_all"]).all(), col
    np.testing.assert_allclose(m["mean_ns"], m["mean_ns_all"], rtol=1e-12)
    np.testing.assert_allclose(m["std_ns"], m["std_ns_all"], rtol=1e-9)
    per = {r: kernel_stats(t) for r, t in eager.items()}
    for _, row in job.iterrows():
        totals = [int(df.loc[df["name"] == row["name"], "total_ns"].sum()) for df in per.values()]
        assert row["ranks"] == sum(t > 0 for t in totals) and row["rank_max_ns"] == max(totals)
        assert row["rank_min_ns"] == min(totals) and row["max_rank"] == list(per)[int(np.argmax(totals))]
    with aonkit.open_job(job_dir) as lazy:
        pd.testing.assert_frame_equal(job_kernel_stats(lazy), job)


def test_ranks_are_read_on_use_and_dropped(job_dir: Path) -> None:
    lazy = aonkit.open_job(job_dir, keep=2)
    first = weakref.ref(lazy[0])
    assert lazy[0] is first() and lazy.held == [0]
    for r in lazy:
        lazy[r]
        assert len(lazy.held) <= 2
    gc.collect()
    assert first() is None, "a rank dropped from the set is still held"
    assert lazy.eager()[5].events.equals(aonkit.load(job_dir)[5].events)


@pytest.mark.filterwarnings("ignore:ignored the cache rank2:aonkit.AonkitWarning")
def test_reopening_parses_nothing_and_a_changed_rank_again(tmp_path: Path) -> None:
    write_job(tmp_path, ranks=4, straggler=1)
    first = aonkit.open_job(tmp_path)
    caches = {r: Path(f.path) for r, f in first.files.items()}
    assert all(p.name.endswith(".aon.parquet") and p.parent == tmp_path for p in caches.values())
    stamp = {r: p.stat().st_mtime_ns for r, p in caches.items()}
    again = aonkit.open_job(tmp_path)
    assert {r: Path(f.path).stat().st_mtime_ns for r, f in again.files.items()} == stamp
    src = tmp_path / "rank2.json"
    src.write_text(src.read_text() + "\n")
    os.utime(src, ns=(stamp[2] + 10**9, stamp[2] + 10**9))
    third = aonkit.open_job(tmp_path)
    changed = {r for r, f in third.files.items() if Path(f.path).stat().st_mtime_ns != stamp[r]}
    assert changed == {2}
    assert third[2].events.equals(aonkit.load(src).events)


def test_cache_dir_and_the_default_for_read_only_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = tmp_path / "job"
    write_job(job, ranks=2, straggler=1)
    lazy = aonkit.load(job, lazy=True, cache_dir=tmp_path / "c")
    assert {Path(f.path).parent for f in lazy.files.values()} == {tmp_path / "c"}
    assert not list(job.glob("*.aon.*"))
    monkeypatch.setenv("AONKIT_CACHE_DIR", str(tmp_path / "home"))
    assert default_cache_dir(job).parent == tmp_path / "home"
    assert default_cache_dir(job) != default_cache_dir(tmp_path)
    os.chmod(job, 0o555)  # no write bit: even root's caches go to the default folder
    try:
        ro = aonkit.open_job(job)
        assert {Path(f.path).parent for f in ro.files.values()} == {default_cache_dir(job)}
        assert oct(default_cache_dir(job).stat().st_mode & 0o777) == "0o700"
    finally:
        os.chmod(job, 0o755)


def test_errors_name_the_file(tmp_path: Path) -> None:
    write_job(tmp_path, ranks=3, straggler=1)
    (tmp_path / "rank1.json").write_text('{"traceEvents": [{"ph": "X", "ts": 1,')
    with pytest.raises(aonkit.TraceFormatError) as err:
        aonkit.open_job(tmp_path, processes=2)
    assert err.value.path == str(tmp_path / "rank1.json")
    (tmp_path / "rank1.json").unlink()
    write_job(tmp_path / "other", ranks=3, straggler=1)
    (tmp_path / "other" / "rank0.json").rename(tmp_path / "rank0-again.json")
    with pytest.raises(aonkit.JobError, match="rank 0 is claimed by rank0-again.json and rank0.json"):
        aonkit.open_job(tmp_path)


def test_format_errors_cross_processes_whole() -> None:
    exc = aonkit.TraceTooLargeError("too big", path="/x/t.json.gz", offset=5)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is aonkit.TraceTooLargeError and (back.path, back.offset, str(back)) == (exc.path, 5, str(exc))


def test_lazy_job_on_a_dask_local_cluster(job_dir: Path) -> None:
    distributed = pytest.importorskip("distributed")
    eager = aonkit.load(job_dir)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
        with distributed.Client(cl) as client:
            lazy = aonkit.open_job(job_dir, client=client)
            per = lazy.map(comm_kernels)
            strag = stragglers(lazy)
    assert set(per) == set(eager) and all(per[r].equals(comm_kernels(eager[r])) for r in eager)
    pd.testing.assert_frame_equal(strag, stragglers(eager))


def test_first_analyses_use_what_the_parse_computed(tmp_path: Path) -> None:
    """Ranks parsed by open_job leave their comm and kernel tables behind: the first analyses read no file."""
    write_job(tmp_path, ranks=4, straggler=2)
    eager = aonkit.load(tmp_path)
    lazy = aonkit.open_job(tmp_path, processes=2)
    for f in lazy.files.values():  # were a rank read now, it would fail
        os.rename(f.path, f.path + ".away")
    pd.testing.assert_frame_equal(stragglers(lazy), stragglers(eager))
    pd.testing.assert_frame_equal(job_kernel_stats(lazy), job_kernel_stats(eager))
    mine = lazy.map(comm_kernels)[0]
    mine.iloc[0, mine.columns.get_loc("ts_ns")] = -5  # the caller's copy: the remembered table is untouched
    pd.testing.assert_frame_equal(lazy.map(comm_kernels)[0], comm_kernels(eager[0]))
    with pytest.raises(FileNotFoundError):
        lazy.map(len)  # a function not computed while parsing reads the ranks
    lazy.close()


def test_a_failing_summary_does_not_stop_the_open(tmp_path: Path) -> None:
    write_job(tmp_path, ranks=2, straggler=1)
    lazy = aonkit.open_job(tmp_path, summaries=[_fails, len], processes=1)
    assert lazy.map(len) == {0: len(lazy[0]), 1: len(lazy[1])}
    with pytest.raises(ZeroDivisionError):
        lazy.map(_fails)


def _fails(trace: aonkit.Trace) -> float:
    return 1 / 0


def test_without_caches_nothing_is_written(tmp_path: Path) -> None:
    write_job(tmp_path, ranks=3, straggler=1)
    lazy = aonkit.load(tmp_path, lazy=True, write_caches=False)
    assert not list(tmp_path.glob("*.aon.*"))
    assert {Path(f.path).name for f in lazy.files.values()} == {f"rank{r}.json" for r in range(3)}
    pd.testing.assert_frame_equal(stragglers(lazy), stragglers(aonkit.load(tmp_path)))
    assert lazy[1].events.equals(aonkit.load(tmp_path / "rank1.json").events)


def test_map_takes_functions_from_a_notebook_cell_and_lambdas(tmp_path: Path) -> None:
    """A function defined after the workers started (in ``__main__``, as in a notebook) and a lambda both work."""
    import subprocess
    import sys

    write_job(tmp_path, ranks=3, straggler=1)
    script = tmp_path / "cell.py"
    script.write_text(
        "import aonkit\n"
        f"job = aonkit.open_job({str(tmp_path)!r}, processes=2)\n"
        "def n_kernels(t):\n    return len(t.kernels)\n"
        "k = 1\n"
        "print(job.map(n_kernels), job.map(lambda t: len(t) + k))\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    eager = aonkit.load(tmp_path)
    want = f"{ {r: len(t.kernels) for r, t in eager.items()} } { {r: len(t) + 1 for r, t in eager.items()} }"
    assert out.stdout.strip() == want


def test_head_scan_opens_without_parsing_and_reads_each_rank_once_on_use(tmp_path: Path) -> None:
    """scan="head": ranks from the files' first bytes; a rank is parsed and cached when first used, then as eager."""
    write_job(tmp_path, ranks=4, straggler=2)
    for f in tmp_path.glob("rank*.json"):  # Kineto's key order: distributedInfo before traceEvents
        d = json.loads(f.read_text())
        f.write_text(json.dumps({"distributedInfo": d.pop("distributedInfo"), **d}))
    eager = aonkit.load(tmp_path)
    lazy = aonkit.open_job(tmp_path, scan="head", processes=2)
    assert lazy.ranks == eager.ranks and lazy.unread == [0, 1, 2, 3] and not list(tmp_path.glob("*.aon.*"))
    assert "4 rank(s) not read yet" in repr(lazy)
    assert lazy[2].events.equals(eager[2].events) and lazy.unread == [0, 1, 3]
    assert (tmp_path / "rank2.aon.parquet").exists() and lazy.files[2].n_events == len(eager[2])
    pd.testing.assert_frame_equal(stragglers(lazy), stragglers(eager))  # the rest are read in the workers
    assert lazy.unread == [] and lazy.n_events == sum(len(t) for t in eager.values())
    again = aonkit.open_job(tmp_path, scan="head")  # now every rank has its cache: nothing to read
    assert again.unread == [] and again.files[1].path.endswith("rank1.aon.parquet")
    lazy.close()


def test_head_scan_falls_back_to_parsing_when_the_start_does_not_say(tmp_path: Path) -> None:
    write_job(tmp_path, ranks=2, straggler=1)  # gen_ranks writes traceEvents last: distributedInfo comes first
    f = tmp_path / "rank1.json"
    d = json.loads(f.read_text())
    f.write_text(json.dumps({"traceEvents": d.pop("traceEvents"), **d}))  # events first: the head cannot tell
    lazy = aonkit.open_job(tmp_path, scan="head", processes=1)
    assert lazy.unread == [0] and lazy.files[1].n_events > 0  # rank 1 was parsed at open
    with pytest.raises(ValueError, match="scan must be"):
        aonkit.open_job(tmp_path, scan="all")


def test_close_joins_the_workers_and_a_later_map_starts_new_ones(job_dir: Path) -> None:
    """close() waits for the workers to exit: none is left running (or racing the interpreter's exit)."""
    import multiprocessing

    lazy = aonkit.open_job(job_dir, processes=2)
    first = lazy.map(len)
    workers = multiprocessing.active_children()
    assert lazy.has_workers and workers
    lazy.close()
    assert not lazy.has_workers and all(not p.is_alive() for p in workers)
    assert lazy.map(len) == first and not lazy.has_workers  # remembered: no worker needed
    kernels = lazy.map(kernel_stats)  # not remembered: new workers
    assert lazy.has_workers
    assert {r: len(k) for r, k in kernels.items()} == {r: len(kernel_stats(lazy[r])) for r in first}
    again = [p for p in multiprocessing.active_children() if p not in workers]
    assert again
    lazy.close()
    assert all(not p.is_alive() for p in again)
