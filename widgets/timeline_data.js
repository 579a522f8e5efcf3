// aonkit's canvas timeline, part 2 of 3 (after charts_axes.js, before timeline.js): a window's glyphs as typed
// columns, what lies under the pointer, the hover text and the names on wide bars. No DOM here: node tests it.
//
// A "tiles" message (aonkit.widgets.timeline) carries the columns of aonkit.timeline.canvas_data.canvas_frame as
// little-endian buffers: per glyph x0, x1 (ms since the trace's origin), slot, count (1: an event; more: a bin of
// short events, the longest one's details), busy_ns, dur_ns, correlation, row, name, cat, color (codes into the
// message's tables), stack (a node of the window's stack tree: anc_parent, anc_name), and
// the boxes of a GPU glyph's launching op and launch call (op_x0, op_x1, op_slot, launch_...; NaN for none).
// With a focus (aonkit.timeline.focus) the message's focus is {n, busy_ns, names, missing, stats} and its columns
// add the focused events' boxes merged per pixel (f_x0, f_x1, f_slot, f_count) and where they are over the whole
// trace (f_overview: counts per part); a step's message names its event (select: a row) and place (in time order;
// launched: among the GPU work the focused events launched).

const SEP = " > ";

function fmtNs(ns) {  // as aonkit.units.fmt_ns: 3 significant digits in s, ms, us, whole ns below
  for (const [unit, k] of [["s", 1e9], ["ms", 1e6], ["us", 1e3]]) {
    if (Math.abs(ns) >= k) return gFormat(ns / k) + " " + unit;
  }
  return Math.round(ns).toFixed(0) + " ns";
}

function gFormat(v) {
  // Python's "{:.3g}" for 1 <= |v| < 10000 (what fmtNs passes). toPrecision rounds a tie up, Python to even: a
  // tie is a double whose exact digits after the third are 5 then zeros (toPrecision(60) shows them all)
  const a = Math.abs(v), e = Math.floor(Math.log10(a));
  const digits = a.toPrecision(60).replace(".", "").replace(/^0+/, "");
  let r = v;
  if (/^\d\d[02468]50*$/.test(digits)) r = v - Math.sign(v) * 0.5 * 10 ** (e - 2);  // to the even neighbour below
  const s = r.toPrecision(3);
  if (s.includes("e")) { const [m, x] = s.split("e"); return String(Number(m)) + "e" + (x[0] === "-" ? "-" : "+") + x.replace(/^[+-]/, "").padStart(2, "0"); }
  return String(Number(s));
}

function column(buffers, spec) {
  const [dtype, i] = spec;
  let b = buffers[i];
  if (b instanceof DataView || ArrayBuffer.isView(b)) b = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
  return dtype === "f8" ? new Float64Array(b) : new Int32Array(b);
}

function decode(msg, buffers) {
  // the message's columns as typed arrays, plus the per-slot index hit tests use
  const cols = {};
  for (const [name, spec] of Object.entries(msg.columns)) cols[name] = column(buffers, spec);
  const d = {seq: msg.seq, window: msg.window, px: msg.px, n: msg.n, cols, names: msg.tables.names,
             cats: msg.tables.cats, colors: msg.tables.colors, counters: []};
  for (const [xs, vs] of msg.counters || []) d.counters.push({x: column(buffers, xs), v: column(buffers, vs)});
  d.bySlot = bySlot(cols.slot, cols.x0, d.n);
  d.order = drawOrder(cols, d.n);
  d.focus = msg.focus && cols.f_x0 ? {...msg.focus, x0: cols.f_x0, x1: cols.f_x1, slot: cols.f_slot,
                                      count: cols.f_count, overview: cols.f_overview} : null;
  d.select = typeof msg.select === "number" ? msg.select : -1;
  d.place = typeof msg.place === "number" ? msg.place : -1;
  d.launched = msg.launched === true;  // the place is among the GPU work the focused events launched
  return d;
}

function bySlot(slot, x0, n) {
  // per slot, its glyphs in order of x0 (what a binary search needs)
  const out = new Map();
  for (let i = 0; i < n; i++) {
    let a = out.get(slot[i]);
    if (!a) out.set(slot[i], a = []);
    a.push(i);
  }
  for (const a of out.values()) {
    let sorted = true;
    for (let k = 1; k < a.length; k++) if (x0[a[k]] < x0[a[k - 1]]) { sorted = false; break; }
    if (!sorted) a.sort((p, q) => x0[p] - x0[q]);
  }
  return out;
}

function drawOrder(cols, n) {
  // bins first (light, under), then events; each run of one colour drawn with one fill
  const idx = Array.from({length: n}, (_, i) => i);
  const key = (i) => (cols.count[i] === 1 ? 1 << 20 : 0) + cols.color[i];
  idx.sort((p, q) => key(p) - key(q) || p - q);
  return Int32Array.from(idx);
}

