"""LLM model figures: a training step's time and memory per GPU as stacked bars, inference latency curves.

Tables in, bokeh models out. The tables come from :mod:`aonkit.model.llm` results
(:func:`step_table` from a :class:`~aonkit.model.llm.TrainingStepTime`, :func:`memory_table` from a
:class:`~aonkit.model.llm.MemoryBreakdown`, :func:`inference_table` from
:func:`~aonkit.model.llm.prefill_time` / :func:`~aonkit.model.llm.decode_time` curves); each figure
function returns its ``ColumnDataSource`` (s), and the matching ``*_data`` function gives the new
columns to assign to them, so a widget updates a figure with one ``source.data = ...`` each.
Labels and hover text are data fields (escaped by BokehJS); titles are :func:`~aonkit.views.theme.plain`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from bokeh.layouts import row
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, LayoutDOM, Legend, LegendItem
from bokeh.plotting import figure

from ..model.hardware import DeviceSpec
from ..model.llm import (
    DGX_H100,
    MemoryBreakdown,
    Network,
    TrainingStepTime,
    TransformerConfig,
    decode_time,
    prefill_time,
    speculative_decode_time,
    weight_bytes,
)
from . import theme

STEP_PARTS: tuple[tuple[str, str, str, str], ...] = (
    ("compute", "matmul", "matmul", "#0072B2"),
    ("compute", "attention", "attention", "#56B4E9"),
    ("compute", "elementwise", "elementwise", "#009E73"),
    ("compute", "logits", "logits", "#7FB8DA"),
    ("communication", "tp", "TP comm", "#E69F00"),
    ("communication", "cp", "CP comm", "#F0E442"),
    ("communication", "ep", "EP comm", "#D55E00"),
    ("communication", "pp", "PP comm", "#CC79A7"),
    ("communication", "dp", "DP comm", "#8C510A"),
    ("bubble", "bubble", "pipeline bubble", "#999999"),
    ("optimizer", "optimizer", "optimizer step", "#000000"),
)
"""(group, part, label, colour) of every bar segment of the step-time figure, in stacking order."""
STEP_GROUPS = ("compute", "communication", "bubble", "optimizer")

MEMORY_PARTS: tuple[tuple[str, str, str], ...] = (
    ("weights", "weights", "#0072B2"),
    ("gradients", "gradients", "#56B4E9"),
    ("optimizer", "optimizer states", "#CC79A7"),
    ("activations", "activations", "#E69F00"),
    ("kv_cache", "KV cache", "#009E73"),
    ("comm_buffers", "buffers", "#999999"),
)
"""(field of MemoryBreakdown, label, colour), bottom to top."""
CAPACITY_COLOR, OVER_COLOR = "#333333", "#D62728"
"""Capacity line colour when the memory fits, and when it does not (red)."""

INFERENCE_COLORS = {"ttft": "#0072B2", "tpot": "#D55E00", "spec": "#CC79A7"}
KV_COLOR = "#7F7F7F"
"""The KV-cache limit's line on the inference curves."""
DEFAULT_BATCHES = np.unique(np.round(np.geomspace(1, 512, 28))).astype(np.int64)
"""Batch sizes of the latency-vs-batch curves."""
DEFAULT_CONTEXTS = np.unique(np.round(2.0 ** np.arange(7, 17.01, 0.5))).astype(np.int64)
"""Contexts (tokens) of the latency-vs-context curves: 128 to 128 Ki in half-octaves."""

STEP_TOOLTIPS = [("", "@label"), ("time", "@text")]
MEMORY_TOOLTIPS = [("", "@label"), ("per GPU", "@text")]
INFERENCE_TOOLTIPS = [("", "$name"), ("x", "@x"), ("TTFT", "@ttft_text"), ("TPOT", "@tpot_text")]


def _fmt_s(seconds: float) -> str:
    return theme.fmt_ns(float(seconds) * 1e9) if np.isfinite(seconds) else theme.MISSING


# ---- training step time ----------------------------------------------------------------------------------------
def step_table(step: TrainingStepTime) -> pd.DataFrame:
    """One row per part of the step (:data:`STEP_PARTS` order): ``group``, ``part``, ``label``, ``seconds``, ``share``.

    The seconds add up to ``step.step_s``.
    """
    values = {**step.compute, **step.communication, "bubble": step.bubble_s, "optimizer": step.optimizer_s}
    secs = np.array([float(values.get(part, 0.0)) for _, part, _, _ in STEP_PARTS])
    total = float(step.step_s)
    return pd.DataFrame({
        "group": [g for g, _, _, _ in STEP_PARTS], "part": [p for _, p, _, _ in STEP_PARTS],
        "label": [lab for _, _, lab, _ in STEP_PARTS], "seconds": secs,
        "share": secs / total if total > 0 else np.full(len(secs), np.nan),
    })


