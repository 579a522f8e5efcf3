"""What :class:`~aonkit.widgets.serving.ServingPanel` simulates: its controls read as the model's inputs.

A mixin of the panel: it reads the panel's controls, ``devices`` (by name) and ``_step_times`` (the model step
times kept for the last presets). The functions below it are shared with
:class:`~aonkit.widgets.disagg.DisaggPanel`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..model.hardware import DeviceSpec
from ..model.llm import PRESETS, TransformerConfig
from ..model.serving_grid import sweep_rates
from ..model.serving_inputs import Lengths, StepTime
from ..model.serving_spec import Speculation, speculative_memory, speculative_step_time
from ..model.serving_steps import ModelStepTimes, ServingMemory
from .llm_controls import SPEC_OFF, chosen_draft
from .serving_results import fit_hint, memory_words


class ServingInputs:
    """The workload, engine and rates :class:`~aonkit.widgets.serving.ServingPanel`'s controls choose."""

    def step_time(self) -> StepTime:
        """The engine step times the controls choose (model ones kept for the last 8 presets, devices and TPs)."""
        if self.step_kind.value == "linear":
            c = {k: float(v.value) for k, v in self.coeffs.items()}
            return StepTime(prefill_time_s=(c["prefill_a"], c["prefill_b"]),
                            decode_time_s=(c["decode_a"], c["decode_b"], c["decode_c"]),
                            overhead_s=c["overhead"])  # fmt: skip
        dev, tp, dtype = self.devices[self.device.value], int(self.tp.value), str(self.dtype.value)
        return engine_step_time(self._step_times, self.model.value, dev, tp, dtype, self.speculation(),
                                self.draft_config())  # fmt: skip

    def speculation(self) -> Speculation | None:
        """The speculative decoding the controls choose (None: off, or linear step times)."""
        if self.step_kind.value == "linear" or self.draft.value == SPEC_OFF:
            return None
        return Speculation(int(self.draft_k.value), float(self.acceptance.value))

    def draft_config(self) -> TransformerConfig | None:
        """The draft model (None: a no-cost draft, or none)."""
        return chosen_draft(self.draft.value, PRESETS)

    def tokens_per_step(self) -> float:
        """Tokens a decode step gives a sequence on average: 1, or an iteration's with speculation."""
        spec = self.speculation()
        return 1.0 if spec is None else spec.tokens_per_iteration

    def memory(self) -> ServingMemory | None:
        """One GPU's weights and KV cache with model step times (None: linear ones, or a device of unknown memory)."""
        device = self.devices[self.device.value]
        if self.step_kind.value == "linear" or device.memory_bytes is None:
            return None
        draft = self.draft_config() if self.speculation() is not None else None
        return speculative_memory(PRESETS[self.model.value], draft, device, int(self.tp.value), str(self.dtype.value))

    def kv_limit(self) -> int | None:
        """Tokens of KV cache a replica holds (:meth:`memory`), the engine's admission limit; None: no limit.

        Raises ValueError when the weights, or they and one request of the system prompt, the mean prompt and its
        max new tokens, do not fit.
        """
        mem = self.memory()
        if mem is None:
            return None
        shared, own = self.prefix_held()
        tokens = own + int(self.prompt.value) + int(self.max_new.value)
        what = ("system prompt + " if own else "") + "mean prompt + max new tokens"
        check_fits(mem, self.model.value, self.devices[self.device.value], int(self.tp.value), self.tp.options,
                   str(self.dtype.value), tokens, int(self.max_batch.value), what, shared)  # fmt: skip
        return mem.kv_tokens

    def prefix_held(self) -> tuple[int, int]:
        """The system prompt's tokens held once per replica (prefix cache) and held by every sequence: one is 0."""
        prefix = int(self.prefix.value)
        return (prefix, 0) if self.prefix_cache.value else (0, prefix)

    def workload(self) -> tuple[int | Lengths, int | Lengths]:
        """Prompt and output lengths: fixed, or lognormal prompts (CV 1) and geometric outputs with the slider means.

        Random outputs stop at the max new tokens (:meth:`Lengths.capped <aonkit.model.Lengths.capped>`); a fixed
        output over it is an error.
        """
        return workload(str(self.lengths.value), int(self.prompt.value), int(self.output.value),
                        int(self.max_new.value))  # fmt: skip

    def engine(self) -> dict[str, Any]:
        """Keyword arguments of :func:`~aonkit.model.simulate_serving` for the engine (not ``replicas``)."""
        return {"step_time": self.step_time(), "max_batch": int(self.max_batch.value), "kv_tokens": self.kv_limit(),
                "kv_policy": str(self.kv_policy.value), "max_new_tokens": int(self.max_new.value),
                "token_budget": int(self.token_budget.value), "chunked_prefill": bool(self.chunked.value),
                "routing": str(self.routing.value), "prefix_tokens": int(self.prefix.value),
                "prefix_cache": bool(self.prefix_cache.value), "speculative": self.speculation()}  # fmt: skip

    def rates(self) -> np.ndarray:
        """Arrival rates of the sweep: :func:`~aonkit.model.serving_grid.sweep_rates` of the chosen rate."""
        return sweep_rates(float(self.rate.value))


