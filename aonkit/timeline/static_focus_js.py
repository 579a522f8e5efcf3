"""The report focus's JavaScript (:mod:`aonkit.timeline.static_focus`): fixed text; the trace reaches it as data.

:data:`FOCUS_JS` args: ``pickers`` (the tables' sources) and ``columns`` (their name columns), ``names`` and
``boxes`` (:func:`~aonkit.timeline.static_focus.focus_data` as sources), ``drawn`` (the quads drawn), ``current``
(the box a step showed: its quad, ``box``, ``count``, ``rank`` of ``of`` the picks' boxes, and ``gpu``: a box of
the GPU work they launched), ``bar`` (a text Div),
``hint`` (the bar's text with no pick), ``shade`` (the veil over the rest),
``xr`` and ``plot`` (the timeline's x range, ms, and figure), the numbers ``unit_ms``, ``width_px``, ``pad`` and
``coarse_ns`` (the stored unit when the budget made it coarser than the deepest level's pixel, else 0) and ``off``
(why no name has boxes, or ""). :data:`STEP_JS` (``direction`` +1 or -1) and :data:`LONGEST_JS` take ``pickers``,
``columns``, ``names``, ``boxes``, ``current``, ``xr``, ``unit_ms``, ``pad``, ``span_ms`` and ``gpu``. A step goes
through the boxes that hold picked events (with ``gpu``: those that hold GPU work they launched), in time (their
middles, then their rows), from the current box while it is in view, else from the view's middle, and round past
either end; it shows the box as the notebook's N/P (Shift+N/P) show an event (``Focus.window_for`` of
:mod:`aonkit.timeline.focus`). "longest" shows the box that holds the longest event.
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
if (cb_obj !== xr && current.data.box.length) {  // the picks changed: no current box
  current.data = {left: [], right: [], top: [], bottom: [], box: [], count: [], rank: [], of: [], gpu: []};
}
const set = (model, key, value) => { if (model[key] !== value) model[key] = value; };  // a change re-renders
set(view_box, "left", xr.start);
set(view_box, "right", xr.end);
if (!rows.length) {
  if (drawn.data.left.length) drawn.data = {left: [], right: [], top: [], bottom: [], count: []};
  if (strip.data.left.length) strip.data = {left: [], right: [], top: [], count: []};
  set(bar, "text", !picked.size ? hint : off ? off : "no event of the picked names is on the timeline");
  set(shade, "visible", false);
  return;
}
if (cb_obj !== xr || !strip.data.left.length) {  // the picks changed: where they start over the whole trace
  const per = new Array(bins).fill(0), w = span_ms / bins, Q = boxes.data.q0, K0 = boxes.data.count;
  for (const r of rows) {
    for (let k = N.start[r]; k < N.stop[r]; k++) {
      if (K0[k] > 0) per[Math.min(bins - 1, Math.floor(Q[k] * unit_ms / w))] += K0[k];
    }
  }
  const most = Math.max(...per), SL = [], SR = [], ST = [], SC = [];
  for (let b = 0; b < bins; b++) {
    if (per[b]) { SL.push(b * w); SR.push((b + 1) * w); ST.push(0.2 + 0.8 * per[b] / most); SC.push(per[b]); }
  }
  strip.data = {left: SL, right: SR, top: ST, count: SC};
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
const many = (k, what) => k.toLocaleString("en-US") + " " + what + (k === 1 ? "" : "s");
let text = label + ": " + many(n, "event") + ", " + fmtNs(busy)
  + (n === 1 ? "" : " in all, mean " + fmtNs(busy / n) + ", longest " + fmtNs(most));
if (ln) text += "; " + (n === 1 ? "it" : "they") + " launched " + many(ln, "GPU event") + ", " + fmtNs(lns);
text += " · about " + inView.toLocaleString("en-US") + " in view";
if (coarse_ns > 0) text += " (outlined to within " + fmtNs(coarse_ns) + ")";
const cur = current.data;
if (cur.box.length && cur.right[0] > lo && cur.left[0] < hi) {
  const what = cur.gpu[0] ? "GPU events" : "events";
  text += (cur.gpu[0] ? " · their GPU work at " : " · at ") + cur.rank[0] + " of " + cur.of[0];
  if (cur.count[0] > 1) text += " (" + cur.count[0] + " " + what + " in one box)";
}
set(bar, "text", text);
set(shade, "visible", true);
"""

