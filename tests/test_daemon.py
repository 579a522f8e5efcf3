"""The always-on daemon (aonkit.live) with real processes: readers, SIGKILL, SIGTERM, locks, permissions, files."""

from __future__ import annotations

import os
import re
import signal
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import aonkit.live
from aonkit.live import store
from aonkit.live.follow import Layout
from aonkit.live.ring import Ring
from tests.live_helpers import Live, live_world, wait_line


@pytest.fixture
def live() -> Iterator[Live]:
    yield from live_world()


READER = r"""
import os, sys, time
import pandas as pd
import aonkit.live
r = aonkit.live.attach()
out, stop = sys.argv[1], sys.argv[2]
frames, cursor = [], 0
while True:
    done = os.path.exists(stop)
    frame, cursor = r.read(cursor)
    if len(frame):
        frames.append(frame.astype({"metric": str}))
        print("rows", cursor, flush=True)
    if done:
        break
    time.sleep(0.02)
pd.concat(frames, ignore_index=True).to_parquet(out)
print("saved", cursor, "pynvml" in sys.modules, flush=True)
"""


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def disk_table(root: Path) -> pd.DataFrame:
    return ds.dataset(root, format="parquet", partitioning="hive").to_table().to_pandas()


def keyed(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame[["ts_ns", "device", "metric", "value"]].astype({"metric": str})
    return out.sort_values(["ts_ns", "device", "metric"], ignore_index=True)


def test_readers_see_samples_and_sigterm_leaves_every_one_on_disk(live, tmp_path: Path) -> None:
    pid = live.start_daemon()
    script = tmp_path / "reader.py"
    script.write_text(READER)
    survivor = live.spawn([str(script), str(tmp_path / "a.parquet"), str(tmp_path / "stop-a")])
    victim = live.spawn([str(script), str(tmp_path / "b.parquet"), str(tmp_path / "stop-b")])
    wait_line(victim, "rows")
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    at_kill = Ring.open(live.run_dir / "ring").count
    live.wait(lambda: live.status().get("flushes", 0) >= 2 and Ring.open(live.run_dir / "ring").count > at_kill + 10)
    assert live.daemon_pid() == pid  # a dead reader blocks nothing
    os.kill(pid, signal.SIGTERM)
    live.wait_stopped()
    (tmp_path / "stop-a").touch()
    assert survivor.wait(60) == 0, survivor.lines
    assert wait_line(survivor, "saved").endswith("False")  # the reader never imported pynvml

    seen = keyed(pd.read_parquet(tmp_path / "a.parquet"))
    disk = keyed(disk_table(live.data))
    status = live.status()
    assert status["state"] == "stopped" and status["lost"] == 0
    assert disk["ts_ns"].nunique() == status["samples"] > at_kill + 10
    assert set(disk["device"]) == {-1, 0, 1} and disk.groupby("ts_ns").size().eq(status["channels"]).all()
    # the survivor read everything after the daemon stopped: what it saw is exactly what is on disk
    pd.testing.assert_frame_equal(seen, disk)
    assert not (live.run_dir / "ring").exists()


def test_parquet_layout_schema_and_permissions(live) -> None:
    pid = live.start_daemon()
    live.wait(lambda: live.status().get("flushes", 0) >= 1)
    assert mode(live.run_dir) == 0o700
    for name in ("ring", "daemon.lock", "daemon.json", "daemon.log"):
        assert mode(live.run_dir / name) == 0o600, name
    os.kill(pid, signal.SIGTERM)
    live.wait_stopped()
    files = sorted(p for p in live.data.rglob("*") if p.is_file())
    assert files and all(mode(p) == 0o600 for p in files)
    assert all(mode(p) == 0o700 for p in live.data.rglob("*") if p.is_dir())
    for path in files:
        rel = path.relative_to(live.data)
        m = re.fullmatch(r"host=([^/]+)/date=(\d{4}-\d\d-\d\d)/hour=(\d\d)/part-(\d+)-(\d+)\.parquet", str(rel))
        assert m, rel
        meta = pq.ParquetFile(path).metadata
        assert {meta.row_group(0).column(i).compression for i in range(4)} == {"ZSTD"}
        table = pq.read_table(path)
        assert table.schema.equals(pa.schema([("ts_ns", pa.int64()), ("device", pa.int64()),
                                              ("metric", pa.dictionary(pa.int32(), pa.string())),
                                              ("value", pa.float64())]))  # fmt: skip
        ts = table["ts_ns"].to_numpy()
        assert int(m[4]) == ts.min() and int(m[5]) == pid and np.all(np.diff(ts) >= 0)
        utc = pd.to_datetime(ts, utc=True)
        assert set(utc.strftime("%Y-%m-%d")) == {m[2]} and set(utc.hour) == {int(m[3])}


def test_a_second_daemon_is_refused(live) -> None:
    pid = live.start_daemon("--gpm-interval", "0.5", "--slow-interval", "2")
    again = live.cli("daemon", "start")
    assert again.returncode != 0 and f"already running (pid {pid})" in again.stderr
    foreground = live.cli("daemon", "run")
    assert foreground.returncode != 0 and f"already running (pid {pid})" in foreground.stderr
    assert live.daemon_pid() == pid
    r = live.cli("daemon", "status")
    assert r.returncode == 0 and f"running (pid {pid})" in r.stdout and "GPU 0, 1 through NVML" in r.stdout
    assert "GPM every 0.5 s, slow metrics every 2 s" in r.stdout  # what start was given reaches the daemon
    r = live.cli("daemon", "stop")
    assert r.returncode == 0 and f"stopped (pid {pid})" in r.stdout and live.daemon_pid() is None
    r = live.cli("daemon", "status")
    assert r.returncode == 3 and "not running" in r.stdout


def python_threads(pid: int) -> int:
    """Threads of ``pid`` named as its main thread: OpenBLAS's pool is, Arrow's and jemalloc's are not."""
    tasks = Path(f"/proc/{pid}/task")
    comms = [(t / "comm").read_text() for t in tasks.iterdir()]
    return comms.count(Path(f"/proc/{pid}/comm").read_text())


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_the_daemon_starts_no_blas_thread_pool_in_the_background_or_the_foreground(live) -> None:
    pid = live.start_daemon()
    assert python_threads(pid) <= 4  # sampling, flusher, GPU watchdog and check (OpenBLAS: one per other CPU)
    assert live.cli("daemon", "stop").returncode == 0
    fg = live.spawn(["-m", "aonkit.cli", "daemon", "run", "--interval", "0.05", "--flush", "1"])
    live.wait(lambda: live.status().get("state") == "running" and live.daemon_pid() is not None)
    assert live.daemon_pid() == fg.pid  # replaced itself (execve): the same pid, as systemd expects
    assert python_threads(fg.pid) <= 4
    fg.send_signal(signal.SIGTERM)
    assert fg.wait(60) == 0 and live.status()["state"] == "stopped" and live.status()["lost"] == 0


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs Linux /proc")
def test_status_says_what_the_daemon_costs(live) -> None:
    pid = live.start_daemon()
    live.wait(lambda: live.status().get("flushes", 0) >= 2)
    st = live.status()
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu_now = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")  # the kernel's count, read after the status
    # THEN its CPU is this process's (imports included: well over 0.1 s; never more than the kernel counts since)
    assert 0.1 < st["cpu_s"] <= cpu_now + 0.02
    assert 0 < st["cpu_percent"] < 100 and 0.5 < st["cpu_window_s"] < 30  # over the last flush interval (1 s)
    rss_kb = int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text())[1])
    assert abs(st["rss_bytes"] / (rss_kb * 1024) - 1) < 0.25 and st["rss_peak_bytes"] >= st["rss_bytes"]
    r = live.cli("daemon", "status")
    assert re.search(r"cost: \d+\.\d\d% of a core over the last \d+ s \(\d+\.\d\d% since the start, start-up "
                     r"included\); RSS [\d.]+ MiB \(peak [\d.]+ MiB\)", r.stdout), r.stdout


