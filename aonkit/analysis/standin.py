"""Whether an analysis runs a stand-in that needs no compilation rather than its Numba kernel.

A kernel's first compilation on a machine costs seconds (``bench/coldstart.py``);
a few analyses whose kernels cost the most have a numpy stand-in with the
same results, which runs while the kernel is neither compiled in this process
nor in Numba's on-disk cache. Choosing a stand-in starts the background
compilation of :mod:`aonkit.sources.first_run` (once per process; one per
cache folder), which puts every kernel into the cache, so a later call, in
this process or another, runs the kernel. The stand-ins are slower warm (a
numpy sort or partition where the kernel does one pass) but far faster than a
compilation, up to a point: while no background compilation runs (none can
without Numba's cache, ``AONKIT_BACKGROUND_COMPILE=0`` starts none, or it ended
without this kernel), a process spends at most
:data:`BUDGET_S` in stand-ins and past that compiles each kernel it still
lacks, where the stand-ins would otherwise run for good.

``AONKIT_STANDINS`` decides: ``auto`` as above, ``0`` never a stand-in, ``1``
always (tests compare both ways); when it is not set, ``AONKIT_QUICK_PARSE``
decides the same way, as for the parser.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["BUDGET_S", "kernel_or_standin", "use_standin"]

# Seconds a process spends in stand-ins, while no background compilation runs, before it compiles instead: about
# what compiling a few of the kernels that have stand-ins costs (0.3-4 s each here): rent until the rent reaches
# the price to buy. A stand-in costs more per row than its kernel, measured at 1M rows: 23-37 ns (the grouping,
# describe, grouped statistics), 28-91 ns (the joins on keys in near order, as correlations come), up to 460 ns
# (the joins on keys in random order).
BUDGET_S = 5.0
_spent = [0.0]


def use_standin(*calls: tuple[Any, ...]) -> bool:
    """Whether to run the stand-in of ``calls``: ``(kernel, *args)`` for each kernel the other way calls.

    True in ``auto`` mode while one of those calls would compile (then the
    background compilation is started, if it was not), unless the process
    has spent :data:`BUDGET_S` in stand-ins and no background compilation
    runs; the arguments need only have the types of a real call.
    """
    from .._kernels._ready import is_ready
    from ..sources import first_run

    m = os.environ.get("AONKIT_STANDINS", "")
    m = m if m in ("0", "1", "auto") else first_run.mode()
    if m != "auto":
        return m == "1"
    if all(is_ready(kernel, *args) for kernel, *args in calls):
        return False
    first_run.ensure_background()
    return _spent[0] < BUDGET_S or first_run.background_compiling()


def kernel_or_standin(kernel: Any, standin: Any, *args: Any) -> Any:
    """``kernel(*args)``, or ``standin(*args)`` (same results) while the kernel's call would compile.

    The stand-in's time counts against :data:`BUDGET_S`.
    """
    if use_standin((kernel, *args)):
        t = time.perf_counter()
        try:
            return standin(*args)
        finally:
            _spent[0] += time.perf_counter() - t
    return kernel(*args)
