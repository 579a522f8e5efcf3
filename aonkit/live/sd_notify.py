"""What the daemon tells the systemd that started it: ready, its state in a line, alive, stopping.

A unit of ``Type=notify`` (``aonkit daemon unit``) is started when the daemon says ``READY=1``, after its first
sample is in the ring, so ``systemctl start`` returns once readers can attach and a daemon that cannot run (this
user's already does: exit 4) fails the start itself. ``STATUS=`` is the line ``systemctl status`` shows (the
samplers, samples taken and lost, the last write, what is wrong). With ``WatchdogSec=`` the daemon says
``WATCHDOG=1`` while samples keep landing in the ring (from the sampling thread, or the GPU watchdog's host
ticks while an NVML call is blocked), so systemd restarts a daemon whose sampling has stopped.

The messages are datagrams to ``$NOTIFY_SOCKET`` (systemd's ``sd_notify`` protocol); without it (a daemon started
by hand) every call does nothing. Only the process systemd started speaks (``NotifyAccess=main``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from .status import GPU_BLOCKED, WRITING_FAILS


class Notifier:
    """The ``sd_notify`` messages of one daemon run; inert outside a systemd unit.

    Parameters
    ----------
    environ : mapping, optional
        Where ``NOTIFY_SOCKET``, ``WATCHDOG_USEC`` and ``WATCHDOG_PID`` are read (default: ``os.environ``).
    clock : callable, optional
        Seconds, for the watchdog's spacing (default ``time.monotonic``).
    """

    def __init__(self, environ: dict[str, str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        env = os.environ if environ is None else environ
        addr = env.get("NOTIFY_SOCKET", "")
        self.addr = "\0" + addr[1:] if addr.startswith("@") else addr  # "@": Linux's abstract namespace
        watchdog = env.get("WATCHDOG_USEC", "")
        mine = env.get("WATCHDOG_PID", str(os.getpid())) == str(os.getpid())
        self.watchdog_s = int(watchdog) / 1e6 if watchdog.isdigit() and mine else 0.0
        self.ready = False
        self._pinged = 0.0
        self._sock: socket.socket | None = None

    @property
    def active(self) -> bool:
        """Whether a systemd unit listens."""
        return bool(self.addr)

    def send(self, *lines: str) -> bool:
        """Send ``KEY=value`` lines in one datagram; False when none listens or it failed (never raises)."""
        if not self.addr:
            return False
        try:
            if self._sock is None:  # never blocking: a full queue at systemd must not hold the sampling thread
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.setblocking(False)
            self._sock.sendto("\n".join(lines).encode(), self.addr)
        except OSError:
            return False
        return True

    def alive(self) -> None:
        """A sample landed in the ring: ``READY=1`` the first time, then ``WATCHDOG=1`` a quarter period apart."""
        if not self.addr:
            return
        now = self.clock()
        if not self.ready:
            self.ready = self.send("READY=1")
            self._pinged = now
        elif self.watchdog_s and now - self._pinged >= self.watchdog_s / 4:
            self._pinged = now
            self.send("WATCHDOG=1")

    def status(self, text: str) -> None:
        """The line ``systemctl status`` shows (``STATUS=``; one line)."""
        self.send("STATUS=" + " ".join(text.split()))

    def stopping(self) -> None:
        """``STOPPING=1``: the daemon is writing its last samples."""
        self.send("STOPPING=1")


def status_line(st: dict) -> str:
    """The daemon's state in one line for ``STATUS=``, from what its status file holds."""
    gpus = len(st.get("gpus") or [])
    what = f"host + {gpus} GPU{'s' if gpus != 1 else ''}" if gpus else "host only"
    n = st["samples"]
    line = f"{what} every {st['interval_s']:g} s; {n:,} sample{'s' if n != 1 else ''}, {st['lost']:,} lost"
    if st.get("last_flush_ns"):
        line += f"; last write {max(0, (time.time_ns() - st['last_flush_ns'])) / 1e9:.0f} s ago"
    if st.get("flush_error"):
        line += f"; {WRITING_FAILS}: {st['flush_error']}"
    if st.get("gpu_blocked_since_ns"):
        line += f"; {GPU_BLOCKED}"
    return line
