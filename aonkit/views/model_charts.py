"""The model panels' figures as canvas chart specs (:class:`aonkit.widgets.charts.Charts`), beside the bokeh ones.

The same tables and the same ``*_data`` columns as :mod:`aonkit.views.llm` and :mod:`aonkit.views.serving`
(whose bokeh figures remain for static pages and :func:`aonkit.widgets.show`); here each figure is a plain dict
that ``widgets/charts.js`` draws on a canvas. Titles, labels and hover text are drawn as text, never as HTML.
"""

from __future__ import annotations

from typing import Any

from .llm import INFERENCE_COLORS, KV_COLOR, MEMORY_PARTS, STEP_GROUPS, STEP_PARTS
from .serving import KNEE_COLOR, METRICS, PERCENTILES, RATE_COLOR, SLO_COLOR

COLOCATED_COLOR, APART_COLOR, DECODE_COLOR = "#0072B2", "#D55E00", "#009E73"

DASHED, DOTTED = [6, 4], [2, 3]


def axis(kind: str = "linear", label: str = "", **kw: Any) -> dict[str, Any]:
    """An axis of a chart spec.

    ``kind`` is ``"linear"``, ``"log"`` or ``"factor"`` (with ``factors``, bottom to top); ``start`` and ``end`` fix
    an end of the range (data units); ``hidden`` hides it; ``grid=False`` drops its grid lines.
    """
    return {"type": kind, "label": label, **kw}


def chart(title: str, x: dict, y: dict, marks: list[dict], *, width: int, height: int, legend: dict | None = None,
          hover: dict | None = None) -> dict[str, Any]:  # fmt: skip
    """One chart's spec."""
    return {"title": title, "x": x, "y": y, "marks": marks, "width": int(width), "height": int(height),
            "legend": legend, "hover": hover}  # fmt: skip


def _line_and_points(source: str, x: str, y: str, color: str, **kw: Any) -> list[dict]:
    return [{"kind": "line", "source": source, "x": x, "y": y, "color": color, "line_width": 2, **kw},
            {"kind": "points", "source": source, "x": x, "y": y, "color": color, "size": 4}]  # fmt: skip


# ---- LLM panel -------------------------------------------------------------------------------------------------
def step_chart(width: int = 560, height: int = 260) -> dict[str, Any]:
    """Horizontal stacked bars of the step time (source ``"step"``: :func:`aonkit.views.llm.step_data`)."""
    bars = {"kind": "hbar", "source": "step", "y": "group", "left": "left", "right": "right", "height": 0.7,
            "color_field": "color", "line_color": "#ffffff"}  # fmt: skip
    return chart("training step time", axis("linear", "seconds per iteration (critical rank)", start=0),
                 axis("factor", factors=list(reversed(STEP_GROUPS))), [bars], width=width, height=height,
                 legend={"location": "right", "items": [{"label": lab, "color": c, "box": True}
                                                        for _, _, lab, c in STEP_PARTS]},
                 hover={"mode": "bars", "source": "step", "fields": [["", "label"], ["time", "text"]]})  # fmt: skip


def memory_chart(width: int = 420, height: int = 320) -> dict[str, Any]:
    """A stacked bar of memory per GPU (source ``"memory"``) and the capacity line (source ``"capacity"``)."""
    marks = [
        {"kind": "vbar", "source": "memory", "x": "x", "bottom": "bottom", "top": "top", "width": 0.6,
         "color_field": "color", "line_color": "#ffffff"},
        {"kind": "segment", "source": "capacity", "x0": "x0", "x1": "x1", "y0": "gb", "y1": "gb",
         "color_field": "color", "line_width": 3, "dash": DASHED},
        {"kind": "text", "source": "capacity", "x": "x0", "y": "gb", "text": "label", "color_field": "color",
         "dx": 2, "dy": 4, "background": True},
    ]  # fmt: skip
    x, y = axis("linear", start=-0.7, end=0.7, hidden=True, grid=False), axis("linear", "GB per GPU", start=0)
    items = [{"label": lab, "color": c, "box": True} for _, lab, c in MEMORY_PARTS]
    hover = {"mode": "bars", "source": "memory", "fields": [["", "label"], ["per GPU", "text"]]}
    return chart("memory per GPU (first pipeline stage)", x, y, marks, width=width, height=height,
                 legend={"location": "right", "items": items}, hover=hover)


