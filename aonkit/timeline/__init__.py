"""The timeline: one package from the trace to what a person sees.

Public names (everything views, widgets and the report use):

Tables (the analysis layer: numpy and pandas only)
    :class:`TimelineIndex` and :func:`timeline_index` (lanes, rows and the
    per-track level-of-detail pyramid of a trace, :mod:`.index`),
    :func:`index_of` (the index of a trace, built once and kept),
    :func:`timeline_tiles` and :func:`counter_tiles` (what to draw in a
    window at a width, :mod:`.tiles`), :func:`tile_details` and
    :func:`stacks` (what hover and selection show, :mod:`.detail`),
    :class:`Focus`, :func:`focus_of` and :func:`names_matching` (a few
    names' events at any zoom, counted and stepped through, :mod:`.focus`).
Views (bokeh; imported on first use so that ``import aonkit`` stays light)
    :func:`timeline_view` / :class:`TimelineView` (the live view that asks
    for tiles as you zoom, :mod:`.view`), :func:`static_timeline` (the
    self-contained view of the HTML report, :mod:`.static`) and
    :func:`timeline_pyramid` / :class:`Pyramid` (its precomputed levels,
    :mod:`.pyramid`), :func:`add_critical_path` / :func:`critical_boxes` (the
    critical path outlined on either, :mod:`.critical`).

The Numba kernels stay in :mod:`aonkit._kernels` (``pyramid``, ``binning``,
``counters``, ``nesting``). Inside the package the table modules never import
the view modules (``tests/test_layering.py``).
"""

from __future__ import annotations

from typing import Any

from .detail import STACK_SEPARATOR, stacks, tile_details
from .focus import Focus, focus_of, names_matching
from .index import TimelineIndex, timeline_index
from .tiles import counter_tiles, index_of, timeline_tiles

_VIEWS = {
    "timeline_view": ".view", "TimelineView": ".view", "static_timeline": ".static",
    "timeline_pyramid": ".pyramid", "Pyramid": ".pyramid", "add_critical_path": ".critical",
    "critical_boxes": ".critical", "color_legend": ".view_figs", "CanvasTimeline": ".canvas",
    "canvas_timeline": ".canvas",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _VIEWS:
        import importlib

        return getattr(importlib.import_module(_VIEWS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "STACK_SEPARATOR", "CanvasTimeline", "Focus", "Pyramid", "TimelineIndex", "TimelineView", "add_critical_path",
    "canvas_timeline", "counter_tiles",
    "critical_boxes", "color_legend", "focus_of", "index_of", "names_matching", "stacks",
    "static_timeline", "tile_details", "timeline_index", "timeline_pyramid", "timeline_tiles", "timeline_view",
]  # fmt: skip
