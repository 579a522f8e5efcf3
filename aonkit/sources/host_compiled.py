"""The host sampler's compiled loop (:mod:`aonkit._kernels.host_loop`) seen from Python: when, the hand-over, reads.

:class:`~aonkit.sources.samplers.HostSampler` starts in the compiled loop when it can do so without compiling
or importing Numba on the user's time: Numba is already imported in the process and the loop is in Numba's
cache (``aonkit warmup`` and a first load's background compile put it there). Otherwise it samples in Python
and asks again every :data:`CHECK_S` seconds (a notebook that loads a trace meanwhile brings Numba in). It never
imports Numba itself: on the dev VM that costs 0.6 s of a core and 67 MB of RSS, and loading a first kernel
another 70 MB (LLVM), too much to add unasked to a training process. ``compiled=True`` imports and, if needed,
compiles the loop when the sampler starts; ``compiled=False`` keeps Python.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

CHECK_S = 10.0
"""Seconds between a Python loop's checks whether the compiled loop can take over."""
TRIES = 4
"""Copies a read tries before it leaves a torn sample for the next read."""


def _key(text: bytes) -> np.ndarray:
    return np.array(list(text), np.uint8)


def _args(capacity: int, n: int) -> tuple[Any, ...]:
    """Arguments of the types the real calls pass (for the readiness check and ahead compilation)."""
    ts, seq, values = np.zeros(capacity, np.int64), np.zeros(capacity, np.int64), np.zeros((capacity, n))
    loop = (0, 0, np.zeros(2, np.int32), 1, 1, _key(b"MemTotal:"), _key(b"MemAvailable:"), ts, seq, values,
            np.zeros(5, np.int64), np.zeros(4, np.int64))  # fmt: skip
    return loop, (ts, seq, values, loop[10], 0, TRIES)


def kernel(compile: bool = False) -> Any:
    """The kernel module, when its loop and reader run without compiling (or, with ``compile``, compiled here).

    None where they cannot: not Linux, no Numba, or not compiled and ``compile`` is False.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        from .._kernels import host_loop as hl
        from .._kernels._ready import compile_now, is_ready
    except Exception:  # noqa: BLE001 - no Numba, or it does not load: the Python loop samples
        return None
    loop, read = _args(1, 3)
    pairs = ((hl.host_loop, loop), (hl.ring_read, read))
    if compile:
        for fn, args in pairs:
            compile_now(fn, *args)
        return hl
    return hl if all(is_ready(fn, *args) for fn, args in pairs) else None


def preload() -> bool:
    """Import Numba and load the compiled loop from the cache now, for a caller that will import Numba anyway.

    The magic calls it before a cell whose dashboard it then shows (the dashboard imports Numba): the host
    sampler of that cell then starts in the compiled loop, and the import moves from after the cell to before
    it. True when the loop is ready.
    """
    return kernel() is not None


class CompiledLoop:
    """The compiled loop's state beside a sampler's ring (``sampler._ts``, ``sampler._values``).

    Parameters
    ----------
    hl : module
        :mod:`aonkit._kernels.host_loop` (from :func:`kernel`).
    capacity : int
        The sampler's ring capacity.
    """

    def __init__(self, hl: Any, capacity: int) -> None:
        self.hl = hl
        self.seq = np.zeros(capacity, np.int64)
        self.ctl = np.zeros(hl.CTL_SIZE, np.int64)
        self.ctl[[hl.LAST_BUSY, hl.LAST_TOTAL]] = -1
        self.cost = np.zeros(4, np.int64)
        self.keys = _key(b"MemTotal:"), _key(b"MemAvailable:")
        self.active = False

    def take_over(self, sampler: Any, last: tuple[int, int] | None) -> None:
        """Carry the Python loop's samples, cost and last CPU jiffies (None: no sample yet) over, once."""
        if self.active:
            return
        hl, cap = self.hl, len(self.seq)
        with sampler._lock:
            k = sampler._count
            taken = np.arange(max(0, k - cap), k)
            self.seq[taken % cap] = 2 * taken + 2
            self.ctl[hl.COUNT] = k
            if last is not None:
                self.ctl[hl.LAST_BUSY], self.ctl[hl.LAST_TOTAL] = last
            self.cost[:] = sampler._cost
            sampler._cost = self.cost  # cost_ns reads the loop's from now on
            self.active = True

    def run(self, sampler: Any, fds: tuple[int, int], wake_fd: int) -> None:
        """Sample until the sampler's stop pipe is written (on the sampler's thread, without the GIL)."""
        pollfd = np.zeros(2, np.int32)
        pollfd[0] = wake_fd
        pollfd.view(np.int16)[2] = 1  # events = POLLIN (native layout of struct pollfd)
        self.hl.host_loop(fds[0], fds[1], pollfd, int(sampler.interval_s * 1e9), sampler.close_min_ns, *self.keys,
                          sampler._ts, self.seq, sampler._values, self.ctl, self.cost)  # fmt: skip

    def read(self, sampler: Any, cursor: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(ts, values, next cursor) of the samples after ``cursor`` (lapped ones lost, as with the lock)."""
        _, end, ts, values = self.hl.ring_read(sampler._ts, self.seq, sampler._values, self.ctl, cursor, TRIES)
        return ts, values, int(end)

    @property
    def count(self) -> int:
        """Samples written (the cursor space)."""
        return int(self.ctl[self.hl.COUNT])

    @property
    def failed(self) -> int:
        """Samples whose reads failed or did not parse."""
        return int(self.ctl[self.hl.FAILED])


class TakeOverClock:
    """When a Python loop asks for the compiled one: every :data:`CHECK_S`, while Numba is imported."""

    def __init__(self) -> None:
        self.next_check = time.monotonic()

    def due(self) -> bool:
        """Ask now (the first call does)."""
        now = time.monotonic()
        if now < self.next_check:
            return False
        self.next_check = now + CHECK_S
        return "numba" in sys.modules