def engine_step_time(kept: ModelStepTimes, model: str, device: DeviceSpec, tp: int, dtype: str,
                     spec: Speculation | None, draft: TransformerConfig | None) -> StepTime:  # fmt: skip
    """Step times of preset ``model`` on ``device`` (kept in ``kept``): plain, or an iteration's with ``spec``.

    :func:`~aonkit.model.serving_spec.speculative_step_time` (``draft`` None for a no-cost draft). Raises
    ValueError for a precision the device has no peak for.
    """
    plain = model_step_times(kept, model, device, tp, dtype)  # (checks the precision)
    if spec is None:
        return plain
    cfg = PRESETS[model]
    return kept.get(("speculative", cfg, device, tp, dtype, spec.k, draft),
                    lambda: speculative_step_time(cfg, device, tp, dtype, k=spec.k, draft=draft))


def model_step_times(kept: ModelStepTimes, model: str, device: DeviceSpec, tp: int, dtype: str) -> StepTime:
    """The step times of preset ``model`` on ``device`` (``kept``'s, when asked for lately).

    Raises ValueError for a precision the device has no peak for.
    """
    if dtype not in device.peak_flops:
        raise ValueError(f"{device.name} has no {dtype} peak: choose a precision it has "
                         f"({', '.join(k for k in ('bf16', 'fp16', 'fp8') if k in device.peak_flops)})")
    return kept(PRESETS[model], device, int(tp), dtype)


def check_fits(mem: ServingMemory, model: str, device: DeviceSpec, tp: int, tps: Sequence[int], dtype: str,
               tokens: int, batch: int, what: str, shared: int = 0) -> None:  # fmt: skip
    """Raise ValueError when one sequence of ``tokens`` does not fit in ``mem``'s cache, saying what would.

    ``shared``: tokens held once beside it (a cached prefix); ``tps``: the TP sizes a hint may suggest.
    """
    if mem.sequences(shared + tokens) >= 1:
        return
    words = memory_words(mem, tokens, batch, what, shared)
    hint = fit_hint(PRESETS[model], device, tp, tps, dtype, shared + tokens)
    raise ValueError(f"{model} does not fit on {device.name} with TP {tp} at {dtype}: {words}{hint}")


def workload(lengths: str, prompt: int, output: int, max_new: int) -> tuple[int | Lengths, int | Lengths]:
    """Prompt and output lengths: ``"fixed"``, or lognormal prompts (CV 1) and geometric outputs of these means.

    Random outputs stop at ``max_new``; a fixed output over it is an error.
    """
    if lengths == "fixed":
        if output > max_new:
            raise ValueError(f"output tokens {output} exceed max new tokens {max_new}: a request stops there")
        return prompt, output
    return Lengths.lognormal(prompt, 1.0), Lengths.geometric(output).capped(max_new)
