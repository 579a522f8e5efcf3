"""The canvas timeline: its typed columns against the bokeh timeline's text ones, the widget's queries, the page."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import aonkit
from aonkit.analysis.correlation import gpu_links
from aonkit.timeline.canvas_data import canvas_frame, pack
from aonkit.timeline.detail import launch_maps, tile_details
from aonkit.timeline.tiles import index_of, timeline_tiles
from aonkit.timeline.view_data import glyph_frame, lane_slots, span
from aonkit.units import fmt_ns
from aonkit.widgets.timeline import TimelineCanvas

from .conftest import SAMPLE_TRACES as SAMPLES
from .conftest import require_shared
from .timeline_page import Recorded, render


def _decode(names: list[str], cols: dict, k: int) -> str:
    out = []
    while k >= 0:
        out.append(names[cols["anc_name"][k]])
        k = cols["anc_parent"][k]
    return " > ".join(out[::-1])


@pytest.mark.parametrize("name", ["gpu_synthetic_rank0.json.gz", "cpu_mlp.pt.trace.json.gz",
                                  "hta/df_index_resolver/df_index_resolver.json.gz"])  # fmt: skip
def test_the_columns_say_what_the_bokeh_timelines_text_says(name: str) -> None:
    trace = aonkit.load(require_shared("traces") / name if "/" in name else SAMPLES / name)
    index = index_of(trace)
    slots, (origin, end) = lane_slots(index), span(trace, index)
    links = gpu_links(trace)
    for t0, t1, px in ((origin, end, 1500), (origin + (end - origin) // 3, origin + (end - origin) // 3 + 2_000_000,
                                              900)):  # fmt: skip
        tiles = timeline_tiles(index, t0, t1, px)
        want = glyph_frame(trace, index, slots, tile_details(trace, index, tiles, links), origin)
        cols, tables = canvas_frame(trace, index, slots, tiles, launch_maps(trace, links), origin)
        names, cats, colors = (np.asarray(tables[k], object) for k in ("names", "cats", "colors"))
        assert list(names[cols["name"]]) == list(want["name"])
        assert list(cats[cols["cat"]]) == list(want["cat"])
        assert list(colors[cols["color"]]) == list(want["color"])
        assert [_decode(tables["names"], cols, k) for k in cols["stack"]] == list(want["stack"])
        np.testing.assert_array_equal(cols["x0"], want["left"])
        np.testing.assert_array_equal(cols["x1"], want["right"])
        np.testing.assert_array_equal(cols["slot"] + 0.08, want["top"])
        for mine, theirs in (("count", "count"), ("busy_ns", "busy_ns"), ("dur_ns", "dur_ns"), ("row", "row"),
                             ("correlation", "correlation"), ("op_x0", "op_left"), ("op_x1", "op_right"),
                             ("launch_x0", "launch_left"), ("launch_x1", "launch_right")):  # fmt: skip
            np.testing.assert_array_equal(np.asarray(cols[mine], np.float64), want[theirs].to_numpy(np.float64))
        np.testing.assert_array_equal(cols["op_slot"] + 0.08, want["op_top"])
        assert len(set(tables["names"])) == len(tables["names"])  # a table of distinct values


def test_pack_sends_little_endian_columns_that_read_back() -> None:
    cols = {"x0": np.array([0.5, math.nan]), "slot": np.array([3, -1], np.int64), "name": np.array([0, 2], np.int32)}
    spec, buffers = pack(cols)
    assert spec == {"x0": ["f8", 0], "slot": ["i4", 1], "name": ["i4", 2]}
    back = np.frombuffer(buffers[0], "<f8")
    assert back[0] == 0.5 and math.isnan(back[1])
    assert np.frombuffer(buffers[1], "<i4").tolist() == [3, -1]
    with pytest.raises(ValueError, match="outside int32"):  # never cut to fit
        pack({"row": np.array([2**31], np.int64)})


def test_the_widget_queries_a_window_only_when_its_glyphs_do_not_serve_it() -> None:
    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    w = Recorded(trace, width_px=1000)
    assert len(w.sent) == 1 and w.sent[0][0]["n"] == len(w.columns["x0"]) > 0
    msg, buffers = w.sent[0]
    assert len(buffers) == len(msg["columns"]) and msg["counters"]  # the sample trace records memory
    o = w.origin_ns
    # WHEN the page zooms to 2 ms (as a wheel sets the view): the kernel answers with that window and its margin
    w.view = [100.0, 102.0]
    assert len(w.sent) == 2 and w.window[0] == o + 99_000_000 and w.window[1] == o + 103_000_000
    assert w.window[2] == round(w.plot_px * 2)  # the margin at the view's scale
    assert (w.columns["count"] == 1).sum() > 0  # events one by one at this zoom
    # a pan inside the margin at the same scale needs no query; a zoom does, and so does a pan past the margin
    w.view = [100.5, 102.5]
    assert len(w.sent) == 2
    w.view = [100.5, 101.5]
    assert len(w.sent) == 3
    w.view = [103.0, 104.0]  # past the margin of [100.5, 101.5]
    assert len(w.sent) == 4
    w.zoom(o + 200_000_000, o + 201_000_000)
    assert len(w.sent) == 5 and w.view == [200.0, 201.0] and w.range_window() == (o + 200_000_000, o + 201_000_000)
    # a view that starts asks for the glyphs at hand: the last message again, nothing queried
    seq = w.seq
    assert not w.shown
    w._message(w, {"kind": "hello"}, [])
    assert w.shown
    assert len(w.sent) == 6 and w.sent[-1] == w.sent[-2] and w.seq == seq
    # a page drawn narrower than width_px says so with the view: the level of detail follows the width drawn
    w.set_state({"page_px": 410, "view": [300.0, 301.0]})
    assert w.plot_px == 410 and w.window[2] == 820  # the view and its margin at 410 px per ms
    n = len(w.sent)
    for bad in ([5.0, 1.0], [float("nan"), 3.0], [1.0], ["a", 2.0]):  # a view no page makes: ignored, no error
        w.set_state({"view": bad})
    assert len(w.sent) == n
    with pytest.raises(ValueError, match="t0_ns < t1_ns"):
        w.zoom(o + 5, o + 5)
    with pytest.raises(ValueError, match="width_px"):
        TimelineCanvas(trace, width_px=200)


def test_outline_and_retime() -> None:
    from aonkit.timeline import critical_boxes

    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    w = Recorded(trace, width_px=1000)
    path = pd.DataFrame({"row": w.columns["row"][w.columns["count"] == 1][:5].astype(np.int64)})
    w.outline(trace, path)
    want = critical_boxes(trace, path)
    assert w.critical["x0"] == want["left"].tolist() and len(w.critical["slot"]) == len(want["left"])
    np.testing.assert_allclose(np.asarray(w.critical["slot"]) + 0.08, want["top"])
    w.outline(trace, None)
    assert w.critical == {}
    with pytest.raises(ValueError, match="lanes differ"):
        w.retime(aonkit.load(SAMPLES / "cpu_mlp.pt.trace.json.gz"))
    n = len(w.sent)
    w.retime(trace)  # the same lanes: the same window again
    assert len(w.sent) == n + 1


# ---- the ES module in Chromium (tests/timeline_page.py) -----------------------------------------------------------
@pytest.fixture
def page(timeline_page):
    """The module's Chromium page (conftest's ``timeline_page``)."""
    return timeline_page


def test_the_page_decodes_the_glyphs_and_says_what_python_says(page) -> None:
    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    w = Recorded(trace, width_px=1000)
    w.zoom(w.origin_ns + 100_000_000, w.origin_ns + 104_000_000)
    ds = render(page, w)
    assert ds["seq"] == str(w.seq) and ds["glyphs"] == str(len(w.columns["x0"])) and int(ds["labels"]) > 0
    details = tile_details(trace, w.timeline.index, timeline_tiles(w.timeline.index, *w.window), gpu_links(trace))
    # every glyph's hover, as the bokeh timeline's tooltips wrote it from the kernel's text columns
    tips = page.evaluate("() => { const d = window.el.aonTimeline.tiles;"
                         " return Array.from({length: d.n}, (_, i) => window.aon.parts.tipLines(d, i)); }")
    for i, lines in enumerate(tips):
        r = details.iloc[i]
        got = dict((k, v) for k, v in lines)
        dur = fmt_ns(r["dur_ns"]) if r["dur_ns"] >= 0 else "instant"
        if r["count"] == 1:
            assert lines[0] == ["", r["name"]] and got["category"] == r["cat"] and got["duration"] == dur
            launch = trace.events["ts_ns"].to_numpy()[r["launch"]] if r["launch"] >= 0 else None
            assert got.get("launched") == (None if launch is None else f"{fmt_ns(r['start_ns'] - launch)} before it "
                                                                      "started")
        else:
            assert got["longest"] == r["name"] and got["its duration"] == dur
            assert got["events"] == f"{r['count']:,} in this pixel, busy {fmt_ns(r['busy_ns'])}"
        assert got.get("op stack", "") == r["stack"]
    # fmtNs is aonkit.units.fmt_ns, the rounding edges included
    values = [0, 1, 999, 1000, 1234, 6125, 6135, 99_950, 999_499, 999_500, 1e6, 2.5e9, 3.6e12, -1500, -6125,
              1_234_500, 8_765_500]
    assert page.evaluate("(v) => v.map(window.aon.parts.fmtNs)", values) == [fmt_ns(v) for v in values]


def test_a_click_outlines_the_launch_and_a_wheel_zooms_at_once_then_asks_the_kernel(page) -> None:
    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    w = Recorded(trace, width_px=1000)
    w.zoom(w.origin_ns + 100_000_000, w.origin_ns + 104_000_000)
    render(page, w)
    c = w.columns
    inside = (c["count"] == 1) & ~np.isnan(c["launch_x0"]) & (c["x0"] >= 100.0) & (c["x1"] <= 104.0)
    i = int(np.flatnonzero(inside)[np.argmax((c["x1"] - c["x0"])[inside])])  # the widest launched kernel in view
    box = page.evaluate("() => { const r = window.el.querySelector('.aon-timeline-canvas').getBoundingClientRect();"
                        " return [r.x, r.y]; }")
    x, y = page.evaluate(f"() => window.el.aonTimeline.screenOf({i})")
    # the glyph's own colour is under it (above its name: 6 px up from its middle, 2 px into its 16 px row)
    color = w.tables["colors"][w.columns["color"][i]]
    pixel = page.evaluate("""([x, y]) => { const c = window.el.querySelector('.aon-timeline-canvas');
      const k = c.width / c.getBoundingClientRect().width;
      return Array.from(c.getContext('2d').getImageData(Math.round(x * k), Math.round(y * k), 1, 1).data); }""",
                          [x, y - 6])  # fmt: skip
    want = [int(color[k:k + 2], 16) for k in (1, 3, 5)]
    assert all(abs(p - q * 0.9 - 255 * 0.1) <= 3 for p, q in zip(pixel[:3], want)), (pixel, want)  # alpha 0.9
    page.mouse.click(box[0] + x, box[1] + y)
    page.wait_for_timeout(50)
    ds = page.evaluate("() => ({...window.el.dataset})")
    assert ds["selected"] == str(int(w.columns["row"][i])) and int(ds["highlight"]) >= 1
    # WHEN the wheel turns: the view changes in the next frame, and the kernel is asked once the wheel rests
    before = page.evaluate("() => window.el.aonTimeline.view")
    page.mouse.move(box[0] + x, box[1] + y)
    page.mouse.wheel(0, 200)
    page.wait_for_timeout(30)
    after = page.evaluate("() => window.el.aonTimeline.view")
    assert after[1] - after[0] > (before[1] - before[0]) * 1.5
    page.wait_for_timeout(300)
    saved = page.evaluate("() => window.saved")
    assert saved and saved[-1] == pytest.approx(after)
    # a double click shows the whole trace
    page.mouse.dblclick(box[0] + x, box[1] + y)
    page.wait_for_timeout(30)
    assert page.evaluate("() => window.el.aonTimeline.view") == pytest.approx([0.0, w.span_ms])


def test_shift_drag_measures_a_range_and_keys_zoom_and_pan(page) -> None:
    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    w = Recorded(trace, width_px=1000)
    w.zoom(w.origin_ns + 100_000_000, w.origin_ns + 110_000_000)
    render(page, w)
    box = page.evaluate("() => { const r = window.el.querySelector('.aon-timeline-canvas').getBoundingClientRect();"
                        " return [r.x, r.y]; }")
    gutter, plot = w.geometry["gutter"], w.plot_px
    x0, x1 = gutter + plot * 0.25, gutter + plot * 0.75  # 102.5 ms to 107.5 ms
    # WHEN shift+drag over the lanes
    page.keyboard.down("Shift")
    page.mouse.move(box[0] + x0, box[1] + 20)
    page.mouse.down()
    page.mouse.move(box[0] + x1, box[1] + 60, steps=5)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_timeout(50)
    # THEN the range is measured (the view stays), and the axis says its length
    lo, hi = map(float, page.evaluate("() => window.el.dataset.measure").split(","))
    assert lo == pytest.approx(102.5, abs=0.02) and hi == pytest.approx(107.5, abs=0.02)
    assert page.evaluate("() => window.el.aonTimeline.view") == pytest.approx([100.0, 110.0])
    assert page.evaluate("() => window.el.dataset.selected") == ""  # a measure is not a click
    # WHEN keys are pressed: W zooms in around the pointer, D pans right, Escape drops the measure
    page.keyboard.press("w")
    v = page.evaluate("() => window.el.aonTimeline.view")
    assert v[1] - v[0] == pytest.approx(8.0) and v[0] < 107.5 < v[1]
    page.keyboard.press("d")
    v2 = page.evaluate("() => window.el.aonTimeline.view")
    assert v2[0] == pytest.approx(v[0] + 1.6) and v2[1] - v2[0] == pytest.approx(8.0)
    page.keyboard.press("Escape")
    page.wait_for_timeout(50)
    assert page.evaluate("() => window.el.dataset.measure") == ""
    # the colour key is text, one entry per colour the timelines draw
    key = page.evaluate("() => window.el.querySelector('.aon-timeline-key').innerText")
    assert "GPU: computation" in key and "CPU op" in key


def test_in_a_narrow_output_area_it_draws_as_wide_as_the_area(page) -> None:
    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    w = Recorded(trace, width_px=1200)
    page.evaluate("() => { document.getElementById('host').style.width = '700px'; }")
    try:
        render(page, w)
        width = page.evaluate("() => window.el.querySelector('.aon-timeline-canvas').getBoundingClientRect().width")
        assert width == 700  # no sideways scroll
        box = page.evaluate("() => { const r = window.el.querySelector('.aon-timeline-canvas')"
                            ".getBoundingClientRect(); return [r.x, r.y]; }")
        page.mouse.move(box[0] + 400, box[1] + 20)
        page.mouse.wheel(0, -200)
        page.wait_for_timeout(300)
        assert page.evaluate("() => window.state.page_px") == 700 - w.geometry["gutter"]  # sent with the view
    finally:
        page.evaluate("() => { document.getElementById('host').style.width = ''; }")


def test_a_gpu_bundles_many_counters_show_the_key_ones_and_fold_the_rest(page) -> None:
    from aonkit.timeline.canvas import KEY_COUNTERS

    trace = aonkit.load(SAMPLES / "cuda" / "profile")  # an NVML/GPM recording of an H200: some 35 metrics
    w = Recorded(trace, width_px=1000)
    names = [g["name"] for g in w.groups]
    opened = [g["name"] for g in w.groups if g["open"]]
    assert len(names) > 20 and set(opened) == set(KEY_COUNTERS) & set(names) and "gpu_util_pct" in opened
    assert all(g["open"] for g in Recorded(aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")).groups)  # few: all
    render(page, w)
    folded = len(names) - len(opened)
    got = page.evaluate("""() => { const m = window.el.querySelector('.aon-timeline-more');
      return [m.querySelector('summary').textContent, m.querySelectorAll('canvas').length, m.open]; }""")
    assert got == [f"{folded} more counters", folded, False]

    def ink() -> int:  # painted pixels of the first folded chart that are not its background
        return page.evaluate("""() => { const c = window.el.querySelector('.aon-timeline-more canvas');
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0;
          for (let i = 0; i < d.length; i += 4) if (d[i + 3] && Math.min(d[i], d[i + 1], d[i + 2]) < 250) n++;
          return n; }""")

    assert ink() == 0  # folded: not drawn
    page.evaluate("() => { window.el.querySelector('.aon-timeline-more').open = true; }")
    page.wait_for_timeout(100)
    assert ink() > 100  # opened: drawn


def test_the_page_shows_no_code_words_in_its_text(page) -> None:
    """The widget's own words (key, help, folded list) are plain text: no ``S.`` or ``undefined`` from the code."""
    trace = aonkit.load(SAMPLES / "cuda" / "profile")
    render(page, Recorded(trace, width_px=1000))
    text = page.evaluate("() => window.el.innerText")
    assert "shift+drag: measure" in text and "more counters" in text
    assert "S." not in text and "undefined" not in text and "NaN" not in text


