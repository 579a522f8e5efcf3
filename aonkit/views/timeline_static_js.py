"""The static timeline's level-of-detail callback: fixed JavaScript text; every trace value reaches it as data.

Args of :data:`LOD_JS`: ``view`` (the displayed quads), ``highlight``,
``glyphs``, ``tiles``, ``links``, ``names``, ``cats``, ``stacks``, ``palette``
(the pyramid's sources, see :func:`aonkit.views.timeline_static.pyramid_sources`),
``xr`` (the x range, ms), ``plot`` (for its inner width), the numbers
``span_ns``, ``width_px``, ``max_level``, ``pad``, and the fixed strings
``columns``, ``targets``, ``sides``, ``sep``.
"""

from __future__ import annotations

BOX_SIDES = ("left", "right", "top", "bottom")
DECODED_COLUMNS = ("left", "right", "top", "bottom", "kind", "color", "name", "cat", "dur_text", "busy_text", "count",
                   "correlation", "stack", "launch_op", "launch", "op_left", "op_right", "op_top", "op_bottom",
                   "launch_left", "launch_right", "launch_top", "launch_bottom")  # fmt: skip
"""Columns of the displayed source, as :func:`aonkit.views.timeline_static.decode` and :data:`LOD_JS` fill them."""

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
const fmt = (ns) => {
  for (const [u, s] of [["s", 1e9], ["ms", 1e6], ["us", 1e3]]) if (Math.abs(ns) >= s) return g3(ns / s) + " " + u;
  const f = Math.floor(ns), d = ns - f;
  return (d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f).toFixed(0) + " ns";
};
const G = glyphs.data, L = links.data, N = names.data.name, C = cats.data.cat, P = palette.data.color;
const SP = stacks.data.parent, SN = stacks.data.name, memo = new Map();
const stack_text = (n) => {
  if (n < 0) return "";
  let t = memo.get(n);
  if (t === undefined) {
    t = SP[n] < 0 ? N[SN[n]] : stack_text(SP[n]) + sep + N[SN[n]];
    memo.set(n, t);
  }
  return t;
};
const out = {};
for (const c of columns) out[c] = [];
for (const [r, a, b, clip] of parts) {
  const base = T.t0_ns[r];
  for (let i = T.start[r]; i < T.stop[r]; i++) {
    let left = (base + G.x0[i]) / 1e6, right = (base + G.x1[i]) / 1e6;
    if (clip) {
      if (right < a || left >= b) continue;
      left = Math.max(left, a); right = Math.min(right, b);
    }
    const c = G.link[i], cnt = G.count[i];
    out.left.push(left); out.right.push(right);
    out.top.push(G.slot[i] + pad); out.bottom.push(G.slot[i] + 1 - pad);
    out.kind.push(cnt === 1 ? "event" : "bin"); out.color.push(P[G.color[i]]);
    out.name.push(N[G.name[i]]); out.cat.push(C[G.cat[i]]); out.stack.push(stack_text(G.stack[i]));
    out.dur_text.push(G.dur[i] >= 0 ? fmt(G.dur[i]) : "instant"); out.busy_text.push(fmt(G.busy[i]));
    out.count.push(cnt); out.correlation.push(G.correlation[i]);
    out.launch_op.push(c >= 0 ? L.op_row[c] : -1); out.launch.push(c >= 0 ? L.launch_row[c] : -1);
    for (const t of targets) for (const s of sides) out[t + "_" + s].push(c >= 0 ? L[t + "_" + s][c] : NaN);
  }
}
highlight.data = {left: [], right: [], top: [], bottom: [], row: [], target: []};
view.selected.indices = [];
view.data = out;
"""
"""Body of the x-range callback (see the module doc and :mod:`aonkit.views.timeline_static`)."""
