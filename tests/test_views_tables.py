"""Kernel and op tables and linked selection, as data: sources hold the analyses' numbers, names stay text."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from bokeh.embed import file_html
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, HTMLTemplateFormatter, NumberFormatter
from bokeh.resources import INLINE

import aonkit
from aonkit.analysis.kernels import gpu_time_per_op, kernel_stats
from aonkit.analysis.roofline import roofline_table
from aonkit.views.linking import LINK_JS, link_selection, selection_callback
from aonkit.views.roofline import roofline_figure
from aonkit.views.tables import NAME_TEMPLATE, SHARE_FORMAT, kernel_table, op_table

from .conftest import SAMPLE_TRACES, require_shared
from .views_checks import MARKUP_KERNEL, MARKUP_OP, TEX_KERNEL, assert_markup_only_in_data, markup_trace

GPU = SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"


def test_kernel_table_holds_kernel_stats() -> None:
    t = aonkit.load(GPU)
    stats = kernel_stats(t)
    table, src = kernel_table(t)
    d = src.data
    assert list(d["name"]) == stats["name"].tolist() and list(d["class"]) == stats["class"].tolist()
    np.testing.assert_array_equal(d["total_ns"], stats["total_ns"])
    np.testing.assert_array_equal(d["share"], stats["share"])
    titles = {c.field: c.title for c in table.columns}
    assert titles["total"] == "total (ms)" and titles["share"] == "share"  # 162 ms NCCL total
    np.testing.assert_allclose(d["total"], stats["total_ns"] / 1e6)
    unit = titles["min"].split("(")[1].rstrip(")")
    np.testing.assert_allclose(d["min"], stats["min_ns"] / {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit])
    fmt = {c.field: c.formatter for c in table.columns}
    # names: escaped text with the whole name as the tooltip (tables.NAME_TEMPLATE interpolates with <%- %> only)
    assert isinstance(fmt["name"], HTMLTemplateFormatter) and fmt["name"].template == NAME_TEMPLATE
    assert fmt["share"].format == SHARE_FORMAT
    assert isinstance(fmt["total"], NumberFormatter)  # numbers, so sorting is numeric
    assert table.sortable and table.source is src
    top, top_src = kernel_table(stats, n=5)
    assert list(top_src.data["name"]) == stats["name"].head(5).tolist()


def test_op_table_holds_gpu_time_per_op() -> None:
    t = aonkit.load(require_shared() / "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    ops = gpu_time_per_op(t)
    table, src = op_table(t)
    d = src.data
    assert list(d["op_name"]) == ops["op_name"].tolist()
    np.testing.assert_array_equal(d["gpu_ns"], ops["gpu_ns"])
    np.testing.assert_array_equal(d["cpu_ns"], ops["cpu_ns"])
    assert d["share"].sum() == pytest.approx(1.0)
    assert [c.title for c in table.columns] == ["op", "calls", "GPU events", "GPU time (ms)", "CPU time (ms)", "share"]
    _, few = op_table(ops, n=3)
    np.testing.assert_array_equal(few.data["share"], d["share"][:3])  # shares stay of the whole
    _, inner = op_table(t, level="op")
    assert list(inner.data["op_name"]) == gpu_time_per_op(t, level="op")["op_name"].tolist()


def test_tables_of_a_cpu_only_trace_are_empty() -> None:
    t = aonkit.load(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz")
    for make in (kernel_table, op_table):
        table, src = make(t)
        assert all(len(v) == 0 for v in src.data.values())
        assert table.columns[3].title.endswith("(ns)")


def test_markup_names_stay_data_in_tables(tmp_path: Path) -> None:
    t = aonkit.load(markup_trace(tmp_path))
    kt, _ = kernel_table(t)
    ot, _ = op_table(t)
    assert_markup_only_in_data(kt, MARKUP_KERNEL, TEX_KERNEL)
    assert_markup_only_in_data(ot, MARKUP_OP)
    page = file_html(column(kt, ot), INLINE, "tables")
    assert MARKUP_KERNEL not in page and MARKUP_OP not in page and "cdn.bokeh.org" not in page


# --- linking -------------------------------------------------------------------------------------------------


def test_link_selection_args_and_fixed_code(tmp_path: Path) -> None:
    t = aonkit.load(markup_trace(tmp_path))
    _, ksrc = kernel_table(t)
    _, psrc = roofline_figure(roofline_table(t, by="kernel"))
    forward, back = link_selection(ksrc, psrc, "name")
    assert forward.args == {"src": ksrc, "dst": psrc, "src_key": "name", "dst_key": "name"}
    assert back.args == {"src": psrc, "dst": ksrc, "src_key": "name", "dst_key": "name"}
    assert forward.code == back.code == LINK_JS and MARKUP_KERNEL not in LINK_JS
    assert ksrc.selected.js_property_callbacks["change:indices"] == [forward]
    assert psrc.selected.js_property_callbacks["change:indices"] == [back]
    one = selection_callback(ColumnDataSource({"row": [1]}), ColumnDataSource({"event": [1]}), "row", "event")
    assert one.args["src_key"] == "row" and one.args["dst_key"] == "event"
    with pytest.raises(KeyError, match="nope"):
        link_selection(ksrc, psrc, "nope")


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the callback's JavaScript")
def test_link_js_selects_rows_by_key_and_settles() -> None:
    src = {"id": "p1", "data": {"k": ["a", "<img src=x>", "c"]}, "selected": {"indices": [1, 2]}}
    dst = {"id": "p2", "data": {"name": ["c", "x", "<img src=x>", "c"]}, "selected": {"indices": []}}
    script = (
        f"const f = new Function('src', 'dst', 'src_key', 'dst_key', {json.dumps(LINK_JS)});\n"
        f"const src = {json.dumps(src)}, dst = {json.dumps(dst)};\n"
        "let writes = 0; const sel = dst.selected; let ind = sel.indices;\n"
        "Object.defineProperty(sel, 'indices', {get: () => ind, set: (v) => { writes++; ind = v; }});\n"
        "f(src, dst, 'k', 'name'); f(src, dst, 'k', 'name');\n"
        "console.log(JSON.stringify({indices: dst.selected.indices, writes}));"
    )
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True, timeout=60).stdout
    assert json.loads(out) == {"indices": [0, 2, 3], "writes": 1}  # the second call sees the same selection


LINKED_JS = """
// sources as BokehJS has them: a selection whose indices, when set, run its change callbacks at once
const run = new Function('src', 'dst', 'src_key', 'dst_key', CODE);
const later = [];  // BokehJS runs a CustomJS after the change that fires it (compiled, awaited): ASYNC queues them
function source(id, data) {
  const s = {id, data, callbacks: []};
  let ind = [];
  s.selected = {get indices() { return ind; },
                set indices(v) { ind = v; for (const cb of s.callbacks) ASYNC ? later.push(cb) : cb(); }};
  return s;
}
const settle = () => { while (later.length) later.shift()(); };
function link(a, b, key) {
  a.callbacks.push(() => run(a, b, key, key));
  b.callbacks.push(() => run(b, a, key, key));
}
const table = source('t', {name: ['gemm', 'softmax', 'copy']});
const card = source('c', {name: ['gemm', 'softmax']});
const roofline = source('r', {name: ['gemm']});  // softmax and copy have no roofline point
link(card, table, 'name');
link(table, roofline, 'name');
const out = [];
for (const pick of [[0], [1], [2], []]) {  // gemm, then softmax, copy, nothing: picked in the table
  table.selected.indices = pick;
  settle();
  out.push([table.selected.indices, card.selected.indices, roofline.selected.indices]);
}
card.selected.indices = [1];  // a pick in the card reaches the table and, through it, the roofline
settle();
out.push([table.selected.indices, card.selected.indices, roofline.selected.indices]);
card.selected.indices = [0];
settle();
out.push([table.selected.indices, card.selected.indices, roofline.selected.indices]);
table.selected.indices = [1];  // the card gets [1] from the table; a person then clears it, and picks it again
settle();
card.selected.indices = [];
settle();
card.selected.indices = [1];
settle();
out.push([table.selected.indices, card.selected.indices, roofline.selected.indices]);
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the callback's JavaScript")
@pytest.mark.parametrize("later", [True, False], ids=["callbacks after the change", "callbacks inside it"])
def test_a_pick_is_kept_where_it_was_made_when_a_linked_source_has_no_row_for_it(later: bool) -> None:
    script = LINKED_JS.replace("CODE", json.dumps(LINK_JS)).replace("ASYNC", "true" if later else "false")
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True, timeout=60).stdout
    assert json.loads(out) == [
        [[0], [0], [0]],  # gemm: everywhere
        [[1], [1], []],  # softmax: no roofline point, and the table keeps its pick (it was cleared by the way back)
        [[2], [], []],  # copy: beyond the card too
        [[], [], []],
        [[1], [1], []],  # picked in the card: the table follows, the roofline has none
        [[0], [0], [0]],
        [[1], [1], []],  # a pick the card had from the table, made again in the card, still reaches the table
    ]
