"""Speculative decoding: a draft proposes ``k`` tokens a sequence, the target model checks them in one pass.

An iteration is ``k`` decode steps of the draft (a smaller model; or none at all, for drafts that cost no
GPU time: prompt lookup, n-grams) and one verify pass of the target over ``k + 1`` new tokens of each sequence
(:func:`~aonkit.model.llm.inference.verify_time`: logits for every one). The target keeps the drafted tokens
up to the first it rejects, then one of its own. With each drafted token accepted independently with
probability ``a`` (the model of Leviathan, Kalman and Matias 2023, "Fast Inference from Transformers via
Speculative Decoding", ICML, section 3), an iteration yields on average::

    E = (1 - a**(k + 1)) / (1 - a)      (k + 1 when a = 1)

tokens a sequence, so the time per output token is the iteration's time over ``E``. While the target's pass is
memory-bound (small batches: the weights are read once however many tokens it checks) the check costs about one
decode step and speculation divides the time per token by up to ``E``; once it is compute-bound (large batches)
the check costs about ``k + 1`` steps and speculation slows decoding down. :func:`speculative_decode_time` gives
both through the roofline, :func:`best_draft_length` the ``k`` that decodes fastest.

Left out: the draft's pass over the tokens it did not propose (the target's own token, about one more draft
step per iteration in engines that run it separately), sampling and rejection kernels, tree drafts (several
candidates a position), acceptance that varies along the draft, and the draft's KV cache in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..hardware import DeviceSpec
from .config import TransformerConfig
from .inference import decode_time, verify_time
from .network import DGX_H100, Network

ACCEPTANCE = 0.7
"""The default probability that the target accepts a drafted token: an assumption, not a measurement. It depends on
the draft, the text and the sampling temperature; serving engines count it (vLLM's draft acceptance rate)."""


def accepted_tokens(acceptance: float | np.ndarray, k: int) -> np.ndarray | float:
    """Tokens an iteration yields a sequence on average: ``(1 - a**(k+1)) / (1 - a)``, ``k + 1`` at ``a = 1``.

    Parameters
    ----------
    acceptance : float or numpy.ndarray
        Probability ``a`` in ``[0, 1]`` that the target accepts a drafted token (each independently).
    k : int
        Tokens drafted an iteration, ``>= 0`` (0: plain decoding, one token).

    Returns
    -------
    float or numpy.ndarray
        The drafted tokens accepted before the first rejection, plus the target's own: ``sum(a**j, j=0..k)``.
    """
    a = np.asarray(acceptance, dtype=np.float64)
    if not np.all((a >= 0) & (a <= 1)):
        raise ValueError(f"acceptance must be in [0, 1], got {acceptance!r}")
    if int(k) != k or k < 0:
        raise ValueError(f"k must be a whole number >= 0, got {k!r}")
    # the sum, not the closed form: exact at a = 1 and no cancellation near it
    e = sum(a**j for j in range(int(k) + 1))
    return float(e) if np.ndim(e) == 0 else e


@dataclass(frozen=True)
class SpeculativeTime:
    """One speculative iteration of ``batch`` sequences, and what it makes of decoding (arrays when inputs are).

    ``seconds``: time per output token (``iteration_s / tokens_per_iteration``); ``iteration_s`` = ``draft_s`` (the
    ``k`` draft steps) + ``verify_s`` (the target's check); ``tokens_per_iteration``: :func:`accepted_tokens`;
    ``tokens_per_s``: the batch's output tokens a second; ``speedup``: plain decoding's time per token
    (:func:`~aonkit.model.llm.inference.decode_time`, same batch and context) over ``seconds`` (below 1: slower).
    """

    seconds: np.ndarray | float
    iteration_s: np.ndarray | float
    draft_s: np.ndarray | float
    verify_s: np.ndarray | float
    tokens_per_iteration: np.ndarray | float
    tokens_per_s: np.ndarray | float
    speedup: np.ndarray | float


def speculative_decode_time(config: TransformerConfig, device: DeviceSpec, batch: float | np.ndarray = 1,
                            context: float | np.ndarray | None = None, *, k: int = 4, acceptance: float = ACCEPTANCE,
                            draft: TransformerConfig | None = None, draft_tp: int | None = None, tp: int = 1,
                            network: Network = DGX_H100, efficiency: Mapping[str, float] | None = None,
                            dtype: str = "bf16", weight_bytes: float = 2,
                            kv_bytes: float = 2) -> SpeculativeTime:  # fmt: skip
    """Time per output token of ``config`` decoding with a draft of ``k`` tokens an iteration (module doc).

    Parameters
    ----------
    config, device, batch, context, tp, network, efficiency, dtype, weight_bytes, kv_bytes
        As for :func:`~aonkit.model.llm.inference.decode_time`: the target model and where it runs.
    k : int, default 4
        Tokens drafted an iteration, ``>= 1``.
    acceptance : float, default ACCEPTANCE (0.7)
        Probability that the target accepts a drafted token, in ``[0, 1]`` (measured by engines as the
        "acceptance rate"; it depends on the draft, the task and the sampling temperature).
    draft : TransformerConfig, optional
        The draft model, run on the same device at the same precision for ``k`` decode steps at contexts
        ``context .. context + k - 1``. None: a draft that costs no GPU time (prompt lookup, n-grams).
    draft_tp : int, optional
        The draft's tensor-parallel size (default ``tp``).

    Returns
    -------
    SpeculativeTime
        Seconds per output token, the iteration and its parts, tokens per iteration and per second, and the
        speedup over plain decoding.

    Raises
    ------
    ValueError
        For ``k < 1``, an acceptance outside ``[0, 1]``, or as :func:`decode_time` raises it.
    """
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a whole number >= 1, got {k!r}")
    k = int(k)
    kw = {"network": network, "efficiency": efficiency, "dtype": dtype, "weight_bytes": weight_bytes,
          "kv_bytes": kv_bytes}  # fmt: skip
    e = accepted_tokens(acceptance, k)
    b = np.asarray(batch, dtype=np.float64)
    c = np.asarray(config.seq if context is None else context, dtype=np.float64)
    verify = verify_time(config, device, b, c, k + 1, tp=tp, **kw).seconds
    draft_s = 0.0 * verify
    if draft is not None:
        dtp = tp if draft_tp is None else int(draft_tp)
        for j in range(k):  # the j-th drafted token after the context and the j drafted before it
            draft_s = draft_s + decode_time(draft, device, b, c + j, tp=dtp, **kw).seconds
    iteration = draft_s + verify
    plain = decode_time(config, device, b, c, tp=tp, **kw).seconds
    per_token = iteration / e
    return SpeculativeTime(per_token, iteration, draft_s, verify, e, b * e / iteration, plain / per_token)


def best_draft_length(config: TransformerConfig, device: DeviceSpec, batch: float = 1, context: float | None = None,
                      *, ks: Iterable[int] = range(1, 9), **kw: Any) -> tuple[int, SpeculativeTime | None]:
    """The draft length of ``ks`` that decodes fastest at one ``batch`` and ``context``, or 0 when none beats plain.

    ``kw`` are :func:`speculative_decode_time`'s other keyword arguments (``acceptance``, ``draft``, ...). Every
    length is timed at once (one verify pass over an array of token counts, the draft's steps summed as they go).

    Returns
    -------
    tuple of (int, SpeculativeTime or None)
        ``(k, speculative_decode_time(..., k=k))``, the smallest such ``k`` on ties; ``(0, None)`` when every
        ``k`` tried is slower than plain decoding (the speedup is at most 1).
    """
    if np.ndim(batch) != 0 or (context is not None and np.ndim(context) != 0):
        raise ValueError("best_draft_length takes one batch and one context (scalars)")
    lengths = np.array(sorted({int(k) for k in ks}), dtype=np.int64)
    if not lengths.size or lengths[0] < 1:
        raise ValueError(f"ks must be draft lengths >= 1, got {list(ks)!r}")
    opts = {key: kw[key] for key in ("tp", "network", "efficiency", "dtype", "weight_bytes", "kv_bytes") if key in kw}
    b, c = float(batch), float(config.seq if context is None else context)
    verify = np.asarray(verify_time(config, device, b, c, lengths + 1.0, **opts).seconds, dtype=np.float64)
    draft = kw.get("draft")
    steps = np.zeros(int(lengths[-1]) + 1)
    if draft is not None:
        dopts = {**opts, "tp": opts.get("tp", 1) if kw.get("draft_tp") is None else int(kw["draft_tp"])}
        steps[1:] = np.cumsum([decode_time(draft, device, b, c + j, **dopts).seconds for j in range(lengths[-1])])
    per_token = (steps[lengths] + verify) / np.array([accepted_tokens(kw.get("acceptance", ACCEPTANCE), int(k))
                                                      for k in lengths])  # fmt: skip
    plain = float(decode_time(config, device, b, c, **opts).seconds)
    i = int(np.argmin(per_token))  # the first of equal times: the smallest k
    if not per_token[i] < plain:
        return 0, None
    k = int(lengths[i])
    return k, speculative_decode_time(config, device, b, c, k=k, **kw)
