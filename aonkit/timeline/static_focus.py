"""The report's focus: kernels or ops picked in its tables are outlined on its timeline at every zoom, with counts.

The notebook timeline asks its kernel for a focus's boxes at each view (:mod:`aonkit.timeline.focus`); a report has
no kernel. So the report stores, for each name of its kernel and op tables, the boxes of its events and of the GPU
work they launched (an op's kernels), merged as :meth:`~aonkit.timeline.focus.Focus.marks` merges them at the width
of the deepest level the report's timeline draws (past it the timeline shows that level's glyphs too). Box ends are
int32 units of that level's pixel; the names' counts and durations are exact. When the boxes of all names would pass
:data:`FOCUS_BOX_BUDGET`, the unit doubles until they fit or it is a pixel of the whole-trace view (the bar then
says to within how much the outlines are drawn).

In the page, :data:`FOCUS_JS` runs when a table's selection or the view changes: it takes the boxes of the picked
names in the view, merges them again per pixel and slot of the view, and draws them (magenta, the notebook focus's
colour) over the lanes, the rest faded under a white veil; the bar above the timeline says how many events the picks
have, their time (in all, mean, longest), the GPU work they launched, and about how many boxes' events reach into
the view (about: a box of the stored unit may straddle the view's edge). "longest" centres the view on the longest
event of the picks; ◀ ▶ step through them, and ◀ GPU, GPU ▶ through the GPU work they launched (the notebook's
Shift+P, Shift+N; :mod:`aonkit.timeline.static_focus_js`). A strip shows where they start
over the whole trace and the view's place in it; a click there centres the view. Names reach the page as data
and the bar renders text, never markup.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from bokeh.layouts import row
from bokeh.models import BoxAnnotation, Button, ColumnDataSource, CustomJS, Div, LayoutDOM, Range, Range1d
from bokeh.plotting import figure

from ..analysis.correlation import gpu_links
from ..trace import Trace
from .detail import launch_maps
from .focus import focus_of_many
from .pyramid import Pyramid
from .static_focus_js import CENTRE_JS, FOCUS_JS, LONGEST_JS, STEP_JS
from .tiles import index_of
from .view_data import GLYPH_PAD

__all__ = ["FOCUS_BOX_BUDGET", "FOCUS_COLOR", "add_static_focus", "focus_data"]

FOCUS_BOX_BUDGET = 400_000
"""Most boxes stored for all names together (14 bytes each before compression)."""
FOCUS_COLOR = "#D4007F"
"""The focus's outline, as in the notebook timeline."""
MAX_SPAN_NS = 2**62
"""Longest span the focus draws (146 years: only odd time stamps make a longer one, and ns offsets within it
would overflow int64)."""
HINT = "pick kernels or ops in the tables below to outline them here"
"""The bar's text while nothing is picked."""
STRIP_PX, STRIP_BINS = 240, 120
"""The overview strip's width and its bins over the whole trace."""
SHADE_ALPHA = 0.6
"""How much white covers the rest of the lanes while a focus is shown."""
NAME_COLUMNS = ("name", "start", "stop", "n", "busy_ns", "mean_ns", "max_ns", "longest_x0", "longest_x1",
                "longest_slot", "launched_n", "launched_ns")  # fmt: skip


