"""The canvas charts of the model panels: the Python widget, the specs against their data, the ES module in Chromium."""

from __future__ import annotations

import base64
import json
import math

import pytest

from aonkit.views import model_charts
from aonkit.widgets.charts import Charts

FIELD_KEYS = ("x", "y", "left", "right", "bottom", "top", "x0", "x1", "y0", "y1", "text", "color_field")


def _bar_chart(top: float = 10.0) -> tuple[list[dict], dict]:
    spec = model_charts.chart("t", model_charts.axis("linear", start=-0.5, end=0.5),
                              model_charts.axis("linear", "y", start=0, end=10),
                              [{"kind": "vbar", "source": "s", "x": "x", "bottom": "b", "top": "t", "width": 1.0,
                                "color_field": "c"}], width=300, height=200,
                              hover={"mode": "bars", "source": "s", "fields": [["", "label"], ["v", "t", " GB"]]})
    return [spec], {"s": {"x": [0.0], "b": [0.0], "t": [top], "c": ["#ff0000"], "label": ["<b>bold</b>"]}}


def test_sources_read_back_what_was_set_and_the_page_gets_gaps_for_nan() -> None:
    charts, sources = _bar_chart()
    c = Charts(charts, sources)
    c.sources["s"].data = {**sources["s"], "t": [math.nan]}
    assert math.isnan(c.sources["s"].data["t"][0])  # Python reads back NaN
    assert c.data["s"]["t"] == [None]  # the page gets null: JSON has no NaN, a line breaks there
    json.dumps(c.data, allow_nan=False)  # what goes to the page is strict JSON


def test_a_source_needs_equal_columns_and_charts_need_their_sources() -> None:
    charts, sources = _bar_chart()
    with pytest.raises(ValueError, match="'s' that were not given|\\['s'\\]"):
        Charts(charts, {})
    c = Charts(charts, sources)
    with pytest.raises(ValueError, match="different lengths"):
        c.sources["s"].data = {**sources["s"], "t": [1.0, 2.0]}


def test_one_patch_sends_the_sources_changed_in_it_once() -> None:
    charts, sources = _bar_chart()
    c = Charts(charts, {**sources, "other": {"v": [1]}})
    sent = []
    c.observe(lambda ch: sent.append(ch["new"]), names="data")
    with c.one_patch():
        c.sources["s"].data = {**sources["s"], "t": [5.0]}
        c.sources["other"].data = {"v": [2]}
        assert sent == []  # held
    assert len(sent) == 1 and sent[0]["s"]["t"] == [5.0] and sent[0]["other"]["v"] == [2]
    c.sources["other"].data = {"v": [3]}  # outside the block: at once
    assert len(sent) == 2


def _check_fields(charts: list[dict], data: dict[str, dict]) -> int:
    """Every column a chart draws or hovers exists in its source (a typo would draw nothing, silently)."""
    n = 0
    for ch in charts:
        for m in ch["marks"]:
            cols = data[m["source"]]
            for k in FIELD_KEYS:
                if k in m:
                    assert m[k] in cols, (ch["title"], m["kind"], k, m[k], sorted(cols))
                    n += 1
        hv = ch.get("hover")
        if hv:
            cols = data[hv["source"]]
            for f in [hv.get("x"), *hv.get("y", []), *(f[1] for f in hv["fields"])]:
                if f is not None:
                    assert f in cols, (ch["title"], "hover", f)
                    n += 1
    return n


def test_the_panels_charts_draw_columns_their_data_has() -> None:
    from aonkit.widgets import LLMModelPanel, ServingPanel

    p = LLMModelPanel()
    assert _check_fields(p.views[0].spec["charts"], {k: s.data for k, s in p.views[0].sources.items()}) >= 12
    assert _check_fields(p.views[1].spec["charts"], {k: s.data for k, s in p.views[1].sources.items()}) >= 12
    s = ServingPanel(n_requests=2000)
    assert _check_fields(s.view.spec["charts"], {k: v.data for k, v in s.view.sources.items()}) >= 40