def test_host_only_without_a_driver_says_so(live) -> None:
    live.start_daemon(AONKIT_FAKE_NVML="tests.fake_gpus:no_driver")
    r = live.cli("daemon", "status")
    assert "host (cpu_percent, memory_percent, memory_used_bytes) only: no NVIDIA driver" in r.stdout, r.stdout
    assert "sampling the host only" in r.stdout


def test_attaching_to_another_users_or_an_open_ring_fails(live, monkeypatch) -> None:
    live.start_daemon()
    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    ring = live.run_dir / "ring"
    aonkit.live.attach().close()  # the owner's own, owner-only ring: fine
    os.chmod(ring, 0o644)
    with pytest.raises(aonkit.live.NotOwnerError, match="mode 0o644: others may read"):
        aonkit.live.attach()
    os.chmod(ring, 0o600)
    if os.getuid() == 0:  # root reads anything: the owner check is what refuses
        os.chown(ring, 65534, 65534)
        with pytest.raises(aonkit.live.NotOwnerError, match="belongs to uid 65534"):
            aonkit.live.attach()
        os.chown(ring, 0, 0)
        os.chown(live.run_dir, 65534, 65534)
        with pytest.raises(aonkit.live.NotOwnerError, match="runtime directory .* belongs to uid 65534"):
            aonkit.live.attach()
        os.chown(live.run_dir, 0, 0)
    else:
        os.chmod(ring, 0)
        with pytest.raises(aonkit.live.NotOwnerError, match="permission denied"):
            aonkit.live.attach()
        os.chmod(ring, 0o600)
    aonkit.live.attach().close()


