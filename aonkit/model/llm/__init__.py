"""Analytic LLM model: parameters, FLOPs, memory, step time and inference latency of transformers.

Pure functions of a :class:`TransformerConfig`, a :class:`Parallelism`, a
:class:`~aonkit.model.hardware.DeviceSpec` and a :class:`Network`; no trace
access. Formulas and sources are in each module's doc and in ``docs/llm-model.md``.
"""

from __future__ import annotations

from .config import MLA, TransformerConfig
from .flops import forward_flops, training_flops
from .footprint import inference_memory, training_memory
from .inference import WEIGHT_BYTES, InferenceTime, decode_time, prefill_time, verify_time, weight_bytes
from .memory import MemoryBreakdown, activation_memory, kv_cache_bytes, model_state_memory
from .network import DGX_A100, DGX_H100, Link, Network, collective_time
from .parallel import Parallelism
from .presets import (
    DEEPSEEK_V3,
    GPT3_175B,
    LLAMA3_8B,
    LLAMA3_70B,
    LLAMA3_405B,
    LLAMA32_1B,
    MIXTRAL_8X7B,
    PRESETS,
    gpt_config,
    preset,
)
from .speculative import SpeculativeTime, accepted_tokens, best_draft_length, speculative_decode_time
from .step import EFFICIENCY, TrainingStepTime, training_step

__all__ = [
    "DEEPSEEK_V3", "DGX_A100", "DGX_H100", "EFFICIENCY", "GPT3_175B", "InferenceTime", "LLAMA32_1B", "LLAMA3_405B",
    "LLAMA3_70B", "LLAMA3_8B", "Link", "MIXTRAL_8X7B", "MLA", "MemoryBreakdown", "Network", "PRESETS",
    "Parallelism", "SpeculativeTime", "TrainingStepTime", "TransformerConfig", "WEIGHT_BYTES", "accepted_tokens",
    "activation_memory", "best_draft_length", "collective_time", "decode_time", "forward_flops", "gpt_config",
    "inference_memory", "kv_cache_bytes", "model_state_memory", "prefill_time", "preset", "speculative_decode_time",
    "training_flops", "training_memory", "training_step", "verify_time", "weight_bytes",
]  # fmt: skip
