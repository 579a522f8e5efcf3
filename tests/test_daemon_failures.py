"""The daemon under what a node does to it, with real processes: failing writes, a removed runtime directory, a
stalled or blocked sampler, a restarted daemon under its readers."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aonkit.live
from aonkit.live import store
from tests.live_helpers import Live, live_world
from tests.test_daemon import disk_table, mode


@pytest.fixture
def live() -> Iterator[Live]:
    yield from live_world()


def _break_data_dir(live) -> Path:
    """Put a plain file where the daemon's data directory was (as a removed or unwritable one); return the dir."""
    away = live.base / "data.away"
    live.data.rename(away)
    live.data.write_text("not a directory")
    return away


def test_a_failing_write_keeps_the_samples_until_a_write_succeeds(live) -> None:
    pid = live.start_daemon("--flush", "0.3")
    live.wait(lambda: live.status().get("flushes", 0) >= 1)
    away = _break_data_dir(live)
    live.wait(lambda: live.status().get("flush_failures", 0) >= 2)
    st = live.status()
    assert live.daemon_pid() == pid and st["flush_error"].startswith(("NotADirectoryError", "FileExistsError"))
    text = live.cli("daemon", "status").stdout
    assert "WRITING FAILS since" in text and st["flush_error"] in text and "keeps the last 300 s" in text
    got = json.loads(live.cli("daemon", "status", "--json").stdout)
    assert got["health"] == "degraded" and got["problems"][0].startswith("WRITING FAILS since")
    live.data.unlink()
    away.rename(live.data)
    live.wait(lambda: live.status().get("flush_error", "") is None and live.status()["flushes"] > st["flushes"])
    assert "WRITING FAILS" not in live.cli("daemon", "status").stdout
    stop = live.cli("daemon", "stop")
    assert stop.returncode == 0 and "all others on disk" in stop.stdout
    st = live.status()
    assert st["state"] == "stopped" and st["lost"] == 0 and st["unsaved"] == 0 and st["flush_failures"] >= 2
    disk = disk_table(live.data)
    assert disk["ts_ns"].nunique() == st["samples"]  # every tick, those taken during the failures included
    assert disk.groupby("ts_ns").size().eq(st["channels"]).all()


def test_a_failing_write_is_retried_at_its_pace_and_a_failed_stop_says_what_was_not_written(live) -> None:
    # a 20-sample ring is more than half unwritten after 0.5 s of failures: each tick then asks for a write,
    # which must not make the flusher try at every tick (20 a second here)
    live.start_daemon("--flush", "0.5", "--capacity", "20")
    live.wait(lambda: live.status().get("flushes", 0) >= 1)
    _break_data_dir(live)
    live.wait(lambda: live.status().get("flush_failures", 0) >= 1)
    t0, n0 = time.monotonic(), live.status()["flush_failures"]
    time.sleep(2.5)
    tries = live.status()["flush_failures"] - n0
    assert 1 <= tries <= (time.monotonic() - t0) / 0.5 + 2, tries
    stop = live.cli("daemon", "stop")
    st = live.status()
    assert stop.returncode == 1 and st["state"] == "stopped" and 0 < st["unsaved"] <= 20
    assert f"{st['unsaved']} NOT WRITTEN" in stop.stdout and st["flush_error"] in stop.stdout
    assert f"{st['unsaved']} samples NOT WRITTEN at its stop" in live.cli("daemon", "status").stdout
    gone = live.cli("daemon", "status", "--json")
    got = json.loads(gone.stdout)
    assert gone.returncode == 3 and got["health"] == "not running" and got["status"]["unsaved"] == st["unsaved"]


