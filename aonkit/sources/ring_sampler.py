"""The samplers' common part: a thread that samples into a preallocated ring, and the :class:`Sampler` protocol.

:mod:`aonkit.sources.samplers` is the public path of everything here (and of the host's sampler); the NVML
sampler (:mod:`aonkit.sources.nvml`) and the host's (:mod:`aonkit.sources.host_sampler`) subclass
:class:`RingSampler`. pandas is imported where a table is made (:meth:`RingSampler.read`), not here: the daemon
samples with these modules in a process that never loads pandas.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .handoffs import HandoffGuard
from .samples import HOST_DEVICE

__all__ = ["CLOSE_MIN_NS", "STOP_WAIT_S", "RingSampler", "Sampler"]

if TYPE_CHECKING:
    import pandas as pd

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
        made = self.__dict__.get("_channels_made")
        if made is None or made[0] is not self._channel_codes:  # worked out once per set of columns
            made = (self._channel_codes, tuple((int(d), self.metrics[c])
                                               for d, c in zip(self.channel_devices, self._channel_codes)))
            self._channels_made = made
        return list(made[1])

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
        ts, values, end = self._snapshot(cursor)
        return self.long_form(ts, values), end

    def long_form(self, ts: np.ndarray, values: np.ndarray) -> pd.DataFrame:
        """The long-form table of rows :meth:`read_rows` gave: ``ts`` (n,) and ``values`` (n, channels)."""
        import pandas as pd

        n, m = len(ts), len(self._channel_codes)
        return pd.DataFrame({
            "ts_ns": np.repeat(ts, m), "device": np.tile(self.channel_devices, n),
            "metric": pd.Categorical.from_codes(np.tile(self._channel_codes, n), categories=list(self.metrics)),
            "value": values.reshape(-1),
        })  # fmt: skip

    def read_rows(self, cursor: int = 0) -> tuple[np.ndarray, np.ndarray, list[tuple[int, str]], int]:
        """As :meth:`read`, in the ring's own form: ``ts_ns`` (n,), values (n, channels), :attr:`channels`, cursor."""
        ts, values, end = self._snapshot(cursor)
        return ts, values, self.channels, end

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
