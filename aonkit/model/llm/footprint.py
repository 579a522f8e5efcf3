"""Memory per GPU of a training job (:func:`training_memory`) or an inference server (:func:`inference_memory`).

Parameters per GPU: the first pipeline stage's share, ``ceil(l/p)`` layers plus the
token embedding (and learned positions), each split ``tp`` ways; experts are
split ``ep * expert_tp`` ways instead. With one stage the output projection
(untied) is added too; with several it sits on the last stage, which is as
large or smaller for the models here. Norms are counted as if split too (they
are replicated, a few hundred kB).

Activations are those of the first stage, which holds the most under 1F1B
(:meth:`Parallelism.in_flight` micro-batches of ``ceil(l/p)`` layers, each
:func:`~aonkit.model.llm.memory.activation_memory`). The embedding output, the
logits and the loss (last stage) are left out, as in Korthikanti et al.

Communication buffers are an assumption, not a measurement: with sequence
parallelism one gathered layer input (``2*b*s*h`` bytes); with ZeRO-3 two
layers of gathered weights (the current and the prefetched); with expert
parallelism the dispatch send and receive buffers (``2 * 2*b*s*k*h`` bytes);
with data parallelism below ZeRO-3 two 25 MiB gradient buckets (PyTorch DDP's
default ``bucket_cap_mb``). NCCL's own workspace and allocator fragmentation
are not included.
"""

from __future__ import annotations

from .config import TransformerConfig
from .memory import MemoryBreakdown, activation_memory, kv_cache_bytes, model_state_memory
from .parallel import Parallelism

DDP_BUCKET_BYTES = 25 * 2**20
"""PyTorch DDP's default gradient bucket (``bucket_cap_mb=25``)."""


def params_per_gpu(config: TransformerConfig, parallel: Parallelism) -> tuple[float, float]:
    """``(non-expert, expert)`` parameters on one GPU of the first pipeline stage."""
    parts = config.param_breakdown()
    experts = parts.pop("experts")
    front = parts.pop("embedding") + parts.pop("position")
    out = parts.pop("output")
    share = parallel.stage_layers(config) / config.layers
    body = sum(parts.values()) * share + front + (out if parallel.pp == 1 else 0)
    return body / parallel.tp, experts * share / (parallel.ep * parallel.expert_tp)


def training_memory(config: TransformerConfig, parallel: Parallelism, global_batch: int | None = None, *,
                    weight_bytes: float = 2, grad_bytes: float = 2, optimizer_bytes: float = 12,
                    dropout: bool = True, flash: bool = True,
                    comm_buffers: float | None = None) -> MemoryBreakdown:  # fmt: skip
    """Bytes per GPU of one training job, by kind (see the module doc for what is counted).

    Parameters
    ----------
    config : TransformerConfig
    parallel : Parallelism
    global_batch : int, optional
        Sequences per iteration; fewer micro-batches than stages hold fewer in flight.
    weight_bytes, grad_bytes, optimizer_bytes : float
        Per parameter: 2, 2 and 12 for mixed-precision Adam (16 in all).
    dropout, flash : bool
        Passed to :func:`~aonkit.model.llm.memory.activation_memory`; ``flash`` defaults to True
        here (as :func:`~aonkit.model.llm.step.training_step`), False there (as the paper).
    comm_buffers : float, optional
        Bytes to use instead of the module doc's estimate.

    Returns
    -------
    MemoryBreakdown
    """
    parallel.check(config, global_batch)
    dense, expert = params_per_gpu(config, parallel)
    states = [model_state_memory(p, d, parallel.zero, weight_bytes, grad_bytes, optimizer_bytes)
              for p, d in ((dense, parallel.dp * parallel.cp), (expert, parallel.expert_dp))]  # fmt: skip
    m = parallel.micro_batches(global_batch) if global_batch is not None else None
    per_layer = activation_memory(config, parallel.micro_batch, parallel.tp, parallel.sp, parallel.recompute,
                                  cp=parallel.cp, dropout=dropout, flash=flash)  # fmt: skip
    acts = per_layer * parallel.stage_layers(config) * parallel.in_flight(m)
    if comm_buffers is None:
        comm_buffers = _comm_buffers(config, parallel, weight_bytes)
    return MemoryBreakdown(
        weights=states[0].weights + states[1].weights,
        gradients=states[0].gradients + states[1].gradients,
        optimizer=states[0].optimizer + states[1].optimizer,
        activations=acts,
        comm_buffers=comm_buffers,
    )


def _comm_buffers(config: TransformerConfig, parallel: Parallelism, weight_bytes: float) -> float:
    tokens = parallel.micro_batch * config.seq / parallel.cp
    total = 0.0
    if parallel.sp and parallel.tp > 1:
        total += 2 * tokens * config.hidden
    if parallel.zero == 3 and parallel.dp * parallel.cp > 1:
        layer = (config.attention_params() + config.mlp_params()) / parallel.tp
        if config.moe_layers:
            layer += config.mlp_params(config.expert_ffn) * config.experts / (parallel.ep * parallel.expert_tp)
        total += 2 * layer * weight_bytes
    elif parallel.dp * parallel.cp > 1:
        total += 2 * DDP_BUCKET_BYTES
    if parallel.ep > 1:
        total += 2 * 2 * tokens * config.top_k * config.hidden
    return total


def inference_memory(config: TransformerConfig, batch: float, context: float, tp: int = 1, pp: int = 1,
                     weight_bytes: float = 2, kv_bytes: float = 2) -> MemoryBreakdown:  # fmt: skip
    """Weights and KV cache per GPU for ``batch`` sequences of ``context`` tokens served with ``tp * pp`` GPUs.

    Weights are split evenly over ``tp * pp``; activations of a decode step are small and left out.
    """
    return MemoryBreakdown(
        weights=config.num_params() * weight_bytes / (tp * pp),
        kv_cache=kv_cache_bytes(config, batch, context, tp, kv_bytes) / pp,
    )
