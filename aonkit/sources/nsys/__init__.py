"""Nsight Systems input: SQLite exports (``.sqlite``) and reports (``.nsys-rep``, exported with ``nsys``).

Modules: :mod:`.sqlite` (the reader, ``read_nsys_sqlite``), :mod:`.rep`
(``.nsys-rep`` -> export -> read), :mod:`.db` (read-only column access to the
export), :mod:`.parts` (CUDA tables -> event columns), :mod:`.nvtx` (NVTX
ranges, process/thread names), :mod:`.torch` (PyTorch ``emit_nvtx`` op
ranges), :mod:`.metrics` (``GPU_METRICS`` -> ``trace.samples``) and
:mod:`.jsontext` (per-event JSON text, made on demand).

This module only declares the two readers (:data:`SQLITE_READER`,
:data:`REP_READER`) for :mod:`aonkit.sources.registry`; their modules are
imported when a file is read.
"""

from __future__ import annotations

from ..registry import Reader, lazy

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


def is_sqlite(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes) starts with the SQLite magic."""
    return head.startswith(SQLITE_MAGIC)


SQLITE_READER = Reader(
    "nsys-sqlite", (".sqlite", ".sqlite3", ".db"), is_sqlite, lazy(f"{__name__}.sqlite", "read_nsys_sqlite"),
    directory_suffixes=(".sqlite", ".sqlite3"),
)  # fmt: skip
"""An ``nsys export --type sqlite`` file (any name: SQLite files are recognised by their magic)."""

REP_READER = Reader("nsys-rep", (".nsys-rep", ".qdrep"), None, lazy(f"{__name__}.rep", "read_nsys_rep"))
"""An ``.nsys-rep`` (or older ``.qdrep``) report, exported to SQLite with ``nsys`` and read."""
