"""The user unit under a real systemd user manager: enabled and started, restarted after a crash, not restarted
when a daemon started by hand already runs, and stopped by systemd with every sample on disk.

The manager is this machine's own ``systemd --user`` (Debian's systemd), started for the test with a private
``XDG_RUNTIME_DIR`` and ``HOME``, so it touches no real session. It refuses to start unless the machine looks
booted with systemd (``/run/systemd/system`` exists). Where PID 1 is not systemd (a container, the dev VM, CI),
the test, as root, makes that marker for the manager's start only and removes it at once. The manager then
runs the unit itself: the cgroup, SIGTERM on stop, ``Restart=``, ``RestartPreventExitStatus=``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest

from aonkit.live.paths import EXIT_RUNNING
from aonkit.live.ring import Ring
from tests.live_helpers import Live, live_world
from tests.system_boot import Systemctl

SYSTEMD = next((p for p in ("/lib/systemd/systemd", "/usr/lib/systemd/systemd") if os.path.exists(p)), None)
MARKER = Path("/run/systemd/system")


class UserManager(Systemctl):
    """A ``systemd --user`` of its own, and ``systemctl --user`` pointed at it."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="aon-sd-", dir="/tmp"))
        self.xdg, self.home = self.base / "xdg", self.base / "home"
        self.xdg.mkdir(mode=0o700)
        self.units = self.home / ".config" / "systemd" / "user"
        self.units.mkdir(parents=True)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
                    "XDG_RUNTIME_DIR": str(self.xdg)}  # fmt: skip
        self.log = open(self.base / "manager.log", "w")  # noqa: SIM115 - closed in close()
        self.proc: subprocess.Popen | None = None

    def start(self) -> str | None:
        """Start the manager; None when it answers, else why it did not."""
        made = False
        if not MARKER.exists():
            if os.geteuid() != 0:
                return f"{MARKER} is absent (PID 1 is not systemd) and only root may make it for the test"
            MARKER.mkdir(parents=True)
            made = True
        try:
            self.proc = subprocess.Popen([SYSTEMD, "--user"], env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if (self.xdg / "systemd" / "private").exists() and self.ctl("show", "-p", "Version").returncode == 0:
                    return None
                time.sleep(0.1)
        finally:
            if made:
                MARKER.rmdir()  # the manager checked it when it started; nothing else needs it
        self.log.flush()
        return "systemd --user did not start here: " + (self.base / "manager.log").read_text()[-500:]

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["systemctl", "--user", *args], env=self.env, capture_output=True, text=True,
                              timeout=60)  # fmt: skip

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.ctl("stop", "aonkit.service")
            self.proc.send_signal(signal.SIGTERM)  # a user manager stops its units and exits on SIGTERM
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.base, ignore_errors=True)


