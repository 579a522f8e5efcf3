"""Precomputed multi-resolution timeline for a report with no Python kernel: tiles of glyphs per level, in a budget.

Level ``k`` cuts the trace's span into ``2**k`` equal tiles, each answered by
:func:`~aonkit.timeline.tiles.timeline_tiles` at ``width_px``, so a view as
wide as one tile of level ``k`` gets the detail a live query would give it.
A tile holds at most ``rows x (2 x width_px + 2)`` glyphs (``rows``: lane rows
of the trace), so level ``k`` at most ``2**k`` times that; in practice far
fewer, and a tile whose glyphs are all single events (no per-pixel bins) is
*complete*: deeper zoom would show the same events, so its children are not
computed and a view falls back to it. Levels are added while the stored size
stays within ``budget_bytes``; level 0 is always kept. The size of a level is
measured as bokeh stores it: each column compressed (ISA-L's deflate at level
1, 6-7 times faster than zlib's level 1 and about 9% larger than the gzip
level 2 bokeh writes by default, so this overestimates a little) and
base64-encoded, plus its new strings, stack nodes, launch boxes and tile rows.

Columns are compact: times are float32 ns offsets from the tile's start (the
tile's start is float64), names, categories and colours are codes into string
tables, an op stack is a node of a tree of (parent node, name code), and a GPU
glyph's launching op and launch call are a code into a table of their boxes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

try:  # ISA-L deflates 6-7 times faster than zlib at level 1 (the size estimate of every level)
    from isal.isal_zlib import compress as _deflate
except ImportError:  # pragma: no cover - isal is a dependency
    from zlib import compress as _deflate

from ..analysis.correlation import gpu_links
from ..trace import Trace
from .detail import launch_maps
from .index import TimelineIndex
from .stacks import StackTree
from .tiles import index_of, timeline_tiles
from .view_data import TARGETS, colors, counter_frame, counter_points, counter_series, event_boxes, lane_slots, span

GLYPH_DTYPES = {"x0": np.float32, "x1": np.float32, "slot": np.int16, "color": np.uint8, "name": np.int32,
                "cat": np.int16, "dur": np.float32, "count": np.int32, "busy": np.float32, "correlation": np.int32,
                "stack": np.int32, "link": np.int32}  # fmt: skip
"""Stored glyph columns; ``correlation`` is float64 when a trace's ids do not fit int32, ``slot`` int32 past
32,767 lane rows."""
COUNTER_ZOOM = 4
"""Counters are decimated (M4) at ``COUNTER_ZOOM x width_px`` over the whole span."""


@dataclass
class Pyramid:
    """Tiles of every level, concatenated (see the module doc).

    Built by :func:`timeline_pyramid`; the fields are not meant to be filled by hand.

    Parameters
    ----------
    glyphs, rows, tiles, names, cats, palette, stack_parent, stack_name, links, counters, counter_groups
    lanes, origin_ns, span_ns, width_px, levels, truncated, nbytes
        The fields, in this order, as described under Attributes.

    Attributes
    ----------
    glyphs : dict of str to numpy.ndarray
        :data:`GLYPH_DTYPES` columns, tile by tile: ``x0``/``x1`` (ns from the tile's start), ``slot`` (y),
        ``count``/``busy`` (as in ``timeline_tiles``), ``dur`` (the event's own ns, -1 for instants), codes.
    rows : numpy.ndarray
        Each glyph's event (a bin's longest) in ``trace.events``; not stored in the report.
    tiles : pandas.DataFrame
        One row per stored tile, by ``key`` (``2**level - 1 + tile``): ``level``, ``tile``, ``start``, ``stop``
        (its glyphs), ``t0_ns`` (its start, ns since ``origin_ns``), ``complete``.
    names, cats, palette : list of str
        What the ``name``, ``cat`` and ``color`` codes stand for.
    stack_parent, stack_name : numpy.ndarray
        The op stack tree: a glyph's ``stack`` node (-1: none) is its innermost op; names are codes into ``names``.
    links : pandas.DataFrame
        ``op_row``, ``launch_row`` and the ``op_*``/``launch_*`` boxes (ms, slots) a ``link`` code stands for.
    counters : dict of str to pandas.DataFrame
        Counter lines over the whole span (:func:`~aonkit.timeline.view_data.counter_frame`), by label.
    counter_groups : dict of str to list of str
        Counter labels per figure.
    lanes : pandas.DataFrame
        :func:`~aonkit.timeline.view_data.lane_slots` of the trace.
    origin_ns, span_ns, width_px, levels : int
        The trace's span; levels stored (the deepest is ``levels - 1``).
    truncated : bool
        Whether a deeper level was left out for the budget.
    nbytes : int
        Measured stored size of all of the above (see the module doc).
    """

    glyphs: dict[str, np.ndarray]
    rows: np.ndarray
    tiles: pd.DataFrame
    names: list[str]
    cats: list[str]
    palette: list[str]
    stack_parent: np.ndarray
    stack_name: np.ndarray
    links: pd.DataFrame
    counters: dict[str, pd.DataFrame]
    counter_groups: dict[str, list[str]]
    lanes: pd.DataFrame
    origin_ns: int
    span_ns: int
    width_px: int
    levels: int
    truncated: bool
    nbytes: int


def stored_bytes(arrays: list[np.ndarray]) -> int:
    """Size of ``arrays`` as bokeh stores them in HTML: compressed, base64 (ISA-L level 1, an upper estimate)."""
    return sum(4 * -(-len(_deflate(np.ascontiguousarray(a).tobytes(), 1)) // 3) + 60 for a in arrays)


def _text_bytes(strings: object) -> int:
    return sum(len(str(s).encode()) + 3 for s in strings)


class _Pairs:
    """(op row, launch row) pairs numbered in first-appearance order, as one int64 key each."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(self.keys)

    def codes(self, op: np.ndarray, launch: np.ndarray) -> np.ndarray:
        """The number of each pair (rows >= -1), numbering the new ones after the known in the order they come."""
        key = ((op + 1) << 32) | (launch + 1)
        u, first, inv = np.unique(key, return_index=True, return_inverse=True)
        ids = pd.Index(self.keys).get_indexer(u) if len(self.keys) else np.full(len(u), -1, np.int64)
        new = np.flatnonzero(ids < 0)
        new = new[np.argsort(first[new], kind="stable")]  # first-appearance order
        ids[new] = len(self.keys) + np.arange(len(new))
        self.keys = np.concatenate([self.keys, u[new]])
        return ids[inv.ravel()]

    def truncate(self, n: int) -> None:
        self.keys = self.keys[:n]

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(op rows, launch rows) of the pairs in their order."""
        return (self.keys >> 32) - 1, (self.keys & 0xFFFFFFFF) - 1


class _Coder:
    """Per-glyph code columns of a trace (from its categorical codes) and the tables they grow."""

    def __init__(self, trace: Trace, index: TimelineIndex, slots: pd.DataFrame) -> None:
        ev = trace.events
        self.trace, self.index, self.slots = trace, index, slots
        self.name_code = np.asarray(ev["name"].array.codes, np.int64)
        self.cat_code = np.asarray(ev["cat"].array.codes, np.int64)
        self.dur, self.corr = ev["dur_ns"].to_numpy(), ev["correlation"].to_numpy()
        self.launch_of, self.op_of = launch_maps(trace, gpu_links(trace))
        self.tree = StackTree(index.parent_of, self.name_code)
        self.pairs = _Pairs()
        self.gpu_lane = slots["kind"].to_numpy() == "gpu"

    def columns(self, tiles: pd.DataFrame, t0: np.ndarray) -> dict[str, np.ndarray]:
        """Code columns of ``tiles`` (``t0``: each glyph's tile start, absolute ns), growing the tables."""
        rows, lane = tiles["row"].to_numpy(), tiles["lane"].to_numpy()
        gpu = self.gpu_lane[lane]
        op, launch = self.op_of[rows], self.launch_of[rows]
        link = np.full(len(rows), -1, np.int64)
        linked = np.flatnonzero((op >= 0) | (launch >= 0))
        link[linked] = self.pairs.codes(op[linked], launch[linked])
        return {"x0": tiles["start_ns"].to_numpy() - t0, "x1": tiles["end_ns"].to_numpy() - t0,
                "slot": self.slots["slot"].to_numpy()[lane] + tiles["depth"].to_numpy(),
                "color": (self.cat_code[rows] + 1) * 2 + gpu, "name": self.name_code[rows],
                "cat": self.cat_code[rows], "dur": self.dur[rows], "count": tiles["count"].to_numpy(),
                "busy": tiles["busy_ns"].to_numpy(), "correlation": self.corr[rows],
                "stack": self.tree.add(np.where(gpu, op, rows)), "link": link}  # fmt: skip


@dataclass
class _Level:
    """Tiles ``todo`` of level ``k``: their glyphs (``tiles``), code columns, measured cost and what it added."""

    k: int
    todo: list[int]
    bounds: list[tuple[int, int, int]]
    tiles: pd.DataFrame
    counts: np.ndarray
    cols: dict[str, np.ndarray]
    cost: int
    glyph_bytes: int
    mark: tuple[int, int]
    new_names: set[int]


def _level(coder: _Coder, k: int, todo: list[int], origin: int, span_ns: int, width_px: int, dtypes: dict,
           names_seen: set[int]) -> _Level:  # fmt: skip
    bounds = [(j, origin + span_ns * j // 2**k, origin + span_ns * (j + 1) // 2**k) for j in todo]
    tiles = pd.concat([timeline_tiles(coder.index, a, b, width_px).assign(tile=j) for j, a, b in bounds])
    counts = np.bincount(np.searchsorted(todo, tiles["tile"].to_numpy()), minlength=len(todo))
    t0 = np.repeat([a for _, a, _ in bounds], counts)
    mark = (len(coder.tree.parent), len(coder.pairs))
    cols = {c: v.astype(dtypes[c]) for c, v in coder.columns(tiles, t0).items()}
    new_names = set(np.unique(np.concatenate([cols["name"], coder.tree.name[mark[0] :]]))) - names_seen
    text = _text_bytes(coder.trace.events["name"].cat.categories[[c for c in new_names if c >= 0]])
    glyph_bytes = stored_bytes(list(cols.values()))
    cost = (glyph_bytes + text + (len(coder.tree.parent) - mark[0]) * 11 + (len(coder.pairs) - mark[1]) * 107
            + len(todo) * 56)  # fmt: skip
    return _Level(k, todo, bounds, tiles, counts, cols, cost, glyph_bytes, mark, new_names)


def _undo(coder: _Coder, lv: _Level) -> None:
    coder.tree.truncate(lv.mark[0])
    coder.pairs.truncate(lv.mark[1])


def _partial(lv: _Level, room: float) -> list[int]:
    """Tiles of a level too big for the budget that fit in ``room``, those hiding the most events in bins first."""
    t = lv.tiles
    hidden = t["count"].where(t["count"] > 1, 0).groupby(t["tile"]).sum().reindex(lv.todo, fill_value=0).to_numpy()
    share = lv.glyph_bytes * 1.1 * lv.counts / max(int(lv.counts.sum()), 1)
    pick, left = [], room - 1.1 * (lv.cost - lv.glyph_bytes)  # strings, nodes and links: at most the whole level's
    for i in np.argsort(-hidden, kind="stable"):
        if hidden[i] > 0 and share[i] <= left:
            pick.append(lv.todo[i])
            left -= share[i]
    return sorted(pick)


def timeline_pyramid(trace: Trace, width_px: int = 1600, levels: int = 16, budget_bytes: int = 16_000_000,
                     index: TimelineIndex | None = None) -> Pyramid:  # fmt: skip
    """The pyramid of ``trace`` (see the module doc) with at most ``levels`` levels within ``budget_bytes``.

    When a whole level does not fit, its tiles that hide the most events in bins are kept while they fit
    (a partial deepest level); elsewhere the view falls back to their parents.

    Parameters
    ----------
    trace : Trace
        The trace to draw.
    width_px : int
        Width in pixels each tile is queried at (:func:`~aonkit.timeline.tiles.timeline_tiles`), default
        1600. Counters are decimated at ``COUNTER_ZOOM * width_px`` pixels over the whole span.
    levels : int
        Most levels to compute (level ``k`` has ``2**k`` tiles), default 16; below 1 counts as 1.
    budget_bytes : int
        Limit, in bytes, of the measured stored size (:attr:`Pyramid.nbytes`), default 16,000,000. The
        counters and level 0 are always kept, so ``nbytes`` can exceed it when they alone do.
    index : TimelineIndex, optional
        ``timeline_index(trace)`` when already built; default :func:`~aonkit.timeline.tiles.index_of` (built
        once per events table and kept with the trace).

    Returns
    -------
    Pyramid
        Tiles of levels 0 .. ``levels - 1`` at most; a tile's children are computed only when it holds bins.
        ``truncated`` is True when the budget stopped it.
    """
    index = index_of(trace) if index is None else index
    slots = lane_slots(index)
    origin, end = span(trace, index)
    span_ns = end - origin
    counters, groups = {}, {}
    for group, label, unit, ts, v in counter_series(trace):
        pts = counter_points(ts, v, origin, end, COUNTER_ZOOM * width_px, origin)
        counters[label] = counter_frame(label, unit, pts)
        groups.setdefault(group, []).append(label)
    used = sum(stored_bytes([f[c].to_numpy() for c in ("x", "rel_ns", "value")]) + _text_bytes(f["series"])
               + _text_bytes(f["value_text"]) for f in counters.values())  # fmt: skip
    corr = trace.events["correlation"].to_numpy()
    wide = bool(len(corr)) and bool(corr.max() > np.iinfo(np.int32).max or corr.min() < np.iinfo(np.int32).min)
    big = int(slots["rows"].clip(lower=1).sum()) > np.iinfo(np.int16).max
    # colour codes stay wide until the palette is known (see _assemble)
    dtypes = {**GLYPH_DTYPES, "correlation": np.float64 if wide else np.int32, "color": np.int32,
              "slot": np.int32 if big else np.int16}  # fmt: skip
    coder = _Coder(trace, index, slots)
    names_seen: set[int] = set()
    parts, rows, tile_rows, todo, truncated = [], [], [], [0], False
    for k in range(max(int(levels), 1)):
        if not todo:
            break
        lv = _level(coder, k, todo, origin, span_ns, width_px, dtypes, names_seen)
        if k > 0 and used + lv.cost > budget_bytes:
            _undo(coder, lv)
            truncated = True
            pick = _partial(lv, budget_bytes - used)
            if not pick:
                break
            lv = _level(coder, k, pick, origin, span_ns, width_px, dtypes, names_seen)
            if used + lv.cost > budget_bytes:
                _undo(coder, lv)
                break
            todo = []
        used += lv.cost
        names_seen |= lv.new_names
        binned = lv.tiles.groupby("tile")["count"].max().reindex(lv.todo, fill_value=1).to_numpy() > 1
        tile_rows += [(2**k - 1 + j, k, j, int(n), a - origin, not b)
                      for (j, a, _), n, b in zip(lv.bounds, lv.counts, binned)]  # fmt: skip
        parts.append(lv.cols)
        rows.append(lv.tiles["row"].to_numpy())
        if not truncated:
            todo = sorted(2 * j + c for j, b in zip(todo, binned) if b for c in (0, 1))
    return _assemble(coder, parts, np.concatenate(rows), tile_rows, counters, groups, origin, span_ns, width_px,
                     truncated, used)  # fmt: skip


def _assemble(coder: _Coder, parts: list[dict], rows: np.ndarray, tile_rows: list, counters: dict, groups: dict,
              origin: int, span_ns: int, width_px: int, truncated: bool, used: int) -> Pyramid:  # fmt: skip
    """Concatenate the levels, make the codes compact and the string tables, the link table and the tile table."""
    g = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    ev = coder.trace.events
    used_names, name_inv = np.unique(np.concatenate([g["name"], coder.tree.name]), return_inverse=True)
    g["name"] = name_inv[: len(g["name"])].astype(np.int32)
    stack_name = name_inv[len(rows) :].astype(np.int32)
    all_names = np.array([*map(str, ev["name"].cat.categories), ""], dtype=object)
    used_cats, cat_inv = np.unique(g["cat"], return_inverse=True)
    g["cat"] = cat_inv.astype(np.int16)
    all_cats = np.array([*map(str, ev["cat"].cat.categories), ""], dtype=object)
    width = len(used_names)
    color_keys, color_inv = np.unique(g["color"].astype(np.int64) * width + g["name"], return_inverse=True)
    ck, nk = color_keys // width, color_keys % width  # (cat code + 1) * 2 + gpu, name code
    per_key = colors(all_cats[ck // 2 - 1], all_names[used_names[nk]], (ck % 2).astype(bool))
    palette, pal_code = np.unique(per_key.astype(str), return_inverse=True) if len(ck) else (np.empty(0, str), ck)
    g["color"] = pal_code[color_inv.ravel()].astype(np.uint8)
    op_rows, launch_rows = coder.pairs.rows()
    ltab = pd.DataFrame({"op_row": op_rows, "launch_row": launch_rows})
    for target, col in zip(TARGETS, ("op_row", "launch_row")):
        for key, v in event_boxes(coder.trace, coder.index, coder.slots, ltab[col].to_numpy(), origin).items():
            ltab[f"{target}_{key}"] = v
    tiles = pd.DataFrame(tile_rows, columns=["key", "level", "tile", "n", "t0_ns", "complete"])
    tiles["stop"] = np.cumsum(tiles["n"].to_numpy())
    tiles["start"] = tiles["stop"] - tiles["n"]
    return Pyramid(glyphs=g, rows=rows, tiles=tiles[["key", "level", "tile", "start", "stop", "t0_ns", "complete"]],
                   names=list(all_names[used_names]), cats=list(all_cats[used_cats]), palette=list(palette),
                   stack_parent=coder.tree.parent.astype(np.int32), stack_name=stack_name, links=ltab,
                   counters=counters, counter_groups=groups, lanes=coder.slots, origin_ns=origin, span_ns=span_ns,
                   width_px=int(width_px), levels=int(tiles["level"].max()) + 1, truncated=truncated,
                   nbytes=int(used))  # fmt: skip
