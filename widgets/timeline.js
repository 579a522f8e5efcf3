// aonkit's canvas timeline: an anywidget ES module (loaded inline by aonkit.widgets.timeline; no network).
//
// Why: the bokeh timeline of a dashboard showed a zoom's new glyphs 255-263 ms after it on a 2-CPU machine:
// BokehJS's repaint (110 ms), its CSS reads restyling JupyterLab's page, and bokeh serializing each glyph's text in
// the kernel (bench/RESULTS.md, session 34). Here a zoom or pan redraws at once from the glyphs at hand, and
// the kernel's finer glyphs for the new window come as typed buffers (names as codes into small tables).
//
// Model state (set from Python): geometry {gutter, row_px, max_height, counter_px, labels: the bar-label rule}, lanes [{label, slot, rows}],
// span_ms, width_px (the widest it draws; narrower where the output area is, page_px then says the time axis's
// pixels, set with the view), title, legend [[label, color]], groups [{name, unit, series: [{label, color, dash}]}] (counter charts; series numbered in
// order across groups), critical {x0, x1, slot} (outlined boxes), view [lo, hi] (ms since the origin; the page
// sets it, debounced, after a zoom or pan; Python sets it to zoom).
// focus [names] (their events marked at any zoom, the rest faded; Python or the page sets it).
// Messages from Python: {kind: "tiles", ...} with buffers (timeline_data.js); {kind: "note", text} (why a find
// focused nothing); {kind: "count", view, n} (the focused events reaching into that view, counted exactly).
// To Python: {kind: "hello"} when a view starts (the current tiles come back); {kind: "step", dir: 1 | -1,
// launched} (N, P: the next or previous focused event; Shift+N, Shift+P: GPU event they launched); {kind:
// "longest"} (L); {kind: "find", text} (Enter in the find box).
// After each draw the element gets data-drawn (a count), data-seq (the tiles drawn), data-view, data-labels and,
// for a selection, data-selected (the event row) and data-highlight (boxes outlined), and with a focus
// data-focus (its events in view); an "aon-drawn" event's detail is the draw's ms.
//
// Part 5 of 5 (after charts_axes.js, timeline_data.js, timeline_draw.js and timeline_focus.js, joined by
// aonkit.widgets.timeline).

