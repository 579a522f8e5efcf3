"""The host's sampler: CPU and memory from ``/proc`` (psutil elsewhere), on a Python loop or a compiled one.

Its public path is :mod:`aonkit.sources.samplers`; :mod:`aonkit.sources.host_compiled` says when the compiled
loop samples.
"""

from __future__ import annotations

import os

import numpy as np

from . import host_compiled
from .ring_sampler import RingSampler

__all__ = ["HostSampler"]


class HostSampler(RingSampler):
    """Host CPU utilisation (%) and memory in use (%, bytes).

    CPU % is the share of the interval since the previous sample, so the
    first sample's is NaN: there is no interval before it to measure.

    On Linux each sample is two ``pread`` calls on ``/proc/stat`` and
    ``/proc/meminfo`` kept open (psutil's formulas: busy = total - idle -
    iowait; used = MemTotal - MemAvailable), about a third of psutil's cost;
    elsewhere psutil. There the sampling thread runs the compiled loop of
    :mod:`aonkit._kernels.host_loop` when it can (it never takes the GIL:
    0.11-0.13% of a core at 10 Hz on the dev VM against 0.28% for the
    Python loop); ``compiled`` and :mod:`aonkit.sources.host_compiled` say
    when. ``bench/overhead.py`` measures the thread's CPU time.

    Parameters
    ----------
    interval_s, capacity
        As :class:`RingSampler`.
    compiled : bool or None
        None (default): the compiled loop where Numba is already imported and
        the loop is in its cache (at the start, or taking over from the Python
        loop later); True: imported and, if needed, compiled at :meth:`start`;
        False: the Python loop only.
    """

    metrics = ("cpu_percent", "memory_percent", "memory_used_bytes")

    def __init__(self, interval_s: float = 0.5, capacity: int = 7200, compiled: bool | None = None) -> None:
        self._fds: tuple[int, int] | None = None
        self._sampled = False  # the first sample's CPU % would cover only the ms since this point
        self.compiled = compiled
        self._loop: host_compiled.CompiledLoop | None = None  # the compiled loop, once it is loaded
        self._clock: host_compiled.TakeOverClock | None = None
        try:
            self._fds = (os.open("/proc/stat", os.O_RDONLY), os.open("/proc/meminfo", os.O_RDONLY))
            self._last = self._cpu_times()
        except (OSError, ValueError):
            self._close_fds()
            import psutil

            self._psutil = psutil
            psutil.cpu_percent(None)  # the first call only sets the reference point
        super().__init__(interval_s, capacity)

    def _cpu_times(self) -> tuple[int, int]:
        """(busy, total) jiffies of all CPUs from the first line of /proc/stat."""
        assert self._fds is not None
        f = os.pread(self._fds[0], 160, 0).split(None, 9)  # "cpu" user nice system idle iowait irq softirq steal
        total = int(f[1]) + int(f[2]) + int(f[3]) + int(f[6]) + int(f[7]) + int(f[8])  # guest is inside user
        idle = int(f[4]) + int(f[5])
        return total, total + idle

    def sample(self) -> tuple[float, float, float]:
        """CPU %, memory % and used bytes now; the first CPU % is NaN (no interval to measure it over yet)."""
        first, self._sampled = not self._sampled, True
        if self._fds is None:
            vm = self._psutil.virtual_memory()
            cpu = self._psutil.cpu_percent(None)
            return (np.nan if first else cpu), vm.percent, float(vm.total - vm.available)
        busy, total = self._cpu_times()
        (b0, t0), self._last = self._last, (busy, total)
        cpu = np.nan if first else 100.0 * (busy - b0) / (total - t0) if total > t0 else 0.0
        mem = os.pread(self._fds[1], 256, 0)
        mem_total = int(mem[mem.index(b"MemTotal:") + 9 : mem.index(b"kB")]) * 1024
        i = mem.index(b"MemAvailable:") + 13
        avail = int(mem[i : mem.index(b"kB", i)]) * 1024
        used = mem_total - avail
        return cpu, 100.0 * used / mem_total, float(used)

    @property
    def count(self) -> int:
        """Samples taken so far (the cursor space of :meth:`read`), by either loop."""
        return self._loop.count if self._loop is not None and self._loop.active else self._count

    @property
    def loop(self) -> str:
        """Which loop samples: ``"compiled"`` (once it has taken over) or ``"python"``."""
        return "compiled" if self._loop is not None and self._loop.active else "python"

    def start(self) -> None:
        """Start sampling; with ``compiled=True``, compile the loop first if it is not compiled."""
        if self.compiled and self._fds is not None and self._loop is None:
            hl = host_compiled.kernel(compile=True)
            self._loop = host_compiled.CompiledLoop(hl, self.capacity) if hl is not None else None
        super().start()

    def _leave_python(self) -> bool:
        if self._fds is None or self.compiled is False:
            return False
        if self._clock is None:
            self._clock = host_compiled.TakeOverClock()
        if self._loop is None and self._clock.due():
            hl = host_compiled.kernel()
            self._loop = host_compiled.CompiledLoop(hl, self.capacity) if hl is not None else None
        return self._loop is not None

    def _run(self) -> bool:
        if not self._leave_python() and not super()._run():
            return False  # stopped in Python (after its closing sample)
        if self._loop is None or self._pipe is None or self._fds is None:
            return False
        # the compiled loop samples at once and on its stop (a stop that came meanwhile included), as Python does
        self._loop.take_over(self, self._last if self._sampled else None)
        self._loop.run(self, self._fds, self._pipe[0])
        return False

    def _snapshot(self, cursor: int) -> tuple[np.ndarray, np.ndarray, int]:
        if self._loop is None or not self._loop.active:
            return super()._snapshot(cursor)
        failed = self._loop.failed
        if failed and self.error is None:
            self.error = OSError(f"{failed} host samples did not read or parse /proc/stat and /proc/meminfo")
        return self._loop.read(self, cursor)

    def _close_fds(self) -> None:
        for fd in self._fds or ():
            os.close(fd)
        self._fds = None

    def __del__(self) -> None:
        self._close_fds()