def focus_data(trace: Trace, pyr: Pyramid, names: Sequence[str],
               budget: int = FOCUS_BOX_BUDGET) -> tuple[pd.DataFrame, dict[str, np.ndarray], float]:  # fmt: skip
    """Per name its stats and box range; the boxes; the unit (ns) their ends count in.

    Returns
    -------
    names : pandas.DataFrame
        :data:`NAME_COLUMNS`: ``start``/``stop`` into the boxes; ``n``, ``busy_ns``, ``mean_ns`` and ``max_ns`` of
        its events on the lanes; its longest event's ``longest_x0``/``longest_x1`` (ms from the span's start) and
        ``longest_slot``; ``launched_n``/``launched_ns`` of the GPU work they launched. Names with no event on the
        lanes are left out.
    boxes : dict of str to numpy.ndarray
        ``q0``, ``q1`` (int32: the box covers ``[q0, q1)`` units from the span's start), ``slot``, ``count``
        (the named events it holds; 0 for launched work only) and ``launched`` (the launched GPU events it holds).
    unit_ns : float
        The span over ``pyr.width_px * 2 ** (pyr.levels - 1)`` pixels, doubled while the boxes pass ``budget``
        (but never past the span over ``pyr.width_px``). No names are kept when the span passes
        :data:`MAX_SPAN_NS` (:func:`focus_off` says why).
    """
    origin, span = int(pyr.origin_ns), max(int(pyr.span_ns), 1)
    foci = {}
    if span <= MAX_SPAN_NS:  # else the events' offsets overflow int64: no focus (see focus_off)
        index = index_of(trace)
        foci = focus_of_many(trace, index, pyr.lanes, names, launch_maps(trace, gpu_links(trace))[0])
        foci = {n: f for n, f in foci.items() if len(f)}
    px = max(int(pyr.width_px) * 2 ** (int(pyr.levels) - 1), 1)  # the deepest level's pixels over the span
    while True:
        marks = {n: f.marks(origin, origin + span, px, origin, launched=True) for n, f in foci.items()}
        if sum(len(m["slot"]) for m in marks.values()) <= budget or px <= pyr.width_px:
            break
        px = max(px // 2, int(pyr.width_px))
    unit = span / px
    rows, parts, at = [], [], 0
    for n, f in foci.items():
        m = marks[n]
        x0_ns, x1_ns = np.round(m["x0"] * 1e6), np.round(m["x1"] * 1e6)  # the marks' ms back to whole ns
        q0 = np.floor(x0_ns / unit).astype(np.int64)
        q1 = np.maximum(np.ceil(x1_ns / unit).astype(np.int64), q0 + 1)
        parts.append((q0, q1, m["slot"], m["count"], m["launched"]))
        st, place = f.stats(), f.longest()
        i = f.order[place]
        rows.append((n, at, at + len(q0), len(f), f.busy_ns, st["mean"], st["max"], (int(f.ts[i]) - origin) / 1e6,
                     (int(f.end[i]) - origin) / 1e6, f.slot[i], len(f.launched.ts), f.launched.busy_ns))  # fmt: skip
        at += len(q0)
    q0, q1, slot, count, gpu = (np.concatenate([p[k] for p in parts]) if parts else np.empty(0, np.int64)
                                for k in range(5))  # fmt: skip
    slot_dt = np.int16 if slot.max(initial=0) < 2**15 else np.int32
    boxes = {"q0": q0.astype(np.int32), "q1": q1.astype(np.int32), "slot": slot.astype(slot_dt),
             "count": count.astype(np.int32), "launched": gpu.astype(np.int32)}  # fmt: skip
    return pd.DataFrame(rows, columns=list(NAME_COLUMNS)), boxes, float(unit)


def focus_off(pyr: Pyramid) -> str:
    """Why the report cannot outline picks on this timeline ("": it can)."""
    if int(pyr.span_ns) > MAX_SPAN_NS:
        return (f"no outlines: the timeline spans {pyr.span_ns / 3.15576e16:.0f} years (odd time stamps?), too long "
                "to place events in it")
    return ""


def finest_unit(pyr: Pyramid) -> float:
    """The nanoseconds a pixel of the deepest level of the report's timeline spans."""
    return max(int(pyr.span_ns), 1) / max(int(pyr.width_px) * 2 ** (int(pyr.levels) - 1), 1)


def add_static_focus(fig: figure, x_range: Range, pyr: Pyramid, trace: Trace,
                     pickers: Sequence[tuple[ColumnDataSource, str]]) -> LayoutDOM:  # fmt: skip
    """Draw the focus of what ``pickers`` (a table's source and its name column) select on ``fig``.

    Returns the row to put above the timeline: the ◀ ▶, "longest" and ◀ GPU, GPU ▶ buttons, the strip and the bar.
    """
    names = list(dict.fromkeys(str(v) for src, col in pickers for v in src.data[col]))
    table, boxes, unit = focus_data(trace, pyr, names)
    names_src = ColumnDataSource({c: table[c].to_numpy() for c in NAME_COLUMNS}, name="timeline_focus_names")
    box_src = ColumnDataSource(boxes, name="timeline_focus_boxes")
    drawn = ColumnDataSource({"left": [], "right": [], "top": [], "bottom": [], "count": []}, name="timeline_focus")
    shade = BoxAnnotation(fill_color="white", fill_alpha=SHADE_ALPHA, line_color=None, visible=False,
                          level="annotation", name="timeline_focus_shade")  # the whole plot: the rest fades
    fig.add_layout(shade)
    fig.quad(left="left", right="right", top="top", bottom="bottom", source=drawn, fill_color=FOCUS_COLOR,
             fill_alpha=0.25, line_color=FOCUS_COLOR, line_width=2, level="overlay")  # over the shade
    current = ColumnDataSource({c: [] for c in ("left", "right", "top", "bottom", "box", "count", "rank", "of", "gpu")},
                               name="timeline_focus_current")  # fmt: skip
    fig.quad(left="left", right="right", top="top", bottom="bottom", source=current, fill_alpha=0,
             line_color="#000000", line_width=2.5, level="overlay")  # the box a step showed  # fmt: skip
    strip, strip_src, view_box = _strip(x_range, pyr.span_ns / 1e6)
    bar = Div(text=HINT, render_as_text=True, name="timeline_focus_bar", styles={"color": FOCUS_COLOR})
    # the buttons stay as they are (without a pick they do nothing): in the page a visibility change took about
    # 150 ms a button and a `disabled` change about 20, where a whole pick takes 60-70 (RESULTS, session 37)
    buttons = [Button(label=label, name=f"timeline_focus_{key}", width=w)
               for key, label, w in (("prev", "◀", 40), ("next", "▶", 40), ("longest", "longest", 80),
                                     ("prev_gpu", "◀ GPU", 62), ("next_gpu", "GPU ▶", 62))]  # fmt: skip
    args = {"pickers": [src for src, _ in pickers], "columns": [col for _, col in pickers], "names": names_src,
            "boxes": box_src, "drawn": drawn, "current": current, "bar": bar, "shade": shade,
            "xr": x_range, "plot": fig, "unit_ms": unit / 1e6, "width_px": int(pyr.width_px), "pad": GLYPH_PAD,
            "coarse_ns": unit if unit > finest_unit(pyr) * 1.000001 else 0.0, "off": focus_off(pyr),
            "hint": HINT, "strip": strip_src, "view_box": view_box, "bins": STRIP_BINS,
            "span_ms": pyr.span_ns / 1e6}  # fmt: skip
    cb = CustomJS(args=args, code=FOCUS_JS)
    for src, _ in pickers:
        src.selected.js_on_change("indices", cb)
    x_range.js_on_change("start", cb)
    x_range.js_on_change("end", cb)
    step = {k: args[k] for k in ("pickers", "columns", "names", "boxes", "current", "xr", "unit_ms", "pad")}
    step.update(span_ms=pyr.span_ns / 1e6, gpu=False)
    for b, d in zip(buttons[:2], (-1, 1)):
        b.js_on_click(CustomJS(args={**step, "direction": d}, code=STEP_JS))
    buttons[2].js_on_click(CustomJS(args=step, code=LONGEST_JS))
    for b, d in zip(buttons[3:], (-1, 1)):  # through the GPU work the picks launched (the notebook's Shift+N/P)
        b.js_on_click(CustomJS(args={**step, "direction": d, "gpu": True}, code=STEP_JS))
    return row(*buttons, strip, bar, name="timeline_focus_row")


def _strip(x_range: Range, span_ms: float) -> tuple[figure, ColumnDataSource, BoxAnnotation]:
    """The strip of where the picks are over the whole trace, the view's box on it; a click centres the view."""
    src = ColumnDataSource({"left": [], "right": [], "top": [], "count": []}, name="timeline_focus_strip")
    fig = figure(width=STRIP_PX, height=26, x_range=Range1d(0, span_ms), y_range=Range1d(0, 1), tools="",
                 toolbar_location=None, min_border=2, name="timeline_focus_strip_fig", outline_line_color="#BBBBBB")
    fig.axis.visible = False
    fig.grid.visible = False
    fig.quad(left="left", right="right", top="top", bottom=0, source=src, fill_color=FOCUS_COLOR, line_color=None)
    view_box = BoxAnnotation(left=0, right=span_ms, fill_color="#000000", fill_alpha=0.08, line_color="#000000",
                             line_alpha=0.4, name="timeline_focus_view_box")  # fmt: skip
    fig.add_layout(view_box)
    fig.js_on_event("tap", CustomJS(args={"xr": x_range, "span_ms": span_ms}, code=CENTRE_JS))
    return fig, src, view_box
