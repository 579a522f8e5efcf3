"""Plain controls of :class:`~aonkit.widgets.llm.LLMModelPanel`: sliders, dropdowns and the efficiency text."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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


def speculative_controls(presets: Sequence[str], draft: str = SPEC_OFF, k: int = 4, acceptance: float = 0.7, *,
                         live: bool = True, style: dict | None = None, layout: w.Layout | None = None,
                         tooltip: str = "") -> tuple[w.Dropdown, w.IntSlider, w.FloatSlider]:  # fmt: skip
    """The draft (off, a no-cost draft or one of ``presets``), the tokens it drafts an iteration, their acceptance.

    ``style`` and ``layout``: the panel's (default this panel's); ``live``: sliders answer while dragged.
    """
    kw = {"style": style or STYLE, "layout": layout or WIDE}
    return (w.Dropdown(options=[SPEC_OFF, SPEC_FREE, *presets], value=draft, description="speculative draft",
                       tooltip=tooltip, **kw),
            w.IntSlider(value=k, min=1, max=max(8, k), description="draft tokens (k)", continuous_update=live, **kw),
            w.FloatSlider(value=acceptance, min=0.0, max=1.0, step=0.05, description="acceptance",
                          continuous_update=live, **kw))  # fmt: skip


def chosen_draft(value: str, presets: Mapping[str, Any]) -> Any:
    """The draft model a draft control's ``value`` names in ``presets`` (None: off, or a no-cost draft)."""
    return None if value in (SPEC_OFF, SPEC_FREE) else presets[value]