def test_status_and_readers_say_when_sampling_has_stalled(live, monkeypatch) -> None:
    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    pid = live.start_daemon()
    live.wait(lambda: live.status().get("flushes", 0) >= 1)
    reader = aonkit.live.attach()
    assert reader.alive and "STALLED" not in live.cli("daemon", "status").stdout
    healthy = json.loads(live.cli("daemon", "status", "--json").stdout)
    assert healthy["health"] == "ok" and healthy["problems"] == [] and healthy["pid"] == pid
    assert healthy["status"]["pid"] == pid and healthy["ring"]["count"] > 0
    os.kill(pid, signal.SIGSTOP)  # as a sampling thread blocked in NVML: no tick, the process still there
    try:
        time.sleep(3.5)  # past 2 s without a tick, and 3 s (3 flushes) without a write
        r = live.cli("daemon", "status")
        assert r.returncode == 0 and re.search(r"SAMPLING STALLED: no sample for \d+\.\d s", r.stdout), r.stdout
        assert re.search(r"WRITING LATE: no write for \d+ s \(one every 1 s expected\)", r.stdout), r.stdout
        js = live.cli("daemon", "status", "--json")
        got = json.loads(js.stdout)
        assert js.returncode == 0 and got["health"] == "degraded"
        assert [x.split(":")[0] for x in got["problems"]] == ["SAMPLING STALLED", "WRITING LATE"]
        assert not reader.alive
    finally:
        os.kill(pid, signal.SIGCONT)
    live.wait(lambda: reader.alive and live.status()["status_ns"] > time.time_ns() - 10**9)
    text = live.cli("daemon", "status").stdout
    assert "STALLED" not in text and "LATE" not in text and re.search(r"taken, the last 0\.\d s ago", text), text
    assert json.loads(live.cli("daemon", "status", "--json").stdout)["health"] == "ok"
    reader.close()


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_removed_runtime_directory_is_made_again_and_no_sample_is_lost(live, monkeypatch) -> None:
    import shutil

    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    pid = live.start_daemon("--flush", "60")  # the directory is checked every 5 s between writes
    live.wait(lambda: aonkit.live.attach().alive)
    old = aonkit.live.attach()
    cursor = old.read(0)[1]
    shutil.rmtree(live.run_dir)  # what a logout does to $XDG_RUNTIME_DIR (or a /tmp cleaner to /tmp/aonkit-UID)
    t0 = time.monotonic()
    live.wait(lambda: live.run_dir.is_dir() and live.status().get("runtime_recreated") == 1)
    assert time.monotonic() - t0 < 20
    assert live.daemon_pid() == pid and mode(live.run_dir) == 0o700
    new = aonkit.live.attach()
    assert new.pid == pid and new.alive and len(new.read(0)[0])
    got = []

    def follows() -> bool:  # a reader attached before follows the daemon to its new ring, its cursor counting on
        nonlocal cursor
        frame, cursor = old.read(cursor)
        got.append(frame)
        return old.alive and len(frame) > 0 and old.ring.path.samefile(new.ring.path)

    live.wait(follows)
    ts = pd.concat(got)["ts_ns"].unique()
    assert old.pid == pid and np.all(np.diff(ts) > 0)
    again = live.cli("daemon", "start")
    assert again.returncode == 2 and f"already running (pid {pid})" in again.stdout + again.stderr
    assert "removed and made again 1 time(s)" in live.cli("daemon", "status").stdout
    new.close()
    old.close()
    assert live.cli("daemon", "stop").returncode == 0
    st = live.status()
    assert st["state"] == "stopped" and st["lost"] == 0 and st["unsaved"] == 0
    assert disk_table(live.data)["ts_ns"].nunique() == st["samples"]  # both rings' samples, every one


def test_a_reader_follows_a_restarted_daemon_and_its_cursor_counts_on(live, monkeypatch) -> None:
    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    first = live.start_daemon()
    reader = aonkit.live.attach()
    live.wait(lambda: len(reader.read(0)[0]) > 0)
    frame, cursor = reader.read(0)
    assert live.cli("daemon", "stop").returncode == 0
    frame, cursor = reader.read(cursor)  # the rest of the first run's samples
    second = live.start_daemon()
    seen = [frame]

    def follows() -> bool:
        nonlocal cursor
        frame, cursor = reader.read(cursor)
        seen.append(frame)
        return reader.pid == second and len(frame) > 0

    live.wait(follows)
    ts = pd.concat(seen)["ts_ns"].to_numpy()
    assert first != second and reader.alive and np.all(np.diff(np.unique(ts)) > 0)
    assert cursor > reader.ring.count  # the cursor only grows
    reader.close()


def test_a_live_monitor_on_the_daemon_keeps_drawing_across_a_restart(live, monkeypatch) -> None:
    from aonkit.widgets import LiveMonitor

    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    live.start_daemon()
    monitor = LiveMonitor(aonkit.live.attach(), interval_s=0.1)  # no event loop here: polled by hand
    live.wait(lambda: monitor.poll() > 0)
    assert live.cli("daemon", "stop").returncode == 0
    monitor.poll()
    before = len(monitor.source.data["t"])
    second = live.start_daemon()
    live.wait(lambda: monitor.poll() > 0 and monitor.sampler.pid == second)
    assert len(monitor.source.data["t"]) > before
    monitor.close()


def test_a_daemon_whose_runtime_directory_another_took_stops_and_leaves_that_one_alone(live, monkeypatch) -> None:
    import shutil

    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    first = live.start_daemon()
    live.wait(lambda: live.status().get("flushes", 0) >= 1)
    os.kill(first, signal.SIGSTOP)  # so that the second starts before the first notices
    try:
        shutil.rmtree(live.run_dir)
        second = live.start_daemon()
    finally:
        os.kill(first, signal.SIGCONT)
    live.wait(lambda: not _running(first))
    st = live.status()
    assert live.daemon_pid() == second and st["pid"] == second and st["state"] == "running"
    reader = aonkit.live.attach()
    assert reader.pid == second and reader.alive
    reader.close()
    assert live.cli("daemon", "stop").returncode == 0
    pids = {int(p.stem.rsplit("-", 1)[1]) for p in live.data.rglob("part-*.parquet")}
    assert pids == {first, second}  # the first wrote its samples before it stopped


