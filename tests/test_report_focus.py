"""The report's focus: a table pick outlined on the static timeline, from boxes stored for every table name."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit.analysis.correlation import gpu_links
from aonkit.analysis.overview import overview
from aonkit.report.html_report import write_report
from aonkit.timeline import timeline_pyramid
from aonkit.timeline.detail import launch_maps
from aonkit.timeline.focus import focus_of
from aonkit.timeline.static_focus import HINT, finest_unit, focus_data
from aonkit.timeline.tiles import index_of
from aonkit.units import fmt_ns

from .browser import MARKUP, browser_page
from .conftest import SAMPLE_TRACES, require_shared
from .test_browser import markup_trace


def table_names(trace: aonkit.Trace) -> list[str]:
    ov = overview(trace)
    return list(dict.fromkeys([*map(str, ov.kernels["name"]), *map(str, ov.ops["op_name"])]))


@pytest.mark.parametrize("name", ["gpu_synthetic_rank0.json.gz", "hta/df_index_resolver/df_index_resolver.json.gz"])
def test_the_stored_boxes_are_each_names_marks_at_the_deepest_level(name: str) -> None:
    trace = aonkit.load(require_shared("traces") / name if "/" in name else SAMPLE_TRACES / name)
    pyr = timeline_pyramid(trace, 1400)
    names = table_names(trace)
    table, boxes, unit = focus_data(trace, pyr, names)
    index, ev = index_of(trace), trace.events
    launch_of = launch_maps(trace, gpu_links(trace))[0]
    on_lane = ev["name"].astype(str).to_numpy()[index.row]
    assert unit == pytest.approx(finest_unit(pyr))
    assert table["name"].tolist() == [n for n in names if n in set(on_lane)]  # those with an event on the lanes
    for r in table.itertuples():
        # its counts and times are those of its events on the lanes, exactly
        mine = index.row[on_lane == r.name]
        dur = np.maximum(ev["dur_ns"].to_numpy()[mine], 0)
        assert (r.n, r.busy_ns, r.max_ns) == (len(mine), dur.sum(), dur.max()), r.name
        k = slice(r.start, r.stop)
        assert boxes["count"][k].sum() == r.n  # every event in exactly one box
        # the boxes are the focus's marks at the deepest level's width, in whole units around them
        f = focus_of(trace, index, pyr.lanes, [r.name], launch_of)
        m = f.marks(pyr.origin_ns, pyr.origin_ns + pyr.span_ns, round(pyr.span_ns / unit), pyr.origin_ns)
        assert boxes["slot"][k].tolist() == m["slot"].tolist() and boxes["count"][k].tolist() == m["count"].tolist()
        assert (boxes["q0"][k] * unit <= np.round(m["x0"] * 1e6) + 1e-6).all()
        assert (boxes["q1"][k] * unit >= np.round(m["x1"] * 1e6) - 1e-6).all()
        assert (boxes["q1"][k] - boxes["q0"][k] >= 1).all()
        assert r.launched_n == len(f.launched.ts) and r.launched_ns == f.launched.busy_ns
        assert boxes["launched"][k].sum() == r.launched_n  # every launched event in exactly one box too
        longest = int(np.argmax(f.dur[f.order]))
        assert r.longest_x0 == (f.ts[f.order[longest]] - pyr.origin_ns) / 1e6
    assert table["launched_n"].gt(0).any()  # the ops' kernels


def test_a_small_budget_coarsens_the_boxes_and_keeps_every_count() -> None:
    trace = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    pyr = timeline_pyramid(trace, 1400)
    full, fb, unit = focus_data(trace, pyr, table_names(trace))
    small, sb, coarse = focus_data(trace, pyr, table_names(trace), budget=len(fb["q0"]) * 3 // 4)
    assert 2 * unit <= coarse < pyr.span_ns / pyr.width_px and len(sb["q0"]) <= len(fb["q0"]) * 3 // 4
    _, tb, top = focus_data(trace, pyr, table_names(trace), budget=1)  # never coarser than the whole-trace view
    assert top == pytest.approx(pyr.span_ns / pyr.width_px) and tb["count"].sum() == fb["count"].sum()
    assert small["n"].tolist() == full["n"].tolist() and sb["count"].sum() == fb["count"].sum()


STATE = """() => { const d = Bokeh.documents[0], g = (n) => d.get_model_by_name(n), dr = g('timeline_focus').data;
  const xr = g('timeline_x');
  return {boxes: dr.left.length, count: Array.from(dr.count).reduce((a, b) => a + b, 0), start: xr.start,
          end: xr.end, bar: g('timeline_focus_bar').text}; }"""


STRIP = """() => { const g = (n) => Bokeh.documents[0].get_model_by_name(n), v = g('timeline_focus_view_box');
  return {count: Array.from(g('timeline_focus_strip').data.count), view: [v.left, v.right]}; }"""
CURRENT = """() => { const c = Bokeh.documents[0].get_model_by_name('timeline_focus_current').data;
  return c.box.length ? {box: c.box[0], rank: c.rank[0], left: c.left[0], right: c.right[0], n: c.count[0],
                        gpu: c.gpu[0]} : {box: -1}; }"""


def test_a_kernel_picked_in_the_reports_table_is_outlined_and_counted_on_its_timeline(tmp_path: Path) -> None:
    from aonkit.analysis.kernels import kernel_stats

    trace = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    stats = kernel_stats(trace).set_index("name")
    page_path = write_report(trace, tmp_path / "r.html")
    with browser_page() as (page, blocked):
        page.goto(page_path.as_uri())
        page.wait_for_selector("canvas", timeout=30_000)
        page.wait_for_timeout(1500)
        assert page.evaluate(STATE)["boxes"] == 0 and page.evaluate(STATE)["bar"] == HINT
        # WHEN a row of the kernel table is clicked
        row = page.locator(".slick-row:visible").nth(2)
        name = row.locator(".slick-cell").first.text_content().strip()
        row.locator(".slick-cell").nth(2).click()
        page.wait_for_timeout(500)
        # THEN each of its events is in one outlined box, and the bar says how many and how long
        st = page.evaluate(STATE)
        k = stats.loc[name]
        assert st["count"] == k["count"] and 0 < st["boxes"] <= k["count"]
        assert f"{int(k['count']):,} events, {fmt_ns(k['total_ns'])} in all" in st["bar"]
        assert f"longest {fmt_ns(k['max_ns'])}" in st["bar"]
        strip = page.evaluate(STRIP)  # where they are over the whole trace: every event in one bin
        assert sum(strip["count"]) == k["count"] and strip["view"] == [st["start"], st["end"]]
        # WHEN "longest" is pressed THEN the view narrows onto the longest and counts what it holds
        page.get_by_role("button", name="longest").click()
        page.wait_for_timeout(500)
        z = {**page.evaluate(STATE), **page.evaluate(CURRENT)}
        assert z["end"] - z["start"] < st["end"] - st["start"] and 0 < z["count"] < st["count"]
        assert z["start"] <= z["left"] and z["right"] <= z["end"]
        assert f"about {z['count']} in view" in z["bar"]
        # WHEN the strip is clicked THEN the view is centred there, as wide as it was, and the strip shows it
        width = z["end"] - z["start"]
        page.evaluate("""(x) => { const f = Bokeh.documents[0].get_model_by_name('timeline_focus_strip_fig');
          const {Tap} = Bokeh.require('core/bokeh_events');
          f.trigger_event(new Tap(0, 0, x, 0.5, {shift: false, ctrl: false, alt: false})); }""", 100.0)
        page.wait_for_timeout(300)
        moved = page.evaluate(STATE)
        assert moved["start"] + width / 2 == pytest.approx(100.0)
        assert moved["end"] - moved["start"] == pytest.approx(width)
        assert page.evaluate(STRIP)["view"] == [moved["start"], moved["end"]]
        page.get_by_role("button", name="longest").click()
        page.wait_for_timeout(300)
        # WHEN ▶ and ◀ are pressed THEN they show the name's boxes in time, from the longest's
        page_steps = []
        for label in ("▶", "▶", "◀", "◀", "◀"):
            page.get_by_role("button", name=label, exact=True).click()
            page.wait_for_timeout(250)
            page_steps.append(page.evaluate(CURRENT))
        table, boxes, _ = focus_data(trace, timeline_pyramid(trace, 1400), table_names(trace))  # as the page's
        mine = np.arange(*table.set_index("name").loc[name, ["start", "stop"]])
        mine = mine[boxes["count"][mine] > 0]
        order = mine[np.lexsort((boxes["slot"][mine], boxes["q0"][mine] + boxes["q1"][mine]))].tolist()
        at = order.index(z["box"])  # "longest" showed the box holding the longest event
        want = [order[(at + d) % len(order)] for d in (1, 2, 1, 0, -1)]
        assert [c["box"] for c in page_steps] == want and [c["rank"] for c in page_steps] == [w + 1 for w in
                                                                                             map(order.index, want)]
        last = page.evaluate(STATE)
        assert f"· at {page_steps[-1]['rank']} of {len(order)}" in last["bar"]
        assert last["start"] <= page_steps[-1]["left"] and page_steps[-1]["right"] <= last["end"]
        # WHEN a second row is added with ctrl THEN both are outlined and summed
        other = page.locator(".slick-row:visible").nth(3)
        second = other.locator(".slick-cell").first.text_content().strip()
        other.locator(".slick-cell").nth(2).click(modifiers=["Control"])
        page.wait_for_timeout(500)
        both = page.evaluate(STATE)
        total = int(k["count"] + stats.loc[second, "count"])
        assert " and 1 more: " in both["bar"] and f"{total:,} events" in both["bar"]
        # WHEN both are clicked away with ctrl THEN the focus is gone
        for r in (other, row):
            r.locator(".slick-cell").nth(2).click(modifiers=["Control"])
            page.wait_for_timeout(300)
        gone = page.evaluate(STATE)
        assert gone["boxes"] == 0 and gone["bar"] == HINT and page.evaluate(STRIP)["count"] == []
        # the top kernel has boxes of two events (closer than the deepest level's pixel): the strip counts events
        first = page.locator(".slick-row:visible").first
        top = first.locator(".slick-cell").first.text_content().strip()
        first.locator(".slick-cell").nth(2).click()
        page.wait_for_timeout(400)
        assert sum(page.evaluate(STRIP)["count"]) == stats.loc[top, "count"] > page.evaluate(STATE)["boxes"]
        assert not blocked and not page.aonkit_errors, page.aonkit_errors


def test_an_op_picked_in_the_report_shows_the_gpu_work_it_launched_and_markup_stays_text(tmp_path: Path) -> None:
    trace = aonkit.load(markup_trace(tmp_path / "m.json"))
    page_path = write_report(trace, tmp_path / "r.html")
    with browser_page() as (page, blocked):
        page.goto(page_path.as_uri())
        page.wait_for_selector("canvas", timeout=30_000)
        page.wait_for_timeout(1500)
        page.locator(".bk-tab", has_text="ops").click()
        page.wait_for_timeout(300)
        page.locator(".slick-row:visible", has_text="aten::mm").locator(".slick-cell").nth(1).click()
        page.wait_for_timeout(500)
        st = page.evaluate(STATE)
        assert st["bar"].startswith("aten::mm: 1 event, ") and "in all" not in st["bar"]
        assert re.search(r"; it launched \d+ GPU events?, ", st["bar"]), st["bar"]
        assert st["count"] == 1 and st["boxes"] >= 2  # the op's own box and its kernels' (counting none)
        # WHEN "GPU ▶" and "◀ GPU" are pressed THEN they step through the boxes of the kernels it launched
        steps = []
        for label in ("GPU ▶", "GPU ▶", "GPU ▶", "◀ GPU"):
            page.get_by_role("button", name=label, exact=True).click()
            page.wait_for_timeout(250)
            steps.append(page.evaluate(CURRENT))
        table, boxes, _ = focus_data(trace, timeline_pyramid(trace, 1400), table_names(trace))  # as the page's
        mine = np.arange(*table.set_index("name").loc["aten::mm", ["start", "stop"]])
        mine = mine[boxes["launched"][mine] > 0]
        order = mine[np.lexsort((boxes["slot"][mine], boxes["q0"][mine] + boxes["q1"][mine]))].tolist()
        assert len(order) >= 3 and sum(boxes["launched"][mine]) == table.set_index("name").loc["aten::mm", "launched_n"]
        at = order.index(steps[0]["box"])
        assert [c["box"] for c in steps] == [order[(at + d) % len(order)] for d in (0, 1, 2, 1)]
        assert all(c["gpu"] and c["n"] == boxes["launched"][c["box"]] for c in steps)
        assert f"· their GPU work at {steps[-1]['rank']} of {len(order)}" in page.evaluate(STATE)["bar"]
        page.locator(".bk-tab", has_text="kernels").click()
        page.wait_for_timeout(300)
        page.locator(".slick-row:visible", has_text=MARKUP[:10]).first.locator(".slick-cell").nth(2).click()
        page.wait_for_timeout(500)
        st = page.evaluate(STATE)
        assert MARKUP in st["bar"] and page.get_by_text(MARKUP[:20], exact=False).count() >= 1
        assert page.evaluate("window.__xss") is None and not page.aonkit_dialogs
        assert not blocked and not page.aonkit_errors, page.aonkit_errors


def test_a_span_too_long_to_place_events_in_gives_no_boxes_and_says_why(tmp_path: Path) -> None:
    import json
    import warnings

    from aonkit.timeline.static_focus import MAX_SPAN_NS, focus_off

    from .hostile_gen import hostile_trace

    p = tmp_path / "t.json"
    p.write_text(json.dumps(hostile_trace(0)))  # time stamps from -7.5e18 to 1.7e18 ns
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = aonkit.load(p)
    pyr = timeline_pyramid(trace, 1400)
    assert pyr.span_ns > MAX_SPAN_NS
    table, boxes, _ = focus_data(trace, pyr, table_names(trace))
    assert len(table) == 0 and len(boxes["q0"]) == 0 and "years" in focus_off(pyr)
    assert focus_off(timeline_pyramid(aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"), 1400)) == ""