def inference_charts(width: int = 440, height: int = 300) -> list[dict[str, Any]]:
    """TTFT and TPOT (ms, log) against batch and against context (sources ``"batch"``, ``"context"``).

    A dashed line where the KV cache is full (sources ``"kv_batch"``, ``"kv_context"``:
    :func:`aonkit.views.llm.kv_limit_data`): points to its right do not fit in the GPU's memory.
    """
    out = []
    for sweep, xlabel in (("batch", "batch (sequences)"), ("context", "context (tokens)")):
        marks = [*_line_and_points(sweep, "x", "ttft_ms", INFERENCE_COLORS["ttft"]),
                 *_line_and_points(sweep, "x", "tpot_ms", INFERENCE_COLORS["tpot"]),
                 *_line_and_points(sweep, "x", "spec_ms", INFERENCE_COLORS["spec"], dash=DASHED),
                 {"kind": "vspan", "source": f"kv_{sweep}", "x": "x", "color": KV_COLOR, "line_width": 2,
                  "dash": DASHED}]  # fmt: skip
        items = [{"label": "TTFT (prefill)", "color": INFERENCE_COLORS["ttft"]},
                 {"label": "TPOT (decode step)", "color": INFERENCE_COLORS["tpot"]},
                 {"label": "TPOT, speculative", "color": INFERENCE_COLORS["spec"], "dash": DASHED},
                 {"label": "KV cache full", "color": KV_COLOR, "dash": DASHED}]  # fmt: skip
        hover = {"mode": "nearest", "source": sweep, "x": "x", "y": ["ttft_ms", "tpot_ms", "spec_ms"],
                 "fields": [[sweep, "x"], ["TTFT", "ttft_text"], ["TPOT", "tpot_text"],
                            ["speculative", "spec_text"]]}  # fmt: skip
        out.append(chart(f"latency vs {sweep}", axis("log", xlabel), axis("log", "ms"), marks, width=width,
                         height=height, legend={"location": "top_left", "items": items}, hover=hover))  # fmt: skip
    return out


# ---- serving panel ---------------------------------------------------------------------------------------------
def _markers() -> list[dict]:
    return [{"kind": "vspan", "source": "knee", "x": "rate", "color": KNEE_COLOR, "line_width": 2, "dash": DASHED},
            {"kind": "vspan", "source": "rate", "x": "rate", "color": RATE_COLOR, "line_width": 1, "alpha": 0.6}]


def sweep_charts(width: int = 380, height: int = 260) -> list[dict[str, Any]]:
    """Latency percentiles (TTFT, TPOT, end-to-end; ms, log) and throughput against arrival rate.

    Sources: ``"sweep"`` (:func:`aonkit.views.serving.sweep_data`), ``"knee"``, ``"rate"``, ``"slo"``.
    """
    xlab = "arrival rate (requests/s)"
    out = []
    for m, title in METRICS:
        marks = [mk for p, color, _ in PERCENTILES for mk in _line_and_points("sweep", "rate", f"{m}_{p}_ms", color)]
        if m == "ttft":
            marks.append({"kind": "hspan", "source": "slo", "y": "ms", "color": SLO_COLOR, "line_width": 2,
                          "dash": DOTTED})  # fmt: skip
        marks += _markers()
        if m == "ttft":  # the knee on the p99 TTFT line (the metric it is found on), labelled
            marks += [{"kind": "points", "source": "knee", "x": "rate", "y": "ms", "marker": "diamond", "size": 12,
                       "color": KNEE_COLOR},
                      {"kind": "text", "source": "knee", "x": "rate", "y": "ms", "text": "label", "color": KNEE_COLOR,
                       "dx": 6, "dy": 4}]  # fmt: skip
        hover = {"mode": "vline", "source": "sweep", "x": "rate",
                 "fields": [["rate", "rate", "/s"], *([p, f"{m}_{p}_text"] for p, _, _ in PERCENTILES)]}  # fmt: skip
        legend = {"location": "top_left", "items": [{"label": p, "color": c} for p, c, _ in PERCENTILES]}
        out.append(chart(title, axis("linear", xlab), axis("log", "ms"), marks, width=width, height=height,
                         legend=legend, hover=hover))  # fmt: skip
    marks = [{"kind": "line", "source": "sweep", "x": "rate", "y": "rate", "color": "#999999", "dash": DASHED},
             *_line_and_points("sweep", "rate", "throughput", "#0072B2"), *_markers()]  # fmt: skip
    legend = {"location": "top_left", "items": [{"label": "offered", "color": "#999999", "dash": DASHED},
                                                {"label": "served", "color": "#0072B2"}]}  # fmt: skip
    hover = {"mode": "vline", "source": "sweep", "x": "rate",
             "fields": [["rate", "rate", "/s"], ["served", "throughput", "/s"], ["replicas busy", "busy_text"]]}
    out.append(chart("throughput", axis("linear", xlab), axis("linear", "requests/s"), marks, width=width,
                     height=height, legend=legend, hover=hover))  # fmt: skip
    return out


