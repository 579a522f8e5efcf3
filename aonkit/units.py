"""Formatting of quantities for people: durations in ns, bytes."""

from __future__ import annotations


def fmt_ns(ns: float) -> str:
    """Human duration: ``1.23 ms``."""
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def cut_text(text: str, chars: int, *, middle: bool = False, mark: str = "…", min_chars: int = 1) -> str:
    """``text`` shortened to at most ``chars`` characters, ``mark`` where it was cut.

    Parameters
    ----------
    text : str
        The name or label.
    chars : int
        Room, in characters (``mark`` included).
    middle : bool
        Cut in the middle, keeping three fifths of the room for the start and the
        rest for the end (kernel names differ as often at the end as at the
        start); else cut at the end.
    mark : str
        What stands for the cut text (``"..."`` where output must be ASCII).
    min_chars : int
        Below this much room a text that does not fit becomes ``""`` (a label
        of two letters and a mark says nothing).

    Returns
    -------
    str
        ``text`` when it fits, else the cut text.
    """
    if len(text) <= chars:
        return text
    if chars < max(min_chars, len(mark) + 1):
        return ""
    keep = chars - len(mark)
    if not middle:
        return text[:keep] + mark
    head = keep * 3 // 5
    return text[:head] + mark + text[len(text) - (keep - head):]
