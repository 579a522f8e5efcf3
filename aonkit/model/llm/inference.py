"""Inference latency: prefill (time to first token) and decode (time per output token) through the roofline.

A forward pass over ``batch`` sequences with ``q`` new tokens each after a
context of ``c`` tokens, on one of ``tp`` tensor-parallel GPUs: every op class
of :mod:`~aonkit.model.llm.costs` goes through the roofline of the device, the
layers' weights are read once per pass, the KV cache is read once (decode) and
written for the new tokens, and each layer adds two all-reduces of the new
tokens' hidden states over the tensor-parallel group (the intra-node link, or
the inter-node one when ``tp`` spans more GPUs than a node has).

Prefill is ``q = c = prompt`` with causal attention, logits for the last token
of each sequence only. Decode is ``q = 1`` at context ``c``: at small batch it
is memory-bound, weights plus KV cache over bandwidth. A MoE layer in decode
reads the experts that ``batch`` tokens route to: with uniform routing
``E * (1 - (1 - k/E) ** batch)`` of ``E``. MLA decodes in the absorbed form
(scores and values over the cached latent, ``2 * kv_lora_rank + rope`` per
pair and head). ``batch`` and ``context`` may be numpy arrays (broadcast), for
curves against either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..hardware import DeviceSpec
from .config import TransformerConfig
from .costs import device_peak, layer_forward, logits_forward, roofline_time
from .network import DGX_H100, Network, collective_time
from .step import EFFICIENCY


@dataclass(frozen=True)
class InferenceTime:
    """One forward pass: ``seconds`` and its parts by class, FLOPs and bytes per GPU (arrays when inputs are)."""

    seconds: np.ndarray | float
    parts: dict[str, np.ndarray | float]
    flops: np.ndarray | float
    bytes: np.ndarray | float
    tokens_per_s: np.ndarray | float


def _pass(config: TransformerConfig, device: DeviceSpec, batch: np.ndarray, q_len: np.ndarray,
          kv_len: np.ndarray, tp: int, network: Network, efficiency: Mapping[str, float] | None, dtype: str,
          weight_bytes: float, kv_bytes: float, decode: bool,
          logits: np.ndarray | None = None) -> InferenceTime:  # fmt: skip
    unknown = set(efficiency or {}) - set(EFFICIENCY)
    if unknown:  # a misspelt key would otherwise change nothing, silently
        raise ValueError(f"unknown efficiency keys {sorted(unknown)}; known: {sorted(EFFICIENCY)}")
    eff = {**EFFICIENCY, **(efficiency or {})}
    peak, bw = device_peak(device, dtype), device.memory_bandwidth
    parts = {"matmul": 0.0, "attention": 0.0, "elementwise": 0.0, "logits": 0.0, "tp": 0.0}
    flops = nbytes = 0.0
    ceff = {"matmul": eff["matmul"], "attention": eff["attention"], "elementwise": 1.0}
    tokens = batch * q_len
    for moe, count in ((False, config.dense_layers), (True, config.moe_layers)):
        if not count:
            continue
        read = None
        if moe:
            e, k = config.experts, config.top_k
            read = e * (1 - (1 - k / e) ** tokens)
        costs = layer_forward(config, moe, batch, q_len, kv_len, tp=tp, causal=True, experts_read=read,
                              weight_bytes=weight_bytes, kv_bytes=kv_bytes, absorbed=decode)  # fmt: skip
        for cls, (fl, by) in costs.items():
            parts[cls] = parts[cls] + count * roofline_time(fl, by, peak, bw, ceff[cls], eff["memory"])
            flops, nbytes = flops + count * fl, nbytes + count * by
        if tp > 1:
            link, where = network.link(tp)
            ar = collective_time("all_reduce", 2.0 * tokens * config.hidden, tp, link, efficiency=eff[f"{where}_link"])
            parts["tp"] = parts["tp"] + count * 2 * ar
    lf, lb = logits_forward(config, batch if logits is None else logits, tp, weight_bytes)  # default: last tokens
    parts["logits"] = roofline_time(lf, lb, peak, bw, eff["matmul"], eff["memory"])
    seconds = sum(parts.values())
    return InferenceTime(seconds, parts, flops + lf, nbytes + lb, tokens / seconds)


def prefill_time(config: TransformerConfig, device: DeviceSpec, batch: float | np.ndarray = 1,
                 prompt: float | np.ndarray | None = None, *, tp: int = 1, network: Network = DGX_H100,
                 efficiency: Mapping[str, float] | None = None, dtype: str = "bf16", weight_bytes: float = 2,
                 kv_bytes: float = 2) -> InferenceTime:  # fmt: skip
    """Time to first token: one prefill pass over ``batch`` prompts of ``prompt`` tokens (default ``config.seq``).

    ``weight_bytes``/``kv_bytes`` set the storage precision (1 for FP8 weights or cache);
    ``dtype`` is the peak key the GEMMs run at. ``tokens_per_s`` counts prompt tokens.

    Parameters
    ----------
    config : TransformerConfig
        The model; MoE layers are costed with the experts their tokens route to (module doc).
    device : DeviceSpec
        Its ``dtype`` peak and memory bandwidth bound every op class.
    batch : float or numpy.ndarray, default 1
        Sequences in the pass.
    prompt : float or numpy.ndarray, optional
        Prompt tokens per sequence; default None uses ``config.seq``.
    tp : int, default 1
        Tensor-parallel GPUs; times, FLOPs and bytes are per GPU. With ``tp > 1`` each layer adds two
        all-reduces of the new tokens' hidden states over ``network``'s intra-node link (its inter-node link
        when ``tp`` exceeds the GPUs per node).
    network : Network, default DGX_H100
        Link figures of the tensor-parallel all-reduces (:data:`~aonkit.model.llm.network.DGX_H100`).
    efficiency : mapping of str to float, optional
        Overrides of :data:`~aonkit.model.llm.step.EFFICIENCY` (e.g.
        :attr:`~aonkit.model.calibration.Calibration.efficiency`). ``matmul``, ``attention``, ``memory`` and
        the ``*_link`` keys are used, the ``*_overlap`` keys ignored; an unknown key is a ``ValueError``.
    dtype : str, default "bf16"
        Peak key of ``device`` that every op class's FLOPs are timed against (``"bf16"``, ``"fp16"``,
        ``"fp8"``...).
    weight_bytes : float, default 2
        Bytes per stored weight (1 for FP8 weights).
    kv_bytes : float, default 2
        Bytes per KV-cache element (1 for an FP8 cache).

    Returns
    -------
    InferenceTime
        ``seconds`` (s), ``parts`` (s per class: ``matmul``, ``attention``, ``elementwise``,
        ``logits``, ``tp``; they sum to ``seconds``), ``flops`` and ``bytes`` per GPU, and
        ``tokens_per_s`` (prompt tokens ``batch * prompt`` per second); numpy arrays broadcast over
        ``batch`` and ``prompt`` when either is an array.

    Raises
    ------
    ValueError
        When ``device`` has no ``dtype`` peak.
    """
    b = np.asarray(batch, dtype=np.float64)
    p = np.asarray(config.seq if prompt is None else prompt, dtype=np.float64)
    return _pass(config, device, b, p, p, tp, network, efficiency, dtype, weight_bytes, kv_bytes, decode=False)


def decode_time(config: TransformerConfig, device: DeviceSpec, batch: float | np.ndarray = 1,
                context: float | np.ndarray | None = None, *, tp: int = 1, network: Network = DGX_H100,
                efficiency: Mapping[str, float] | None = None, dtype: str = "bf16", weight_bytes: float = 2,
                kv_bytes: float = 2) -> InferenceTime:  # fmt: skip
    """Time per output token: one decode step of ``batch`` sequences at ``context`` cached tokens.

    ``tokens_per_s`` is the batch's output tokens per second (``batch / seconds``).

    Parameters
    ----------
    config : TransformerConfig
        The model; MoE layers are costed with the experts their tokens route to (module doc).
    device : DeviceSpec
        Its ``dtype`` peak and memory bandwidth bound every op class.
    batch : float or numpy.ndarray, default 1
        Sequences decoding one token each.
    context : float or numpy.ndarray, optional
        Tokens already in each sequence's KV cache; default None uses ``config.seq``.
    tp : int, default 1
        Tensor-parallel GPUs; times, FLOPs and bytes are per GPU. With ``tp > 1`` each layer adds two
        all-reduces of the new tokens' hidden states over ``network``'s intra-node link (its inter-node link
        when ``tp`` exceeds the GPUs per node).
    network : Network, default DGX_H100
        Link figures of the tensor-parallel all-reduces (:data:`~aonkit.model.llm.network.DGX_H100`).
    efficiency : mapping of str to float, optional
        Overrides of :data:`~aonkit.model.llm.step.EFFICIENCY` (e.g.
        :attr:`~aonkit.model.calibration.Calibration.efficiency`). ``matmul``, ``attention``, ``memory`` and
        the ``*_link`` keys are used, the ``*_overlap`` keys ignored; an unknown key is a ``ValueError``.
    dtype : str, default "bf16"
        Peak key of ``device`` that every op class's FLOPs are timed against (``"bf16"``, ``"fp16"``,
        ``"fp8"``...).
    weight_bytes : float, default 2
        Bytes per stored weight (1 for FP8 weights).
    kv_bytes : float, default 2
        Bytes per KV-cache element (1 for an FP8 cache).

    Returns
    -------
    InferenceTime
        ``seconds`` (s), ``parts`` (s per class: ``matmul``, ``attention``, ``elementwise``,
        ``logits``, ``tp``; they sum to ``seconds``), ``flops`` and ``bytes`` per GPU, and
        ``tokens_per_s`` (``batch / seconds``); numpy arrays broadcast over ``batch`` and ``context``
        when either is an array.

    Raises
    ------
    ValueError
        When ``device`` has no ``dtype`` peak.
    """
    b = np.asarray(batch, dtype=np.float64)
    c = np.asarray(config.seq if context is None else context, dtype=np.float64)
    return _pass(config, device, b, np.ones_like(c), c, tp, network, efficiency, dtype, weight_bytes, kv_bytes,
                 decode=True)  # fmt: skip


def verify_time(config: TransformerConfig, device: DeviceSpec, batch: float | np.ndarray = 1,
                context: float | np.ndarray | None = None, tokens: float | np.ndarray = 2, *, tp: int = 1,
                network: Network = DGX_H100, efficiency: Mapping[str, float] | None = None, dtype: str = "bf16",
                weight_bytes: float = 2, kv_bytes: float = 2) -> InferenceTime:  # fmt: skip
    """A pass over ``tokens`` new tokens a sequence after ``context`` cached ones, with logits for each new token.

    The target model's check of ``tokens - 1`` drafted tokens in speculative decoding
    (:mod:`~aonkit.model.llm.speculative`). ``tokens=1`` is :func:`decode_time`, to the bit.

    The new tokens attend causally to the context and to each other; the weights and the cached keys and values
    are read once for all of them. ``tokens_per_s`` counts ``batch * tokens`` new tokens a second. Other
    parameters, the result and the errors are :func:`decode_time`'s.
    """
    b = np.asarray(batch, dtype=np.float64)
    c = np.asarray(config.seq if context is None else context, dtype=np.float64)
    q = np.asarray(tokens, dtype=np.float64)
    if not np.all(q >= 1):
        raise ValueError(f"tokens must be >= 1, got {tokens!r}")
    # decode's convention: the pass at context c attends to c keys for its one token; the j-th new token to c + j
    return _pass(config, device, b, q, c + q - 1, tp, network, efficiency, dtype, weight_bytes, kv_bytes,
                 decode=True, logits=b * q)  # fmt: skip


WEIGHT_BYTES = {"fp8": 1}
"""Bytes per stored weight for inference at a peak key other than two: FP8 inference stores its weights in FP8."""


def weight_bytes(dtype: str) -> int:
    """Bytes per stored weight when inference runs at ``dtype`` (:data:`WEIGHT_BYTES`, else 2).

    The ``weight_bytes`` that the panels pass to :func:`prefill_time` and :func:`decode_time` with ``dtype``.
    """
    return WEIGHT_BYTES.get(str(dtype), 2)
