"""Warnings to users that point at their own line, however deep in aonkit they are raised."""

from __future__ import annotations

from ..errors import user_stacklevel
from ..errors import warn_user as warn

__all__ = ["user_stacklevel", "warn"]