RATE_MARK = {"kind": "vspan", "source": "rate", "x": "rate", "color": RATE_COLOR, "line_width": 1, "alpha": 0.6}
"""The chosen rate's line on :func:`pools_charts`."""


def pools_charts(width: int = 380, height: int = 240) -> list[dict[str, Any]]:
    """Colocated against disaggregated serving, against rate: p99 TTFT, p99 TPOT, requests within both, busy shares.

    Latencies in ms on log axes; the share of requests meeting both objectives with the goodput's target line.
    Sources: ``"pools"`` (:func:`aonkit.views.serving.pools_data`), ``"rate"``, ``"ttft_slo"``, ``"tpot_slo"``,
    ``"target"`` (``share``: the attainment goodput is read at).
    """
    xlab, out = "arrival rate (requests/s)", []
    items = [{"label": "colocated", "color": COLOCATED_COLOR}, {"label": "disaggregated", "color": APART_COLOR}]
    for m, title in (("ttft", "p99 time to first token"), ("tpot", "p99 time per output token")):
        marks = [*_line_and_points("pools", "rate", f"colocated_{m}_ms", COLOCATED_COLOR),
                 *_line_and_points("pools", "rate", f"apart_{m}_ms", APART_COLOR),
                 {"kind": "hspan", "source": f"{m}_slo", "y": "ms", "color": SLO_COLOR, "line_width": 2,
                  "dash": DOTTED},
                 RATE_MARK]
        hover = {"mode": "vline", "source": "pools", "x": "rate", "fields": [
            ["rate", "rate", "/s"], ["colocated", f"colocated_{m}_text"], ["disaggregated", f"apart_{m}_text"]]}
        out.append(chart(title, axis("linear", xlab), axis("log", "ms"), marks, width=width, height=height,
                         legend={"location": "top_left", "items": items}, hover=hover))  # fmt: skip
    marks = [*_line_and_points("pools", "rate", "colocated_attain", COLOCATED_COLOR),
             *_line_and_points("pools", "rate", "apart_attain", APART_COLOR),
             {"kind": "hspan", "source": "target", "y": "share", "color": SLO_COLOR, "line_width": 2, "dash": DOTTED},
             RATE_MARK]
    hover = {"mode": "vline", "source": "pools", "x": "rate", "fields": [
        ["rate", "rate", "/s"], ["colocated", "colocated_attain_text"], ["disaggregated", "apart_attain_text"]]}
    out.append(chart("requests within both objectives", axis("linear", xlab),
                     axis("linear", "share", start=0, end=1.05), marks, width=width, height=height,
                     legend={"location": "right", "items": items}, hover=hover))  # fmt: skip (lines near 1 at left)
    parts = (("colocated", "colocated GPUs", COLOCATED_COLOR), ("prefill", "prefill pool", APART_COLOR),
             ("decode", "decode pool", DECODE_COLOR))  # fmt: skip
    marks = [mk for key, _, color in parts for mk in _line_and_points("pools", "rate", f"{key}_busy", color)]
    marks.append(RATE_MARK)
    hover = {"mode": "vline", "source": "pools", "x": "rate",
             "fields": [["rate", "rate", "/s"], *([lab, f"{key}_busy_text"] for key, lab, _ in parts)]}
    out.append(chart("share of time busy", axis("linear", xlab), axis("linear", "busy", start=0, end=1.05), marks,
                     width=width, height=height, legend={"location": "right", "items": [
                         {"label": lab, "color": c} for _, lab, c in parts]}, hover=hover))  # fmt: skip
    return out
