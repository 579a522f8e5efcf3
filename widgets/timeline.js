// aonkit's canvas timeline: an anywidget ES module (loaded inline by aonkit.widgets.timeline; no network).
//
// Why: the bokeh timeline of a dashboard showed a zoom's new glyphs 255-263 ms after it on a 2-CPU machine:
// BokehJS's repaint (110 ms), its CSS reads restyling JupyterLab's page, and bokeh serializing each glyph's text in
// the kernel (bench/RESULTS.md, session 34). Here a zoom or pan redraws at once from the glyphs at hand, and
// the kernel's finer glyphs for the new window come as typed buffers (names as codes into small tables).
//
// Model state (set from Python): geometry {gutter, row_px, max_height, counter_px}, lanes [{label, slot, rows}],
// span_ms, width_px (the widest it draws; narrower where the output area is, page_px then says the time axis's
// pixels, set with the view), title, legend [[label, color]], groups [{name, unit, series: [{label, color, dash}]}] (counter charts; series numbered in
// order across groups), critical {x0, x1, slot} (outlined boxes), view [lo, hi] (ms since the origin; the page
// sets it, debounced, after a zoom or pan; Python sets it to zoom).
// Messages from Python: {kind: "tiles", ...} with buffers (timeline_data.js). To Python: {kind: "hello"} when a
// view starts (the current tiles come back).
// After each draw the element gets data-drawn (a count), data-seq (the tiles drawn), data-view, data-labels and,
// for a selection, data-selected (the event row) and data-highlight (boxes outlined); an "aon-drawn" event's
// detail is the draw's ms.
//
// Part 3 of 3 (after charts_axes.js and timeline_data.js, joined by aonkit.widgets.timeline).

const EVENT_ALPHA = 0.9, BIN_ALPHA = 0.35, AXIS_PX = 24, DEBOUNCE_MS = 60, CRITICAL = "#D00000";

function canvasOf(w, h, label) {
  const c = document.createElement("canvas");
  const dpr = window.devicePixelRatio || 1;
  c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
  c.style.width = w + "px"; c.style.height = h + "px";
  c.setAttribute("role", "img"); c.setAttribute("aria-label", label);
  return {canvas: c, ctx: c.getContext("2d"), dpr, w, h};
}

function cut(s, chars) { return s.length <= chars ? s : s.slice(0, Math.max(chars - 1, 0)) + "\u2026"; }

