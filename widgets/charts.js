// aonkit's canvas charts: an anywidget ES module (loaded inline by aonkit.widgets.charts.Charts; no network).
//
// Why: in JupyterLab a BokehJS figure's redraw after new data took 60-120 ms on a 2-CPU machine (its layout
// pass and CSS reads restyle the whole page; bench/RESULTS.md, sessions 30-32), over the model panels' 100 ms
// budget. These charts draw lines, points, bars, spans and text on one <canvas> per chart and touch no other
// element when data changes, so a redraw costs what the canvas calls cost.
//
// Model state (set from Python):
//   spec: {charts: [chart, ...], columns: n}: static; chart = {title, width, height, x: axis, y: axis,
//         marks: [mark, ...], legend: {location: "right"|"top_left", items: [{label, color, dash}]}, hover}
//         axis = {type: "linear"|"log"|"factor", label, start, end, factors}
//   data: {source name: {column: [values]}}: numbers, strings, or null (missing: a gap in a line).
// After each draw the element gets `data-drawn` (a count) and an "aon-drawn" event whose detail is the draw's ms.

const FONT = "11px system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
const TITLE_FONT = "600 12px system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
const GRID = "#e6e6e6", AXIS = "#444", TEXT = "#333";

const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : NaN);
const col = (data, mark, key) => {
  const name = mark[key];
  if (typeof name !== "string") return null;
  const src = data[mark.source] || {};
  return src[name] || [];
};

// ---- scales and ticks -------------------------------------------------------------------------------------
function extent(chart, data, dim, view) {
  const axis = chart[dim];
  const log = axis.type === "log";
  if (dim === "x" && axis.zoom && view) return view.slice();  // the person's zoom or pan (data units)
  let lo = Infinity, hi = -Infinity;
  const push = (arr, off = 0) => {
    if (!arr) return;
    for (const v of arr) {
      let x = num(v) + off;
      if (Number.isNaN(x)) continue;
      if (log) { if (!(x > 0)) continue; x = Math.log10(x); }
      if (x < lo) lo = x;
      if (x > hi) hi = x;
    }
  };
  for (const m of chart.marks) {
    const k = m.kind;
    if (dim === "x") {
      if (k === "line" || k === "points" || k === "text") push(col(data, m, "x"));
      else if (k === "hbar") { push(col(data, m, "left")); push(col(data, m, "right")); }
      else if (k === "vbar") { push(col(data, m, "x"), -m.width / 2); push(col(data, m, "x"), m.width / 2); }
      else if (k === "segment") { push(col(data, m, "x0")); push(col(data, m, "x1")); }
      else if (k === "vspan") push(col(data, m, "x"));
    } else {
      if (k === "line" || k === "points" || k === "text") push(col(data, m, "y"));
      else if (k === "vbar") { push(col(data, m, "bottom")); push(col(data, m, "top")); }
      else if (k === "segment") { push(col(data, m, "y0")); push(col(data, m, "y1")); }
      else if (k === "hspan") push(col(data, m, "y"));
    }
  }
  if (lo > hi) { lo = 0; hi = 1; }
  if (hi === lo) { lo -= log ? 0.5 : Math.abs(lo) * 0.1 || 1; hi += log ? 0.5 : Math.abs(hi) * 0.1 || 1; }
  const pad = (hi - lo) * (axis.type === "time" ? 0 : 0.05);
  const fixedLo = typeof axis.start === "number", fixedHi = typeof axis.end === "number";
  lo = fixedLo ? (log ? Math.log10(axis.start) : axis.start) : lo - pad;
  hi = fixedHi ? (log ? Math.log10(axis.end) : axis.end) : hi + pad;
  if (!(hi > lo)) hi = lo + 1;
  return [lo, hi];  // in log10 units on a log axis
}

