"""The canvas timeline's data: a window's glyphs as typed columns, names as small tables, for binary messages.

The bokeh timeline sends every glyph's name, category, colour, op stack and duration as text (about 18,000
strings a zoom, serialized one by one; ``bench/RESULTS.md``, session 34). Here a window becomes numeric columns
(:func:`canvas_frame`): names, categories and colours are codes into per-window tables of their distinct values,
and a glyph's op stack is a link into a table of the distinct enclosing events (each with its name and the
event around it), which the page walks on hover. :func:`pack` turns the columns into one message and its
buffers. Pure numpy/pandas, like :mod:`aonkit.timeline.view_data`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Trace
from .index import TimelineIndex
from .view_data import GLYPH_PAD, colors, event_boxes

FLOAT_COLUMNS = ("x0", "x1", "busy_ns", "dur_ns", "correlation", "row", "op_x0", "op_x1", "op_slot", "launch_x0",
                 "launch_x1", "launch_slot")  # fmt: skip
"""Columns sent as float64 (times in ms since the origin, ns amounts, event rows; NaN where there is none)."""
INT_COLUMNS = ("slot", "count", "name", "cat", "color", "stack", "anc_parent", "anc_name")
"""Columns sent as int32 (codes and links: -1 where there is none)."""


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


def ancestors(index: TimelineIndex, base: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The enclosing-event chains of ``base`` rows as one table: ``(link, anc_row, anc_parent)``.

    ``link[i]`` is the table entry of ``base[i]`` (-1 where ``base[i]`` is -1); entry ``k`` is the event row
    ``anc_row[k]``, and ``anc_parent[k]`` the entry of the event around it on its lane (-1 at the outermost).
    Walking from ``link[i]`` through ``anc_parent`` gives :func:`~aonkit.timeline.detail.stacks`' chain of
    ``base[i]``, innermost first.
    """
    base = np.asarray(base, np.int64)
    level, seen = base[base >= 0], []
    while len(level):
        level = np.unique(level)
        seen.append(level)
        up = index.parent_of[level]
        level = up[up >= 0]
    rows = np.unique(np.concatenate(seen)) if seen else np.empty(0, np.int64)
    parent = index.parent_of[rows] if len(rows) else np.empty(0, np.int64)
    anc_parent = np.where(parent >= 0, np.searchsorted(rows, np.maximum(parent, 0)), -1).astype(np.int32)
    link = np.where(base >= 0, np.searchsorted(rows, np.maximum(base, 0)), -1).astype(np.int32)
    return link, rows, anc_parent


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
        (codes into the tables), ``stack`` (the entry of the CPU op stack's innermost event in the ancestor
        table, -1 for none: on CPU lanes the glyph's event, on GPU lanes its launching op), and the boxes of the
        launching op and launch call (``op_x0`` ... ``launch_slot``, NaN for none). Per ancestor entry:
        ``anc_parent`` and ``anc_name``.
    tables : dict of str to list of str
        ``names`` (glyph and ancestor names), ``cats``, ``colors`` (CSS colours).
    """
    ev, details = trace.events, tiles
    rows = details["row"].to_numpy(np.int64)
    lane = details["lane"].to_numpy()
    gpu = (slots["kind"].to_numpy() == "gpu")[lane]
    launch, op = maps[0][rows], maps[1][rows]
    link, anc_rows, anc_parent = ancestors(index, np.where(gpu, op, rows))
    name_cat, cat_cat = ev["name"].array, ev["cat"].array
    (names, anc_names), name_table = _table(name_cat, _codes(name_cat, rows), _codes(name_cat, anc_rows))
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
        "anc_parent": anc_parent, "anc_name": anc_names,
    }  # fmt: skip
    for target, targets in (("op", op), ("launch", launch)):
        box = event_boxes(trace, index, slots, targets, origin_ns)
        cols[f"{target}_x0"], cols[f"{target}_x1"] = box["left"], box["right"]
        cols[f"{target}_slot"] = box["top"] - GLYPH_PAD  # the slot (NaN where there is no box)
    return cols, {"names": name_table, "cats": cat_table, "colors": [str(c) for c in palette]}


def pack(columns: dict[str, np.ndarray]) -> tuple[dict[str, list], list[bytes]]:
    """Columns as ``{name: [dtype, buffer index]}`` and little-endian buffers (``<f8`` or ``<i4``)."""
    spec, buffers = {}, []
    for name, values in columns.items():
        dtype = "<f8" if name in FLOAT_COLUMNS or np.asarray(values).dtype.kind == "f" else "<i4"
        spec[name] = [dtype[1:], len(buffers)]
        buffers.append(np.ascontiguousarray(values, dtype=dtype).tobytes())
    return spec, buffers