function render({model, el}) {
  const L = model.get("geometry");
  const G = L.gutter, ROW = L.row_px;
  const root = document.createElement("div");
  root.className = "aon-timeline";
  root.tabIndex = 0;  // W/S/A/D and Escape once clicked; JupyterLab's own shortcuts stay out (see keys)
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  el.appendChild(root);
  const tip = document.createElement("div");
  tip.className = "aon-charts-tip";
  tip.style.display = "none";
  let tiles = null, view = null, pal = LIGHT, drawn = 0, frame = 0, sent = null, timer = 0, selected = -1;
  let measure = null, measuring = null, lastT = null;  // a measured time range (ms), its drag's start, the pointer
  let axis, scroller, spacer, lanes, counters = [];

  const span = () => Math.max(model.get("span_ms"), 1e-6);
  let fit = model.get("width_px");  // the width drawn: width_px, or less where the output area is narrower
  const plotW = () => fit - G;
  const rows = () => model.get("lanes").reduce((n, l) => Math.max(n, l.slot + Math.max(l.rows, 1)), 0);
  const sx = (t) => G + (t - view[0]) * plotW() / (view[1] - view[0]);
  const tx = (x) => view[0] + (x - G) * (view[1] - view[0]) / plotW();

  function build() {
    root.replaceChildren();
    if (model.get("title")) {
      const t = document.createElement("div");
      t.className = "aon-timeline-title";
      t.textContent = model.get("title");  // text, never HTML
      root.appendChild(t);
    }
    const key = document.createElement("div");  // the colour key: swatches and text nodes
    key.className = "aon-timeline-key";
    for (const [label, color] of model.get("legend") || []) {
      const item = document.createElement("span"), sw = document.createElement("span");
      sw.className = "aon-timeline-swatch";
      sw.style.background = color;
      item.append(sw, document.createTextNode(label));
      key.appendChild(item);
    }
    const help = document.createElement("span");
    help.className = "aon-timeline-help";
    help.textContent = "wheel: zoom · drag: pan · shift+drag: measure · click: select · W/S/A/D · dbl-click: all";
    key.appendChild(help);
    root.appendChild(key);
    fit = widthFor(el.clientWidth);
    const W = fit, total = rows() * ROW;
    const visible = Math.min(total, L.max_height);
    axis = canvasOf(W, AXIS_PX, "timeline time axis");
    scroller = document.createElement("div");
    scroller.className = "aon-timeline-lanes";
    scroller.style.height = visible + "px";
    scroller.style.width = W + "px";
    spacer = document.createElement("div");
    spacer.style.height = Math.max(total - visible, 0) + "px";  // the sticky canvas is the first `visible` px
    lanes = canvasOf(W, Math.max(visible, 1), "timeline lanes");
    lanes.canvas.className = "aon-timeline-canvas";
    scroller.append(lanes.canvas, spacer);
    root.append(axis.canvas, scroller);
    counters = model.get("groups").map((g, k) => {
      const c = canvasOf(W, L.counter_px, "counter " + g.name);
      c.group = g;
      c.first = model.get("groups").slice(0, k).reduce((n, x) => n + x.series.length, 0);
      root.appendChild(c.canvas);
      return c;
    });
    root.appendChild(tip);
    scroller.addEventListener("scroll", later);
    for (const c of [axis, lanes, ...counters]) interact(c);
  }

  function widthFor(avail) {  // never wider than width_px or the output area (no sideways scroll), nor too narrow
    const want = model.get("width_px");
    return Math.round(avail > 0 ? Math.max(Math.min(want, avail), Math.min(want, G + 200)) : want);
  }

  // ---- drawing -------------------------------------------------------------------------------------------
  function clear(c) {
    c.ctx.setTransform(c.dpr, 0, 0, c.dpr, 0, 0);
    c.ctx.fillStyle = pal.bg;
    c.ctx.fillRect(0, 0, c.w, c.h);
  }

  function drawAxis() {
    const {ctx} = axis;
    clear(axis);
    ctx.font = FONT; ctx.fillStyle = pal.text; ctx.strokeStyle = pal.axis; ctx.textBaseline = "middle";
    ctx.textAlign = "left";
    ctx.fillText("ms since trace start", 4, AXIS_PX / 2);
    ctx.textAlign = "center";
    ctx.beginPath(); ctx.moveTo(G, AXIS_PX - 0.5); ctx.lineTo(axis.w, AXIS_PX - 0.5); ctx.stroke();
    const tk = ticks({type: "linear"}, view[0], view[1]);
    const text = labels({type: "linear"}, tk);
    if (measure) {  // the measured range's span over it
      const a = Math.max(sx(measure[0]), G), b = Math.min(sx(measure[1]), axis.w);
      ctx.fillStyle = "rgba(0, 110, 230, 0.15)"; ctx.fillRect(a, 0, Math.max(b - a, 1), AXIS_PX);
      ctx.fillStyle = pal.text; ctx.font = TITLE_FONT;
      ctx.fillText(fmtNs((measure[1] - measure[0]) * 1e6), Math.min(Math.max((a + b) / 2, G + 40), axis.w - 40), AXIS_PX / 2 - 2);
      ctx.font = FONT;
      return tk;
    }
    tk.forEach((v, k) => {
      const x = Math.round(sx(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, AXIS_PX - 5); ctx.lineTo(x, AXIS_PX); ctx.stroke();
      ctx.fillText(text[k], Math.min(Math.max(x, G + 20), axis.w - 20), AXIS_PX / 2 - 2);
    });
    return tk;
  }

  function drawLanes(tk) {
    const {ctx} = lanes;
    clear(lanes);
    const top = scroller.scrollTop, H = lanes.h, W = lanes.w;
    const y = (slot) => slot * ROW - top;
    ctx.save();
    ctx.beginPath(); ctx.rect(G, 0, W - G, H); ctx.clip();
    ctx.strokeStyle = pal.grid; ctx.lineWidth = 1;
    for (const v of tk) { const x = Math.round(sx(v)) + 0.5; ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, H); ctx.stroke(); }
    model.get("lanes").forEach((l, k) => {
      if (k % 2) { ctx.globalAlpha = 0.35; ctx.fillStyle = pal.grid; ctx.fillRect(G, y(l.slot), W - G, Math.max(l.rows, 1) * ROW); ctx.globalAlpha = 1; }
    });
    let nLabels = 0;
    if (tiles) {
      const c = tiles.cols, s0 = Math.floor(top / ROW) - 1, s1 = Math.ceil((top + H) / ROW) + 1;
      const pad = ROW * 0.08, k = plotW() / (view[1] - view[0]);
      let run = -1;
      for (const i of tiles.order) {
        const slot = c.slot[i];
        if (slot < s0 || slot > s1 || c.x1[i] < view[0] || c.x0[i] > view[1]) continue;
        const key = (c.count[i] === 1 ? 1 << 20 : 0) + c.color[i];
        if (key !== run) {
          if (run >= 0) ctx.fill();
          ctx.fillStyle = tiles.colors[c.color[i]] || "#999999";
          ctx.globalAlpha = c.count[i] === 1 ? EVENT_ALPHA : BIN_ALPHA;
          ctx.beginPath();
          run = key;
        }
        const a = G + (c.x0[i] - view[0]) * k, w = Math.max((c.x1[i] - c.x0[i]) * k, 1);
        ctx.rect(a, y(slot) + pad, w, ROW - 2 * pad);
      }
      if (run >= 0) ctx.fill();
      ctx.globalAlpha = 1;
      ctx.font = "10px system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
      ctx.fillStyle = "#1a1a1a"; ctx.textBaseline = "middle"; ctx.textAlign = "left";
      for (const [a, slot, text] of barLabels(tiles, view[0], view[1], k)) {
        if (slot < s0 || slot > s1) continue;
        ctx.fillText(text, G + (a - view[0]) * k + 2, y(slot) + ROW / 2);
        nLabels += 1;
      }
      ctx.lineWidth = 2.5; ctx.strokeStyle = pal.text;
      const boxes = highlightBoxes(tiles, selected);
      for (const [a, b, slot] of boxes) ctx.strokeRect(sx(a), y(slot) + pad, Math.max(sx(b) - sx(a), 1), ROW - 2 * pad);
      if (selected >= 0) {
        ctx.lineWidth = 1.5;
        ctx.strokeRect(sx(c.x0[selected]), y(c.slot[selected]) + pad, Math.max(sx(c.x1[selected]) - sx(c.x0[selected]), 1), ROW - 2 * pad);
      }
      el.dataset.highlight = String(boxes.length);
    }
    if (measure) shade(ctx, H);
    const cp = model.get("critical") || {};
    if (cp.x0 && cp.x0.length) {
      ctx.lineWidth = 2; ctx.strokeStyle = CRITICAL;
      for (let i = 0; i < cp.x0.length; i++) {
        if (cp.x1[i] < view[0] || cp.x0[i] > view[1]) continue;
        ctx.strokeRect(sx(cp.x0[i]), y(cp.slot[i]) + 1, Math.max(sx(cp.x1[i]) - sx(cp.x0[i]), 1), ROW - 2);
      }
    }
    ctx.restore();
    ctx.font = FONT; ctx.fillStyle = pal.text; ctx.textBaseline = "middle"; ctx.textAlign = "left";
    for (const l of model.get("lanes")) {
      const mid = y(l.slot) + Math.max(l.rows, 1) * ROW / 2;
      if (mid < -ROW || mid > H + ROW) continue;
      ctx.fillText(cut(l.label, Math.floor((G - 10) / 6.2)), 4, mid);
    }
    ctx.strokeStyle = pal.axis; ctx.beginPath(); ctx.moveTo(G - 0.5, 0); ctx.lineTo(G - 0.5, H); ctx.stroke();
    return nLabels;
  }

  function drawCounter(c) {
    const {ctx, group} = c;
    clear(c);
    const top = 16, bottom = c.h - 4;
    let lo = Infinity, hi = -Infinity;
    const series = group.series.map((s, k) => (tiles && tiles.counters[c.first + k]) || {x: [], v: []});
    for (const s of series) for (const v of s.v) if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    if (!(hi >= lo)) { lo = 0; hi = 1; }
    if (hi === lo) { hi = lo + (Math.abs(lo) || 1); lo = Math.min(lo, 0); }
    const sy = (v) => bottom - (v - lo) * (bottom - top) / (hi - lo);
    const yAxis = {type: "linear", format: group.unit === "bytes" ? "bytes" : undefined};
    const tk = ticks(yAxis, lo, hi), text = labels(yAxis, tk);
    ctx.font = FONT; ctx.textBaseline = "middle"; ctx.textAlign = "right"; ctx.lineWidth = 1;
    tk.forEach((v, k) => {
      ctx.strokeStyle = pal.grid; ctx.beginPath(); ctx.moveTo(G, Math.round(sy(v)) + 0.5); ctx.lineTo(c.w, Math.round(sy(v)) + 0.5); ctx.stroke();
      ctx.fillStyle = pal.text; ctx.fillText(text[k], G - 6, sy(v));
    });
    ctx.save();
    ctx.beginPath(); ctx.rect(G, 0, c.w - G, c.h); ctx.clip();
    series.forEach((s, k) => {
      const spec = group.series[k];
      ctx.strokeStyle = spec.color; ctx.lineWidth = 1.5; ctx.setLineDash(spec.dash ? [5, 3] : []);
      ctx.beginPath();
      let on = false, prev = NaN;
      for (let i = 0; i < s.x.length; i++) {
        const x = sx(s.x[i]), v = s.v[i];
        if (!Number.isFinite(v)) { on = false; continue; }
        if (!on) { ctx.moveTo(x, sy(v)); on = true; } else { ctx.lineTo(x, sy(prev)); ctx.lineTo(x, sy(v)); }
        prev = v;
      }
      ctx.stroke();
    });
    if (measure) shade(ctx, c.h);
    ctx.restore();
    ctx.setLineDash([]);
    ctx.textAlign = "left"; ctx.textBaseline = "top"; ctx.font = FONT;
    let x = G + 4;
    group.series.forEach((spec) => {
      ctx.fillStyle = spec.color; ctx.fillRect(x, 4, 10, 3);
      ctx.fillStyle = pal.text; ctx.fillText(spec.label, x + 14, 1);
      x += 24 + ctx.measureText(spec.label).width;
    });
    ctx.strokeStyle = pal.axis; ctx.beginPath(); ctx.moveTo(G - 0.5, top); ctx.lineTo(G - 0.5, bottom); ctx.stroke();
  }

  function shade(ctx, H) {  // the measured range: a band with its edges
    const a = sx(measure[0]), b = sx(measure[1]);
    ctx.fillStyle = "rgba(0, 110, 230, 0.12)"; ctx.fillRect(a, 0, Math.max(b - a, 1), H);
    ctx.strokeStyle = "rgba(0, 90, 200, 0.8)"; ctx.lineWidth = 1;
    for (const x of [a, b]) { ctx.beginPath(); ctx.moveTo(Math.round(x) + 0.5, 0); ctx.lineTo(Math.round(x) + 0.5, H); ctx.stroke(); }
  }

  function draw() {
    const t0 = performance.now();
    if (!view) view = (model.get("view") || [0, span()]).slice();
    const tk = drawAxis();
    const n = drawLanes(tk);
    for (const c of counters) drawCounter(c);
    drawn += 1;
    Object.assign(el.dataset, {drawn: String(drawn), seq: String(tiles ? tiles.seq : -1), view: view.join(","),
                               measure: measure ? measure.join(",") : "",
                               labels: String(n), glyphs: String(tiles ? tiles.n : 0)});
    el.dispatchEvent(new CustomEvent("aon-drawn", {detail: performance.now() - t0}));
  }

  function later() { if (!frame) frame = requestAnimationFrame(() => { frame = 0; draw(); }); }

  // ---- interaction -----------------------------------------------------------------------------------------
  function setView(lo, hi) {
    // only a person's zoom or pan (or a cell's) comes here. When a resize also sent the view, Run All in a loaded
    // JupyterLab left the next zoom unsent in 3 of 4 runs (cause not found; ipywidgets holds an update back
    // while an earlier one is unanswered), so a resize sends nothing: the width goes with the next view
    view = clampView(lo, hi, span(), 1e-6);
    later();
    clearTimeout(timer);
    timer = setTimeout(() => {  // the kernel's glyphs for the new window, once the zoom or pan rests
      sent = view.slice();
      model.set("page_px", plotW());  // the kernel's level of detail follows the width drawn
      model.set("view", sent);
      model.save_changes();
    }, DEBOUNCE_MS);
  }

  function interact(c) {
    const cv = c.canvas;
    cv.addEventListener("wheel", (ev) => {
      if (!view) return;
      ev.preventDefault();
      if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {  // a sideways scroll pans
        const d = (ev.shiftKey ? ev.deltaY : ev.deltaX) * (view[1] - view[0]) / plotW();
        setView(view[0] + d, view[1] + d);
        return;
      }
      const at = Math.min(Math.max(tx(ev.offsetX), view[0]), view[1]);
      const k = Math.exp(Math.max(-3, Math.min(3, ev.deltaY / 300)));  // a wheel notch (100) zooms 1.4x
      setView(at - (at - view[0]) * k, at + (view[1] - at) * k);
    }, {passive: false});
    let from = null, moved = false;
    cv.addEventListener("mousedown", (ev) => {
      if (!view) return;
      root.focus({preventScroll: true});
      moved = false;
      if (ev.shiftKey && ev.offsetX >= G) {  // shift+drag measures a range
        measuring = tx(ev.offsetX); measure = null; from = null;
        return;
      }
      from = [ev.clientX, view.slice()];
    });
    window.addEventListener("mouseup", () => { from = null; measuring = null; });
    cv.addEventListener("mousemove", (ev) => {
      lastT = ev.offsetX >= G ? tx(ev.offsetX) : null;
      if (measuring !== null) {
        const t = Math.min(Math.max(tx(ev.offsetX), 0), span());
        measure = [Math.min(measuring, t), Math.max(measuring, t)];
        moved = true;
        tip.style.display = "none";
        later();
        return;
      }
      if (from) {
        const [x0, [lo, hi]] = from;
        if (Math.abs(ev.clientX - x0) > 2) moved = true;
        const d = (ev.clientX - x0) * (hi - lo) / plotW();
        if (moved) { tip.style.display = "none"; setView(lo - d, hi - d); return; }
      }
      if (c === lanes) hover(ev); else if (c !== axis) hoverCounter(c, ev);
    });
    cv.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    cv.addEventListener("dblclick", () => setView(0, span()));
    if (c === lanes) cv.addEventListener("click", (ev) => {
      if (moved || ev.shiftKey) return;
      selected = pick(ev);
      el.dataset.selected = selected >= 0 ? String(tiles.cols.row[selected]) : "";
      later();
    });
  }

  function keys(ev) {
    // W/S zoom in and out (around the pointer), A/D pan, Escape drops the measure and the selection. Every other
    // key stops here too, so that JupyterLab's command-mode shortcuts (D D deletes a cell) never see it.
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.key === "Tab" || !view) return;
    ev.stopPropagation();
    const k = ev.key.toLowerCase(), w = view[1] - view[0];
    const at = lastT !== null && lastT >= view[0] && lastT <= view[1] ? lastT : (view[0] + view[1]) / 2;
    if (k === "w" || k === "s") {
      const f = k === "w" ? 0.8 : 1.25;
      setView(at - (at - view[0]) * f, at + (view[1] - at) * f);
    } else if (k === "a" || k === "d") {
      const d = (k === "a" ? -0.2 : 0.2) * w;
      setView(view[0] + d, view[1] + d);
    } else if (k === "escape") {
      measure = null; selected = -1; el.dataset.selected = ""; later();
    } else return;
    ev.preventDefault();
  }

  function pick(ev) {
    if (!tiles || ev.offsetX < G) return -1;
    const slot = Math.floor((ev.offsetY + scroller.scrollTop) / ROW);
    return hit(tiles, slot, tx(ev.offsetX), 2 * (view[1] - view[0]) / plotW());
  }

  function showTip(lines, ev) {
    if (!lines || !lines.length) { tip.style.display = "none"; return; }
    fillTip(tip, lines);
    const rr = root.getBoundingClientRect();
    tip.style.left = Math.min(ev.clientX - rr.left + 12, rr.width - 240) + "px";
    tip.style.top = ev.clientY - rr.top + 14 + "px";
  }

  function hover(ev) {
    if (ev.offsetX < G) {  // over the lane labels: the lane's whole label (the column cuts long ones)
      const slot = Math.floor((ev.offsetY + scroller.scrollTop) / ROW);
      const lane = model.get("lanes").find((l) => slot >= l.slot && slot < l.slot + Math.max(l.rows, 1));
      showTip(lane ? [["lane", lane.label]] : null, ev);
      return;
    }
    const i = pick(ev);
    showTip(i >= 0 ? tipLines(tiles, i) : null, ev);
  }

  function hoverCounter(c, ev) {
    if (!tiles || ev.offsetX < G) { tip.style.display = "none"; return; }
    const t = tx(ev.offsetX), lines = [["at", fmt(t) + " ms"]];
    c.group.series.forEach((spec, k) => {
      const s = tiles.counters[c.first + k];
      if (!s || !s.x.length) return;
      let lo = 0, hi = s.x.length;  // the last point at or before t (a step holds its value after it)
      while (lo < hi) { const m = (lo + hi) >> 1; if (s.x[m] > t) hi = m; else lo = m + 1; }
      if (lo > 0) lines.push([spec.label, c.group.unit === "bytes" ? fmtBytes(s.v[lo - 1]) : fmt(s.v[lo - 1])]);
    });
    showTip(lines, ev);
  }

  // ---- model -------------------------------------------------------------------------------------------------
  const onMsg = (msg, buffers) => {
    if (!msg || msg.kind !== "tiles") return;
    const row = selected >= 0 ? tiles.cols.row[selected] : NaN;
    tiles = decode(msg, buffers || []);
    selected = -1;  // the selected event stays selected when the new glyphs hold it on its own
    for (let i = 0; i < tiles.n && !Number.isNaN(row); i++) {
      if (tiles.cols.row[i] === row && tiles.cols.count[i] === 1) { selected = i; break; }
    }
    el.dataset.selected = selected >= 0 ? String(row) : "";
    later();
  };
  const onView = () => {
    const v = model.get("view");
    if (v && (!sent || v[0] !== sent[0] || v[1] !== sent[1])) { view = clampView(v[0], v[1], span(), 1e-6); later(); }
  };
  const onSpec = () => { build(); draw(); };
  const onRedraw = () => later();
  pal = palette(el);
  build();
  draw();
  const themed = typeof MutationObserver === "function" && document.body ? new MutationObserver(() => {
    pal = palette(el); later();
  }) : null;
  if (themed) themed.observe(document.body, {attributes: true, attributeFilter: ["data-jp-theme-name"]});
  model.on("msg:custom", onMsg);
  model.on("change:view", onView);
  for (const k of ["lanes", "groups", "width_px", "title"]) model.on("change:" + k, onSpec);
  for (const k of ["critical", "span_ms"]) model.on("change:" + k, onRedraw);
  el.aonTimeline = {  // for tests and benches: what is drawn, and the calls a zoom or a click makes
    get view() { return view ? view.slice() : null; },
    get tiles() { return tiles; },
    setView: (lo, hi) => setView(lo, hi),
    select: (i) => { selected = i; el.dataset.selected = i >= 0 ? String(tiles.cols.row[i]) : ""; draw(); },
    screenOf: (i) => {  // the middle of glyph i in the lanes canvas (css px from its top left), scrolled into view
      const c = tiles.cols;
      scroller.scrollTop = Math.max(0, c.slot[i] * ROW - lanes.h / 2);
      draw();
      return [sx((Math.max(c.x0[i], view[0]) + Math.min(c.x1[i], view[1])) / 2), c.slot[i] * ROW - scroller.scrollTop + ROW / 2];
    },
  };
  root.addEventListener("keydown", keys);
  const resized = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    if (widthFor(el.clientWidth) === fit) return;
    build(); draw();  // the kernel hears of the new width with the next view (no message here: see setView)
  }) : null;
  if (resized) resized.observe(el);
  model.send({kind: "hello"});
  return () => {
    model.off("msg:custom", onMsg); model.off("change:view", onView);
    for (const k of ["lanes", "groups", "width_px", "title"]) model.off("change:" + k, onSpec);
    for (const k of ["critical", "span_ms"]) model.off("change:" + k, onRedraw);
    if (frame) cancelAnimationFrame(frame);
    clearTimeout(timer);
    if (themed) themed.disconnect();
    if (resized) resized.disconnect();
  };
}

export default {render};
export const parts = {fmtNs, decode, hit, stackText, tipLines, barLabels, highlightBoxes, clampView};  // for tests