def by_hand_in_a_service(live: Live, manager: UserManager) -> int:
    """``aonkit daemon start`` run as a transient service's main process (``KillMode=process``: the daemon it
    starts outlives it, in its cgroup); the daemon's pid."""
    if shutil.which("systemd-run") is None:
        pytest.skip("systemd-run is not installed here")
    env = [f"--setenv={k}={live.env[k]}" for k in ("AONKIT_RUNTIME_DIR", "AONKIT_DATA_DIR", "AONKIT_FAKE_NVML",
                                                   "PYTHONPATH")]  # fmt: skip
    r = subprocess.run(["systemd-run", "--user", "--unit=handstart", "--wait", "-p", "KillMode=process",
                        f"--working-directory={live.base}", *env, "--", sys.executable, "-m", "aonkit.cli", "daemon",
                        "start", "--interval", "0.05", "--flush", "1"], env=manager.env, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    pid = live.daemon_pid()
    assert pid is not None
    live.daemons.append(pid)
    inherited = dict(x.split("=", 1) for x in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in x)
    assert inherited.get("SYSTEMD_EXEC_PID") not in (None, str(pid))
    return pid


@pytest.fixture
def live() -> Iterator[Live]:
    yield from live_world()


@pytest.fixture
def manager() -> Iterator[UserManager]:
    if SYSTEMD is None or shutil.which("systemctl") is None:
        pytest.skip("systemd is not installed here")
    m = UserManager()
    try:
        why = m.start()
        if why is not None:
            pytest.skip(why)
        yield m
    finally:
        m.close()


def test_a_real_systemd_user_manager_runs_restarts_and_stops_the_unit(live: Live, manager: UserManager) -> None:
    # GIVEN the user unit installed as the README says, with this test's runtime and data folders
    r = live.cli("daemon", "unit", "--interval", "0.05", "--flush", "1")
    assert r.returncode == 0, r.stderr
    (manager.units / "aonkit.service").write_text(r.stdout)
    drop_in = manager.units / "aonkit.service.d"
    drop_in.mkdir()
    (drop_in / "watchdog.conf").write_text("[Service]\nWatchdogSec=3\n")  # the unit's 60 s, shortened for the test
    assert manager.ctl("daemon-reload").returncode == 0
    # WHEN it is enabled and started
    r = manager.ctl("enable", "--now", "aonkit")
    assert r.returncode == 0, r.stderr
    assert (manager.units / "default.target.wants" / "aonkit.service").is_symlink()
    # THEN the start returned once the daemon had put its first sample in the ring (Type=notify, READY=1)
    first = manager.show("aonkit", "ActiveState", "SubState", "MainPID")
    assert first["ActiveState"] == "active" and first["SubState"] == "running", first
    pid = int(first["MainPID"])
    assert live.status()["pid"] == pid and Ring.open(live.run_dir / "ring").count >= 1
    live.wait(lambda: live.status().get("flushes", 0) >= 2)
    # ... and `systemctl status` shows its state in a line (STATUS=)
    text = manager.show("aonkit", "StatusText")["StatusText"]
    assert re.fullmatch(r"host only every 0\.05 s; [\d,]+ samples, 0 lost; last write \d+ s ago", text), text
    # THEN systemd's main process is the daemon, in the unit's own cgroup
    assert live.daemon_pid() == pid and live.status()["pid"] == pid
    assert live.status()["systemd"] == {"unit": "aonkit.service", "scope": "user"}  # it knows, and says so
    assert live.cli("daemon", "status").stdout.splitlines()[0].endswith("systemd's user unit aonkit.service")
    assert "aonkit.service" in Path(f"/proc/{pid}/cgroup").read_text()
    # WHEN its sampling stops (SIGSTOP: no sample reaches the ring): THEN systemd's watchdog ends it after
    # WatchdogSec, and it is restarted after RestartSec and samples again
    os.kill(pid, signal.SIGSTOP)
    manager.wait_for("aonkit", SubState="auto-restart", timeout=15)
    assert manager.show("aonkit", "Result")["Result"] == "watchdog"
    again = manager.wait_for("aonkit", SubState="running", NRestarts="1", timeout=30)
    assert int(again["MainPID"]) != pid
    live.wait(lambda: live.status().get("pid") == int(again["MainPID"]) and live.status().get("flushes", 0) >= 2)
    # WHEN systemd stops it: SIGTERM, a clean exit, every sample of that run on disk
    assert manager.ctl("stop", "aonkit").returncode == 0
    done = manager.show("aonkit", "ActiveState", "Result")
    assert done == {"ActiveState": "inactive", "Result": "success"}
    status = live.status()
    assert status["state"] == "stopped" and status["lost"] == 0 and status["pid"] == int(again["MainPID"])
    table = ds.dataset(live.data, format="parquet", partitioning="hive").to_table()
    ts = np.unique(table.column("ts_ns").to_numpy())
    run = ts[ts >= status["started_ns"]]  # the restarted daemon's samples: none missing, up to its stop
    assert len(run) > 20 and np.diff(run).max() < 3 * 0.05e9 and status["status_ns"] - run[-1] < 2 * 0.05e9
    # WHEN a daemon started by hand already runs: the unit exits 4 and is not restarted (no restart loop). By hand
    # from a shell that is itself a service (as from a job script): the daemon inherits its SYSTEMD_EXEC_PID and
    # stays in its cgroup, and still knows that no unit started it
    hand = by_hand_in_a_service(live, manager)
    assert "/handstart.service" in Path(f"/proc/{hand}/cgroup").read_text()
    assert live.status()["systemd"] is None  # started by hand: no unit
    assert manager.ctl("start", "aonkit").returncode != 0  # Type=notify: the start fails (exit 4 before READY)
    failed = manager.wait_for("aonkit", ActiveState="failed", timeout=30)
    assert manager.show("aonkit", "ExecMainStatus", "SubState") == {"ExecMainStatus": str(EXIT_RUNNING),
                                                                     "SubState": "failed"}  # fmt: skip
    assert failed["NRestarts"] == "0"  # the count starts again with each start by hand
    assert live.cli("daemon", "stop").returncode == 0


def test_a_driver_upgrade_under_the_user_unit_starts_the_daemon_again_as_its_main_process(live: Live,
                                                                                       manager: UserManager) -> None:
    from tests.fake_libnvml import NoCompiler, build

    try:
        lib = build()
    except NoCompiler as exc:
        pytest.skip(str(exc))
    # GIVEN the user unit over the C libnvidia-ml, started while "no driver is loaded" (host only), with a short
    # watchdog: the daemon loaded the library
    upgrade = live.base / "driver-upgraded"
    r = live.cli("daemon", "unit", "--interval", "0.05", "--flush", "1", "--gpu-retry", "0.3")
    assert r.returncode == 0, r.stderr
    (manager.units / "aonkit.service").write_text(r.stdout)
    drop_in = manager.units / "aonkit.service.d"
    drop_in.mkdir()
    (drop_in / "gpus.conf").write_text(f"[Service]\nWatchdogSec=6\nEnvironment=LD_LIBRARY_PATH={lib} "
                                       f"AONKIT_FAKE_NVML_GPUS=2 AONKIT_FAKE_NVML_DRIVER_FILE={upgrade} "
                                       f"AONKIT_FAKE_NVML_UPGRADE_FILE={upgrade}\n")  # fmt: skip
    assert manager.ctl("daemon-reload").returncode == 0 and manager.ctl("start", "aonkit").returncode == 0
    first = manager.wait_for("aonkit", ActiveState="active", SubState="running")
    live.wait(lambda: live.status().get("gpu_looks", 0) >= 1)
    assert live.status()["gpus"] == [] and live.status()["pid"] == int(first["MainPID"])
    # WHEN a driver of another version is loaded: THEN the daemon starts again inside the same main process,
    # which systemd keeps as the unit's (not a restart, no watchdog), and samples the GPUs
    upgrade.touch()
    live.wait(lambda: live.status().get("gpus") == [0, 1])
    time.sleep(7)  # more than the watchdog's 6 s: the new process image pings it (3 s: a re-exec under the full
    # suite's load once took longer to import and ping)
    now = manager.show("aonkit", "ActiveState", "SubState", "MainPID", "NRestarts", "Result")
    assert now == {"ActiveState": "active", "SubState": "running", "MainPID": first["MainPID"], "NRestarts": "0",
                   "Result": "success"}, now  # fmt: skip
    assert live.status()["pid"] == int(first["MainPID"]) and live.status()["systemd"]["unit"] == "aonkit.service"
    assert manager.ctl("stop", "aonkit").returncode == 0
    assert live.status()["state"] == "stopped" and live.status()["lost"] == 0
