"""Names on timeline bars wide enough to hold them, recomputed in the browser on every zoom.

Which bars can carry a name depends on the zoom, so the labels are made by a
fixed-code callback (:data:`LABEL_JS`) on the x range and on the quads'
source: for each event glyph (``count == 1``) at least :data:`MIN_CHARS`
characters wide on screen, its name, cut to the visible part of the bar with
an ellipsis, at the bar's left edge (or the view's, when the bar starts before
it). Names reach the canvas as text glyphs (never HTML). It works in saved
HTML reports (no kernel) and in the live notebook timeline alike.
"""

from __future__ import annotations

from bokeh.models import ColumnDataSource, CustomJS, Range
from bokeh.plotting import figure

from .view_data import CHAR_PX, MAX_LABELS, MIN_CHARS  # the rule, shared with the canvas timeline

__all__ = ["CHAR_PX", "LABEL_JS", "MAX_LABELS", "MIN_CHARS", "add_bar_labels"]

LABEL_JS = """
const lo = xr.start, hi = xr.end;
if (!(hi > lo)) return;
let px = width_px;
try { if (plot.inner_width > 0) px = plot.inner_width; } catch (e) {}
const scale = px / (hi - lo), D = quads.data, N = names ? names.data.name : null;
const L = D.left, R = D.right, T = D.top, B = D.bottom, C = D.count, M = D.name;
const x = [], y = [], text = [];
const n = L ? L.length : 0;
for (let g = 0; g < n && text.length < max_labels; g++) {
  if (C[g] !== 1) continue;
  const a = Math.max(L[g], lo), b = Math.min(R[g], hi);
  const k = Math.floor(((b - a) * scale - 4) / char_px);
  if (k < min_chars) continue;
  const s = String(N ? N[M[g]] : M[g]);
  x.push(a); y.push((T[g] + B[g]) / 2);
  text.push(s.length <= k ? s : s.slice(0, k - 1) + "\\u2026");
}
labels.data = {x, y, text};
"""
"""Args: ``quads`` (left/right/top/bottom/count/name), ``names`` (a source whose ``name`` column the ``name`` codes
index, or null when ``name`` holds the text), ``labels``, ``xr``, ``plot``, ``width_px``, ``char_px``, ``min_chars``,
``max_labels``."""


def add_bar_labels(fig: figure, quads: ColumnDataSource, x_range: Range, width_px: int,
                   names: ColumnDataSource | None = None) -> ColumnDataSource:  # fmt: skip
    """Draw names on ``quads``' wide event bars in ``fig``, kept up to date in the browser; return the label source.

    Parameters
    ----------
    fig : bokeh.plotting.figure
        The lane figure.
    quads : ColumnDataSource
        The displayed glyphs (columns ``left``, ``right``, ``top``, ``bottom``, ``count``, ``name``).
    x_range : bokeh.models.Range
        The figure's x range (ms).
    width_px : int
        The figure's width before its first layout.
    names : ColumnDataSource, optional
        The name table when ``quads["name"]`` holds codes (the static report's pyramid).
    """
    labels = ColumnDataSource({"x": [], "y": [], "text": []}, name="timeline_labels")
    fig.text(x="x", y="y", text="text", source=labels, x_offset=2, text_baseline="middle", text_font_size="8pt",
             text_color="#1a1a1a")  # fmt: skip
    cb = CustomJS(args={"quads": quads, "names": names, "labels": labels, "xr": x_range, "plot": fig,
                        "width_px": int(width_px), "char_px": CHAR_PX, "min_chars": MIN_CHARS,
                        "max_labels": MAX_LABELS}, code=LABEL_JS)  # fmt: skip
    x_range.js_on_change("start", cb)
    x_range.js_on_change("end", cb)
    quads.js_on_change("data", cb)
    return labels