function niceStep(span, n) {
  const raw = span / Math.max(1, n);
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function ticks(axis, lo, hi) {
  if (axis.type === "log") {
    const a = Math.ceil(lo - 1e-9), b = Math.floor(hi + 1e-9);
    const decades = b - a + 1;
    const out = [];
    if (decades >= 2) {
      const every = Math.max(1, Math.ceil(decades / 6));
      for (let k = a; k <= b; k += every) out.push(10 ** k);
      if (decades <= 2) for (let k = a - 1; k <= b; k++) for (const m of [2, 5]) {
        const v = m * 10 ** k; if (Math.log10(v) >= lo && Math.log10(v) <= hi) out.push(v);
      }
      return out.sort((x, y) => x - y);
    }
    // less than two decades: 1-2-5 steps, or linear ones inside the range
    for (let k = Math.floor(lo) - 1; k <= Math.ceil(hi); k++) for (const m of [1, 2, 5]) {
      const v = m * 10 ** k; if (Math.log10(v) >= lo && Math.log10(v) <= hi) out.push(v);
    }
    if (out.length >= 3) return out;
    const step = niceStep(10 ** hi - 10 ** lo, 5);
    const res = [];
    for (let v = Math.ceil(10 ** lo / step) * step; v <= 10 ** hi * (1 + 1e-9); v += step) res.push(v);
    return res;
  }
  const step = axis.type === "time" ? timeStep(hi - lo, 5) : niceStep(hi - lo, 5);
  const out = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

// steps of a time axis (ms): whole seconds, minutes and hours where they fit
const TIME_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3,
                    900e3, 1800e3, 3600e3, 7200e3, 10800e3, 21600e3, 43200e3, 86400e3];
function timeStep(span, n) {
  for (const s of TIME_STEPS) if (span / s <= n) return s;
  return niceStep(span, n);
}

const pad2 = (x) => String(x).padStart(2, "0");
function fmtTime(v, step) {  // UTC, as the samples' clock (ms since the epoch)
  const d = new Date(v);
  let t = `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}`;
  if (step < 60e3) t += `:${pad2(d.getUTCSeconds())}`;
  if (step < 1e3) t += "." + String(d.getUTCMilliseconds()).padStart(3, "0").slice(0, step < 10 ? 3 : step < 100 ? 2 : 1);
  if (step >= 86400e3) t = `${d.getUTCFullYear()}-${pad2(d.getUTCMonth() + 1)}-${pad2(d.getUTCDate())}`;
  return t;
}

function fmtBytes(v) {
  const a = Math.abs(v);
  if (a < 1024) return fmt(v) + " B";
  const e = Math.min(5, Math.floor(Math.log2(a) / 10));
  return String(Number((v / 2 ** (10 * e)).toPrecision(3))) + " " + ["B", "KiB", "MiB", "GiB", "TiB", "PiB"][e];
}

function labels(axis, values) {
  if (axis.type === "factor") return axis.factors.map(String);
  if (axis.type === "time") {
    const step = values.length > 1 ? values[1] - values[0] : 1e3;
    return values.map((v) => fmtTime(v, step));
  }
  return values.map(axis.format === "bytes" ? fmtBytes : fmt);
}

function fmt(v) {
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a < 1e-3 || a >= 1e15) {
    const e = Math.floor(Math.log10(a)), m = v / 10 ** e;
    return (Math.abs(m - Math.round(m)) < 1e-9 ? String(Math.round(m)) : m.toPrecision(2)) + "e" + e;
  }
  if (a >= 1e4) {  // 10k, 2.5M, 1G, 100T
    const e = Math.floor(Math.log10(a) / 3 + 1e-12);
    return String(Number((v / 10 ** (3 * e)).toPrecision(3))) + " kMGT"[e];
  }
  return String(Number(v.toPrecision(4)));
}

