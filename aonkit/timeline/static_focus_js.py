"""The report focus's JavaScript (:mod:`aonkit.timeline.static_focus`): fixed text; the trace reaches it as data.

:data:`FOCUS_JS` args: ``pickers`` (the tables' sources) and ``columns`` (their name columns), ``names`` and
``boxes`` (:func:`~aonkit.timeline.static_focus.focus_data` as sources), ``drawn`` (the quads drawn), ``bar``
(a text Div), ``button`` ("longest"), ``xr`` and ``plot`` (the timeline's x range, ms, and figure), the numbers
``unit_ms``, ``width_px``, ``pad`` and ``coarse_ns`` (the stored unit when the budget made it coarser than the
deepest level's pixel, else 0). :data:`LONGEST_JS` args: ``pickers``, ``columns``, ``names``, ``xr``, ``span_ms``.
"""

from __future__ import annotations

from .focus import STEP_FILL, STEP_MIN_NS
from .static_js import FMT_NS_JS

_PICKED = """
const picked = new Set();
for (let p = 0; p < pickers.length; p++) {
  const col = pickers[p].data[columns[p]];
  for (const i of pickers[p].selected.indices) picked.add(String(col[i]));
}
const N = names.data, rows = [];
for (let r = 0; r < N.name.length; r++) if (picked.has(N.name[r])) rows.push(r);
"""

FOCUS_JS = FMT_NS_JS + _PICKED + """
const empty = {left: [], right: [], top: [], bottom: [], count: []};
if (!rows.length) {
  drawn.data = empty;
  bar.text = picked.size ? "no event of the picked names is on the timeline" : "";
  button.visible = false;
  return;
}
const lo = xr.start, hi = xr.end;
let px = width_px;
try { if (plot.inner_width > 0) px = plot.inner_width; } catch (e) {}  // unset before the first layout
const B = boxes.data, q0 = B.q0, q1 = B.q1, S = B.slot, C = B.count, per = (hi - lo) / px;
const idx = [];
for (const r of rows) {
  for (let k = N.start[r]; k < N.stop[r]; k++) if (q1[k] * unit_ms > lo && q0[k] * unit_ms < hi) idx.push(k);
}
if (rows.length > 1) idx.sort((a, b) => (S[a] - S[b]) || (q0[a] - q0[b]) || (a - b));  // one name's: in order
const L = [], R = [], T = [], D = [], K = [];
const pix = (x) => Math.min(Math.max(Math.floor((x - lo) / per), 0), px - 1);
let reach = -1, slot = null, inView = 0;
for (const k of idx) {
  const x0 = q0[k] * unit_ms, x1 = q1[k] * unit_ms, p0 = pix(x0), p1 = pix(x1 - 1e-9 * per);
  inView += C[k];
  const n = L.length;
  if (n && S[k] === slot && p0 <= reach) {  // in a pixel the box before already reaches: one box
    R[n - 1] = Math.max(R[n - 1], x1); K[n - 1] += C[k]; reach = Math.max(reach, p1);
  } else {
    L.push(x0); R.push(x1); T.push(S[k] + pad); D.push(S[k] + 1 - pad); K.push(C[k]); slot = S[k]; reach = p1;
  }
}
drawn.data = {left: L, right: R, top: T, bottom: D, count: K};
let n = 0, busy = 0, most = 0, ln = 0, lns = 0;
for (const r of rows) {
  n += N.n[r]; busy += N.busy_ns[r]; most = Math.max(most, N.max_ns[r]); ln += N.launched_n[r]; lns += N.launched_ns[r];
}
const first = N.name[rows[0]], label = (first.length > 60 ? first.slice(0, 59) + "…" : first)
  + (rows.length > 1 ? " and " + (rows.length - 1) + " more" : "");
let text = label + ": " + n.toLocaleString("en-US") + " events, " + fmtNs(busy) + " in all, mean " + fmtNs(busy / n)
  + ", longest " + fmtNs(most);
if (ln) text += "; they launched " + ln.toLocaleString("en-US") + " GPU events, " + fmtNs(lns);
text += " · about " + inView.toLocaleString("en-US") + " in view";
if (coarse_ns > 0) text += " (outlined to within " + fmtNs(coarse_ns) + ")";
bar.text = text;
button.visible = true;
"""

LONGEST_JS = _PICKED + f"""
if (!rows.length) return;
let best = rows[0];
for (const r of rows) if (N.max_ns[r] > N.max_ns[best]) best = r;
const t0 = N.longest_x0[best], t1 = N.longest_x1[best], dur = t1 - t0;
const width = Math.max(Math.min(xr.end - xr.start, dur / {STEP_FILL[0]}), dur / {STEP_FILL[1]}, {STEP_MIN_NS / 1e6});
let a = (t0 + t1) / 2 - width / 2;
a = Math.max(0, Math.min(a, span_ms - width));
xr.have_updated_interactively = true;  // a DataRange1d keeps a range set so, as after a zoom
xr.setv({{start: a, end: Math.min(span_ms, a + width)}});
"""