def test_the_what_if_panels_bars_draw_columns_their_data_has() -> None:
    import aonkit
    from aonkit.widgets import WhatIfPanel

    from .conftest import SAMPLE_TRACES

    w = WhatIfPanel(aonkit.load(str(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")), timeline=False)
    assert _check_fields(w.view.spec["charts"], {k: v.data for k, v in w.view.sources.items()}) >= 6
    bars = w.source.data
    assert bars["part"][0] == "gpu computation" and bars["ms"][0] > 0 and bars["left"] == [0.0] * len(bars["part"])


# ---- the ES module in Chromium ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def page():
    from aonkit.widgets.charts import ESM
    from tests.browser import browser_page

    src = ESM  # the module as the widget ships it
    url = "data:text/javascript;base64," + base64.b64encode(src.encode()).decode()
    with browser_page() as (pg, blocked):
        pg.set_content("<html><body><div id='host'></div></body></html>")
        pg.evaluate(f"async () => {{ window.aon = await import({url!r}); }}")
        yield pg
        assert not blocked and not pg.aonkit_errors, (blocked, pg.aonkit_errors)


def test_tick_labels_and_nice_ticks(page) -> None:
    fmt = page.evaluate("() => [0, 1, 2.5, 0.1, 123.4, 1000, 9999, 10000, 25000, 1e5, 1.5e6, 2e9, 1e-4, -20000]"
                        ".map(window.aon.parts.fmt)")
    assert fmt == ["0", "1", "2.5", "0.1", "123.4", "1000", "9999", "10k", "25k", "100k", "1.5M", "2G", "1e-4",
                   "-20k"]
    for lo, hi in ((0, 1), (0.3, 97.2), (-5, 5), (1234, 1290), (0, 36.7)):
        t = page.evaluate("([lo, hi]) => window.aon.parts.ticks({type: 'linear'}, lo, hi)", [lo, hi])
        assert 3 <= len(t) <= 11 and all(lo - 1e-9 <= v <= hi + 1e-9 for v in t), (lo, hi, t)
        steps = {round(b - a, 9) for a, b in zip(t, t[1:])}
        assert len(steps) == 1  # evenly spaced
        step = steps.pop()
        mant = step / 10 ** math.floor(math.log10(step))
        assert any(math.isclose(mant, m) for m in (1, 2, 2.5, 5)), step
    # a log axis over six decades: powers of ten inside the range (log10 units in, data units out)
    t = page.evaluate("() => window.aon.parts.ticks({type: 'log'}, Math.log10(3), Math.log10(2e6))")
    assert t == [10, 100, 1000, 10000, 100000, 1000000]
    # under two decades: 1-2-5 or linear steps, never fewer than three labels
    t = page.evaluate("() => window.aon.parts.ticks({type: 'log'}, Math.log10(5.5), Math.log10(21))")
    assert len(t) >= 3 and all(5.5 <= v <= 21 for v in t), t


def test_ranges_follow_the_data_fixed_ends_and_skip_what_a_log_axis_cannot_show(page) -> None:
    got = page.evaluate("""() => {
      const ch = {x: {type: 'linear', start: 0}, y: {type: 'log'},
                  marks: [{kind: 'line', source: 's', x: 'x', y: 'y'}, {kind: 'hspan', source: 'h', y: 'v'}]};
      const data = {s: {x: [1, 2, 4], y: [10, null, -3]}, h: {v: [1000]}};
      return [window.aon.parts.extent(ch, data, 'x'), window.aon.parts.extent(ch, data, 'y')];
    }""")
    (x0, x1), (y0, y1) = got
    assert x0 == 0 and x1 == pytest.approx(4 + 0.05 * 3)  # start fixed at 0; the end padded 5% of the data span
    assert y0 == pytest.approx(1 - 0.1) and y1 == pytest.approx(3 + 0.1)  # log10: 10..1000, the span included


RENDER = """([charts, data]) => {
  const host = document.getElementById('host');
  host.replaceChildren();
  const el = document.createElement('div');
  host.appendChild(el);
  const handlers = {};
  const state = {spec: {charts, columns: charts.length}, data};
  window.sent = [];
  const model = {get: (k) => state[k], on: (ev, cb) => { handlers[ev] = cb; }, off: () => {},
                 send: (m) => window.sent.push(m)};
  window.aon.default.render({model, el});
  window.setData = (d) => { state.data = d; handlers['change:data'](); };
  window.message = (m) => handlers['msg:custom'](m);
  window.el = el;
  return el.dataset.drawn;
}"""

PIXEL = """([fx, fy]) => {
  const c = window.el.querySelector('canvas'), ctx = c.getContext('2d');
  const p = ctx.getImageData(Math.round(c.width * fx), Math.round(c.height * fy), 1, 1).data;
  return [p[0], p[1], p[2]];
}"""


def test_a_chart_draws_its_data_and_redraws_when_the_data_change(page) -> None:
    charts, data = _bar_chart(top=10.0)
    assert page.evaluate(RENDER, [charts, data]) == "1"
    # the bar fills the frame: red in its upper and its lower part
    assert page.evaluate(PIXEL, [0.55, 0.3]) == [255, 0, 0]
    assert page.evaluate(PIXEL, [0.55, 0.8]) == [255, 0, 0]
    # WHEN the bar's top falls to 4 (of 10)
    page.evaluate("(d) => window.setData(d)", {"s": {**data["s"], "t": [4.0]}})
    assert page.evaluate("() => window.el.dataset.drawn") == "2"
    # THEN its upper part is background again, its lower part still red
    assert page.evaluate(PIXEL, [0.55, 0.3]) == [255, 255, 255]
    assert page.evaluate(PIXEL, [0.55, 0.8]) == [255, 0, 0]


def test_hover_shows_the_rows_fields_as_text_never_html(page) -> None:
    charts, data = _bar_chart(top=10.0)
    page.evaluate(RENDER, [charts, data])
    box = page.evaluate("() => { const r = window.el.querySelector('canvas').getBoundingClientRect();"
                        " return [r.x, r.y, r.width, r.height]; }")
    page.mouse.move(box[0] + box[2] * 0.55, box[1] + box[3] * 0.6)
    tip = page.evaluate("() => { const t = window.el.querySelector('.aon-charts-tip');"
                        " return [t.style.display, t.innerText, t.querySelectorAll('b b, div > b + b').length]; }")
    assert tip[0] == "block"
    assert "<b>bold</b>" in tip[1] and "v: 10 GB" in tip[1]  # the label as typed, the value with its unit
    assert tip[2] == 0  # no element made from the label
    page.mouse.move(box[0] + 2, box[1] + 2)  # outside the frame: hidden
    assert page.evaluate("() => window.el.querySelector('.aon-charts-tip').style.display") == "none"


def test_a_line_breaks_at_missing_values(page) -> None:
    spec = model_charts.chart("", model_charts.axis("linear", start=0, end=4), model_charts.axis("linear", start=0,
                              end=2), [{"kind": "line", "source": "s", "x": "x", "y": "y", "color": "#0000ff",
                                        "line_width": 6}], width=300, height=200)  # fmt: skip
    page.evaluate(RENDER, [[spec], {"s": {"x": [0, 1, 2, 3, 4], "y": [1, 1, None, 1, 1]}}])
    row = page.evaluate("""() => { const c = window.el.querySelector('canvas'), ctx = c.getContext('2d');
      const d = ctx.getImageData(0, 0, c.width, c.height).data, out = new Array(c.width).fill(0);
      for (let y = 0; y < c.height; y++) for (let x = 0; x < c.width; x++) {
        const i = 4 * (y * c.width + x);
        if (d[i + 2] > 200 && d[i] < 80 && d[i + 1] < 80) out[x] = 1;  // blue
      }
      return out; }""")
    blue = [i for i, v in enumerate(row) if v]
    assert blue, "no line drawn"
    # two runs of blue with a gap between x = 1 and x = 3 (the missing point): the line is not joined across it
    runs = sum(1 for i in range(1, len(blue)) if blue[i] != blue[i - 1] + 1) + 1
    assert runs == 2, runs


def test_a_wheel_carries_the_browser_code(tmp_path) -> None:
    """``widgets/`` is outside the package: it must reach a wheel through the link ``aonkit/widgets/web``."""
    import shutil
    import subprocess
    import sys
    import zipfile
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(root / "widgets", src / "widgets", ignore=ignore)
    shutil.copytree(root / "aonkit", src / "aonkit", symlinks=True, ignore=ignore)
    assert (src / "aonkit" / "widgets" / "web").is_symlink()
    cmd = [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q", "-w",
           str(tmp_path / "dist")]  # fmt: skip
    r = subprocess.run(cmd, cwd=src, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("aonkit-*.whl")
    with zipfile.ZipFile(wheel) as z:
        from aonkit.widgets import charts, timeline

        names = sorted(p.name for p in (root / "widgets").iterdir() if p.suffix in (".js", ".css"))
        used = {*charts.PARTS, *timeline.PARTS, "charts.css", "timeline.css"}  # what the widgets load
        assert set(names) == used, names  # every file in widgets/ is a part of a widget, and ships
        for name in names:
            assert z.read(f"aonkit/widgets/web/{name}") == (root / "widgets" / name).read_bytes()


# ---- the live monitor's rows ------------------------------------------------------------------------------------
def _wide_reference(samples, channels):
    """The obvious way: a pandas pivot of the long form, the last value of a cell kept."""
    import numpy as np
    import pandas as pd

    from aonkit.views.monitor import column_name

    names = [column_name(d, m) for d, m in channels]
    key = [column_name(int(d), str(m)) for d, m in zip(samples["device"], samples["metric"])]
    table = pd.DataFrame({"ts_ns": samples["ts_ns"].to_numpy(), "key": key, "value": samples["value"].to_numpy()})
    table = table.pivot_table(index="ts_ns", columns="key", values="value", aggfunc="last", dropna=False)
    return {"t": table.index.to_numpy(np.int64) / 1e6,
            **{n: table[n].to_numpy(np.float64) if n in table.columns else np.full(len(table), np.nan)
               for n in names}}  # fmt: skip


def test_wide_rows_equal_a_pivot_of_the_long_form() -> None:
    import numpy as np
    import pandas as pd
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from aonkit.views.monitor import WideLayout, wide

    metrics = ["gpu_util_pct", "power_w", "memory_used_bytes"]
    row = st.tuples(st.integers(0, 6), st.integers(-3, 3), st.sampled_from(metrics),
                    st.floats(-1e6, 1e6, allow_nan=False))  # fmt: skip

    @settings(max_examples=150, deadline=None)
    @given(st.lists(row, min_size=1, max_size=60), st.booleans(), st.integers(0, 3))
    def check(rows, categorical, skip) -> None:
        df = pd.DataFrame(rows, columns=["ts_ns", "device", "metric", "value"])
        df["ts_ns"] *= 100_000_000
        if categorical:
            df["metric"] = df["metric"].astype(pd.CategoricalDtype(metrics))
        channels = [(d, m) for d in (-1, 0, 1, 2, 3) for m in metrics][skip:]  # some channels not shown
        got, want = wide(df, channels), _wide_reference(df, channels)
        assert list(got) == list(want)
        for k in got:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        # one layout asked again and again (a monitor's polls), over frames of other metrics and devices
        ref = _wide_reference(df, layout.channels)
        t, values = layout.block(df)
        np.testing.assert_array_equal(t, ref["t"])
        np.testing.assert_array_equal(values, np.column_stack([ref[n] for n in layout.names]).reshape(len(t), -1))

    layout = WideLayout([(d, m) for d in (-1, 0, 1, 2, 3) for m in metrics][1:])

    check()


def test_a_rings_rows_laid_out_directly_equal_their_long_form_laid_out() -> None:
    import numpy as np
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from aonkit.live.follow import Layout
    from aonkit.views.monitor import WideLayout

    metrics = ["gpu_util_pct", "power_w", "memory_used_bytes"]
    universe = [(d, m) for d in (-1, 0, 1, 2) for m in metrics]
    layout = WideLayout(universe[2:])  # one layout polled again and again, over rings of other channels

    @settings(max_examples=150, deadline=None)
    @given(st.permutations(universe), st.integers(1, len(universe)),
           st.lists(st.tuples(st.integers(0, 5), st.lists(st.one_of(st.floats(-1e6, 1e6), st.just(math.nan)),
                                                           min_size=12, max_size=12)), max_size=20))  # fmt: skip
    def check(order, width, rows) -> None:
        channels = order[:width]  # the ring's channels, in its own order; some the layout does not show
        ts = np.array([t for t, _ in rows], np.int64) * 50_000_000  # repeats and steps back included
        values = np.array([v[:width] for _, v in rows], np.float64).reshape(len(rows), width)
        t, got = layout.rows(ts, values, channels)
        want_t, want = layout.block(Layout(channels).frame(ts, values))
        np.testing.assert_array_equal(t, want_t)
        np.testing.assert_array_equal(got, want)

    check()


def test_a_stream_sends_only_its_rows_and_a_new_view_gets_all_kept() -> None:
    import numpy as np

    spec = model_charts.chart("m", model_charts.axis("time", zoom=True), model_charts.axis("linear"),
                              [{"kind": "line", "source": "s", "x": "t", "y": "v", "color": "#000000"}], width=300,
                              height=120)  # fmt: skip
    c = Charts([spec], {"s": {"t": np.empty(0), "v": np.empty(0)}})
    sent = []
    c.send = lambda msg, buffers=None: sent.append(msg)
    for i in range(5):
        c.sources["s"].stream({"t": [2.0 * i, 2.0 * i + 1], "v": [float(i), math.nan]}, rollover=6)
    # each message holds its two rows only; Python keeps the last six
    assert [m["rows"]["t"] for m in sent] == [[2.0 * i, 2.0 * i + 1] for i in range(5)]
    assert sent[0]["rows"]["v"] == [0.0, None] and all(m["rollover"] == 6 for m in sent)
    np.testing.assert_array_equal(c.sources["s"].data["t"], [4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    assert c.data["s"]["t"] == []  # the synced state is not resent at each stream
    # WHEN a new view of the widget asks (a reloaded page), it gets what is kept, once
    c._message(c, {"kind": "snapshot"}, [])
    assert sent[-1] == {"kind": "reset", "data": {"s": {"t": [4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                                                        "v": [2.0, None, 3.0, None, 4.0, None]}}}
    with pytest.raises(ValueError, match="stream columns"):
        c.sources["s"].stream({"t": [1.0]})


def test_streamed_rows_kept_beside_the_columns_read_back_as_a_plain_append_would() -> None:
    import numpy as np

    spec = model_charts.chart("m", model_charts.axis("time"), model_charts.axis("linear"),
                              [{"kind": "line", "source": "s", "x": "t", "y": "v", "color": "#000000"}], width=300,
                              height=120)  # fmt: skip
    c = Charts([spec], {"s": {"t": np.empty(0), "v": np.empty(0)}})
    c.send = lambda msg, buffers=None: None
    rng = np.random.default_rng(7)
    want = {"t": np.empty(0), "v": np.empty(0)}  # the reference: each stream appended, then the rollover applied
    t = 0.0
    for i in range(1200):  # 1-3 rows at a time; the rollover changed now and then (None: keep all); reads between
        keep = [None, 5, 50, 300][(i // 150) % 4]
        n = int(rng.integers(1, 4))
        rows = {"t": t + np.arange(n), "v": rng.normal(size=n)}
        t += n
        how = i % 3  # float arrays (one block), lists (column by column), a block in another column order
        if how == 0:
            c.sources["s"].stream(rows, rollover=keep)
        elif how == 1:
            c.sources["s"].stream({k: v.tolist() for k, v in rows.items()}, rollover=keep)
        else:
            c.sources["s"].stream_array(["v", "t"], np.column_stack([rows["v"], rows["t"]]), rollover=keep)
        for k in want:
            col = np.concatenate([want[k], rows[k]])
            want[k] = col[-keep:] if keep is not None and len(col) > keep else col
        if how < 2:
            rows["v"][:] = 0.0  # the caller reuses its array: what was streamed stays as it was
        if i % 37 == 0 or i == 1199:
            got = c.sources["s"].data
            for k in want:
                np.testing.assert_array_equal(got[k], want[k])
    assert len(want["t"]) == 300


def test_a_block_streams_the_same_message_as_its_columns() -> None:
    import numpy as np

    spec = model_charts.chart("m", model_charts.axis("time"), model_charts.axis("linear"),
                              [{"kind": "line", "source": "s", "x": "t", "y": "v", "color": "#000000"}], width=300,
                              height=120)  # fmt: skip
    c = Charts([spec], {"s": {"t": np.empty(0), "v": np.empty(0), "w": np.empty(0)}})
    sent = []
    c.send = lambda msg, buffers=None: sent.append(msg)
    block = np.array([[1.0, math.nan, 3.0], [2.0, math.inf, -math.inf], [4.0, 5.0, 6.0]])
    c.sources["s"].stream({"t": list(block[:, 0]), "v": list(block[:, 1]), "w": list(block[:, 2])})  # columns
    c.sources["s"].stream_array(["t", "v", "w"], block)  # one block
    assert sent[0] == sent[1] and sent[1]["rows"] == {"t": [1.0, 2.0, 4.0], "v": [None, None, 5.0],
                                                       "w": [3.0, None, 6.0]}  # fmt: skip
    np.testing.assert_array_equal(c.sources["s"].data["v"], [math.nan, math.inf, 5.0] * 2)
    with pytest.raises(ValueError, match="a block of shape"):
        c.sources["s"].stream_array(["t", "v"], block)
    with pytest.raises(ValueError, match="stream columns"):
        c.sources["s"].stream_array(["t", "v", "v"], block)


STREAM = """([rows, rollover, n]) => {
  let data = {s: {t: [], v: []}};
  for (let i = 0; i < n; i++) data = window.aon.parts.appendRows(data, 's', rows, rollover);
  return data.s;
}"""


def test_the_page_appends_streamed_rows_and_rolls_over(page) -> None:
    got = page.evaluate(STREAM, [{"t": [1, 2, 3], "v": [4, None, 6]}, 7, 3])
    assert got == {"t": [3, 1, 2, 3, 1, 2, 3], "v": [6, 4, None, 6, 4, None, 6]}


def test_time_ticks_fall_on_whole_seconds_and_minutes(page) -> None:
    t0 = 1_764_917_463_250.0  # 2025-12-05 06:51:03.250 UTC, ms
    for span_ms, step in ((2_000, 500), (60_000, 15_000), (30 * 60_000, 300_000)):
        got = page.evaluate("([lo, hi]) => { const t = window.aon.parts.ticks({type: 'time'}, lo, hi);"
                            " return [t, window.aon.parts.labels({type: 'time'}, t)]; }", [t0, t0 + span_ms])
        ticks, labels = got
        assert all(t % step == 0 for t in ticks) and 3 <= len(ticks) <= 7, (span_ms, ticks)
        assert all(t0 <= t <= t0 + span_ms for t in ticks)
        import datetime as dt

        first = dt.datetime.fromtimestamp(ticks[0] / 1e3, dt.timezone.utc)
        want = first.strftime("%H:%M") if step >= 60_000 else first.strftime("%H:%M:%S")
        if step < 1000:
            want += f".{first.microsecond // 100_000}"
        assert labels[0] == want, (labels, want)
    assert page.evaluate("() => [1023, 1536, 1.5 * 2 ** 30, 80e9].map(window.aon.parts.fmtBytes)") == [
        "1023 B", "1.5 KiB", "1.5 GiB", "74.5 GiB"]


def test_streamed_rows_arriving_together_are_drawn_once_and_the_time_axis_zooms(page) -> None:
    spec = model_charts.chart("m", model_charts.axis("time", zoom=True), model_charts.axis("linear"),
                              [{"kind": "line", "source": "s", "x": "t", "y": "v", "color": "#000000"}], width=400,
                              height=140)  # fmt: skip
    assert page.evaluate(RENDER, [[spec], {"s": {"t": [], "v": []}}]) == "1"
    assert page.evaluate("() => window.sent") == [{"kind": "snapshot"}]  # a new view asks for the rows kept
    # WHEN three streams arrive in one task
    drawn = page.evaluate("""async () => {
      for (let i = 0; i < 3; i++) window.message({kind: 'stream', source: 's', rollover: 100,
                                                  rows: {t: [1e12 + 1000 * i, 1e12 + 1000 * i + 500], v: [i, i + 1]}});
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      return window.el.dataset.drawn; }""")
    assert drawn == "2"  # THEN one draw for the three
    # WHEN ctrl + wheel over the chart: the time axis zooms in around the pointer
    box = page.evaluate("() => { const r = window.el.querySelector('canvas').getBoundingClientRect();"
                        " return [r.x, r.y, r.width, r.height]; }")
    page.mouse.move(box[0] + box[2] * 0.5, box[1] + box[3] * 0.5)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -100)
    page.keyboard.up("Control")
    page.wait_for_timeout(100)
    zoomed = page.evaluate("() => window.el.dataset.view")
    lo, hi = map(float, zoomed.split(","))
    assert 1e12 < lo < hi < 1e12 + 2500 and hi - lo == pytest.approx(2500 * 0.8, rel=1e-6)
    # a plain wheel leaves the axis alone (the page scrolls); a double click follows the data again
    page.mouse.wheel(0, -100)
    page.wait_for_timeout(100)
    assert page.evaluate("() => window.el.dataset.view") == zoomed
    page.mouse.dblclick(box[0] + box[2] * 0.5, box[1] + box[3] * 0.5)
    page.wait_for_timeout(100)
    assert page.evaluate("() => window.el.dataset.view") == ""


def test_a_chart_out_of_sight_is_drawn_when_it_comes_into_view(page) -> None:
    charts, data = _bar_chart(top=10.0)
    page.evaluate(RENDER, [charts, data])
    # GIVEN the chart scrolled far out of sight (a monitor's 34th chart)
    page.evaluate("() => { document.getElementById('host').style.marginTop = '5000px'; window.scrollTo(0, 0); }")
    page.wait_for_timeout(200)  # the observer's callback
    # WHEN its data change
    page.evaluate("(d) => window.setData(d)", {"s": {**data["s"], "t": [4.0]}})
    # THEN it is not drawn meanwhile: the old bar is still on its canvas
    assert page.evaluate(PIXEL, [0.55, 0.3]) == [255, 0, 0]
    # WHEN it is scrolled into view: it is drawn with the new data
    page.evaluate("() => window.el.scrollIntoView()")
    page.wait_for_timeout(200)
    assert page.evaluate(PIXEL, [0.55, 0.3]) == [255, 255, 255]
    assert page.evaluate(PIXEL, [0.55, 0.8]) == [255, 0, 0]
    page.evaluate("() => { document.getElementById('host').style.marginTop = '0px'; window.scrollTo(0, 0); }")


def test_a_bytes_axis_steps_in_whole_binary_units(page) -> None:
    got = page.evaluate("() => { const a = {type: 'linear', format: 'bytes'}, t = window.aon.parts.ticks(a, 0.5e9,"
                        " 8.3e9); return [t, window.aon.parts.labels(a, t)]; }")
    ticks, labels = got
    assert ticks == [2 * 2**30, 4 * 2**30, 6 * 2**30] and labels == ["2 GiB", "4 GiB", "6 GiB"], got


def test_a_chart_takes_jupyterlabs_theme_colours(page) -> None:
    charts, data = _bar_chart(top=4.0)
    # GIVEN JupyterLab's dark theme variables on the page
    page.evaluate("() => { const s = document.getElementById('host').style; s.setProperty('--jp-layout-color0',"
                  " '#111111'); s.setProperty('--jp-ui-font-color1', '#eeeeee'); }")
    try:
        page.evaluate(RENDER, [charts, data])
        # THEN the background is the theme's, and the bar is still its own colour
        assert page.evaluate(PIXEL, [0.55, 0.3]) == [17, 17, 17]
        assert page.evaluate(PIXEL, [0.55, 0.8]) == [255, 0, 0]
    finally:
        page.evaluate("() => { const s = document.getElementById('host').style;"
                      " s.removeProperty('--jp-layout-color0'); s.removeProperty('--jp-ui-font-color1'); }")
    page.evaluate(RENDER, [charts, data])  # without them: light, as outside JupyterLab
    assert page.evaluate(PIXEL, [0.55, 0.3]) == [255, 255, 255]
