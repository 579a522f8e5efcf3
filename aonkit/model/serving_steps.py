"""Engine step times of the serving simulation from the analytic LLM model.

The simulation asks for step times on a grid of prompt lengths and of (batch, summed context) pairs
(``StepTime`` tables); :func:`model_step_time` answers from :func:`~aonkit.model.llm.prefill_time` and
:func:`~aonkit.model.llm.decode_time`, as ``docs/llm-model.md`` wires them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from .hardware import DeviceSpec
from .llm import TransformerConfig, decode_time, prefill_time
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


def model_step_time(config: TransformerConfig, device: DeviceSpec, tp: int = 1) -> StepTime:
    """Engine step times from the analytic model, as ``docs/llm-model.md`` wires them (``C``: summed context)."""
    return StepTime(
        prefill_time_s=LastGrid(lambda p: prefill_time(config, device, 1, p, tp=tp).seconds),
        decode_time_s=LastGrid(lambda b, c: decode_time(config, device, b, c / b, tp=tp).seconds),
    )


class ModelStepTimes:
    """:func:`model_step_time` for the last ``kept`` (config, device, TP) asked for, each with its last tables.

    Going back to a device compared a moment ago gives the same :class:`StepTime`, whose :class:`LastGrid` functions
    still hold their tables: the model is not tabulated again (about 5 ms of CPU a device change on 2 CPUs).
    """

    def __init__(self, kept: int = 8) -> None:
        self.kept = int(kept)
        self._times: OrderedDict[tuple, StepTime] = OrderedDict()  # oldest first

    def __call__(self, config: TransformerConfig, device: DeviceSpec, tp: int = 1) -> StepTime:
        """The step times of ``config`` on ``device`` with ``tp``-way tensor parallelism (kept or new)."""
        key = (config, device, int(tp))
        times = self._times
        if key in times:
            times.move_to_end(key)
        else:
            times[key] = model_step_time(config, device, int(tp))
            while len(times) > self.kept:
                times.popitem(last=False)
        return times[key]


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


__all__ = ["LastGrid", "ModelStepTimes", "model_step_time", "request_seconds"]
