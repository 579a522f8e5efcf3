"""The timeline's focus: a few names' events marked at any zoom, counted, stepped through; tables pick it."""

from __future__ import annotations

import re

import numpy as np
import pytest

import aonkit
from aonkit.timeline.focus import STEP_FILL, STEP_MIN_NS, focus_of, focus_of_many, names_matching
from aonkit.timeline.tiles import index_of
from aonkit.timeline.view_data import lane_slots, span
from aonkit.units import fmt_ns

from .conftest import SAMPLE_TRACES as SAMPLES
from .conftest import require_shared
from .timeline_page import Recorded, render


def _events(trace, index, slots, names):
    """The focused events the slow way: every lane event, one by one, with its slot, start and end (ns)."""
    ev = trace.events
    out = []
    wanted = set(names)
    for k, (lane, depth) in enumerate(zip(index.track_lane, index.track_depth)):
        slot = int(slots["slot"].iloc[lane]) + int(depth)
        for p in range(index.track_off[k], index.track_off[k + 1]):
            r = int(index.row[p])
            if ev["name"].iat[r] in wanted:
                out.append((k, slot, int(index.ts[p]), max(int(index.end[p]), int(index.ts[p]) + 1), r))
    return out


def _marks_by_hand(events, a, b, px):
    """Runs per track: an event joins the run before it when it starts in a pixel that run already reaches."""
    per = (b - a) / px
    pix = lambda t: min(max(int(np.floor(t / per)), 0), px - 1)  # noqa: E731
    runs = []
    for track, slot, t0, t1, _ in events:
        if not (t1 > a and t0 < b):
            continue
        p0, p1 = pix(t0 - a), pix(t1 - 1 - a)
        last = runs[-1] if runs else None
        if last and last["track"] == track and p0 <= last["reach"]:
            last.update(x1=max(last["x1"], t1), reach=max(last["reach"], p1), count=last["count"] + 1)
        else:
            runs.append({"track": track, "slot": slot, "x0": t0, "x1": t1, "reach": p1, "count": 1})
    return runs


@pytest.mark.parametrize("name, pick", [("gpu_synthetic_rank0.json.gz", "nccl"), ("cpu_mlp.pt.trace.json.gz", "aten"),
                                        ("hta/df_index_resolver/df_index_resolver.json.gz", "gemm")])  # fmt: skip
