// aonkit's canvas charts: an anywidget ES module (loaded inline by aonkit.widgets.charts.Charts; no network).
//
// Why: in JupyterLab a BokehJS figure's redraw after new data took 60-180 ms on a 2-CPU machine (its layout
// pass and CSS reads restyle the whole page; bench/RESULTS.md, sessions 30-33), and a live monitor of eight GPUs
// saturated the page. These charts draw lines, points, bars, spans and text on one <canvas> per chart and touch
// no other element when data change, so a redraw costs what the canvas calls cost.
//
// Model state (set from Python):
//   spec: {charts: [chart, ...], columns: n}: static; chart = {title, width, height, x: axis, y: axis,
//         marks: [mark, ...], legend: {location: "right"|"top_left", items: [{label, color, dash, box}]}, hover}
//         axis = {type: "linear"|"log"|"factor"|"time", label, start, end, factors, format: "bytes", zoom, hidden}
//   data: {source name: {column: [values]}}: numbers, strings, or null (missing: a gap in a line).
// Messages: from Python {kind: "stream", source, rows, rollover} (rows appended, the last `rollover` kept) and
// {kind: "reset", data}; to Python {kind: "snapshot"} when a view starts (the rows streamed before it).
// After each draw the element gets `data-drawn` (a count) and an "aon-drawn" event whose detail is the draw's ms.
//
// Part 3 of 3 (after charts_axes.js and charts_draw.js, joined by aonkit.widgets.charts): streaming and the widget.

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
  let pal = LIGHT;

  function build() {
    for (const c of charts) { if (seen) seen.unobserve(c.canvas); c.canvas.remove(); }
    const spec = model.get("spec") || {charts: []};
    pal = palette(el);
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
    ctx.fillStyle = pal.bg;
    ctx.fillRect(0, 0, chart.width, chart.height);
    const L = layout(chart, ctx, data, view);
    L.rects = [];
    L.pal = pal;
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
    fillTip(tip, lines);
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
  // JupyterLab marks its theme on <body> (data-jp-theme-name): a new theme redraws with its colours
  const themed = typeof MutationObserver === "function" && document.body ? new MutationObserver(() => {
    pal = palette(el);
    draw();
  }) : null;
  if (themed) themed.observe(document.body, {attributes: true, attributeFilter: ["data-jp-theme-name"]});
  model.on("change:spec", onSpec);
  model.on("change:data", onData);
  model.on("msg:custom", onMsg);
  model.send({kind: "snapshot"});  // rows streamed before this view existed (a reload, a second view)
  return () => {
    model.off("change:spec", onSpec); model.off("change:data", onData); model.off("msg:custom", onMsg);
    if (frame) cancelAnimationFrame(frame);
    if (seen) seen.disconnect();
    if (themed) themed.disconnect();
  };
}

export default {render};
export const parts = {fmt, fmtTime, fmtBytes, ticks, labels, extent, niceStep, scale, layout, hoverLines, appendRows};  // for tests