_CENTRE = """
const centre = (x, width) => {  // the view made ``width`` wide around ``x`` (ms), kept inside the trace
  const a = Math.max(0, Math.min(x - width / 2, span_ms - width)), b = Math.min(span_ms, a + width);
  xr.have_updated_interactively = true;  // a DataRange1d keeps a range set so, as after a zoom
  if (xr.start === a && xr.end === b) xr.properties.start.change.emit();  // the same view: the bar follows all the same
  else xr.setv({start: a, end: b});
};
"""

_SHOW = _CENTRE + f"""
const B = boxes.data, q0 = B.q0, q1 = B.q1, S = B.slot, C = B.count, own = gpu ? B.launched : C;
const named = [];  // the boxes a step goes through: of the picked events, or (gpu) of the GPU work they launched
for (const r of rows) for (let k = N.start[r]; k < N.stop[r]; k++) if (own[k] > 0) named.push(k);
const mid = (k) => (q0[k] + q1[k]) / 2;
const before = (a, b) => mid(a) < mid(b) || (mid(a) === mid(b) && S[a] < S[b]);
const show = (k) => {{  // k becomes the current box: outlined, and the view made to show it
  let rank = 1;
  for (const j of named) if (before(j, k)) rank++;
  const t0 = q0[k] * unit_ms, t1 = q1[k] * unit_ms, dur = t1 - t0;
  current.data = {{left: [t0], right: [t1], top: [S[k] + pad], bottom: [S[k] + 1 - pad], box: [k],
                   count: [own[k]], rank: [rank], of: [named.length], gpu: [gpu]}};
  centre((t0 + t1) / 2, Math.max(Math.min(xr.end - xr.start, dur / {STEP_FILL[0]}), dur / {STEP_FILL[1]},
                                  {STEP_MIN_NS / 1e6}));
}};
"""

STEP_JS = _PICKED + _SHOW + """
if (!named.length) return;
const cur = current.data.box.length ? current.data.box[0] : -1;
const lo = xr.start / unit_ms, hi = xr.end / unit_ms;
let best = -1;
if (cur >= 0 && named.includes(cur) && q1[cur] > lo && q0[cur] < hi) {  // from the current box while it is in view
  for (const k of named) {
    const past = direction > 0 ? before(cur, k) : before(k, cur);
    if (past && (best < 0 || (direction > 0 ? before(k, best) : before(best, k)))) best = k;
  }
} else {  // else from the view's centre
  const c = (lo + hi) / 2;
  for (const k of named) {
    const past = direction > 0 ? mid(k) > c : mid(k) < c;
    if (past && (best < 0 || (direction > 0 ? before(k, best) : before(best, k)))) best = k;
  }
}
if (best < 0) {  // past either end: round to the other
  best = named[0];
  for (const k of named) if (direction > 0 ? before(k, best) : before(best, k)) best = k;
}
show(best);
"""

LONGEST_JS = _PICKED + _SHOW + """
if (!named.length) return;
let r = rows[0];
for (const x of rows) if (N.max_ns[x] > N.max_ns[r]) r = x;
const t0 = N.longest_x0[r] / unit_ms, t1 = N.longest_x1[r] / unit_ms;
let best = named[0];
for (let k = N.start[r]; k < N.stop[r]; k++) {  // the box that holds the longest event
  if (C[k] > 0 && S[k] === N.longest_slot[r] && q0[k] <= t0 + 1e-6 && q1[k] >= t1 - 1e-6) { best = k; break; }
}
show(best);
"""

CENTRE_JS = _CENTRE + """
centre(cb_obj.x, xr.end - xr.start);
"""
"""A click on the strip (``cb_obj.x``, ms): the view centred there, as wide as it was (args ``xr``, ``span_ms``)."""
