"""Every tunable of aonkit in one place, with environment overrides.

Environment variables
---------------------
AONKIT_JIT_CACHE
    ``0`` disables Numba's on-disk cache (default ``1``).
AONKIT_MAX_DECOMPRESSED_BYTES
    Cap on the decompressed size of a gzip trace (default 16 GiB), the guard
    against decompression bombs.
"""

from __future__ import annotations

import os

_DEFAULT_MAX_DECOMPRESSED = 16 * 1024**3


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:  # pragma: no cover - configuration error
        raise ValueError(f"{name}={raw!r} is not an integer") from exc


JIT_CACHE: bool = _env_int("AONKIT_JIT_CACHE", 1) != 0  # read by _kernels._jit too
MAX_DECOMPRESSED_BYTES: int = _env_int("AONKIT_MAX_DECOMPRESSED_BYTES", _DEFAULT_MAX_DECOMPRESSED)


def reset() -> None:
    """Re-read every setting from the environment."""
    global JIT_CACHE, MAX_DECOMPRESSED_BYTES
    JIT_CACHE = _env_int("AONKIT_JIT_CACHE", 1) != 0
    MAX_DECOMPRESSED_BYTES = _env_int("AONKIT_MAX_DECOMPRESSED_BYTES", _DEFAULT_MAX_DECOMPRESSED)
