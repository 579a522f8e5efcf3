"""Live metric samplers, and the one path by which samples reach a trace.

A sampler samples on its own thread into a preallocated ring buffer and hands
out new samples in the long form shared with nsys ``GPU_METRICS``
(:data:`SAMPLE_COLUMNS`: ``ts_ns``, ``device``, ``metric``, ``value``;
``ts_ns`` on the ``time.time_ns()`` clock, which is the profiler traces'
epoch clock). Readers keep a cursor, so several views can read one sampler.
:class:`HostSampler` samples CPU and memory; :class:`aonkit.sources.nvml.NvmlSampler`
samples GPUs through NVML behind the same :class:`Sampler` protocol (one ring
column per (device, metric) channel).

Samples reach a :class:`~aonkit.Trace` through ``trace.samples`` only, a
table of that long form:

* a source that records samples with the trace sets it when reading (the
  nsys reader, from ``GPU_METRICS``: :mod:`aonkit.sources.nsys.metrics`);
* samples taken live beside a run are attached afterwards with
  :func:`attach_samples` (a sampler, or a table it returned), added to any
  samples the trace has.

From there the timeline draws each (metric, device) as a counter lane and
the Parquet cache saves them. :class:`aonkit.widgets.LiveMonitor` plots a
sampler's table while it runs (figures from :mod:`aonkit.views.monitor`).
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from . import host_compiled
from .handoffs import HandoffGuard
from .samples import HOST_DEVICE, SAMPLE_COLUMNS, attach_samples, samples_table

__all__ = ["HOST_DEVICE", "SAMPLE_COLUMNS", "HostSampler", "RingSampler", "Sampler", "attach_samples",
           "samples_table"]  # fmt: skip

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported where a table is made (read; samples.py), not here: the daemon
# samples with this module in a process that never loads pandas.

STOP_WAIT_S = 5.0
"""How long :meth:`RingSampler.stop` waits for a sampling thread that is inside a sample (at least 5 intervals)."""
CLOSE_MIN_NS = 10_000_000
"""A stop takes a closing sample when the last one is at least this old (one jiffy at Linux's usual 100 Hz: CPU %
over less is mostly rounding); so a run of any length has a sample at its start and, from 10 ms, one at its end."""


class Sampler(Protocol):
    """What a live view needs from a sampler."""

    metrics: tuple[str, ...]

    def start(self) -> None:
        """Start sampling (idempotent)."""

    def stop(self) -> bool | None:
        """Stop sampling and join the thread (False: a thread blocked in a call was not waited for)."""

    def read(self, cursor: int = 0) -> tuple[pd.DataFrame, int]:
        """Samples taken after ``cursor`` (long form) and the cursor to pass next time."""


class RingSampler:
    """Thread + ring buffer shared by samplers; subclasses implement :meth:`sample`.

    The thread samples as soon as it starts (even if :meth:`stop` came first), then every ``interval_s``, and
    once more when stopped if the last sample is at least :data:`CLOSE_MIN_NS` old: the samples span the run.

    Parameters
    ----------
    interval_s : float
        Time between samples.
    capacity : int
        Samples kept per channel; older ones are overwritten (a reader that falls
        further behind than this loses the oldest, and the returned cursor says so).
    channels : sequence of (int, str), optional
        The ring's columns as (device, metric) pairs, in the order :meth:`sample`
        returns values; by default one per name in ``metrics``, all on ``device``.
        ``metrics`` becomes the distinct names, in order of first appearance.

    Attributes
    ----------
    channel_devices : numpy.ndarray
        The device of each channel (int64).
    error : Exception or None
        The last exception :meth:`sample` raised; that sample's values are NaN and
        sampling goes on (the thread never raises).
    stuck : str or None
        Why the last :meth:`stop` did not wait for the thread (None when it did).
    """

    metrics: tuple[str, ...] = ()
    device: int = HOST_DEVICE
    close_min_ns: int = CLOSE_MIN_NS

    def __init__(self, interval_s: float = 0.5, capacity: int = 7200,
                 channels: Sequence[tuple[int, str]] | None = None) -> None:  # fmt: skip
        if interval_s <= 0 or capacity < 1:
            raise ValueError("interval_s must be > 0 and capacity >= 1")
        if channels is None:
            channels = [(self.device, m) for m in self.metrics]
        names = list(dict.fromkeys(m for _, m in channels))
        self.metrics = tuple(names)
        self.channel_devices = np.array([d for d, _ in channels], np.int64)
        self._channel_codes = np.array([names.index(m) for _, m in channels], np.int64)
        self.interval_s = interval_s
        self.capacity = capacity
        self._ts = np.zeros(capacity, np.int64)
        self._values = np.zeros((capacity, len(channels)), np.float64)
        self._count = 0  # samples ever taken: the cursor space
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pipe: tuple[int, int] | None = None  # wakes the sleeping thread on stop (POSIX)
        self._thread: threading.Thread | None = None
        self._orphaned_pipe: tuple[int, int] | None = None  # a stop's pipe for a thread it did not wait for
        self._end_lock = threading.Lock()  # the thread's end and a stop that gives up on it: one before the other
        self._ended = True
        self._cost = [0, 0, 0, 0]  # n, total, max, last (ns)
        self.error: Exception | None = None
        self.stuck: str | None = None

    @property
    def channels(self) -> list[tuple[int, str]]:
        """The ring's columns as (device, metric) pairs."""
        return [(int(d), self.metrics[c]) for d, c in zip(self.channel_devices, self._channel_codes)]

    @property
    def cost_ns(self) -> dict[str, float]:
        """Time :meth:`sample` took on the thread: ``n`` samples, ``mean``, ``max``, ``last`` (ns)."""
        n, total, most, last = (int(x) for x in self._cost)
        return {"n": n, "mean": total / n if n else 0.0, "max": float(most), "last": float(last)}

    @property
    def count(self) -> int:
        """Samples taken so far (the cursor space of :meth:`read`)."""
        return self._count

    def sample(self) -> np.ndarray:
        """One value per channel (override)."""
        raise NotImplementedError

    def _run(self) -> bool:
        """Sample until stopped (False) or until :meth:`_leave_python` hands over to another loop (True)."""
        next_t = time.monotonic()
        handoffs = HandoffGuard()
        while True:  # a first sample even when stopped already: a run has one at its start
            self._take(handoffs)
            next_t += self.interval_s
            self._sleep(max(0.0, next_t - time.monotonic()))
            if self._stop.is_set():
                if time.time_ns() - self._ts[(self._count - 1) % self.capacity] >= self.close_min_ns:
                    self._take(handoffs)  # and one at its end
                return False
            if self._leave_python():
                return True

    def _take(self, handoffs: HandoffGuard) -> None:
        """Take one sample and write it to the ring."""
        now = time.time_ns()  # when the readings start (a sample is stamped with its first reading's time)
        t0 = time.perf_counter_ns()
        try:
            values = handoffs.call(self.sample)
        except Exception as exc:  # the thread goes on; the error is kept
            self.error, values = exc, np.nan
        cost = time.perf_counter_ns() - t0
        handoffs.took(cost)
        with self._lock:
            slot = self._count % self.capacity
            self._ts[slot] = now
            self._values[slot] = values
            self._count += 1
            c = self._cost
            c[0], c[1], c[2], c[3] = c[0] + 1, c[1] + cost, max(c[2], cost), cost

    def _leave_python(self) -> bool:
        """True to end this Python loop (a subclass's compiled loop takes over; checked after each sleep)."""
        return False

    def _sleep(self, seconds: float) -> None:
        """Wait until the next tick or until :meth:`stop` (one ``select`` on a pipe: the cheapest wake-up)."""
        if self._pipe is None:
            self._stop.wait(seconds)
        else:
            select.select([self._pipe[0]], [], [], seconds)

    def start(self) -> None:
        """Start the sampling thread (a daemon; idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        if os.name == "posix" and self._pipe is None:
            self._pipe = os.pipe()
        self.stuck, self._ended = None, False
        self._thread = threading.Thread(target=self._thread_main, name=f"aonkit-{type(self).__name__}", daemon=True)
        self._thread.start()

    def _thread_main(self) -> None:
        try:
            self._run()
        finally:
            with self._end_lock:
                self._ended = True
                left, self._orphaned_pipe = self._orphaned_pipe, None  # the pipe of a stop that did not wait
            for fd in left or ():
                os.close(fd)

    def wait_first(self, timeout_s: float = 1.0) -> bool:
        """Wait (at most ``timeout_s``) until the first sample is in the ring; True when it is."""
        deadline = time.monotonic() + timeout_s
        while self.count == 0:
            if time.monotonic() >= deadline or self._thread is None:
                return False
            time.sleep(0.0005)
        return True

    def stop(self, timeout_s: float | None = None) -> bool:
        """Stop sampling and wait for the thread; True when it has ended.

        A thread still inside :meth:`sample` after ``timeout_s`` (default :data:`STOP_WAIT_S`, and at least 5
        intervals), e.g. blocked in an NVML call to a GPU that fell off the bus, is not waited for: it is told
        to stop, left to end by itself (a daemon thread), and ``stuck`` says so; the samples taken until then
        stay readable. The caller (a notebook cell) is never held by a driver.
        """
        self._stop.set()
        if self._pipe is not None:
            os.write(self._pipe[1], b"x")
        if self._thread is not None:
            wait = max(STOP_WAIT_S, 5 * self.interval_s) if timeout_s is None else timeout_s
            self._thread.join(wait)
            with self._end_lock:
                if not self._ended:
                    self.stuck = (f"its thread was still taking a sample {wait:g} s after the stop (blocked in a "
                                  "driver call?)")
                    if self._pipe is not None:  # closed by the thread when it ends
                        self._orphaned_pipe, self._pipe = self._pipe, None
                    return False
            self._thread = None
        if self._pipe is not None:
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None
        return True

    def read(self, cursor: int = 0) -> tuple[pd.DataFrame, int]:
        """Samples taken after ``cursor``, oldest first, in long form; and the next cursor."""
        import pandas as pd

        ts, values, end = self._snapshot(cursor)
        n, m = len(ts), len(self._channel_codes)
        frame = pd.DataFrame({
            "ts_ns": np.repeat(ts, m), "device": np.tile(self.channel_devices, n),
            "metric": pd.Categorical.from_codes(np.tile(self._channel_codes, n), categories=list(self.metrics)),
            "value": values.reshape(-1),
        })  # fmt: skip
        return frame, end

    def _snapshot(self, cursor: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(ts, values, next cursor) of the samples in the ring after ``cursor``."""
        with self._lock:
            end = self._count
            slots = np.arange(max(cursor, end - self.capacity, 0), end) % self.capacity
            return self._ts[slots].copy(), self._values[slots].copy(), end

    def __enter__(self) -> RingSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