def test_a_daemon_of_another_ring_version_is_named_by_readers_and_status(live, monkeypatch) -> None:
    live.start_daemon()
    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    with open(live.run_dir / "ring", "r+b") as f:  # as an older aonkit's daemon would have made it
        f.seek(8)
        f.write(struct.pack("<I", 1))
    want = "ring of version 1; this aonkit reads version 3; restart the daemon"
    with pytest.raises(aonkit.live.DaemonNotRunning, match=want):
        aonkit.live.attach()
    out = live.cli("daemon", "status")
    assert out.returncode == 0 and want in out.stdout, out.stdout + out.stderr


def test_window_joins_files_and_ring_without_gaps_or_duplicates(live, monkeypatch) -> None:
    live.start_daemon("--flush", "0.5")
    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    r = aonkit.live.attach()
    live.wait(lambda: live.status().get("flushes", 0) >= 3 and r.ring.count > r.ring.flushed)
    ring_all, end = r.read(0)  # the ring still holds every sample taken
    window = r.window(int(ring_all["ts_ns"].min()), int(ring_all["ts_ns"].max()))
    assert window["ts_ns"].nunique() == end and len(window) == end * len(r.channels)
    pd.testing.assert_frame_equal(keyed(window), keyed(ring_all))
    last = r.last(minutes=10)
    assert last["ts_ns"].nunique() >= end and not last.duplicated(["ts_ns", "device", "metric"]).any()
    r.close()


