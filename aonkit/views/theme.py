"""Shared look of the views: palettes, number formatting for people, default sizes.

Colours are from the Okabe-Ito palette (distinguishable with the common colour
vision deficiencies). Formatters return plain text: views put them in data
fields, never in raw HTML.
"""

from __future__ import annotations

import math

from bokeh.models import PlainText

from ..units import fmt_ns

__all__ = [
    "BOUND_COLORS", "BOUND_LABELS", "CARD_HEIGHT", "CARD_WIDTH", "CLASS_COLORS", "DEVICE_COLORS", "FIG_HEIGHT",
    "FIG_WIDTH", "IDLE_COLORS", "IDLE_LABELS", "MISSING", "POINT_SIZE", "ROOF_COLORS", "TABLE_HEIGHT", "TABLE_WIDTH",
    "fmt_bytes", "fmt_flop", "fmt_flop_rate", "fmt_ns", "fmt_pct", "fmt_si", "plain", "time_unit",
]  # fmt: skip

CLASS_COLORS: dict[str, str] = {"computation": "#0072B2", "communication": "#E69F00", "memory": "#009E73"}
"""Colour per kernel class of :func:`aonkit.analysis.kernels.kernel_class`."""

BOUND_COLORS: dict[str, str] = {"memory": "#CC79A7", "compute": "#D55E00", "": "#999999"}
"""Colour per roofline bound (``""``: no device ceilings known)."""

BOUND_LABELS: dict[str, str] = {"memory": "memory-bound", "compute": "compute-bound", "": "bound unknown"}

IDLE_COLORS: dict[str, str] = {"host_wait": "#56B4E9", "kernel_wait": "#F0E442", "other": "#999999"}
"""Colour per idle category of :func:`aonkit.analysis.hta_counters.idle_time_breakdown`."""

IDLE_LABELS: dict[str, str] = {"host_wait": "host wait", "kernel_wait": "kernel wait", "other": "other"}

ROOF_COLORS: tuple[str, ...] = ("#000000", "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")
"""Roof lines in order: memory-bandwidth slope first, then compute ceilings."""

DEVICE_COLORS: tuple[str, ...] = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                                  "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip
"""A line per device (the live monitor): ten distinct colours, so the eight GPUs of a node never share one."""

FIG_WIDTH, FIG_HEIGHT = 720, 460
CARD_WIDTH, CARD_HEIGHT = 320, 170
TABLE_WIDTH, TABLE_HEIGHT = 900, 300
POINT_SIZE: tuple[float, float] = (5.0, 30.0)
"""Smallest and largest marker size (screen px) of time-sized points."""

MISSING = "n/a"

_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def fmt_si(value: float, unit: str) -> str:
    """``value`` with a decimal SI prefix and 3 significant digits: ``fmt_si(3.35e12, "B/s") == "3.35 TB/s"``."""
    value = float(value)
    if not math.isfinite(value):
        return MISSING
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def fmt_bytes(n: float) -> str:
    """Bytes with decimal prefixes (as datasheets count bandwidth): ``1.5 MB``."""
    return fmt_si(n, "B")


def fmt_flop(n: float) -> str:
    """An amount of work: ``18.8 GFLOP``."""
    return fmt_si(n, "FLOP")


def fmt_flop_rate(n: float) -> str:
    """A throughput: ``989 TFLOP/s``."""
    return fmt_si(n, "FLOP/s")


def fmt_pct(fraction: float, digits: int = 1) -> str:
    """A fraction as a percentage: ``fmt_pct(0.1234) == "12.3 %"``; ``n/a`` when not finite."""
    fraction = float(fraction)
    return f"{100 * fraction:.{digits}f} %" if math.isfinite(fraction) else MISSING


def time_unit(max_ns: float) -> tuple[str, float]:
    """Unit name and ns per unit for a column whose largest value is ``max_ns``: ``("ms", 1e6)``."""
    max_ns = abs(float(max_ns)) if math.isfinite(float(max_ns)) else 0.0
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if max_ns >= scale:
            return unit, scale
    return "ns", 1.0


def plain(text: str) -> PlainText:
    """Canvas text that BokehJS shows as is: no TeX parsing of ``$$...$$`` (which would fetch MathJax from a CDN)."""
    return PlainText(text=str(text))
