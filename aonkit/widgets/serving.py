"""``ServingPanel``: the serving queue under sliders, latency percentiles against arrival rate and replicas needed.

A change runs :func:`~aonkit.model.serving_sweep` over 7 or 8 arrival rates from an eighth to twice the chosen rate
(:func:`~aonkit.model.serving_grid.sweep_rates`: the chosen rate and points of a fixed grid; ``n_requests``
simulated requests each, common random numbers), finds its :func:`~aonkit.model.saturation_knee`, and asks
:func:`~aonkit.model.replicas_needed` for the fewest replicas whose p99 TTFT meets the objective at the chosen rate;
the figures' columns come from :mod:`aonkit.views.serving`, drawn on canvases (:mod:`aonkit.widgets.charts`, specs
in :mod:`aonkit.views.model_charts`). Engine step times are either the analytic model's
(:func:`~aonkit.model.llm.prefill_time` / :func:`~aonkit.model.llm.decode_time` of a preset on a device with tensor
parallelism, at a precision; the batch capped by the KV cache that fits beside the weights,
:func:`~aonkit.model.serving_steps.serving_memory`) or linear coefficients. The sweep's simulations run side by side
on threads (the kernel releases the GIL), and the replica search beside them; the figures' changes reach the page as
one message, after the numbers. Each part runs only when one of its inputs changed: a new objective runs only the
replica search (7 ms), a new replica count only the sweep. The search starts at the last answer scaled by the rate
and by the engines' :func:`~aonkit.model.serving_steps.request_seconds`. When it starts at the panel's replica
count, its first simulation is the sweep's row at the chosen rate, and it hands that row over (one simulation
fewer). The sweep's rows are kept per rate (:class:`~aonkit.model.serving_grid.SweepRows`) for the last 8 settings
of everything else (``keep_settings``), so a new arrival rate simulates that rate and, one step in three of the
slider, one or two grid points; the search's answers are kept for the last 8 settings too
(:class:`~aonkit.model.serving_grid.Kept`), so going back to a setting compared a moment ago (a device, a TP degree)
simulates nothing.
``bench/model_widgets.py`` times the updates.

Sliders answer while dragged (``live=True``). In a kernel a change is simulated :data:`COALESCE_S` after it
arrives, with the values that arrived meanwhile (:class:`~aonkit.widgets._loop.Latest`): a dragged slider is
answered as often as the machine allows and never falls behind, and its last value is always answered. Reading a
result (``sweep``, ``numbers()``, ``text()``...) first simulates a change still waiting, so a cell that sets a
control and reads the panel sees the new answer.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import Future, wait

import ipywidgets as w
import numpy as np
import pandas as pd

from ..model.hardware import devices
from ..model.llm import PRESETS
from ..model.serving import ROUTINGS, thread_pool
from ..model.serving_analysis import ReplicaPlan, replicas_needed, saturation_knee, sweep_rows
from ..model.serving_fit import StepFit, linear_coefficients
from ..model.serving_grid import Kept, SweepRows
from ..model.serving_inputs import Lengths, StepTime
from ..model.serving_steps import ModelStepTimes, request_seconds
from ..views.model_charts import sweep_charts
from ..views.serving import knee_data, marker_data, slo_data, sweep_data
from ._bokehjs import TextWidget
from ._loop import Latest
from .charts import Charts
from .llm_controls import speculative_controls
from .serving_controls import SPEC_TIP, STYLE, TIPS, WIDE, linear_boxes, log_slider, slider, toggles
from .serving_engine import ServingInputs
from .serving_results import ServingResults

SEARCH_THREADS = min(os.cpu_count() or 1, 4)
"""Counts the replica search simulates at once once its first two show the guess was off (a change of device to
one several times slower or faster): the sweep is done by then, and its CPUs would idle."""

COALESCE_S = 0.005
"""In a kernel, a change is simulated this long after it arrives, together with those that arrived meanwhile:
the messages a dragged slider sent while the last change was simulated come in together."""


class ServingPanel(ServingInputs, ServingResults, TextWidget, w.VBox):
    """Sliders over the serving simulation: latency percentiles vs arrival rate, the knee, replicas for an SLO.

    Parameters
    ----------
    rate_per_s : float
        The chosen arrival rate (requests/s): the sweep spans an eighth to twice it (:meth:`rates`), and the
        replicas needed for the objective are found at it.
    step_time : {"model", "linear"}, StepFit or StepTime
        Engine step times from the analytic LLM model or from linear coefficients; a
        :func:`~aonkit.model.fit_step_time` result (step times measured from a trace) or a :class:`StepTime` of
        linear coefficients sets the coefficients and ``overhead`` and chooses ``"linear"``.
    model, device, tp, dtype : str, int
        Preset, device (:func:`aonkit.model.hardware.devices`), tensor-parallel size and precision (``"bf16"``,
        ``"fp16"``, ``"fp8"``: :func:`~aonkit.model.serving_steps.model_step_time`) of ``"model"`` step times.
        Their engine admits a request only while its KV cache, in what the weights leave of the GPUs, has room
        for it beside the running ones (``kv_policy`` says how it is counted; :meth:`kv_limit`; a request whose
        prompt and ``max_new_tokens`` exceed the cache is refused); weights that do not fit, or a cache that cannot
        hold one request of the mean prompt and ``max_new_tokens``, are an error.
    kv_policy : {"reserve", "paged"}
        How that cache admits (:func:`~aonkit.model.simulate_serving`): a request's prompt and ``max_new_tokens``
        reserved (an engine does not know the output's length: TGI's way), or its context as it grows, with
        preemption (vLLM's way; answers take longer where caches fill: docs/serving-model.md).
    prefix_tokens, prefix_cache : int, bool
        A system prompt every request starts with, and whether each replica holds it once in a prefix cache
        (default) or every prefill computes it (:func:`~aonkit.model.simulate_serving`).
    draft, draft_tokens, acceptance : str, int, float
        Speculative decoding with model step times: ``"off"`` (default), ``"no-cost draft"`` (prompt lookup) or
        a preset as the draft; the tokens it drafts a step and the probability that each is accepted
        (:mod:`aonkit.model.serving_spec`: step times of an iteration, each request's iterations drawn, the
        draft's weights and cache in memory; the reserving KV cache only).
    max_new_tokens : int, optional
        The most tokens a request may generate, as clients send it: random outputs drawn longer stop there (fixed
        ones must be at most this); a request whose prompt plus this exceeds the cache is refused. Default: eight
        times ``output_tokens`` (a geometric draw reaches it 0.03% of the time), at least 1,024, at most 16,384.
    prefill, decode : tuple
        Linear coefficients ``(a, b)`` (s, s/token) and ``(a, b, c)`` (s, s/sequence, s/context token).
    overhead : float
        Seconds every linear step adds (a forward pass's fixed cost).
    routing : {"jsq", "round_robin", "central"}
        How requests reach replicas (:func:`~aonkit.model.simulate_serving`): join the shortest queue, in turn, or
        one queue that every replica takes from.
    n_requests : int
        Requests simulated per point (keep it small for interactivity).
    max_replicas : int
        Upper bound of the replica search.
    keep_settings : int
        Settings (values of every control but the rate) whose sweep rows and replica-search answers are kept, the
        least recently used dropped first: going back to one of them simulates nothing.
    live : bool
        Sliders answer while dragged (True: each answer uses the latest value, and the values that arrive
        while one is simulated make one answer) or only when released (False: less work for a slow machine's
        page; ``bench/model_widgets.py`` measures both).
    Other parameters set the initial slider values.

    Attributes
    ----------
    sweep : DataFrame
        The last :func:`~aonkit.model.serving_sweep`.
    knee : dict
        Its :func:`~aonkit.model.saturation_knee` (on p99 TTFT).
    plan : ReplicaPlan or None
        :func:`~aonkit.model.replicas_needed` at the chosen rate (None when over ``max_replicas``).
    sources : dict of str to ChartSource
        ``"sweep"``, ``"knee"``, ``"rate"``, ``"slo"`` (``.data``: the columns drawn).
    view : Charts
        The canvas charts (:mod:`aonkit.widgets.charts`).
    error : str
        Why the last change could not be simulated ("" when it could).
    fit : StepFit or None
        The fitted step times the panel was given (:meth:`extrapolated` says where the controls go beyond them).
    update_s : float
        Wall time of the last :meth:`update`, its messages to the page included (the summary shows the time to
        compute it).
    rows : SweepRows
        The sweep's rows kept per rate for the last 8 settings (``rows.simulated``: rates simulated so far).
    updates : int
        Updates run so far. In a kernel, the changes that arrive while one is simulated (a slider being dragged)
        make one update, with the latest values; reading a result first simulates a change still waiting.
    """

    def __init__(self, rate_per_s: float = 20.0, *, cv: float = 1.0, replicas: int = 1, max_batch: int = 64,
                 token_budget: int = 2048, prompt_tokens: int = 512, output_tokens: int = 128,
                 lengths: str = "random", chunked_prefill: bool = True, slo_s: float = 0.5, routing: str = "jsq",
                 step_time: str | StepFit | StepTime = "model", model: str = "Llama-3 8B", device: str = "H100 SXM",
                 tp: int = 1, dtype: str = "bf16", kv_policy: str = "reserve", max_new_tokens: int | None = None,
                 prefix_tokens: int = 0, prefix_cache: bool = True, draft: str = "off", draft_tokens: int = 4,
                 acceptance: float = 0.7, prefill: tuple[float, float] = (0.005, 2e-5),
                 decode: tuple[float, float, float] = (0.010, 1e-4, 1e-7), overhead: float = 0.0,
                 n_requests: int = 20_000, max_replicas: int = 64, seed: int = 0, keep_settings: int = 8,
                 live: bool = True) -> None:  # fmt: skip
        self.fit = step_time if isinstance(step_time, StepFit) else None
        if not isinstance(step_time, str):
            step_time, prefill, decode, overhead = linear_coefficients(step_time)
        self.n_requests, self.max_replicas, self.seed = int(n_requests), int(max_replicas), seed
        self.devices = {d.name: d for d in devices()}
        self.rate = log_slider("arrival rate (/s)", rate_per_s, -1, 4, live)
        self.cv = slider(w.FloatSlider, "arrival CV", cv, 0.0, 4.0, 0.1, live)
        self.replicas = slider(w.IntSlider, "replicas", replicas, 1, 64, 1, live)
        self.routing = toggles("routing", list(ROUTINGS), routing, TIPS["routing"], "90px")
        self.max_batch = slider(w.IntSlider, "max batch", max_batch, 1, 512, 1, live)
        self.token_budget = slider(w.IntSlider, "token budget", token_budget, 64, 16384, 64, live)
        self.prompt = slider(w.IntSlider, "prompt tokens", prompt_tokens, 1, 16384, 1, live)
        self.output = slider(w.IntSlider, "output tokens", output_tokens, 1, 4096, 1, live)
        if max_new_tokens is None:
            max_new_tokens = min(16384, max(1024, 8 * int(output_tokens)))
        self.max_new = slider(w.IntSlider, "max new tokens", max_new_tokens, 1, 16384, 1, live,
                              tooltip=TIPS["max_new"])  # fmt: skip
        self.lengths = toggles("lengths", ["fixed", "random"], lengths, (
            "every request has these lengths", "prompts lognormal (CV 1), outputs geometric, with these means"))
        self.chunked = w.Checkbox(value=chunked_prefill, description="chunked prefill", indent=False)
        self.prefix = slider(w.IntSlider, "system prompt", prefix_tokens, 0, 16384, 1, live, tooltip=TIPS["prefix"])
        self.prefix_cache = w.Checkbox(value=prefix_cache, description="prefix cache", indent=False,
                                       tooltip=TIPS["prefix_cache"])  # fmt: skip
        self.slo = log_slider("p99 TTFT SLO (s)", slo_s, -2.5, 1.5, live)
        self.step_kind = toggles("step time", ["model", "linear"], step_time)
        self.model = w.Dropdown(options=list(PRESETS), value=model, description="model", style=STYLE, layout=WIDE)
        self.device = w.Dropdown(options=list(self.devices), value=device, description="device", style=STYLE,
                                 layout=WIDE)  # fmt: skip
        self.tp = w.Dropdown(options=[1, 2, 4, 8], value=tp, description="TP", style=STYLE, layout=WIDE)
        self.dtype = toggles("precision", ["bf16", "fp16", "fp8"], dtype, TIPS["dtype"], "60px")
        self.kv_policy = toggles("KV cache", ["reserve", "paged"], kv_policy, TIPS["kv_policy"], "70px")
        self.draft, self.draft_k, self.acceptance = speculative_controls(
            list(PRESETS), draft, draft_tokens, acceptance, live=live, style=STYLE, layout=WIDE, tooltip=SPEC_TIP)
        self.coeffs = linear_boxes(prefill, decode, overhead)
        self.model_box = w.VBox([self.model, self.device, self.tp, self.dtype, self.kv_policy, self.draft,
                                 self.draft_k, self.acceptance])  # fmt: skip
        self.linear_box = w.VBox(list(self.coeffs.values()))
        self._toggle_step_boxes()
        self._step_times = ModelStepTimes()
        self.rows = SweepRows(settings=keep_settings)
        self._plans = Kept(keep_settings)  # the replica searches' answers (None: over max_replicas)
        self._plan_at: tuple[float, int, float] | None = None  # the last replica search: rate, answer, engine speed

        self._error = ""
        self.update_s = self._computed_s = math.nan
        self.updates = 0
        self._request = Latest(self.update, COALESCE_S)
        self._keys: tuple[tuple | None, tuple | None] = (None, None)
        self._controls = (self.rate, self.cv, self.replicas, self.routing, self.max_batch, self.token_budget,
                          self.prompt, self.output, self.max_new, self.prefix, self.lengths, self.chunked,
                          self.prefix_cache, self.slo,
                          self.step_kind, self.model, self.device, self.tp, self.dtype, self.kv_policy, self.draft,
                          self.draft_k, self.acceptance, *self.coeffs.values())  # fmt: skip
        """Every control a change of which is simulated (observed, and the keys of :meth:`_inputs`)."""
        self._evaluate()
        self.view = Charts(sweep_charts(), {
            "sweep": sweep_data(self._sweep), "knee": knee_data(self._knee),
            "rate": marker_data(float(self.rate.value), "arrival rate"), "slo": slo_data(float(self.slo.value))},
            columns=2)  # fmt: skip
        self.sources = self.view.sources
        self.summary = w.HTML()
        self._show()
        for c in self._controls:
            c.observe(self._changed, names="value")
        load = w.VBox([w.HTML("<b>load</b>"), self.rate, self.cv, self.prompt, self.prefix, self.output, self.max_new,
                       self.lengths, self.slo])  # fmt: skip
        engine = w.VBox([w.HTML("<b>engine</b>"), self.replicas, self.routing, self.max_batch, self.token_budget,
                         self.chunked, self.prefix_cache, self.step_kind, self.model_box, self.linear_box])  # fmt: skip
        super().__init__([w.HBox([load, engine]), self.summary, self.view])

    # ---- evaluation ------------------------------------------------------------------------------------------
    def _inputs(self) -> tuple[tuple, tuple]:
        """What the sweep and the replica search each depend on, as keys of the controls' values.

        Every control's value but the objective's and the replica count's respectively: a control added to the
        panel is in both unless left out here.
        """
        common = tuple(c.value for c in self._controls if c is not self.slo and c is not self.replicas)
        common += (self.n_requests, self.seed)
        return (*common, self.replicas.value), (*common, self.slo.value, self.max_replicas)

    def _evaluate(self) -> bool:
        """Run what the changed controls need: the sweep, the replica search or both; True when the sweep ran.

        A change of the objective leaves the sweep as it was, and one of the replica count leaves the replica
        search (it tries its own counts); each part is recomputed only when one of its inputs changed.
        """
        sweep_key, plan_key = self._inputs()
        new_sweep, new_plan = sweep_key != self._keys[0], plan_key != self._keys[1]
        prompts, outputs = self.workload()
        kw = {"n_requests": self.n_requests, "arrival_cv": float(self.cv.value), "seed": self.seed, **self.engine()}

        rate = float(self.rate.value)
        # the search starts at the last answer scaled to the new rate and engine: two simulations when it is right
        last = self._plan_at
        work = last[2] if last is not None and not new_plan else request_seconds(  # (0.3 ms with model step times)
            kw["step_time"], self.prompt.value + self.prefix_held()[1], self.output.value / self.tokens_per_step(),
            min(kw["max_batch"], 16))  # fmt: skip
        scale = 1.0 if last is None else rate / last[0] * (work / last[2] if 0 < min(work, last[2]) < math.inf else 1)
        start = 1 if last is None else max(1, min(self.max_replicas, round(last[1] * scale)))

        replicas = int(self.replicas.value)
        # the search's first simulation (start replicas at the chosen rate) is the sweep's row there when start is
        # the replica count: the search hands it over instead of the sweep simulating it again
        kept = new_plan and plan_key in self._plans  # a setting searched a moment ago: its answer as it was
        handoff: Future | None = Future() if new_plan and not kept and new_sweep and start == replicas else None

        def hand(c: int, row: dict) -> None:
            if c == replicas and handoff is not None and not handoff.done():
                handoff.set_result(row)

        def plan() -> ReplicaPlan | None:
            try:
                return replicas_needed(rate, float(self.slo.value), prompts, outputs, max_replicas=self.max_replicas,
                                       start=start, on_row=hand, threads=SEARCH_THREADS, **kw)  # fmt: skip
            except ValueError as exc:
                if "not met with" not in str(exc):
                    raise
                return None
            finally:  # the search failed before that row: the sweep simulates it itself
                if handoff is not None and not handoff.done():
                    handoff.set_result(None)

        def simulate(rates: np.ndarray) -> list[dict]:
            shared = handoff is not None and rate in rates
            others = rates[rates != rate] if shared else rates
            rows = sweep_rows(others, prompts, outputs, replicas=replicas, **kw) if len(others) else []
            row = handoff.result() if shared else None  # type: ignore[union-attr]
            if not shared:
                return rows
            if row is None:
                row = sweep_rows([rate], prompts, outputs, replicas=replicas, **kw)[0]
            else:
                row = {"arrival_rate_per_s": rate, **row}
            at = iter(rows)
            return [row if r == rate else next(at) for r in rates]

        # the replica search beside the sweep, on a kept thread (starting one took about 2 ms an update on 2 CPUs)
        planned = thread_pool(1).submit(plan) if new_plan and not kept else None
        try:
            if new_sweep:  # the rows of the rates kept for these other inputs, simulations for the others
                rows_key = (*(c.value for c in self._controls if c is not self.slo and c is not self.rate),
                            self.n_requests, self.seed)  # fmt: skip
                sweep = self.rows.sweep(rows_key, self.rates(), simulate)
            else:
                sweep = self._sweep
            knee = saturation_knee(sweep, "ttft_p99_s") if new_sweep else self._knee
        except BaseException:
            if planned is not None:
                wait([planned])  # nothing of this update runs on after it
            raise
        planned_now = planned.result() if planned is not None else self._plans[plan_key] if kept else self._plan
        if planned is not None:
            self._plans.put(plan_key, planned_now)
        # all or nothing: a part that raised leaves the last valid setting whole, and both parts to run again
        self._sweep, self._knee, self._plan, self._keys = sweep, knee, planned_now, (sweep_key, plan_key)
        self._stopped = outputs.share_over(int(self.max_new.value)) if isinstance(outputs, Lengths) else 0.0
        if new_plan:  # more than max_replicas: the next search starts from max_replicas, scaled
            self._plan_at = (rate, self.max_replicas if planned_now is None else planned_now.replicas, work)
        return new_sweep

    def _toggle_step_boxes(self) -> None:
        self.model_box.layout.display = "" if self.step_kind.value == "model" else "none"
        self.linear_box.layout.display = "none" if self.step_kind.value == "model" else ""

    def update(self) -> pd.DataFrame:
        """Simulate what the changes need (:meth:`_evaluate`), refresh the plots and numbers; return the sweep."""
        t0 = time.perf_counter()
        self._request.cancel()  # this update applies any change still waiting
        self.updates += 1
        self._toggle_step_boxes()
        with self.view.one_patch():  # the figures' changes leave last, as one message: the page draws them once
            try:
                new_sweep = self._evaluate()
            except (ValueError, KeyError, ZeroDivisionError) as exc:
                self._error = f"{type(exc).__name__}: {exc}"
            else:
                self._error = ""
                if new_sweep:
                    self.sources["sweep"].data = sweep_data(self._sweep)
                    self.sources["knee"].data = knee_data(self._knee)
                self.sources["rate"].data = marker_data(float(self.rate.value), "arrival rate")
                self.sources["slo"].data = slo_data(float(self.slo.value))
            self._computed_s = time.perf_counter() - t0
            self._show()
        self.update_s = time.perf_counter() - t0
        return self._sweep

    def _changed(self, change: dict) -> None:
        if isinstance(change.get("owner"), (w.IntSlider, w.FloatSlider, w.FloatLogSlider)):
            self._request()  # in a kernel: once for the changes that arrive together (a slider dragged)
        else:  # a choice (dropdown, toggles, box) comes alone: no wait for others
            self._request.soon()
