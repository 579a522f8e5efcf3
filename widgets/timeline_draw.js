// aonkit's canvas timeline, part 3 of 4 (after charts_axes.js and timeline_data.js, before timeline.js): drawing
// the axis, the lanes and the counter charts from the widget's state S. S holds the geometry (G: the lane labels'
// width, ROW: a row's height, fit: the width drawn), the view [lo, hi] (ms), the tiles (timeline_data.js), the
// palette, the measured range, the selected glyph, the model, the element and the canvases.

const EVENT_ALPHA = 0.9, BIN_ALPHA = 0.35, AXIS_PX = 24, STRIP_PX = 10, CRITICAL = "#D00000", FOCUS = "#D4007F";

function canvasOf(w, h, label) {
  const c = document.createElement("canvas");
  const dpr = window.devicePixelRatio || 1;
  c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
  c.style.width = w + "px"; c.style.height = h + "px";
  c.setAttribute("role", "img"); c.setAttribute("aria-label", label);
  return {canvas: c, ctx: c.getContext("2d"), dpr, w, h};
}

function cut(s, chars) { return s.length <= chars ? s : s.slice(0, Math.max(chars - 1, 0)) + "\u2026"; }

const sxOf = (S) => {  // ms to css px across the lanes, in the view
  const k = (S.fit - S.G) / (S.view[1] - S.view[0]);
  return (t) => S.G + (t - S.view[0]) * k;
};

function clear(S, c) {
  c.ctx.setTransform(c.dpr, 0, 0, c.dpr, 0, 0);
  c.ctx.fillStyle = S.pal.bg;
  c.ctx.fillRect(0, 0, c.w, c.h);
}

function drawAxis(S) {
  const {axis, view, measure, pal, G} = S, {ctx} = axis, sx = sxOf(S);
  clear(S, axis);
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

function drawLanes(S, tk) {
  const {lanes, view, tiles, selected, measure, pal, model, G, ROW} = S, {ctx} = lanes, sx = sxOf(S);
  clear(S, lanes);
  const top = S.scroller.scrollTop, H = lanes.h, W = lanes.w;
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
    const pad = ROW * 0.08, k = (S.fit - G) / (view[1] - view[0]);
    let run = -1, nFound = 0;
    const found = S.found && S.found.length === tiles.n ? S.found : null;
    for (const i of tiles.order) {
      const slot = c.slot[i];
      if (slot < s0 || slot > s1 || c.x1[i] < view[0] || c.x0[i] > view[1]) continue;
      const dim = found && !found[i];  // the find box's non-matches, faded
      if (found && !dim) nFound += 1;
      const key = (c.count[i] === 1 ? 1 << 20 : 0) + (dim ? 1 << 21 : 0) + c.color[i];
      if (key !== run) {
        if (run >= 0) ctx.fill();
        ctx.fillStyle = tiles.colors[c.color[i]] || "#999999";
        ctx.globalAlpha = (c.count[i] === 1 ? EVENT_ALPHA : BIN_ALPHA) * (dim ? 0.15 : 1);
        ctx.beginPath();
        run = key;
      }
      const a = G + (c.x0[i] - view[0]) * k, w = Math.max((c.x1[i] - c.x0[i]) * k, 1);
      ctx.rect(a, y(slot) + pad, w, ROW - 2 * pad);
    }
    if (run >= 0) ctx.fill();
    ctx.globalAlpha = 1;
    S.el.dataset.found = found ? String(nFound) : "";
    const f = tiles.focus;
    if (f) {  // the focused events' boxes, outlined over everything (a bin that holds one shows it too)
      ctx.lineWidth = 2; ctx.strokeStyle = FOCUS;
      ctx.beginPath();
      for (let i = 0; i < f.x0.length; i++) {
        if (f.slot[i] < s0 || f.slot[i] > s1 || f.x1[i] < view[0] || f.x0[i] > view[1]) continue;
        const a = G + (f.x0[i] - view[0]) * k;
        ctx.rect(a - 1, y(f.slot[i]) + 1, Math.max((f.x1[i] - f.x0[i]) * k, 1) + 2, ROW - 2);
      }
      ctx.stroke();
    }
    ctx.font = "10px system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
    ctx.fillStyle = "#1a1a1a"; ctx.textBaseline = "middle"; ctx.textAlign = "left";
    for (const [a, slot, text] of barLabels(tiles, view[0], view[1], k, model.get("geometry").labels)) {
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
      const launch = boxes.find((bx) => bx[3] === "launch");
      if (launch) {  // an arrow from the launch call's start to the kernel's: the launch's queueing delay, drawn
        const x0 = sx(launch[0]), y0 = y(launch[2]) + ROW / 2, x1 = sx(c.x0[selected]), y1 = y(c.slot[selected]) + ROW / 2;
        const ang = Math.atan2(y1 - y0, x1 - x0);
        ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x1, y1);
        ctx.lineTo(x1 - 7 * Math.cos(ang - 0.4), y1 - 7 * Math.sin(ang - 0.4));
        ctx.moveTo(x1, y1); ctx.lineTo(x1 - 7 * Math.cos(ang + 0.4), y1 - 7 * Math.sin(ang + 0.4));
        ctx.stroke();
      }
    }
    S.el.dataset.highlight = String(boxes.length);
  }
  if (measure) shade(S, ctx, H);
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

function drawCounter(S, c) {
  const {tiles, measure, pal, G} = S, {ctx, group} = c, sx = sxOf(S);
  clear(S, c);
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
  if (measure) shade(S, ctx, c.h);
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

function shade(S, ctx, H) {  // the measured range: a band with its edges
  const sx = sxOf(S), a = sx(S.measure[0]), b = sx(S.measure[1]);
  ctx.fillStyle = "rgba(0, 110, 230, 0.12)"; ctx.fillRect(a, 0, Math.max(b - a, 1), H);
  ctx.strokeStyle = "rgba(0, 90, 200, 0.8)"; ctx.lineWidth = 1;
  for (const x of [a, b]) { ctx.beginPath(); ctx.moveTo(Math.round(x) + 0.5, 0); ctx.lineTo(Math.round(x) + 0.5, H); ctx.stroke(); }
}
