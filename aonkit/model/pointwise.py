"""FLOPs and bytes of elementwise ops, reductions, softmax and normalisations from recorded shapes.

Counting convention (stated, not measured): every arithmetic operation or
function evaluation in an op's defining formula costs one FLOP per element,
so ``add``, ``mul``, ``relu``, ``gelu`` and ``exp`` cost 1 (as the PyTorch
profiler's ``flops`` counts ``add`` and ``mul``), ``addcmul``/``addcdiv``/``lerp`` 3.

==============  ===================================  =========================================
kind            flops                                bytes (inputs read once, outputs written)
==============  ===================================  =========================================
elementwise     per-element count x numel(out)       inputs + numel(out) x itemsize; out is the
                                                     broadcast of the tensor inputs (in-place
                                                     ops read and write ``self``)
copy            0 (``copy_``, ``fill_``, ``zero_``,  ``copy_``: src read + self written;
                ``clone``)                           ``fill_``/``zero_``: self written
reduction       1 x numel(in) (``sum``, ``mean``,    input + numel(out) x itemsize; out drops
                ``amax``, ``amin``), 2 x numel(in)   the reduced dims (all when none recorded)
                (``linalg_vector_norm``)
softmax         5 x numel (max, subtract, exp,       input + output (same shape)
                sum, divide; log_softmax alike)
norm            5 x numel (mean, subtract,           input + weight + bias (+ running stats) +
                variance 2, scale) + 1 x numel per   output (input's shape)
                affine tensor given; ``rms_norm``
                3 x numel + 1 x numel with weight
==============  ===================================  =========================================

Tensors read through stride-0 (``expand``) dimensions count their stored
elements only. Element sizes come from ``Input type``.
"""

from __future__ import annotations

import math

import numpy as np

from .shapes import OpCost, OpInputs

_ONE = ("add sub rsub mul div neg abs relu clamp clamp_min clamp_max threshold threshold_backward gelu "
        "gelu_backward silu silu_backward sigmoid sigmoid_backward tanh tanh_backward exp log log1p sqrt rsqrt "
        "pow reciprocal sin cos erf maximum minimum leaky_relu hardtanh elu softplus mish hardswish "
        "hardsigmoid")  # fmt: skip
ELEMENTWISE: dict[str, int] = {**dict.fromkeys(_ONE.split(), 1), "addcmul": 3, "addcdiv": 3, "lerp": 3}
"""FLOPs per output element of elementwise ops (in-place ``add_`` etc. share their entry)."""
COPIES = frozenset({"copy", "fill", "zero", "clone"})
# name: (FLOPs per input element, index of the dim argument)
REDUCTIONS: dict[str, tuple[int, int]] = {"sum": (1, 1), "mean": (1, 1), "amax": (1, 1), "amin": (1, 1),
                                          "linalg_vector_norm": (2, 2)}  # fmt: skip
SOFTMAX = frozenset({"softmax", "_softmax", "log_softmax", "_log_softmax"})
# name: (FLOPs per element before affine, affine tensor indices, other tensors read)
NORMS: dict[str, tuple[int, tuple[int, ...], tuple[int, ...]]] = {
    "layer_norm": (5, (2, 3), ()), "native_layer_norm": (5, (2, 3), ()),
    "group_norm": (5, (2, 3), ()), "native_group_norm": (5, (1, 2), ()),
    "batch_norm": (5, (1, 2), (3, 4)), "native_batch_norm": (5, (1, 2), (3, 4)),
    "_batch_norm_impl_index": (5, (1, 2), (3, 4)), "cudnn_batch_norm": (5, (1, 2), (3, 4)),
    "miopen_batch_norm": (5, (1, 2), (3, 4)), "rms_norm": (3, (2,), ()), "_fused_rms_norm": (3, (2,), ()),
}  # fmt: skip


def _tensors(x: OpInputs) -> list[int]:
    return [i for i in range(len(x.types)) if x.is_tensor(i)]


def elementwise_cost(name: str, x: OpInputs) -> OpCost:
    """Cost of an elementwise op (:data:`ELEMENTWISE`) or a copy (:data:`COPIES`); see the module doc."""
    ts = _tensors(x)
    if not ts:
        raise ValueError("no tensor input recorded")
    main = next((i for i in ts if x.shape(i)), ts[0])  # 0-d wrapped numbers do not set the result dtype
    if name in ("fill", "zero"):
        return OpCost(0.0, x.numel(0) * x.itemsize(0), x.dtype(0) or "", "copy")
    if name == "copy":
        return OpCost(0.0, x.nbytes(1) + x.numel(0) * x.itemsize(0), x.dtype(1) or "", "copy")
    out = math.prod(np.broadcast_shapes(*(x.shape(i) for i in ts)))
    nbytes = sum(x.nbytes(i) for i in ts) + out * x.itemsize(main)
    kind = "copy" if name in COPIES else "elementwise"
    return OpCost(float(ELEMENTWISE.get(name, 0) * out), nbytes, x.dtype(main) or "", kind)


def reduction_cost(name: str, x: OpInputs) -> OpCost:
    """Cost of a reduction (:data:`REDUCTIONS`) or softmax (:data:`SOFTMAX`); see the module doc."""
    shape = x.shape(0)
    if shape is None:
        raise ValueError("input not recorded")
    n = math.prod(shape)
    if name in SOFTMAX:
        return OpCost(5.0 * n, x.nbytes(0) + n * x.itemsize(0), x.dtype(0) or "", "reduction")
    per, idim = REDUCTIONS[name]
    dims = x.value(idim) if len(x.types) > 2 else None  # sum(self, dtype) has no dim
    dims = [dims] if isinstance(dims, int) and not isinstance(dims, bool) else dims
    if isinstance(dims, list) and dims and all(isinstance(d, int) for d in dims) and shape:
        out = n // max(math.prod(shape[d % len(shape)] for d in set(dims)), 1)
    else:
        out = 1
    return OpCost(float(per * n), x.nbytes(0) + out * x.itemsize(0), x.dtype(0) or "", "reduction")


def norm_cost(name: str, x: OpInputs) -> OpCost:
    """Cost of a normalisation (:data:`NORMS`); see the module doc."""
    shape = x.shape(0)
    if shape is None:
        raise ValueError("input not recorded")
    per, affine, stats = NORMS[name]
    n = math.prod(shape)
    given = [i for i in affine if x.is_tensor(i) and x.numel(i) > 0]
    read = x.nbytes(0) + sum(x.nbytes(i) for i in (*given, *stats) if x.is_tensor(i))
    return OpCost(float((per + len(given)) * n), read + n * x.itemsize(0), x.dtype(0) or "", "norm")
