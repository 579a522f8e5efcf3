"""The static timeline's level-of-detail callback: fixed JavaScript text; every trace value reaches it as data.

Args of :data:`LOD_JS`: ``view`` (the displayed quads), ``highlight``,
``fill``, ``palette``, ``alphas`` and ``chunk`` (see below), ``glyphs`` and ``tiles`` (the pyramid's sources, see
:func:`aonkit.timeline.static.pyramid_sources`), ``xr`` (the x range,
ms), ``plot`` (for its inner width) and the numbers ``span_ns``, ``width_px``,
``max_level``, ``pad``. The displayed source holds numbers and codes only
(:data:`DECODED_COLUMNS`): the hover turns them into text for the one glyph
under the pointer (:mod:`aonkit.timeline.static_hover`), the selection
callback looks its ``link`` up in the links source, and the colour code picks
the fill layer. So a zoom builds typed arrays and no strings.

The quads themselves are not filled (they serve the hover and the selection):
``fill`` is one multi-polygon source whose polygons hold ``chunk`` glyphs each
of one kind and colour (its ``color`` column a palette entry from ``palette``,
``alpha`` the kind's), so the canvas fills once per ``chunk`` glyphs instead of
once per glyph, and a whole level is painted by one renderer. Polygons come in
the order events then bins, each kind in palette order, as separate layers
would paint them. A polygon is one ring: from each glyph's top left corner
round its rectangle and back to that corner, on to the next glyph's, and at
the end back over the corners in reverse, so each bridge is walked both ways
and encloses nothing. Glyphs of one polygon do not overlap (a row's events and
bins are disjoint), so the even-odd fill paints each rectangle whole.
"""

from __future__ import annotations

DECODED_COLUMNS = ("left", "right", "top", "bottom", "kind", "color", "name", "cat", "dur", "busy", "count",
                   "correlation", "stack", "link")  # fmt: skip
"""Columns of the displayed source, as :func:`aonkit.timeline.static.decode` and :data:`LOD_JS` fill them.

``kind`` is ``"event"`` (count 1) or ``"bin"``; ``color``, ``name``, ``cat`` are codes into the palette, names and
categories; ``dur`` (-1: an instant) and ``busy`` are ns; ``stack`` a node of the op stack tree (-1: none);
``link`` a row of the links source (-1: none)."""

FMT_NS_JS = """
const fmtNs = (value) => {
  const strip = (t) => t.includes(".") ? t.replace(/0+$/, "").replace(/[.]$/, "") : t;
  const g3 = (x) => {
    let t = x.toPrecision(3);
    const exact = x.toPrecision(60).replace(/e.*$/, "").replace(/[^0-9]/g, "");
    if (exact[3] === "5" && /^0*$/.test(exact.slice(4)) && Number(exact[2]) % 2 === 0) {
      t = (x * (1 - 1e-12)).toPrecision(3);  // an exact tie rounds half to even, as Python's format does
    }
    const m = t.match(/^(-?[0-9.]+)e([+-])([0-9]+)$/);
    return m ? strip(m[1]) + "e" + m[2] + m[3].padStart(2, "0") : strip(t);
  };
  for (const [u, s] of [["s", 1e9], ["ms", 1e6], ["us", 1e3]]) if (Math.abs(value) >= s) return g3(value / s) + " " + u;
  const f = Math.floor(value), d = value - f;
  return (d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f).toFixed(0) + " ns";
};
"""
"""A JavaScript ``fmtNs(ns)``: the text :func:`aonkit.units.fmt_ns` gives (3 significant digits, ties to even)."""

