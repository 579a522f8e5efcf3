// aonkit's canvas timeline, part 4 of 5 (after charts_axes.js, timeline_data.js and timeline_draw.js, before
// timeline.js): the bar above the lanes (colour key, find box, the focus's words and buttons, help) and what the
// focus adds (aonkit.timeline.focus): its words, its count in view, the strip of where its events are.

function keyBar(legend, findText, on) {
  // the bar's elements; `on`: input(text) as the find box changes, find(text) on Enter, step(dir), unfocus()
  const key = document.createElement("div");  // swatches and text nodes: names are data, never HTML
  key.className = "aon-timeline-key";
  for (const [label, color] of legend) {
    const item = document.createElement("span"), sw = document.createElement("span");
    sw.className = "aon-timeline-swatch";
    sw.style.background = color;
    item.append(sw, document.createTextNode(label));
    key.appendChild(item);
  }
  const find = document.createElement("input");
  find.type = "search";
  find.className = "aon-timeline-find";
  find.placeholder = "find: name or /regex/";
  find.value = findText;
  find.title = "Enter: focus every name that matches, over the whole trace (then N/P: next/previous)";
  find.addEventListener("input", () => on.input(find.value));
  find.addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter") return;
    ev.preventDefault();
    on.find(find.value);
  });
  const count = document.createElement("span");
  count.className = "aon-timeline-count";
  key.append(find, count);
  const bar = document.createElement("span");  // the focus: what it holds, and its buttons
  bar.className = "aon-timeline-focus";
  const words = document.createElement("span");
  words.className = "aon-timeline-focus-text";
  bar.appendChild(words);
  for (const [label, title, act] of [["\u25C0", "previous (P)", () => on.step(-1)], ["\u25B6", "next (N)", () => on.step(1)],
                                     ["longest", "the longest one (L)", () => on.step(0)],
                                     ["\u2715", "clear the focus (Escape)", () => on.unfocus()]]) {
    const b = document.createElement("button");
    b.type = "button"; b.textContent = label; b.title = title;
    b.addEventListener("click", act);
    bar.appendChild(b);
  }
  key.appendChild(bar);
  const help = document.createElement("span");
  help.className = "aon-timeline-help";
  help.textContent = "wheel: zoom · drag: pan · shift+drag: measure · click: select · W/S/A/D · dbl-click: all" +
                     " · F or Enter in find: focus, N/P/L: next/previous/longest";
  key.appendChild(help);
  return key;
}

function focusInView(f, lo, hi) {
  // the focused events of the boxes that reach into [lo, hi] ms (a box at the view's edge counts whole)
  let n = 0;
  if (!f) return n;
  for (let i = 0; i < f.x0.length; i++) if (f.x1[i] >= lo && f.x0[i] <= hi) n += f.count[i];
  return n;
}

function focusText(f, inView, place, rough, launched) {
  // the focus bar's words: how many events, their time (in all, mean, longest), the GPU work they launched, how
  // many in view (rough: from the boxes drawn, while the kernel's exact count for the view is on its way), which
  // one a step showed (launched: a step through the GPU work)
  if (!f) return "";
  if (!f.n) return "focus: no event on the lanes has that name";
  const nth = place >= 0 ? `event ${(place + 1).toLocaleString("en-US")} of ` : "";
  const head = launched ? "" : nth;
  const st = f.stats || {};
  const gpu = f.launched ? ` · the GPU work they launched: ${launched ? nth : ""}` +
                           `${f.launched.toLocaleString("en-US")} event${f.launched === 1 ? "" : "s"}, ` +
                           `${fmtNs(f.launched_busy_ns)}` : "";
  return `focus: ${head}${f.n.toLocaleString("en-US")} event${f.n === 1 ? "" : "s"} of ${f.names} ` +
         `name${f.names === 1 ? "" : "s"}, ${fmtNs(f.busy_ns)} in all (mean ${fmtNs(st.mean)}, longest ` +
         `${fmtNs(st.max)})${gpu} · ${rough ? "about " : ""}${inView.toLocaleString("en-US")} in view`;
}

function focusTitle(f) {
  // the focus bar's hover: the durations' spread
  const st = (f && f.stats) || {};
  if (!f || !f.n) return "";
  return ["min", "p50", "p90", "p99", "max"].map((k) => `${k} ${fmtNs(st[k])}`).join(" · ");
}

function drawStrip(S) {
  // where the focused events are over the whole trace (darker: more of them start there), the view boxed on it
  const {strip, tiles, pal, G} = S, {ctx} = strip, f = tiles && tiles.focus;
  strip.canvas.style.display = f ? "" : "none";
  if (!f) return;
  clear(S, strip);
  const W = strip.w - G, bins = f.overview, span = Math.max(S.model.get("span_ms"), 1e-6);
  let most = 0;
  for (const v of bins) most = Math.max(most, v);
  ctx.fillStyle = FOCUS;
  for (let i = 0; i < bins.length && most > 0; i++) {
    if (!bins[i]) continue;
    ctx.globalAlpha = 0.25 + 0.75 * Math.sqrt(bins[i] / most);
    ctx.fillRect(G + i * W / bins.length, 1, Math.max(W / bins.length, 1), STRIP_PX - 2);
  }
  ctx.globalAlpha = 1;
  ctx.strokeStyle = pal.text; ctx.lineWidth = 1;
  const a = G + S.view[0] / span * W, b = G + S.view[1] / span * W;
  ctx.strokeRect(Math.round(a) + 0.5, 0.5, Math.max(Math.round(b - a), 2), STRIP_PX - 1);
  ctx.fillStyle = pal.text; ctx.font = "9px system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
  ctx.textBaseline = "middle"; ctx.textAlign = "left";
  ctx.fillText("focused, over the trace", 4, STRIP_PX / 2);
}