def test_live_monitor_streams_the_daemon(live, monkeypatch) -> None:
    from aonkit.widgets import LiveMonitor

    live.start_daemon()
    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    reader = aonkit.live.attach()
    live.wait(lambda: reader.ring.count >= 3)
    monitor = LiveMonitor(reader)
    assert monitor.poll() >= 3 and monitor.cursor >= 3
    assert set(monitor.view.channels) >= {(0, "gpu_util_pct"), (1, "gpu_util_pct"), (-1, "cpu_percent")}
    # the ring's rows as they are (what the monitor polls) hold what read() gives in long form
    start = reader.ring.base
    assert reader.read_rows(start - 1) is None  # a sample before this ring: read() has to say
    ts, values, channels, end = reader.read_rows(start)
    frame, _ = reader.read(start)  # (read a moment later: it may hold more)
    assert channels == reader.channels and end - start == len(ts) >= 3
    pd.testing.assert_frame_equal(Layout(channels).frame(ts, values), frame.iloc[: len(ts) * len(channels)])
    monitor.close()
    assert live.daemon_pid() is not None  # the monitor's stop() leaves the daemon sampling


def test_sigkill_leaves_complete_files_and_a_restart_works(live) -> None:
    pid = live.start_daemon("--flush", "0.3")
    live.wait(lambda: live.status().get("flushes", 0) >= 2)
    os.kill(pid, signal.SIGKILL)
    live.wait_stopped()
    for path in live.data.rglob("part-*.parquet"):
        assert pq.read_table(path).num_rows > 0
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    folder = next(live.data.rglob("hour=*"))
    stale = folder / f".part-1-{int(dead.stdout)}.parquet.tmp"
    stale.write_bytes(b"half a file")
    new = live.start_daemon()
    assert new != pid and not stale.exists()
    assert Ring.open(live.run_dir / "ring").pid == new


def test_disk_cap_and_retention_delete_the_oldest(tmp_path: Path) -> None:
    hour = 3600 * 10**9
    now = 1_800_000_000 * 10**9
    channels = [(-1, "cpu_percent"), (0, "gpu_util_pct")]
    for k in range(6):  # six one-sample files, one per hour, the newest at now
        ts = np.array([now - (5 - k) * hour])
        store.write_segment(tmp_path, "h", ts, np.ones((1, 2)), channels, pid=7)
    hdir = store.host_dir(tmp_path, "h")
    size = store.list_files(hdir)[0][3]
    gone = store.prune(hdir, cap_bytes=None, retention_s=2.5 * 3600, now_ns=now)
    assert [p.name for p in gone] == [f"part-{now - k * hour}-7.parquet" for k in (5, 4, 3)]
    gone = store.prune(hdir, cap_bytes=size, retention_s=None, now_ns=now)
    assert len(gone) == 2 and [f[0] for f in store.list_files(hdir)] == [now]
    assert store.prune(hdir, cap_bytes=1, retention_s=0, now_ns=now) == []  # the newest file stays
    assert len(list(hdir.glob("date=*/hour=*"))) == 1  # emptied partitions are removed


def test_prune_on_the_daemons_kept_list_deletes_what_a_listing_would(tmp_path: Path, monkeypatch) -> None:
    from aonkit.live.daemon import Daemon

    hour, now = 3600 * 10**9, 1_800_000_000 * 10**9
    channels = [(-1, "cpu_percent")]
    d = Daemon(root=tmp_path, retention_hours=2.5)
    d.hdir = store.host_dir(tmp_path, "h")
    listings = []
    real_list = store.list_files

    def as_str(files: list) -> list:  # the daemon keeps paths as str (half the memory of Path)
        return [(t, pid, str(path), n) for t, pid, path, n in files]

    monkeypatch.setattr(store, "list_files", lambda h: listings.append(h) or real_list(h))
    for k in range(6):  # one file an hour; each flush prunes on the kept list
        written = store.write_segment(tmp_path, "h", np.array([now - (5 - k) * hour]), np.ones((1, 1)), channels, pid=7)
        store.prune(d.hdir, None, 2.5 * 3600, now_ns=now - (5 - k) * hour, files=d._known_files(written))
        assert d._files == as_str(real_list(d.hdir))
    assert len(listings) == 1  # listed once, at the first flush
    assert [f[0] for f in d._files] == [now - 2 * hour, now - hour, now]
    Path(d._files[0][2]).unlink()  # deleted by someone else: seen at the next listing, an hour on
    d._listed_at -= 3601
    assert d._known_files([]) == as_str(real_list(d.hdir)) and len(d._files) == 2 and len(listings) == 2