LOD_JS = """
const lo = xr.start, hi = xr.end;
if (!(hi > lo)) return;
const span_ms = span_ns / 1e6;
let px = width_px;
try { if (plot.inner_width > 0) px = plot.inner_width; } catch (e) {}  // unset before the first layout
let k = Math.ceil(Math.log2(span_ms * px / (width_px * (hi - lo))) - 1e-9);
k = Math.max(0, Math.min(max_level, k));
const n = 2 ** k, tile_ms = span_ms / n;
const j0 = Math.max(0, Math.floor(lo / tile_ms)), j1 = Math.min(n - 1, Math.ceil(hi / tile_ms) - 1);
const T = tiles.data, key = T.key;
const find = (q) => {
  let a = 0, b = key.length - 1;
  while (a <= b) {
    const m = (a + b) >> 1;
    if (key[m] === q) return m;
    if (key[m] < q) a = m + 1; else b = m - 1;
  }
  return -1;
};
const parts = [];
for (let j = j0; j <= j1; j++) {
  let q = n - 1 + j, r = find(q);
  while (r < 0 && q > 0) { q = Math.floor((q - 1) / 2); r = find(q); }
  if (r < 0) continue;
  const a = j * tile_ms, b = (j + 1) * tile_ms, last = parts[parts.length - 1];
  if (last && last[0] === r) last[2] = b; else parts.push([r, a, b, T.level[r] !== k]);
}
const sig = parts.map((p) => p.join(":")).join(",");
if (view._aonkit_sig === sig) return;
view._aonkit_sig = sig;
let total = 0;
for (const [r] of parts) total += T.stop[r] - T.start[r];
const G = glyphs.data, F = Float64Array, I = Int32Array;
const left = new F(total), right = new F(total), top = new F(total), bottom = new F(total), kind = [];
const color = new I(total), name = new I(total), cat = new I(total), dur = new F(total), busy = new F(total);
const count = new I(total), correlation = new F(total), stack = new I(total), link = new I(total);
let o = 0;
for (const [r, a, b, clip] of parts) {
  const base = T.t0_ns[r];
  for (let i = T.start[r]; i < T.stop[r]; i++) {
    let x0 = (base + G.x0[i]) / 1e6, x1 = (base + G.x1[i]) / 1e6;
    if (clip) {
      if (x1 < a || x0 >= b) continue;
      x0 = Math.max(x0, a); x1 = Math.min(x1, b);
    }
    const cnt = G.count[i];
    left[o] = x0; right[o] = x1; top[o] = G.slot[i] + pad; bottom[o] = G.slot[i] + 1 - pad;
    kind.push(cnt === 1 ? "event" : "bin"); count[o] = cnt;
    color[o] = G.color[i]; name[o] = G.name[i]; cat[o] = G.cat[i]; dur[o] = G.dur[i]; busy[o] = G.busy[i];
    correlation[o] = G.correlation[i]; stack[o] = G.stack[i]; link[o] = G.link[i];
    o++;
  }
}
const pal = palette.data.color, nf = pal.length, per = [];
for (let f = 0; f < 2 * nf; f++) per.push([]);
for (let g = 0; g < o; g++) per[(count[g] === 1 ? 0 : nf) + color[g]].push(g);
const xs = [], ys = [], fc = [], fa = [];
for (let f = 0; f < 2 * nf; f++) {
  const gs = per[f];
  for (let c0 = 0; c0 < gs.length; c0 += chunk) {
    const m = Math.min(chunk, gs.length - c0), x = new F(6 * m), y = new F(6 * m);
    for (let q = 0; q < m; q++) {  // glyph g: from its top left corner round its rectangle, back to the corner
      const g = gs[c0 + q], p = 5 * q, r = 6 * m - 1 - q;  // r: the way back over the corners, last to first
      x[p] = left[g]; x[p + 1] = right[g]; x[p + 2] = right[g]; x[p + 3] = left[g]; x[p + 4] = left[g]; x[r] = left[g];
      y[p] = top[g]; y[p + 1] = top[g]; y[p + 2] = bottom[g]; y[p + 3] = bottom[g]; y[p + 4] = top[g]; y[r] = top[g];
    }
    xs.push([[x]]); ys.push([[y]]); fc.push(pal[f % nf]); fa.push(alphas[f < nf ? 0 : 1]);
  }
}
fill.data = {xs, ys, color: fc, alpha: fa};
const cut = (v) => v.slice(0, o);
highlight.data = {left: [], right: [], top: [], bottom: [], row: [], target: []};
view.selected.indices = [];
view.data = {left: cut(left), right: cut(right), top: cut(top), bottom: cut(bottom), kind, color: cut(color),
             name: cut(name), cat: cut(cat), dur: cut(dur), busy: cut(busy), count: cut(count),
             correlation: cut(correlation), stack: cut(stack), link: cut(link)};
"""
"""Body of the x-range callback (see the module doc and :mod:`aonkit.timeline.static`)."""
