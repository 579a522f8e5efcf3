"""Getting the GIL back quickly after each blocking call of a sample, while another thread runs Python.

Every call of a sample that releases the GIL for more than a few microseconds (a ``pread`` of ``/proc``, an
NVML call through ctypes) lets a thread running Python take it, and getting it back waits for the interpreter's
switch interval, 5 ms by default. :class:`HandoffGuard` notices a sample that waited and lowers the interval for
the samples after it (:func:`quick_handoffs`); :class:`~aonkit.sources.samplers.RingSampler` and the daemon's
tick use it. Figures in ``bench/overhead.py`` (f).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

SAMPLE_SWITCH_S = 0.0002
"""The interpreter's switch interval while a sample is taken (``sys.setswitchinterval``; see :func:`quick_handoffs`)."""
SLOW_SAMPLE_NS = 1_000_000
"""A sample slower than this (1 ms) waited on the GIL: :class:`HandoffGuard` turns quick hand-offs on."""
QUICK_SAMPLES = 50
"""Samples that quick hand-offs stay on for after a slow one."""


class _QuickHandoffs:
    """The context of :func:`quick_handoffs` (one object; a class, cheaper per sample than a generator)."""

    def __init__(self) -> None:
        self.depth, self.saved, self.lock = 0, 0.005, threading.Lock()

    def __enter__(self) -> None:
        with self.lock:
            if self.depth == 0:
                self.saved = sys.getswitchinterval()
                sys.setswitchinterval(min(SAMPLE_SWITCH_S, self.saved))
            self.depth += 1

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                sys.setswitchinterval(self.saved)


_HANDOFFS = _QuickHandoffs()


def quick_handoffs() -> _QuickHandoffs:
    """Take the GIL back within :data:`SAMPLE_SWITCH_S` after each blocking call of a sample (``with`` it).

    Every call that releases the GIL for a few microseconds or more (a ``pread`` of ``/proc``, an NVML call
    through ctypes) hands it to a thread running Python, and getting it back waits for the interpreter's switch
    interval (5 ms by default): beside a busy Python loop, a host sample (two reads) took 10 ms and an NVML-like
    sample of 30 calls 159 ms (``bench/overhead.py`` (f)), stamping it late and slowing the sampler below its
    rate. For the sample's own duration the switch interval is lowered (process-wide, counted across the
    samplers' threads, then restored); the busy thread loses only the sample's own work.
    """
    return _HANDOFFS


class HandoffGuard:
    """One sampling thread's use of :func:`quick_handoffs`: only while its samples wait on the GIL.

    A sample that took over :data:`SLOW_SAMPLE_NS` (it waited for a thread running Python) turns quick hand-offs
    on for the next :data:`QUICK_SAMPLES` samples, and each of those that still hands the GIL over (over twice
    :data:`SAMPLE_SWITCH_S`) keeps them on; a sampler beside idle threads never touches the switch interval.
    """

    def __init__(self) -> None:
        self.left, self.on = 0, False

    def call(self, fn: Any) -> Any:
        """``fn()``, with quick hand-offs while they are on."""
        self.on = self.left > 0
        if not self.on:
            return fn()
        self.left -= 1
        with _HANDOFFS:
            return fn()

    def took(self, cost_ns: int) -> None:
        """Record the wall time of the sample :meth:`call` just took."""
        if cost_ns > SLOW_SAMPLE_NS or (self.on and cost_ns > 2e9 * SAMPLE_SWITCH_S):
            self.left = QUICK_SAMPLES
