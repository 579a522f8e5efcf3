"""The daemon's sd_notify messages (aonkit.live.sd_notify) on a real datagram socket, as systemd receives them.

The units that use them run under a real systemd in tests/test_daemon_systemd.py (Type=notify, STATUS=, the
watchdog) and tests/test_daemon_system_unit.py.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aonkit.live.sd_notify import Notifier, status_line


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify")
    sock.bind(path)
    sock.settimeout(0.2)
    yield sock, path
    sock.close()


def received(sock: socket.socket) -> list[str]:
    out = []
    while True:
        try:
            out.append(sock.recv(4096).decode())
        except TimeoutError:
            return out


def test_ready_once_then_watchdog_pings_a_quarter_period_apart(listener: tuple[socket.socket, str]) -> None:
    # GIVEN a notifier under a unit with WatchdogSec=0.25 s (times in 64ths of a second: exact in binary)
    sock, path = listener
    now = [0.0]
    n = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "250000", "WATCHDOG_PID": str(os.getpid())},
                 clock=lambda: now[0])  # fmt: skip
    # WHEN samples land every 1/64 s for half a second
    for i in range(33):
        now[0] = i / 64
        n.alive()
    n.status("host only every 0.1 s;\n 10 samples")
    n.stopping()
    # THEN READY=1 first, then WATCHDOG=1 a quarter period apart (at 4/64, 8/64, ... 32/64 s), the status on one
    # line, then STOPPING=1
    got = received(sock)
    assert got == ["READY=1", *["WATCHDOG=1"] * 8, "STATUS=host only every 0.1 s; 10 samples", "STOPPING=1"]


def test_inert_without_systemd_and_no_watchdog_for_another_pid(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    alone = Notifier({})
    assert not alone.active and not alone.send("READY=1")
    alone.alive()
    # a child that inherited the variables of its parent's unit is not the watched process
    child = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"})
    assert child.watchdog_s == 0.0
    # a socket that is gone: False, never an exception (the daemon samples on)
    gone = Notifier({"NOTIFY_SOCKET": path + ".gone"})
    assert gone.active and not gone.send("READY=1")
    assert received(sock) == []


def test_an_abstract_socket_address(tmp_path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    name = f"aonkit-test-{os.getpid()}"
    sock.bind("\0" + name)
    sock.settimeout(0.2)
    try:
        assert Notifier({"NOTIFY_SOCKET": "@" + name}).send("READY=1")
        assert received(sock) == ["READY=1"]
    finally:
        sock.close()


def test_the_status_line_says_what_a_person_checks_first() -> None:
    st = {"gpus": [0, 1], "interval_s": 0.1, "samples": 12345, "lost": 0, "last_flush_ns": time.time_ns() - 3e9,
          "flush_error": "No space left on device", "gpu_blocked_since_ns": None}  # fmt: skip
    assert status_line(st) == ("host + 2 GPUs every 0.1 s; 12,345 samples, 0 lost; last write 3 s ago; "
                               "WRITING FAILS: No space left on device")  # fmt: skip
    one = {"gpus": [0], "interval_s": 0.05, "samples": 1, "lost": 2, "gpu_blocked_since_ns": 5}
    assert status_line(one) == "host + 1 GPU every 0.05 s; 1 sample, 2 lost; GPU READS BLOCKED"
