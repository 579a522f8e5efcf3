"""Speculative decoding in the serving simulation: engines that draft ``k`` tokens and verify them in one step.

With ``speculative=Speculation(k, acceptance)`` (:func:`~aonkit.model.serving.simulate_serving`), a decode step is
an iteration (``k`` draft steps and the target's check, :mod:`aonkit.model.llm.speculative`): its time is the
:class:`~aonkit.model.serving_inputs.StepTime`'s decode part, which should then be an iteration's
(:func:`speculative_step_time` builds it from the analytic model), and it gives each decoding sequence 1 to
``k + 1`` tokens. Each request's iterations are drawn (:func:`draw_iterations`: drafted tokens accepted
independently with probability ``acceptance``, the last iteration cut to the tokens left), so its finish and TPOT
vary as a real engine's do; the simulation runs those iterations, and TPOT counts the request's tokens.

What is approximated: a sequence's context grows by the run's mean tokens an iteration (``tokens_per_step``: all
the requests' decode tokens over their iterations) rather than by its own draws, for the step times (the
batch's summed context) and, with a paged KV cache (session 55), for the cache it holds: the kernel counts the
cache in units of 2**-20 of a token (:data:`KV_UNIT`), each iteration adds the mean tokens an iteration to
each sequence's, and a preempted request computes again its prompt and the tokens it made by that count
(:func:`recomputed`); a request whose prompt and iterations so counted exceed the cache is refused
(:func:`held_at_most`). The lookahead slots an engine allocates for a check (``k`` a sequence) are not held.
What an iteration puts through a chunked step is ``k + 1`` tokens a sequence, which the token budget counts.
:func:`speculative_memory` adds the draft's weights and KV cache to a replica's memory. Refused: a reserving KV
cache with a limit and no ``max_new_tokens`` (the reservation would need each request's tokens, not its
iterations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .hardware import DeviceSpec
from .llm import TransformerConfig, decode_time, prefill_time, verify_time, weight_bytes
from .llm.speculative import accepted_tokens
from .serving_inputs import StepTime
from .serving_steps import LastGrid, ServingMemory, serving_memory

if TYPE_CHECKING:
    from .serving import Prepared

CHUNK = 1 << 22
"""The most uniforms drawn at a time for :func:`draw_iterations` (32 MiB): a million requests need about 10**8."""
KV_UNIT = 1 << 20
"""A paged KV cache's units a token with speculative decoding: a sequence's cache grows by the run's mean tokens an
iteration, ``round(cs * KV_UNIT)`` units (to about a millionth of a token), so the kernel's cache stays in integers."""


@dataclass(frozen=True)
class Speculation:
    """Draft ``k`` tokens an iteration, each accepted by the target with probability ``acceptance``.

    Raises ValueError for ``k < 1`` or an acceptance outside ``[0, 1]``.
    """

    k: int = 4
    acceptance: float = 0.7

    def __post_init__(self) -> None:
        if not (isinstance(self.k, (int, np.integer)) and self.k >= 1):
            raise ValueError(f"Speculation.k must be a whole number >= 1, got {self.k!r}")
        a = float(self.acceptance)
        if not 0.0 <= a <= 1.0:
            raise ValueError(f"Speculation.acceptance must be in [0, 1], got {self.acceptance!r}")

    @property
    def tokens_per_iteration(self) -> float:
        """Tokens an iteration yields a sequence on average with no cut (:func:`~aonkit.model.llm.accepted_tokens`)."""
        return float(accepted_tokens(float(self.acceptance), int(self.k)))


