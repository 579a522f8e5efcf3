"""The model views' static bokeh figures: each draws its ``*_data`` columns and renders to a page needing no network.

``LLMModelPanel`` and ``ServingPanel`` draw on canvases of their own (:mod:`aonkit.views.model_charts`); these are
the same answers as plain bokeh layouts, for a page or an exported notebook.
"""

from __future__ import annotations

import re

import pytest
from bokeh.embed import file_html
from bokeh.models import ColumnDataSource, GlyphRenderer, VSpan
from bokeh.resources import INLINE

from aonkit.model import Lengths, StepTime, device_spec, saturation_knee, serving_sweep
from aonkit.model.llm import LLAMA3_70B, Parallelism, training_memory, training_step
from aonkit.model.serving_steps import serving_memory
from aonkit.views.llm import (
    inference_data,
    inference_figures,
    inference_table,
    kv_limit_data,
    memory_data,
    memory_figure,
    memory_table,
    step_data,
    step_figure,
    step_table,
)
from aonkit.views.serving import knee_data, marker_data, slo_data, sweep_data, sweep_figures

H100 = device_spec("H100 SXM")


def standalone(layout) -> str:
    """The layout as a page with BokehJS inline: no script it loads, nothing from Bokeh's CDN."""
    page = file_html(layout, INLINE, "aonkit")
    assert not re.search(r"<script[^>]+src=", page) and "cdn.bokeh.org" not in page
    return page


def test_the_training_figures_draw_the_step_and_the_memory_against_the_capacity() -> None:
    parallel = Parallelism(tp=8, pp=4, dp=8, vpp=2, sp=True, zero=1)
    step, mem = training_step(LLAMA3_70B, H100, parallel, 1024), training_memory(LLAMA3_70B, parallel, 1024)
    fig, src = step_figure(step_table(step))
    assert src.data == step_data(step_table(step))
    fig2, bars, cap = memory_figure(memory_table(mem), H100.memory_bytes)
    assert bars.data == memory_data(memory_table(mem)) and cap.data["gb"] == [pytest.approx(80.0)]
    assert cap.data["over"] == [mem.total > H100.memory_bytes]
    page = standalone(fig) + standalone(fig2)
    assert "training step time" in page and "memory per GPU" in page


def test_the_inference_figures_mark_where_the_kv_cache_fills() -> None:
    # GIVEN Llama-3 70B on eight H100s: 162 sequences of 8,192 tokens fill the cache beside the weights
    table = inference_table(LLAMA3_70B, H100, batch=4, context=8192, tp=8)
    kv = serving_memory(LLAMA3_70B, H100, 8, "bf16").kv_tokens
    layout, sources = inference_figures(table, kv_tokens=kv)
    # THEN each curve's source holds its points, and the batch curve has the dashed line at 162 sequences; the
    # context curve (4 sequences) fills it past its last point: no line
    for sweep in ("batch", "context"):
        assert sources[sweep].data == inference_data(table, sweep)
        assert sources[f"kv_{sweep}"].data == kv_limit_data(table, sweep, kv)
    assert sources["kv_batch"].data["x"] == [pytest.approx(kv / 8192)] and 160 < kv / 8192 < 164
    assert sources["kv_context"].data["x"] == []
    spans = [g for g in layout.select({"type": GlyphRenderer}) if isinstance(g.glyph, VSpan)]
    assert sorted(g.data_source.name for g in spans) == ["llm_kv_batch", "llm_kv_context"]
    page = standalone(layout)
    assert "KV cache full" in page and "latency vs batch" in page
    # AND with no memory known nothing is marked
    _, bare = inference_figures(table)
    assert bare["kv_batch"].data == {"x": []} and bare["kv_context"].data == {"x": []}


def test_the_sweep_figures_draw_the_percentiles_the_knee_the_rate_and_the_objective() -> None:
    st = StepTime(prefill_time_s=(0.005, 2e-5), decode_time_s=(0.010, 1e-4, 1e-7))
    sweep = serving_sweep([2.0, 8.0, 16.0, 32.0], Lengths.lognormal(512, 1.0), Lengths.geometric(128),
                          n_requests=1500, step_time=st, max_batch=16, token_budget=2048, chunked_prefill=True)
    knee = saturation_knee(sweep, "ttft_p99_s")
    layout, sources = sweep_figures(sweep, knee, rate=8.0, slo_s=0.5)
    assert set(sources) == {"sweep", "knee", "rate", "slo"}
    assert all(isinstance(s, ColumnDataSource) for s in sources.values())
    assert sources["sweep"].data == sweep_data(sweep) and sources["knee"].data == knee_data(knee)
    assert sources["rate"].data == marker_data(8.0, "arrival rate") and sources["slo"].data == slo_data(0.5)
    assert sources["slo"].data["ms"] == [pytest.approx(500.0)]
    assert "arrival rate (requests/s)" in standalone(layout)
