"""Timeline views as data: quads hold the tiles, lanes are labelled, hovers read plain fields, the highlight maps a
kernel to the op that launched it, the static pyramid stays in its budget and its callback is fixed code."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bokeh.embed import file_html
from bokeh.models import CustomJS, HoverTool, PlainText
from bokeh.plotting import figure
from bokeh.resources import INLINE

import aonkit
from aonkit import schema
from aonkit.analysis.correlation import gpu_links
from aonkit.timeline.detail import tile_details
from aonkit.timeline.labels import LABEL_JS
from aonkit.timeline.pyramid import timeline_pyramid
from aonkit.timeline.static import (
    DECODED_COLUMNS,
    LOD_JS,
    decode,
    decoded_glyphs,
    hover_texts,
    pick_parts,
    static_timeline,
)
from aonkit.timeline.static_hover import (
    HOVER_JS,
    LINK_HIGHLIGHT_JS,
    STATIC_BIN_TOOLTIPS,
    STATIC_EVENT_TOOLTIPS,
)
from aonkit.timeline.tiles import index_of, timeline_tiles
from aonkit.timeline.view import timeline_view
from aonkit.timeline.view_data import BIN_TOOLTIPS, EVENT_TOOLTIPS, GLYPH_PAD
from aonkit.timeline.view_figs import HIGHLIGHT_JS
from aonkit.units import fmt_ns

from .conftest import SAMPLE_TRACES, require_shared
from .views_checks import MARKUP_KERNEL, MARKUP_OP, TEX_KERNEL, assert_markup_only_in_data, markup_trace

GPU = SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"
QWEN = "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the callbacks' JavaScript")


@pytest.fixture(scope="module")
def sample() -> aonkit.Trace:
    return aonkit.load(GPU)


def _overlapping(index, a: int, b: int) -> set[int]:  # noqa: ANN001
    """Events on lanes overlapping ``[a, b)`` (the rule of :mod:`aonkit._kernels.binning`)."""
    hit = (index.ts < b) & (np.maximum(index.end, index.ts + 1) > a)
    return set(index.row[hit].tolist())


def _fields(tooltips: list[tuple[str, str]]) -> set[str]:
    return {m for _, t in tooltips for m in re.findall(r"@(\w+)", t)}


# --- live view ---------------------------------------------------------------------------------------------------


def test_view_holds_the_tiles_of_the_window(sample) -> None:  # noqa: ANN001
    v = timeline_view(sample, width_px=1200)
    idx = v.index
    want = timeline_tiles(idx, v.origin_ns, v.end_ns, 1200)  # the whole trace (the margin is clipped to it)
    d = v.source.data
    np.testing.assert_array_equal(d["row"], want["row"])
    np.testing.assert_array_equal(d["count"], want["count"])
    np.testing.assert_array_equal(d["rel_start_ns"] + v.origin_ns, want["start_ns"])
    np.testing.assert_allclose(d["left"], (want["start_ns"] - v.origin_ns) / 1e6)
    assert list(d["kind"]) == ["event" if c == 1 else "bin" for c in want["count"]]
    slot = v.lanes["slot"].to_numpy()[want["lane"]] + want["depth"]
    np.testing.assert_allclose(d["top"], slot + GLYPH_PAD)
    rows = int(idx.lanes["rows"].sum())
    assert len(d["row"]) <= rows * (2 * 1200 + 2) and int(want["count"].sum()) == len(idx.ts)
    assert {"bin", "event"} <= set(d["kind"])
    xr = v.figure.x_range
    assert xr.start == 0 and xr.end == pytest.approx((v.end_ns - v.origin_ns) / 1e6)  # ms since the trace start


def test_deep_zoom_shows_every_event_once(sample) -> None:  # noqa: ANN001
    v = timeline_view(sample, width_px=1600)
    v.margin = 0.0
    mid = int(np.median(v.index.ts))
    a, b = mid, mid + 200_000
    v.update(a, b, 1600)
    d = v.source.data
    assert (d["count"] == 1).all() and len(set(d["row"].tolist())) == len(d["row"])
    assert set(d["row"].tolist()) == _overlapping(v.index, a, b)
    assert d["rel_start_ns"].min() >= a - v.origin_ns and d["rel_end_ns"].max() <= b - v.origin_ns


def test_lanes_are_labelled_on_the_axis(sample) -> None:  # noqa: ANN001
    v = timeline_view(sample)
    labels = v.index.lanes["label"].tolist()
    assert labels[0] == "rank 0 GPU 0 stream 7" and labels[2].startswith("rank 0 CPU")
    axis = v.figure.yaxis[0]
    assert list(axis.ticker.ticks) == v.lanes["center"].tolist()
    over = axis.major_label_overrides
    assert [over[c].text for c in v.lanes["center"]] == labels
    assert all(isinstance(t, PlainText) for t in over.values())
    assert v.figure.y_range.start == v.lanes["rows"].sum() and v.figure.y_range.end == 0  # lane 0 on top


def test_hover_fields_present_and_plain(sample) -> None:  # noqa: ANN001
    v = timeline_view(sample)
    hovers = v.figure.select({"type": HoverTool})
    assert sorted(h.tooltips for h in hovers) == sorted([EVENT_TOOLTIPS, BIN_TOOLTIPS])
    d = v.source.data
    assert _fields(EVENT_TOOLTIPS) | _fields(BIN_TOOLTIPS) <= set(d)
    for col in ("name", "cat", "stack", "dur_text", "busy_text"):
        assert all(isinstance(s, str) for s in d[col])
    assert not any("{safe}" in t for h in hovers for _, t in h.tooltips)
    i = list(d["kind"]).index("bin")
    assert d["busy_text"][i] and d["count"][i] > 1
    k = list(d["cat"]).index("kernel")
    assert d["dur_text"][k].endswith(("us", "ms")) and d["correlation"][k] > 0


def test_update_replaces_the_data_in_place(sample) -> None:  # noqa: ANN001
    v = timeline_view(sample, width_px=800)
    src, counters = v.source, dict(v.counters)
    first = dict(src.data)
    src.selected.indices = [0]
    a = v.origin_ns + 40_000_000
    v.update(a, a + 2_000_000, 400)
    assert v.source is src and v.counters == counters and v.window == (a, a + 2_000_000, 400)
    assert len(src.data["row"]) != len(first["row"]) and src.selected.indices == []
    want = timeline_tiles(v.index, a - 1_000_000, a + 3_000_000, 800)  # margin 0.5 on each side, same px per ns
    np.testing.assert_array_equal(src.data["row"], want["row"])
    assert all(len(c) == len(src.data["row"]) for c in src.data.values())
    mem = v.counters["GPU 0 allocated"].data
    assert mem["x"][0] <= 40.0 and mem["x"][-1] == pytest.approx(43.0)  # value before the window, held to its end


def test_show_zooms_the_axis_to_the_window_it_draws(sample) -> None:  # noqa: ANN001
    # GIVEN the whole-trace view, WHEN a cell zooms to 2 ms from Python
    v = timeline_view(sample, width_px=800)
    a = v.origin_ns + 40_000_000
    v.show(a, a + 2_000_000)
    # THEN the axis shows that window (update() alone leaves the axis: the notebook drew 1% under a 100% axis)
    xr = v.figure.x_range
    assert (xr.start, xr.end) == pytest.approx((40.0, 42.0)) and v.range_window() == (a, a + 2_000_000)
    assert v.window == (a, a + 2_000_000, 800) and max(v.source.data["right"]) <= 43.0 + 1e-9
    with pytest.raises(ValueError, match="t0_ns < t1_ns"):
        v.show(a, a)


def test_counters_memory_and_samples(sample) -> None:  # noqa: ANN001
    from aonkit.analysis.memory import memory_events

    mem = memory_events(sample)
    t = aonkit.load(GPU)
    ts = np.linspace(mem["ts_ns"].min(), mem["ts_ns"].max(), 50).astype(np.int64)
    t.samples = pd.DataFrame({"ts_ns": ts, "device": 0,
                              "metric": pd.Categorical(["SM Active"] * 50), "value": np.arange(50.0)})  # fmt: skip
    v = timeline_view(t, width_px=600)
    assert list(v.counters) == ["GPU 0 allocated", "GPU 0 reserved", "SM Active (GPU 0)"]
    assert len(v.counter_figures) == 2 and all(f.x_range is v.figure.x_range for f in v.counter_figures)
    alloc = v.counters["GPU 0 allocated"].data
    assert set(alloc["value"]) <= set(mem["allocated_bytes"].astype(float)) and alloc["value_text"][0].endswith("B")
    assert max(alloc["value"]) == mem["allocated_bytes"].max() and len(alloc["x"]) <= 4 * 600 + 2
    sm = v.counters["SM Active (GPU 0)"].data
    assert list(sm["value"][:-1]) == list(range(50)) and set(sm["series"]) == {"SM Active (GPU 0)"}


def _highlight_box(t, v, row: int) -> tuple[float, float, float, float]:  # noqa: ANN001
    ev = t.events
    slot = v.lanes["slot"].iat[v.index.lane_of[row]] + v.index.depth_of[row]
    ts = (int(ev["ts_ns"].iat[row]) - v.origin_ns) / 1e6
    return ts, ts + int(ev["dur_ns"].iat[row]) / 1e6, slot + GLYPH_PAD, slot + 1 - GLYPH_PAD


def _check_highlight_mapping(t) -> None:  # noqa: ANN001
    v = timeline_view(t, width_px=1600)
    d = v.source.data
    links = gpu_links(t).set_index("gpu_row")
    gpu = np.flatnonzero(v.lanes["kind"].to_numpy()[d["lane"]] == "gpu")
    kernels = [i for i in gpu if d["row"][i] in links.index and links.at[d["row"][i], "op_row"] >= 0]
    assert len(kernels) > 10
    for i in kernels[:: max(1, len(kernels) // 50)]:
        op, launch = links.at[d["row"][i], "op_row"], links.at[d["row"][i], "launch_row"]
        assert d["launch_op"][i] == op and d["launch"][i] == launch
        assert t.events["cat"].iat[op] in schema.CPU_OP_CATS and v.index.lane_of[op] >= 0
        box = (d["op_left"][i], d["op_right"][i], d["op_top"][i], d["op_bottom"][i])
        np.testing.assert_allclose(box, _highlight_box(t, v, op))
        assert d["launch_left"][i] == pytest.approx(_highlight_box(t, v, launch)[0])
    cpu = np.flatnonzero(v.lanes["kind"].to_numpy()[d["lane"]] == "cpu")
    assert (d["launch_op"][cpu] == -1).all() and np.isnan(d["op_left"][cpu]).all()


def test_highlight_maps_kernel_to_launching_op_on_sample(sample) -> None:  # noqa: ANN001
    _check_highlight_mapping(sample)


def test_highlight_maps_kernel_to_launching_op_on_shared_trace() -> None:
    _check_highlight_mapping(aonkit.load(require_shared() / QWEN))


def test_highlight_callback_is_fixed_code(sample) -> None:  # noqa: ANN001
    v = timeline_view(sample)
    (cb,) = v.source.selected.js_property_callbacks["change:indices"]
    assert cb.code == HIGHLIGHT_JS and cb.args["src"] is v.source and cb.args["dst"] is v.highlight
    assert cb.args["targets"] == ["op", "launch"] and cb.args["row_columns"] == ["launch_op", "launch"]


# --- node runs of the fixed JavaScript --------------------------------------------------------------------------


def _js(value: object) -> str:
    """``value`` as a JavaScript literal (``NaN`` stays NaN)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}: {_js(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "[" + ",".join(_js(v) for v in value) + "]"
    if isinstance(value, (float, np.floating)) and np.isnan(value):
        return "NaN"
    return json.dumps(value.item() if isinstance(value, np.generic) else value)


def _node(body: str) -> object:
    out = subprocess.run(["node"], input=body, capture_output=True, text=True, check=True, timeout=120).stdout
    return json.loads(out)


@needs_node
def test_highlight_js_outlines_op_and_launch(sample) -> None:  # noqa: ANN001
    v = timeline_view(sample)
    d = v.source.data
    k = int(np.flatnonzero(d["launch_op"] >= 0)[0])
    cpu = int(np.flatnonzero(d["launch_op"] < 0)[0])
    cols = ["launch_op", "launch"] + [f"{t}_{s}" for t in ("op", "launch") for s in ("left", "right", "top", "bottom")]
    src = {"data": {c: list(d[c]) for c in cols}, "selected": {"indices": [k, cpu]}}
    script = (f"const f = new Function('src', 'dst', 'targets', 'row_columns', {json.dumps(HIGHLIGHT_JS)});\n"
              f"const src = {_js(src)}, dst = {{data: null}};\n"
              "f(src, dst, ['op', 'launch'], ['launch_op', 'launch']);\n"
              "console.log(JSON.stringify(dst.data));")  # fmt: skip
    got = _node(script)
    assert got["row"] == [d["launch_op"][k], d["launch"][k]] and got["target"] == ["op", "launch"]
    assert got["left"] == [d["op_left"][k], d["launch_left"][k]] and got["bottom"][0] == d["op_bottom"][k]


def _run_lod(pyr, windows: list[tuple[float, float]], px: int) -> list[dict]:  # noqa: ANN001
    from aonkit.timeline.static import pyramid_sources

    srcs = {k: {"data": {c: list(v) for c, v in s.data.items()}} for k, s in pyramid_sources(pyr).items()
            if k in ("glyphs", "tiles")}  # fmt: skip
    args = {**srcs, "fill": {"data": None}, "palette": {"data": {"color": list(pyr.palette)}}, "alphas": [0.9, 0.35],
            "chunk": 7, "span_ns": float(pyr.span_ns), "width_px": pyr.width_px, "max_level": pyr.levels - 1,
            "pad": GLYPH_PAD}  # fmt: skip
    names = [*args, "view", "highlight", "xr", "plot"]
    script = (f"const f = new Function({', '.join(json.dumps(n) for n in names)}, {json.dumps(LOD_JS)});\n"
              f"const a = {_js(args)};\n"
              f"const plot = {{inner_width: {px}}}, view = {{data: {{}}, selected: {{indices: [3]}}}};\n"
              "const highlight = {data: {left: [1]}}; const out = []; let writes = 0;\n"
              "let store = view.data; Object.defineProperty(view, 'data', {get: () => store, "
              "set: (v) => { writes++; store = v; }});\n"
              f"for (const [s, e] of {json.dumps(windows)}) {{\n"
              "  const xr = {start: s, end: e};\n"
              f"  f({', '.join(f'a[{json.dumps(n)}]' for n in names[:-4])}, view, highlight, xr, plot);\n"
              "  f(" + ", ".join(f"a[{json.dumps(n)}]" for n in names[:-4]) + ", view, highlight, xr, plot);\n"
              "  const data = Object.fromEntries(Object.entries(view.data).map(([c, v]) => [c, Array.from(v)]));\n"
              "  out.push({data, writes, sel: view.selected.indices, hl: highlight.data.left, typed: "
              "view.data.left instanceof Float64Array && view.data.link instanceof Int32Array, fill: {"
              "polys: a.fill.data.xs.map((p, i) => [Array.from(p[0][0]), Array.from(a.fill.data.ys[i][0][0])]), "
              "color: a.fill.data.color, alpha: a.fill.data.alpha}});\n"
              "}\nconsole.log(JSON.stringify(out));")  # fmt: skip
    return _node(script)  # type: ignore[return-value]


@needs_node
@pytest.mark.parametrize("budget", [10_000_000, 700_000])  # complete tiles; a partial deepest level
def test_lod_js_decodes_like_python(sample, budget: int) -> None:  # noqa: ANN001
    pyr = timeline_pyramid(sample, width_px=400, levels=6, budget_bytes=budget)
    span_ms = pyr.span_ns / 1e6
    windows = [(0.0, span_ms), (span_ms * 0.3, span_ms * 0.35), (span_ms / 2, span_ms / 2 + 0.05),
               (span_ms * 0.9, span_ms * 1.2), (0.0, span_ms / 3), (span_ms * 2, span_ms * 3)]  # fmt: skip
    got = _run_lod(pyr, windows, 500)
    for (lo, hi), run, writes in zip(windows, got, [1, 2, 3, 4, 5, 6]):
        want = decode(pyr, pick_parts(pyr, lo, hi, 500)[1])
        assert run["writes"] == writes  # the second call on the same view changes nothing
        assert run["sel"] == [] and run["hl"] == [] and run["typed"]
        assert list(run["data"]) == list(DECODED_COLUMNS) == list(want)
        for c in DECODED_COLUMNS:
            w = want[c]
            if c in ("left", "right", "top", "bottom"):
                np.testing.assert_allclose(np.array(run["data"][c], dtype=float), np.asarray(w, float), rtol=1e-12)
            else:
                assert list(run["data"][c]) == [x.item() if isinstance(x, np.generic) else x for x in w], c
        assert _fill_rects(run["fill"], list(pyr.palette)) == _layer_rects(want, len(pyr.palette))  # each once
    assert len(got[0]["data"]["left"]) > 100 and got[-1]["data"]["left"] == []
    assert len(got[0]["fill"]["polys"]) > 1 and len(set(got[0]["fill"]["color"])) > 1  # several polygons, colours


def _layer_rects(data: dict, colors: int) -> list[list[tuple]]:
    """Per fill layer (events, then bins; by colour code), the glyphs' rectangles ``(left, right, top, bottom)``."""
    layers: list[list[tuple]] = [[] for _ in range(2 * colors)]
    for g in range(len(data["left"])):
        f = (0 if data["count"][g] == 1 else colors) + int(data["color"][g])
        layers[f].append(tuple(float(data[c][g]) for c in ("left", "right", "top", "bottom")))
    return layers


def _fill_rects(fill: dict, palette: list[str]) -> list[list[tuple]]:
    """The rectangles the fill source's polygons paint, per layer (events then bins, by colour), in painting order.

    Each ring goes round its glyphs, then back over the corners; a layer's polygons come after the previous
    layer's (the order separate layers would paint in).
    """
    layers: list[list[tuple]] = [[] for _ in range(2 * len(palette))]
    last = -1
    for (x, y), color, alpha in zip(fill["polys"], fill["color"], fill["alpha"]):
        assert alpha in (0.9, 0.35)
        f = (0 if alpha == 0.9 else len(palette)) + palette.index(color)
        assert f >= last  # layers in order
        last = f
        m = len(x) // 6
        assert len(x) == len(y) == 6 * m and 0 < m <= 7
        for q in range(m):
            p = 5 * q
            assert x[p : p + 5] == [x[p], x[p + 1], x[p + 1], x[p], x[p]]
            assert y[p : p + 5] == [y[p], y[p], y[p + 2], y[p + 2], y[p]]
            assert (x[6 * m - 1 - q], y[6 * m - 1 - q]) == (x[p], y[p])  # the way back
            layers[f].append((x[p], x[p + 1], y[p], y[p + 2]))
    return layers


def _run_hover(pyr, calls: list[tuple[float, str]]) -> list[str]:  # noqa: ANN001
    """:data:`HOVER_JS` on ``(value, format)`` pairs, with the pyramid's names, categories and stack tree."""
    args = {"names": {"data": {"name": pyr.names}}, "cats": {"data": {"cat": pyr.cats}},
            "stacks": {"data": {"parent": pyr.stack_parent, "name": pyr.stack_name}}, "sep": " > "}  # fmt: skip
    script = (f"const f = new Function('names', 'cats', 'stacks', 'sep', 'value', 'format', 'special_vars', "
              f"{json.dumps(HOVER_JS)});\nconst a = {_js(args)};\n"
              f"console.log(JSON.stringify({_js(calls)}.map(([v, fm]) => "
              "f(a.names, a.cats, a.stacks, a.sep, v, fm, {}))));")  # fmt: skip
    return _node(script)  # type: ignore[return-value]


@needs_node
def test_hover_js_formats_codes_like_python(sample) -> None:  # noqa: ANN001
    pyr = timeline_pyramid(sample, width_px=400, levels=6)
    data = decode(pyr, pick_parts(pyr, 0.0, pyr.span_ns / 1e6, 400)[1])
    picks = [list(data["kind"]).index("bin"), int(np.flatnonzero(data["stack"] >= 0)[-1]),
             int(np.flatnonzero(data["link"] >= 0)[0]), *range(0, len(data["left"]), 97)]  # fmt: skip
    fields = ("name", "cat", "dur", "busy", "stack")
    calls = [(data[f][i].item(), "dur" if f == "busy" else f) for i in picks for f in fields]
    got = _run_hover(pyr, calls)
    want = [hover_texts(pyr, data, i)[f] for i in picks for f in fields]
    assert got == want
    assert any(" > " in t for t in want) and any(t.endswith("us") for t in want) and "" in want  # stacks, -1
    odd = [-1.0, 0.5, 1.5, 2.5, 999.5, 1234.5, 1235.0, 12_345.0, 2.5e6, 1.0e9, 1.2345e12]  # ties round half to even
    assert _run_hover(pyr, [(v, "dur") for v in odd]) == ["instant", *[fmt_ns(v) for v in odd[1:]]]


@needs_node
def test_link_highlight_js_outlines_op_and_launch(sample) -> None:  # noqa: ANN001
    pyr = timeline_pyramid(sample, width_px=400, levels=4)
    data = decode(pyr, pick_parts(pyr, 0.0, pyr.span_ns / 1e6, 400)[1])
    k, cpu = int(np.flatnonzero(data["link"] >= 0)[0]), int(np.flatnonzero(data["link"] < 0)[0])
    links = {c: pyr.links[c].to_numpy(np.float64) for c in pyr.links}
    src = {"data": {"link": data["link"]}, "selected": {"indices": [cpu, k]}}
    script = (f"const f = new Function('src', 'dst', 'links', 'targets', {json.dumps(LINK_HIGHLIGHT_JS)});\n"
              f"const src = {_js(src)}, dst = {{data: null}}, links = {{data: {_js(links)}}};\n"
              "f(src, dst, links, ['op', 'launch']);\nconsole.log(JSON.stringify(dst.data));")  # fmt: skip
    got = _node(script)
    c = int(data["link"][k])
    row = pyr.links.iloc[c]
    assert got["target"] == ["op", "launch"] and got["row"] == [row["op_row"], row["launch_row"]]
    assert got["left"] == [row["op_left"], row["launch_left"]]
    assert got["bottom"] == [row["op_bottom"], row["launch_bottom"]]
    event = pyr.rows[decoded_glyphs(pyr, pick_parts(pyr, 0.0, pyr.span_ns / 1e6, 400)[1])[k]]
    want = gpu_links(sample).set_index("gpu_row").loc[event]
    assert (row["op_row"], row["launch_row"]) == (want["op_row"], want["launch_row"])
    assert sample.events["cat"].iat[int(row["op_row"])] in schema.CPU_OP_CATS


# --- static pyramid -------------------------------------------------------------------------------------------


def test_pyramid_levels_tiles_and_codes(sample) -> None:  # noqa: ANN001
    pyr = timeline_pyramid(sample, width_px=800)
    idx = index_of(sample)
    tiles = pyr.tiles
    assert (np.diff(tiles["key"]) > 0).all() and tiles["key"].iat[0] == 0 and not pyr.truncated
    assert tiles.groupby("level")["complete"].all().iloc[-1]  # the deepest level needs nothing deeper
    rows = int(idx.lanes["rows"].sum())
    assert ((tiles["stop"] - tiles["start"]) <= rows * (2 * 800 + 2)).all()
    for r in [0, 3, len(tiles) // 2, len(tiles) - 1]:  # a tile is timeline_tiles of its span
        t = tiles.iloc[r]
        a = pyr.origin_ns + pyr.span_ns * int(t["tile"]) // 2 ** int(t["level"])
        b = pyr.origin_ns + pyr.span_ns * (int(t["tile"]) + 1) // 2 ** int(t["level"])
        want = tile_details(sample, idx, timeline_tiles(idx, a, b, 800))
        i = np.arange(t["start"], t["stop"])
        np.testing.assert_array_equal(pyr.rows[i], want["row"])
        dec = decode(pyr, [(r, 0.0, 0.0, False)])
        texts = [hover_texts(pyr, dec, g) for g in range(len(i))]
        assert [h["name"] for h in texts] == want["name"].tolist() and [h["cat"] for h in texts] == want["cat"].tolist()
        assert [h["stack"] for h in texts] == want["stack"].tolist()
        np.testing.assert_array_equal(dec["correlation"], want["correlation"])
        link, ok = dec["link"], dec["link"] >= 0
        for col, target in (("launch_op", "op_row"), ("launch", "launch_row")):
            got = np.where(ok, pyr.links[target].to_numpy()[np.maximum(link, 0)] if len(pyr.links) else -1, -1)
            np.testing.assert_array_equal(got, want[col])
        tile_ns = pyr.span_ns / 2 ** int(t["level"])  # float32 offsets within the tile
        np.testing.assert_allclose(dec["left"], (want["start_ns"] - pyr.origin_ns) / 1e6, atol=tile_ns * 1.2e-13)


def test_pyramid_deep_zoom_shows_every_event(sample) -> None:  # noqa: ANN001
    pyr = timeline_pyramid(sample, width_px=800)
    idx = index_of(sample)
    mid_ms = (int(np.median(idx.ts)) - pyr.origin_ns) / 1e6
    for width_ms in (0.05, 0.001):  # at and past the deepest level
        k, parts = pick_parts(pyr, mid_ms, mid_ms + width_ms, 800)
        assert k == pyr.levels - 1
        g = decoded_glyphs(pyr, parts)
        assert (pyr.glyphs["count"][g] == 1).all()
        lo, hi = parts[0][1], parts[-1][2]
        a, b = pyr.origin_ns + round(lo * 1e6), pyr.origin_ns + round(hi * 1e6)
        got = set(pyr.rows[g].tolist())
        assert _overlapping(idx, a + 1, b - 1) <= got <= _overlapping(idx, a - 1, b + 1)


def test_partial_level_falls_back_to_clipped_parents(sample) -> None:  # noqa: ANN001
    pyr = timeline_pyramid(sample, width_px=400, budget_bytes=700_000)
    per_level = pyr.tiles.groupby("level").size().tolist()
    assert pyr.truncated and per_level[:4] == [1, 2, 4, 8] and 0 < per_level[4] < 16  # the tiles hiding most
    span_ms = pyr.span_ns / 1e6
    k, parts = pick_parts(pyr, 0.0, span_ms, 400 * 16)  # wants level 4 everywhere
    assert k == 4 and any(c for *_, c in parts) and not all(c for *_, c in parts)
    assert parts[0][1] == 0.0 and parts[-1][2] == pytest.approx(span_ms)
    assert all(p[2] == pytest.approx(q[1]) for p, q in zip(parts, parts[1:]))  # a partition of the view
    data = decode(pyr, parts)
    for r, a, b, clip in parts:  # ancestors are cut to the span they stand for, so nothing is drawn twice
        if clip:
            inside = (np.asarray(data["left"]) >= a) & (np.asarray(data["right"]) <= b)
            assert inside.sum() == len(decode(pyr, [(r, a, b, True)])["left"])
    assert len(data["left"]) == sum(len(decode(pyr, [p])["left"]) for p in parts)


def test_full_zoom_glyphs_bounded(sample) -> None:  # noqa: ANN001
    pyr = timeline_pyramid(sample, width_px=1600)
    k, parts = pick_parts(pyr, 0.0, pyr.span_ns / 1e6, 1600)
    assert k == 0 and parts == [(0, 0.0, pyr.span_ns / 1e6, False)]
    n = len(decoded_glyphs(pyr, parts))
    assert n <= int(index_of(sample).lanes["rows"].sum()) * (2 * 1600 + 2)
    assert int(pyr.glyphs["count"][: pyr.tiles["stop"].iat[0]].sum()) == len(index_of(sample).ts)


def test_static_size_within_budget(sample) -> None:  # noqa: ANN001
    empty = figure()
    empty.scatter([0], [0])
    base = len(file_html(empty, INLINE, "x"))
    for budget in (700_000, 2_000_000):
        pyr = timeline_pyramid(sample, width_px=1600, budget_bytes=budget)
        assert pyr.nbytes <= budget and pyr.truncated and pyr.levels >= 1
        page = file_html(static_timeline(pyr), INLINE, "timeline")
        assert len(page) - base <= budget + 120_000  # model JSON (axes, tools, callbacks) beyond the data
    full = timeline_pyramid(sample, width_px=1600)
    assert not full.truncated and full.levels > pyr.levels
    assert "cdn.bokeh.org" not in page


def test_static_layout_sources_and_callback(sample) -> None:  # noqa: ANN001
    pyr = timeline_pyramid(sample, width_px=600, levels=4)
    lay = static_timeline(pyr)
    fig = lay.children[0]
    view = lay.select_one({"name": "timeline_quads"})
    assert set(view.data) == set(DECODED_COLUMNS) and all(len(v) == 0 for v in view.data.values())
    assert _fields(STATIC_EVENT_TOOLTIPS) | _fields(STATIC_BIN_TOOLTIPS) <= set(DECODED_COLUMNS)
    hovers = fig.select({"type": HoverTool})
    assert sorted(h.tooltips for h in hovers) == sorted([STATIC_EVENT_TOOLTIPS, STATIC_BIN_TOOLTIPS])
    for h in hovers:  # names, categories, times and stacks become text only in the formatter, from the tables
        assert set(h.formatters) == {"@name", "@cat", "@dur", "@busy", "@stack"}
        fmt = h.formatters["@name"]
        assert fmt.code == HOVER_JS and fmt.args["names"] is lay.select_one({"name": "timeline_names"})
    quads = [r for r in fig.renderers if r.data_source is view]  # hover and selection; the fill layers paint
    assert len(quads) == 2 and all(r.glyph.fill_color is None and r.glyph.line_color is None for r in quads)
    assert all(r.selection_glyph.line_color == "#000000" for r in quads)
    lod_args = fig.x_range.js_property_callbacks["change:start"][0].args
    fill = lod_args["fill"]
    assert fill.name == "timeline_fill" and lod_args["palette"].data["color"] == list(pyr.palette)
    assert lod_args["alphas"] == [0.9, 0.35]
    (layer,) = [r for r in fig.renderers if r.data_source is fill]  # one renderer paints every colour
    assert layer.glyph.fill_color == "color" and layer.glyph.fill_alpha == "alpha" and layer.glyph.line_color is None
    assert fig.renderers.index(layer) < fig.renderers.index(quads[0])  # under the outlines
    (hl,) = view.selected.js_property_callbacks["change:indices"]
    assert hl.code == LINK_HIGHLIGHT_JS and hl.args["links"] is lay.select_one({"name": "timeline_links"})
    cbs = fig.x_range.js_property_callbacks
    lod, names = cbs["change:start"]  # the level of detail, then the names on wide bars
    assert cbs["change:end"] == [lod, names] and lod.code == LOD_JS and names.code == LABEL_JS
    assert view.js_property_callbacks["change:data"] == [names] and names.args["quads"] is view
    assert names.args["names"] is lay.select_one({"name": "timeline_names"})
    labels = lay.select_one({"name": "timeline_labels"})
    assert names.args["labels"] is labels and labels.data == {"x": [], "y": [], "text": []}  # filled in the browser
    assert fig.x_range.renderers[0].name == "timeline_frame" and list(fig.x_range.bounds) == [0, pyr.span_ns / 1e6]
    texts = [v for k, v in lod.args.items() if k != "alphas" and not hasattr(v, "id")]
    assert len(texts) == 5 and all(isinstance(v, (int, float)) for v in texts)  # numbers only: no text reaches the code
    assert lod.args["glyphs"].data["x0"].dtype == np.float32 and lod.args["view"] is view
    assert len(lay.children) == 2  # lanes over memory


def test_markup_names_only_in_data(tmp_path: Path) -> None:
    t = aonkit.load(markup_trace(tmp_path))
    live = timeline_view(t, width_px=500)
    assert_markup_only_in_data(live.layout, MARKUP_KERNEL, MARKUP_OP, TEX_KERNEL)
    static = static_timeline(t, width_px=500)
    assert_markup_only_in_data(static, MARKUP_KERNEL, MARKUP_OP, TEX_KERNEL)
    for cb in static.select({"type": CustomJS}):
        assert MARKUP_KERNEL not in cb.code and "alert" not in cb.code
    page = file_html(static, INLINE, "timeline")
    assert MARKUP_KERNEL not in page and MARKUP_OP not in page and "cdn.bokeh.org" not in page
    names = static.select_one({"name": "timeline_names"}).data["name"]
    assert MARKUP_KERNEL in names
    for code in (LOD_JS, HIGHLIGHT_JS, HOVER_JS, LINK_HIGHLIGHT_JS):
        assert not any(n in code for n in t.events["name"].cat.categories)


# --- the static report in a real browser --------------------------------------------------------------------------

ERRORS_JS = """window.__aonkit_errors = [];
window.addEventListener("error", (e) => window.__aonkit_errors.push(String(e.message)));
window.addEventListener("unhandledrejection", (e) => window.__aonkit_errors.push(String(e.reason)));"""
PROBE_JS = """setTimeout(() => {
  const doc = Bokeh.documents[0], view = doc.get_model_by_name("timeline_quads");
  const fig = doc.roots()[0].children[0], xr = fig.x_range;
  const out = {load: view.data.left.length, range: [xr.start, xr.end], inner: fig.inner_width};
  const fmt = [...doc.all_models].find((m) => m.type === "CustomJSHover"), d = view.data;
  const i = d.stack.findIndex((n) => n >= 0), k = d.link.findIndex((c) => c >= 0);
  out.hover = [i, ...["name", "cat", "dur", "stack"].map((f) => fmt.format(d[f][i], f, {}))];
  const painted = (m) => m.name === "timeline_fill" ? m.data.xs.map((p) => p[0][0].length / 6) : [];
  out.painted = [...doc.all_models].flatMap(painted).reduce((a, b) => a + b, 0);
  view.selected.indices = [k];  // as a tap does
  setTimeout(() => {
    out.selected = [k, doc.get_model_by_name("timeline_highlight").data.row];
    xr.have_updated_interactively = true;  // as a zoom tool does
    xr.setv({start: 40, end: 40.2});
    setTimeout(() => {
      out.zoom = view.data.left.length; out.after = [xr.start, xr.end];
      out.errors = window.__aonkit_errors;
      const pre = document.createElement("pre");
      pre.textContent = "AONKIT" + JSON.stringify(out) + "END";
      document.body.appendChild(pre);
    }, 500);
  }, 300);
}, 2000);"""


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")), reason="needs chromium")
def test_static_report_fills_and_zooms_in_chromium(sample, tmp_path: Path) -> None:  # noqa: ANN001
    pyr = timeline_pyramid(sample, width_px=1000)
    page = file_html(static_timeline(pyr), INLINE, "timeline")
    page = page.replace("<head>", f"<head><script>{ERRORS_JS}</script>", 1)
    path = tmp_path / "timeline.html"
    path.write_text(page.replace("</body>", f"<script>{PROBE_JS}</script></body>"))
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    run = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,800",
                          "--virtual-time-budget=10000", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=180)  # fmt: skip
    got = json.loads(html.unescape(re.search(r"AONKIT(\{.*?\})END", run.stdout).group(1)))  # the DOM dump escapes
    assert got["errors"] == []
    span_ms = pyr.span_ns / 1e6
    assert got["range"] == pytest.approx([0, span_ms]) and got["after"] == [40, 40.2]
    full = decode(pyr, pick_parts(pyr, 0.0, span_ms, 1000)[1])
    assert got["load"] == len(full["left"]) == got["painted"]  # filled on load, every glyph in a fill layer
    i, *texts = got["hover"]
    want = hover_texts(pyr, full, i)
    assert texts == [want["name"], want["cat"], want["dur"], want["stack"]] and " > " in want["stack"]
    k, rows = got["selected"]
    link = pyr.links.iloc[int(full["link"][k])]
    assert rows == [link["op_row"], link["launch_row"]]  # the launching op and launch call are outlined
    assert got["zoom"] == len(decode(pyr, pick_parts(pyr, 40, 40.2, got["inner"])[1])["left"]) > 0
