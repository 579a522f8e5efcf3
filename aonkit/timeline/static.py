"""Self-contained timeline for an HTML report: a precomputed pyramid and a fixed-code level-of-detail callback.

:func:`static_timeline` stores a :class:`~aonkit.timeline.pyramid.Pyramid`
in ColumnDataSources and attaches :data:`LOD_JS` to the x range: on every
change of its start or end the browser picks the level whose tile width
matches the view (a tile's ns per pixel at ``width_px`` at most the screen's,
capped at the deepest level), maps each tile under the view to itself or, when
it was not stored, to its nearest stored ancestor (clipped to the tile), and
decodes those glyphs into the displayed source: positions, codes and
nanoseconds in typed arrays (:mod:`aonkit.timeline.static_js`), turned
into text only by the hover, for the glyph under the pointer
(:mod:`aonkit.timeline.static_hover`). Past the deepest level the view
shows that level's glyphs: single events where they were a pixel wide there,
bins elsewhere. The x range is a ``DataRange1d`` that follows only an invisible
two-point frame over the span, so BokehJS sets its start and end when the page
renders, which fills the displayed source: the HTML stores no decoded glyphs.
:func:`pick_parts`, :func:`decode`, :func:`decoded_glyphs` and
:func:`hover_texts` are the same steps in Python (for tests and notebooks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, CustomJS, DataRange1d, LayoutDOM
from bokeh.plotting import figure

from ..trace import Trace
from ..views import theme
from ..views._data import frame_source
from .labels import add_bar_labels
from .pyramid import Pyramid, timeline_pyramid
from .stacks import stack_texts
from .static_hover import STATIC_BIN_TOOLTIPS, STATIC_EVENT_TOOLTIPS, hover_formatters, link_highlight
from .static_js import DECODED_COLUMNS, LOD_JS
from .view_data import GLYPH_PAD
from .view_figs import BIN_ALPHA, EVENT_ALPHA, add_quads, counter_figures, empty_highlight, lane_figure

__all__ = ["DECODED_COLUMNS", "LOD_JS", "decode", "decoded_glyphs", "hover_texts", "pick_parts", "static_timeline"]

Part = tuple[int, float, float, bool]


def pick_parts(pyr: Pyramid, lo_ms: float, hi_ms: float, px: float) -> tuple[int, list[Part]]:
    """The level for the view ``[lo_ms, hi_ms]`` on ``px`` screen pixels, and the parts to draw.

    Each part is ``(tile row, lo, hi, clip)``: a stored tile's row in ``pyr.tiles``, the span it stands for (ms)
    and whether it is an ancestor to clip to that span.
    """
    if not hi_ms > lo_ms:
        return 0, []
    span_ms = pyr.span_ns / 1e6
    k = math.ceil(math.log2(span_ms * px / (pyr.width_px * (hi_ms - lo_ms))) - 1e-9)
    k = max(0, min(pyr.levels - 1, k))
    n = 2**k
    tile_ms = span_ms / n
    j0, j1 = max(0, math.floor(lo_ms / tile_ms)), min(n - 1, math.ceil(hi_ms / tile_ms) - 1)
    keys, level = pyr.tiles["key"].to_numpy(), pyr.tiles["level"].to_numpy()
    parts: list[list] = []
    for j in range(j0, j1 + 1):
        q = n - 1 + j
        r = int(np.searchsorted(keys, q))
        while (r >= len(keys) or keys[r] != q) and q > 0:
            q = (q - 1) // 2
            r = int(np.searchsorted(keys, q))
        if r >= len(keys) or keys[r] != q:
            continue
        a, b = j * tile_ms, (j + 1) * tile_ms
        if parts and parts[-1][0] == r:
            parts[-1][2] = b
        else:
            parts.append([r, a, b, bool(level[r] != k)])
    return k, [(int(r), float(a), float(b), bool(c)) for r, a, b, c in parts]


def _extents(pyr: Pyramid, parts: list[Part]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g, t = pyr.glyphs, pyr.tiles
    idx, left, right = [np.empty(0, np.int64)], [np.empty(0)], [np.empty(0)]
    for r, a, b, clip in parts:
        i = np.arange(t["start"].iat[r], t["stop"].iat[r])
        base = float(t["t0_ns"].iat[r])
        lo, hi = (base + g["x0"][i].astype(np.float64)) / 1e6, (base + g["x1"][i].astype(np.float64)) / 1e6
        if clip:
            keep = ~((hi < a) | (lo >= b))
            i, lo, hi = i[keep], np.maximum(lo[keep], a), np.minimum(hi[keep], b)
        idx.append(i), left.append(lo), right.append(hi)
    return np.concatenate(idx), np.concatenate(left), np.concatenate(right)


def decoded_glyphs(pyr: Pyramid, parts: list[Part]) -> np.ndarray:
    """Positions in ``pyr.glyphs`` of what :func:`decode` shows, in its order (``pyr.rows[...]``: their events)."""
    return _extents(pyr, parts)[0]


def decode(pyr: Pyramid, parts: list[Part]) -> dict[str, np.ndarray | list]:
    """The displayed source's data (:data:`DECODED_COLUMNS`) for ``parts`` of :func:`pick_parts`, as in the browser."""
    g = pyr.glyphs
    i, left, right = _extents(pyr, parts)
    out: dict[str, np.ndarray | list] = {
        "left": left, "right": right, "top": g["slot"][i] + GLYPH_PAD, "bottom": g["slot"][i] + 1 - GLYPH_PAD,
        "kind": ["event" if c == 1 else "bin" for c in g["count"][i]],
    }  # fmt: skip
    for c in DECODED_COLUMNS[5:]:
        out[c] = g[c][i]
    return out


