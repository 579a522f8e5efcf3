"""The shape of a decoder-only transformer: :class:`TransformerConfig`, its parameter count and breakdown.

Symbols used throughout :mod:`aonkit.model.llm`: ``l`` layers, ``h`` hidden
size, ``a`` attention heads, ``g`` key/value heads (GQA; ``g = a`` is plain
multi-head attention), ``d`` head size, ``f`` feed-forward size, ``V``
vocabulary, ``s`` sequence length, ``E`` routed experts of which ``k`` are used
per token.

Parameters of one layer (weights; biases when ``bias=True``)::

    attention  h*a*d (Q) + 2*h*g*d (K, V) + a*d*h (output)        [+ a*d + 2*g*d + h]
    MLP        2*h*f, or 3*h*f gated (gate, up, down)               [+ f + h, or 2*f + h]
    norms      2 per layer: 2*h each (LayerNorm), h each (RMSNorm)
    MoE layer  E routed + shared experts, each an MLP of size expert_ffn, and a router h*E

plus the token embedding ``V*h``, an output projection ``V*h`` unless tied,
learned positions ``s*h`` when ``position_embeddings=True`` and the final norm.
For the GPT configuration of Narayanan et al. 2021 (biases, LayerNorm, learned
positions, tied embeddings, ``f = 4h``) this is their
``P = 12*l*h**2 * (1 + 13/(12h) + (V + s)/(12*l*h))`` plus the final
LayerNorm's ``2h``, which their formula leaves out.

Multi-head latent attention (DeepSeek-V2/V3, :class:`MLA`) replaces the
attention line by its low-rank projections; its two internal RMSNorms are
counted with the attention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

NORMS = ("layernorm", "rmsnorm")
_DERIVED = ("kv_heads", "ffn", "moe_layers", "expert_ffn", "head_dim")


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values through low-rank latents.

    Parameters
    ----------
    kv_lora_rank : int
        Size of the compressed key/value latent (the KV cache holds it per token and layer).
    q_lora_rank : int or None
        Size of the query latent; None projects queries directly (``h -> a * (nope + rope)``).
    qk_nope_head_dim, qk_rope_head_dim : int
        Per-head query/key size without and with rotary embedding; the rotary key
        part is shared by all heads and cached beside the latent.
    v_head_dim : int
        Per-head value size.
    """

    kv_lora_rank: int
    q_lora_rank: int | None
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    def params(self, hidden: int, heads: int) -> int:
        """Attention parameters of one layer, the two latent RMSNorms included."""
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        if self.q_lora_rank:
            q = hidden * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * heads * qk
        else:
            q = hidden * heads * qk
        kv = hidden * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
        kv += self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv + heads * self.v_head_dim * hidden


def _positive(name: str, **values: int | None) -> None:
    bad = {k: v for k, v in values.items() if v is not None and (not isinstance(v, int) or v < 1)}
    if bad:
        raise ValueError(f"{name or 'TransformerConfig'}: {bad} must be positive integers")


