// aonkit's canvas charts, part 2 of 3: one chart's layout, marks, axes, legend and hover read-out.

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
  const left = Math.max(chart.min_left || 0, 10 + (chart.y.label ? 16 : 0) + yw + 6);  // min_left: aligned charts
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
        if (m.background) {  // a veil under the label, over the bars
          ctx.globalAlpha = 0.75;
          ctx.fillStyle = L.pal.bg;
          ctx.fillRect(x - 2, py - 1, tw + 4, 14);
          ctx.globalAlpha = 1;
        }
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
  ctx.strokeStyle = L.pal.grid;
  ctx.beginPath();
  for (const v of xt) { const p = Math.round(sx(v)) + 0.5; if (chart.x.grid !== false) { ctx.moveTo(p, f.y0); ctx.lineTo(p, f.y1); } }
  for (const v of yt) { const p = Math.round(sy(v)) + 0.5; ctx.moveTo(f.x0, p); ctx.lineTo(f.x1, p); }
  ctx.stroke();
}

function drawAxes(ctx, chart, L) {
  const {f, sx, sy, xt, yt, ylabels} = L;
  ctx.font = FONT;
  ctx.fillStyle = L.pal.text;
  ctx.strokeStyle = L.pal.axis;
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
  ctx.globalAlpha = 0.8;
  ctx.fillStyle = L.pal.bg;
  ctx.fillRect(x, y, w, h);
  ctx.globalAlpha = 1;
  ctx.strokeStyle = L.pal.grid;
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
    ctx.fillStyle = L.pal.text;
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