function scale(axis, lo, hi, p0, p1) {
  if (axis.type === "factor") {
    const f = axis.factors, n = f.length, idx = new Map(f.map((x, i) => [x, i]));
    const band = (p1 - p0) / n;
    const s = (v) => (idx.has(v) ? p0 + band * (idx.get(v) + 0.5) : NaN);
    s.band = band;
    return s;
  }
  const log = axis.type === "log";
  const k = (p1 - p0) / (hi - lo);
  const s = (v) => { const x = num(v); if (log) return x > 0 ? p0 + (Math.log10(x) - lo) * k : NaN; return p0 + (x - lo) * k; };
  s.invert = (p) => { const x = lo + (p - p0) / k; return log ? 10 ** x : x; };
  return s;
}

// ---- one chart ---------------------------------------------------------------------------------------------
function layout(chart, ctx, data, view) {
  ctx.font = FONT;
  const xr = chart.x.type === "factor" ? [0, 1] : extent(chart, data, "x", view);
  const yr = chart.y.type === "factor" ? [0, 1] : extent(chart, data, "y");
  const yt = chart.y.type === "factor" ? [] : ticks(chart.y, ...yr);
  const xt = chart.x.type === "factor" ? [] : ticks(chart.x, ...xr);
  const ylabels = labels(chart.y, yt), xlabels = labels(chart.x, xt);
  const yw = Math.max(0, ...ylabels.map((t) => ctx.measureText(t).width));
  const legend = chart.legend && chart.legend.items && chart.legend.items.length ? chart.legend : null;
  let legendW = 0;
  if (legend) legendW = Math.max(...legend.items.map((it) => ctx.measureText(it.label).width)) + 34;
  const left = 10 + (chart.y.label ? 16 : 0) + yw + 6;
  const right = legend && legend.location === "right" ? legendW + 12 : 14;
  const top = chart.title ? 26 : 10;
  const bottom = (chart.x.hidden ? 8 : 22) + (chart.x.label ? 16 : 0);
  const f = {x0: left, x1: chart.width - right, y0: top, y1: chart.height - bottom};
  return {f, xr, yr, xt, yt, ylabels, xlabels, legend, legendW,
          sx: scale(chart.x, ...xr, f.x0, f.x1), sy: scale(chart.y, ...yr, f.y1, f.y0)};
}

function colorOf(m, data, i) {
  const c = m.color_field ? (col(data, m, "color_field") || [])[i] : null;
  return c || m.color || "#1f77b4";
}

