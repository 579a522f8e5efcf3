"""Hover text and highlight of the static timeline, from the codes its displayed source holds (fixed JavaScript).

The displayed quads (:data:`~aonkit.timeline.static_js.DECODED_COLUMNS`)
carry codes and nanoseconds, not text: :data:`HOVER_JS`, a
:class:`~bokeh.models.CustomJSHover` formatter, turns the fields of the one
glyph under the pointer into text (name and category from their tables, a
duration as :func:`aonkit.units.fmt_ns` writes it, the op stack by walking the
stack tree). Bokeh escapes what a formatter returns, so names stay text.
:data:`LINK_HIGHLIGHT_JS` outlines a selected glyph's launching op and launch
call from its row of the links source.
"""

from __future__ import annotations

from bokeh.models import ColumnDataSource, CustomJS, CustomJSHover

from .detail import STACK_SEPARATOR
from .static_js import FMT_NS_JS
from .view_data import TARGETS

HOVER_JS = FMT_NS_JS + """
if (format === "name") return names.data.name[value];
if (format === "cat") return cats.data.cat[value];
if (format === "stack") {
  const P = stacks.data.parent, S = stacks.data.name, N = names.data.name, path = [];
  for (let n = value; n >= 0; n = P[n]) path.push(N[S[n]]);
  return path.reverse().join(sep);
}
if (value < 0) return "instant";
return fmtNs(value);
"""
"""Formatter code: args ``names``, ``cats``, ``stacks`` (sources) and ``sep``; ``format`` picks the text:
``name``, ``cat``, ``stack`` (a node, -1: none) or ``dur`` (ns; below 0: an instant)."""

STATIC_EVENT_TOOLTIPS = [("", "@name{name}"), ("category", "@cat{cat}"), ("duration", "@dur{dur}"),
                         ("op stack", "@stack{stack}"), ("correlation", "@correlation")]  # fmt: skip
STATIC_BIN_TOOLTIPS = [("events", "@count{0,0} in this pixel, busy @busy{dur}"), ("longest", "@name{name}"),
                       ("category", "@cat{cat}"), ("its duration", "@dur{dur}"),
                       ("op stack", "@stack{stack}")]  # fmt: skip
"""The live view's tooltips (:mod:`aonkit.timeline.view_data`) over the static view's codes."""

LINK_HIGHLIGHT_JS = """
const d = src.data, L = links.data, out = {left: [], right: [], top: [], bottom: [], row: [], target: []};
for (const i of src.selected.indices) {
  const c = d.link[i];
  if (!(c >= 0)) continue;
  for (const t of targets) {
    const left = L[t + "_left"][c];
    if (left == null || Number.isNaN(left)) continue;
    out.left.push(left); out.right.push(L[t + "_right"][c]);
    out.top.push(L[t + "_top"][c]); out.bottom.push(L[t + "_bottom"][c]);
    out.row.push(L[t + "_row"][c]); out.target.push(t);
  }
}
dst.data = out;
"""
"""Selection callback: args ``src`` (the quads), ``dst`` (the highlight source), ``links`` and ``targets``."""


def hover_formatters(srcs: dict[str, ColumnDataSource]) -> dict[str, CustomJSHover]:
    """Formatters of the static tooltips' fields, reading the names, categories and stack tree in ``srcs``."""
    fmt = CustomJSHover(args={"names": srcs["names"], "cats": srcs["cats"], "stacks": srcs["stacks"],
                              "sep": STACK_SEPARATOR}, code=HOVER_JS)  # fmt: skip
    return {f"@{field}": fmt for field in ("name", "cat", "dur", "busy", "stack")}


def link_highlight(src: ColumnDataSource, highlight: ColumnDataSource, links: ColumnDataSource) -> CustomJS:
    """The selection callback outlining what the selected glyphs' ``link`` rows point to."""
    return CustomJS(args={"src": src, "dst": highlight, "links": links, "targets": list(TARGETS)},
                    code=LINK_HIGHLIGHT_JS)  # fmt: skip