def test_the_running_daemon_enforces_its_cap(live) -> None:
    pid = live.start_daemon("--flush", "0.2", "--cap-bytes", "1")
    live.wait(lambda: live.status().get("deleted", 0) >= 2)
    os.kill(pid, signal.SIGTERM)
    live.wait_stopped()
    assert len(list(live.data.rglob("part-*.parquet"))) == 1


WRITER = r"""
import sys, numpy as np
from pathlib import Path
from aonkit.live.ring import Ring
ring = Ring.create(Path(sys.argv[1]), [(0, f"m{i}") for i in range(512)], 4, 1)
print("ready", flush=True)
k = 0
as_list = sys.argv[2] == "list"  # the daemon writes lists; arrays go by one slice copy
while True:
    ring.write(k, [float(k)] * 512 if as_list else np.full(512, float(k)))
    k += 1
"""


@pytest.mark.parametrize("kind", ["list", "array"])
def test_seqlock_readers_never_see_a_torn_sample(tmp_path: Path, kind: str) -> None:
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "ring"), kind], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    try:
        assert writer.stdout.readline().strip() == "ready"
        ring = Ring.open(tmp_path / "ring")
        got, cursor = 0, 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            ts, values, cursor = ring.read(cursor)
            # a sample is whole: every value is its own index, which is also its time
            assert (values == ts[:, None].astype(float)).all()
            assert np.all(np.diff(ts) > 0) and (len(ts) == 0 or ts[-1] < cursor)
            got += len(ts)
        assert got > 100 and cursor > got  # the 4-slot ring was lapped: lost samples are left out, never torn
    finally:
        writer.kill()
        writer.wait()


