"""The canvas charts of the model panels: the Python widget, the specs against their data, the ES module in Chromium."""

from __future__ import annotations

import base64
import json
import math

import pytest

from aonkit.views import model_charts
from aonkit.widgets.charts import WEB, Charts

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


# ---- the ES module in Chromium ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def page():
    from tests.browser import browser_page

    src = (WEB / "charts.js").read_text()
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
  const model = {get: (k) => state[k], on: (ev, cb) => { handlers[ev] = cb; }, off: () => {}};
  window.aon.default.render({model, el});
  window.setData = (d) => { state.data = d; handlers['change:data'](); };
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
        for name in ("charts.js", "charts.css"):
            assert z.read(f"aonkit/widgets/web/{name}") == (root / "widgets" / name).read_bytes()