def test_the_find_box_counts_and_keeps_what_matches_in_view(page) -> None:
    import re

    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    w = Recorded(trace, width_px=1000)
    w.zoom(w.origin_ns + 100_000_000, w.origin_ns + 140_000_000)
    render(page, w)
    c, names = w.columns, np.asarray(w.tables["names"], object)
    slots = c["slot"] < 640 // 16 + 2  # the rows the lanes' canvas shows unscrolled
    inside = (c["x1"] >= 100.0) & (c["x0"] <= 140.0) & slots

    def found(text: str) -> str:
        page.fill(".aon-timeline-find", text)
        page.wait_for_timeout(60)
        return page.evaluate("() => window.el.dataset.found")

    # a substring, case-insensitively; then a regex (its names tested in Python the same way)
    want = sum(1 for n, k in zip(names[c["name"]], inside) if k and "nccl" in n.lower())
    assert want > 0 and found("NCCL") == str(want)
    want = sum(1 for n, k in zip(names[c["name"]], inside) if k and re.search(r"^aten::(linear|addmm)$", n))
    assert found("/^aten::(linear|addmm)$/") == str(want)
    assert page.evaluate("() => window.el.querySelector('.aon-timeline-count').textContent") == f"{want} in view"
    # a regex that does not compile says so and finds nothing; typing never moves the view
    before = page.evaluate("() => window.el.aonTimeline.view")
    assert found("/(/") == "" and page.evaluate(
        "() => window.el.querySelector('.aon-timeline-find').classList.contains('aon-timeline-bad')")
    page.focus(".aon-timeline-find")
    page.keyboard.type("dddd")
    assert page.evaluate("() => window.el.aonTimeline.view") == before
    assert found("") == ""