def step_data(table: pd.DataFrame) -> dict[str, list]:
    """Columns of the step-time source: each part as a segment ``left``..``right`` (s) of its group's bar."""
    secs = table["seconds"].to_numpy(np.float64)
    left = np.zeros_like(secs)
    for group in STEP_GROUPS:  # stack the parts of each group
        idx = np.flatnonzero(table["group"].to_numpy() == group)
        left[idx] = np.concatenate([[0.0], np.cumsum(secs[idx])[:-1]])
    colors = {p: c for _, p, _, c in STEP_PARTS}
    return {
        "group": table["group"].tolist(), "part": table["part"].tolist(), "label": table["label"].tolist(),
        "left": left.tolist(), "right": (left + secs).tolist(), "seconds": secs.tolist(),
        "color": [colors.get(p, "#999999") for p in table["part"]],
        "text": [f"{_fmt_s(s)} ({theme.fmt_pct(f)})" for s, f in zip(secs, table["share"].to_numpy())],
    }


def step_figure(table: pd.DataFrame, width: int = 560, height: int = 260) -> tuple[figure, ColumnDataSource]:
    """Horizontal stacked bars of the step time: compute by op class, communication by kind, bubble, optimizer."""
    source = ColumnDataSource(step_data(table), name="llm_step")
    fig = figure(y_range=FactorRange(*reversed(STEP_GROUPS)), width=width, height=height, tools="",
                 toolbar_location=None, x_axis_label="seconds per iteration (critical rank)")  # fmt: skip
    bars = fig.hbar(y="group", left="left", right="right", height=0.7, fill_color="color", line_color="white",
                    source=source)  # fmt: skip
    fig.add_tools(HoverTool(renderers=[bars], tooltips=STEP_TOOLTIPS))
    items = [LegendItem(label=lab, renderers=[bars], index=i) for i, (_, _, lab, _) in enumerate(STEP_PARTS)]
    fig.add_layout(Legend(items=items, label_text_font_size="8pt", spacing=0, padding=4), "right")
    fig.x_range.start = 0
    fig.title.text = theme.plain("training step time")
    return fig, source


# ---- memory per GPU --------------------------------------------------------------------------------------------
def memory_table(memory: MemoryBreakdown) -> pd.DataFrame:
    """One row per kind of memory (:data:`MEMORY_PARTS` order): ``part``, ``label``, ``bytes``, ``share``."""
    values = np.array([float(getattr(memory, f)) for f, _, _ in MEMORY_PARTS])
    total = values.sum()
    return pd.DataFrame({"part": [f for f, _, _ in MEMORY_PARTS], "label": [lab for _, lab, _ in MEMORY_PARTS],
                         "bytes": values, "share": values / total if total > 0 else np.full(len(values), np.nan)})


def memory_data(table: pd.DataFrame) -> dict[str, list]:
    """Columns of the memory bar source: ``bottom``..``top`` in GB (10**9 bytes), stacked in table order."""
    gb = table["bytes"].to_numpy(np.float64) / 1e9
    top = np.cumsum(gb)
    colors = {f: c for f, _, c in MEMORY_PARTS}
    return {
        "x": [0.0] * len(gb), "part": table["part"].tolist(), "label": table["label"].tolist(),
        "bottom": (top - gb).tolist(), "top": top.tolist(), "gb": gb.tolist(),
        "color": [colors.get(p, "#999999") for p in table["part"]],
        "text": [f"{theme.fmt_bytes(b)} ({theme.fmt_pct(s)})" for b, s in
                 zip(table["bytes"].to_numpy(), table["share"].to_numpy())],
    }  # fmt: skip


def capacity_data(total_bytes: float, capacity_bytes: float | None) -> dict[str, list]:
    """The capacity line's source: its height (GB), ``over`` (the total exceeds it), colour and label.

    Without a known capacity the columns are empty (nothing drawn, ``over`` absent).
    """
    if capacity_bytes is None or not capacity_bytes > 0:
        return {"x0": [], "x1": [], "gb": [], "over": [], "color": [], "label": []}
    over = bool(total_bytes > capacity_bytes)
    label = f"capacity {theme.fmt_bytes(capacity_bytes)}" + (
        f": over by {theme.fmt_bytes(total_bytes - capacity_bytes)}" if over else
        f": {theme.fmt_pct(total_bytes / capacity_bytes)} used")  # fmt: skip
    return {"x0": [-0.5], "x1": [0.5], "gb": [capacity_bytes / 1e9], "over": [over],
            "color": [OVER_COLOR if over else CAPACITY_COLOR], "label": [label]}  # fmt: skip


