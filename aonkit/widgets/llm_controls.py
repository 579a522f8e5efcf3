"""Plain controls of :class:`~aonkit.widgets.llm.LLMModelPanel`: sliders, dropdowns and the efficiency text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import ipywidgets as w

from ..model.llm import EFFICIENCY

OVERRIDES = ("layers", "hidden", "heads", "seq", "vocab", "experts", "top_k")
"""Fields of the model the override controls set."""
POW2 = [2**k for k in range(0, 11)]
SEQS = [2**k for k in range(7, 19)]
STYLE = {"description_width": "110px"}
WIDE = w.Layout(width="330px")


def parse_efficiency(text: str) -> dict[str, float]:
    """Efficiency overrides from text: JSON (``{"matmul": 0.7}``) or ``key=value`` pairs (``matmul=0.7, memory=0.9``).

    Raises ValueError for unknown keys (see :data:`~aonkit.model.llm.EFFICIENCY`) or values outside (0, 1].
    """
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("efficiency JSON must be an object")
    else:
        raw = {}
        for item in filter(None, (p.strip() for p in text.replace(";", ",").split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"efficiency: expected key=value, got {item!r}")
            raw[key.strip()] = value.strip()
    out = {str(k): float(v) for k, v in raw.items()}
    unknown = sorted(set(out) - set(EFFICIENCY))
    if unknown:
        raise ValueError(f"unknown efficiency keys {unknown}; known: {sorted(EFFICIENCY)}")
    bad = {k: v for k, v in out.items() if not (0 <= v <= 1 if k.endswith("_overlap") else 0 < v <= 1)}
    if bad:
        raise ValueError(f"efficiencies must be in (0, 1] (overlaps in [0, 1]): {bad}")
    return out


def int_slider(name: str, value: int, lo: int, hi: int, step: int = 1) -> w.IntSlider:
    """A slider of the panel's width that answers while dragged (its range widened to hold ``value``)."""
    return w.IntSlider(value=value, min=lo, max=max(hi, value), step=step, description=name, style=STYLE,
                       layout=WIDE, continuous_update=True)  # fmt: skip


def dropdown(name: str, options: Sequence[Any], value: Any) -> w.Dropdown:
    """A dropdown of the panel's width, ``value`` added to the options when it is not among them."""
    opts = list(options)
    if value not in opts:
        opts = sorted({*opts, value}) if all(isinstance(o, int) for o in opts) else [*opts, value]
    return w.Dropdown(options=opts, value=value, description=name, style=STYLE, layout=WIDE)


def set_value(widget: w.ValueWidget, value: Any) -> None:
    """Set a control's value, widening a slider's range or a selection's options to hold it."""
    if isinstance(widget, w.IntSlider):
        widget.max = max(widget.max, value)
        widget.min = min(widget.min, value)
    elif isinstance(widget, (w.Dropdown, w.SelectionSlider)) and value not in widget.options:
        widget.options = sorted({*widget.options, value})
    widget.value = value


SPEC_OFF, SPEC_FREE = "off", "no-cost draft"
"""The speculative control's choices besides the presets: plain decoding, and a draft that costs no GPU time
(prompt lookup, n-grams)."""


def speculative_controls(presets: Sequence[str]) -> tuple[w.Dropdown, w.IntSlider, w.FloatSlider]:
    """The draft (off, a no-cost draft or a preset), the tokens it drafts an iteration, and their acceptance."""
    draft = w.Dropdown(options=[SPEC_OFF, SPEC_FREE, *presets], value=SPEC_OFF, description="speculative draft",
                       style=STYLE, layout=WIDE)  # fmt: skip
    k = int_slider("draft tokens (k)", 4, 1, 8)
    acceptance = w.FloatSlider(value=0.7, min=0.0, max=1.0, step=0.05, description="acceptance", style=STYLE,
                               layout=WIDE, continuous_update=True)  # fmt: skip
    return draft, k, acceptance