def hover_texts(pyr: Pyramid, data: dict, i: int) -> dict[str, str]:
    """What the hover shows for glyph ``i`` of ``data`` (from :func:`decode`): the texts of its codes and times."""

    def dur(v: float) -> str:
        return theme.fmt_ns(float(v)) if v >= 0 else "instant"

    stack = stack_texts(pyr.stack_parent, pyr.stack_name, pyr.names, np.array([data["stack"][i]]))[0]
    return {"name": pyr.names[data["name"][i]], "cat": pyr.cats[data["cat"][i]], "dur": dur(data["dur"][i]),
            "busy": dur(data["busy"][i]), "stack": stack}  # fmt: skip


def pyramid_sources(pyr: Pyramid) -> dict[str, ColumnDataSource]:
    """The pyramid as named ColumnDataSources: glyphs, tiles, links, stack tree and the string tables."""
    tiles = pyr.tiles.assign(start=pyr.tiles["start"].astype(np.int32), stop=pyr.tiles["stop"].astype(np.int32),
                             key=pyr.tiles["key"].astype(np.float64), level=pyr.tiles["level"].astype(np.int32),
                             t0_ns=pyr.tiles["t0_ns"].astype(np.float64))  # fmt: skip
    return {
        "glyphs": ColumnDataSource(dict(pyr.glyphs), name="timeline_pyramid"),
        "tiles": frame_source(tiles[["key", "level", "start", "stop", "t0_ns"]], "timeline_tiles"),
        "links": frame_source(pyr.links.astype({"op_row": np.float64, "launch_row": np.float64}), "timeline_links"),
        "stacks": ColumnDataSource({"parent": pyr.stack_parent, "name": pyr.stack_name}, name="timeline_stacks"),
        "names": ColumnDataSource({"name": pyr.names}, name="timeline_names"),
        "cats": ColumnDataSource({"cat": pyr.cats}, name="timeline_cats"),
        "palette": ColumnDataSource({"color": pyr.palette}, name="timeline_palette"),
    }


FILL_CHUNK = 128
"""Glyphs per polygon of the fill source: one canvas fill each (far fewer than one per glyph; long paths are slow)."""
FILL_ALPHAS = (EVENT_ALPHA, BIN_ALPHA)
"""Fill alpha of the events' polygons, then the bins'."""


def fill_layer(fig: figure) -> ColumnDataSource:
    """One multi-polygon renderer, each polygon with its colour and alpha, empty until :data:`LOD_JS` fills it.

    One renderer (a handful of bokeh models) instead of one per kind and colour: the page is smaller and
    quicker to build and serialize, and the canvas fills as many polygons as before.
    """
    src = ColumnDataSource({"xs": [], "ys": [], "color": [], "alpha": []}, name="timeline_fill")
    fig.multi_polygons(xs="xs", ys="ys", source=src, fill_color="color", fill_alpha="alpha", line_color=None)
    return src