def test_a_list_and_an_array_write_the_same_bytes(tmp_path: Path) -> None:
    rings = [Ring.create(tmp_path / name, [(0, "a"), (1, "b"), (-1, "c")], 3, 100) for name in ("l", "a")]
    for k, vals in enumerate([[1.5, -2.0, np.nan], [0.0, 1e300, -0.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]):
        rings[0].write(1000 + k, vals)
        rings[1].write(1000 + k, np.array(vals))
    assert rings[0].count == rings[1].count == 4
    assert bytes(rings[0].mm[rings[0].header_bytes :]) == bytes(rings[1].mm[rings[1].header_bytes :])
    ts, values, cursor = rings[0].read(0)
    assert ts.tolist() == [1001, 1002, 1003] and cursor == 4  # the first was lapped (capacity 3)
    assert values[0].tolist() == [0.0, 1e300, -0.0] and rings[0].heartbeat_ns == 1003
    with pytest.raises(struct.error):
        rings[0].write(2000, [1.0, 2.0])  # one value short: refused, nothing shifted
    for r in rings:
        r.close()


def test_a_slot_whose_bytes_do_not_match_its_check_is_never_returned(tmp_path: Path) -> None:
    # what a reader on a weakly ordered CPU can see: the even seq of sample k with a value not yet visible (here:
    # the previous sample's), or sample k's seq over a slot still holding an older, complete sample's bytes
    ring = Ring.create(tmp_path / "ring", [(0, "a"), (0, "b")], 4, 100)
    for k in range(4):
        ring.write(1000 + k, [float(k), -float(k)])
    slot = ring.slots.dtype.itemsize
    stale_value = ring.header_bytes + 1 * slot + 24  # sample 1's first value
    ring.mm[stale_value : stale_value + 8] = struct.pack("<d", 0.0)
    stale_slot = ring.header_bytes + 2 * slot  # sample 2's slot, its seq right, its bytes sample 3's
    ring.mm[stale_slot + 8 : stale_slot + slot] = ring.mm[stale_slot + slot + 8 : stale_slot + 2 * slot]
    ts, values, cursor = ring.read(0)
    assert ts.tolist() == [1000, 1003] and values.tolist() == [[0.0, -0.0], [3.0, -3.0]] and cursor == 4
    ring.close()


def test_a_reader_names_a_ring_of_another_version(tmp_path: Path) -> None:
    ring = Ring.create(tmp_path / "ring", [(0, "a")], 2, 100)
    ring.mm[8:12] = struct.pack("<I", 1)  # the layout before the per-slot check
    with pytest.raises(ValueError, match=r"ring of version 1; this aonkit reads version 3$"):
        Ring.open(tmp_path / "ring")
    ring.close()


def test_zero_means_no_limit_in_the_api_as_on_the_command_line(tmp_path: Path) -> None:
    import argparse

    from aonkit.live.daemon import Daemon, daemon_from_args
    from aonkit.live.options import add_run_arguments

    p = argparse.ArgumentParser()
    add_run_arguments(p)
    cli = daemon_from_args(p.parse_args(["--root", str(tmp_path), "--cap-bytes", "0", "--retention-hours", "0"]))
    api = Daemon(root=tmp_path, cap_bytes=0, retention_hours=0)
    assert (cli.cap_bytes, cli.retention_hours) == (api.cap_bytes, api.retention_hours) == (None, None)
    assert Daemon(root=tmp_path).cap_bytes == 10 * 1024**3
    with pytest.raises(ValueError, match="no limit"):
        Daemon(root=tmp_path, cap_bytes=-1)


def test_the_daemon_reads_gpm_and_the_slow_metrics_at_their_own_intervals(tmp_path: Path) -> None:
    import argparse

    from aonkit.live.daemon import Daemon, daemon_from_args
    from aonkit.live.options import add_run_arguments

    # GIVEN the command line's defaults and its options
    p = argparse.ArgumentParser()
    add_run_arguments(p)
    default = daemon_from_args(p.parse_args(["--root", str(tmp_path)]))
    assert (default.gpm_interval_s, default.slow_interval_s) == (1.0, 10.0)
    d = daemon_from_args(p.parse_args(["--root", str(tmp_path), "--gpm-interval", "0.3", "--slow-interval", "0.5"]))
    with pytest.raises(ValueError, match="must be > 0"):
        Daemon(root=tmp_path, gpm_interval_s=0)
    # WHEN the daemon opens its GPU sampler on a fake Hopper GPU and it ticks for 1.2 s at 10 Hz
    from tests.fake_nvml import FakeGpu, FakeNvml

    t0 = time.monotonic()  # the GPM probe waits 0.15 s, not the GPM interval (here 3 s)
    slow_gpm, _ = Daemon(root=tmp_path, gpm_interval_s=3.0).open_gpu(FakeNvml([FakeGpu()]))
    assert time.monotonic() - t0 < 2.0 and slow_gpm.metrics
    slow_gpm.close()
    fake = FakeNvml([FakeGpu()])
    t0 = time.monotonic()
    gpu, _ = d.open_gpu(fake)
    g = fake.gpus[0]
    snaps, temps = g.gpm_ticks, g.calls["nvmlDeviceGetTemperatureV"]
    for k in range(12):
        time.sleep(max(0.0, t0 + 0.2 + 0.1 * k - time.monotonic()))
        gpu.sample_list()
    took = time.monotonic() - t0
    gpu.close()
    # THEN GPM was computed about every 0.3 s (3 or 4 times on time; never twice within 0.275 s, however late the
    # ticks) and the slow metrics read every 5th tick (3 times)
    reads = g.gpm_ticks - snaps
    assert 2 <= reads <= 1 + took / 0.275 and (took > 1.6 or reads <= 5), (reads, took)
    assert g.calls["nvmlDeviceGetTemperatureV"] - temps == 3