def test_marks_hold_every_focused_event_once_and_agree_with_the_slow_rule(name: str, pick: str) -> None:
    trace = aonkit.load(require_shared("traces") / name if "/" in name else SAMPLES / name)
    index = index_of(trace)
    slots, (origin, end) = lane_slots(index), span(trace, index)
    names = [n for n in trace.events["name"].cat.categories if pick in n.lower()][:6]
    assert names
    f = focus_of(trace, index, slots, names + ["no such name"])
    slow = _events(trace, index, slots, names)
    assert len(f) == len(slow) > 0 and f.missing == ["no such name"] and f.names == names
    dur = trace.events["dur_ns"].to_numpy()[[e[4] for e in slow]]
    assert f.busy_ns == int(np.maximum(dur, 0).sum())
    third = origin + (end - origin) // 3
    for a, b, px in ((origin, end, 1500), (origin, end, 37), (third, third + 2_000_000, 900), (third, third + 10, 5)):
        got = f.marks(a, b, px, origin)
        want = _marks_by_hand(slow, a, b, px)
        assert got["count"].tolist() == [r["count"] for r in want]
        assert got["slot"].tolist() == [r["slot"] for r in want]
        np.testing.assert_array_equal(got["x0"], (np.array([r["x0"] for r in want], np.int64) - origin) / 1e6)
        np.testing.assert_array_equal(got["x1"], (np.array([r["x1"] for r in want], np.int64) - origin) / 1e6)
        inside = sum(1 for e in slow if e[3] > a and e[2] < b)
        assert int(got["count"].sum()) == inside  # every event of the window in exactly one box
        per_track = np.bincount(np.array([r["track"] for r in want], np.int64)) if want else np.zeros(1)
        assert per_track.max() <= px  # at most a box per pixel and track, however many events
    bins = f.overview(origin, end, 300)
    assert bins.sum() == len(f) and len(bins) == 300
    assert bins.tolist() == np.bincount([min((e[2] - origin) * 300 // (end - origin), 299) for e in slow],
                                        minlength=300).tolist()  # fmt: skip


@pytest.mark.parametrize("name", ["gpu_synthetic_rank0.json.gz", "hta/df_index_resolver/df_index_resolver.json.gz"])
def test_an_ops_focus_holds_the_gpu_work_the_op_table_gives_it(name: str) -> None:
    from aonkit.analysis.correlation import gpu_links
    from aonkit.analysis.kernels import gpu_time_per_op
    from aonkit.timeline.detail import launch_maps

    trace = aonkit.load(require_shared("traces") / name if "/" in name else SAMPLES / name)
    index = index_of(trace)
    slots, origin, end = lane_slots(index), *span(trace, index)
    launch_of = launch_maps(trace, gpu_links(trace))[0]
    table = gpu_time_per_op(trace)  # GPU work by the outermost op that launched it
    names = trace.events["name"].astype(str).to_numpy()
    cats = trace.events["cat"].astype(str).to_numpy()

    def nested_in_an_op(r: int) -> bool:
        r = int(index.parent_of[r])
        while r >= 0:
            if cats[r] == "cpu_op":
                return True
            r = int(index.parent_of[r])
        return False

    checked = 0
    for _, op in table.head(12).iterrows():
        rows = np.flatnonzero(names == op["op_name"])
        if not len(rows) or any(nested_in_an_op(r) for r in rows):  # the table gives an op's nested copies' work
            continue  # to the op around them
        f = focus_of(trace, index, slots, [op["op_name"]], launch_of)
        assert (len(f.launched.ts), f.launched.busy_ns) == (op["gpu_events"], op["gpu_ns"]), op["op_name"]
        # its kernels are drawn with it (boxes counting no named event), its own events counted as before
        got = f.marks(origin, end, 2000, origin)
        assert int(got["count"].sum()) == len(f) and (got["count"] == 0).any()
        checked += 1
    assert checked >= 3
    assert len(focus_of(trace, index, slots, [table["op_name"].iloc[0]]).launched.ts) == 0  # no maps: none


@pytest.mark.parametrize("name", ["gpu_synthetic_rank0.json.gz", "hta/df_index_resolver/df_index_resolver.json.gz"])
def test_many_foci_at_once_are_each_names_own_focus(name: str) -> None:
    from aonkit.analysis.correlation import gpu_links
    from aonkit.timeline.detail import launch_maps

    trace = aonkit.load(require_shared("traces") / name if "/" in name else SAMPLES / name)
    index = index_of(trace)
    slots = lane_slots(index)
    launch_of = launch_maps(trace, gpu_links(trace))[0]
    names = [*map(str, trace.events["name"].cat.categories), "no such name"]
    for maps in (launch_of, None):
        many = focus_of_many(trace, index, slots, names, maps)
        assert list(many) == names
        launched = 0
        for n in names:
            one, got = focus_of(trace, index, slots, [n], maps), many[n]
            assert (got.names, got.missing, got.busy_ns) == (one.names, one.missing, one.busy_ns), n
            for a in ("pos", "ts", "end", "slot", "track", "row", "order", "dur"):
                np.testing.assert_array_equal(getattr(got, a), getattr(one, a), err_msg=f"{n}: {a}")
            for a in ("pos", "ts", "end", "slot", "track"):
                np.testing.assert_array_equal(getattr(got.launched, a), getattr(one.launched, a), err_msg=n)
            assert got.launched.busy_ns == one.launched.busy_ns
            launched += len(got.launched.ts)
        assert (launched > 0) == (maps is not None)


def test_steps_walk_the_events_in_time_and_wrap() -> None:
    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    index = index_of(trace)
    slots, origin = lane_slots(index), span(trace, index)[0]
    f = focus_of(trace, index, slots, ["nccl:all_reduce"])
    starts = f.ts[f.order]
    assert np.all(np.diff(starts) >= 0) and len(f) > 3
    seen, place = [], -1
    for _ in range(len(f) + 1):  # from the start of the trace, every event once in time order, then the first again
        place = f.step(origin - 1, 1, place)
        seen.append(place)
    assert seen == [*range(len(f)), 0]
    assert f.step(origin - 1, -1) == len(f) - 1  # before the first: the last (wrapped)
    mid = int(starts[len(f) // 2])
    assert f.step(mid, 1) == len(f) // 2 + 1 and f.step(mid, -1) == len(f) // 2 - 1  # strictly after / before
    # the view keeps its width while the event fills 2%..60% of it; else it fits the event to the nearer bound
    i = f.order[0]
    d = int(f.end[i] - f.ts[i])
    for width, want in ((d * 10, d * 10), (d, int(np.ceil(d / STEP_FILL[1]))), (d * 1000, int(d / STEP_FILL[0]))):
        a, b = f.window_for(0, width)
        assert b - a == max(want, STEP_MIN_NS) and a <= f.ts[i] and f.end[i] <= b
    # the durations: the same as the trace's own column of these events; the longest is the first of the largest
    dur = trace.events["dur_ns"].to_numpy()[f.row].astype(np.float64)
    st = f.stats()
    assert st == {"mean": dur.mean(), "min": dur.min(), "p50": np.percentile(dur, 50), "p90": np.percentile(dur, 90),
                  "p99": np.percentile(dur, 99), "max": dur.max()}  # fmt: skip
    longest = f.longest()
    assert f.dur[f.order[longest]] == dur.max() and all(f.dur[f.order[:longest]] < dur.max())
    empty = focus_of(trace, index, slots, ["no such name"])
    assert len(empty) == 0 and empty.step(origin, 1) == -1 and empty.missing == ["no such name"]
    assert empty.stats() == {} and empty.longest() == -1


def test_find_reads_the_box_as_the_page_does() -> None:
    names = ["aten::linear", "aten::addmm", "ncclKernel_AllReduce", "Memcpy HtoD", "ATen::Linear_backward"]
    assert names_matching(names, "LINEAR") == ["aten::linear", "ATen::Linear_backward"]  # any case
    assert names_matching(names, "/^aten::(linear|addmm)$/") == ["aten::linear", "aten::addmm"]
    assert names_matching(names, "/memcpy/g") == ["Memcpy HtoD"]  # g means nothing for one name
    assert names_matching(names, "  ") == []
    with pytest.raises(ValueError, match=re.escape("does not compile")):
        names_matching(names, "/(/")
    with pytest.raises(ValueError, match="unknown regular-expression flag 'x'"):
        names_matching(names, "/a/x")


def test_the_widget_sends_the_focus_with_its_glyphs_and_steps_on_n_and_p() -> None:
    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    w = Recorded(trace, width_px=1000)
    assert w.sent[-1][0]["focus"] is None and not any(k.startswith("f_") for k in w.sent[-1][0]["columns"])
    # WHEN the find box's Enter comes from the page
    w._message(w, {"kind": "find", "text": "nccl"}, [])
    msg, buffers = w.tiles()
    f = w.timeline.focus
    assert w.focus == f.names and all("nccl" in n.lower() for n in w.focus) and len(w.focus) >= 2
    assert msg["focus"] == {"n": len(f), "busy_ns": f.busy_ns, "names": len(f.names), "missing": 0,
                            "stats": f.stats(), "launched": 0, "launched_busy_ns": 0}  # fmt: skip
    counts = np.frombuffer(buffers[msg["columns"]["f_count"][1]], "<i4")
    assert counts.sum() == len(f)  # the whole trace is in the first window
    assert w.sent[-1][0] == {"kind": "count", "view": w.view, "n": len(f)}  # and so in the view
    # WHEN N is pressed: the view moves to the first event after its middle, and that event is selected
    t0, t1 = w.range_window()
    w._message(w, {"kind": "step", "dir": 1}, [])
    place = f.step((t0 + t1) // 2, 1)
    row = int(f.row[f.order[place]])
    assert w.tiles()[0]["select"] == row and w.tiles()[0]["place"] == place
    a, b = w.range_window()
    assert a <= f.ts[f.order[place]] < b and "select" not in w.timeline.query(a, b, 100).message
    assert w.sent[-1][0] == {"kind": "count", "view": w.view, "n": f.count(a, b)}
    w._message(w, {"kind": "step", "dir": 1}, [])
    w._message(w, {"kind": "step", "dir": -1}, [])
    assert w.tiles()[0]["place"] == place  # N then P: back to the same event
    # L: the longest, selected; N goes on from it in time
    w._message(w, {"kind": "longest"}, [])
    assert w.tiles()[0]["place"] == f.longest() and w.tiles()[0]["select"] == int(f.row[f.order[f.longest()]])
    w.step(1)
    assert w.tiles()[0]["place"] == (f.longest() + 1) % len(f)
    with pytest.raises(ValueError, match="no focused event at place"):
        w.show_focused(len(f))
    # a pan in the page that needs no query still gets the count for its view
    n = len(w.sent)
    w.view = [w.view[0] + 0.01, w.view[1] + 0.01]
    assert len(w.sent) == n + 1 and w.sent[-1][0]["kind"] == "count" and w.sent[-1][0]["view"] == w.view
    # a step to an event at the trace's first or last nanosecond keeps the view inside the trace (as the page would
    # clamp it; the count is then for the view the page shows)
    index = w.timeline.index
    ends = [str(trace.events["name"].iat[int(index.row[k])]) for k in (index.ts.argmin(), index.end.argmax())]
    saved = w.focus
    w.focus = ends
    w._step = (len(w.timeline.focus) - 1, list(w.view), False)  # as if the last step had shown the last: N wraps
    for direction in (1, 1, -1):  # the first (the profiler's span: the whole trace), the next, the first again
        w.step(direction)
        a, b = w.range_window()
        assert w.origin_ns <= a < b <= w.end_ns and w.sent[-1][0]["view"] == w.view
    w.focus = saved
    # a pattern Python cannot compile: the page is told why, and the focus is cleared
    w._message(w, {"kind": "find", "text": "/(/"}, [])
    assert w.sent[-2][0]["kind"] == "note" and "does not compile" in w.sent[-2][0]["text"]
    assert w.focus == [] and w.sent[-1][0]["kind"] == "tiles" and w.sent[-1][0]["focus"] is None
    assert w.step(1) == -1  # no focus: no step
    # a focus survives a re-timing (the what-if panel's)
    w.focus = ["nccl:all_reduce"]
    w.retime(trace)
    assert w.tiles()[0]["focus"]["n"] == len(w.timeline.focus) > 0


def test_shift_n_and_p_step_through_the_gpu_work_the_focused_ops_launched() -> None:
    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    w = Recorded(trace, width_px=1000)
    w.focus = ["aten::linear"]
    f = w.timeline.focus
    g = f.launched
    assert len(g) == 324 and len(g.row) == len(g) and sorted(g.order.tolist()) == list(range(len(g)))
    # WHEN Shift+N comes from the page: the first launched GPU event after the view's middle, selected
    t0, t1 = w.range_window()
    w._message(w, {"kind": "step", "dir": 1, "launched": True}, [])
    place = g.step((t0 + t1) // 2, 1)
    msg = w.tiles()[0]
    assert msg["select"] == int(g.row[g.order[place]]) and msg["place"] == place and msg["launched"] is True
    a, b = w.range_window()
    assert a <= g.ts[g.order[place]] < b
    # THEN the steps go on through the launched work in time order, each a GPU event (a kernel or a copy), and back
    rows = [w.step(1, launched=True) for _ in range(6)]
    starts = trace.events["ts_ns"].to_numpy()[rows]
    assert (np.diff(starts) >= 0).all() and set(rows) <= set(g.row.tolist())
    assert set(trace.events["stream"].to_numpy()[rows] >= 0) == {True}  # on a GPU stream
    assert w.step(-1, launched=True) == rows[-2]
    # a plain N after them starts from the view's middle among the named events (not from the launched place)
    row = w.step(1)
    assert row in set(f.row.tolist()) and w.tiles()[0]["launched"] is False
    with pytest.raises(ValueError, match="no focused launched event at place"):
        w.show_focused(len(g), launched=True)
    # a focus that launched nothing has nothing to step through
    w.focus = [n for n in w.timeline.lane_names() if "nccl" in n.lower()]
    assert len(w.timeline.focus.launched) == 0 and w.step(1, launched=True) == -1


def test_the_dashboards_tables_pick_the_focus_and_the_focus_picks_their_rows() -> None:
    from aonkit.widgets.dashboard import Dashboard

    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    d = Dashboard(trace, roofline=False)
    kernels, ops = d.sources["kernels"], d.sources["ops"]
    assert kernels.selected.syncable and ops.selected.syncable and not kernels.syncable  # row numbers only
    # WHEN rows are picked in the kernel table (as the page's click sends them)
    kernels.selected.indices = [0, 2]
    assert d.timeline.focus == [kernels.data["name"][0], kernels.data["name"][2]]
    # WHEN a focus comes from elsewhere: the rows of its names are picked, in both tables
    op = ops.data["op_name"][1]
    d.select(op, kernels.data["name"][3], "a name in neither table")
    assert kernels.selected.indices == [3] and ops.selected.indices == [1]
    assert d.timeline.focus == [op, kernels.data["name"][3], "a name in neither table"]  # kept whole
    assert d.timeline.timeline.focus.missing == ["a name in neither table"]
    # the page sending those picks back changes nothing; Escape in the page (focus cleared) clears the picks
    kernels.selected.indices = [3]
    assert len(d.timeline.focus) == 3
    d.timeline.focus = []
    assert kernels.selected.indices == [] and ops.selected.indices == []


# ---- the page (the ES module in Chromium: tests/timeline_page.py) ------------------------------------------------
def test_the_page_marks_counts_and_steps_through_the_focus(timeline_page) -> None:
    page = timeline_page
    trace = aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz")
    w = Recorded(trace, width_px=1000)
    w.focus = [n for n in w.timeline.lane_names() if "nccl" in n.lower()]
    w.zoom(w.origin_ns + 100_000_000, w.origin_ns + 160_000_000)
    msg, buffers = w.tiles()
    col = {k: np.frombuffer(buffers[v[1]], "<" + v[0]) for k, v in msg["columns"].items() if k.startswith("f_")}
    lo, hi = 100.0, 160.0
    boxes = int(col["f_count"][(col["f_x1"] >= lo) & (col["f_x0"] <= hi)].sum())
    f = w.timeline.focus
    exact = int(((f.end > w.origin_ns + 100_000_000) & (f.ts < w.origin_ns + 160_000_000)).sum())
    assert w.sent[-1][0] == {"kind": "count", "view": [lo, hi], "n": exact} and exact > 0
    ds = render(page, w)  # the glyphs first: the boxes' count, said to be rough
    assert ds["focus"] == str(boxes) and ds["focusExact"] == ""
    bar = page.evaluate("() => window.el.querySelector('.aon-timeline-focus-text').textContent")
    st = f.stats()
    assert bar.startswith(f"focus: {len(f):,} events of {len(f.names)} names, {fmt_ns(f.busy_ns)} in all (mean "
                          f"{fmt_ns(st['mean'])}, longest {fmt_ns(st['max'])}) · ") and f"about {boxes} in view" in bar
    title = page.evaluate("() => window.el.querySelector('.aon-timeline-focus-text').title")
    assert title == " · ".join(f"{k} {fmt_ns(st[k])}" for k in ("min", "p50", "p90", "p99", "max"))
    page.evaluate("(m) => { window.handlers['msg:custom'](m, []); }", w.sent[-1][0])  # then the kernel's count
    page.wait_for_timeout(50)
    assert page.evaluate("() => [window.el.dataset.focus, window.el.dataset.focusExact]") == [str(exact), "1"]
    bar = page.evaluate("() => window.el.querySelector('.aon-timeline-focus-text').textContent")
    assert bar.endswith(f"· {exact} in view")
    assert page.evaluate("() => getComputedStyle(window.el.querySelector('.aon-timeline-strip')).display") != "none"
    # an op's focus also says what GPU work it launched (as the op table does)
    w2 = Recorded(trace, width_px=1000)
    w2.focus = ["aten::linear"]
    summary = w2.tiles()[0]["focus"]
    text = page.evaluate("(f) => window.aon.parts.focusText(f, 7, -1, false)", summary)
    assert summary["launched"] == 324 and text.endswith(
        f" · the GPU work they launched: 324 events, {fmt_ns(summary['launched_busy_ns'])} · 7 in view")
    # the marks are drawn: the focus colour on the top edge of a box in view, in the unscrolled rows
    k = int(np.flatnonzero((col["f_x0"] >= lo) & (col["f_x1"] <= hi) & (col["f_slot"] < 38))[0])
    gutter, plot = w.geometry["gutter"], w.plot_px
    x = gutter + ((col["f_x0"][k] + col["f_x1"][k]) / 2 - lo) / (hi - lo) * plot
    pixel = page.evaluate("""([x, y]) => { const c = window.el.querySelector('.aon-timeline-canvas');
      const s = c.width / c.getBoundingClientRect().width;
      return Array.from(c.getContext('2d').getImageData(Math.round(x * s), Math.round(y * s), 1, 1).data); }""",
                          [x, int(col["f_slot"][k]) * 16 + 1])  # fmt: skip
    assert abs(pixel[0] - 0xD4) <= 12 and pixel[1] <= 30 and abs(pixel[2] - 0x7F) <= 12, pixel
    # N and P ask the kernel for the next and previous event; Enter in the find box asks it to focus a pattern
    box = page.evaluate("() => { const r = window.el.querySelector('.aon-timeline-canvas').getBoundingClientRect();"
                        " return [r.x, r.y]; }")
    page.mouse.click(box[0] + 5, box[1] + 5)  # on the lane labels: the timeline has the keys, nothing selected
    page.keyboard.press("n")
    page.keyboard.press("p")
    page.keyboard.press("l")
    page.keyboard.press("Shift+N")  # the GPU work they launched: none for this focus, so nothing is asked
    page.fill(".aon-timeline-find", "/gemm/")
    page.press(".aon-timeline-find", "Enter")
    assert page.evaluate("() => window.sent.filter((m) => m.kind !== 'hello')") == [
        {"kind": "step", "dir": 1, "launched": False}, {"kind": "step", "dir": -1, "launched": False},
        {"kind": "longest"}, {"kind": "find", "text": "/gemm/"}]
    # a step's answer selects its event and says which one it is
    row = w.step(1)
    ds = render(page, w)
    assert ds["selected"] == str(row) and int(ds["highlight"]) >= 0
    place = w.tiles()[0]["place"]
    bar = page.evaluate("() => window.el.querySelector('.aon-timeline-focus-text').textContent")
    assert bar.startswith(f"focus: event {place + 1:,} of {len(f):,} events")
    # Escape drops the selection first, then the focus (set in the model: the kernel hears of it)
    page.evaluate("() => window.el.querySelector('.aon-timeline').focus()")
    page.keyboard.press("Escape")
    assert page.evaluate("() => [window.state.focus, window.el.dataset.selected]") == [w.focus, ""]
    page.keyboard.press("Escape")
    assert page.evaluate("() => window.state.focus") == []
    # F focuses the name of the event selected (a click on it): its events, the others faded
    row = w.step(1)
    render(page, w)
    name = str(trace.events["name"].iat[row])
    page.evaluate("() => window.el.querySelector('.aon-timeline').focus()")
    page.keyboard.press("f")
    assert page.evaluate("() => window.state.focus") == [name]
    # an op's focus: Shift+N and Shift+P ask for the GPU work it launched; the answer says which of it is shown
    row = w2.step(1, launched=True)
    ds = render(page, w2)
    assert ds["selected"] == str(row)
    page.evaluate("() => { window.sent.length = 0; window.el.querySelector('.aon-timeline').focus(); }")
    page.keyboard.press("Shift+N")
    page.keyboard.press("Shift+P")
    assert page.evaluate("() => window.sent.filter((m) => m.kind === 'step')") == [
        {"kind": "step", "dir": 1, "launched": True}, {"kind": "step", "dir": -1, "launched": True}]
    place = w2.tiles()[0]["place"]
    bar = page.evaluate("() => window.el.querySelector('.aon-timeline-focus-text').textContent")
    assert bar.startswith(f"focus: {len(w2.timeline.focus):,} events of 1 name, ") and (
        f" · the GPU work they launched: event {place + 1:,} of 324 events, " in bar), bar


def test_picks_made_before_the_dashboard_is_shown_are_drawn_with_it(tmp_path, timeline_page) -> None:
    """``dash.select(...)`` in the cell that shows the dashboard: its table and the linked card show the pick."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    from aonkit.widgets.dashboard import Dashboard

    d = Dashboard(aonkit.load(SAMPLES / "gpu_synthetic_rank0.json.gz"), roofline=False)
    kernels = d.sources["kernels"]
    d.select(kernels.data["name"][2])

    def picked(bundle: dict) -> list:  # the kernel table's selection in the document the page will build
        def walk(x):
            if isinstance(x, dict):
                if x.get("id") == kernels.selected.id and "attributes" in x:
                    yield x["attributes"].get("indices", [])
                for v in x.values():
                    yield from walk(v)
            elif isinstance(x, (list, tuple)):
                for v in x:
                    yield from walk(v)

        return next(walk(bundle["docs_json"]))

    assert picked(d.bokeh.render_bundle) == []  # jupyter_bokeh's page draws this unless the widget updates it
    d._repr_mimebundle_()
    assert picked(d.bokeh.render_bundle) == [2] and not d._stale
    # in a page: once BokehJS has drawn the document, the card linked to the table shows the pick too
    html = tmp_path / "dash.html"
    html.write_text(file_html(d.bokeh._model, INLINE, "dashboard"), encoding="utf-8")
    page, blocked = timeline_page.context.browser.new_page(), []  # beside the module's page: one Playwright a process
    try:
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:", "blob:"))
                   else (blocked.append(r.request.url), r.abort()))  # fmt: skip
        page.goto(html.as_uri())
        page.wait_for_function("() => window.Bokeh && [...window.Bokeh.documents].some((doc) => doc.is_idle)",
                               timeout=30_000)
        got = page.evaluate("""() => { const out = {};
          for (const doc of window.Bokeh.documents) for (const m of doc.all_models)
            if (m.selected && m.name) out[m.name] = [...m.selected.indices];
          return out; }""")
        assert got["kernel_table"] == [2] and got["card_top_kernels"] == [2], got
        assert not blocked, blocked
    finally:
        page.close()
