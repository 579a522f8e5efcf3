"""The fleet path: many nodes' daemon files read back with pruning, locally and on a Dask LocalCluster.

The data are 64 simulated nodes x 3 hours at the tests' reduced size (:data:`tests.gen_fleet.SMALL`: 0.2 Hz,
2 GPUs x 4 metrics + 2 host metrics, a file per 600 s; 1.1M rows in ~1,200 files), one node's daemon restarting
half-way (two pids in one hour). ``bench/fleet.py`` runs the full size.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from aonkit import AonkitWarning
from aonkit.live.fleet import HOUR_NS, aggregate, history, history_plan, partition_filter

from .gen_fleet import SMALL, read_all, segment_table, write_file, write_fleet

FLEET = dataclasses.replace(SMALL, hours=3.0, restart={5: 1.5})
T0 = pd.Timestamp(FLEET.start)
KEY = ["host", "ts_ns", "device", "metric"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    root = tmp_path_factory.mktemp("fleet")
    write_fleet(root, FLEET)
    return root, read_all(root)


def ns(t: str) -> int:
    return int(pd.Timestamp(t, tz="UTC").as_unit("ns").value)


def canon(df: pd.DataFrame) -> pd.DataFrame:
    """Plain columns in key order, for comparing with the oracle."""
    out = df.assign(host=df["host"].astype(str), metric=df["metric"].astype(str))[list(df.columns)]
    return out.sort_values(KEY, kind="stable", ignore_index=True)


def expect(oracle: pd.DataFrame, hosts=None, start=None, end=None, metrics=None, devices=None) -> pd.DataFrame:
    sel = np.ones(len(oracle), bool)
    if hosts is not None:
        sel &= oracle["host"].isin(hosts).to_numpy()
    if start is not None:
        sel &= oracle["ts_ns"].to_numpy() >= ns(start)
    if end is not None:
        sel &= oracle["ts_ns"].to_numpy() < ns(end)
    if metrics is not None:
        sel &= oracle["metric"].isin(metrics).to_numpy()
    if devices is not None:
        sel &= oracle["device"].isin(devices).to_numpy()
    return canon(oracle[sel])


def assert_same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """``a`` and ``b`` hold the same rows in the same order with the same dtypes and categories.

    (``pandas.testing.assert_frame_equal`` takes seconds per million categorical values in pandas 3.)
    """
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for c in a.columns:
        x, y = a[c], b[c]
        assert x.dtype == y.dtype, c
        if isinstance(x.dtype, pd.CategoricalDtype):
            assert list(x.cat.categories) == list(y.cat.categories), c
            x, y = x.cat.codes, y.cat.codes
        assert np.array_equal(x.to_numpy(), y.to_numpy(), equal_nan=x.dtype.kind == "f"), c


class Counting(pafs.FileSystemHandler):
    """The local filesystem, counting the files opened for reading and the directories listed."""

    def __init__(self) -> None:
        self.fs = pafs.LocalFileSystem()
        self.opened: list[str] = []
        self.listed: list[str] = []

    def get_type_name(self) -> str:
        return "counting"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        self.listed.append(selector.base_dir)
        return self.fs.get_file_info(selector)

    def open_input_file(self, path: str) -> pa.NativeFile:
        self.opened.append(path)
        return self.fs.open_input_file(path)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        self.opened.append(path)
        return self.fs.open_input_stream(path)

    def _refuse(self, *args: object) -> None:
        raise OSError("read-only")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _refuse
    move = copy_file = open_output_stream = open_append_stream = _refuse


# ------------------------------------------------------------------------------------------------- correctness


def test_everything_equals_naive_read(fleet: tuple[Path, pd.DataFrame]) -> None:
    root, oracle = fleet
    df = history(root)
    assert list(df.columns) == ["host", "ts_ns", "device", "metric", "value"]
    assert [str(t) for t in df.dtypes] == ["category", "int64", "int64", "category", "float64"]
    assert list(df["host"].cat.categories) == sorted(oracle["host"].unique()) and df["host"].nunique() == 64
    assert list(df["metric"].cat.categories) == sorted(oracle["metric"].unique())
    codes, ts = df["host"].cat.codes.to_numpy(), df["ts_ns"].to_numpy()
    assert np.all(np.diff(codes) >= 0) and np.all((np.diff(ts) >= 0) | (np.diff(codes) > 0))  # by host, then time
    pd.testing.assert_frame_equal(canon(df), canon(oracle))
    assert df.attrs["files"] == len(list(root.rglob("part-*.parquet"))) and df.attrs["skipped"] == []


def test_host_time_metric_device_filters(fleet: tuple[Path, pd.DataFrame]) -> None:
    root, oracle = fleet
    q = dict(hosts=["node003", "node005", "node063"], start="2025-03-01T00:25:00", end="2025-03-01T01:40:00",
             metrics=["power_w", "cpu_percent"])  # fmt: skip
    got = history(root, **q)
    want = expect(oracle, **q)
    assert len(want) > 1000 and set(got["host"].astype(str)) == set(q["hosts"])
    pd.testing.assert_frame_equal(canon(got), want)
    got = history(root, hosts="node007", metrics="gpu_util_pct", devices=1, start=ns("2025-03-01T02:00"))
    pd.testing.assert_frame_equal(canon(got), expect(oracle, ["node007"], "2025-03-01T02:00", None,
                                                     ["gpu_util_pct"], [1]))  # fmt: skip
    got = history(root, hosts=["node000"], devices=[-1], end=pd.Timestamp("2025-03-01T00:30", tz="UTC"))
    pd.testing.assert_frame_equal(canon(got), expect(oracle, ["node000"], None, "2025-03-01T00:30", None, [-1]))


def test_time_forms_agree(fleet: tuple[Path, pd.DataFrame]) -> None:
    root, _ = fleet
    a = history(root, hosts="node001", start="2025-03-01 01:00", end="2025-03-01 01:05")
    b = history(root, hosts="node001", start=ns("2025-03-01T01:00"), end=np.datetime64("2025-03-01T01:05"))
    c = history(root, hosts="node001", start=pd.Timestamp("2025-03-01T02:00", tz="Europe/Paris"),
                end=pd.Timestamp("2025-03-01T01:05", tz="UTC").to_pydatetime())  # fmt: skip
    assert len(a) > 0
    assert_same(a, b)
    assert_same(a, c)
    with pytest.raises(TypeError, match="float"):
        history(root, start=1.7e18)
    with pytest.raises(ValueError, match="before start"):
        history(root, start="2025-03-01T02:00", end="2025-03-01T01:00")


def test_daemon_restart_two_pids_in_one_hour(fleet: tuple[Path, pd.DataFrame]) -> None:
    root, oracle = fleet
    pids = {p.name.split("-")[2] for p in (root / "host=node005" / "date=2025-03-01" / "hour=01").iterdir()}
    assert pids == {"1005.parquet", "2005.parquet"}
    q = dict(hosts=["node005"], start="2025-03-01T01:25", end="2025-03-01T01:35")
    pd.testing.assert_frame_equal(canon(history(root, **q)), expect(oracle, **q))


# ---------------------------------------------------------------------------------------------------- pruning


def test_partition_pruning_counts_files_opened(fleet: tuple[Path, pd.DataFrame]) -> None:
    root, oracle = fleet
    hosts = ["node002", "node010", "node020", "node030"]
    start, end = "2025-03-01T01:12:00", "2025-03-01T01:31:00"
    # the files that hold rows of the window, from each file's own footer
    needed = set()
    for h in hosts:
        for p in (root / f"host={h}" / "date=2025-03-01" / "hour=01").glob("part-*.parquet"):
            st = pq.ParquetFile(p).metadata.row_group(0).column(0).statistics
            if st.min < ns(end) and st.max >= ns(start):
                needed.add(str(p))
    assert 8 <= len(needed) <= 16  # 600 s files: 2 or 3 per host in 19 minutes

    handler = Counting()
    fs = pafs.PyFileSystem(handler)
    plan = history_plan(str(root), hosts, start, end, filesystem=fs)
    assert set(plan.files) == needed
    assert plan.listed == len(hosts) and all(d.endswith("/date=2025-03-01/hour=01") for d in handler.listed)
    assert plan.candidates == sum(len(list((root / f"host={h}/date=2025-03-01/hour=01").glob("part-*"))) for h in hosts)
    handler.listed.clear()
    got = history(str(root), hosts, start, end, filesystem=fs)
    assert sorted(handler.opened) == sorted(needed)  # each needed file opened once, nothing else
    assert got.attrs["files"] == len(needed)
    pd.testing.assert_frame_equal(canon(got), expect(oracle, hosts, start, end))

    # pyarrow's own partition pruning, over the whole root, drops every other host and hour
    everything = ds.dataset(str(root), format="parquet", partitioning=ds.HivePartitioning.discover(
        infer_dictionary=False, schema=None))  # fmt: skip
    lo_h, hi_h = ns(start) // HOUR_NS, (ns(end) - 1) // HOUR_NS
    frags = list(everything.get_fragments(filter=partition_filter(hosts, lo_h, hi_h)))
    assert len(list(everything.get_fragments())) == len(list(root.rglob("part-*.parquet")))
    assert {str(Path(f.path).parent.relative_to(root)) for f in frags} == {
        f"host={h}/date=2025-03-01/hour=01" for h in hosts}  # fmt: skip
    assert needed <= {f.path for f in frags}


def test_long_and_open_windows_list_by_level(fleet: tuple[Path, pd.DataFrame]) -> None:
    root, oracle = fleet
    handler = Counting()
    fs = pafs.PyFileSystem(handler)
    plan = history_plan(str(root), "node004", start="2025-03-01T02:30", filesystem=fs)  # open end: walk the levels
    assert plan.listed == 3 and handler.listed[-1].endswith("hour=02")
    got = history(str(root), "node004", start="2025-02-20", end="2025-03-10", filesystem=fs)  # > 48 h: walk
    pd.testing.assert_frame_equal(canon(got), expect(oracle, ["node004"]))


# ------------------------------------------------------------------------------------------------------- dask


def test_dask_equals_local(fleet: tuple[Path, pd.DataFrame]) -> None:
    distributed = pytest.importorskip("distributed")
    root, _ = fleet
    q = dict(hosts=[f"node{i:03d}" for i in range(0, 64, 3)], start="2025-03-01T00:40", end="2025-03-01T02:20",
             metrics=["gpu_util_pct", "power_w", "cpu_percent"])  # fmt: skip
    local_all, local_q = history(root), history(root, **q)
    agg_local = aggregate(root, freq="5min", quantiles=(0.5, 0.99), **q)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
        with distributed.Client(cl) as client:
            dask_all = history(root, client=client)
            dask_q = history(root, client=client, **q)
            agg_dask = aggregate(root, freq="5min", quantiles=(0.5, 0.99), client=client, **q)
    assert_same(dask_all, local_all)  # same rows in the same order, same categories
    assert_same(dask_q, local_q)
    assert_same(agg_dask, agg_local)
    assert dask_q.attrs == local_q.attrs


def test_aggregate_matches_pandas(fleet: tuple[Path, pd.DataFrame]) -> None:
    root, oracle = fleet
    q = dict(hosts=["node001", "node005", "node009"], start="2025-03-01T00:30", end="2025-03-01T02:30")
    got = aggregate(root, freq="1min", quantiles=(0.99,), **q)
    rows = expect(oracle, **q)
    rows["ts_ns"] = rows["ts_ns"] // 60_000_000_000 * 60_000_000_000
    g = rows.groupby(["host", "device", "metric", "ts_ns"], sort=True)["value"]
    want = g.agg(["count", "mean", "min", "max"]).assign(p99=g.quantile(0.99)).reset_index()
    assert list(got.columns) == ["host", "device", "metric", "ts_ns", "count", "mean", "min", "max", "p99"]
    assert len(got) == 3 * 120 * 10  # hosts x minutes x channels
    pd.testing.assert_frame_equal(canon(got),
                                  canon(want), check_dtype=False)  # fmt: skip
    with pytest.raises(ValueError, match="divide one hour"):
        aggregate(root, freq="7min")


# ------------------------------------------------------------------------------------------------------ empty


def test_empty_results(fleet: tuple[Path, pd.DataFrame]) -> None:
    root, _ = fleet
    handler = Counting()
    fs = pafs.PyFileSystem(handler)
    for q in (dict(start="2024-03-01T00:00", end="2024-03-01T06:00"), dict(start="2025-03-01T01:00",
              end="2025-03-01T01:00"), dict(hosts=["no-such-host"]), dict(metrics=["no_such_metric"])):  # fmt: skip
        df = history(str(root), filesystem=fs, **q)
        assert len(df) == 0 and list(df.columns) == ["host", "ts_ns", "device", "metric", "value"]
        assert [str(t) for t in df.dtypes] == ["category", "int64", "int64", "category", "float64"]
        agg = aggregate(str(root), filesystem=fs, **q)
        assert len(agg) == 0 and list(agg.columns)[:4] == ["host", "device", "metric", "ts_ns"]
    # the empty window a year before opened no file and listed only the root and 64 absent hour directories
    handler.opened.clear()
    plan = history_plan(str(root), start="2024-03-01T00:00", end="2024-03-01T01:00", filesystem=fs)
    assert plan.files == [] and plan.listed == 1 + 64
    with pytest.raises(FileNotFoundError, match="no such directory"):
        history(root / "nowhere")


# ---------------------------------------------------------------------------------------------------- hostile


@pytest.fixture
def small_fleet(tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    write_fleet(tmp_path, dataclasses.replace(SMALL, nodes=4, hours=1.0))
    return tmp_path, read_all(tmp_path)


def test_corrupt_files_are_skipped_and_named(small_fleet: tuple[Path, pd.DataFrame]) -> None:
    distributed = pytest.importorskip("distributed")
    root, _ = small_fleet
    files = sorted(root.rglob("part-*.parquet"))
    truncated, empty, junk = files[1], files[9], files[14]
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])
    empty.write_bytes(b"")
    junk.write_bytes(b"not parquet at all " * 50)
    (truncated.parent / f".{truncated.name}.tmp").write_bytes(b"PAR1 half-written")  # a writer's dot-file: ignored
    oracle = read_all(root, [p for p in files if p not in (truncated, empty, junk)])

    with pytest.warns(AonkitWarning) as rec:
        df = history(root)
    msgs = [str(w.message) for w in rec]
    for bad, why in ((truncated, "magic bytes"), (empty, "size is 0"), (junk, "magic bytes")):
        assert any(m.startswith(str(bad)) and "skipped" in m and why in m for m in msgs), (bad, msgs)
    assert len(msgs) == 3 and not any(".tmp" in m for m in msgs)
    assert sorted(p for p, _ in df.attrs["skipped"]) == sorted(map(str, (truncated, empty, junk)))
    pd.testing.assert_frame_equal(canon(df), canon(oracle))

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
        with distributed.Client(cl) as client:
            with pytest.warns(AonkitWarning, match="skipped, not readable as Parquet"):
                dd = history(root, client=client)
            with pytest.warns(AonkitWarning) as rec:
                agg = aggregate(root, client=client)
    assert_same(dd, df)
    assert sorted(str(w.message).split(":")[0] for w in rec) == sorted(map(str, (truncated, empty, junk)))
    minutes = oracle.assign(ts_ns=oracle["ts_ns"] // 60_000_000_000)
    assert len(agg) == len(minutes.drop_duplicates(["host", "device", "metric", "ts_ns"]))


def test_rows_outside_their_file_span_are_named(tmp_path: Path) -> None:
    fleet = dataclasses.replace(SMALL, nodes=1, hours=1.0)
    write_fleet(tmp_path, fleet)
    files = sorted(tmp_path.rglob("part-*.parquet"))
    t = pq.read_table(files[2])
    ts = t["ts_ns"].to_numpy()
    rogue = write_file(tmp_path, "node000", 999, segment_table(np.unique(ts) + 0, np.zeros((len(np.unique(ts)), 10)),
                                                               fleet.channels()))  # fmt: skip
    renamed = rogue.with_name(f"part-{int(ts[-1])}-999.parquet")  # the name claims a later start than its rows
    rogue.rename(renamed)
    with pytest.warns(AonkitWarning, match=f"{renamed.name}: rows from ts_ns"):
        history(tmp_path, start=int(ts[-1]) - 1, end=int(ts[-1]) + 10**9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        history(tmp_path, start=int(ts[0]), end=int(ts[0]) + 10**9)  # the rogue file is pruned by name: no warning


def test_file_gone_between_listing_and_reading(small_fleet: tuple[Path, pd.DataFrame],
                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    root, oracle = small_fleet
    import aonkit.live.fleet as H

    plan_of = H.history_plan
    victim = sorted(root.rglob("part-*.parquet"))[3]

    def plan_then_prune(*args: object, **kw: object) -> H.Plan:  # the daemon's retention runs meanwhile
        plan = plan_of(*args, **kw)
        victim.unlink(missing_ok=True)
        return plan

    monkeypatch.setattr(H, "history_plan", plan_then_prune)
    with pytest.warns(AonkitWarning, match=f"{victim.name}: skipped, gone since it was listed"):
        df = history(root)
    assert df.attrs["skipped"][0][0] == str(victim) and 0 < len(df) < len(oracle)
    pd.testing.assert_frame_equal(canon(df), canon(read_all(root)))  # every row of the files left


def test_compacted_hour_replaces_its_files(small_fleet: tuple[Path, pd.DataFrame]) -> None:
    root, oracle = small_fleet
    hour = root / "host=node002" / "date=2025-03-01" / "hour=00"
    minute_files = sorted(hour.glob("part-*.parquet"))
    merged = pa.concat_tables([pq.read_table(p) for p in minute_files]).unify_dictionaries()
    compacted = write_file(root, "node002", 0, merged)  # the compactor: write the hour's file first...
    assert compacted.name.endswith("-0.parquet") and compacted.parent == hour
    plan = history_plan(root, "node002")
    assert plan.files == [str(compacted)] and plan.candidates == len(minute_files) + 1
    pd.testing.assert_frame_equal(canon(history(root)), canon(oracle))  # no row twice while both are there
    for p in minute_files:  # ...then delete what it merged
        p.unlink()
    pd.testing.assert_frame_equal(canon(history(root, "node002", start="2025-03-01T00:20", end="2025-03-01T00:50")),
                                  expect(oracle, ["node002"], "2025-03-01T00:20", "2025-03-01T00:50"))  # fmt: skip