def static_timeline(trace: Trace | Pyramid, width_px: int = 1600, levels: int = 16,
                    budget_bytes: int = 16_000_000, critical: pd.DataFrame | None = None, *,
                    source: Trace | None = None,
                    pickers: Sequence[tuple[ColumnDataSource, str]] = ()) -> LayoutDOM:  # fmt: skip
    """A timeline that zooms with no Python kernel: its data precomputed at every level within a size budget.

    Parameters
    ----------
    trace : Trace or Pyramid
        The trace, or its :func:`~aonkit.timeline.pyramid.timeline_pyramid` (then the other arguments
        are the pyramid's).
    width_px : int
        Figure width, and the width every tile is queried at.
    levels : int
        Most levels (level ``k`` has ``2**k`` tiles); fewer when the budget or the trace's detail stops earlier.
    budget_bytes : int
        Bound on the stored size of the glyphs, strings and counters (BokehJS, about 1.3 MB, comes on top). A
        tile holds at most ``rows x (2 x width_px + 2)`` glyphs, so level ``k`` at most ``2**k`` times that.
    critical : pandas.DataFrame, optional
        A critical path of the trace (:func:`aonkit.analysis.critical_path.critical_path`), outlined on the
        lanes (``trace`` must then be the Trace, or ``source`` the Trace of the pyramid passed).
    source : Trace, optional
        The trace a pyramid passed as ``trace`` was made from (needed with ``critical`` or ``pickers``).
    pickers : sequence of (ColumnDataSource, str)
        Tables' sources and their name columns: the names they select are outlined on the lanes, with a bar
        of their counts above (:mod:`aonkit.timeline.static_focus`; the report passes its kernel and op tables).

    Returns
    -------
    bokeh.models.LayoutDOM
        The lane figure (displayed source ``timeline_quads``, filled in the browser and painted through the
        fill source ``timeline_fill``; the pyramid's glyphs in ``timeline_pyramid``)
        over the counter figures.
    """
    pyr = trace if isinstance(trace, Pyramid) else timeline_pyramid(trace, width_px, levels, budget_bytes)
    span_ms = pyr.span_ns / 1e6
    x_range = DataRange1d(range_padding=0, bounds=(0.0, span_ms), name="timeline_x")
    fig = lane_figure(pyr.lanes, x_range, pyr.width_px)
    frame = fig.scatter(x=[0.0, span_ms], y=[0.0, 0.0], alpha=0, size=0, name="timeline_frame")
    x_range.renderers = [frame]
    view = ColumnDataSource({c: [] for c in DECODED_COLUMNS}, name="timeline_quads")
    highlight = ColumnDataSource(empty_highlight(), name="timeline_highlight")
    srcs = pyramid_sources(pyr)
    fill = fill_layer(fig)
    add_quads(fig, view, highlight, (STATIC_EVENT_TOOLTIPS, STATIC_BIN_TOOLTIPS), hover_formatters(srcs), None,
              link_highlight(view, highlight, srcs["links"]))  # fmt: skip
    for r in [r for r in fig.renderers if r.data_source is view]:  # the unfilled quads: a selected one is outlined
        r.selection_glyph = r.glyph.clone(line_color="#000000", line_width=1.5)
    lod = CustomJS(args={"glyphs": srcs["glyphs"], "tiles": srcs["tiles"], "view": view, "highlight": highlight,
                         "fill": fill, "palette": srcs["palette"], "alphas": list(FILL_ALPHAS), "chunk": FILL_CHUNK,
                         "xr": x_range, "plot": fig, "span_ns": float(pyr.span_ns), "width_px": pyr.width_px,
                         "max_level": pyr.levels - 1, "pad": GLYPH_PAD}, code=LOD_JS)  # fmt: skip
    x_range.js_on_change("start", lod)
    x_range.js_on_change("end", lod)
    add_bar_labels(fig, view, x_range, pyr.width_px, srcs["names"])
    groups = {g: [(lab, frame_source(pyr.counters[lab], f"timeline_counter_{k}_{i}")) for i, lab in enumerate(labs)]
              for k, (g, labs) in enumerate(pyr.counter_groups.items())}  # fmt: skip
    figs = counter_figures(groups, x_range, pyr.width_px)
    owner = trace if isinstance(trace, Trace) else source
    if critical is not None and owner is not None:
        from .critical import add_critical_path

        add_critical_path(fig, owner, critical)
    above = []
    if pickers and owner is not None:
        from .static_focus import add_static_focus

        above.append(add_static_focus(fig, x_range, pyr, owner, pickers))
    return column(*above, fig, *figs) if figs or above else fig
