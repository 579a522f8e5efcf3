"""Warnings to users that point at their own line, however deep in aonkit they are raised."""

from __future__ import annotations

import sys
import warnings

from ..errors import AonkitWarning


def user_stacklevel() -> int:
    """``stacklevel`` for a ``warnings.warn`` made by the caller of this function: its first frame outside aonkit."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("aonkit."):
        frame, level = frame.f_back, level + 1
    return level


def warn(message: str) -> None:
    """Issue ``message`` as an :class:`~aonkit.errors.AonkitWarning` at the user's line (never trace metadata in it)."""
    warnings.warn(message, AonkitWarning, stacklevel=user_stacklevel())
