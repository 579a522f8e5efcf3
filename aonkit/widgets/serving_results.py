"""What :class:`~aonkit.widgets.serving.ServingPanel` shows: its results, read after any change still waiting.

A mixin of the panel: it reads the panel's last evaluation (``_sweep``, ``_knee``, ``_plan``, ``_error``,
``_computed_s``), its controls and ``_request`` (a change waiting in a kernel is simulated before a result is read).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import pandas as pd

from ..model.hardware import DeviceSpec
from ..model.llm import TransformerConfig
from ..model.serving_analysis import ReplicaPlan
from ..model.serving_steps import ServingMemory, serving_memory
from ..views import theme


class ServingResults:
    """The results of :class:`~aonkit.widgets.serving.ServingPanel` and its summary line."""

    @property
    def sweep(self) -> pd.DataFrame:
        """The last :func:`~aonkit.model.serving_sweep`."""
        self._request.flush()
        return self._sweep

    @property
    def knee(self) -> dict:
        """Its :func:`~aonkit.model.saturation_knee` (on p99 TTFT)."""
        self._request.flush()
        return self._knee

    @property
    def plan(self) -> ReplicaPlan | None:
        """:func:`~aonkit.model.replicas_needed` at the chosen rate (None when over ``max_replicas``)."""
        self._request.flush()
        return self._plan

    @property
    def error(self) -> str:
        """Why the last change could not be simulated ("" when it could)."""
        self._request.flush()
        return self._error

    def replicas_for_slo(self) -> int | None:
        """Fewest replicas meeting the p99 TTFT objective at the chosen rate (None: more than ``max_replicas``)."""
        self._request.flush()
        return None if self._plan is None else int(self._plan.replicas)

    def numbers(self) -> dict[str, float]:
        """Headline numbers: the knee, capacity, and the sweep row at the chosen rate.

        ``rejected_fraction``: of the measured requests at the chosen rate, those refused (longer than a replica's
        KV cache holds); ``preemptions``: at the chosen rate (a paged cache); ``stopped_fraction``: the share of
        outputs the output distribution draws longer than the max new tokens, which stop there
        (:meth:`Lengths.share_over <aonkit.model.Lengths.share_over>`).
        """
        self._request.flush()
        at = self._sweep.iloc[(self._sweep["arrival_rate_per_s"] - float(self.rate.value)).abs().argmin()]
        need = self.replicas_for_slo()
        return {"knee_rate_per_s": self._knee["knee_rate_per_s"], "capacity_per_s": self._knee["capacity_per_s"],
                "ttft_p99_s": float(at["ttft_p99_s"]), "tpot_p50_s": float(at["tpot_p50_s"]),
                "e2e_p99_s": float(at["e2e_p99_s"]), "replicas_needed": math.nan if need is None else need,
                "rejected_fraction": float(at["rejected"] / at["measured"]),
                "preemptions": int(at["preemptions"]), "stopped_fraction": self._stopped}  # fmt: skip

    def text(self) -> str:
        """A one-line plain-text summary (also the ``text/plain`` of the widget)."""
        self._request.flush()
        n = self.numbers()
        need = self.replicas_for_slo()
        need_text = f"{need}" if need is not None else f"more than {self.max_replicas}"
        return (f"{self.replicas.value} replica(s) at {float(self.rate.value):.3g} req/s: p99 TTFT "
                f"{theme.fmt_ns(n['ttft_p99_s'] * 1e9)}, p50 TPOT {theme.fmt_ns(n['tpot_p50_s'] * 1e9)}, p99 e2e "
                f"{theme.fmt_ns(n['e2e_p99_s'] * 1e9)}; knee {n['knee_rate_per_s']:.3g} req/s, capacity "
                f"{n['capacity_per_s']:.3g} req/s; replicas for p99 TTFT <= {float(self.slo.value):.3g} s: "
                f"{need_text}{refused_words(n['rejected_fraction'])}{preempted_words(n['preemptions'])}"
                f"{stopped_words(n['stopped_fraction'])}")  # fmt: skip

    def _show(self) -> None:
        status = (f"<div style='color:#D62728'>cannot simulate this setting, showing the last valid one: "
                  f"{html.escape(self._error)}</div>" if self._error else "")  # fmt: skip
        took = f" (computed in {self._computed_s * 1e3:.0f} ms)" if math.isfinite(self._computed_s) else ""
        far = self.extrapolated()
        note = (f"<div style='color:#8C564B'>step times fitted to a trace, used beyond what it measured: "
                f"{html.escape('; '.join(far))}</div>" if far else "")  # fmt: skip
        memory = self.memory_text()
        memory = f"<div style='color:#555'>{html.escape(memory)}</div>" if memory else ""
        self.summary.value = f"<div>{html.escape(self.text() + took)}</div>{memory}{note}{status}"

    def extrapolated(self) -> list[str]:
        """Where the engine's batch and step budget go beyond the passes of the fitted step times it uses.

        :meth:`StepFit.beyond <aonkit.model.serving_fit.StepFit.beyond>`; empty without a fit, or when the step
        times are not the fit's any more (another choice, edited coefficients).
        """
        if self.fit is None or self.step_kind.value != "linear" or self.step_time() != self.fit.step_time:
            return []
        return self.fit.beyond(int(self.max_batch.value), int(self.token_budget.value))

    def plain_text(self) -> str:
        """The serving model's answer, in one line."""
        return "serving: " + self.text()

    def memory_text(self) -> str:
        """One GPU's memory with model step times: weights, and the KV cache that limits admission ("" otherwise).

        :meth:`~aonkit.widgets.serving.ServingPanel.kv_limit`; says when fewer sequences fit than the max batch
        control allows: of the mean prompt and max new tokens when reserving, of the mean prompt and output when
        paged, each with the system prompt unless the prefix cache holds it once.
        """
        mem = self.memory()
        if mem is None:
            return ""
        reserve = self.kv_policy.value == "reserve"
        shared, own = self.prefix_held()
        tokens = own + int(self.prompt.value) + int((self.max_new if reserve else self.output).value)
        what = "mean prompt + max new tokens, reserved" if reserve else "mean prompt + output"
        what = ("system prompt + " if own else "") + what
        text = "memory: " + memory_words(mem, tokens, int(self.max_batch.value), what, shared)
        spec = self.speculation()
        if spec is not None:  # what the draft adds, and what a step yields
            draft = self.draft_config()
            text += (f"; speculative: {'the ' + draft.name + ' draft' if draft else 'a no-cost draft'} proposes "
                     f"{spec.k} tokens a step, each accepted with probability {spec.acceptance:g}: "
                     f"{spec.tokens_per_iteration:.2f} tokens a step on average"
                     f"{' (its weights and KV cache counted above)' if draft else ''}")  # fmt: skip
        return text


