"""The daemon's watchdog: the host is sampled on while an NVML call does not return.

A GPU that falls off the bus can hold an NVML call for seconds or for good. The daemon reads the GPUs on its
sampling thread, after the host, so such a call would stop the host's samples too, exactly when they matter. The
watchdog wakes every :data:`WATCH_S`; when a GPU read has run for :data:`BLOCKED_S`, it samples the host at the
daemon's interval itself, with NaN for every GPU channel, until the read returns. The sampling thread then drops
the tick it was taking (its stamp is older than the watchdog's last) and goes on. ``stats`` say it:
``gpu_blocked_since_ns`` while it lasts and ``gpu_blocks``, the count; ``aonkit daemon status`` prints
``GPU READS BLOCKED``.

A mixin of :class:`aonkit.live.daemon.Daemon` (its ``ring``, ``host_sampler``, ``channels``, ``n_host``,
``interval_s``, ``capacity``, ``flushed``, ``stats``, ``_stop`` and ``_flush_now``). The two threads write the
ring one at a time under ``_tick_lock``, which the sampling thread also holds while it samples the host.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from .sd_notify import Notifier

WATCH_S = 1.0
"""How often the watchdog looks (a wake-up a second: about 0.01% of a core)."""
BLOCKED_S = 2.0
"""A GPU read that has run this long is taken as blocked."""


class GpuWatch:
    """Samples the host while the daemon's GPU read is blocked (see the module)."""

    stats: dict[str, Any]
    _tick_lock: threading.Lock
    _gpu_since: float  # monotonic start of the GPU read under way; 0.0 when none
    _covered_to_ns: int  # the stamp of the watchdog's last tick
    notify: Notifier  # systemd's watchdog is told that samples still land in the ring

    def _watch_loop(self) -> None:
        while not self._stop.wait(WATCH_S):
            since = self._gpu_since
            if since and time.monotonic() - since > BLOCKED_S:
                self._cover(since)

    def _cover(self, since: float) -> None:
        """Write host-only ticks at the daemon's interval until the GPU read that began at ``since`` returns.

        Only that read: the sampling thread's next one (a new ``_gpu_since``) is not covered.
        """
        if self._gpu_since != since:  # it returned after the look
            return
        s = self.stats
        s["gpu_blocks"] += 1
        s["gpu_blocked_since_ns"] = time.time_ns() - int((time.monotonic() - since) * 1e9)
        self._flush_now.set()  # the flusher writes the status soon (this thread never writes files)
        missing = [math.nan] * (len(self.channels) - self.n_host)
        next_t = time.monotonic()
        while self._gpu_since == since and not self._stop.is_set():
            with self._tick_lock:
                if self._gpu_since != since:  # returned meanwhile: the sampling thread goes on
                    break
                stamp = time.time_ns()
                try:
                    host = list(self.host_sampler.sample())
                except Exception:  # noqa: BLE001 - as on the sampling thread
                    host = [math.nan] * self.n_host
                self.ring.write(stamp, host + missing)
                self.notify.alive()  # sampling goes on: systemd's watchdog is told so
                self._covered_to_ns = stamp
            if self.ring.count - self.flushed >= self.capacity // 2:
                self._flush_now.set()
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - time.monotonic()))
        s["gpu_blocked_since_ns"] = None
        self._flush_now.set()