function hit(d, slot, t, tol) {
  // the glyph of `slot` under time t (ms), within tol ms; an event before a bin; -1 for none
  const a = d && d.bySlot.get(slot);
  if (!a) return -1;
  const {x0, x1, count} = d.cols;
  let lo = 0, hi = a.length;  // first glyph with x0 > t + tol
  while (lo < hi) { const m = (lo + hi) >> 1; if (x0[a[m]] > t + tol) hi = m; else lo = m + 1; }
  let best = -1, bestDist = Infinity;
  for (let k = lo - 1; k >= 0 && k >= lo - 64; k--) {
    const i = a[k];
    if (x1[i] < t - tol) continue;
    const dist = t < x0[i] ? x0[i] - t : t > x1[i] ? t - x1[i] : 0;
    const better = dist < bestDist || (dist === bestDist && count[i] === 1 && (best < 0 || count[best] !== 1));
    if (better) { best = i; bestDist = dist; }
  }
  return best;
}

function stackText(d, i) {
  // the CPU op stack of glyph i, outermost first (walking the stack tree from its node)
  const out = [];
  for (let k = d.cols.stack[i], guard = 0; k >= 0 && guard < 10000; k = d.cols.anc_parent[k], guard++) {
    out.push(d.names[d.cols.anc_name[k]]);
  }
  return out.reverse().join(SEP);
}

function tipLines(d, i) {
  // hover read-out of glyph i: [label, text] pairs (text nodes in the page: never HTML)
  const c = d.cols, name = d.names[c.name[i]], cat = d.cats[c.cat[i]];
  const dur = c.dur_ns[i] >= 0 ? fmtNs(c.dur_ns[i]) : "instant";
  const stack = stackText(d, i);
  if (c.count[i] === 1) {
    const out = [["", name], ["category", cat], ["duration", dur]];
    if (stack) out.push(["op stack", stack]);
    if (!Number.isNaN(c.launch_x0[i])) {  // a GPU glyph: from its launch call's start to its own
      out.push(["launched", fmtNs(Math.round((c.x0[i] - c.launch_x0[i]) * 1e6)) + " before it started"]);
    }
    if (c.correlation[i] >= 0) out.push(["correlation", String(c.correlation[i])]);
    return out;
  }
  const out = [["events", `${c.count[i].toLocaleString("en-US")} in this pixel, busy ${fmtNs(c.busy_ns[i])}`],
               ["longest", name], ["category", cat], ["its duration", dur]];
  if (stack) out.push(["op stack", stack]);
  return out;
}

function barLabels(d, lo, hi, pxPerMs, rule) {
  // names on event bars wide enough for rule.min_chars characters, cut to the visible part: [x ms, slot, text]
  // (rule: {min_chars, char_px, max_labels}, the bokeh timelines' own, from geometry.labels)
  const out = [];
  if (!d) return out;
  const {x0, x1, count, slot, name} = d.cols;
  for (let i = 0; i < d.n && out.length < rule.max_labels; i++) {
    if (count[i] !== 1) continue;
    const a = Math.max(x0[i], lo), b = Math.min(x1[i], hi);
    const k = Math.floor(((b - a) * pxPerMs - 4) / rule.char_px);
    if (k < rule.min_chars) continue;
    const s = d.names[name[i]];
    out.push([a, slot[i], s.length <= k ? s : s.slice(0, k - 1) + "\u2026"]);
  }
  return out;
}

function highlightBoxes(d, i) {
  // the launching op's and the launch call's boxes of glyph i: [x0, x1, slot, target]
  const out = [];
  if (!d || i < 0) return out;
  for (const t of ["op", "launch"]) {
    const a = d.cols[t + "_x0"][i];
    if (Number.isNaN(a)) continue;
    out.push([a, d.cols[t + "_x1"][i], d.cols[t + "_slot"][i], t]);
  }
  return out;
}

function matcher(text) {
  // what the find box asks for: a case-insensitive substring, or /regex/ (flags after it); null for nothing or a
  // regex that does not compile (the box then says so)
  const t = (text || "").trim();
  if (!t) return null;
  const m = /^\/(.+)\/([a-z]*)$/.exec(t);
  if (m) {
    try { const re = new RegExp(m[1], m[2].includes("i") ? m[2] : m[2] + "i"); return (s) => re.test(s); }
    catch (e) { return undefined; }
  }
  const low = t.toLowerCase();
  return (s) => s.toLowerCase().includes(low);
}

function matches(d, test) {
  // per glyph: 1 when its name (a bin's: its longest event's) passes the test; each distinct name tested once
  const hitName = Uint8Array.from(d.names, (s) => (test(s) ? 1 : 0));
  const out = new Uint8Array(d.n);
  for (let i = 0; i < d.n; i++) out[i] = hitName[d.cols.name[i]];
  return out;
}

function clampView(lo, hi, span, minWidth) {
  // a view inside [0, span], at least minWidth wide, keeping its width when it is pushed back in
  let w = Math.min(Math.max(hi - lo, minWidth), span);
  if (lo < 0) lo = 0;
  if (lo + w > span) lo = span - w;
  return [Math.max(lo, 0), Math.max(lo, 0) + w];
}
