"""Overview analysis and summary cards, as data: bar sources hold the analyses' numbers, headlines only numbers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from bokeh.embed import file_html
from bokeh.models import Div, GlyphRenderer, Tabs
from bokeh.resources import INLINE

import aonkit
from aonkit.analysis.hta_compat import comm_comp_overlap, hta_frames
from aonkit.analysis.idle import IDLE_CATEGORIES, idle_summary
from aonkit.analysis.kernels import gpu_time_per_op, kernel_stats
from aonkit.analysis.overview import Overview, idle_totals, overview
from aonkit.analysis.roofline import roofline_table
from aonkit.views import cards, theme
from aonkit.views.cards import summary_cards
from aonkit.views.dashboard import dashboard

from .conftest import SAMPLE_TRACES, require_shared
from .views_checks import MARKUP_KERNEL, MARKUP_OP, TEX_KERNEL, assert_markup_only_in_data, markup_trace


@pytest.fixture(scope="module")
def gpu_overview() -> Overview:
    return overview(aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"))


def test_overview_gathers_the_analyses(gpu_overview: Overview) -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    ov = gpu_overview
    assert ov.kernels.equals(kernel_stats(t)) and ov.ops.equals(gpu_time_per_op(t))
    assert ov.classes["class"].tolist() == ["computation", "communication", "memory"]
    frames = hta_frames(t, include_last_step=True)
    per = idle_summary(t)
    assert ov.idle["idle_category"].tolist() == list(IDLE_CATEGORIES)
    assert ov.idle["idle_ns"].tolist() == [int(per[f"{c}_ns"].sum()) for c in IDLE_CATEGORIES]
    assert ov.idle["idle_ns"].sum() == ov.gpu_span_ns - ov.gpu_busy_ns > 0  # exact: busy + idle == GPU span
    assert ov.idle["share"].sum() == pytest.approx(1.0)
    assert ov.comm_overlap_pct == comm_comp_overlap(frames)["comp_comm_overlap_pctg"].iloc[0] == 72.54
    gpu = t.gpu_events
    assert ov.gpu_span_ns == int((gpu["ts_ns"] + gpu["dur_ns"]).max() - gpu["ts_ns"].min())
    assert ov.gpu_busy_fraction == ov.gpu_busy_ns / ov.gpu_span_ns


def test_idle_totals_of_nothing() -> None:
    empty = idle_summary(aonkit.load(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz"))
    assert len(empty) == 0
    out = idle_totals(empty)
    assert out["idle_ns"].tolist() == [0, 0, 0] and out["share"].isna().all()


def test_cards_hold_the_overview(gpu_overview: Overview) -> None:
    ov = gpu_overview
    layout, src = summary_cards(ov)
    busy = src["busy"].data
    assert busy["value_ns"].tolist() == [ov.gpu_busy_ns, ov.gpu_span_ns - ov.gpu_busy_ns]
    assert busy["share"].sum() == pytest.approx(1.0)
    idle = src["idle"].data
    assert list(idle["label"]) == ["host wait", "kernel wait", "other"]
    np.testing.assert_array_equal(idle["value_ns"], ov.idle["idle_ns"])
    assert list(idle["color"]) == [theme.IDLE_COLORS[c] for c in IDLE_CATEGORIES]
    classes = src["classes"].data
    np.testing.assert_array_equal(classes["value_ns"], ov.classes["total_ns"])
    assert list(classes["color"]) == list(theme.CLASS_COLORS.values())
    top = src["top_kernels"].data
    assert list(top["name"]) == ov.kernels["name"].head(5).tolist()
    np.testing.assert_allclose(top["share"], ov.kernels["share"].head(5))
    assert all(len(label) <= cards.LABEL_CHARS for label in top["label"]) and top["label"][0].endswith("…")
    assert top["time_text"][0] == aonkit.units.fmt_ns(ov.kernels["total_ns"].iloc[0])
    # every bar shows its time and share on its row, not only on hover
    assert list(idle["value_text"]) == [f"{aonkit.units.fmt_ns(v)} · {theme.fmt_pct(s)}"
                                        for v, s in zip(ov.idle["idle_ns"], ov.idle["share"])]
    drawn = {getattr(r.glyph.text, "field", r.glyph.text) for r in layout.select({"type": GlyphRenderer})
             if hasattr(r.glyph, "text")}
    assert {"label", "value_text"} <= drawn
    ops = src["top_ops"].data
    assert list(ops["name"]) == ov.ops["op_name"].head(5).tolist()
    heads = [d.text for d in layout.select({"type": Div})]
    assert any(">91.9 %<" in h for h in heads) and any(">72.5 %<" in h for h in heads)
    assert not any(n in h for h in heads for n in ov.kernels["name"])  # headlines carry no names


def test_cards_of_a_real_h100_trace() -> None:
    t = aonkit.load(require_shared() / "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    ov = overview(t)
    assert math.isnan(ov.comm_overlap_pct)  # one GPU, no NCCL
    # exact ns, the obvious way: the holes in the union of the GPU events (HTA's µs rounding gave 5.688 ms)
    g = t.gpu_events
    order = np.argsort(g["ts_ns"].to_numpy(), kind="stable")
    start, end = g["ts_ns"].to_numpy()[order], (g["ts_ns"] + g["dur_ns"]).to_numpy()[order]
    reach = np.maximum.accumulate(end)
    assert ov.idle["idle_ns"].sum() == np.maximum(start[1:] - reach[:-1], 0).sum() == 4_005_532
    assert ov.gpu_span_ns == reach[-1] - start[0]
    assert ov.idle.set_index("idle_category")["idle_ns"]["other"] == 0  # every launch is in the window
    layout, src = summary_cards(ov, n=3)
    assert len(src["top_kernels"].data["name"]) == 3
    heads = " ".join(d.text for d in layout.select({"type": Div}))
    assert "no communication" in heads and "3 of " in heads


def test_cards_of_a_cpu_only_trace() -> None:
    ov = overview(aonkit.load(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz"))
    layout, src = summary_cards(ov)
    heads = " ".join(d.text for d in layout.select({"type": Div}))
    assert "no GPU kernels" in heads and "no communication" in heads
    assert len(src["top_kernels"].data["name"]) == 0 and all(np.isnan(src["idle"].data["share"]))
    file_html(layout, INLINE, "cpu")


def test_markup_names_stay_data_in_cards(tmp_path: Path) -> None:
    ov = overview(aonkit.load(markup_trace(tmp_path)))
    assert ov.comm_overlap_pct == round(100 * 10 / 30, 2)  # the NCCL kernel overlaps the last 10 of 30 µs
    layout, _ = summary_cards(ov)
    assert_markup_only_in_data(layout, MARKUP_KERNEL, MARKUP_OP, TEX_KERNEL)
    page = file_html(layout, INLINE, "cards")
    assert MARKUP_KERNEL not in page and MARKUP_OP not in page and "cdn.bokeh.org" not in page


@pytest.mark.parametrize("by", ["kernel", "op"])
def test_dashboard_links_cards_tables_and_roofline(tmp_path: Path, by: str) -> None:
    t = aonkit.load(markup_trace(tmp_path))
    layout, src = dashboard(overview(t), roofline_table(t, by=by))
    assert set(src) == {"busy", "idle", "classes", "top_kernels", "top_ops", "kernels", "ops", "roofline"}
    linked = {(cb.args["src"].name, cb.args["dst"].name, cb.args["src_key"], cb.args["dst_key"])
              for s in src.values() for cbs in s.selected.js_property_callbacks.values() for cb in cbs}  # fmt: skip
    table = ("kernel_table", "name") if by == "kernel" else ("op_table", "op_name")
    assert linked == {
        ("card_top_kernels", "kernel_table", "name", "name"), ("kernel_table", "card_top_kernels", "name", "name"),
        ("card_top_ops", "op_table", "name", "op_name"), ("op_table", "card_top_ops", "op_name", "name"),
        (table[0], "roofline_points", table[1], "name"), ("roofline_points", table[0], "name", table[1]),
    }  # fmt: skip
    assert_markup_only_in_data(layout, MARKUP_KERNEL, MARKUP_OP)
    # the tables are as tall as the roofline in the same tabs: no blank band under them
    tabs = [p.child for t in layout.select({"type": Tabs}) for p in t.tabs]
    assert len({c.height for c in tabs}) == 1
    page = file_html(layout, INLINE, "dashboard")
    assert MARKUP_KERNEL not in page and "cdn.bokeh.org" not in page
    layout, src = dashboard(overview(t))
    assert "roofline" not in src


def test_busy_card_says_when_its_span_is_summed_over_gpus() -> None:
    # GIVEN an nsys export of two processes on two GPUs (each ~8.4 ms), and the one-GPU sample
    two = overview(aonkit.load(SAMPLE_TRACES / "nsys" / "synthetic_2proc.sqlite"))
    one = overview(aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"))
    # THEN the busy card's note says the GPU span is a sum (it reads longer than the trace's own span)
    note = next(d.text for d in cards.busy_card(two).select({"type": Div}) if "GPU span" in d.text)
    assert len(two.gpu) == 2 and two.gpu_span_ns > two.summary.span_ns and "summed over 2 GPUs" in note
    assert not any("summed over" in d.text for d in cards.busy_card(one).select({"type": Div}))


def test_cut_text_at_the_end_in_the_middle_and_when_too_narrow() -> None:
    from aonkit.units import cut_text

    name = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32"
    assert cut_text(name, 100) == name and cut_text("", 0) == ""
    assert cut_text(name, 10) == "sm90_xmma…" and len(cut_text(name, 10)) == 10
    mid = cut_text(name, 11, middle=True)
    assert len(mid) == 11 and mid.startswith("sm90_x") and mid.endswith("x32") and "…" in mid
    assert cut_text(name, 10, mark="...") == "sm90_xm..."
    assert cut_text(name, 3, min_chars=4) == "" and cut_text("abc", 3, min_chars=4) == "abc"
