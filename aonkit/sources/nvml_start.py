"""NVML's start: its binding imported, ``nvmlInit``, and what a failure to start means, in one line.

Split from :mod:`aonkit.sources.nvml` (whose names these stay): nothing here imports ``pynvml`` until
:func:`import_pynvml` is called.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import AonkitError
from .nvml_metrics import describe

NO_DRIVER_CODES = ("NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED")
STALE_LIBRARY = "the NVML library in this process is not the loaded driver's"
"""How :func:`~aonkit.sources.nvml.open_gpu_sampler`'s note starts when ``nvmlInit`` says
``LIB_RM_VERSION_MISMATCH``: a driver of another version was loaded after this process loaded its library (an
upgrade); only a new process loads the new library (the daemon starts itself again: :mod:`aonkit.live.gpu_probe`)."""


class NvmlUnavailable(AonkitError, RuntimeError):
    """NVML cannot sample here (no nvidia-ml-py, no driver, no GPU); the message says why in one line."""


def import_pynvml() -> Any:
    """The ``pynvml`` module (nvidia-ml-py); :class:`NvmlUnavailable` when it is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        raise NvmlUnavailable(f"nvidia-ml-py is not installed ({exc})") from None


def start_nvml(nvml: Any) -> None:
    """``nvml.nvmlInit()``; :class:`NvmlUnavailable` saying why it failed (no driver, a stale library, other)."""
    try:
        nvml.nvmlInit()
    except Exception as exc:
        code = getattr(exc, "value", None)
        if code is not None and code == getattr(nvml, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", None):
            raise NvmlUnavailable(f"{STALE_LIBRARY} (NVML: {exc})") from None
        no_driver = code in {getattr(nvml, c, None) for c in NO_DRIVER_CODES}
        raise NvmlUnavailable(f"no NVIDIA driver (NVML: {exc})" if no_driver
                              else f"NVML failed to start ({describe(exc)})") from None  # fmt: skip
