"""Published model configurations, each cited; :func:`preset` looks one up by name.

What the dense/MoE description leaves out is said per preset. Sequence
lengths are the pre-training ones (``cfg.replace(seq=...)`` for others).
"""

from __future__ import annotations

from .config import MLA, TransformerConfig


def gpt_config(layers: int, hidden: int, heads: int, seq: int = 2048, vocab: int = 51200,
               name: str = "") -> TransformerConfig:  # fmt: skip
    """A Megatron-LM GPT: biases, LayerNorm, GELU MLP of ``4h``, learned positions, tied embeddings.

    Defaults are the sequence length and padded vocabulary of Narayanan et al. 2021
    (all their GPT models use ``s = 2048``, ``V = 51200``).
    """
    return TransformerConfig(layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq=seq, bias=True,
                             position_embeddings=True, tied_embeddings=True, norm="layernorm",
                             name=name or f"GPT l={layers} h={hidden}")  # fmt: skip


GPT3_175B = gpt_config(96, 12288, 96, 2048, 50257, "GPT-3 175B")
"""GPT-3 175B: Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1 (96 layers,
d_model 12288, 96 heads of 128, context 2048) and the GPT-2 BPE vocabulary of 50257 tokens. Megatron pads
the vocabulary to 51200 (``gpt_config(96, 12288, 96)``). Alternating dense and locally banded sparse
attention (Brown et al.) is modelled as dense."""

_LLAMA3 = ("Dubey et al. 2024, 'The Llama 3 Herd of Models', Table 3 (layers, model and FFN dimension, heads, "
           "key/value heads); vocabulary 128256 from the released config.json; pre-training sequence 8192")


def _llama3(layers: int, hidden: int, ffn: int, heads: int, name: str) -> TransformerConfig:
    return TransformerConfig(layers=layers, hidden=hidden, heads=heads, kv_heads=8, ffn=ffn, gated_mlp=True,
                             vocab=128256, seq=8192, norm="rmsnorm", name=name)  # fmt: skip


LLAMA3_8B = _llama3(32, 4096, 14336, 32, "Llama-3 8B")
"""Llama-3 8B (8.03 B parameters): """ + _LLAMA3 + "."
LLAMA3_70B = _llama3(80, 8192, 28672, 64, "Llama-3 70B")
"""Llama-3 70B (70.6 B parameters): """ + _LLAMA3 + "."
LLAMA3_405B = _llama3(126, 16384, 53248, 128, "Llama-3 405B")
"""Llama-3 405B (405.9 B parameters): """ + _LLAMA3 + "."

LLAMA32_1B = TransformerConfig(layers=16, hidden=2048, heads=32, kv_heads=8, ffn=8192, gated_mlp=True, vocab=128256,
                               seq=8192, norm="rmsnorm", tied_embeddings=True, name="Llama-3.2 1B")
"""Llama-3.2 1B (1.24 B parameters): the released config.json of meta-llama/Llama-3.2-1B (16 layers, hidden 2048,
32 heads of 64, 8 key/value heads, FFN 8192, vocabulary 128256, tied embeddings); sequence 8192, the context of
its pre-training before long-context extension. A draft model for the Llama-3 presets (same tokenizer):
:mod:`~aonkit.model.llm.speculative`."""

MIXTRAL_8X7B = TransformerConfig(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, gated_mlp=True,
                                 experts=8, top_k=2, vocab=32000, seq=32768, norm="rmsnorm", name="Mixtral 8x7B")
"""Mixtral 8x7B: Jiang et al. 2024, "Mixtral of Experts", Table 1 (dim 4096, 32 layers, head_dim 128,
hidden_dim 14336, 32 heads, 8 kv heads, context 32768, vocabulary 32000, 8 experts, top 2): 46.7 B
parameters, 12.9 B active. Sliding-window attention is not modelled (Mixtral uses full 32k context)."""

DEEPSEEK_V3 = TransformerConfig(
    layers=61, hidden=7168, heads=128, vocab=129280, seq=4096, ffn=18432, gated_mlp=True, experts=256, top_k=8,
    moe_layers=58, expert_ffn=2048, shared_experts=1, norm="rmsnorm", name="DeepSeek-V3",
    mla=MLA(kv_lora_rank=512, q_lora_rank=1536, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
)
"""DeepSeek-V3: DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", section 4.2 (61 layers, hidden 7168,
128 heads of 128, KV compression 512, query compression 1536, decoupled RoPE 64; every FFN but the first 3
is MoE with 1 shared and 256 routed experts of 2048, 8 routed per token; 671 B parameters, 37 B active;
sequence 4096); dense FFN 18432 and vocabulary 129280 from the released config.json. Modelled: MLA
parameters and FLOPs exactly (non-absorbed in training, absorbed in decode), its KV cache as the 576-value
latent per token and layer. Approximated or left out: the multi-token-prediction module (14 B more
parameters, about 2% more FLOPs), node-limited routing (each token to at most 4 nodes) and routing
imbalance (uniform routing assumed), FP8 training (pass ``dtype="fp8"``)."""

PRESETS: dict[str, TransformerConfig] = {
    c.name: c for c in (GPT3_175B, LLAMA32_1B, LLAMA3_8B, LLAMA3_70B, LLAMA3_405B, MIXTRAL_8X7B, DEEPSEEK_V3)
}
"""Presets by name."""


def preset(name: str) -> TransformerConfig:
    """The preset called ``name`` (case, spaces, ``-`` and ``_`` ignored): ``preset("llama3-70b")``."""
    def key(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())

    found = {key(k): v for k, v in PRESETS.items()}.get(key(name))
    if found is None:
        raise KeyError(f"no preset {name!r}; known: {sorted(PRESETS)}")
    return found
