"""nsys import edge cases: bad files, schema drift, NULLs, several processes, GPU metrics, .nsys-rep."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aonkit
from aonkit import TraceFormatError
from aonkit.analysis.correlation import gpu_links

from .conftest import ROOT, SHARED

NSYS = SHARED / "nsys"
FUSER = NSYS / "NVIDIA__Fuser/64ee035/report1.sqlite"
WEATHER = NSYS / "frasertajima__WeatherBench2/report1.sqlite"
sys.path.insert(0, str(ROOT / "tools"))
from gen_nsys import METRICS, T0_NS, generate  # noqa: E402


def _copy(src: Path, dst: Path) -> Path:
    if not src.exists():
        pytest.skip(f"shared nsys export not found at {src}")
    shutil.copyfile(src, dst)
    os.chmod(dst, stat.S_IRUSR | stat.S_IWUSR)
    return dst


def _edit(path: Path, *sql: str) -> None:
    with sqlite3.connect(path) as con:
        for q in sql:
            con.execute(q)


def test_not_sqlite(tmp_path: Path) -> None:
    bad = tmp_path / "x.sqlite"
    bad.write_bytes(b'{"traceEvents": []}')
    with pytest.raises(TraceFormatError, match="not a SQLite database") as e:
        aonkit.load(bad)
    assert e.value.path == str(bad) and e.value.offset == 0


def test_sqlite_but_not_nsys(tmp_path: Path) -> None:
    db = tmp_path / "other.sqlite"
    _edit(db, "CREATE TABLE t (a INTEGER)")
    with pytest.raises(TraceFormatError, match="not an Nsight Systems export") as e:
        aonkit.load(db)
    assert e.value.path == str(db)


def test_sqlite_detected_by_magic_whatever_the_name(tmp_path: Path) -> None:
    path = _copy(FUSER, tmp_path / "report1.bin")
    assert len(aonkit.load(path).kernels) == 19


@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.6, 0.9])
def test_truncated_export_raises_cleanly(tmp_path: Path, fraction: float) -> None:
    if not FUSER.exists():
        pytest.skip("shared nsys export absent")
    data = FUSER.read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[: int(len(data) * fraction)])
    try:
        t = aonkit.load(cut)
    except TraceFormatError as e:
        assert e.path == str(cut)
    else:  # SQLite may still read a prefix whose pages are all there
        assert len(t.kernels) <= 19


def test_negative_start_and_open_ranges(tmp_path: Path) -> None:
    path = _copy(FUSER, tmp_path / "f.sqlite")
    _edit(path, 'UPDATE NVTX_EVENTS SET start = -1878291120 WHERE rowid = (SELECT MIN(rowid) FROM NVTX_EVENTS)',
          'UPDATE NVTX_EVENTS SET "end" = NULL WHERE rowid IN (SELECT rowid FROM NVTX_EVENTS LIMIT 3 OFFSET 10)')
    t = aonkit.load(path)
    ann = t.events[t.events["cat"] == "user_annotation"]
    assert int(ann["ts_ns"].min()) == T0_FUSER(t) - 1878291120
    assert int((ann["dur_ns"] == -1).sum()) == 3
    assert any("3 NVTX range(s) never ended" in w for w in t.warnings)
    i = int(ann.index[ann["dur_ns"] == -1][0])
    assert t.event_json(i)["dur"] is None


@pytest.mark.parametrize("value", [1.5, float("inf"), 1e30])
def test_a_fractional_time_in_an_integer_column_is_refused_not_truncated(tmp_path: Path, value: float) -> None:
    # GIVEN a kernel start that is no whole number of ns (it was truncated to an int silently before)
    path = _copy(FUSER, tmp_path / "f.sqlite")
    _edit(path, f'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = {value!r} WHERE rowid = 2'.replace("inf", "9e999"))
    # THEN the load names the column instead
    with pytest.raises(aonkit.TraceFormatError, match="'start' holds values that are not integers"):
        aonkit.load(path)


def test_a_whole_real_in_an_integer_column_is_read(tmp_path: Path) -> None:
    path = _copy(FUSER, tmp_path / "f.sqlite")
    want = aonkit.load(path).events["ts_ns"].to_numpy()
    _edit(path, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = CAST(start AS REAL) WHERE rowid = 2")
    assert np.array_equal(aonkit.load(path).events["ts_ns"].to_numpy(), want)  # 5.0 is 5: read, not refused


def T0_FUSER(t: aonkit.Trace) -> int:  # noqa: N802 - reads like the constant it is
    return int(t.meta.base_time_ns)


def test_schema_drift_columns_by_name(tmp_path: Path) -> None:
    path = _copy(FUSER, tmp_path / "f.sqlite")
    _edit(path, "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN gridZ",
          "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN registersPerThread",
          "ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA",
          "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET")
    t = aonkit.load(path)
    k = t.kernels
    assert len(k) == 19 and int(k["dur_ns"].sum()) == 393539
    args = t.event_args(int(k.index[0]))
    assert args["grid"][2] == -1 and args["registers per thread"] == -1
    assert t.meta.versions["nsys"] == "2024.6.2.25"
    assert (t.events["cat"] == "gpu_memset").sum() == 0


def test_export_without_cuda(tmp_path: Path) -> None:
    path = _copy(WEATHER, tmp_path / "w.sqlite")
    _edit(path, "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME", "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET")
    with pytest.raises(aonkit.TraceFormatError, match="no trace events") as info:  # nothing to analyse: refused
        aonkit.load(path)
    assert info.value.path == str(path)


def test_correlation_ids_are_per_process(tmp_path: Path) -> None:
    path = generate(tmp_path / "two.sqlite", kernels=2000, processes=2)
    t = aonkit.load(path)
    links = gpu_links(t)
    assert (links["launch_row"] >= 0).all() and links["launch_row"].nunique() == 2000
    ev = t.events
    launch_pid = ev["pid"].to_numpy()[links["launch_row"]]
    kernel_process = np.array(t.arg_ints("process", links["gpu_row"].to_numpy()))
    assert (launch_pid == kernel_process).all() and set(launch_pid.tolist()) == {1000, 1001}
    # the raw ids collide across the two processes; the table's never do
    raw = t.arg_ints("correlation", links["gpu_row"].to_numpy())
    assert len(set(raw.tolist())) == 1000 and ev.loc[links["gpu_row"], "correlation"].nunique() == 2000


def test_gpu_metrics_become_samples(tmp_path: Path) -> None:
    path = generate(tmp_path / "m.sqlite", kernels=500, processes=2, metrics=True)
    t = aonkit.load(path)
    s = t.samples
    assert s is not None and set(s["metric"].astype(str)) == set(METRICS)
    assert set(s["device"].tolist()) == {0, 1}
    assert s["ts_ns"].min() == T0_NS and (s["value"].between(0, 100)).all()
    with sqlite3.connect(path) as con:
        n, total = con.execute("SELECT COUNT(*), SUM(value) FROM GPU_METRICS").fetchone()
    assert len(s) == n and s["value"].sum() == total
    back = aonkit.load(t.save(tmp_path / "m.parquet"))
    assert back.samples is not None and back.samples.equals(s)


def test_no_metrics_table_means_no_samples() -> None:
    if not FUSER.exists():
        pytest.skip("shared nsys export absent")
    assert aonkit.load(FUSER).samples is None


def test_event_text_times_are_exact(tmp_path: Path) -> None:
    t = aonkit.load(generate(tmp_path / "g.sqlite", kernels=50))
    for i in t.kernels.index[:10]:
        ns = int(t.events.at[i, "ts_ns"])
        assert f'"ts":{ns // 1000}.{ns % 1000:03d}'.encode() in t._raw.text(int(i))


def test_nsys_rep_without_nsys_names_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"\x00not really a report")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(TraceFormatError, match="nsys export --type sqlite") as e:
        aonkit.load(rep)
    assert e.value.path == str(rep)


def test_nsys_rep_is_exported_with_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an `nsys` on PATH (a stand-in script: the real one is not installable here) that writes --output
    src = _copy(FUSER, tmp_path / "src.sqlite")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "nsys"
    script.write_text(f'#!/bin/sh\n[ "$1" = export ] || exit 2\nwhile [ "$1" != --output ]; do shift; done\n'
                      f'cp "{src}" "$2"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"report")
    # WHEN it is loaded THEN the export beside it is read, and reused next time
    assert len(aonkit.load(rep).kernels) == 19
    assert (tmp_path / "run.sqlite").exists()
    script.write_text("#!/bin/sh\nexit 3\n")
    assert len(aonkit.load(rep).kernels) == 19


def test_directory_of_exports_is_a_trace_set(tmp_path: Path) -> None:
    generate(tmp_path / "rank-0.sqlite", kernels=100)
    generate(tmp_path / "rank-1.sqlite", kernels=120, seed=8)
    ts = aonkit.load(tmp_path)
    assert sorted(ts) == [0, 1] and len(ts[1].kernels) == 120


def test_cli_summary_on_nsys(tmp_path: Path) -> None:
    path = generate(tmp_path / "g.sqlite", kernels=300, nvtx=True)
    out = subprocess.run([sys.executable, "-m", "aonkit.cli", "summary", str(path)], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    assert "300 events" not in out and "top kernels" in out and "H100" in out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 581631), st.integers(0, 255)), min_size=1, max_size=8))
def test_corrupted_exports_never_crash(tmp_path: Path, flips: list[tuple[int, int]]) -> None:
    if not FUSER.exists():
        pytest.skip("shared nsys export absent")
    data = bytearray(FUSER.read_bytes())
    for pos, val in flips:
        data[pos % len(data)] = val
    path = tmp_path / "fuzz.sqlite"
    path.write_bytes(bytes(data))
    try:
        t = aonkit.load(path)
        t.event_json(0)
    except TraceFormatError:
        pass


def test_parse_emit_nvtx_labels() -> None:
    from aonkit.sources.nsys.torch import parse_op

    op, members = parse_op("aten::addmm, seq = 12, op_id = 3, sizes = [[64], [64, 128], [128, 64]], "
                           "input_op_ids = [(1, 0), (2, 0)]")
    assert op == "aten::addmm"
    assert json_obj(members) == {"Input Dims": [[64], [64, 128], [128, 64]], "Sequence number": 12, "op_id": 3}
    assert parse_op("aten::empty") == ("aten::empty", "")
    assert parse_op("mylib::fused, op_id = 4")[0] == "mylib::fused"
    for label in ("train_step", "KernelExecutor::runFusion", "Fusion::resetTvUses", "mylib::fused",
                  "fusion_executor::allocations::allocateOutputs"):
        assert parse_op(label) is None, label


def json_obj(members: str) -> dict:
    import json

    return json.loads("{" + members + "}")


def _with_emit_nvtx(tmp_path: Path, sizes: str, first: int | None = None) -> tuple[Path, list]:
    """A copy of the Fuser export with an ``aten::mm`` emit_nvtx range around each (or the first) kernel launch."""
    path = _copy(FUSER, tmp_path / "f.sqlite")
    with sqlite3.connect(path) as con:
        launches = con.execute(
            'SELECT r.start, r."end", r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN CUPTI_ACTIVITY_KIND_KERNEL k '
            "ON k.correlationId = r.correlationId ORDER BY r.start").fetchall()[:first]
        con.executemany('INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid, domainId) '
                        "VALUES (?, ?, 59, ?, ?, 0)",
                        [(s - 5, e + 5, f"aten::mm, seq = {i}, op_id = {i + 1}, sizes = {sizes}", g)
                         for i, (s, e, g) in enumerate(launches)])
    return path, launches


def test_emit_nvtx_ranges_are_ops_with_shapes(tmp_path: Path) -> None:
    from aonkit.analysis.kernels import gpu_time_per_op

    # GIVEN a real export plus emit_nvtx-style ranges around each kernel launch, on the launching thread
    path, launches = _with_emit_nvtx(tmp_path, "[[64, 32], [32, 16]]")
    t = aonkit.load(path)
    ops = t.cpu_ops
    assert len(ops) == len(launches) == 19 and set(ops["name"]) == {"aten::mm"}
    args = t.event_args(int(ops.index[3]))
    assert args["Input Dims"] == [[64, 32], [32, 16]] and args["Sequence number"] == 3
    assert args["text"].startswith("aten::mm, seq = 3") and args["domain"] == "default"
    # THEN op-level analyses see the kernels each op launched
    per_op = gpu_time_per_op(t, level="op").set_index("op_name")
    assert per_op.loc["aten::mm", "gpu_events"] == 19 and per_op.loc["aten::mm", "gpu_ns"] == 393539


def test_roofline_on_emit_nvtx_ops_with_a_default_dtype(tmp_path: Path) -> None:
    from aonkit.analysis.roofline import roofline_table

    path, _ = _with_emit_nvtx(tmp_path, "[[256, 512], [512, 128]]", first=3)
    t = aonkit.load(path)
    assert len(roofline_table(t)) == 0  # NVTX carries shapes but no dtypes: nothing to cost without a default
    table = roofline_table(t, default_dtype="bf16")
    # 2*M*N*K FLOPs; bytes = (M*K + K*N + M*N) * 2 for bf16; the device is the export's H200
    assert len(table) == 3 and (table["flop"] == 2 * 256 * 128 * 512).all()
    assert (table["bytes"] == (256 * 512 + 512 * 128 + 256 * 128) * 2).all() and set(table["dtype"]) == {"bf16"}
    assert table.attrs["spec"].name == "H200 SXM" and table["fraction_of_roof"].notna().all()


def test_timeline_lanes_of_an_export() -> None:
    # kernels, the memcpy, the memset and the sync event share the stream's lane; API calls and NVTX the thread's
    if not FUSER.exists():
        pytest.skip("shared nsys export absent")
    lanes = aonkit.timeline_index(aonkit.load(FUSER)).lanes
    assert lanes["label"].tolist() == ["GPU 0 stream 7", "CPU 30156 thread 30156"]
    assert lanes["events"].tolist() == [19 + 1 + 1 + 1, 968 + 652]


def test_text_of_some_rows_equals_the_whole_text(tmp_path: Path, rng: np.random.Generator) -> None:
    # the text of a few events is built alone (fast on big exports) and must equal what the full build gives
    path = generate(tmp_path / "g.sqlite", kernels=3000, processes=2, nvtx=True, metrics=True)
    for src in (path, *(p for p in (FUSER, NSYS / "hpcgroup__pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
                        if p.exists())):
        t = aonkit.load(src)
        rows = rng.choice(len(t.events), size=min(200, len(t.events)), replace=False)
        some = [t.event_json(int(i)) for i in rows]
        shapes = t.arg_values("grid", rows)
        assert t._raw._buf is None  # nothing built for the whole trace yet
        buf, start, end = t._raw.spans()
        assert some == [json_obj(buf[start[i]:end[i]].tobytes().decode()[1:-1]) for i in rows]
        assert shapes == t.arg_values("grid", rows)  # now read from the full text


def test_event_text_of_a_removed_export_is_a_clear_error(tmp_path: Path) -> None:
    """The kernel text reads the export again on first use: gone by then, the error names the file."""
    import shutil

    from .conftest import SAMPLE_TRACES

    copy = tmp_path / "run.sqlite"
    shutil.copy(SAMPLE_TRACES / "nsys" / "synthetic_2proc.sqlite", copy)
    t = aonkit.load(copy)
    copy.unlink()
    with pytest.raises(aonkit.TraceFormatError, match="gone or changed since it was loaded") as err:
        t.event_args(int(t.kernels.index[0]))
    assert err.value.path == str(copy)


def test_a_report_in_a_read_only_folder_is_exported_once_to_the_user_cache(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    src = _copy(FUSER, tmp_path / "src.sqlite")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "nsys"
    script.write_text(f'#!/bin/sh\nwhile [ "$1" != --output ]; do shift; done\ncp "{src}" "$2"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AONKIT_CACHE_DIR", str(tmp_path / "cache"))
    runs = tmp_path / "runs"
    runs.mkdir()
    rep = runs / "run.nsys-rep"
    rep.write_bytes(b"report")
    runs.chmod(0o555)  # no write bit: even root's export goes to the cache folder
    try:
        assert len(aonkit.load(rep).kernels) == 19
        exports = list((tmp_path / "cache").rglob("run.sqlite"))
        assert len(exports) == 1 and not (runs / "run.sqlite").exists()
        script.write_text("#!/bin/sh\nexit 3\n")  # the next load reuses the export, no nsys needed
        assert len(aonkit.load(rep).kernels) == 19
    finally:
        runs.chmod(0o755)


def test_a_report_and_its_export_in_one_folder_are_one_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _copy(FUSER, tmp_path / "run.sqlite")
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"report")
    os.utime(rep, (1, 1))  # older than its export: the export stands for it
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # and nsys is not needed
    job = aonkit.load(tmp_path)
    assert len(job) == 1 and len(job[0].kernels) == 19
    assert list(aonkit.load(tmp_path, separate=True)) == ["run.sqlite"]
    os.utime(rep, None)  # newer than its export: the report is exported again (here: no nsys, a clear error)
    with pytest.raises(TraceFormatError, match="nsys export"):
        aonkit.load(tmp_path)


_ROW_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
               "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "StringIds")
_ODD_VALUES = (None, -1, 0, 2**63 - 1, -(2**63), 2**40, "x", 1.5, 5.0)


@pytest.mark.parametrize("seed", range(16))
def test_odd_values_in_export_rows_load_and_analyse_or_say_why(tmp_path: Path, seed: int) -> None:
    """Values set at random in the rows of a real export: a trace every analysis answers on, or a located error."""
    import random
    import warnings

    from aonkit.analysis.idle import idle_summary
    from aonkit.analysis.kernels import kernel_stats, launch_stats

    rng = random.Random(seed)
    exports = sorted(NSYS.rglob("*.sqlite"))
    if not exports:
        pytest.skip(f"shared nsys exports not found under {NSYS}")
    path = _copy(exports[seed % len(exports)], tmp_path / "r.sqlite")
    con = sqlite3.connect(path)
    tables = [t for t in _ROW_TABLES if con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone()]
    for _ in range(rng.randint(1, 12)):
        table = rng.choice(tables)
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        n = con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        if n:
            try:
                con.execute(f'UPDATE {table} SET "{rng.choice(cols)}" = ? WHERE rowid = ?',
                            (rng.choice(_ODD_VALUES), rng.randint(1, n)))  # fmt: skip
            except sqlite3.IntegrityError:  # a NOT NULL, UNIQUE or typed column keeps its value
                pass
    con.commit()
    con.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", RuntimeWarning)  # numpy's invalid casts and overflows: silent wrong numbers
        try:
            trace = aonkit.load(path)
        except aonkit.AonkitError as err:
            assert str(path) in str(err)
            return
        for fn in (kernel_stats, launch_stats, idle_summary, aonkit.to_html):
            try:
                fn(trace)
            except aonkit.AonkitError:
                pass
