"""Helpers for the view tests: a trace with markup names, and where strings end up in a bokeh model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bokeh.model import Model
from bokeh.models import ColumnDataSource, DataTable, Div, HoverTool, HTMLTemplateFormatter

MARKUP_KERNEL = "<img src=x onerror=alert(1)>"
MARKUP_OP = "<script>alert(2)</script>"
TEX_KERNEL = "$$x$$ <b>k</b>"  # TeX delimiters would make BokehJS fetch MathJax if parsed
H100_PROPS = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936, "numSms": 132}]


def _x(name: str, ts: float, dur: float, cat: str = "cpu_op", pid: int = 1, tid: int = 1, **args: Any) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def markup_trace(tmp_path: Path) -> Path:
    """A Kineto trace whose kernel and op names are HTML/JS markup; ``aten::mm`` makes a roofline point."""
    gpu = {"device": 0, "stream": 7}
    events = [
        _x("aten::mm", 0, 100, **{"Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"]}),
        _x("cudaLaunchKernel", 10, 5, "cuda_runtime", correlation=1),
        _x(MARKUP_KERNEL, 200, 50, "kernel", 0, 7, correlation=1, **gpu),
        _x(MARKUP_OP, 300, 50),
        _x("cudaLaunchKernel", 310, 5, "cuda_runtime", correlation=2),
        _x(TEX_KERNEL, 400, 20, "kernel", 0, 7, correlation=2, **gpu),
        _x("ncclDevKernel_AllReduce <i>x</i>", 410, 30, "kernel", 0, 9, correlation=-1, device=0, stream=9),
    ]
    path = tmp_path / "markup.json"
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": H100_PROPS}))
    return path


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, Model) and hasattr(value, "text") and isinstance(value.text, str):
        yield value.text  # PlainText and other text models


def raw_strings(root: Model) -> list[str]:
    """Every string property of every model under ``root``, except the data of ColumnDataSources."""
    out: list[str] = []
    for model in root.references():
        for name, value in model.properties_with_values(include_defaults=False).items():
            if isinstance(model, ColumnDataSource) and name == "data":
                continue
            out += list(_strings(value))
    return out


def data_strings(root: Model) -> list[str]:
    """Every string in the data of the ColumnDataSources under ``root``."""
    out: list[str] = []
    for src in root.select({"type": ColumnDataSource}):
        for col in src.data.values():
            out += [v for v in col if isinstance(v, str)]
    return out


def assert_markup_only_in_data(root: Model, *names: str) -> None:
    """``names`` are in source data, nowhere else; no raw-HTML path (``{safe}``, raw template cells) exists."""
    raw = raw_strings(root)
    data = data_strings(root)
    for name in names:
        assert name in data, f"{name!r} missing from the data"
        assert not any(name in s for s in raw), f"{name!r} in a raw property"
    assert not any("<img" in s or "<script" in s for s in raw)
    for hover in root.select({"type": HoverTool}):
        assert "{safe}" not in str(hover.tooltips)
    for table in root.select({"type": DataTable}):  # a template cell interpolates only escaped (<%- %>), never raw
        for c in table.columns:
            if isinstance(c.formatter, HTMLTemplateFormatter):
                t = c.formatter.template
                assert "<%=" not in t and "<%-" in t and "<%" not in t.replace("<%-", ""), t
    for div in root.select({"type": Div}):
        assert div.disable_math and not div.render_as_text  # escaped HTML by construction, no TeX