def memory_figure(table: pd.DataFrame, capacity_bytes: float | None, width: int = 420,
                  height: int = 320) -> tuple[figure, ColumnDataSource, ColumnDataSource]:  # fmt: skip
    """A stacked bar of memory per GPU by kind, with the device capacity as a line (red when over).

    Returns the figure, the bar source (:func:`memory_data`) and the capacity source (:func:`capacity_data`).
    """
    source = ColumnDataSource(memory_data(table), name="llm_memory")
    cap = ColumnDataSource(capacity_data(float(table["bytes"].sum()), capacity_bytes), name="llm_capacity")
    fig = figure(width=width, height=height, tools="", toolbar_location=None, y_axis_label="GB per GPU",
                 x_range=(-0.7, 0.7))  # fmt: skip
    bars = fig.vbar(x="x", bottom="bottom", top="top", width=0.6, fill_color="color", line_color="white",
                    source=source)  # fmt: skip
    fig.add_tools(HoverTool(renderers=[bars], tooltips=MEMORY_TOOLTIPS))
    fig.segment(x0="x0", x1="x1", y0="gb", y1="gb", line_color="color", line_width=3, line_dash="dashed",
                source=cap)  # fmt: skip
    fig.text(x="x0", y="gb", text="label", text_color="color", text_font_size="8pt", y_offset=4,
             text_baseline="top", background_fill_color="white", background_fill_alpha=0.75, source=cap)  # fmt: skip
    items = [LegendItem(label=lab, renderers=[bars], index=i) for i, (_, lab, _) in enumerate(MEMORY_PARTS)]
    fig.add_layout(Legend(items=items, label_text_font_size="8pt", spacing=0, padding=4), "right")
    fig.y_range.start = 0
    fig.xaxis.visible = False
    fig.xgrid.visible = False
    fig.title.text = theme.plain("memory per GPU (first pipeline stage)")
    return fig, source, cap


# ---- inference ---------------------------------------------------------------------------------------------------
def inference_table(config: TransformerConfig, device: DeviceSpec, *, batch: int = 1, context: int | None = None,
                    tp: int = 1, batches: object = None, contexts: object = None, network: Network = DGX_H100,
                    efficiency: Mapping[str, float] | None = None, dtype: str = "bf16",
                    speculative: Mapping[str, object] | None = None) -> pd.DataFrame:  # fmt: skip
    """TTFT and TPOT curves: against batch at ``context``, and against context at ``batch``.

    Rows have ``sweep`` (``"batch"`` or ``"context"``), ``x`` (the swept value), ``batch``, ``context``,
    ``ttft_s`` (:func:`~aonkit.model.llm.prefill_time` of ``batch`` prompts of ``context`` tokens) and
    ``tpot_s`` (:func:`~aonkit.model.llm.decode_time` of ``batch`` sequences at ``context``), and
    ``decode_tokens_per_s``. At ``dtype="fp8"`` the weights are read at one byte each, as FP8 inference stores
    them (:func:`~aonkit.model.llm.weight_bytes`); the KV cache stays 16-bit. With ``speculative`` (keyword
    arguments of :func:`~aonkit.model.llm.speculative_decode_time`: ``k``, ``acceptance``, ``draft``...) also
    ``spec_tpot_s`` (time per output token decoding speculatively) and ``spec_speedup`` (plain over it).
    """
    context = int(config.seq if context is None else context)
    b = np.asarray(DEFAULT_BATCHES if batches is None else batches, dtype=np.float64)
    c = np.asarray(DEFAULT_CONTEXTS if contexts is None else contexts, dtype=np.float64)
    kw = {"tp": tp, "network": network, "efficiency": efficiency, "dtype": dtype, "weight_bytes": weight_bytes(dtype)}
    frames = []
    for sweep, bb, cc, x in (("batch", b, np.full_like(b, context), b), ("context", np.full_like(c, batch), c, c)):
        ttft = np.broadcast_to(prefill_time(config, device, bb, cc, **kw).seconds, x.shape)
        dec = decode_time(config, device, bb, cc, **kw)
        tpot = np.broadcast_to(dec.seconds, x.shape)
        cols = {"sweep": sweep, "x": x, "batch": bb, "context": cc, "ttft_s": ttft, "tpot_s": tpot,
                "decode_tokens_per_s": bb / tpot}  # fmt: skip
        if speculative is not None:
            spec = speculative_decode_time(config, device, bb, cc, **kw, **speculative)  # type: ignore[arg-type]
            cols["spec_tpot_s"] = np.broadcast_to(spec.seconds, x.shape)
            cols["spec_speedup"] = np.broadcast_to(spec.speedup, x.shape)
        frames.append(pd.DataFrame(cols))
    return pd.concat(frames, ignore_index=True)


