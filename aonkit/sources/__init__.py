"""Readers: files in, traces out. ``load`` reads a path with the reader :mod:`.registry` picks for it.

Importing this package registers the built-in readers and nothing heavier:
:func:`load` and its variants (:mod:`.loading`, which needs pandas) are
imported on first use, so that the live samplers (:mod:`.samplers`,
:mod:`.nvml`) can run in a process that never loads pandas (the daemon).
"""

from __future__ import annotations

import importlib
from typing import Any

from .nsys import REP_READER, SQLITE_READER
from .registry import Reader, lazy, register


def _json_or_gzip(head: bytes) -> bool:
    """Gzip data, or text whose first JSON value is an object or an array (after whitespace and a UTF-8 BOM)."""
    return head.startswith(b"\x1f\x8b") or head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1] in (b"{", b"[")


CHROME_READER = Reader(
    "chrome", (".json", ".json.gz"), _json_or_gzip, lazy(f"{__name__}.chrome_trace", "read_chrome_trace"),
    options=("salvage", "max_decompressed_bytes", "threads"),
)  # fmt: skip
"""Chrome-trace / Kineto JSON (``.json``, ``.json.gz``, bare arrays; gzip found by content): the fallback reader."""

# the built-in readers; the Chrome-trace reader also reads every file that no reader claims
register(REP_READER)
register(SQLITE_READER)
register(CHROME_READER, fallback=True)

_LOADING = ("load", "load_trace", "load_job", "load_each", "PathLike")


def __getattr__(name: str) -> Any:
    if name in _LOADING:
        return getattr(importlib.import_module(f"{__name__}.loading"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CHROME_READER", "load", "load_each", "load_job", "load_trace"]
