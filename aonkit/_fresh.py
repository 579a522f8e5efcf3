"""Large arrays written once in one pass, in memory of ordinary 4 KB pages.

numpy asks for transparent huge pages for every array of 4 MB or more
(``madvise``). Where huge pages are slow to come by, the first write of such
an array costs far more than its bytes: on this project's 2-core cloud VM a
new 1 GB array took 2.5-3.2 s to fill the first time in a process (0.12 s
the second time, the pages then reused), against 0.49-0.66 s in ordinary
pages. A job's dependency graph writes about 1 GB of new arrays once
(:mod:`aonkit.analysis.depgraph_stitch`), so it takes them from here: an
anonymous mapping, zeroed by the kernel, that numpy views without a copy and
that is unmapped when the last array over it goes.

Even ordinary pages cost their first touch (0.5-0.8 s a GB here), paid in
the middle of the stitch. An :class:`Arena` moves that cost to a time when a
core would idle: a thread writes the arena's pages while this process does
work that leaves the other core free (the job graph's first rank, made in
the parent while Numba loads), and the arrays are later carved out of the
arena already in memory (0.06-0.07 s a GB to fill). The arena is wiped on
fork (``MADV_WIPEONFORK``) until its first array is taken, so that workers
forked meanwhile neither copy its pages nor turn the parent's later writes
into copy-on-write faults; from its first array on, a fork sees it as any
other memory.
"""

from __future__ import annotations

import mmap
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

_STEP = 1 << 20
_PAGE = mmap.PAGESIZE
_FILL_STEP = 32 << 20  # bytes written per call on the filling thread (numpy lets go of the GIL for each)
_MAP_NORESERVE = 0x4000  # Linux's value on x86-64 and arm64; Python's mmap does not name it
_MADV_WIPEONFORK, _MADV_KEEPONFORK = 18, 19  # Linux 4.14+


class Arena:
    """Zeroed memory for the arrays of one large result, its pages written ahead on a thread (module doc).

    Make one with :meth:`create`; :meth:`filling` around work that leaves a core idle; :meth:`take` the
    arrays (bump allocation; past the arena's end they come from :func:`fresh`); :meth:`trim` when done, which
    gives back the pages written ahead but not taken. Only on Linux (``create`` gives None elsewhere).
    """

    def __init__(self, mapped: mmap.mmap, ahead: int) -> None:
        self._map = mapped
        self._ahead = ahead  # bytes to write ahead (a multiple of the page size)
        self._written = 0  # bytes written ahead so far
        self._used = 0
        self._stop = threading.Event()
        self._forks_see_it = False

    @classmethod
    def create(cls, ahead: int, reserve: int) -> Arena | None:
        """An arena of ``reserve`` bytes (address space only) of which ``ahead`` are to be written ahead.

        None off Linux, or where the kernel refuses to wipe the mapping on fork (then writing ahead would
        make every later write of this process copy a page its forked workers share).
        """
        if not sys.platform.startswith("linux") or reserve <= 0:
            return None
        size = -(-reserve // _PAGE) * _PAGE
        try:
            mapped = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE)
            mapped.madvise(_MADV_WIPEONFORK)
        except (OSError, ValueError):
            return None
        return cls(mapped, min(size, -(-max(ahead, 0) // _PAGE) * _PAGE))

    @property
    def written(self) -> int:
        """Bytes written ahead (and not given back)."""
        return self._written

    @property
    def used(self) -> int:
        """Bytes taken by arrays so far (with their alignment)."""
        return self._used

    @contextmanager
    def filling(self) -> Iterator[None]:
        """Write the arena's pages on a thread while the body runs; stop (and join) when it ends."""
        thread = threading.Thread(target=self._fill, name="aonkit-arena", daemon=True)
        self._stop.clear()
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()

    def _fill(self) -> None:
        view = np.frombuffer(self._map, np.uint8, count=self._ahead)
        while self._written < self._ahead and not self._stop.is_set():
            end = min(self._ahead, self._written + _FILL_STEP)
            view[self._written : end] = 0  # faults the pages in; the GIL is let go during the write
            self._written = end

    def take(self, n: int, dtype: type | np.dtype) -> np.ndarray:
        """A writable zeroed array of ``n`` items of ``dtype``: from the arena while it has room."""
        dt = np.dtype(dtype)
        at = -(-self._used // 64) * 64
        if at + n * dt.itemsize > len(self._map):
            return fresh(n, dt)
        if not self._forks_see_it:  # it holds data from now on: a fork must see it
            self._map.madvise(_MADV_KEEPONFORK)
            self._forks_see_it = True
        self._used = at + n * dt.itemsize
        return np.frombuffer(self._map, dt, count=n, offset=at)

    def give_back(self, arr: np.ndarray) -> None:
        """Give back the whole pages under ``arr``, an array taken here that nothing reads any more."""
        start = arr.ctypes.data - np.frombuffer(self._map, np.uint8, count=1).ctypes.data
        first, last = -(-start // _PAGE) * _PAGE, (start + arr.nbytes) // _PAGE * _PAGE
        if 0 <= first < last <= len(self._map):
            self._map.madvise(mmap.MADV_DONTNEED, first, last - first)

    def trim(self) -> None:
        """Give back the pages written ahead that no array took."""
        start = -(-self._used // _PAGE) * _PAGE
        if self._written > start:
            self._map.madvise(mmap.MADV_DONTNEED, start, self._written - start)
        self._written = min(self._written, start)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one, else the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def fresh(n: int, dtype: type | np.dtype, arena: Arena | None = None) -> np.ndarray:
    """A writable zeroed array of ``n`` items of ``dtype`` in ordinary pages (see the module doc); from ``arena``."""
    dt = np.dtype(dtype)
    if arena is not None:
        return arena.take(n, dt)
    if n * dt.itemsize < 4 << 20:  # below numpy's huge-page threshold: the usual way
        return np.zeros(n, dt)
    return np.frombuffer(mmap.mmap(-1, n * dt.itemsize), dt, count=n)


def fresh_arange(n: int, arena: Arena | None = None) -> np.ndarray:
    """``np.arange(n, dtype=np.int64)`` in ordinary pages, made a step at a time (no temporary of its size)."""
    out = fresh(n, np.int64, arena)
    for a in range(0, n, _STEP):
        out[a : a + _STEP] = np.arange(a, min(n, a + _STEP), dtype=np.int64)
    return out
