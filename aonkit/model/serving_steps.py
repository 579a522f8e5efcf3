"""Engine step times of the serving simulation from the analytic LLM model, and what a replica's memory holds.

The simulation asks for step times on a grid of prompt lengths and of (batch, summed context) pairs
(``StepTime`` tables); :func:`model_step_time` answers from :func:`~aonkit.model.llm.prefill_time` and
:func:`~aonkit.model.llm.decode_time`, as ``docs/llm-model.md`` wires them. :func:`serving_memory` says whether
the weights fit on a replica's GPUs and how many tokens of KV cache the rest holds: the simulation itself limits
a batch by its sequence count and token budget only, so a caller caps ``max_batch`` by it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .hardware import DeviceSpec
from .llm import TransformerConfig, decode_time, inference_memory, kv_cache_bytes, prefill_time, weight_bytes
from .serving_grid import Kept
from .serving_inputs import StepTime


class LastGrid:
    """A step-time function that remembers its last grid: the tables of every simulation in a sweep are equal.

    The sweep and the replica search call it from two threads at once, so one computes while the other waits
    for its values (computing them twice cost about 4 ms of CPU a change of device on two CPUs); the grid and its
    values are kept as one tuple, replaced in one step: a reader never pairs one grid with another's values.
    """

    def __init__(self, f: Callable[..., Any]) -> None:
        self.f, self.last = f, (None, None)
        self._lock = threading.Lock()

    def __call__(self, *args: np.ndarray) -> np.ndarray:
        """The values at this grid (computed again only when the grid differs from the last one)."""
        key = tuple((a.shape, a.tobytes()) for a in map(np.asarray, args))
        with self._lock:
            last = self.last
            if key != last[0]:
                last = (key, np.asarray(self.f(*args), dtype=np.float64))
                self.last = last
        return last[1]


def model_step_time(config: TransformerConfig, device: DeviceSpec, tp: int = 1, dtype: str = "bf16") -> StepTime:
    """Engine step times from the analytic model, as ``docs/llm-model.md`` wires them (``C``: summed context).

    ``dtype`` is the peak the GEMMs run at (:func:`~aonkit.model.llm.prefill_time`) and the weights' storage:
    ``"fp8"`` reads one byte a weight (FP8 serving quantizes weights and activations), others two
    (:func:`~aonkit.model.llm.weight_bytes`); the KV cache stays 16-bit.
    """
    kw = {"tp": tp, "dtype": dtype, "weight_bytes": weight_bytes(dtype)}
    return StepTime(
        prefill_time_s=LastGrid(lambda p: prefill_time(config, device, 1, p, **kw).seconds),
        decode_time_s=LastGrid(lambda b, c: decode_time(config, device, b, c / b, **kw).seconds),
    )


class ModelStepTimes:
    """:func:`model_step_time` for the last ``kept`` (config, device, TP) asked for, each with its last tables.

    Going back to a device compared a moment ago gives the same :class:`StepTime`, whose :class:`LastGrid` functions
    still hold their tables: the model is not tabulated again (about 5 ms of CPU a device change on 2 CPUs).
    """

    def __init__(self, kept: int = 8) -> None:
        self.kept = int(kept)
        self._times = Kept(self.kept)

    def __call__(self, config: TransformerConfig, device: DeviceSpec, tp: int = 1, dtype: str = "bf16") -> StepTime:
        """The step times of ``config`` on ``device`` with ``tp``-way tensor parallelism at ``dtype`` (kept or new)."""
        return self.get((config, device, int(tp), str(dtype)),
                        lambda: model_step_time(config, device, int(tp), str(dtype)))  # fmt: skip

    def get(self, key: tuple, make: Callable[[], StepTime]) -> StepTime:
        """The step times kept under ``key``, or ``make()``'s, kept (other engines: a speculative one's)."""
        return self._times.get(key, make)


def request_seconds(step: StepTime, prompt_tokens: float, output_tokens: float, batch: int = 16) -> float:
    """A replica's seconds of work per request with ``batch`` sequences decoded together: a measure of engine speed.

    The prefill of one prompt alone, plus a ``batch``-th of ``output_tokens`` decode steps of ``batch`` sequences
    halfway through their outputs, plus the request's share of those steps' overhead. Not a latency: the ratio of
    two engines' values scales a capacity question answered for one of them (``ServingPanel`` starts its replica
    search from the last answer so scaled). A :class:`LastGrid` function is called without replacing its grid.

    Parameters
    ----------
    step : StepTime
        Step times: coefficients, constants, or functions of arrays.
    prompt_tokens, output_tokens : float
        Mean tokens of a request, positive.
    batch : int, default 16
        Sequences decoded together, at least 1.

    Returns
    -------
    float
        Seconds.
    """
    def at(spec: Any, *xs: float) -> float:
        if isinstance(spec, tuple):
            return float(spec[0] + sum(c * x for c, x in zip(spec[1:], xs)))
        if not callable(spec):
            return float(spec)
        f = spec.f if isinstance(spec, LastGrid) else spec
        return float(np.asarray(f(*(np.array([float(x)]) for x in xs)), dtype=np.float64).ravel()[0])

    b, p, o = max(int(batch), 1), float(prompt_tokens), float(output_tokens)
    decode = at(step.decode_time_s, b, b * (p + o / 2))
    return step.overhead_s * (1 + o / b) + at(step.prefill_time_s, p) + o * decode / b


@dataclass(frozen=True)
class ServingMemory:
    """One GPU of a replica: the weights on it, and the KV cache the rest of its usable memory holds.

    Attributes
    ----------
    weights_bytes : float
        Weights per GPU: every parameter (all of an MoE's experts), split over the tensor-parallel GPUs.
    kv_bytes_per_token : float
        KV cache per token of context on one GPU (:func:`~aonkit.model.llm.kv_cache_bytes`, 16-bit).
    usable_bytes : float
        The part of the device's memory a serving engine gives to weights and cache.
    """

    weights_bytes: float
    kv_bytes_per_token: float
    usable_bytes: float

    @property
    def kv_tokens(self) -> int:
        """Tokens of context the cache holds beside the weights (0 when the weights alone do not fit)."""
        return max(int(math.floor((self.usable_bytes - self.weights_bytes) / self.kv_bytes_per_token)), 0)

    def sequences(self, tokens_per_sequence: float) -> int:
        """Sequences of ``tokens_per_sequence`` tokens of context (prompt and output) the cache holds at once."""
        return int(self.kv_tokens // max(float(tokens_per_sequence), 1.0))


def serving_memory(config: TransformerConfig, device: DeviceSpec, tp: int = 1, dtype: str = "bf16",
                   memory_fraction: float = 0.9) -> ServingMemory:  # fmt: skip
    """What one GPU of a replica holds: ``config``'s weights split over ``tp`` GPUs, and KV cache in the rest.

    Parameters
    ----------
    config : TransformerConfig
        The model served.
    device : DeviceSpec
        Its ``memory_bytes`` is the GPU's memory.
    tp : int, default 1
        Tensor-parallel GPUs of a replica.
    dtype : str, default "bf16"
        As for :func:`model_step_time`: ``"fp8"`` stores a weight in one byte, others in two.
    memory_fraction : float, default 0.9
        The part of the device's memory given to weights and KV cache (vLLM's default ``gpu_memory_utilization``;
        the rest is activations, the framework and fragmentation).

    Returns
    -------
    ServingMemory

    Raises
    ------
    ValueError
        When ``device`` has no ``memory_bytes``, or ``memory_fraction`` is not in ``(0, 1]``.
    """
    if device.memory_bytes is None:
        raise ValueError(f"{device.name} has no memory_bytes: give a DeviceSpec with the device's memory")
    if not 0 < memory_fraction <= 1:
        raise ValueError(f"memory_fraction must be in (0, 1], got {memory_fraction}")
    tp = int(tp)
    wb = weight_bytes(dtype)
    return ServingMemory(weights_bytes=float(inference_memory(config, 1, 1, tp=tp, weight_bytes=wb).weights),
                         kv_bytes_per_token=float(kv_cache_bytes(config, 1, 1, tp)),
                         usable_bytes=memory_fraction * float(device.memory_bytes))  # fmt: skip


__all__ = ["LastGrid", "ModelStepTimes", "ServingMemory", "model_step_time", "request_seconds", "serving_memory"]
