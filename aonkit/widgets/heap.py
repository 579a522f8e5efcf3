"""Python's full garbage collections out of the panels' way, for a kernel that asks (opt-in).

A change of a model panel takes 10-70 ms on a 2-vCPU VM, but now and then one takes 100-180 ms: Python's cycle
collector ran a full (generation 2) pass during it, and a full pass walks every container object the process
tracks. A kernel with the three model panels tracks about 272,000 of them, 177,000 from the imports alone (numba,
pandas, bokeh, ipywidgets: functions, tuples, signatures); a full pass over them took 85-100 ms there
(``bench/RESULTS.md``, session 53). Those objects live as long as the kernel: :func:`freeze_heap` moves every object
alive now into the collector's permanent generation (:func:`gc.freeze`), which its passes skip, so later passes walk
only what was made since (0.1 ms right after). Cycles created later are collected as before; the cost is that cycles
among the frozen objects, should some become garbage, stay in memory until :func:`unfreeze_heap`. Nothing calls this
for you: it changes the whole process.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_heap", "unfreeze_heap"]


def freeze_heap() -> int:
    """Collect the garbage there is, then keep every object alive now out of the collector's passes.

    Call it once the imports are done and the panels are built (again later to add what was made since).

    Returns
    -------
    int
        Objects in the permanent generation (:func:`gc.get_freeze_count`).
    """
    gc.collect()  # (what is frozen should be alive: garbage first)
    gc.freeze()
    return gc.get_freeze_count()


def unfreeze_heap() -> None:
    """Give the frozen objects back to the collector's passes (:func:`gc.unfreeze`)."""
    gc.unfreeze()
