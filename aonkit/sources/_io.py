"""Reading a trace file into one contiguous, writable ``uint8`` buffer."""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from types import ModuleType

import numpy as np

from .. import _config
from ..errors import TraceFormatError, TraceTooLargeError

try:  # Intel ISA-L inflates about 1.8x faster than zlib; same API
    from isal import isal_zlib as _fast_zlib
except ImportError:  # pragma: no cover - isal is a dependency, the fallback is tested
    _fast_zlib = None

ZLIB: ModuleType = _fast_zlib or zlib
"""Inflate implementation used for gzip input (``isal.isal_zlib`` when installed, else ``zlib``)."""

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 8 * 1024 * 1024
_PIECE = 64 * 1024 * 1024  # most output per inflate call: the buffer and one piece, never two buffers


def is_gzip(path: str | os.PathLike[str]) -> bool:
    """True when the file starts with the gzip magic bytes."""
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


def read_buffer(path: str | os.PathLike[str], max_bytes: int | None = None) -> tuple[np.ndarray, list[str]]:
    """Return the (decompressed) bytes of ``path`` and any warnings.

    Gzip input (detected by its magic bytes, whatever the suffix) is
    decompressed in a streaming loop that stops with
    :class:`~aonkit.TraceTooLargeError` once ``max_bytes`` would be exceeded,
    before more than the cap plus one 8 MiB chunk is held (default:
    ``AONKIT_MAX_DECOMPRESSED_BYTES`` when set, else :func:`default_cap`). A gzip stream that
    ends early (a killed writer) yields the bytes that could be recovered and a
    warning; the JSON scanner then reports the truncation.
    """
    path = Path(path)
    if not is_gzip(path):
        return np.fromfile(path, dtype=np.uint8), []
    cap = max_bytes if max_bytes is not None else _config.MAX_DECOMPRESSED_BYTES
    how = "the cap you set" if cap is not None else "the default cap, from the memory available and the file size"
    return _gunzip(path, cap if cap is not None else default_cap(path.stat().st_size), how)


def default_cap(compressed_bytes: int, available: int | None = None) -> int:
    """Default decompressed-size cap of a gzip trace, following the machine.

    An eighth of the memory available or 64 times the compressed size,
    whichever is larger, but never more than half the memory available (a
    text that large could not be parsed here; failing early names the file).
    Real Kineto traces compress 8-40x (the shared corpus: median 18x, max
    40x), so a legitimate file passes on any machine that can hold it; a bomb
    (gzip reaches about 1000x) stops at what the machine can spare.
    ``available`` defaults to ``psutil``'s available memory.
    """
    if available is None:
        import psutil

        available = int(psutil.virtual_memory().available)
    return min(max(available // 8, 64 * int(compressed_bytes)), available // 2)


def _gunzip(path: Path, cap: int, how: str = "the cap") -> tuple[np.ndarray, list[str]]:
    out = bytearray()
    warnings: list[str] = []
    zmod = ZLIB
    dec = zmod.decompressobj(wbits=31)
    consumed = 0
    with open(path, "rb") as fh:
        pending = fh.read(_CHUNK)
        while pending:
            try:
                piece = dec.decompress(pending, max(min(cap - len(out) + 1, _PIECE), 1))  # bounded: no 2x peak
            except (zlib.error, zmod.error) as exc:
                raise TraceFormatError(f"corrupt gzip data: {exc}", path=str(path), offset=consumed) from None
            out += piece
            if len(out) > cap:
                raise TraceTooLargeError(
                    f"decompressed size exceeds the cap of {cap} bytes ({how}); a decompression bomb, or a trace "
                    "larger than this machine should hold: raise it with max_decompressed_bytes= or "
                    "AONKIT_MAX_DECOMPRESSED_BYTES",
                    path=str(path),
                )
            if dec.unconsumed_tail:
                consumed += len(pending) - len(dec.unconsumed_tail)
                pending = dec.unconsumed_tail
                continue
            consumed += len(pending) - len(dec.unused_data)
            if dec.eof:
                rest = dec.unused_data + fh.read(_CHUNK)
                if not rest:
                    break
                if rest[:2] != _GZIP_MAGIC:
                    if rest.strip(b"\x00"):
                        warnings.append(f"ignored {len(rest)}+ bytes of non-gzip data after the gzip stream")
                    break
                dec = zmod.decompressobj(wbits=31)
                pending = rest
            else:
                pending = fh.read(_CHUNK)
    if not dec.eof:
        warnings.append(f"gzip stream ends early after {consumed} compressed bytes (file truncated?)")
    return np.frombuffer(out, dtype=np.uint8), warnings


def line_col(buf: np.ndarray, offset: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of ``offset`` in ``buf``."""
    offset = max(0, min(int(offset), buf.shape[0]))
    head = buf[:offset]
    nl = np.flatnonzero(head == 10)
    line = nl.shape[0] + 1
    col = offset - (int(nl[-1]) + 1 if nl.shape[0] else 0) + 1
    return line, col
