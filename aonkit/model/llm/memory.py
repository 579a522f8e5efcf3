"""Memory per GPU: activations (Korthikanti et al. 2022), model states (ZeRO), KV cache, buffers.

Activations of one layer, 16-bit values and 1-byte dropout masks, for a
micro-batch of ``b`` sequences of ``s`` tokens (Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models", MLSys 2023, section 4
and Table 2)::

    no parallelism                    s*b*h * (34 + 5*a*s/h)
    tensor parallel t                 s*b*h * (10 + 24/t + 5*a*s/(h*t))
    tensor + sequence parallel        s*b*h * (34/t + 5*a*s/(h*t))
    selective recomputation           the 5*a*s/h term is gone: s*b*h * (10 + 24/t), or 34/t with SP
    full recomputation                2*s*b*h (the layer input; / t with SP)

``34 = 10 + 24``: layer-norm inputs 4, attention input 2, the two dropout
masks 1 + 1 and MLP input 2 stay whole under tensor parallelism; Q, K, V 6,
projection input 2 and the two MLP inner tensors 8 + 8 are split; the score
term ``5*a*s**2*b`` (softmax output 2, its dropout mask 1 and output 2) is
split by heads. The same accounting is applied part by part to other shapes:
grouped-query K/V are ``g/a`` as large, a gated MLP stores ``3 * 2*s*b*f``
(gate and up outputs, down input) instead of ``2 * 2*s*b*f``, ``dropout=False``
drops the masks (and the score dropout: ``2*a*s**2*b``), and a MoE layer stores
the expert MLP tensors for each of the ``top_k + shared`` experts a token visits.
Flash attention (``flash=True``) stores no score matrix, only its fp32
log-sum-exp per head and token, whatever ``recompute`` says short of ``"full"``.

Model states per parameter with mixed-precision Adam: 2 bytes weights, 2 bytes
gradients, 12 bytes optimizer (fp32 master weights, momentum, variance), 16 in
all; ZeRO stage 1 shards the optimizer over the data-parallel ranks, stage 2
also the gradients, stage 3 (FSDP) also the weights (Rajbhandari et al. 2020).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .config import TransformerConfig
from .flops import recompute_mode


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per GPU by kind; :attr:`total` is their sum."""

    weights: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0
    kv_cache: float = 0.0
    comm_buffers: float = 0.0

    @property
    def total(self) -> float:
        """Sum of all parts (bytes)."""
        return sum(asdict(self).values())

    def as_dict(self) -> dict[str, float]:
        """Every part and ``total``, in bytes."""
        return {**asdict(self), "total": self.total}


def _layer_parts(config: TransformerConfig, moe: bool, dropout: bool) -> tuple[float, float, float]:
    """Per token, in units of 1 byte: (whole under TP, split by TP, score coefficient per a*s)."""
    h, a, g = config.hidden, config.heads, config.kv_heads
    whole = 4 * h + 2 * h + 2 * h + (2 * h if dropout else 0)  # norm inputs, attention input, MLP input, masks
    qkv = 2 * (a * config.qk_dim + g * config.qk_dim + g * config.v_dim) if not config.mla else (
        2 * a * (2 * config.qk_dim + config.v_dim))  # MLA: K and V expanded per head
    split = qkv + 2 * a * config.v_dim  # + projection input
    ffn, copies = (config.expert_ffn, config.top_k + config.shared_experts) if moe else (config.ffn, 1)
    split += copies * (3 if config.gated_mlp else 2) * 2 * ffn
    if moe:
        whole += 2 * h * (config.top_k - 1)  # tokens copied once per routed expert (the permuted MLP input)
    return whole, split, 5.0 if dropout else 2.0


def activation_memory(config: TransformerConfig, micro_batch: int, tp: int = 1, sp: bool = False,
                      recompute: bool | str = "none", *, seq: int | None = None, cp: int = 1,
                      dropout: bool = True, flash: bool = False) -> float:  # fmt: skip
    """Activation bytes one transformer layer keeps for the backward pass, per GPU (Korthikanti et al. 2022).

    Parameters
    ----------
    config : TransformerConfig
    micro_batch : int
        Sequences ``b`` per micro-batch.
    tp : int
        Tensor-parallel size ``t``.
    sp : bool
        Sequence parallelism: the parts tensor parallelism leaves whole are split ``t`` ways too.
    recompute : {"none", "selective", "full"} or bool
        See the module doc; ``True`` is ``"full"``.
    seq : int, optional
        Sequence length (default ``config.seq``).
    cp : int
        Context-parallel size: each rank holds ``seq / cp`` tokens (and their scores against all ``seq`` keys).
    dropout : bool
        Dropout after attention scores, attention and MLP (GPT, Megatron); modern LLMs train without.
    flash : bool
        Fused (flash) attention: no score matrix is stored, only the fp32 log-sum-exp per head
        and token (``4*a`` bytes per token, split by ``t``). Default False, as the paper.

    Returns
    -------
    float
        Bytes per layer, averaged over the layers when dense and MoE layers mix.
    """
    mode = recompute_mode(recompute)
    s = float(config.seq if seq is None else seq)
    local = micro_batch * s / cp
    if mode == "full":
        return 2.0 * local * config.hidden / (tp if sp else 1)
    total = 0.0
    for moe, count in ((False, config.dense_layers), (True, config.moe_layers)):
        if not count:
            continue
        whole, split, score = _layer_parts(config, moe, dropout)
        per = local * (whole / (tp if sp else 1) + split / tp)
        if flash:
            per += 4.0 * config.heads * local / tp
        elif mode == "none":
            per += score * config.heads * local * s / tp
        total += count * per
    return total / config.layers


def model_state_memory(params: float, dp: int = 1, zero: int = 0, weight_bytes: float = 2,
                       grad_bytes: float = 2, optimizer_bytes: float = 12) -> MemoryBreakdown:  # fmt: skip
    """Weights, gradients and optimizer states of ``params`` parameters on one of ``dp`` data-parallel ranks.

    ZeRO stage ``zero`` >= 1 divides the optimizer by ``dp``, >= 2 the gradients, 3 the weights.
    """
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0, 1, 2 or 3, not {zero!r}")
    return MemoryBreakdown(
        weights=params * weight_bytes / (dp if zero >= 3 else 1),
        gradients=params * grad_bytes / (dp if zero >= 2 else 1),
        optimizer=params * optimizer_bytes / (dp if zero >= 1 else 1),
    )


def kv_cache_bytes(config: TransformerConfig, batch: float, context: float, tp: int = 1,
                   bytes_per_value: float = 2) -> float:  # fmt: skip
    """KV cache of ``batch`` sequences of ``context`` tokens on one of ``tp`` tensor-parallel GPUs.

    ``2 * g * d`` values per token and layer, split over ``min(tp, g)`` GPUs
    (key/value heads are replicated beyond that); MLA caches its latent and
    rotary key, ``kv_lora_rank + rope`` values, on every GPU.
    """
    shard = 1 if config.mla else min(tp, config.kv_heads)
    return batch * context * config.layers * config.kv_cache_values * bytes_per_value / shard
