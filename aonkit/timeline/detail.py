"""What a timeline shows on hover and selection, for the glyphs of :func:`~aonkit.timeline.tiles.timeline_tiles`.

For each glyph's event (a bin's longest event): its name, category, real
duration and correlation id, the CPU op stack above it as text, and for GPU
events the launch call and the innermost CPU op around the launch, which a
view highlights when the kernel is selected.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.correlation import gpu_links
from ..trace import Trace
from .index import TimelineIndex

STACK_SEPARATOR = " > "


def _names(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Event names of ``rows`` as an object array ("" where absent), without converting the whole column."""
    cat = trace.events["name"].array
    names = np.array([*map(str, cat.categories), ""], dtype=object)
    return names[np.asarray(cat.codes)[rows]]  # code -1 picks ""


def stacks(trace: Trace, index: TimelineIndex, rows: np.ndarray) -> list[str]:
    """The enclosing events of each of ``rows`` on its lane, outermost first, as ``"a > b > row"``."""
    rows = np.asarray(rows, dtype=np.int64)
    chain = [rows]
    while True:
        up = np.where(chain[-1] >= 0, index.parent_of[np.maximum(chain[-1], 0)], -1)
        if not (up >= 0).any():
            break
        chain.append(up)
    names = [_names(trace, np.maximum(c, 0)) for c in chain[::-1]]
    valid = [c >= 0 for c in chain[::-1]]
    return [STACK_SEPARATOR.join(n[i] for n, v in zip(names, valid) if v[i]) for i in range(len(rows))]


def launch_maps(trace: Trace, links: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per event row, the row of its launch call and of the innermost CPU op around it (-1 where there is none).

    ``links`` is :func:`~aonkit.analysis.correlation.gpu_links` of ``trace``; build these once per trace.
    """
    launch_of = np.full(len(trace.events), -1, np.int64)
    op_of = np.full(len(trace.events), -1, np.int64)
    launch_of[links["gpu_row"].to_numpy()] = links["launch_row"].to_numpy()
    op_of[links["gpu_row"].to_numpy()] = links["op_row"].to_numpy()
    return launch_of, op_of


def tile_details(trace: Trace, index: TimelineIndex, tiles: pd.DataFrame,
                 links: pd.DataFrame | None = None) -> pd.DataFrame:  # fmt: skip
    """``tiles`` with the hover and selection columns of each glyph's event.

    Parameters
    ----------
    trace : Trace
        The trace ``index`` was built from.
    index : TimelineIndex
        Its :func:`~aonkit.timeline.index.timeline_index`.
    tiles : pandas.DataFrame
        A result of :func:`~aonkit.timeline.tiles.timeline_tiles`.
    links : pandas.DataFrame, optional
        :func:`~aonkit.analysis.correlation.gpu_links` of the trace (computed
        when not given; pass it to reuse it across queries).

    Returns
    -------
    pandas.DataFrame
        ``tiles`` plus ``name``, ``cat``, ``dur_ns`` (the event's own duration,
        -1 for instants), ``correlation``, ``stack`` (the CPU op stack: on CPU
        lanes the enclosing events and the event, on GPU lanes the stack of the
        launching op), ``launch`` and ``launch_op`` (rows of the launch call and
        of the innermost CPU op around it, -1 when unknown or not a GPU event).
    """
    if links is None:
        links = gpu_links(trace)
    ev = trace.events
    rows = tiles["row"].to_numpy()
    launch_of, op_of = launch_maps(trace, links)
    launch, op = launch_of[rows], op_of[rows]
    gpu = (index.lanes["kind"].to_numpy() == "gpu")[tiles["lane"].to_numpy()]
    cpu_stack = stacks(trace, index, np.where(gpu, op, rows))
    cat = ev["cat"].array
    cats = np.array([*map(str, cat.categories), ""], dtype=object)
    return tiles.assign(
        name=_names(trace, rows),
        cat=cats[np.asarray(cat.codes)[rows]],
        dur_ns=ev["dur_ns"].to_numpy()[rows],
        correlation=ev["correlation"].to_numpy()[rows],
        stack=[s if not g or o >= 0 else "" for s, g, o in zip(cpu_stack, gpu, op)],
        launch=launch,
        launch_op=op,
    )