const DEBOUNCE_MS = 16;  // one frame: ipywidgets sends a view at once and holds the next until the kernel answers

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
  // what is drawn (timeline_draw.js reads it): the tiles, the view [lo, hi] (ms), the palette, the selected glyph,
  // the measured range, the width drawn (fit: width_px, or less where the output area is narrower), the canvases
  const S = {model, el, G, ROW, tiles: null, view: null, pal: LIGHT, selected: -1, measure: null,
             fit: model.get("width_px"), axis: null, scroller: null, lanes: null, counters: []};
  let drawn = 0, frame = 0, sent = null, timer = 0, measuring = null, lastT = null, spacer = null;
  let drag = null, moved = false;  // a pan's start [clientX, view]; whether the pointer moved since the press
  S.findText = ""; S.found = null;  // the find box's text; per glyph of the tiles, whether its name matches
  S.place = -1; S.note = "";  // the focused event a step showed (its place in time order); a note from the kernel
  S.exact = null;  // the kernel's count of focused events in a view: {view, n}

  const span = () => Math.max(model.get("span_ms"), 1e-6);
  const plotW = () => S.fit - G;
  const rows = () => model.get("lanes").reduce((n, l) => Math.max(n, l.slot + Math.max(l.rows, 1)), 0);
  const sx = (t) => sxOf(S)(t);
  const tx = (x) => S.view[0] + (x - G) * (S.view[1] - S.view[0]) / plotW();

  function build() {
    root.replaceChildren();
    if (model.get("title")) {
      const t = document.createElement("div");
      t.className = "aon-timeline-title";
      t.textContent = model.get("title");  // text, never HTML
      root.appendChild(t);
    }
    root.appendChild(keyBar(model.get("legend") || [], S.findText, {
      input: (text) => { S.findText = text; S.note = ""; refind(); },
      find: (text) => model.send({kind: "find", text}),
      step, unfocus,
    }));
    S.fit = widthFor(el.clientWidth);
    const W = S.fit, total = rows() * ROW;
    const visible = Math.min(total, L.max_height);
    S.axis = canvasOf(W, AXIS_PX, "timeline time axis");
    S.strip = canvasOf(W, STRIP_PX, "where the focused events are");
    S.strip.canvas.className = "aon-timeline-strip";
    S.scroller = document.createElement("div");
    S.scroller.className = "aon-timeline-lanes";
    S.scroller.style.height = visible + "px";
    S.scroller.style.width = W + "px";
    spacer = document.createElement("div");
    spacer.style.height = Math.max(total - visible, 0) + "px";  // the sticky canvas is the first `visible` px
    S.lanes = canvasOf(W, Math.max(visible, 1), "timeline lanes");
    S.lanes.canvas.className = "aon-timeline-canvas";
    S.scroller.append(S.lanes.canvas, spacer);
    root.append(S.axis.canvas, S.strip.canvas, S.scroller);
    S.strip.canvas.addEventListener("click", (ev) => {  // centre the view where the strip was clicked
      if (!S.view || ev.offsetX < G) return;
      const t = (ev.offsetX - G) / plotW() * span(), w = S.view[1] - S.view[0];
      setView(t - w / 2, t + w / 2);
    });
    // the counter charts: those marked open under the lanes, the rest in a folded list drawn once opened
    const groups = model.get("groups"), folded = groups.filter((g) => !g.open).length;
    const more = document.createElement("details");
    more.className = "aon-timeline-more";
    const summary = document.createElement("summary");
    summary.textContent = `${folded} more counter${folded === 1 ? "" : "s"}`;
    more.appendChild(summary);
    more.addEventListener("toggle", later);
    S.counters = groups.map((g, k) => {
      const c = canvasOf(W, L.counter_px, "counter " + g.name);
      c.group = g;
      c.first = groups.slice(0, k).reduce((n, x) => n + x.series.length, 0);
      c.shown = g.open ? () => true : () => more.open;
      (g.open ? root : more).appendChild(c.canvas);
      return c;
    });
    if (folded) root.appendChild(more);
    root.appendChild(tip);
    S.scroller.addEventListener("scroll", later);
    for (const c of [S.axis, S.lanes, ...S.counters]) interact(c);
  }

  function refind() {  // the find box's matches among the glyphs at hand (again for each new set of tiles)
    const test = matcher(S.findText);
    const box = root.querySelector(".aon-timeline-find");
    if (box) box.classList.toggle("aon-timeline-bad", test === undefined);  // a regex that does not compile
    const focused = new Set(model.get("focus") || []);  // a focus fades by its names instead
    const pass = focused.size ? (s) => focused.has(s) : test;
    S.found = pass && S.tiles ? matches(S.tiles, pass) : null;
    later();
  }

  function step(dir, launched) {  // 1, -1: the next or previous focused event (or launched GPU event); 0: the longest
    const f = S.tiles && S.tiles.focus;
    if (!f || !f.n || (launched && !f.launched)) return;
    model.send(dir ? {kind: "step", dir, launched: !!launched} : {kind: "longest"});
  }

  function unfocus() {
    S.place = -1; S.note = "";
    model.set("focus", []);
    model.save_changes();
    refind();
  }

  function widthFor(avail) {  // never wider than width_px or the output area (no sideways scroll), nor too narrow
    const want = model.get("width_px");
    return Math.round(avail > 0 ? Math.max(Math.min(want, avail), Math.min(want, G + 200)) : want);
  }

  function draw() {
    const t0 = performance.now();
    if (!S.view) S.view = (model.get("view") || [0, span()]).slice();
    const tk = drawAxis(S);
    const n = drawLanes(S, tk);
    drawStrip(S);
    const f = S.tiles && S.tiles.focus;
    const tol = 1e-9 * (S.view[1] - S.view[0]);  // a view the kernel set comes back through clampView
    const exact = f && S.exact && Math.abs(S.exact.view[0] - S.view[0]) <= tol &&
                  Math.abs(S.exact.view[1] - S.view[1]) <= tol;
    const inView = !f ? 0 : exact ? S.exact.n : focusInView(f, S.view[0], S.view[1]);  // the boxes' while moving
    const count = root.querySelector(".aon-timeline-count");
    if (count) count.textContent = S.note || (el.dataset.found && !f ? `${el.dataset.found} in view` : "");
    const bar = root.querySelector(".aon-timeline-focus");
    if (bar) {
      bar.style.display = f ? "" : "none";
      bar.firstChild.textContent = focusText(f, inView, S.place, !exact, S.placeLaunched);
      bar.firstChild.title = focusTitle(f);
    }
    el.dataset.focus = f ? String(inView) : "";
    el.dataset.focusExact = exact ? "1" : "";
    for (const c of S.counters) if (c.shown()) drawCounter(S, c);  // a folded chart costs nothing
    drawn += 1;
    Object.assign(el.dataset, {drawn: String(drawn), seq: String(S.tiles ? S.tiles.seq : -1), view: S.view.join(","),
                               measure: S.measure ? S.measure.join(",") : "",
                               labels: String(n), glyphs: String(S.tiles ? S.tiles.n : 0)});
    el.dispatchEvent(new CustomEvent("aon-drawn", {detail: performance.now() - t0}));
  }

  function later() { if (!frame) frame = requestAnimationFrame(() => { frame = 0; draw(); }); }

  // ---- interaction -----------------------------------------------------------------------------------------
  function setView(lo, hi) {
    // only a person's zoom or pan (or a cell's) comes here. When a resize also sent the view, Run All in a loaded
    // JupyterLab left the next zoom unsent in 3 of 4 runs (cause not found; ipywidgets holds an update back
    // while an earlier one is unanswered), so a resize sends nothing: the width goes with the next view
    S.view = clampView(lo, hi, span(), 1e-6);
    S.place = -1;  // "event k of n" was the step's; the view is a person's now
    later();
    clearTimeout(timer);
    timer = setTimeout(() => {  // the kernel's glyphs for the new window, once the zoom or pan rests
      sent = S.view.slice();
      model.set("page_px", plotW());  // the kernel's level of detail follows the width drawn
      model.set("view", sent);
      model.save_changes();
    }, DEBOUNCE_MS);
  }

  function interact(c) {
    const cv = c.canvas;
    cv.addEventListener("wheel", (ev) => {
      if (!S.view) return;
      ev.preventDefault();
      if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {  // a sideways scroll pans
        const d = (ev.shiftKey ? ev.deltaY : ev.deltaX) * (S.view[1] - S.view[0]) / plotW();
        setView(S.view[0] + d, S.view[1] + d);
        return;
      }
      const at = Math.min(Math.max(tx(ev.offsetX), S.view[0]), S.view[1]);
      const k = Math.exp(Math.max(-3, Math.min(3, ev.deltaY / 300)));  // a wheel notch (100) zooms 1.4x
      setView(at - (at - S.view[0]) * k, at + (S.view[1] - at) * k);
    }, {passive: false});
    cv.addEventListener("mousedown", (ev) => {
      if (!S.view) return;
      root.focus({preventScroll: true});
      moved = false;
      if (ev.shiftKey && ev.offsetX >= G) {  // shift+drag measures a range
        measuring = tx(ev.offsetX); S.measure = null; drag = null;
        return;
      }
      drag = [ev.clientX, S.view.slice()];
    });
    cv.addEventListener("mousemove", (ev) => {
      lastT = ev.offsetX >= G ? tx(ev.offsetX) : null;
      if (measuring !== null) {
        const t = Math.min(Math.max(tx(ev.offsetX), 0), span());
        S.measure = [Math.min(measuring, t), Math.max(measuring, t)];
        moved = true;
        tip.style.display = "none";
        later();
        return;
      }
      if (drag) {
        const [x0, [lo, hi]] = drag;
        if (Math.abs(ev.clientX - x0) > 2) moved = true;
        const d = (ev.clientX - x0) * (hi - lo) / plotW();
        if (moved) { tip.style.display = "none"; setView(lo - d, hi - d); return; }
      }
      if (c === S.lanes) hover(ev); else if (c !== S.axis) hoverCounter(c, ev);
    });
    cv.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    cv.addEventListener("dblclick", () => setView(0, span()));
    if (c === S.lanes) cv.addEventListener("click", (ev) => {
      if (moved || ev.shiftKey) return;
      S.selected = pick(ev);
      el.dataset.selected = S.selected >= 0 ? String(S.tiles.cols.row[S.selected]) : "";
      later();
    });
  }

  function keys(ev) {
    // W/S zoom in and out (around the pointer), A/D pan, F focuses the selected event's name, N/P the next or
    // previous focused event (Shift+N/P: GPU event they launched), L the longest, Escape drops the measure and the
    // selection, then the focus. Every other
    // key stops here too, so that JupyterLab's command-mode shortcuts (D D deletes a cell) never see it.
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.key === "Tab" || !S.view) return;
    ev.stopPropagation();
    if (ev.target && ev.target.tagName === "INPUT") return;  // typing in the find box
    const k = ev.key.toLowerCase(), w = S.view[1] - S.view[0];
    const at = lastT !== null && lastT >= S.view[0] && lastT <= S.view[1] ? lastT : (S.view[0] + S.view[1]) / 2;
    if (k === "w" || k === "s") {
      const f = k === "w" ? 0.8 : 1.25;
      setView(at - (at - S.view[0]) * f, at + (S.view[1] - at) * f);
    } else if (k === "a" || k === "d") {
      const d = (k === "a" ? -0.2 : 0.2) * w;
      setView(S.view[0] + d, S.view[1] + d);
    } else if (k === "n" || k === "p" || k === "l") {  // with Shift, N and P walk the GPU work they launched
      step(k === "n" ? 1 : k === "p" ? -1 : 0, ev.shiftKey && k !== "l");
    } else if (k === "f" && S.tiles && S.selected >= 0) {  // focus the selected glyph's name (a bin's: its longest)
      S.place = -1; S.note = "";
      model.set("focus", [S.tiles.names[S.tiles.cols.name[S.selected]]]);
      model.save_changes();
      refind();
    } else if (k === "escape") {  // the measure and the selection first, then the focus
      if (!S.measure && S.selected < 0 && S.tiles && S.tiles.focus) unfocus();
      S.measure = null; S.selected = -1; el.dataset.selected = ""; later();
    } else return;
    ev.preventDefault();
  }

  function pick(ev) {
    if (!S.tiles || ev.offsetX < G) return -1;
    const slot = Math.floor((ev.offsetY + S.scroller.scrollTop) / ROW);
    return hit(S.tiles, slot, tx(ev.offsetX), 2 * (S.view[1] - S.view[0]) / plotW());
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
      const slot = Math.floor((ev.offsetY + S.scroller.scrollTop) / ROW);
      const lane = model.get("lanes").find((l) => slot >= l.slot && slot < l.slot + Math.max(l.rows, 1));
      showTip(lane ? [["lane", lane.label]] : null, ev);
      return;
    }
    const i = pick(ev);
    showTip(i >= 0 ? tipLines(S.tiles, i) : null, ev);
  }

  function hoverCounter(c, ev) {
    if (!S.tiles || ev.offsetX < G) { tip.style.display = "none"; return; }
    const t = tx(ev.offsetX), lines = [["at", fmt(t) + " ms"]];
    c.group.series.forEach((spec, k) => {
      const s = S.tiles.counters[c.first + k];
      if (!s || !s.x.length) return;
      let lo = 0, hi = s.x.length;  // the last point at or before t (a step holds its value after it)
      while (lo < hi) { const m = (lo + hi) >> 1; if (s.x[m] > t) hi = m; else lo = m + 1; }
      if (lo > 0) lines.push([spec.label, c.group.unit === "bytes" ? fmtBytes(s.v[lo - 1]) : fmt(s.v[lo - 1])]);
    });
    showTip(lines, ev);
  }

  // ---- model -------------------------------------------------------------------------------------------------
  const onMsg = (msg, buffers) => {
    if (msg && msg.kind === "note") { S.note = String(msg.text); later(); return; }
    if (msg && msg.kind === "count") { S.exact = {view: msg.view, n: msg.n}; later(); return; }
    if (!msg || msg.kind !== "tiles") return;
    let row = S.selected >= 0 ? S.tiles.cols.row[S.selected] : NaN;
    S.tiles = decode(msg, buffers || []);
    if (S.tiles.select >= 0) {
      row = S.tiles.select; S.place = S.tiles.place; S.placeLaunched = !!S.tiles.launched; S.measure = null;
    }
    if (S.tiles.focus && S.tiles.focus.n) S.note = "";  // a find's "nothing matches" is old news
    S.selected = -1;  // the selected event stays selected when the new glyphs hold it on its own
    for (let i = 0; i < S.tiles.n && !Number.isNaN(row); i++) {
      if (S.tiles.cols.row[i] === row && S.tiles.cols.count[i] === 1) { S.selected = i; break; }
    }
    el.dataset.selected = S.selected >= 0 ? String(row) : "";
    refind();
  };
  const onView = () => {
    const v = model.get("view");
    if (v && (!sent || v[0] !== sent[0] || v[1] !== sent[1])) { S.view = clampView(v[0], v[1], span(), 1e-6); later(); }
  };
  const onSpec = () => { build(); draw(); };
  const onRedraw = () => later();
  S.pal = palette(el);
  build();
  draw();
  const themed = typeof MutationObserver === "function" && document.body ? new MutationObserver(() => {
    S.pal = palette(el); later();
  }) : null;
  if (themed) themed.observe(document.body, {attributes: true, attributeFilter: ["data-jp-theme-name"]});
  model.on("msg:custom", onMsg);
  model.on("change:view", onView);
  model.on("change:focus", refind);
  for (const k of ["lanes", "groups", "width_px", "title"]) model.on("change:" + k, onSpec);
  for (const k of ["critical", "span_ms"]) model.on("change:" + k, onRedraw);
  el.aonTimeline = {  // for tests and benches: what is drawn, and the calls a zoom or a click makes
    get view() { return S.view ? S.view.slice() : null; },
    get tiles() { return S.tiles; },
    get focus() { return (model.get("focus") || []).slice(); },
    setView: (lo, hi) => setView(lo, hi),
    screenOf: (i) => {  // the middle of glyph i in the lanes canvas (css px from its top left), scrolled into view
      const c = S.tiles.cols;
      S.scroller.scrollTop = Math.max(0, c.slot[i] * ROW - S.lanes.h / 2);
      draw();
      return [sx((Math.max(c.x0[i], S.view[0]) + Math.min(c.x1[i], S.view[1])) / 2), c.slot[i] * ROW - S.scroller.scrollTop + ROW / 2];
    },
  };
  root.addEventListener("keydown", keys);
  const released = () => { drag = null; measuring = null; };  // a press may end outside the canvases
  window.addEventListener("mouseup", released);
  const resized = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    if (widthFor(el.clientWidth) === S.fit) return;
    build(); draw();  // the kernel hears of the new width with the next view (no message here: see setView)
  }) : null;
  if (resized) resized.observe(el);
  model.send({kind: "hello"});
  return () => {
    model.off("msg:custom", onMsg); model.off("change:view", onView); model.off("change:focus", refind);
    for (const k of ["lanes", "groups", "width_px", "title"]) model.off("change:" + k, onSpec);
    for (const k of ["critical", "span_ms"]) model.off("change:" + k, onRedraw);
    if (frame) cancelAnimationFrame(frame);
    clearTimeout(timer);
    if (themed) themed.disconnect();
    if (resized) resized.disconnect();
    window.removeEventListener("mouseup", released);
  };
}

export default {render};
export const parts = {fmtNs, decode, hit, stackText, tipLines, barLabels, highlightBoxes, clampView, matcher,
                      matches, focusInView, focusText, focusTitle};  // for tests
