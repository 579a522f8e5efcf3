"""Link each GPU event to its launch call, the CPU op stack above it, its annotation and step.

:func:`gpu_links` returns one row per GPU event (kernel, memcpy, memset) of a
trace; row numbers refer to ``trace.events``:

================  ==============================================================
column            meaning
================  ==============================================================
gpu_row           the GPU event
launch_row        the runtime/driver call with the same ``correlation`` (-1: the
                  launch happened before the profiling window opened)
op_row            innermost CPU op (``cpu_op``) enclosing the launch
top_op_row        outermost CPU op enclosing the launch
annotation_row    innermost ``user_annotation`` enclosing the launch, other than
                  ``ProfilerStep#N``
step              N of the enclosing ``ProfilerStep#N`` (-1 when none)
================  ==============================================================

Nesting is by time intervals on each CPU thread (``pid``, ``tid``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

from .. import schema
from .._kernels.inputs import frozen
from ..trace import Trace
from .columns import category_flags, code_flags, op_stack

_STEP = re.compile(r"ProfilerStep\s*#\s*(\d+)")


def enclosing_ops(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Innermost ``cpu_op`` on the same thread around each event of ``rows`` (its start); -1 if none."""
    from .._kernels.nesting import ancestors

    rows = np.asarray(rows, dtype=np.int64)
    all_rows, parent, order = op_stack(trace, rows)
    is_op = category_flags(trace.events["cat"], lambda c: c in schema.CPU_OP_CATS)[all_rows]
    pos = np.searchsorted(all_rows, rows)
    is_op[pos] = False  # an event is not its own op
    near, _ = ancestors(frozen(parent), frozen(is_op), frozen(order))
    found = near[pos]
    return np.where(found >= 0, all_rows[np.maximum(found, 0)], -1)


def cpu_stack(trace: Trace) -> pd.Series:
    """Parent event row of every CPU-side complete event (-1 for roots), indexed by event row.

    Parameters
    ----------
    trace : Trace
        Any trace. CPU-side complete events are those with ``ph == "X"``, a category other than the GPU ones,
        ``gpu_user_annotation``, ``Trace``, ``cuda_sync``, ``overhead`` and ``cuda_profiler_range``, a
        timestamp and a duration (``dur_ns >= 0``).

    Returns
    -------
    pandas.Series
        ``parent_row`` (int64): the row of the innermost such event on the same thread (``pid``, ``tid``)
        that starts no later and ends no earlier than the event (partial overlaps are not nesting), -1 for a
        root; indexed by the event's row in ``trace.events``, ascending. Of events starting together, the
        longer encloses the shorter.
    """
    rows, parent, _ = op_stack(trace)
    return pd.Series(np.where(parent >= 0, rows[np.maximum(parent, 0)], -1), index=rows, name="parent_row")


def step_table(names: Iterable[object]) -> np.ndarray:
    """N of ``ProfilerStep#N`` per name (-1 for other names and non-strings)."""
    values = names.tolist() if isinstance(names, (pd.Index, np.ndarray)) else list(names)
    return np.array([int(m.group(1)) if isinstance(v, str) and "ProfilerStep" in v and (m := _STEP.search(v)) else -1
                     for v in values], dtype=np.int64)  # fmt: skip


def step_numbers(col: pd.Series) -> np.ndarray:
    """N of ``ProfilerStep#N`` per event of a categorical name column; -1 for other names."""
    cat = col.array
    return np.take(np.append(step_table(cat.categories), -1), np.asarray(cat.codes))


def gpu_links(trace: Trace) -> pd.DataFrame:
    """One row per GPU event with its launch, op stack, annotation and step.

    Remembered per trace (:mod:`aonkit.analysis.memo`): the analyses that
    need it share one computation.

    Parameters
    ----------
    trace : Trace
        Any trace (Kineto or nsys); a GPU event is matched to the first launch call with its ``correlation``.
        Ids must be unique in the trace: they are in a Kineto file (one process), the nsys reader makes
        each process's unique, and :func:`~aonkit.analysis.combine.combine_ranks` each rank's.

    Returns
    -------
    pandas.DataFrame
        ``gpu_row``, ``launch_row``, ``op_row``, ``top_op_row``, ``annotation_row`` (rows of ``trace.events``;
        -1 where there is none) and ``step`` (N of the enclosing ``ProfilerStep#N``; -1 when none). The module
        doc says what each one is.
    """
    from .memo import remembered

    return remembered(trace, "gpu_links", lambda: _gpu_links(trace))


