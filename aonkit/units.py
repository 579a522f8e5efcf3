"""Formatting of quantities for people: durations in ns, bytes."""

from __future__ import annotations


def fmt_ns(ns: float) -> str:
    """Human duration: ``1.23 ms``."""
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"
