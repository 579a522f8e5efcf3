"""Plain controls of :class:`~aonkit.widgets.serving.ServingPanel`: sliders, toggles and the step-time boxes.

The linear step-time boxes take their values from the caller, a :class:`~aonkit.model.serving_fit.StepFit`
measured from a trace among them.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

STYLE = {"description_width": "130px"}
WIDE = w.Layout(width="360px")
ROUTING_TIPS = ("to the replica with the fewest requests (join the shortest queue)", "to each replica in turn",
                "one queue for all replicas: the first free one takes the next request")  # fmt: skip
KV_TIPS = ("a request holds its prompt plus max new tokens from admission: nothing is preempted (fast)",
           "a request holds what its context has grown to; the latest is preempted and recomputed when the cache "
           "is full (vLLM's way)")  # fmt: skip
DTYPE_TIPS = ("16-bit weights, GEMMs at the bf16 peak", "16-bit weights, GEMMs at the fp16 peak",
              "FP8 weights and GEMMs (W8A8), 16-bit KV cache")  # fmt: skip
MAX_NEW_TIP = ("the most tokens a client lets a request generate: outputs drawn longer stop there; the reserving "
               "cache holds the prompt plus this; a request whose prompt plus this exceeds the cache is refused")
PREFIX_TIP = ("tokens every prompt starts with besides its own (a system prompt, few-shot examples): computed by "
              "every prefill and held by every sequence, unless the prefix cache holds them")
PREFIX_CACHE_TIP = ("hold the system prompt once per replica, computed once (vLLM's automatic prefix caching): a "
                    "prefill computes only the request's own prompt; decode steps still attend to the prefix")
SPEC_TIP = ("speculative decoding: a draft proposes k tokens a sequence and the model checks them in one step, "
            "keeping those before the first it rejects plus one of its own (each accepted with this probability); "
            "the draft's weights and cache take memory")
TIPS = {"routing": ROUTING_TIPS, "dtype": DTYPE_TIPS, "kv_policy": KV_TIPS, "max_new": MAX_NEW_TIP,
        "prefix": PREFIX_TIP, "prefix_cache": PREFIX_CACHE_TIP}
"""The tooltips of the panel's toggle buttons, by control."""


def slider(kind: type, name: str, value: float, lo: float, hi: float, step: float, live: bool,
           **kw: Any) -> w.ValueWidget:  # fmt: skip
    """A slider of the panel's width; ``live`` answers while it is dragged."""
    return kind(value=value, min=lo, max=max(hi, value), step=step, description=name, style=STYLE, layout=WIDE,
                continuous_update=live, **kw)  # fmt: skip


def log_slider(name: str, value: float, lo: float, hi: float, live: bool) -> w.FloatLogSlider:
    """A base-10 log slider from ``10**lo`` to ``10**hi`` in twentieths of a decade."""
    return w.FloatLogSlider(value=value, base=10, min=lo, max=hi, step=0.05, description=name, style=STYLE,
                            layout=WIDE, continuous_update=live, readout_format=".3g")  # fmt: skip


def toggles(name: str, options: list[str], value: str, tips: tuple[str, ...] = (),
            width: str = "80px") -> w.ToggleButtons:  # fmt: skip
    """Toggle buttons with a description of the panel's width."""
    return w.ToggleButtons(options=options, value=value, description=name, tooltips=list(tips),
                           style={**STYLE, "button_width": width})  # fmt: skip


def linear_boxes(prefill: tuple[float, float], decode: tuple[float, float, float],
                 overhead: float) -> dict[str, w.BoundedFloatText]:  # fmt: skip
    """Boxes of the linear step times, by key.

    ``prefill_a``, ``prefill_b``, ``decode_a``, ``decode_b``, ``decode_c`` and ``overhead``: s, s/token, s,
    s/sequence, s/context token and s. A value outside a box's range (0 to 10 s, 0 to 1 s per unit) raises
    ValueError: the box would clip it.
    """
    spec = (("prefill_a", prefill[0], 10, 1e-3, "prefill a (s)"), ("prefill_b", prefill[1], 1, 1e-6,
            "prefill b (s/token)"), ("decode_a", decode[0], 10, 1e-3, "decode a (s)"),
            ("decode_b", decode[1], 1, 1e-5, "decode b (s/seq)"), ("decode_c", decode[2], 1, 1e-8,
            "decode c (s/ctx token)"), ("overhead", overhead, 10, 1e-4, "overhead (s)"))  # fmt: skip
    over = [f"{text} = {value!r}" for _, value, top, _, text in spec if not 0 <= value <= top]
    if over:  # a box would clip it: say so rather than simulate another engine
        raise ValueError(f"linear step times out of the panel's range (0 to 10 s, 0 to 1 s per unit): {over}")
    return {key: w.BoundedFloatText(value=value, min=0, max=top, step=step, description=text, style=STYLE,
                                    layout=WIDE) for key, value, top, step, text in spec}  # fmt: skip