def memory_words(mem: ServingMemory, tokens: int, chosen: int, what: str = "mean prompt + output",
                 shared: int = 0) -> str:
    """What one GPU holds, in words: the weights, and sequences of ``tokens`` (``what`` they are) beside them.

    ``shared``: tokens of a cached prefix held once beside the sequences. Ends with a note when fewer than
    ``chosen`` (the max batch) such sequences fit.
    """
    gb = f"weights {mem.weights_bytes / 1e9:.1f} GB of {mem.usable_bytes / 1e9:.1f} GB usable per GPU"
    if mem.weights_bytes >= mem.usable_bytes:
        return f"{gb}: the weights do not fit"
    fits = max(mem.kv_tokens - shared, 0) // max(tokens, 1)
    once = f"the {shared:,}-token cached system prompt once and " if shared else ""
    text = (f"{gb}; the rest holds {mem.kv_tokens:,} tokens of KV cache, {once}{fits:,} sequences of {tokens:,} "
            f"({what})")  # fmt: skip
    return text + (f": the cache, not the max batch {chosen}, bounds the batch" if fits < chosen else "")


def fit_hint(config: TransformerConfig, device: DeviceSpec, tp: int, tps: Sequence[int], dtype: str,
             tokens: int) -> str:
    """Where a model that does not fit would fit with one sequence of ``tokens``, as a note for the error.

    The least of ``tps`` larger than ``tp`` at ``dtype``, else FP8 (when the device has it) at the least TP; ""
    when nowhere.
    """
    larger = [t for t in tps if t > tp]
    for t in larger:
        if serving_memory(config, device, t, dtype).sequences(tokens) >= 1:
            return f" (it fits with TP {t})"
    if dtype != "fp8" and "fp8" in device.peak_flops:
        for t in [tp, *larger]:
            if serving_memory(config, device, t, "fp8").sequences(tokens) >= 1:
                return f" (it fits in fp8 with TP {t})"
    return ""


def preempted_words(count: int) -> str:
    """The preemptions at the chosen rate, as the end of the panel's line ("" when none)."""
    return f"; {count:,} preemptions (a full KV cache)" if count else ""


def stopped_words(fraction: float) -> str:
    """The share of outputs stopped at the max new tokens, as the end of the panel's line ("" under 0.1%)."""
    return f"; {100 * fraction:.2g}% of outputs stop at max new tokens" if fraction >= 0.001 else ""


def refused_words(fraction: float) -> str:
    """The share of requests refused for the KV cache, as the end of the panel's line ("" when none)."""
    if not fraction > 0:
        return ""
    share = f"{100 * fraction:.2g}%" if fraction >= 0.001 else "under 0.1%"
    return f"; {share} of requests refused (their prompt and max new tokens exceed a replica's KV cache)"
