"""Roofline view as data: points at the table's coordinates, roofs from the DeviceSpec, markup kept out of HTML."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bokeh.embed import file_html
from bokeh.models import ColumnDataSource, HoverTool, MultiLine, PlainText, Scatter
from bokeh.resources import INLINE

import aonkit
from aonkit.analysis.roofline import roofline_table
from aonkit.model import device_spec
from aonkit.views import theme
from aonkit.views.roofline import POINT_COLUMNS, point_data, roofline_figure

from .conftest import SAMPLE_TRACES, require_shared
from .views_checks import MARKUP_KERNEL, TEX_KERNEL, assert_markup_only_in_data, markup_trace

QWEN = "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


@cache
def _qwen(by: str) -> pd.DataFrame:
    return roofline_table(aonkit.load(require_shared() / QWEN), by=by)


def _roofs(fig: object) -> dict:
    return fig.select_one({"name": "roofline_roofs"}).data  # type: ignore[attr-defined]


@pytest.mark.parametrize("by", ["op", "kernel"])
def test_points_sit_at_the_tables_coordinates(by: str) -> None:
    table = _qwen(by)
    fig, src = roofline_figure(table)
    d = src.data
    assert set(d) == set(POINT_COLUMNS)
    ok = (table["intensity_flop_per_byte"] > 0) & (table["achieved_flop_per_s"] > 0)
    assert len(d["row"]) == int(ok.sum()) > 500  # copies (0 FLOP) cannot sit on log axes
    rows = table.iloc[d["row"]]
    np.testing.assert_array_equal(d["intensity"], rows["intensity_flop_per_byte"])
    np.testing.assert_array_equal(d["achieved"], rows["achieved_flop_per_s"])
    np.testing.assert_array_equal(d["fraction"], rows["fraction_of_roof"])
    assert list(d["name"]) == rows["name"].tolist()
    assert list(d["op_name"]) == rows["op_name" if by == "kernel" else "name"].tolist()
    assert [theme.BOUND_COLORS[b] for b in rows["bound"]] == list(d["color"])
    assert set(d["bound"]) == {"memory", "compute"}
    # marker area grows with time: sqrt scaling, the longest point gets the largest size
    lo, hi = theme.POINT_SIZE
    assert d["size"].min() >= lo and d["size"].max() == pytest.approx(hi)
    longest = int(np.argmax(d["dur_ns"]))
    assert d["size"][longest] == pytest.approx(hi)
    expect = lo + (hi - lo) * np.sqrt(d["dur_ns"] / d["dur_ns"].max())
    np.testing.assert_allclose(d["size"], expect)
    # the hover's text fields say what the numbers are
    i = int(np.flatnonzero(np.asarray(d["roof"]) == "bf16")[0])
    assert d["flop_text"][i].endswith("FLOP") and d["bytes_text"][i].endswith("B")
    assert d["achieved_text"][i].endswith("FLOP/s") and d["fraction_text"][i].endswith("%")
    assert d["time_text"][i] == aonkit.units.fmt_ns(d["dur_ns"][i])


def test_roofs_come_from_the_spec() -> None:
    table = _qwen("op")
    spec = table.attrs["spec"]
    fig, _ = roofline_figure(table)
    assert isinstance(fig.title.text, PlainText) and fig.title.text.text == "Roofline: H100 SXM"
    roofs = pd.DataFrame(_roofs(fig))
    assert roofs["kind"].tolist() == ["memory", "compute", "compute"]  # slope, then the table's roofs bf16 and fp32
    slope = roofs.iloc[0]
    np.testing.assert_allclose(np.asarray(slope["ys"]), np.asarray(slope["xs"]) * spec.memory_bandwidth)
    assert slope["xs"][1] == pytest.approx(spec.ridge("bf16"))  # up to the highest roof
    for _, r in roofs.iloc[1:].iterrows():
        key = r["label"].split()[0]
        assert key in ("bf16", "fp32")
        assert r["ys"] == [spec.peak(key)] * 2 and r["xs"][0] == spec.ridge(key) == r["ridge"]
        assert r["xs"][1] == fig.x_range.end
    assert fig.x_range.start < min(_qwen("op")["intensity_flop_per_byte"].loc[lambda s: s > 0])
    assert fig.y_range.end > spec.peak("bf16")
    assert [type(r.glyph) for r in fig.renderers] == [MultiLine, Scatter]
    assert [r.data_source.name for r in fig.renderers] == ["roofline_roofs", "roofline_points"]
    tips = [h.tooltips for h in fig.select({"type": HoverTool})]
    assert all("{safe}" not in f for t in tips for _, f in t)


def test_extra_ceilings_are_dashed() -> None:
    spec = device_spec("H100 SXM")
    fig, _ = roofline_figure(_qwen("op"), spec.with_ceilings(l2_bandwidth=12e12),
                             ceilings={"measured bf16": 600e12}, bandwidths={"stream copy": 2.9e12})  # fmt: skip
    roofs = pd.DataFrame(_roofs(fig)).set_index("label")
    assert roofs.loc["L2 12 TB/s", "dash"] == "dotted"
    assert roofs.loc["stream copy 2.9 TB/s", "dash"] == "dashed"
    user = roofs.loc["measured bf16 600 TFLOP/s"]
    assert (user["dash"], user["ys"], user["xs"][0]) == ("dashed", [600e12] * 2, 600e12 / spec.memory_bandwidth)


def test_a_trace_without_modelled_ops_gives_roofs_and_says_so() -> None:
    t = aonkit.load(require_shared() / "hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz")
    table = roofline_table(t)
    assert len(table) == 0 and table.attrs["spec"].name == "A100 40GB"
    fig, src = roofline_figure(table)
    assert fig.title.text.text == "Roofline: A100 40GB: no ops with shapes"
    assert len(src.data["row"]) == 0
    labels = list(_roofs(fig)["label"])
    assert len(labels) == 1 + len(table.attrs["spec"].peak_flops)  # every peak when the table names none
    file_html(fig, INLINE, "empty")  # serialises


def test_no_spec_draws_points_only(tmp_path: Path) -> None:
    table = roofline_table(aonkit.load(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz"))
    assert table.attrs["spec"] is None
    fig, src = roofline_figure(table)
    assert fig.title.text.text == "Roofline: no device spec (roofs unknown)"
    assert len(_roofs(fig)["label"]) == 0
    assert set(src.data["color"]) == {theme.BOUND_COLORS[""]} and set(src.data["bound_label"]) == {"bound unknown"}
    assert set(src.data["timing"]) == {"cpu"} and len(src.data["row"]) > 100
    fig, _ = roofline_figure(table, ceilings={"guess": 1e12})  # a ceiling without a spec starts at the left edge
    assert _roofs(fig)["xs"][0][0] == fig.x_range.start


def test_point_data_of_an_empty_table() -> None:
    pts = point_data(pd.DataFrame())
    assert list(pts.columns) == list(POINT_COLUMNS) and len(pts) == 0
    fig, src = roofline_figure(pd.DataFrame(), None)
    assert fig.title.text.text.endswith("no ops with shapes") and isinstance(src, ColumnDataSource)


def test_markup_kernel_names_stay_data(tmp_path: Path) -> None:
    t = aonkit.load(markup_trace(tmp_path))
    table = roofline_table(t, by="kernel")
    fig, src = roofline_figure(table, title="$$not tex$$", ceilings={"<b>mine</b>": 1e14})
    assert list(src.data["name"]) == [MARKUP_KERNEL] and list(src.data["op_name"]) == ["aten::mm"]
    assert isinstance(fig.title.text, PlainText)  # BokehJS parses TeX (and fetches MathJax) in plain str titles
    assert_markup_only_in_data(fig, MARKUP_KERNEL)
    page = file_html(fig, INLINE, "markup")
    assert MARKUP_KERNEL not in page and TEX_KERNEL not in page and "cdn.bokeh.org" not in page
