"""``LLMModelPanel``: sliders over the analytic LLM model, with live step-time, memory and latency plots.

Every control (model preset and shape overrides, parallel layout, device,
efficiency overrides, network, inference batch/context/TP) re-evaluates
:func:`~aonkit.model.llm.training_step`, :func:`~aonkit.model.llm.training_memory` and the
:func:`~aonkit.model.llm.prefill_time` / :func:`~aonkit.model.llm.decode_time` curves (well under a
millisecond of model time; see ``docs/llm-model.md``) and assigns the new columns to the figures'
sources (columns from :mod:`aonkit.views.llm`, drawn on canvases by :mod:`aonkit.widgets.charts`).
A layout the model rejects (heads not divisible by TP, a global batch that is not a multiple of
micro-batch x DP, ...) is reported and the last valid result kept.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import ipywidgets as w

from ..model.hardware import DeviceSpec, devices
from ..model.llm import (
    DGX_A100,
    DGX_H100,
    PRESETS,
    MemoryBreakdown,
    Network,
    Parallelism,
    TrainingStepTime,
    TransformerConfig,
    best_draft_length,
    speculative_decode_time,
    training_memory,
    training_step,
    weight_bytes,
)
from ..model.serving_steps import serving_memory
from ..views import theme
from ..views.llm import (
    capacity_data,
    inference_data,
    inference_table,
    kv_limit_data,
    memory_data,
    memory_table,
    step_data,
    step_table,
)
from ..views.model_charts import inference_charts, memory_chart, step_chart
from ._bokehjs import TextWidget
from .charts import Charts
from .llm_controls import (
    OVERRIDES,
    POW2,
    SEQS,
    SPEC_OFF,
    STYLE,
    WIDE,
    chosen_draft,
    dropdown,
    int_slider,
    parse_efficiency,
    set_value,
    speculative_controls,
)
from .llm_summary import summary_cells, summary_html

NETWORKS: dict[str, Network] = {n.name: n for n in (DGX_H100, DGX_A100)}
"""Network presets by name."""
class LLMModelPanel(TextWidget, w.VBox):
    """The analytic LLM model under sliders: training step time, MFU, tokens/s, memory per GPU, TTFT/TPOT.

    Parameters
    ----------
    model : str or TransformerConfig
        A preset name (:data:`~aonkit.model.llm.PRESETS`) or a config (added to the preset list under its name).
    device : str or DeviceSpec
        A name of :func:`aonkit.model.hardware.devices` or a spec of your own (added to the list).
    parallel : Parallelism, optional
        Initial layout (default: TP 8, PP 4, DP 8, SP, ZeRO 1, selective recomputation).
    global_batch : int
        Sequences per iteration.
    network : str or Network
        A name of :data:`NETWORKS` or a network of your own.
    efficiency : mapping, optional
        Overrides of :data:`~aonkit.model.llm.EFFICIENCY` (editable as text in the panel).
    dtype : str
        Peak key the GEMMs run at.
    flash : bool
        Fused (flash) attention in training; ``False`` charges the score matrix (Megatron-LM before 2022).
    inference_batch, inference_context : int, optional
        Batch of the latency-vs-context curves and context of the latency-vs-batch curves (default 1, ``seq``).
    inference_tp : int
        Tensor-parallel size of the inference curves.

    Attributes
    ----------
    step : TrainingStepTime
    memory : MemoryBreakdown
    inference : DataFrame
        :func:`aonkit.views.llm.inference_table` of the current settings.
    sources : dict of str to ChartSource
        ``"step"``, ``"memory"``, ``"capacity"``, ``"batch"``, ``"context"``, ``"kv_batch"``, ``"kv_context"``
        (``.data``: the columns drawn).
    kv : ServingMemory or None
        One GPU of the inference layout (``inference_tp``; weights of one byte at FP8, else two):
        :func:`~aonkit.model.serving_steps.serving_memory` (None for a device of unknown memory).
    views : tuple of Charts
        The training and the inference tab's canvas charts (:mod:`aonkit.widgets.charts`).
    error : str
        Why the last change could not be evaluated ("" when it could).
    update_s : float
        Wall time of the last :meth:`update` (model evaluation plus source updates).
    """

    def __init__(self, model: str | TransformerConfig = "Llama-3 70B", *, device: str | DeviceSpec = "H100 SXM",
                 parallel: Parallelism | None = None, global_batch: int = 1024, network: str | Network = DGX_H100,
                 efficiency: Mapping[str, float] | None = None, dtype: str = "bf16", flash: bool = True,
                 inference_batch: int = 1, inference_context: int | None = None, inference_tp: int = 8) -> None:
        self.presets: dict[str, TransformerConfig] = dict(PRESETS)
        if isinstance(model, TransformerConfig):
            key = model.name or "custom"
            self.presets[key] = model
            model = key
        self.devices: dict[str, DeviceSpec] = {d.name: d for d in devices()}
        if isinstance(device, DeviceSpec):
            self.devices[device.name] = device
            device = device.name
        self.networks: dict[str, Network] = dict(NETWORKS)
        if isinstance(network, Network):
            self.networks.setdefault(network.name or "custom", network)
            network = network.name or "custom"
        if model not in self.presets:
            raise KeyError(f"no preset {model!r}; known: {sorted(self.presets)}")
        if device not in self.devices:
            raise KeyError(f"no device {device!r}; known: {sorted(self.devices)}")
        par = parallel or Parallelism(tp=8, pp=4, dp=8, sp=True, zero=1, recompute="selective")
        cfg = self.presets[model]
        self._hold = False

        # model
        self.preset = w.Dropdown(options=list(self.presets), value=model, description="model", style=STYLE,
                                 layout=WIDE)  # fmt: skip
        self.overrides: dict[str, w.ValueWidget] = {
            "layers": int_slider("layers", cfg.layers, 1, 256),
            "hidden": int_slider("hidden", cfg.hidden, 256, 32768, 64),
            "heads": int_slider("heads", cfg.heads, 1, 256),
            "seq": w.SelectionSlider(options=sorted({*SEQS, cfg.seq}), value=cfg.seq, description="seq",
                                     style=STYLE, layout=WIDE),  # fmt: skip
            "vocab": w.BoundedIntText(value=cfg.vocab, min=1, max=10**7, description="vocab", style=STYLE,
                                      layout=WIDE),  # fmt: skip
            "experts": int_slider("experts", cfg.experts, 1, 512),
            "top_k": int_slider("top-k", cfg.top_k, 1, 16),
        }
        # parallelism
        self.tp = dropdown("TP", POW2[:8], par.tp)
        self.pp = int_slider("PP", par.pp, 1, 128)
        self.dp = int_slider("DP", par.dp, 1, 4096)
        self.micro_batch = int_slider("micro-batch", par.micro_batch, 1, 64)
        self.global_batch = int_slider("global batch", global_batch, 1, 16384)
        self.zero = dropdown("ZeRO stage", [0, 1, 2, 3], par.zero)
        self.recompute = w.ToggleButtons(options=["none", "selective", "full"], value=par.recompute,
                                         description="recompute", style={**STYLE, "button_width": "90px"})  # fmt: skip
        self.vpp = int_slider("VPP", par.vpp, 1, 16)
        self.sp = w.Checkbox(value=par.sp, description="sequence parallel", indent=False)
        self.ep = dropdown("EP", POW2[:9], par.ep)
        # hardware and network
        self.device = w.Dropdown(options=list(self.devices), value=device, description="device", style=STYLE,
                                 layout=WIDE)  # fmt: skip
        self.dtype = dropdown("dtype", ["bf16", "fp16", "fp8"], dtype)
        self.efficiency = w.Text(value=", ".join(f"{k}={v:g}" for k, v in (efficiency or {}).items()),
                                 placeholder="e.g. matmul=0.7, attention=0.5", description="efficiency",
                                 continuous_update=False, style=STYLE, layout=WIDE)  # fmt: skip
        self.flash = w.Checkbox(value=flash, description="flash attention (training)", indent=False)
        self.network = w.Dropdown(options=list(self.networks), value=network, description="network", style=STYLE,
                                  layout=WIDE)  # fmt: skip
        # inference
        self.inference_tp = dropdown("TP (inference)", POW2[:8], inference_tp)
        self.inference_batch = int_slider("batch", inference_batch, 1, 512)
        ctx = int(inference_context or cfg.seq)
        self.inference_context = w.SelectionSlider(options=sorted({*SEQS, ctx}), value=ctx,
                                                   description="context", style=STYLE,
                                                   layout=WIDE)  # fmt: skip
        self.draft, self.draft_k, self.acceptance = speculative_controls(list(self.presets))

        self.error = ""
        self.update_s = math.nan
        self._evaluate()  # raises on an invalid initial setting: the caller passed it
        self.views = (
            Charts([step_chart(), memory_chart()], {
                "step": step_data(step_table(self.step)), "memory": memory_data(memory_table(self.memory)),
                "capacity": capacity_data(self.memory.total, self._capacity())}),
            Charts(inference_charts(), self._inference_sources()),
        )  # fmt: skip
        self.sources = {**self.views[0].sources, **self.views[1].sources}
        self.summary = w.HTML()
        self._show()

        for c in self._controls():
            c.observe(self._changed, names="value")
        self.preset.observe(self._preset_changed, names="value")
        head = {"model": [self.preset, *self.overrides.values()],
                "parallelism": [self.tp, self.pp, self.dp, self.micro_batch, self.global_batch, self.zero,
                                self.recompute, self.vpp, self.sp, self.ep],
                "hardware": [self.device, self.dtype, self.efficiency, self.network, self.flash],
                "inference": [self.inference_tp, self.inference_batch, self.inference_context,
                              w.HTML("<small>TTFT/TPOT against batch at this context,<br>"
                                     "and against context at this batch</small>"),
                              self.draft, self.draft_k, self.acceptance]}  # fmt: skip
        columns = [w.VBox([w.HTML(f"<b>{name}</b>"), *ctrls]) for name, ctrls in head.items()]
        self.tabs = w.Tab(children=list(self.views))
        self.tabs.set_title(0, "training")
        self.tabs.set_title(1, "inference")
        super().__init__([w.HBox([columns[0], columns[1]]), w.HBox([columns[2], columns[3]]), self.summary,
                          self.tabs])  # fmt: skip

    # ---- the model's inputs from the controls ------------------------------------------------------------------
    def config(self) -> TransformerConfig:
        """The preset with the override controls that differ from it applied."""
        base = self.presets[self.preset.value]
        values = {k: int(self.overrides[k].value) for k in OVERRIDES}
        changes = {k: v for k, v in values.items() if v != getattr(base, k)}
        return base.replace(**changes) if changes else base

    def parallel(self) -> Parallelism:
        """The layout the controls set."""
        return Parallelism(tp=int(self.tp.value), pp=int(self.pp.value), dp=int(self.dp.value), ep=int(self.ep.value),
                           sp=bool(self.sp.value), vpp=int(self.vpp.value), micro_batch=int(self.micro_batch.value),
                           zero=int(self.zero.value), recompute=self.recompute.value)  # fmt: skip

    def device_spec(self) -> DeviceSpec:
        """The chosen device."""
        return self.devices[self.device.value]

    def efficiencies(self) -> dict[str, float]:
        """The efficiency overrides typed in (``{}``: the defaults)."""
        return parse_efficiency(self.efficiency.value)

    def inputs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`~aonkit.model.llm.training_step` as set now (``config``, ``device``, ...)."""
        return {"config": self.config(), "device": self.device_spec(), "parallel": self.parallel(),
                "global_batch": int(self.global_batch.value), "network": self.networks[self.network.value],
                "efficiency": self.efficiencies() or None, "dtype": self.dtype.value,
                "flash": bool(self.flash.value)}  # fmt: skip

    def speculative(self) -> dict[str, Any] | None:
        """Keyword arguments of :func:`~aonkit.model.llm.speculative_decode_time` the controls set (None: off).

        The draft runs on the inference TP, at the panel's precision.
        """
        if self.draft.value == SPEC_OFF:
            return None
        return {"k": int(self.draft_k.value), "acceptance": float(self.acceptance.value),
                "draft": chosen_draft(self.draft.value, self.presets)}

    # ---- evaluation and display ---------------------------------------------------------------------------------
    def _evaluate(self) -> None:
        kw = self.inputs()
        step: TrainingStepTime = training_step(**kw)
        memory: MemoryBreakdown = training_memory(kw["config"], kw["parallel"], kw["global_batch"], flash=kw["flash"])
        spec = self.speculative()
        at = {"tp": int(self.inference_tp.value), "network": kw["network"], "efficiency": kw["efficiency"],
              "dtype": kw["dtype"]}  # fmt: skip
        b, c = int(self.inference_batch.value), int(self.inference_context.value)
        inference = inference_table(kw["config"], kw["device"], batch=b, context=c, speculative=spec, **at)
        self.spec_at = None
        if spec is not None:  # at the chosen batch and context: this draft length's, and the fastest one's
            at["weight_bytes"] = weight_bytes(kw["dtype"])
            self.spec_at = (speculative_decode_time(kw["config"], kw["device"], b, c, **at, **spec),
                            best_draft_length(kw["config"], kw["device"], b, c, acceptance=spec["acceptance"],
                                              draft=spec["draft"], **at)[0])  # fmt: skip
        dev = kw["device"]  # the weights' bytes as the inference curves read them (one at FP8)
        kv = serving_memory(kw["config"], dev, int(self.inference_tp.value), kw["dtype"]) if dev.memory_bytes else None
        self.kwargs, self.step, self.memory, self.inference, self.kv = kw, step, memory, inference, kv

    def _inference_sources(self) -> dict[str, dict[str, list]]:
        kv = None if self.kv is None else self.kv.kv_tokens
        return {**{s: inference_data(self.inference, s) for s in ("batch", "context")},
                **{f"kv_{s}": kv_limit_data(self.inference, s, kv) for s in ("batch", "context")}}

    def _capacity(self) -> float | None:
        cap = self.kwargs["device"].memory_bytes
        return float(cap) if cap else None

    def update(self) -> TrainingStepTime:
        """Re-evaluate with the controls' values and refresh numbers and plots; return the step time.

        An invalid setting leaves the plots as they were and says why in the summary (:attr:`error`).
        """
        t0 = time.perf_counter()
        try:
            self._evaluate()
        except (ValueError, KeyError, ZeroDivisionError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self._show()
            self.update_s = time.perf_counter() - t0
            return self.step
        self.error = ""
        with self.views[0].one_patch(), self.views[1].one_patch():  # after the summary, one message a tab
            self.sources["step"].data = step_data(step_table(self.step))
            self.sources["memory"].data = memory_data(memory_table(self.memory))
            self.sources["capacity"].data = capacity_data(self.memory.total, self._capacity())
            for key, data in self._inference_sources().items():
                self.sources[key].data = data
            self._show()
        self.update_s = time.perf_counter() - t0
        return self.step

    def numbers(self) -> dict[str, float]:
        """The headline numbers of the current result."""
        st, cap = self.step, self._capacity()
        cfg = self.kwargs["config"]
        return {"step_s": st.step_s, "mfu": st.mfu, "hfu": st.hfu, "tokens_per_s": st.tokens_per_s,
                "flops_per_gpu_s": st.flops_per_gpu_s, "gpus": st.gpus, "micro_batches": st.micro_batches,
                "params": cfg.num_params(), "active_params": cfg.num_params(active=True),
                "memory_bytes": self.memory.total, "capacity_bytes": cap if cap else math.nan,
                "over_capacity": bool(cap and self.memory.total > cap),
                "inference_kv_tokens": math.nan if self.kv is None else self.kv.kv_tokens,
                "inference_kv_fraction": self._kv_fraction(), **self._spec_numbers()}  # fmt: skip

    def _spec_numbers(self) -> dict[str, float]:
        """Speculative decoding at the inference batch and context (NaN when off).

        TPOT, speedup, and the fastest draft length (0: none beats plain decoding).
        """
        if self.spec_at is None:
            return {"spec_tpot_s": math.nan, "spec_speedup": math.nan, "spec_best_k": math.nan}
        t, best = self.spec_at
        return {"spec_tpot_s": float(t.seconds), "spec_speedup": float(t.speedup), "spec_best_k": best}

    def _kv_fraction(self) -> float:
        """The inference batch's KV cache at its context over what fits beside the weights (inf: no room)."""
        if self.kv is None:
            return math.nan
        need = int(self.inference_batch.value) * int(self.inference_context.value)
        return need / self.kv.kv_tokens if self.kv.kv_tokens else math.inf

    def text(self) -> str:
        """A one-line plain-text summary (also the ``text/plain`` of the widget)."""
        n, kw = self.numbers(), self.kwargs
        cap = f" of {theme.fmt_bytes(n['capacity_bytes'])}" if math.isfinite(n["capacity_bytes"]) else ""
        over = " (OVER CAPACITY)" if n["over_capacity"] else ""
        return (f"{kw['config'].name or 'model'} ({n['params'] / 1e9:.1f} B params) on {n['gpus']} x "
                f"{kw['device'].name}: step {theme.fmt_ns(n['step_s'] * 1e9)}, MFU {theme.fmt_pct(n['mfu'])}, "
                f"{theme.fmt_si(n['tokens_per_s'], 'tokens/s')}, memory {theme.fmt_bytes(n['memory_bytes'])}"
                f"{cap} per GPU{over}")  # fmt: skip

    def _show(self) -> None:
        self.summary.value = summary_html(*summary_cells(self.numbers()), self.error)

    # ---- events ----------------------------------------------------------------------------------------------
    def _controls(self) -> list[w.ValueWidget]:
        return [*self.overrides.values(), self.tp, self.pp, self.dp, self.micro_batch, self.global_batch, self.zero,
                self.recompute, self.vpp, self.sp, self.ep, self.device, self.dtype, self.efficiency, self.network,
                self.flash, self.inference_tp, self.inference_batch, self.inference_context, self.draft, self.draft_k,
                self.acceptance]  # fmt: skip

    def _changed(self, change: dict) -> None:
        if not self._hold:
            self.update()

    def _preset_changed(self, change: dict) -> None:
        cfg = self.presets[change["new"]]
        self._hold = True
        try:
            for k in OVERRIDES:
                set_value(self.overrides[k], getattr(cfg, k))
            set_value(self.inference_context, cfg.seq)
        finally:
            self._hold = False
        self.update()

    def plain_text(self) -> str:
        """The model's answer, in one line."""
        return "LLM model: " + self.text()
