"""FLOPs and bytes of matrix products and scaled-dot-product attention from recorded shapes.

A multiply-add counts 2 FLOPs. Bytes are the compulsory traffic: every input
tensor read once (stride-0 ``expand`` dimensions once), every output written
once, at the tensors' element sizes.

Matrix products, ``A (..., M, K) @ B (..., K, N) -> C (..., M, N)`` with batch
``b`` (the broadcast product of the leading dimensions)::

    flops = 2 * b * M * N * K
    bytes = bytes(A) + bytes(B) + bytes(bias) + b * M * N * itemsize(C)

The bias term of ``addmm``/``baddbmm``/``linear`` adds no FLOPs (as the
PyTorch profiler's own ``flops`` counts them). ``linear(x, W, bias)`` is
``x (..., K) @ W.T`` with ``W (N, K)``; a 1-d ``matmul`` operand gets a unit
dimension that the result drops; ``_scaled_mm`` also reads its scales and
writes ``out_dtype`` (its input dtype when not recorded).

Attention, ``q (..., Lq, D)``, ``k (..., Lk, D)``, ``v (..., Lk, Dv)`` with
``h`` = product of q's leading dimensions (batch x heads; grouped-query k/v
may have fewer heads) and ``P`` score pairs: ``Lq * Lk``, or with
``is_causal`` the ``sum(min(i + 1, Lk) for i < Lq)`` pairs of PyTorch's
top-left causal mask::

    forward  flops = 2 * h * P * (D + Dv)                  # Q K^T and P V
    backward flops = 2 * h * P * (3 * D + 2 * Dv)          # Q K^T again, dP, dV, dQ, dK
    forward  bytes = bytes(q, k, v, mask) + h * Lq * Dv * itemsize
    backward bytes = bytes(grad_out, q, k, v, out, mask) + bytes(q, k, v)   # dq, dk, dv written

Softmax, scaling, dropout and the log-sum-exp output are not counted.
"""

from __future__ import annotations

import math

import numpy as np

from .shapes import DTYPES, SCALAR_TYPES, OpCost, OpInputs

# name: (bias index, A index, B index, B is transposed (linear))
GEMMS: dict[str, tuple[int | None, int, int, bool]] = {
    "mm": (None, 0, 1, False), "addmm": (0, 1, 2, False), "bmm": (None, 0, 1, False),
    "baddbmm": (0, 1, 2, False), "matmul": (None, 0, 1, False), "linear": (2, 0, 1, True),
    "_scaled_mm": (4, 0, 1, False),
}  # fmt: skip


def gemm_cost(name: str, x: OpInputs) -> OpCost:
    """Cost of a matrix-product op (:data:`GEMMS`); see the module doc for the formulas."""
    bias, ia, ib, transposed = GEMMS[name]
    a, b = x.shape(ia), x.shape(ib)
    if a is None or b is None:
        raise ValueError("matrix operands not recorded")
    if transposed:
        b = (*b[:-2], b[-1], b[-2]) if len(b) >= 2 else b
    a_vec, b_vec = len(a) == 1, len(b) == 1
    a2 = (1, *a) if a_vec else a
    b2 = (*b, 1) if b_vec else b
    m, k, n = a2[-2], a2[-1], b2[-1]
    if b2[-2] != k:
        raise ValueError(f"inner dimensions differ: {a} @ {b}")
    batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    out_numel = math.prod(batch) * m * n
    out_size = x.itemsize(ia)
    extra = 0.0
    if name == "_scaled_mm":
        code = x.value(6)
        if isinstance(code, int) and code in SCALAR_TYPES:
            out_size = DTYPES[SCALAR_TYPES[code]][1]
        extra = x.nbytes(2) + x.nbytes(3) + x.nbytes(5)
    flops = 2.0 * math.prod(batch) * m * n * k
    read = x.nbytes(ia) + x.nbytes(ib) + (x.nbytes(bias) if bias is not None else 0.0) + extra
    return OpCost(flops, read + out_numel * out_size, x.dtype(ia) or "", "gemm")


def causal_pairs(lq: int, lk: int) -> int:
    """Score pairs a top-left causal mask keeps: ``sum(min(i + 1, lk) for i in range(lq))``."""
    full = min(lq, lk)  # rows 0..full-1 keep i + 1 pairs, later rows keep lk
    return full * (full + 1) // 2 + max(lq - lk, 0) * lk


# name: (q index, causal index, mask index, backward)
ATTENTION: dict[str, tuple[int, int, int | None, bool]] = {
    "scaled_dot_product_attention": (0, 5, 3, False),
    "_scaled_dot_product_attention_math": (0, 5, 3, False),
    "_scaled_dot_product_flash_attention": (0, 4, None, False),
    "_scaled_dot_product_flash_attention_for_cpu": (0, 4, 5, False),
    "_scaled_dot_product_efficient_attention": (0, 6, 3, False),
    "_scaled_dot_product_cudnn_attention": (0, 6, 3, False),
    "_scaled_dot_product_fused_attention_overrideable": (0, 5, 3, False),
    "_scaled_dot_product_flash_attention_backward": (1, 11, None, True),
    "_scaled_dot_product_flash_attention_for_cpu_backward": (1, 7, 8, True),
    "_scaled_dot_product_efficient_attention_backward": (1, 11, 4, True),
    "_scaled_dot_product_cudnn_attention_backward": (1, 14, 8, True),
    "_scaled_dot_product_fused_attention_overrideable_backward": (1, 13, 4, True),
}
"""Scaled-dot-product attention ops (``[batch, heads, L, D]`` layout) and where their arguments sit."""


def attention_cost(name: str, x: OpInputs) -> OpCost:
    """Cost of a scaled-dot-product attention op (:data:`ATTENTION`); see the module doc."""
    iq, icausal, imask, backward = ATTENTION[name]
    q, k, v = x.shape(iq), x.shape(iq + 1), x.shape(iq + 2)
    if q is None or k is None or v is None or min(len(q), len(k), len(v)) < 2:
        raise ValueError("q, k, v not recorded")
    h, lq, d, lk, dv = math.prod(q[:-2]), q[-2], q[-1], k[-2], v[-1]
    pairs = causal_pairs(lq, lk) if x.value(icausal) is True else lq * lk
    qkv = x.nbytes(iq) + x.nbytes(iq + 1) + x.nbytes(iq + 2)
    mask = x.nbytes(imask) if imask is not None else 0.0
    if backward:  # reads grad_out and out (both h * Lq * Dv), q, k, v, mask; writes dq, dk, dv
        flops = 2.0 * h * pairs * (3 * d + 2 * dv)
        nbytes = 2 * qkv + mask + 2 * x.nbytes(0)  # out has grad_out's shape and dtype
    else:
        flops = 2.0 * h * pairs * (d + dv)
        nbytes = qkv + mask + h * lq * dv * x.itemsize(iq)
    return OpCost(flops, nbytes, x.dtype(iq) or "", "attention")
