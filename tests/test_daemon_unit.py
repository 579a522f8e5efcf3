"""`aonkit daemon unit`: the units pass systemd's own check, and their command runs the daemon as systemd would."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from aonkit.live.paths import EXIT_RUNNING
from tests.live_helpers import Live, live_world


@pytest.fixture
def live() -> Iterator[Live]:
    yield from live_world()


def unit_of(live: Live, *opts: str, **env: str) -> str:
    r = live.cli("daemon", "unit", *opts, **env)
    assert r.returncode == 0, r.stderr
    assert "systemctl" in r.stderr and "systemctl" not in r.stdout  # how to install it, beside the file
    return r.stdout


def service(text: str) -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    """ExecStart's argv and the Environment, as systemd reads them (quotes; ``%%`` and ``$$`` are one character)."""
    keys: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            k, v = line.split("=", 1)
            keys.setdefault(k, []).append(v)

    def unescape(word: str) -> str:  # systemd expands a lone %x (specifiers) and $NAME (the environment)
        def one(m: re.Match) -> str:
            assert m.group(0) in ("%%", "$$"), f"systemd would expand {m.group(0)!r} in {word!r}"
            return m.group(0)[0]

        return re.sub(r"%.|\$\$|\$\{?[A-Za-z_]", one, word)
    argv = [unescape(w) for w in shlex.split(keys["ExecStart"][0])]
    env = dict(unescape(w).split("=", 1) for v in keys.get("Environment", []) for w in shlex.split(v))
    return argv, env, keys


def test_the_units_pass_systemds_check(live: Live, tmp_path: Path) -> None:
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.skip("systemd-analyze is not installed here (the units are still checked below by running them)")
    odd = tmp_path / "data dir 100%h $HOME"  # a space, a specifier, a variable: quoted and escaped in ExecStart
    for opts, name, scope in ((("--root", str(odd)), "aonkit.service", ["--user"]),
                              (("--system", "svc_user", "--root", str(odd)), "aonkit-svc_user.service", []),
                              (("--system", "svc_user", "--flush", "30"), "aonkit-svc_user.service", [])):
        path = tmp_path / name
        path.write_text(unit_of(live, *opts, AONKIT_DATA_DIR=""))  # a system unit's files: its state directory
        env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}  # the user manager's check looks there
        r = subprocess.run([exe, *scope, "verify", str(path)], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr  # no warning either
    argv, env, keys = service(path.read_text())
    assert keys["User"] == ["svc_user"] and env["AONKIT_RUNTIME_DIR"] == "/run/aonkit-svc_user"
    assert keys["RuntimeDirectory"] == ["aonkit-svc_user"] and keys["WantedBy"] == ["multi-user.target"]
    assert keys["StateDirectory"] == ["aonkit-svc_user"]
    assert env["AONKIT_DATA_DIR"] == "/var/lib/aonkit-svc_user/samples"
    assert keys["ProtectSystem"] == ["strict"] and keys["PrivateNetwork"] == ["yes"] and "ReadWritePaths" not in keys
    # a data folder of the admin's: written through the sandbox, quoted for systemd's path list (no $ expansion)
    _, env, keys = service(unit_of(live, "--system", "svc_user", "--root", str(odd)))
    assert keys["ReadWritePaths"] == ['"' + str(odd).replace("%", "%%") + '"'] and "StateDirectory" not in keys
    assert argv[argv.index("--flush") + 1] == "30.0"
    r = live.cli("daemon", "unit", "--system", "a user; rm -rf /")
    assert r.returncode == 2 and "--system takes a user name" in r.stderr


def test_the_units_command_runs_the_daemon_and_stops_cleanly_on_its_signal(live: Live, tmp_path: Path) -> None:
    # GIVEN the user unit for a daemon whose files go to a folder with a space and a percent sign in its name
    root = live.base / "data 100%h $HOME"
    argv, env, keys = service(unit_of(live, "--interval", "0.05", "--flush", "1", "--root", str(root)))
    assert argv[:4] == [sys.executable, "-m", "aonkit.live.daemon", "run"] and argv[-1] == str(root)
    assert env["OMP_NUM_THREADS"] == "1" and env["AONKIT_RUNTIME_DIR"] == str(live.run_dir)
    assert keys["KillSignal"] == ["SIGTERM"] and keys["RestartPreventExitStatus"] == [str(EXIT_RUNNING)]
    # WHEN systemd would start it: that command, in that environment
    proc = subprocess.Popen(argv, env={**live.env, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    live.procs.append(proc)
    live.wait(lambda: live.status().get("flushes", 0) >= 2)
    # THEN it samples; a second start (a restart while it runs) exits with the status the unit does not restart on
    again = subprocess.run(argv, env={**live.env, **env}, capture_output=True, text=True, timeout=60)
    assert again.returncode == EXIT_RUNNING and f"already running (pid {proc.pid})" in again.stderr
    # AND its stop signal writes the last samples and exits 0 within the unit's TimeoutStopSec
    t0 = time.monotonic()
    proc.send_signal(getattr(signal, keys["KillSignal"][0]))
    assert proc.wait(float(keys["TimeoutStopSec"][0])) == 0, proc.stderr.read()
    assert time.monotonic() - t0 < 10
    status = live.status()
    assert status["state"] == "stopped" and status["lost"] == 0
    table = ds.dataset(root, format="parquet", partitioning="hive").to_table()
    assert table.column("ts_ns").to_pandas().nunique() == status["samples"] > 0