@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer; ``None`` fields are resolved on construction.

    Parameters
    ----------
    layers, hidden, heads, vocab, seq : int
        ``l``, ``h``, ``a``, ``V`` and the (training) sequence length ``s``.
    kv_heads : int, optional
        Key/value heads for grouped-query attention (default ``heads``).
    ffn : int, optional
        Dense MLP size: default ``4 * hidden``, or with ``gated_mlp`` ``8/3 * hidden``
        rounded up to a multiple of 256 (the Llama rule); presets give the real size.
    gated_mlp : bool
        SwiGLU-style MLP with three matrices instead of two.
    experts, top_k : int
        Routed experts per MoE layer and experts used per token.
    moe_layers : int, optional
        How many layers are MoE (the last ones; DeepSeek-V3 keeps 3 dense first).
        Default: all layers when ``experts > 1``, else none.
    expert_ffn : int, optional
        MLP size of one expert (default ``ffn``).
    shared_experts : int
        Experts every token goes through besides its ``top_k`` routed ones.
    head_dim : int, optional
        ``d`` (default ``hidden // heads``).
    mla : MLA, optional
        Multi-head latent attention instead of (grouped-query) multi-head attention.
    tied_embeddings : bool
        The output projection reuses the token embedding.
    position_embeddings : bool
        Learned absolute positions (``seq * hidden`` parameters), as GPT-2/3.
    bias : bool
        Linear layers carry biases (GPT-2/3, Megatron GPT).
    norm : {"layernorm", "rmsnorm"}
    name : str
    """

    layers: int
    hidden: int
    heads: int
    vocab: int
    seq: int
    kv_heads: int | None = None
    ffn: int | None = None
    gated_mlp: bool = False
    experts: int = 1
    top_k: int = 1
    moe_layers: int | None = None
    expert_ffn: int | None = None
    shared_experts: int = 0
    head_dim: int | None = None
    mla: MLA | None = None
    tied_embeddings: bool = False
    position_embeddings: bool = False
    bias: bool = False
    norm: str = "layernorm"
    name: str = field(default="", compare=False)
    _defaulted: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = self.name
        _positive(n, layers=self.layers, hidden=self.hidden, heads=self.heads, vocab=self.vocab, seq=self.seq,
                  kv_heads=self.kv_heads, ffn=self.ffn, experts=self.experts, top_k=self.top_k,
                  expert_ffn=self.expert_ffn, head_dim=self.head_dim)  # fmt: skip
        if self.norm not in NORMS:
            raise ValueError(f"{n}: norm must be one of {NORMS}, not {self.norm!r}")
        kv = self.heads if self.kv_heads is None else self.kv_heads
        if self.heads % kv:
            raise ValueError(f"{n}: heads ({self.heads}) must be a multiple of kv_heads ({kv})")
        if self.head_dim is None and self.mla is None and self.hidden % self.heads:
            raise ValueError(f"{n}: hidden ({self.hidden}) is not a multiple of heads ({self.heads}); give head_dim")
        if self.top_k > self.experts:
            raise ValueError(f"{n}: top_k ({self.top_k}) exceeds experts ({self.experts})")
        if self.shared_experts < 0:
            raise ValueError(f"{n}: shared_experts must be >= 0")
        moe = self.moe_layers if self.moe_layers is not None else (self.layers if self.experts > 1 else 0)
        if not 0 <= moe <= self.layers:
            raise ValueError(f"{n}: moe_layers ({moe}) must be between 0 and layers ({self.layers})")
        if moe and self.experts == 1:
            raise ValueError(f"{n}: moe_layers ({moe}) given but experts == 1; set experts")
        ffn = self.ffn or (256 * math.ceil(8 * self.hidden / 3 / 256) if self.gated_mlp else 4 * self.hidden)
        set_ = object.__setattr__
        set_(self, "_defaulted", tuple(k for k in _DERIVED if getattr(self, k) is None))
        set_(self, "kv_heads", kv)
        set_(self, "moe_layers", moe)
        set_(self, "ffn", ffn)
        set_(self, "expert_ffn", self.expert_ffn or ffn)
        set_(self, "head_dim", self.head_dim or (self.hidden // self.heads))

    # ---- derived sizes -------------------------------------------------------------------------------------
    @property
    def dense_layers(self) -> int:
        """Layers with a dense MLP."""
        return self.layers - self.moe_layers

    @property
    def qk_dim(self) -> int:
        """Per-head query/key size (``d``, or MLA's nope + rope)."""
        return self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim if self.mla else self.head_dim

    @property
    def v_dim(self) -> int:
        """Per-head value size."""
        return self.mla.v_head_dim if self.mla else self.head_dim

    @property
    def kv_cache_values(self) -> int:
        """Values cached per token and layer: ``2 * g * d``, or MLA's ``kv_lora_rank + rope``."""
        if self.mla:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.kv_heads * self.head_dim

    def replace(self, **changes: object) -> TransformerConfig:
        """A copy with ``changes`` (``cfg.replace(seq=8192)``); derived defaults are recomputed."""
        reset = {k: None for k in self._defaulted if k not in changes}
        return replace(self, **{**reset, **changes})

    # ---- parameters ----------------------------------------------------------------------------------------
    def attention_params(self) -> int:
        """Attention weights (and biases) of one layer."""
        if self.mla:
            return self.mla.params(self.hidden, self.heads)
        h, a, g, d = self.hidden, self.heads, self.kv_heads, self.head_dim
        return 2 * h * a * d + 2 * h * g * d + ((a + 2 * g) * d + h if self.bias else 0)

    def mlp_params(self, ffn: int | None = None) -> int:
        """One (dense or expert) MLP of size ``ffn`` (default :attr:`ffn`)."""
        f, h = ffn or self.ffn, self.hidden
        return (3 if self.gated_mlp else 2) * h * f + (((2 if self.gated_mlp else 1) * f + h) if self.bias else 0)

    def norm_params(self) -> int:
        """One norm: ``2h`` (LayerNorm, scale and shift) or ``h`` (RMSNorm)."""
        return (2 if self.norm == "layernorm" else 1) * self.hidden

    def param_breakdown(self) -> dict[str, int]:
        """Parameters by part, summed over layers; the values add up to :meth:`num_params`."""
        h, e = self.hidden, self.mlp_params(self.expert_ffn)
        return {
            "embedding": self.vocab * h,
            "position": self.seq * h if self.position_embeddings else 0,
            "attention": self.layers * self.attention_params(),
            "mlp": self.dense_layers * self.mlp_params(),
            "experts": self.moe_layers * self.experts * e,
            "shared_experts": self.moe_layers * self.shared_experts * e,
            "router": self.moe_layers * h * self.experts if self.experts > 1 else 0,
            "norms": (2 * self.layers + 1) * self.norm_params(),
            "output": 0 if self.tied_embeddings else self.vocab * h,
        }

    def num_params(self, active: bool = False) -> int:
        """All parameters; with ``active=True`` those one token uses (``top_k`` of the routed experts)."""
        parts = self.param_breakdown()
        if active:
            parts["experts"] = self.moe_layers * self.top_k * self.mlp_params(self.expert_ffn)
        return sum(parts.values())

    def matmul_params(self) -> tuple[int, int]:
        """Weights (no biases, norms or embeddings) one token multiplies by, as ``(per layers, output)``.

        The first is summed over layers with ``top_k`` routed and every shared
        expert plus the router; the second is the vocabulary projection ``V*h``.
        """
        h = self.hidden
        attn = self.mla.params(h, self.heads) - self._mla_norms() if self.mla else (
            2 * h * self.heads * self.head_dim + 2 * h * self.kv_heads * self.head_dim)
        mats = 3 if self.gated_mlp else 2
        dense = mats * h * self.ffn
        moe = mats * h * self.expert_ffn * (self.top_k + self.shared_experts) + h * self.experts
        return self.layers * attn + self.dense_layers * dense + self.moe_layers * moe, self.vocab * h

    def _mla_norms(self) -> int:
        return (self.mla.q_lora_rank or 0) + self.mla.kv_lora_rank if self.mla else 0
