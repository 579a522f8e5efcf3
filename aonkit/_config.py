"""Tunables of aonkit, with environment overrides.

Environment variables
---------------------
AONKIT_MAX_DECOMPRESSED_BYTES
    Cap on the decompressed size of a gzip trace, the guard against
    decompression bombs. Unset: an eighth of the memory available when the
    file is read or 64 times the compressed size, whichever is larger, and at
    most half the memory available (:func:`aonkit.sources._io.default_cap`).
AONKIT_JIT_CACHE
    ``0`` disables Numba's on-disk cache (default on). It is read by
    ``aonkit._kernels._jit``, since the kernels import nothing but numpy and numba.
"""

from __future__ import annotations

import os


def _env_int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:  # pragma: no cover - configuration error
        raise ValueError(f"{name}={raw!r} is not an integer") from exc


MAX_DECOMPRESSED_BYTES: int | None = _env_int("AONKIT_MAX_DECOMPRESSED_BYTES", None)
"""The cap from the environment; None: follow the machine (see above)."""


def reset() -> None:
    """Re-read every setting from the environment."""
    global MAX_DECOMPRESSED_BYTES
    MAX_DECOMPRESSED_BYTES = _env_int("AONKIT_MAX_DECOMPRESSED_BYTES", None)