def draw_iterations(spec: Speculation, output: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Iterations each request's output takes: its first token comes from its prefill, the others from these.

    Parameters
    ----------
    spec : Speculation
        Draft length and acceptance.
    output : numpy.ndarray
        Output tokens per request (each at least 1).
    rng : numpy.random.Generator
        The uniforms' source (one per iteration, requests in order); none is drawn at acceptance 0 (one token
        an iteration) or 1 (``k + 1``, the last cut).

    Returns
    -------
    numpy.ndarray
        int64, per request: 0 for one output token, else between ``ceil((o - 1) / (k + 1))`` and ``o - 1``.
    """
    left = np.asarray(output, dtype=np.int64) - 1
    a, k = float(spec.acceptance), int(spec.k)
    if a == 0.0:
        return left.copy()
    if a == 1.0:
        return -(-left // (k + 1))
    from .._kernels.serving_spec import draw_iterations as kernel

    steps = np.zeros(left.size, np.int64)
    pos = np.array([0, -1, 0], np.int64)
    pw = np.array([a**j for j in range(k + 1)])  # (Python's powers: no vector path to differ by a machine)
    expected = float(left.sum()) / spec.tokens_per_iteration  # (more: the last iteration of each is cut)
    size = int(min(CHUNK, expected * 1.02 + 1024))
    while pos[0] < left.size:
        kernel(left, rng.random(size), pw, steps, pos)
        size = int(min(CHUNK, expected * 0.1 + 1024))
    return steps


def speculative_steps(spec: Speculation, output: np.ndarray, rng: np.random.Generator, kv_limited: bool, resv: int,
                      paged: bool, chunked: bool, budget: int, max_batch: int) -> tuple[np.ndarray, tuple]:
    """What :func:`~aonkit.model.serving.prepare` gives the kernel with speculative decoding.

    Checks that the engine is one this models (module doc), then draws each request's iterations from ``rng``
    (after the arrivals and lengths: they are the plain run's). Returns the kernel's outputs (the first token and the
    iterations) and its ``(cs, dq)`` or ``(cs, dq, ku, kg)`` (:func:`kernel_spec`).
    """
    check_engine(spec, kv_limited, resv, paged, chunked, budget, max_batch)
    iterations = draw_iterations(spec, output, rng)
    return 1 + iterations, kernel_spec(spec, output, iterations, paged)


def kernel_spec(spec: Speculation, output: np.ndarray, iterations: np.ndarray, paged: bool) -> tuple:
    """The kernel's ``(cs, dq)``, or ``(cs, dq, ku, kg)`` with a paged cache, for ``iterations`` of ``output`` tokens.

    ``cs``: the run's tokens an iteration (:func:`tokens_per_step`); ``dq``: the ``k + 1`` tokens a decoding
    sequence puts through a step; with a paged cache, ``ku`` (:data:`KV_UNIT`) units a token and ``kg``, ``cs``
    tokens in those units, what a sequence's cache grows by an iteration. Without one the kernel's defaults (1 and
    1) stay compile-time constants: plain runs and these share one compiled kernel, and a paged cache's unit
    arithmetic costs them nothing (passed as values it made paged runs 10-18% slower). A speculative run on a paged
    cache compiles its own (once; about 15 s on a 2-CPU machine).
    """
    cs = tokens_per_step(output, iterations)
    if not paged:
        return cs, int(spec.k) + 1
    return cs, int(spec.k) + 1, KV_UNIT, int(round(cs * KV_UNIT))


def check_engine(spec: Speculation, kv_limited: bool, resv: int, paged: bool, chunked: bool, budget: int,
                 max_batch: int) -> None:  # fmt: skip
    """Raise ValueError unless ``spec`` is a :class:`Speculation` on an engine this models (module doc)."""
    if not isinstance(spec, Speculation):
        raise ValueError(f"speculative must be a Speculation, got {spec!r}")
    if kv_limited and resv == 0 and not paged:
        raise ValueError("speculative decoding with a kv_tokens limit that reserves needs max_new_tokens (what the "
                         "cache reserves), or kv_policy='paged'")
    dq = int(spec.k) + 1
    if chunked and budget < dq * max_batch:
        raise ValueError(f"with speculative decoding and chunked prefill token_budget ({budget}) must be >= "
                         f"(k + 1) * max_batch ({dq * max_batch}): each decoding sequence checks k + 1 tokens a step")


def with_iterations(run: Prepared, spec: Speculation, iterations: np.ndarray) -> Prepared:
    """``run`` (a plain prepared run) decoding speculatively, with iterations drawn elsewhere.

    ``iterations``: one per request, in ``run``'s input order (a disaggregated decode pool's, drawn once for every
    request before the pools part). Raises ValueError as :func:`check_engine` does for ``run``'s engine.
    """
    from .._kernels.serving import UNLIMITED_KV

    replicas, max_batch, budget, kv, resv, paged, chunked = run.kernel_args[:7]
    check_engine(spec, kv < UNLIMITED_KV, resv, paged, chunked, budget, max_batch)
    it = np.asarray(iterations, dtype=np.int64)
    return run._replace(steps=1 + it, spec=kernel_spec(spec, run.output, it, paged))


def recomputed(prompt: np.ndarray, outputs: np.ndarray, spec: tuple) -> np.ndarray:
    """The most tokens each request's prefill may compute on a paged cache (after preemptions), as the kernel counts.

    ``outputs``: the kernel's (tokens, or with speculative decoding 1 + iterations); ``spec``: its ``(cs, dq, ku,
    kg)`` or ``(cs, dq)`` (plain). A preempted request computes its prompt and the tokens it made again: at most its
    prompt and ``(outputs - 1) * kg / ku`` (rounded down; :func:`aonkit._kernels.serving_paged.longest`).
    """
    ku, kg = spec[2:4] if len(spec) > 2 else (1, 1)
    return prompt + (np.asarray(outputs, dtype=np.int64) - 1) * kg // ku


def held_at_most(prompt: np.ndarray, outputs: np.ndarray, resv: int, kv: int, spec: tuple) -> np.ndarray:
    """Which requests a paged cache of ``kv`` tokens can hold to their end, as the kernel refuses the others.

    :func:`aonkit._kernels.serving_paged.refused` for each (``outputs`` and ``spec`` as for :func:`recomputed`).
    """
    ku, kg = spec[2:4] if len(spec) > 2 else (1, 1)
    fits = (prompt + 1) * ku + (np.asarray(outputs, dtype=np.int64) - 1) * kg <= kv * ku
    return fits & (prompt + resv <= kv) if resv else fits


def tokens_per_step(output: np.ndarray, iterations: np.ndarray) -> float:
    """The run's mean tokens an iteration: all its decode tokens over all its iterations (1 when there are none)."""
    total = int(iterations.sum())
    return float(int((np.asarray(output, dtype=np.int64) - 1).sum()) / total) if total else 1.0


