"""The roofline model: which ceiling applies to an op, what it can attain, and what bounds it.

For an op with ``flops`` of work and ``bytes`` of compulsory traffic on a
device with peak ``P`` FLOP/s (for the op's unit and dtype) and memory
bandwidth ``B`` bytes/s::

    intensity  I = flops / bytes                      (FLOP/byte)
    attainable A = min(P, I * B)                      (FLOP/s)
    achieved     = flops / duration                   (FLOP/s)
    fraction     = achieved / A
    bound        = "memory" if I * B < P else "compute"   (the ridge point is P / B)

Matrix-unit ops (``gemm``, ``conv``, ``attention``) use the matrix peak of
their dtype: fp64 ``fp64_matrix`` when the device has one, fp32 ``fp32_matrix``
(AMD) or ``fp32`` (``tf32`` when TF32 math is enabled), and ``bf16``,
``fp16``, ``fp8``, ``int8`` as they are. Elementwise ops, reductions and
normalisations run on the vector units in fp32 (PyTorch computes half and
bfloat16 pointwise math in float), so they use ``fp32``, or ``fp64`` for
double and complex double.
"""

from __future__ import annotations

import numpy as np

from .hardware import DeviceSpec

MATRIX_KINDS = frozenset({"gemm", "conv", "attention"})


def roof_key(kind: str, dtype: str, spec: DeviceSpec, tf32: bool = False) -> str | None:
    """The :data:`~aonkit.model.hardware.PEAK_KEYS` entry bounding an op of ``kind`` and ``dtype``; None if none."""
    peaks = spec.peak_flops
    if kind not in MATRIX_KINDS:
        return "fp64" if dtype in ("fp64", "complex128") else "fp32"
    if dtype == "fp64":
        return "fp64_matrix" if "fp64_matrix" in peaks else "fp64"
    if dtype == "fp32":
        return "tf32" if tf32 else ("fp32_matrix" if "fp32_matrix" in peaks else "fp32")
    if dtype in ("bf16", "fp16", "fp8"):
        return dtype
    return "int8" if dtype in ("int8", "uint8") else None


def attainable(intensity: np.ndarray, peak: np.ndarray, bandwidth: float) -> np.ndarray:
    """``min(peak, intensity * bandwidth)`` element by element (FLOP/s)."""
    return np.minimum(np.asarray(peak, dtype=np.float64), np.asarray(intensity, dtype=np.float64) * bandwidth)


def bound(intensity: np.ndarray, peak: np.ndarray, bandwidth: float) -> np.ndarray:
    """``"memory"`` left of the ridge (``intensity * bandwidth < peak``), ``"compute"`` on or right of it, ``""`` when unknown."""  # noqa: E501
    i = np.asarray(intensity, dtype=np.float64)
    p = np.asarray(peak, dtype=np.float64)
    known = np.isfinite(i) & np.isfinite(p)
    return np.where(~known, "", np.where(i * bandwidth < p, "memory", "compute")).astype(object)
