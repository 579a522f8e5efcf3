"""FLOPs of a transformer's forward pass and of one training iteration (Narayanan et al. 2021).

A multiply-add counts 2 FLOPs and only matrix products count, as in Narayanan
et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM" (SC'21, appendix "Floating-Point Operations"). One forward pass
over ``B`` sequences of ``s`` tokens (``T = B*s``)::

    matmul     2 * T * W        W: the layers' weights one token multiplies by (matmul_params)
    attention  2 * B * P * a * (d_qk + d_v) per layer     P score pairs per head: s*s, or s*(s+1)/2 causal
    logits     2 * T * V * h

For GPT (``W = 12*l*h**2``, ``a*d = h``, ``P = s**2``) that is the paper's
``24*B*s*l*h**2 * (1 + s/(6h)) + 2*B*s*h*V``. The backward pass costs twice
the forward; full activation recomputation repeats the layers' forward (not
the logits), selective recomputation only the attention scores. One iteration::

    none       3 * (matmul + attention + logits)          = 72*B*s*l*h**2 * (1 + s/(6h) + V/(12*l*h))   (GPT)
    full       4 * (matmul + attention) + 3 * logits      = 96*B*s*l*h**2 * (1 + s/(6h) + V/(16*l*h))   (GPT)
    selective  3 * (matmul + attention + logits) + attention

``full`` is the paper's equation (the recompute default, ``recompute=True``);
``none`` is the model FLOPs behind MFU (Korthikanti et al. 2022), the others
hardware FLOPs. Attention is counted over the full ``s x s`` score matrix, as
both papers do; ``causal=True`` counts only the pairs a causal mask keeps.
"""

from __future__ import annotations

from .config import TransformerConfig

RECOMPUTE = ("none", "selective", "full")


def recompute_mode(recompute: bool | str) -> str:
    """``True`` -> ``"full"``, ``False`` -> ``"none"``; a name of :data:`RECOMPUTE` as it is."""
    if recompute is True or recompute is False:
        return "full" if recompute else "none"
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be True, False or one of {RECOMPUTE}, not {recompute!r}")
    return str(recompute)


def score_pairs(q_len: float, kv_len: float, causal: bool) -> float:
    """Query-key pairs per head and sequence for ``q_len`` new tokens after ``kv_len - q_len`` cached ones."""
    if not causal:
        return q_len * kv_len
    return q_len * (kv_len - q_len) + q_len * (q_len + 1) / 2


def attention_flops(config: TransformerConfig, batch: float, q_len: float, kv_len: float, causal: bool) -> float:
    """``2 * B * P * a * (d_qk + d_v)`` summed over layers: the score and value products."""
    pairs = score_pairs(q_len, kv_len, causal)
    return 2.0 * batch * pairs * config.heads * (config.qk_dim + config.v_dim) * config.layers


def forward_flops(config: TransformerConfig, batch: float, seq: float | None = None,
                  causal: bool = False) -> dict[str, float]:  # fmt: skip
    """FLOPs of one forward pass over ``batch`` sequences of ``seq`` tokens (default ``config.seq``).

    Returns
    -------
    dict
        ``{"matmul": ..., "attention": ..., "logits": ...}`` summed over layers.
    """
    s = float(config.seq if seq is None else seq)
    layer_w, out_w = config.matmul_params()
    tokens = batch * s
    return {
        "matmul": 2.0 * tokens * layer_w,
        "attention": attention_flops(config, batch, s, s, causal),
        "logits": 2.0 * tokens * out_w,
    }


def training_flops(config: TransformerConfig, global_batch: float, recompute: bool | str = True,
                   causal: bool = False, seq: float | None = None) -> float:  # fmt: skip
    """FLOPs of one training iteration (forward, backward and any recomputed forward).

    Parameters
    ----------
    config : TransformerConfig
    global_batch : float
        Sequences per iteration ``B``.
    recompute : bool or {"none", "selective", "full"}
        ``True`` (the default, as Narayanan et al.) is full recomputation; see the module doc.
    causal : bool
        Count only the attention pairs a causal mask keeps (default: all, as the paper).
    seq : float, optional
        Sequence length (default ``config.seq``).

    Returns
    -------
    float
    """
    mode = recompute_mode(recompute)
    f = forward_flops(config, global_batch, seq, causal)
    total = 3.0 * (f["matmul"] + f["attention"] + f["logits"])
    if mode == "full":
        total += f["matmul"] + f["attention"]
    elif mode == "selective":
        total += f["attention"]
    return total
