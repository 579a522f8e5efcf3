"""Recorded operator inputs (``record_shapes=True``): shapes, dtypes, strides and concrete values.

The PyTorch profiler stores, for each ``cpu_op``, one entry per schema
argument (keyword-only ones included) in the parallel lists ``Input Dims``,
``Input type``, ``Input Strides`` (newer traces) and ``Concrete Inputs``
(newer traces; scalars and int lists as text, ``""`` for tensors and None).
Tensors are the entries whose type is a dtype name (``"float"``,
``"c10::BFloat16"``...); ``Scalar``, ``ScalarList``, ``""`` and the 2021
``Int``/``Double``/``Bool``/``GenericList`` are not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# trace dtype name -> (short label, bytes per element)
DTYPES: dict[str, tuple[str, float]] = {
    "double": ("fp64", 8), "float": ("fp32", 4), "c10::Half": ("fp16", 2), "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1), "c10::Float8_e5m2": ("fp8", 1), "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1), "c10::Float8_e8m0fnu": ("fp8", 1), "c10::Float4_e2m1fn_x2": ("fp4", 1),
    "signed char": ("int8", 1), "unsigned char": ("uint8", 1), "short int": ("int16", 2), "short": ("int16", 2),
    "int": ("int32", 4), "long int": ("int64", 8), "long": ("int64", 8), "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8), "c10::complex<double>": ("complex128", 16),
    "c10::complex<c10::Half>": ("complex32", 4), "c10::qint8": ("int8", 1), "c10::quint8": ("uint8", 1),
    "c10::qint32": ("int32", 4),
}  # fmt: skip
"""Element size of every tensor dtype name seen in Kineto traces (``Float4_e2m1fn_x2`` packs two values per byte)."""

# c10::ScalarType codes as recorded in Concrete Inputs (``dtype``/``out_dtype`` arguments)
SCALAR_TYPES: dict[int, str] = {
    0: "unsigned char", 1: "signed char", 2: "short int", 3: "int", 4: "long int", 5: "c10::Half", 6: "float",
    7: "double", 8: "c10::complex<c10::Half>", 9: "c10::complex<float>", 10: "c10::complex<double>", 11: "bool",
    15: "c10::BFloat16", 23: "c10::Float8_e5m2", 24: "c10::Float8_e4m3fn", 25: "c10::Float8_e5m2fnuz",
    26: "c10::Float8_e4m3fnuz",
}  # fmt: skip


def parse_concrete(text: str) -> object:
    """A ``Concrete Inputs`` entry as Python: ``"[1, 2]"`` -> ``[1, 2]``, ``"True"`` -> True, ``"0."`` -> 0.0.

    ``""`` (a tensor or None) gives None; text that is not a number, bool or
    list comes back unchanged (``"same"``).
    """
    t = text.strip()
    if t == "":
        return None
    if t in ("True", "False"):
        return t == "True"
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].strip()
        return [parse_concrete(x) for x in inner.split(",")] if inner else []
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return t


@dataclass(frozen=True)
class OpInputs:
    """The recorded inputs of one op call.

    Parameters
    ----------
    dims : sequence of list of int
        ``Input Dims``.
    types : sequence of str
        ``Input type``.
    concrete : sequence of str
        ``Concrete Inputs`` (empty when not recorded).
    strides : sequence of list of int
        ``Input Strides`` (empty when not recorded).
    """

    dims: Sequence[Sequence[int]]
    types: Sequence[str]
    concrete: Sequence[str] = ()
    strides: Sequence[Sequence[int]] = ()

    def is_tensor(self, i: int) -> bool:
        """Argument ``i`` exists and is a tensor of a known dtype."""
        return i < len(self.types) and i < len(self.dims) and self.types[i] in DTYPES

    def shape(self, i: int) -> tuple[int, ...] | None:
        """Shape of tensor argument ``i`` (``()`` for a 0-d tensor); None when not a tensor."""
        return tuple(int(d) for d in self.dims[i]) if self.is_tensor(i) else None

    def dtype(self, i: int) -> str | None:
        """Short dtype label (``"bf16"``) of tensor argument ``i``; None when not a tensor."""
        return DTYPES[self.types[i]][0] if self.is_tensor(i) else None

    def itemsize(self, i: int) -> float:
        """Bytes per element of tensor argument ``i`` (0 when not a tensor)."""
        return DTYPES[self.types[i]][1] if self.is_tensor(i) else 0.0

    def numel(self, i: int) -> int:
        """Elements of tensor argument ``i`` as its shape says (0 when not a tensor)."""
        shape = self.shape(i)
        return math.prod(shape) if shape is not None else 0

    def stored(self, i: int) -> int:
        """Distinct elements tensor ``i`` reads: dimensions with stride 0 (``expand``) count once."""
        shape = self.shape(i)
        if shape is None:
            return 0
        st = self.strides[i] if i < len(self.strides) else None
        if st is not None and len(st) == len(shape):
            return math.prod(d for d, s in zip(shape, st) if s != 0)
        return math.prod(shape)

    def nbytes(self, i: int) -> float:
        """Bytes tensor ``i`` occupies: ``stored(i) * itemsize(i)``."""
        return self.stored(i) * self.itemsize(i)

    def value(self, i: int, default: object = None) -> object:
        """Concrete value of argument ``i`` (see :func:`parse_concrete`); ``default`` when not recorded."""
        if i >= len(self.concrete):
            return default
        v = parse_concrete(str(self.concrete[i]))
        return default if v is None else v


@dataclass(frozen=True)
class OpCost:
    """Work and compulsory memory traffic of one op call.

    Built by the cost formulas (:func:`~aonkit.model.ops.op_cost`); the fields are the constructor
    parameters and attributes.

    Parameters
    ----------
    flops : float
        Floating-point operations (a multiply-add counts 2).
    bytes : float
        Bytes read plus bytes written, each tensor once (no cache reuse or
        spills counted: the compulsory traffic).
    dtype : str
        Short dtype label of the main input (``"bf16"``...; ``""`` when its dtype is unknown).
    kind : {"gemm", "conv", "attention", "elementwise", "reduction", "norm", "copy"}
        Op class.
    """

    flops: float
    bytes: float
    dtype: str
    kind: str