function drawMarks(ctx, chart, data, L) {
  const {sx, sy, f} = L;
  ctx.save();
  ctx.beginPath();
  ctx.rect(f.x0, f.y0, f.x1 - f.x0, f.y1 - f.y0);
  ctx.clip();
  for (const m of chart.marks) {
    ctx.globalAlpha = m.alpha ?? 1;
    ctx.setLineDash(m.dash || []);
    ctx.lineWidth = m.line_width ?? 1;
    if (m.kind === "line") {
      const xs = col(data, m, "x") || [], ys = col(data, m, "y") || [];
      ctx.strokeStyle = m.color;
      ctx.beginPath();
      let pen = false;
      for (let i = 0; i < xs.length; i++) {
        const px = sx(xs[i]), py = sy(ys[i]);
        if (Number.isNaN(px) || Number.isNaN(py)) { pen = false; continue; }
        if (pen) ctx.lineTo(px, py); else ctx.moveTo(px, py);
        pen = true;
      }
      ctx.stroke();
    } else if (m.kind === "points") {
      const xs = col(data, m, "x") || [], ys = col(data, m, "y") || [];
      const r = (m.size ?? 4) / 2;
      for (let i = 0; i < xs.length; i++) {
        const px = sx(xs[i]), py = sy(ys[i]);
        if (Number.isNaN(px) || Number.isNaN(py)) continue;
        ctx.fillStyle = colorOf(m, data, i);
        ctx.beginPath();
        if (m.marker === "diamond") { ctx.moveTo(px, py - r); ctx.lineTo(px + r, py); ctx.lineTo(px, py + r); ctx.lineTo(px - r, py); ctx.closePath(); }
        else ctx.arc(px, py, r, 0, 2 * Math.PI);
        ctx.fill();
      }
    } else if (m.kind === "hbar" || m.kind === "vbar") {
      const h = m.kind === "hbar";
      const cs = col(data, m, h ? "y" : "x") || [];
      const a0 = col(data, m, h ? "left" : "bottom") || [], a1 = col(data, m, h ? "right" : "top") || [];
      const rects = [];
      for (let i = 0; i < cs.length; i++) {
        let r;
        if (h) {
          const c = sy(cs[i]), half = (sy.band ?? 20) * (m.height ?? 0.7) / 2, p0 = sx(a0[i]), p1 = sx(a1[i]);
          r = [Math.min(p0, p1), c - half, Math.abs(p1 - p0), 2 * half];
        } else {
          const p0 = sx(num(cs[i]) - m.width / 2), p1 = sx(num(cs[i]) + m.width / 2), q0 = sy(a0[i]), q1 = sy(a1[i]);
          r = [p0, Math.min(q0, q1), p1 - p0, Math.abs(q1 - q0)];
        }
        if (r.some(Number.isNaN)) { rects.push(null); continue; }
        rects.push(r);
        ctx.fillStyle = colorOf(m, data, i);
        ctx.fillRect(...r);
        if (m.line_color && r[2] > 1 && r[3] > 1) { ctx.strokeStyle = m.line_color; ctx.strokeRect(...r); }
      }
      L.rects.push({mark: m, rects});
    } else if (m.kind === "segment") {
      const x0 = col(data, m, "x0") || [], x1 = col(data, m, "x1"), y0 = col(data, m, "y0"), y1 = col(data, m, "y1");
      for (let i = 0; i < x0.length; i++) {
        ctx.strokeStyle = colorOf(m, data, i);
        ctx.beginPath(); ctx.moveTo(sx(x0[i]), sy(y0[i])); ctx.lineTo(sx(x1[i]), sy(y1[i])); ctx.stroke();
      }
    } else if (m.kind === "hspan" || m.kind === "vspan") {
      const vs = col(data, m, m.kind === "hspan" ? "y" : "x") || [];
      ctx.strokeStyle = m.color;
      for (const v of vs) {
        const p = m.kind === "hspan" ? sy(v) : sx(v);
        if (Number.isNaN(p)) continue;
        ctx.beginPath();
        if (m.kind === "hspan") { ctx.moveTo(f.x0, p); ctx.lineTo(f.x1, p); } else { ctx.moveTo(p, f.y0); ctx.lineTo(p, f.y1); }
        ctx.stroke();
      }
    } else if (m.kind === "text") {
      const xs = col(data, m, "x") || [], ys = col(data, m, "y") || [], ts = col(data, m, "text") || [];
      ctx.font = FONT;
      ctx.textBaseline = "top";
      ctx.globalAlpha = 1;
      for (let i = 0; i < xs.length; i++) {
        const px = sx(xs[i]) + (m.dx ?? 0), py = sy(ys[i]) + (m.dy ?? 0);
        if (Number.isNaN(px) || Number.isNaN(py)) continue;
        const t = String(ts[i] ?? ""), tw = ctx.measureText(t).width;
        const x = Math.min(px, f.x1 - tw - 2);
        if (m.background) { ctx.fillStyle = "rgba(255,255,255,0.75)"; ctx.fillRect(x - 2, py - 1, tw + 4, 14); }
        ctx.fillStyle = colorOf(m, data, i);
        ctx.fillText(t, x, py);
      }
    }
  }
  ctx.restore();
}

function drawFrame(ctx, chart, L) {
  const {f, sx, sy, xt, yt, ylabels} = L;
  ctx.font = FONT;
  ctx.lineWidth = 1;
  ctx.setLineDash([]);
  ctx.globalAlpha = 1;
  ctx.strokeStyle = GRID;
  ctx.beginPath();
  for (const v of xt) { const p = Math.round(sx(v)) + 0.5; if (chart.x.grid !== false) { ctx.moveTo(p, f.y0); ctx.lineTo(p, f.y1); } }
  for (const v of yt) { const p = Math.round(sy(v)) + 0.5; ctx.moveTo(f.x0, p); ctx.lineTo(f.x1, p); }
  ctx.stroke();
}

