"""Per-GPU FLOPs and bytes of one layer's forward pass by op class, and their roofline time.

Op classes: ``matmul`` (the layer's GEMMs), ``attention`` (score and value
products), ``elementwise`` (norms, residual adds, activation functions, MoE
token copies: bytes only) and ``logits`` (the vocabulary projection and the
loss). Bytes are compulsory traffic: weights once, GEMM inputs and outputs
once, and per token ``20*h`` bytes for the two norms and two residual adds
(read and write, 16-bit; split by ``t`` only with sequence parallelism) plus
the activation function (``4*f``, gated ``6*f``, split by ``t``).

The time of a class on a device with peak ``P`` (FLOP/s) and bandwidth ``B``
(bytes/s) is ``max(flops / (e_c * P), bytes / (e_m * B))``: the roofline with
the efficiency factors of :data:`~aonkit.model.llm.step.EFFICIENCY`.
"""

from __future__ import annotations

import numpy as np

from ..hardware import DeviceSpec
from .config import TransformerConfig
from .flops import score_pairs

CLASSES = ("matmul", "attention", "elementwise", "logits")
SCORE_BYTES = 13
"""Bytes moved per attention score in a forward pass without flash attention (16-bit scores, 1-byte dropout
mask): the score product writes 2, softmax reads 2 and writes 2, dropout reads 2, writes 2 and its mask 1,
the value product reads 2."""


def attention_weights(config: TransformerConfig) -> int:
    """Attention GEMM weights of one layer (no biases or norms)."""
    if config.mla:
        mla = config.mla
        return config.attention_params() - (mla.q_lora_rank or 0) - mla.kv_lora_rank
    h, d = config.hidden, config.head_dim
    return 2 * h * config.heads * d + 2 * h * config.kv_heads * d


def layer_forward(config: TransformerConfig, moe: bool, batch: float, q_len: float, kv_len: float, *,
                  tp: int = 1, ep: int = 1, expert_tp: int | None = None, sp: bool = False, causal: bool = False,
                  experts_read: float | None = None, weight_bytes: float = 2, kv_bytes: float = 2,
                  absorbed: bool = False, flash: bool = True) -> dict[str, tuple[float, float]]:  # fmt: skip
    """``{class: (flops, bytes)}`` of one layer's forward on one GPU for ``batch * q_len`` tokens.

    Parameters
    ----------
    moe : bool
        A MoE layer (else dense).
    q_len, kv_len : float
        New tokens per sequence, and the keys each attends to (context parallel: local queries, all keys).
    tp : int
        Tensor-parallel size (heads and MLP columns split).
    ep, expert_tp : int
        Expert-parallel size and the experts' tensor-parallel size (default ``tp``): a GPU
        holds ``E / ep`` experts, each split ``expert_tp`` ways, and computes ``top_k`` expert
        MLPs per local token on average (balanced routing).
    experts_read : float, optional
        Routed experts whose weights are read, of all ``E`` (default all); divided by ``ep``.
    absorbed : bool
        MLA with the key/value up-projections absorbed into the query and output (decode).
    flash : bool
        Fused attention that keeps the score matrix on chip; without it every score costs
        :data:`SCORE_BYTES` of memory traffic.
    """
    h, a, g = config.hidden, config.heads, config.kv_heads
    tokens = batch * q_len
    mats = 3 if config.gated_mlp else 2
    attn_w = attention_weights(config) / tp
    if moe:
        per_expert = mats * h * config.expert_ffn
        visits = config.top_k + config.shared_experts
        etp = expert_tp or tp
        active = per_expert * (config.top_k / etp + config.shared_experts / tp) + h * config.experts
        local = (config.experts if experts_read is None else experts_read) / (ep * etp)
        stored = per_expert * (local + config.shared_experts / tp) + h * config.experts
        inner = visits * config.expert_ffn
    else:
        active = stored = mats * h * config.ffn / tp
        inner = config.ffn
    # GEMM inputs and outputs: attention in h, q/k/v out, projection in, out h; MLP in h, inner out/in, out h
    act = 4 * h + ((a + 2 * g) * config.qk_dim + a * config.v_dim + (mats - 1) * inner + inner) / tp
    matmul = (2.0 * tokens * (attn_w + active), weight_bytes * (attn_w + stored) + 2.0 * tokens * act)
    pairs = score_pairs(q_len, kv_len, causal)
    if absorbed and config.mla:
        per_pair = 2 * config.mla.kv_lora_rank + config.mla.qk_rope_head_dim
        kv_read = batch * kv_len * config.kv_cache_values * kv_bytes
    else:
        per_pair = config.qk_dim + config.v_dim
        kv_read = batch * kv_len * g * (config.qk_dim + config.v_dim) * kv_bytes / min(tp, g)
    attn_bytes = kv_read + 2.0 * tokens * a * (config.qk_dim + config.v_dim) / tp
    if not flash:
        attn_bytes = attn_bytes + SCORE_BYTES * batch * pairs * a / tp
    attn = (2.0 * batch * pairs * a * per_pair / tp, attn_bytes)
    elem = 2.0 * tokens * (10 * h / (tp if sp else 1) + (3 if config.gated_mlp else 2) * inner / tp)
    if moe:
        elem += 2.0 * 2 * tokens * config.top_k * h  # permute and un-permute the routed token copies
    return {"matmul": matmul, "attention": attn, "elementwise": (0.0, elem)}


def logits_forward(config: TransformerConfig, tokens: float, tp: int = 1,
                   weight_bytes: float = 2) -> tuple[float, float]:  # fmt: skip
    """``(flops, bytes)`` of the vocabulary projection and softmax loss for ``tokens`` on one GPU."""
    vh = config.vocab * config.hidden / tp
    return 2.0 * tokens * vh, weight_bytes * vh + 10.0 * tokens * config.vocab / tp  # bf16 logits, fp32 softmax


def device_peak(device: DeviceSpec, dtype: str) -> float:
    """``device.peak(dtype)``, or ValueError when the device has no such peak."""
    peak = device.peak(dtype)
    if not peak > 0:
        raise ValueError(f"{device.name} has no {dtype!r} peak; pass a DeviceSpec with one")
    return peak


def roofline_time(flops: float, nbytes: float, peak: float, bandwidth: float, compute_eff: float,
                  memory_eff: float) -> float | np.ndarray:  # fmt: skip
    """``max(flops / (compute_eff * peak), nbytes / (memory_eff * bandwidth))`` (arrays broadcast)."""
    return np.maximum(flops / (compute_eff * peak), nbytes / (memory_eff * bandwidth))