def speculative_memory(config: TransformerConfig, draft: TransformerConfig | None, device: DeviceSpec, tp: int = 1,
                       dtype: str = "bf16", memory_fraction: float = 0.9) -> ServingMemory:  # fmt: skip
    """One GPU of a speculative replica: the target's and the draft's weights, and a KV cache for both.

    :func:`~aonkit.model.serving_steps.serving_memory` of the target, with the draft's weights added and its
    cache's bytes a token added to the target's (the draft holds the same context); the draft split over the same
    ``tp`` GPUs. ``draft=None`` (no-cost drafts): the target's alone.
    """
    mem = serving_memory(config, device, tp, dtype, memory_fraction)
    if draft is None:
        return mem
    d = serving_memory(draft, device, tp, dtype, memory_fraction)
    return ServingMemory(mem.weights_bytes + d.weights_bytes, mem.kv_bytes_per_token + d.kv_bytes_per_token,
                         mem.usable_bytes)  # fmt: skip


def speculative_step_time(config: TransformerConfig, device: DeviceSpec, tp: int = 1, dtype: str = "bf16", *,
                          k: int = 4, draft: TransformerConfig | None = None) -> StepTime:  # fmt: skip
    """Engine step times of a speculative engine from the analytic model (``C``: the batch's summed context).

    A prefill computes the prompts with the target and, when there is one, the draft (whose cache needs them
    too). A decode step is an iteration: ``k`` decode steps of the draft at the sequences' mean context ``C / b``
    and after each drafted token, then the target's check of ``k + 1`` tokens a sequence
    (:func:`~aonkit.model.llm.verify_time`). ``draft=None``: drafts that cost no GPU time. ``dtype`` as for
    :func:`~aonkit.model.serving_steps.model_step_time`; the draft runs at the same TP and precision.
    """
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a whole number >= 1, got {k!r}")
    kw = {"tp": tp, "dtype": dtype, "weight_bytes": weight_bytes(dtype)}

    def prefill(p: np.ndarray) -> np.ndarray:
        t = prefill_time(config, device, 1, p, **kw).seconds
        return t if draft is None else t + prefill_time(draft, device, 1, p, **kw).seconds

    def iteration(b: np.ndarray, c: np.ndarray) -> np.ndarray:
        ctx = c / b
        t = verify_time(config, device, b, ctx, int(k) + 1, **kw).seconds
        for j in range(int(k) if draft is not None else 0):
            t = t + decode_time(draft, device, b, ctx + j, **kw).seconds
        return t

    return StepTime(prefill_time_s=LastGrid(prefill), decode_time_s=LastGrid(iteration))
