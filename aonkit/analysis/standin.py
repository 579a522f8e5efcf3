"""Whether an analysis runs a stand-in that needs no compilation rather than its Numba kernel.

A kernel's first compilation on a machine costs seconds (``bench/coldstart.py``);
a few analyses whose kernels cost the most have a numpy stand-in with the
same results, which runs while the kernel is neither compiled in this process
nor in Numba's on-disk cache. Choosing a stand-in starts the background
compilation of :mod:`aonkit.sources.first_run` (once per process; one per
cache folder), which puts every kernel into the cache, so a later call, in
this process or another, runs the kernel. The stand-ins are slower warm (a
numpy sort or partition where the kernel does one pass) but far faster than a
compilation.

``AONKIT_STANDINS`` decides: ``auto`` as above, ``0`` never a stand-in, ``1``
always (tests compare both ways); when it is not set, ``AONKIT_QUICK_PARSE``
decides the same way, as for the parser.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["kernel_or_standin", "use_standin"]


def use_standin(*calls: tuple[Any, ...]) -> bool:
    """Whether to run the stand-in of ``calls``: ``(kernel, *args)`` for each kernel the other way calls.

    True in ``auto`` mode while one of those calls would compile (then the
    background compilation is started, if it was not); the arguments need only
    have the types of a real call.
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
    return True


def kernel_or_standin(kernel: Any, standin: Any, *args: Any) -> Any:
    """``kernel(*args)``, or ``standin(*args)`` (same results) while the kernel's call would compile."""
    if use_standin((kernel, *args)):
        return standin(*args)
    return kernel(*args)
