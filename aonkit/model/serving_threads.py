"""Threads for serving simulations: how many at once, which first, and pools kept between calls.

:func:`~aonkit.model.serving.summarize` runs simulations side by side on :func:`thread_pool`'s threads (the
kernel releases the GIL), the busiest first (:func:`busiest_first`).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def sweep_threads(count: int, threads: int | None) -> int:
    """Threads for ``count`` simulations run side by side: ``threads``, or one each up to the CPU count and 8."""
    return min(count, os.cpu_count() or 1, 8) if threads is None else max(1, int(threads))


def busiest_first(runs: Sequence[Any]) -> list[int]:
    """Indices of ``runs``, the busiest first.

    By decreasing arrivals per second over their span, then requests (the kernel's work grows with both); equal
    ones in order.
    """

    def load(i: int) -> tuple[float, int]:
        a, o = runs[i].arrivals, runs[i].order
        span = float(a[o[-1]] - a[o[0]]) if a.size > 1 else 0.0
        return (a.size / span if span > 0 else math.inf), a.size

    return sorted(range(len(runs)), key=load, reverse=True)


_POOLS: dict[tuple[int, int, str], ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def thread_pool(n: int, purpose: str = "") -> ThreadPoolExecutor:
    """A pool of ``n`` threads for simulations, kept for the next call (one per ``n`` and ``purpose``).

    ``ServingPanel``'s replica search runs on ``thread_pool(1)`` beside the sweep. Starting the threads took
    5-6 ms of a 45 ms panel update on a 2-CPU machine. Keyed by pid too: a forked child's copy of a pool has no
    threads and would never run a task. A caller whose tasks run beside a sweep's names a ``purpose``: tasks of
    one pool wait for each other, so a sweep given the same pool would wait for them.
    """
    key = (os.getpid(), n, purpose)
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = ThreadPoolExecutor(n, thread_name_prefix=f"aonkit-serving-{purpose or 'sims'}-{n}")
        return _POOLS[key]
