"""The canvas timeline's data: a window's glyphs as typed columns, names as small tables, for binary messages.

The bokeh timeline sends every glyph's name, category, colour, op stack and duration as text (about 18,000
strings a zoom, serialized one by one; ``bench/RESULTS.md``, session 34). Here a window becomes numeric columns
(:func:`canvas_frame`): names, categories and colours are codes into per-window tables of their distinct values,
and a glyph's op stack is a node of a :class:`~aonkit.timeline.stacks.StackTree` (each distinct stack prefix
once, with its name and the node above it), which the page walks on hover. :func:`pack` turns the columns into
one message and its buffers. Pure numpy/pandas, like :mod:`aonkit.timeline.view_data`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Trace
from .index import TimelineIndex
from .stacks import StackTree
from .view_data import GLYPH_PAD, colors, event_boxes


def _codes(cat: pd.Categorical, rows: np.ndarray) -> np.ndarray:
    """The categorical column's codes at ``rows`` (-1 where the row is -1 or the value is missing)."""
    rows = np.asarray(rows, np.int64)
    codes = np.asarray(cat.codes, np.int64)[np.maximum(rows, 0)]
    return np.where(rows >= 0, codes, -1)


def _table(cat: pd.Categorical, *code_arrays: np.ndarray) -> tuple[list[np.ndarray], list[str]]:
    """The code arrays renumbered into one table of the values they use (code -1, a missing value, is ``""``)."""
    used = np.unique(np.concatenate([np.asarray(c, np.int64) for c in code_arrays] or [np.empty(0, np.int64)]))
    names = [str(cat.categories[c]) if c >= 0 else "" for c in used]
    return [np.searchsorted(used, c).astype(np.int32) for c in code_arrays], names


def canvas_frame(trace: Trace, index: TimelineIndex, slots: pd.DataFrame, tiles: pd.DataFrame,
                 maps: tuple[np.ndarray, np.ndarray],
                 origin_ns: int) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:  # fmt: skip
    """Typed columns of a window's glyphs and the tables their codes index.

    Parameters
    ----------
    trace, index, slots, origin_ns
        As for :func:`~aonkit.timeline.view_data.glyph_frame`.
    tiles : pandas.DataFrame
        :func:`~aonkit.timeline.tiles.timeline_tiles` of the window.
    maps : tuple of numpy.ndarray
        :func:`launch_maps` of the trace.

    Returns
    -------
    columns : dict of str to numpy.ndarray
        Per glyph: ``x0``, ``x1`` (ms since ``origin_ns``), ``slot`` (lane slot plus depth), ``count``,
        ``busy_ns``, ``dur_ns`` (-1 for instants), ``correlation``, ``row``, ``name``, ``cat``, ``color``
        (codes into the tables), ``stack`` (the node of the CPU op stack in a
        :class:`~aonkit.timeline.stacks.StackTree` of the window, -1 for none: on CPU lanes the glyph's event's
        stack, on GPU lanes its launching op's), and the boxes of the launching op and launch call (``op_x0`` ...
        ``launch_slot``, NaN for none). Per tree node: ``anc_parent`` (the node above, -1 at the top) and
        ``anc_name``.
    tables : dict of str to list of str
        ``names`` (glyph and ancestor names), ``cats``, ``colors`` (CSS colours).
    """
    ev, details = trace.events, tiles
    rows = details["row"].to_numpy(np.int64)
    lane = details["lane"].to_numpy()
    gpu = (slots["kind"].to_numpy() == "gpu")[lane]
    launch, op = maps[0][rows], maps[1][rows]
    name_cat, cat_cat = ev["name"].array, ev["cat"].array
    tree = StackTree(index.parent_of, np.asarray(name_cat.codes, np.int64))  # the window's stacks, prefixes once
    link = tree.add(np.where(gpu, op, rows)).astype(np.int32)
    (names, anc_names), name_table = _table(name_cat, _codes(name_cat, rows), tree.name)
    (cats,), cat_table = _table(cat_cat, _codes(cat_cat, rows))
    glyph_names, glyph_cats = np.asarray(name_table, object)[names], np.asarray(cat_table, object)[cats]
    color_codes, palette = pd.factorize(colors(glyph_cats, glyph_names, gpu))
    cols: dict[str, np.ndarray] = {
        "x0": (details["start_ns"].to_numpy() - origin_ns) / 1e6,
        "x1": (details["end_ns"].to_numpy() - origin_ns) / 1e6,
        "slot": (slots["slot"].to_numpy()[lane] + details["depth"].to_numpy()).astype(np.int32),
        "count": details["count"].to_numpy().astype(np.int32), "busy_ns": details["busy_ns"].to_numpy(np.float64),
        "dur_ns": ev["dur_ns"].to_numpy()[rows].astype(np.float64),
        "correlation": ev["correlation"].to_numpy()[rows].astype(np.float64), "row": rows.astype(np.float64),
        "name": names, "cat": cats, "color": color_codes.astype(np.int32), "stack": link,
        "anc_parent": tree.parent.astype(np.int32), "anc_name": anc_names,
    }  # fmt: skip
    for target, targets in (("op", op), ("launch", launch)):
        box = event_boxes(trace, index, slots, targets, origin_ns)
        cols[f"{target}_x0"], cols[f"{target}_x1"] = box["left"], box["right"]
        cols[f"{target}_slot"] = box["top"] - GLYPH_PAD  # the slot (NaN where there is no box)
    return cols, {"names": name_table, "cats": cat_table, "colors": [str(c) for c in palette]}


def pack(columns: dict[str, np.ndarray]) -> tuple[dict[str, list], list[bytes]]:
    """Columns as ``{name: [dtype, buffer index]}`` and little-endian buffers.

    Float columns go as ``<f8``, the rest as ``<i4``; an integer outside int32 raises ``ValueError`` (it is never
    cut to fit).
    """
    spec, buffers = {}, []
    for name, values in columns.items():
        values = np.asarray(values)
        dtype = "<f8" if values.dtype.kind == "f" else "<i4"
        if dtype == "<i4" and len(values) and not (-(2**31) <= values.min() and values.max() < 2**31):
            raise ValueError(f"column {name!r} has integers outside int32 ({values.min()} .. {values.max()})")
        spec[name] = [dtype[1:], len(buffers)]
        buffers.append(np.ascontiguousarray(values, dtype=dtype).tobytes())
    return spec, buffers