def gpu_launches(trace: Trace) -> pd.DataFrame:
    """One row per GPU event: ``gpu_row`` and ``launch_row`` of ``trace.events`` (-1: launched before the window).

    The correlation join alone, without the CPU op stack of :func:`gpu_links`,
    for analyses that need only the launch call (queue lengths, launch
    statistics). Remembered per trace, and shared with :func:`gpu_links`.

    Parameters
    ----------
    trace : Trace
        Any trace. GPU events are those of the kernel, memcpy and memset categories; launch calls those of
        the runtime/driver categories (``cuda_runtime``, ``cuda_driver``, ``Runtime``, ``Driver``,
        ``mtia_runtime``).

    Returns
    -------
    pandas.DataFrame
        ``gpu_row`` and ``launch_row`` (int64, rows of ``trace.events``), one row per GPU event in
        ``trace.events`` order. ``launch_row`` is the first launch call (in ``trace.events`` order) with the
        GPU event's ``correlation``; -1 when there is none or the correlation is negative.
    """
    from .memo import remembered

    return remembered(trace, "gpu_launches", lambda: _gpu_launches(trace))


def gpu_launch_rows(codes: np.ndarray, is_gpu: np.ndarray, is_launch: np.ndarray,
                    corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GPU rows and, for each, the first launch row with its correlation (-1 when none or correlation < 0).

    A row is a GPU event when ``is_gpu[codes[i]]`` and a launch call when
    ``is_launch[codes[i]]`` (flags per category code; code -1 reads the last
    flag). One pass picks the rows (:func:`aonkit._kernels.joins.launch_candidates`),
    one O(n) lookup joins them (:func:`aonkit._kernels.keys.first_match`, shared by every join).
    """
    from .._kernels.joins import launch_candidates
    from .key_match import first_match
    from .standin import kernel_or_standin

    gpu, launch_1, keys, probe = kernel_or_standin(launch_candidates, numpy_launch_candidates, codes, is_gpu,
                                                   is_launch, corr)  # fmt: skip
    if not len(gpu) or not len(launch_1):
        return gpu, np.full(len(gpu), -1, np.int64)
    matched = first_match(keys, launch_1, probe)[0]  # launch row + 1; 0 unmatched (no launch key is negative)
    matched -= 1
    return gpu, matched


def numpy_launch_candidates(codes: np.ndarray, is_gpu: np.ndarray, is_launch: np.ndarray,
                            corr: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`aonkit._kernels.joins.launch_candidates` in numpy: its stand-in until it is compiled (0.45 s here).

    Returns (GPU rows, launch rows + 1, the launch rows' correlations, the GPU rows' correlations).
    """
    take = np.where(is_gpu, 1, np.where(is_launch, 2, 0)).astype(np.uint8)[codes]  # code -1 reads the last flag
    gpu = np.flatnonzero(take == 1)
    launch = np.flatnonzero((take == 2) & (corr >= 0))
    return gpu, launch + 1, corr[launch].astype(np.int64), corr[gpu].astype(np.int64)


def _gpu_launches(trace: Trace) -> pd.DataFrame:
    ev = trace.events
    codes, is_gpu = code_flags(ev["cat"], lambda c: c in schema.GPU_CATS)
    is_launch = code_flags(ev["cat"], lambda c: c in schema.RUNTIME_CATS)[1]
    gpu, launch = gpu_launch_rows(codes, is_gpu, is_launch, np.ascontiguousarray(ev["correlation"].to_numpy()))
    return pd.DataFrame({"gpu_row": gpu, "launch_row": launch}, copy=False)


def _gpu_links(trace: Trace) -> pd.DataFrame:
    from .._kernels.nesting import ancestors

    ev = trace.events
    pairs = gpu_launches(trace)
    gpu, launch = pairs["gpu_row"].to_numpy(), pairs["launch_row"].to_numpy()
    rows, parent_local, order = op_stack(trace)
    is_op = category_flags(ev["cat"], lambda c: c in schema.CPU_OP_CATS)[rows]
    steps = step_numbers(ev["name"])
    is_step = steps[rows] >= 0
    is_ann = category_flags(ev["cat"], lambda c: c == "user_annotation")[rows] & ~is_step
    parent_local, order = frozen(parent_local), frozen(order)
    op_near, op_top = ancestors(parent_local, frozen(is_op), order)
    ann_near, _ = ancestors(parent_local, frozen(is_ann), order)
    step_near, _ = ancestors(parent_local, frozen(is_step), order)

    found = np.searchsorted(rows, launch)
    if len(rows):
        in_stack = (launch >= 0) & (found < len(rows)) & (rows[np.minimum(found, len(rows) - 1)] == launch)
    else:  # no CPU-side events at all (a GPU-only trace)
        in_stack = np.zeros(len(gpu), dtype=bool)
    lpos = np.where(in_stack, found, -1)

    def pick(arr: np.ndarray) -> np.ndarray:
        if not len(rows):
            return np.full(len(gpu), -1, np.int64)
        val = np.where(lpos >= 0, arr[np.maximum(lpos, 0)], -1)
        return np.where(val >= 0, rows[np.maximum(val, 0)], -1)

    step_row = pick(step_near)
    step = np.where(step_row >= 0, steps[np.maximum(step_row, 0)], -1)
    return pd.DataFrame({"gpu_row": gpu, "launch_row": launch, "op_row": pick(op_near), "top_op_row": pick(op_top),
                         "annotation_row": pick(ann_near), "step": step})  # fmt: skip
