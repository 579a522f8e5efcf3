"""Real processes for the daemon tests: a private runtime and data directory, the CLI, and cleanup that kills."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from aonkit.live.status import read_json, running_pid

ROOT = Path(__file__).resolve().parent.parent


class Live:
    """One test's daemon world: ``run/`` (runtime dir: short, for Unix socket paths) and ``data/`` (Parquet)."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="aon-", dir="/tmp"))
        self.run_dir, self.data = self.base / "run", self.base / "data"
        self.env = {**os.environ, "AONKIT_RUNTIME_DIR": str(self.run_dir), "AONKIT_DATA_DIR": str(self.data),
                    "AONKIT_FAKE_NVML": "tests.fake_gpus:two_gpus",
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}  # fmt: skip
        self.env.pop("AONKIT_SERVE", None)
        self.procs: list[subprocess.Popen] = []
        self.daemons: list[int] = []

    def cli(self, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "aonkit.cli", *args], env={**self.env, **env}, cwd=self.base,
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip

    def start_daemon(self, *opts: str, **env: str) -> int:
        r = self.cli("daemon", "start", "--interval", "0.05", "--flush", "1", *opts, **env)
        assert r.returncode == 0, r.stdout + r.stderr
        pid = self.daemon_pid()
        assert pid is not None and f"started (pid {pid})" in r.stdout
        self.daemons.append(pid)
        return pid

    def daemon_pid(self) -> int | None:
        return running_pid(self.run_dir) if self.run_dir.is_dir() else None

    def status(self) -> dict:
        return read_json(self.run_dir / "daemon.json", "status") or {}

    def wait(self, what, timeout: float = 60.0, every: float = 0.05) -> None:
        deadline = time.monotonic() + timeout
        while not what():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(every)

    def wait_stopped(self, timeout: float = 60.0) -> None:
        self.wait(lambda: self.daemon_pid() is None, timeout)

    def spawn(self, args: list[str], **env: str) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, *args], env={**self.env, **env}, cwd=self.base, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
        p.lines = []  # type: ignore[attr-defined]
        threading.Thread(target=lambda: [p.lines.append(x.rstrip()) for x in p.stdout], daemon=True).start()
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for pid in self.daemons:
            if self.daemon_pid() == pid:
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.base, ignore_errors=True)


def live_world() -> Iterator[Live]:
    """The body of each test module's ``live`` fixture: a :class:`Live`, closed (processes killed) afterwards."""
    world = Live()
    try:
        yield world
    finally:
        world.close()


def wait_line(proc: subprocess.Popen, prefix: str, timeout: float = 60.0) -> str:
    """The first output line of ``proc`` starting with ``prefix`` (fails if it exits or times out first)."""
    deadline, exited = time.monotonic() + timeout, None
    while True:
        hit = next((x for x in list(proc.lines) if x.startswith(prefix)), None)
        if hit is not None:
            return hit
        now = time.monotonic()
        if exited is None and proc.poll() is not None:
            exited = now
        tail = "\n".join(proc.lines[-20:])
        assert exited is None or now - exited < 2, f"exited ({proc.returncode}) before {prefix!r}:\n{tail}"
        assert now < deadline, f"no line {prefix!r} within {timeout} s:\n{tail}"
        time.sleep(0.05)