def test_a_blocked_gpu_read_leaves_the_host_sampled(live, tmp_path: Path) -> None:
    hang = tmp_path / "hang"  # while it exists, the fake GPUs' utilization read does not return
    live.start_daemon("--flush", "1", AONKIT_FAKE_NVML="tests.fake_gpus:hanging_gpus", AONKIT_TEST_HANG=str(hang))
    live.wait(lambda: live.status().get("flushes", 0) >= 1)
    hang.touch()
    t0 = time.time_ns()
    live.wait(lambda: live.status().get("gpu_blocked_since_ns"), timeout=30)
    r = live.cli("daemon", "status")
    assert "GPU READS BLOCKED since" in r.stdout and "SAMPLING STALLED" not in r.stdout, r.stdout
    time.sleep(1.0)
    hang.unlink()
    t1 = time.time_ns()
    live.wait(lambda: live.status().get("gpu_blocked_since_ns", 1) is None and live.status()["flushes"] > 2)
    time.sleep(1.0)  # GPU samples again
    assert live.cli("daemon", "stop").returncode == 0
    st = live.status()
    assert st["gpu_blocks"] == 1 and st["lost"] == 0
    disk = disk_table(live.data)
    assert not disk.duplicated(["ts_ns", "device", "metric"]).any()
    host = disk[disk["device"] == -1]
    assert pd.Series(host["ts_ns"].unique()).is_monotonic_increasing  # the blocked tick was dropped
    gpu = disk[(disk["device"] == 0) & (disk["metric"] == "gpu_util_pct")].set_index("ts_ns")["value"]
    during = np.unique(host["ts_ns"][(host["ts_ns"] > t0 + 2.5e9) & (host["ts_ns"] < t1)])
    assert len(during) >= 10  # the host sampled on at 20 Hz through the block (at least 1 s of it)
    assert gpu.loc[during].isna().all()
    after = gpu[gpu.index > t1 + 0.3e9]
    assert after.notna().all() and len(after) > 5




def test_no_error_of_a_write_a_prune_or_the_status_stops_the_flusher(tmp_path: Path, monkeypatch) -> None:
    import threading

    from aonkit.live.daemon import Daemon, lock
    from aonkit.live.paths import private_dir
    from aonkit.live.status import read_json, status_text

    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(tmp_path / "run"))
    d = Daemon(root=tmp_path / "data", flush_s=0.05)
    d.rdir = private_dir(tmp_path / "run")
    d._lock_fd = lock(d.rdir)  # as run() does
    d._open()
    for k in range(5):
        d.ring.write(1_800_000_000 * 10**9 + k, [float(k)] * len(d.channels))
    real_write, real_prune = store.write_segment, store.prune

    # an error that is not an OSError (an Arrow bug, a MemoryError...) keeps the samples for the next write
    monkeypatch.setattr(store, "write_segment", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    d._flush()
    st = read_json(d.rdir / "daemon.json", "status")
    assert st["flush_error"] == "RuntimeError: boom" and st["flush_failures"] == 1 and d.flushed == 0
    # a prune that fails after a good write: the samples are on disk, the prune is said
    monkeypatch.setattr(store, "write_segment", real_write)
    monkeypatch.setattr(store, "prune", lambda *a, **k: (_ for _ in ()).throw(PermissionError("no")))
    d._flush()
    st = read_json(d.rdir / "daemon.json", "status")
    assert d.flushed == 5 and st["flush_error"] is None and st["prune_error"] == "PermissionError: no"
    assert disk_table(tmp_path / "data")["ts_ns"].nunique() == 5
    assert "disk cap and retention not applied: PermissionError: no" in status_text(d.rdir, os.getpid())
    monkeypatch.setattr(store, "prune", real_prune)
    d.ring.write(1_800_000_000 * 10**9 + 5, [5.0] * len(d.channels))
    d._flush()
    assert read_json(d.rdir / "daemon.json", "status")["prune_error"] is None and d.flushed == 6

    # a status that cannot be written (runtime directory removed) leaves the flusher running
    def no_status(state: str) -> None:
        raise FileNotFoundError("run dir gone")

    monkeypatch.setattr(d, "_write_status", no_status)
    flusher = threading.Thread(target=d._flush_loop, daemon=True)
    flusher.start()
    d.ring.write(1_800_000_000 * 10**9 + 6, [6.0] * len(d.channels))
    deadline = time.monotonic() + 30
    while d.flushed < 7 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # several more rounds, each failing to write the status
    assert flusher.is_alive() and d.flushed == 7
    d._stop.set()
    flusher.join(10)
    assert not flusher.is_alive()
    d.ring.close()
    os.close(d._lock_fd)
    if d.gpu is not None:
        d.gpu.close()


def test_a_fatal_signal_leaves_every_threads_stack_in_the_log(live) -> None:
    # systemd's watchdog ends a daemon whose sampling stopped with SIGABRT: where each thread was is then in its log
    # (the journal under systemd)
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))  # the daemon inherits it: no core file from the abort
    try:
        pid = live.start_daemon()
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))
    live.wait(lambda: live.status().get("flushes", 0) >= 1)
    os.kill(pid, signal.SIGABRT)
    live.wait(lambda: not _running(pid))
    log = (live.run_dir / "daemon.log").read_text()
    assert "Fatal Python error: Aborted" in log, log[-2000:]
    assert "in _sample_loop" in log and "in _flush_loop" in log, log[-2000:]