def kv_limit_data(table: pd.DataFrame, sweep: str, kv_tokens: float | None) -> dict[str, list]:
    """Where one curve of :func:`inference_table` fills the KV cache: column ``x``, empty or one value.

    On the ``"batch"`` curve the batch whose sequences of the table's context fill ``kv_tokens``; on the
    ``"context"`` curve the context at its batch. Empty when ``kv_tokens`` is None (memory unknown) or 0 (the
    weights leave no room: nothing is drawn), or when the limit is past the curve's last point.
    """
    if kv_tokens is None or kv_tokens <= 0:
        return {"x": []}
    rows = np.flatnonzero(table["sweep"].to_numpy() == sweep)
    if not rows.size:
        return {"x": []}
    fixed = float(table["context" if sweep == "batch" else "batch"].to_numpy()[rows[0]])
    limit = float(kv_tokens) / fixed
    return {"x": [limit] if limit <= float(table["x"].to_numpy()[rows].max()) else []}


def inference_data(table: pd.DataFrame, sweep: str) -> dict[str, list]:
    """Columns of one curve source (``sweep`` ``"batch"`` or ``"context"``): ``x``, latencies in ms, their texts.

    ``ttft_ms``, ``tpot_ms`` and ``spec_ms`` (speculative TPOT; None, a gap, without ``spec_tpot_s``).
    """
    t = table[table["sweep"] == sweep]
    ttft, tpot = t["ttft_s"].to_numpy(np.float64), t["tpot_s"].to_numpy(np.float64)
    if "spec_tpot_s" in t:
        spec, gain = t["spec_tpot_s"].to_numpy(np.float64), t["spec_speedup"].to_numpy(np.float64)
        spec_ms: list = (spec * 1e3).tolist()
        spec_text = [f"{_fmt_s(v)} ({g:.2f}x)" for v, g in zip(spec, gain)]
    else:
        spec_ms, spec_text = [None] * len(t), ["off"] * len(t)
    return {"x": t["x"].to_numpy(np.float64).tolist(), "ttft_ms": (ttft * 1e3).tolist(),
            "tpot_ms": (tpot * 1e3).tolist(), "ttft_text": [_fmt_s(v) for v in ttft],
            "tpot_text": [_fmt_s(v) for v in tpot], "spec_ms": spec_ms, "spec_text": spec_text}  # fmt: skip


def inference_figures(table: pd.DataFrame, width: int = 440, height: int = 300,
                      kv_tokens: float | None = None) -> tuple[LayoutDOM, dict[str, ColumnDataSource]]:  # fmt: skip
    """TTFT and TPOT (ms, log) against batch and against context (log), side by side.

    The static form of ``LLMModelPanel``'s inference charts (:func:`aonkit.views.model_charts.inference_charts`).
    ``kv_tokens``: the tokens of KV cache a GPU holds beside the weights
    (:attr:`~aonkit.model.serving_steps.ServingMemory.kv_tokens`): a dashed line where each curve fills it
    (:func:`kv_limit_data`; none when None, or past the curve). Returns the row and its sources: ``"batch"`` and
    ``"context"`` (:func:`inference_data`), ``"kv_batch"`` and ``"kv_context"``.
    """
    sources, figs = {}, []
    for sweep, xlabel in (("batch", "batch (sequences)"), ("context", "context (tokens)")):
        src = ColumnDataSource(inference_data(table, sweep), name=f"llm_inference_{sweep}")
        kv = ColumnDataSource(kv_limit_data(table, sweep, kv_tokens), name=f"llm_kv_{sweep}")
        fig = figure(width=width, height=height, x_axis_type="log", y_axis_type="log", tools="hover",
                     toolbar_location=None, x_axis_label=xlabel, y_axis_label="ms")  # fmt: skip
        lines = []
        for key, label in (("ttft", "TTFT (prefill)"), ("tpot", "TPOT (decode step)")):
            lines.append(fig.line("x", f"{key}_ms", source=src, line_width=2, color=INFERENCE_COLORS[key],
                                  legend_label=label, name=label))  # fmt: skip
            lines.append(fig.scatter("x", f"{key}_ms", source=src, size=4, color=INFERENCE_COLORS[key], name=label))
        full = fig.vspan(x="x", source=kv, line_color=KV_COLOR, line_width=2, line_dash="dashed")
        fig.legend.items.append(LegendItem(label="KV cache full", renderers=[full]))
        sources[f"kv_{sweep}"] = kv
        fig.select_one(HoverTool).renderers = lines
        fig.select_one(HoverTool).tooltips = INFERENCE_TOOLTIPS
        fig.legend.location = "top_left"
        fig.legend.label_text_font_size = "8pt"
        fig.title.text = theme.plain(f"latency vs {sweep}")
        sources[sweep] = src
        figs.append(fig)
    return row(*figs), sources
