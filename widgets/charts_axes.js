// aonkit's canvas charts, part 1 of 3: values, ranges, ticks and their labels, and the hover read-out's lines
// (also part 1 of the canvas timeline, widgets/timeline.js).
// The three parts (charts_axes.js, charts_draw.js, charts.js) are joined in that order into one ES module by
// aonkit.widgets.charts (anywidget loads a module from a string, so it cannot import its neighbours).

const FONT = "11px system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
const TITLE_FONT = "600 12px system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
const LIGHT = {bg: "#ffffff", text: "#333333", axis: "#444444", grid: "#e6e6e6"};

function palette(el) {
  // JupyterLab's theme (light or dark) where its variables are set, else LIGHT; read once per view
  const css = getComputedStyle(el);
  const v = (name) => css.getPropertyValue(name).trim();
  const bg = v("--jp-layout-color0");
  if (!bg) return LIGHT;
  return {bg, text: v("--jp-ui-font-color1") || LIGHT.text, axis: v("--jp-ui-font-color2") || LIGHT.axis,
          grid: v("--jp-border-color2") || LIGHT.grid};
}

function fillTip(tip, lines) {
  // a hover read-out, one line per [label, text]: text nodes only (labels and names are data, never HTML)
  tip.replaceChildren(...lines.map(([k, v]) => {
    const d = document.createElement("div");
    const b = document.createElement("b");
    b.textContent = k ? k + ": " : "";
    d.append(b, document.createTextNode(v));
    return d;
  }));
  tip.style.display = "block";
}

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
  let step = axis.type === "time" ? timeStep(hi - lo, 5) : niceStep(hi - lo, 5);
  if (axis.format === "bytes") {  // steps of whole KiB, MiB, GiB...: 2 GiB, 4 GiB, not 1.86 GiB, 3.73 GiB
    const unit = 1024 ** Math.max(0, Math.floor(Math.log2(Math.max(Math.abs(lo), Math.abs(hi), 1)) / 10));
    step = niceStep((hi - lo) / unit, 5) * unit;
  }
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

