"""The summary line of :class:`~aonkit.widgets.llm.LLMModelPanel`: its numbers as labelled cells of HTML."""

from __future__ import annotations

import html
import math

from ..views import theme


def summary_cells(n: dict[str, float]) -> tuple[list[tuple[str, str]], dict[str, bool]]:
    """``(label, value)`` cells of the panel's numbers, and the labels to show in red.

    ``n``: :meth:`LLMModelPanel.numbers <aonkit.widgets.LLMModelPanel.numbers>`. Red: memory over the device's,
    a KV cache over what fits beside the weights.
    """
    kv = n["inference_kv_fraction"]
    red = {"memory per GPU": bool(n["over_capacity"]), "KV cache (inference)": kv > 1}
    cells = [("step time", theme.fmt_ns(n["step_s"] * 1e9)), ("MFU", theme.fmt_pct(n["mfu"])),
             ("HFU", theme.fmt_pct(n["hfu"])), ("tokens/s", theme.fmt_si(n["tokens_per_s"], "")),
             ("model FLOP/s per GPU", theme.fmt_flop_rate(n["flops_per_gpu_s"])),
             ("GPUs", f"{n['gpus']:,}"), ("micro-batches", f"{n['micro_batches']:,}"),
             ("parameters", f"{n['params'] / 1e9:.2f} B"),
             ("memory per GPU", theme.fmt_bytes(n["memory_bytes"]))]  # fmt: skip
    if not math.isnan(kv):  # the inference batch and context against the room beside the weights
        cells.append(("KV cache (inference)", "weights do not fit" if math.isinf(kv) else f"{kv:.0%} full"))
    if not math.isnan(n["spec_tpot_s"]):
        best = int(n["spec_best_k"])
        cells += [("TPOT, speculative", f"{theme.fmt_ns(n['spec_tpot_s'] * 1e9)} ({n['spec_speedup']:.2f}x)"),
                  ("fastest draft length", f"k = {best}" if best else "none: plain is faster")]
    return cells, red


def summary_html(cells: list[tuple[str, str]], red: dict[str, bool], error: str) -> str:
    """The cells side by side (values large; red where ``red`` says), then ``error`` when not empty."""
    big = "font-size:1.4em;font-weight:600"
    parts = [f"<div style='display:inline-block;margin-right:18px'><div style='color:#555;font-size:0.85em'>"
             f"{html.escape(k)}</div><div style='{big};color:{'#D62728' if red.get(k) else 'inherit'}'>"
             f"{html.escape(v)}</div></div>" for k, v in cells]  # fmt: skip
    status = (f"<div style='color:#D62728'>cannot evaluate this setting, showing the last valid one: "
              f"{html.escape(error)}</div>" if error else "")  # fmt: skip
    return "".join(parts) + status
