"""A daemon started before the GPU driver: it looks again, and samples the GPUs from when they open.

Real daemon processes over the fake C ``libnvidia-ml`` (nvidia-ml-py's own code runs): its ``nvmlInit`` says
"driver not loaded" until a file exists (the kernel module loaded later), or the library itself appears on
``LD_LIBRARY_PATH`` later (installed while the daemon runs). A reader attached before follows to the new ring with
the GPUs' channels, a ``LiveMonitor`` on it lays its charts out again, and nothing is lost on the way.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from aonkit.live.gpu_probe import retry_delays

from .fake_libnvml import NoCompiler, build, environ
from .live_helpers import Live, live_world

live = pytest.fixture(live_world)


def c_library(live: Live, **knobs: object) -> None:
    try:
        live.env = environ(gpus=2, base=live.env, **knobs)
    except NoCompiler as exc:
        pytest.skip(str(exc))


def test_the_waits_between_looks_double_up_to_the_longest() -> None:
    assert retry_delays(60.0) == [5.0, 10.0, 20.0, 40.0, 60.0]
    assert retry_delays(7.0) == [5.0, 7.0]
    assert retry_delays(0.3) == [0.3]
    assert retry_delays(0.0) == [] and retry_delays(-1.0) == []


def test_a_driver_loaded_after_the_start_is_sampled_and_a_reader_follows(live: Live, monkeypatch) -> None:
    import aonkit
    from aonkit.live import attach
    from aonkit.live.ring import REPLACED
    from aonkit.widgets import LiveMonitor

    driver = live.base / "driver-loaded"
    c_library(live, driver_file=driver)
    pid = live.start_daemon("--gpu-retry", "0.3")
    live.wait(lambda: live.status().get("gpu_looks", 0) >= 2 and live.status().get("flushes", 0) >= 1)
    before = live.status()
    assert before["gpus"] == [] and before["gpu_note"].startswith("no NVIDIA driver (NVML: Driver Not Loaded)")
    said = live.cli("daemon", "status").stdout
    assert "only: no NVIDIA driver" in said and "looks at least every 0.3 s" in said, said

    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    monkeypatch.setenv("AONKIT_DATA_DIR", str(live.data))
    reader = attach()
    monitor = LiveMonitor(reader, rollover=100_000)
    try:
        host_channels = list(reader.channels)
        assert all(d == -1 for d, _ in host_channels)
        frames, cursor = [], 0
        frame, cursor = reader.read(cursor)
        frames.append(frame)
        monitor.poll()
        old_ring = reader.ring
        held = len(monitor.source.data["t"])
        assert held > 0 and "gpu_util_pct" not in {c["title"] for c in monitor.view.charts}

        driver.touch()
        live.wait(lambda: live.status().get("gpus") == [0, 1])
        found = live.status()
        assert found["gpus_found_ns"] and found["gpu_note"].startswith("found GPU 0, 1 after the start")
        assert "found " in live.cli("daemon", "status").stdout
        assert old_ring.state == REPLACED  # read through the reader's own mapping of the old ring

        def gpu_rows() -> bool:
            nonlocal cursor
            got, cursor = reader.read(cursor)
            frames.append(got)
            return bool((got["device"] == 1).any())

        live.wait(gpu_rows)
        assert reader.pid == pid and reader.ring is not old_ring
        assert set(host_channels) < set(reader.channels) and {d for d, _ in reader.channels} == {-1, 0, 1}
        assert "gpu_util_pct" in reader.metrics

        monitor.poll()
        titles = {c["title"] for c in monitor.view.charts}
        assert "gpu_util_pct" in titles and set(monitor.view.channels) == set(reader.channels)
        data = monitor.source.data
        assert len(data["t"]) > held  # the host's samples from before are still drawn
        assert np.isnan(data["gpu_util_pct@1"][:held]).all() and np.isfinite(data["gpu_util_pct@1"][-1])
        assert [c["title"] for c in monitor.charts.spec["charts"]] == [c["title"] for c in monitor.view.charts]

        # AND its export of the last minutes has the host's samples from before the new ring (from the files)
        bundle = aonkit.load(monitor.export(live.base / "export", minutes=5))
        exported = bundle.samples[bundle.samples["metric"] == "cpu_percent"]["ts_ns"]
        assert exported.min() < found["gpus_found_ns"] < exported.max()
        assert set(bundle.samples["device"]) == {-1, 0, 1}

        os.kill(pid, signal.SIGTERM)
        live.wait_stopped()
        st = live.status()
        window = reader.window(0)
    finally:
        monitor.close()
        reader.close()
    assert st["lost"] == 0 and st["unsaved"] == 0 and st["gpu_looks"] >= 2

    import pandas as pd

    seen = pd.concat(frames, ignore_index=True)
    host_ts = np.sort(seen.loc[seen["metric"] == "cpu_percent", "ts_ns"].unique())
    assert len(host_ts) == cursor  # every sample of both rings, each once
    # on disk: every sample of the run, the host's throughout, the GPUs' from the tick after they were found
    cpu = window[window["metric"] == "cpu_percent"]
    assert cpu["ts_ns"].nunique() == len(cpu) == st["samples"]
    util = window[window["metric"] == "gpu_util_pct"].sort_values("ts_ns")
    first = util["ts_ns"].min()
    assert first > before["status_ns"] and (cpu["ts_ns"] >= first).sum() == util["ts_ns"].nunique()
    assert util["value"].notna().all()
    steps = np.diff(util[util["device"] == 1]["value"].to_numpy()) % 101  # GPU 1: one step per read
    assert (steps == 1).all()


def test_a_library_installed_while_it_runs_is_found(live: Live) -> None:
    lib_dir = live.base / "lib"
    lib_dir.mkdir()
    c_library(live)
    live.env["LD_LIBRARY_PATH"] = str(lib_dir)  # empty: no libnvidia-ml yet
    live.start_daemon("--gpu-retry", "0.3")
    live.wait(lambda: live.status().get("gpu_looks", 0) >= 1)
    assert "NVML Shared Library Not Found" in live.status()["gpu_note"]
    (lib_dir / "libnvidia-ml.so.1").symlink_to(Path(build()) / "libnvidia-ml.so.1")
    live.wait(lambda: live.status().get("gpus") == [0, 1])
    assert live.status()["gpu_names"] == {"0": "Fake H100 (C)", "1": "Fake H100 (C)"}


def test_with_no_retry_it_never_looks_again(live: Live) -> None:
    live.env["AONKIT_FAKE_NVML"] = "tests.fake_gpus:no_driver"
    live.start_daemon("--gpu-retry", "0")
    live.wait(lambda: live.status().get("flushes", 0) >= 2)
    st = live.status()
    assert st["gpus"] == [] and st["gpu_looks"] == 0 and st["gpu_retry_s"] == 0
    assert "looks at least" not in live.cli("daemon", "status").stdout


def test_a_driver_of_another_version_makes_it_start_again_as_the_same_process(live: Live, monkeypatch) -> None:
    from aonkit.live import attach

    # GIVEN a daemon that loaded the NVML library while no driver was loaded (host only)
    upgrade = live.base / "driver-upgraded"
    c_library(live, driver_file=upgrade, upgrade_file=upgrade)
    pid = live.start_daemon("--gpu-retry", "0.3")
    live.wait(lambda: live.status().get("gpu_looks", 0) >= 1 and live.status().get("flushes", 0) >= 1)
    first = live.status()
    assert first["gpus"] == [] and "Driver Not Loaded" in first["gpu_note"]
    monkeypatch.setenv("AONKIT_RUNTIME_DIR", str(live.run_dir))
    monkeypatch.setenv("AONKIT_DATA_DIR", str(live.data))
    reader = attach()
    try:
        # WHEN a driver of another version than that library is loaded (its nvmlInit: version mismatch)
        upgrade.touch()
        # THEN the daemon writes its samples and starts again in the same process, which loads the new library
        live.wait(lambda: live.status().get("gpus") == [0, 1] and live.status()["started_ns"] > first["started_ns"])
        again = live.status()
        assert live.daemon_pid() == pid == again["pid"]
        log = (live.run_dir / "daemon.log").read_text()
        assert "the NVML library in this process is not the loaded driver's" in log and "starting again" in log
        # AND a reader attached before follows it to its new ring, with the GPUs
        cursor = 0

        def gpu_rows() -> bool:
            nonlocal cursor
            got, cursor = reader.read(cursor)
            return bool((got["device"] == 0).any())

        live.wait(gpu_rows)
        os.kill(pid, signal.SIGTERM)
        live.wait_stopped()
        window = reader.window(0)
    finally:
        reader.close()
    st = live.status()
    assert st["lost"] == 0 and st["unsaved"] == 0
    cpu = window[window["metric"] == "cpu_percent"]["ts_ns"]
    assert cpu.is_unique and cpu.min() < again["started_ns"] < cpu.max()  # both processes' samples on disk
    assert (np.diff(np.sort(cpu.to_numpy())) < 10e9).all()  # the start again took seconds, not more


def test_a_mismatch_from_the_start_is_said_and_does_not_loop(live: Live) -> None:
    # GIVEN an install whose NVML library never matches its driver (nvmlInit: version mismatch from the start)
    live.env["AONKIT_FAKE_NVML"] = "tests.fake_gpus:stale_library"
    pid = live.start_daemon("--gpu-retry", "0.2")
    # THEN the daemon samples the host, says why, keeps looking, and does not start again and again
    live.wait(lambda: live.status().get("gpu_looks", 0) >= 4)
    st = live.status()
    assert st["gpu_note"].startswith("the NVML library in this process is not the loaded driver's")
    assert live.daemon_pid() == pid and st["pid"] == pid and "starting again" not in (
        live.run_dir / "daemon.log").read_text()
    assert st["samples"] >= 1 and st["gpus"] == []


def library_path(env: dict[str, str]) -> Path:
    """The ``libnvidia-ml.so.1`` file a process with ``env`` loads (read from its memory map after ``nvmlInit``)."""
    import subprocess
    import sys

    code = ("import pynvml; pynvml.nvmlInit()\n"
            "print(next(ln.split()[-1] for ln in open('/proc/self/maps') if 'libnvidia-ml' in ln))")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.strip()).resolve()


def hidden_library_run(live: Live, env: dict[str, str]) -> dict:
    """A daemon started in a mount namespace where its NVML library is hidden (``/dev/null`` bound over the file),
    shown again after a second (``umount`` there): the real dlopen of nvidia-ml-py fails, then succeeds. Returns
    the status before and after, and the daemon's pid."""
    import shutil
    import subprocess
    import sys
    import time

    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("nsenter")):
        pytest.skip("needs root, unshare and nsenter (a mount namespace of the daemon's own)")
    tried = subprocess.run(["unshare", "-m", "--propagation", "private", "--", "mount", "--bind", "/dev/null",
                            "/dev/null"], capture_output=True, text=True)  # fmt: skip
    if tried.returncode != 0:  # a container without CAP_SYS_ADMIN
        pytest.skip(f"cannot make a mount namespace and bind in it here: {tried.stderr.strip()[:200]}")
    lib = library_path(env)
    daemon = [sys.executable, "-m", "aonkit.live.daemon", "run", "--interval", "0.05", "--flush", "1",
              "--gpu-retry", "0.3"]  # fmt: skip
    proc = subprocess.Popen(["unshare", "-m", "--propagation", "private", "--", "sh", "-c",
                             f'mount --bind /dev/null "{lib}" && exec "$@"', "sh", *daemon], env=env,
                            cwd=live.base, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    live.procs.append(proc)
    try:
        live.wait(lambda: live.status().get("gpu_looks", 0) >= 1 or proc.poll() is not None)
        assert proc.poll() is None, proc.stderr.read()
        before = live.status()
        assert live.daemon_pid() == proc.pid and not lib.stat().st_size == 0  # hidden in its namespace only
        r = subprocess.run(["nsenter", "-t", str(proc.pid), "-m", "umount", str(lib)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        t0 = time.monotonic()
        live.wait(lambda: bool(live.status().get("gpus")))
        found_s = time.monotonic() - t0
        time.sleep(1.0)
        proc.terminate()
        assert proc.wait(60) == 0
        return {"before": before, "after": live.status(), "found_s": found_s}
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_hidden_c_library_shown_again_is_found_by_nvidia_ml_pys_own_loading(live: Live) -> None:
    c_library(live)
    live.env.pop("AONKIT_FAKE_NVML", None)
    got = hidden_library_run(live, live.env)
    assert got["before"]["gpus"] == [] and "NVML Shared Library Not Found" in got["before"]["gpu_note"]
    after = got["after"]
    assert after["gpus"] == [0, 1] and after["gpu_names"]["0"] == "Fake H100 (C)" and after["lost"] == 0


@pytest.mark.gpu
def test_the_real_library_shown_again_is_found_and_every_gpu_sampled(live: Live) -> None:
    live.env.pop("AONKIT_FAKE_NVML", None)  # the machine's own driver and GPUs
    got = hidden_library_run(live, live.env)
    import pynvml

    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    print("found", got["found_s"], "s after the library came back;", got["after"]["gpu_note"])
    assert got["before"]["gpus"] == [] and "NVML Shared Library Not Found" in got["before"]["gpu_note"]
    assert got["after"]["gpus"] == list(range(count)) and got["after"]["gpu_metrics"] > 0 and got["after"]["lost"] == 0
