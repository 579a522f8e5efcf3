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
"""

from __future__ import annotations

import mmap

import numpy as np

_STEP = 1 << 20


def fresh(n: int, dtype: type | np.dtype) -> np.ndarray:
    """A writable zeroed array of ``n`` items of ``dtype`` in ordinary pages (see the module doc)."""
    dt = np.dtype(dtype)
    if n * dt.itemsize < 4 << 20:  # below numpy's huge-page threshold: the usual way
        return np.zeros(n, dt)
    return np.frombuffer(mmap.mmap(-1, n * dt.itemsize), dt, count=n)


def fresh_arange(n: int) -> np.ndarray:
    """``np.arange(n, dtype=np.int64)`` in ordinary pages, made a step at a time (no temporary of its size)."""
    out = fresh(n, np.int64)
    for a in range(0, n, _STEP):
        out[a : a + _STEP] = np.arange(a, min(n, a + _STEP), dtype=np.int64)
    return out