function drawAxes(ctx, chart, L) {
  const {f, sx, sy, xt, yt, ylabels} = L;
  ctx.font = FONT;
  ctx.fillStyle = TEXT;
  ctx.strokeStyle = AXIS;
  ctx.lineWidth = 1;
  ctx.setLineDash([]);
  ctx.globalAlpha = 1;
  ctx.beginPath();
  ctx.moveTo(f.x0 + 0.5, f.y0); ctx.lineTo(f.x0 + 0.5, f.y1 + 0.5);
  if (!chart.x.hidden) ctx.lineTo(f.x1, f.y1 + 0.5);
  ctx.stroke();
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  const yvals = chart.y.type === "factor" ? chart.y.factors : yt;
  yvals.forEach((v, i) => {
    const p = sy(v);
    ctx.beginPath(); ctx.moveTo(f.x0 - 4, p); ctx.lineTo(f.x0, p); ctx.stroke();
    ctx.fillText(ylabels[i], f.x0 - 6, p);
  });
  if (!chart.x.hidden) {
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    xt.forEach((v, i) => {
      const p = sx(v);
      ctx.beginPath(); ctx.moveTo(p, f.y1); ctx.lineTo(p, f.y1 + 4); ctx.stroke();
      ctx.fillText(L.xlabels[i], p, f.y1 + 6);
    });
    if (chart.x.label) ctx.fillText(chart.x.label, (f.x0 + f.x1) / 2, f.y1 + 22);
  }
  if (chart.y.label) {
    ctx.save();
    ctx.translate(12, (f.y0 + f.y1) / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText(chart.y.label, 0, 0);
    ctx.restore();
  }
  if (chart.title) {
    ctx.font = TITLE_FONT;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillText(chart.title, f.x0, 6);
  }
}

function drawLegend(ctx, L) {
  const lg = L.legend;
  if (!lg) return;
  // on the right a legend fits the frame's height (eight GPUs beside a short chart)
  const rowH = lg.location === "right" ? Math.max(9, Math.min(15, (L.f.y1 - L.f.y0 - 14) / lg.items.length)) : 15;
  const w = L.legendW, h = lg.items.length * rowH + 8;
  const x = lg.location === "right" ? L.f.x1 + 10 : L.f.x0 + 8, y = L.f.y0 + 6;
  ctx.font = FONT;
  ctx.globalAlpha = 1;
  ctx.fillStyle = "rgba(255,255,255,0.8)";
  ctx.fillRect(x, y, w, h);
  ctx.strokeStyle = GRID;
  ctx.setLineDash([]);
  ctx.strokeRect(x + 0.5, y + 0.5, w, h);
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  lg.items.forEach((it, i) => {
    const cy = y + 4 + rowH * i + rowH / 2;
    if (it.box) { ctx.fillStyle = it.color; ctx.fillRect(x + 6, cy - 5, 18, 10); }
    else {
      ctx.strokeStyle = it.color; ctx.lineWidth = 2; ctx.setLineDash(it.dash || []);
      ctx.beginPath(); ctx.moveTo(x + 6, cy); ctx.lineTo(x + 24, cy); ctx.stroke(); ctx.setLineDash([]);
    }
    ctx.fillStyle = TEXT;
    ctx.fillText(it.label, x + 28, cy);
  });
}

// ---- hover -------------------------------------------------------------------------------------------------
function show(value) {
  if (typeof value === "number") return Number.isFinite(value) ? fmt(value) : "-";
  return value == null ? "-" : String(value);
}

function hoverLines(chart, data, L, mx, my) {
  const hv = chart.hover;
  if (!hv || mx < L.f.x0 || mx > L.f.x1 || my < L.f.y0 || my > L.f.y1) return null;
  const src = data[hv.source] || {};
  let i = -1;
  if (hv.mode === "bars") {
    for (const {mark, rects} of L.rects) {
      if (mark.source !== hv.source) continue;
      rects.forEach((r, k) => { if (r && mx >= r[0] && mx <= r[0] + r[2] && my >= r[1] && my <= r[1] + r[3]) i = k; });
    }
  } else {  // nearest x ("vline"), or nearest point of the named y columns ("nearest")
    const xs = src[hv.x] || [];
    let best = Infinity;
    for (let k = 0; k < xs.length; k++) {
      const px = L.sx(xs[k]);
      if (Number.isNaN(px)) continue;
      let d = Math.abs(px - mx);
      if (hv.mode === "nearest") {
        d = Infinity;
        for (const yc of hv.y || []) { const py = L.sy((src[yc] || [])[k]); if (!Number.isNaN(py)) d = Math.min(d, Math.hypot(px - mx, py - my)); }
      }
      if (d < best) { best = d; i = k; }
    }
    if (best > (hv.mode === "nearest" ? 20 : 40)) i = -1;
  }
  if (i < 0) return null;
  return hv.fields.map(([label, field, suffix]) => [label, show((src[field] || [])[i]) + (suffix || "")]);
}

// ---- streaming ---------------------------------------------------------------------------------------------
function appendRows(data, name, rows, rollover) {
  // rows appended to source `name` (its columns copied first: the model's own arrays stay as they came)
  const src = data[name] = {...(data[name] || {})};
  for (const [k, v] of Object.entries(rows)) {
    const cur = src[k] ? Array.from(src[k]) : [];
    for (const x of v) cur.push(x);
    src[k] = rollover > 0 && cur.length > rollover ? cur.slice(cur.length - rollover) : cur;
  }
  return data;
}

// ---- the widget ----------------------------------------------------------------------------------------------
function render({model, el}) {
  const root = document.createElement("div");
  root.className = "aon-charts";
  el.appendChild(root);
  const tip = document.createElement("div");
  tip.className = "aon-charts-tip";
  tip.style.display = "none";
  root.appendChild(tip);
  let charts = [];
  let drawn = 0;
  let data = {...(model.get("data") || {})};
  let view = null;  // the zoomed or panned x range of the charts whose x axis has `zoom` (null: follow the data)
  let frame = 0;

  function build() {
    for (const c of charts) { if (seen) seen.unobserve(c.canvas); c.canvas.remove(); }
    const spec = model.get("spec") || {charts: []};
    root.style.gridTemplateColumns = `repeat(${spec.columns || spec.charts.length || 1}, max-content)`;
    const dpr = window.devicePixelRatio || 1;
    charts = spec.charts.map((chart) => {
      const canvas = document.createElement("canvas");
      canvas.width = Math.round(chart.width * dpr);
      canvas.height = Math.round(chart.height * dpr);
      canvas.style.width = chart.width + "px";
      canvas.style.height = chart.height + "px";
      canvas.setAttribute("role", "img");
      canvas.setAttribute("aria-label", chart.title || "chart");
      root.insertBefore(canvas, tip);
      const c = {chart, canvas, ctx: canvas.getContext("2d"), dpr, L: null, visible: true, dirty: false};
      if (seen) seen.observe(canvas);
      canvas.addEventListener("mousemove", (ev) => hover(c, ev));
      canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
      if (chart.x.zoom) zoomable(c);
      return c;
    });
  }

  function drawOne(c) {
    const {ctx, chart, dpr} = c;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, chart.width, chart.height);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, chart.width, chart.height);
    const L = layout(chart, ctx, data, view);
    L.rects = [];
    drawFrame(ctx, chart, L);
    drawMarks(ctx, chart, data, L);
    drawAxes(ctx, chart, L);
    drawLegend(ctx, L);
    c.L = L;
    c.dirty = false;
    el.dataset.xmax = String(L.xr[1]);  // e.g. the newest sample drawn
  }

  function draw() {
    // a chart scrolled out of sight is drawn when it comes back (a monitor of eight GPUs has 34 charts)
    const t0 = performance.now();
    for (const c of charts) {
      if (c.visible) drawOne(c);
      else c.dirty = true;
    }
    drawn += 1;
    el.dataset.drawn = String(drawn);
    el.dispatchEvent(new CustomEvent("aon-drawn", {detail: performance.now() - t0}));
  }

  const seen = typeof IntersectionObserver === "function" ? new IntersectionObserver((entries) => {
    for (const e of entries) {
      const c = charts.find((x) => x.canvas === e.target);
      if (!c) continue;
      c.visible = e.isIntersecting;
      if (c.visible && c.dirty) drawOne(c);
    }
  }) : null;

  function setView(v) {
    view = v;
    el.dataset.view = v ? v.join(",") : "";  // what the person zoomed to (empty: following the data)
    later();
  }

  function later() {  // one draw at the next frame for everything that arrived before it (none while hidden)
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; draw(); });
  }

  function zoomable(c) {
    // ctrl (or a trackpad's pinch) + wheel zooms the time axis around the pointer, a drag pans it, a double click
    // follows the data again; the plain wheel scrolls the page
    c.canvas.addEventListener("wheel", (ev) => {
      if (!(ev.ctrlKey || ev.metaKey) || !c.L) return;
      ev.preventDefault();
      const [lo, hi] = view || c.L.xr;
      const at = c.L.sx.invert(ev.offsetX);
      const k = ev.deltaY > 0 ? 1.25 : 0.8;
      setView([at - (at - lo) * k, at + (hi - at) * k]);
    }, {passive: false});
    let dragFrom = null;
    c.canvas.addEventListener("mousedown", (ev) => { if (c.L) dragFrom = [ev.clientX, (view || c.L.xr).slice()]; });
    window.addEventListener("mouseup", () => { dragFrom = null; });
    c.canvas.addEventListener("mousemove", (ev) => {
      if (!dragFrom || !c.L) return;
      const [x0, [lo, hi]] = dragFrom;
      const d = (ev.clientX - x0) * (hi - lo) / (c.L.f.x1 - c.L.f.x0);
      setView([lo - d, hi - d]);
    });
    c.canvas.addEventListener("dblclick", () => setView(null));
  }

  function hover(c, ev) {
    if (!c.L) return;
    const r = c.canvas.getBoundingClientRect();
    const lines = hoverLines(c.chart, data, c.L, ev.clientX - r.left, ev.clientY - r.top);
    if (!lines) { tip.style.display = "none"; return; }
    tip.replaceChildren(...lines.map(([k, v]) => {
      const d = document.createElement("div");
      const b = document.createElement("b");
      b.textContent = k ? k + ": " : "";
      d.append(b, document.createTextNode(v));  // text nodes: labels are data, never HTML
      return d;
    }));
    tip.style.display = "block";
    const rr = root.getBoundingClientRect();
    tip.style.left = ev.clientX - rr.left + 12 + "px";
    tip.style.top = ev.clientY - rr.top + 12 + "px";
  }

  const onSpec = () => { build(); draw(); };
  const onData = () => { data = {...(model.get("data") || {})}; draw(); };
  const onMsg = (msg) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.kind === "stream") { appendRows(data, msg.source, msg.rows, msg.rollover); later(); }
    else if (msg.kind === "reset") { data = {...data, ...msg.data}; later(); }
  };
  build();
  draw();
  model.on("change:spec", onSpec);
  model.on("change:data", onData);
  model.on("msg:custom", onMsg);
  model.send({kind: "snapshot"});  // rows streamed before this view existed (a reload, a second view)
  return () => {
    model.off("change:spec", onSpec); model.off("change:data", onData); model.off("msg:custom", onMsg);
    if (frame) cancelAnimationFrame(frame);
    if (seen) seen.disconnect();
  };
}

export default {render};
export const parts = {fmt, fmtTime, fmtBytes, ticks, labels, extent, niceStep, scale, layout, hoverLines, appendRows};  // for tests
