"""``DisaggPanel``: colocated against disaggregated serving under sliders, and the GPUs each needs for two objectives.

The same model on the same GPUs served two ways: ``P + D`` colocated replicas doing chunked (or whole) prefill
and decode together (:func:`~aonkit.model.serving_sweep`), or ``P`` prefill replicas handing each request's KV
cache over a link to ``D`` decode replicas (:func:`~aonkit.model.disaggregated_sweep`, DistServe and Splitwise's
design). A change sweeps both over the rates :func:`~aonkit.model.serving_grid.sweep_rates` gives around the chosen
one (common random numbers: the same requests in both), and sizes both for the p99 TTFT and p99 TPOT objectives at
the chosen rate: the fewest colocated replicas meeting both (:func:`~aonkit.model.serving_analysis.fewest_meeting`),
and the fewest prefill, then decode replicas (:func:`~aonkit.model.pools_needed`), each search starting at its
last answer scaled by the rate and the engine's speed (two simulations colocated, three apart, when that is
right; :mod:`aonkit.widgets.disagg_engine`). The sweeps run on the caller's thread (their rates side by side), the
two searches beside them on kept threads; a change of an objective runs only the searches (the sweeps' rows keep
each rate's TTFT and TPOT: the requests within the new objectives are counted again), a change of a pool's size
only the sweeps, and a change of the rate simulates only the rates not seen with the other inputs as they are
(:class:`~aonkit.model.serving_grid.SweepRows`, which keeps the last 8 settings; the searches' answers are kept
for the last 8 too, :class:`~aonkit.model.serving_grid.Kept`: going back to a setting simulates nothing). Each
deployment's goodput (:func:`~aonkit.model.goodput`: the highest rate at which 90% of requests meet both
objectives) is read from its sweep.

Step times are the analytic model's (:func:`~aonkit.model.serving_steps.model_step_time` of a preset on a device
with tensor parallelism, at a precision), every replica of either kind one such engine; the KV cache of each is
what the weights leave (:func:`~aonkit.model.serving_steps.serving_memory`), reserving a request's prompt plus
``max_new_tokens``. The transfer takes the link's latency plus the prompt's KV cache on one GPU over the link's
bandwidth per GPU (each GPU of a tensor-parallel replica sends its own shard, as on a node with a NIC per GPU).
The prefill pool always chunks prompts longer than the token budget. With a speculative draft the replicas that
decode (colocated ones and the decode pool) run iterations (:mod:`aonkit.model.serving_spec`).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import wait

import ipywidgets as w
import pandas as pd

from ..model.hardware import devices
from ..model.llm import PRESETS
from ..model.serving import thread_pool
from ..model.serving_analysis import sweep_rows
from ..model.serving_disagg import disaggregated_rows
from ..model.serving_grid import Kept, SweepRows, sweep_rates
from ..model.serving_stats import attainment
from ..model.serving_steps import ModelStepTimes, request_seconds
from ..views.model_charts import pools_charts
from ..views.serving import marker_data, pools_data, slo_data
from ._bokehjs import TextWidget
from ._loop import Latest
from .charts import Charts
from .disagg_engine import SAME, TPS, DisaggEngine
from .disagg_results import GOODPUT_TARGET, DisaggResults, Sizing
from .llm_controls import SPEC_OFF, speculative_controls
from .serving_controls import SPEC_TIP, STYLE, WIDE, log_slider, slider, toggles
from .serving_engine import workload

COALESCE_S = 0.005
"""In a kernel, a change is simulated this long after it arrives, with those that arrived meanwhile."""


class DisaggPanel(DisaggEngine, DisaggResults, TextWidget, w.VBox):
    """Colocated vs disaggregated serving of one model on one kind of GPU: latency against rate, GPUs needed.

    Parameters
    ----------
    rate_per_s : float
        The chosen arrival rate (requests/s): the sweeps span an eighth to twice it, the sizing is at it.
    cv : float
        Coefficient of variation of the inter-arrival times (1: Poisson).
    prompt_tokens, output_tokens, lengths, max_new_tokens
        Mean lengths, ``"random"`` (lognormal prompts of CV 1, geometric outputs stopped at ``max_new_tokens``) or
        ``"fixed"``; ``max_new_tokens`` (default eight times the output, at least 1,024, at most 16,384) is what a
        reserving cache holds for a request's output.
    ttft_slo_s, tpot_slo_s : float
        The objectives: p99 time to first token and p99 time per output token, in seconds.
    prefill_replicas, decode_replicas : int
        The disaggregated pools; the colocated deployment has as many replicas as both together.
    token_budget : int
        Prompt tokens a prefill step takes (the prefill pool's, and the colocated engine's step budget).
    max_batch : int
        Sequences a replica runs at once (decode and colocated replicas; the prefill pool's batch too).
    chunked_prefill : bool
        The colocated engine mixes prompt chunks into decode steps (vLLM's default) or runs whole prompts.
    link_gb_s, link_latency_ms : float
        The KV cache's link: GB/s per GPU (50: 400 Gb/s InfiniBand; 450: NVLink 4 within a node) and latency.
    model, device, tp, dtype : str, int
        Preset, device (:func:`aonkit.model.hardware.devices`), tensor-parallel size and precision of every replica.
    decode_device, decode_tp : str, int, optional
        The decode replicas' own device and TP (Splitwise's point: generation on other GPUs than prompts); default
        the same as the others. The colocated replicas are the prefill replicas' kind.
    draft, draft_tokens, acceptance : str, int, float
        Speculative decoding in the replicas that decode (colocated and decode pool; :mod:`aonkit.model.serving_spec`):
        ``"off"`` (default), ``"no-cost draft"`` or a preset as the draft, the tokens it drafts a step and the
        probability each is accepted; the draft's weights and cache take memory where it decodes, and its cache of
        a prompt is computed there at no cost (the transfer sends the target's).
    n_requests, max_replicas, seed, keep_settings, live
        Requests per simulation, the most replicas a search tries (per pool), the seed, the settings whose sweep
        rows and sizing are kept (going back to one simulates nothing), and whether sliders answer while dragged.

    Attributes
    ----------
    colocated, apart : DataFrame
        The last sweeps: :func:`~aonkit.model.serving_sweep` rows and :func:`~aonkit.model.disaggregated_sweep`.
    sizing : Sizing
        GPUs each way for both objectives at the chosen rate.
    view : Charts
        p99 TTFT, p99 TPOT and busy shares against rate (:func:`aonkit.views.model_charts.pools_charts`).
    error : str
        Why the last change could not be simulated ("" when it could); the last valid answer stays.
    update_s : float
        Wall time of the last :meth:`update`.
    rows : tuple of 2 SweepRows
        The colocated and disaggregated sweeps' rows kept per rate (``.simulated``: rates simulated so far).
    """

    def __init__(self, rate_per_s: float = 4.0, *, cv: float = 1.0, prompt_tokens: int = 4096,
                 output_tokens: int = 256, lengths: str = "random", max_new_tokens: int | None = None,
                 ttft_slo_s: float = 1.0, tpot_slo_s: float = 0.025, prefill_replicas: int = 1,
                 decode_replicas: int = 2, token_budget: int = 8192, max_batch: int = 128,
                 chunked_prefill: bool = True, link_gb_s: float = 50.0, link_latency_ms: float = 1.0,
                 model: str = "Llama-3 8B", device: str = "H100 SXM", tp: int = 1, dtype: str = "bf16",
                 decode_device: str | None = None, decode_tp: int | None = None, draft: str = SPEC_OFF,
                 draft_tokens: int = 4, acceptance: float = 0.7, n_requests: int = 10_000,
                 max_replicas: int = 64, seed: int = 0, keep_settings: int = 8,
                 live: bool = True) -> None:  # fmt: skip
        self.n_requests, self.max_replicas, self.seed = int(n_requests), int(max_replicas), seed
        self.devices = {d.name: d for d in devices()}
        if max_new_tokens is None:
            max_new_tokens = min(16384, max(1024, 8 * int(output_tokens)))
        self.rate = log_slider("arrival rate (/s)", rate_per_s, -1, 3, live)
        self.cv = slider(w.FloatSlider, "arrival CV", cv, 0.0, 4.0, 0.1, live)
        self.prompt = slider(w.IntSlider, "prompt tokens", prompt_tokens, 1, 32768, 1, live)
        self.output = slider(w.IntSlider, "output tokens", output_tokens, 1, 4096, 1, live)
        self.max_new = slider(w.IntSlider, "max new tokens", max_new_tokens, 1, 16384, 1, live)
        self.lengths = toggles("lengths", ["fixed", "random"], lengths)
        self.ttft_slo = log_slider("p99 TTFT SLO (s)", ttft_slo_s, -2.5, 1.5, live)
        self.tpot_slo = log_slider("p99 TPOT SLO (s)", tpot_slo_s, -3, 0, live)
        self.n_prefill = slider(w.IntSlider, "prefill replicas", prefill_replicas, 1, 32, 1, live)
        self.n_decode = slider(w.IntSlider, "decode replicas", decode_replicas, 1, 32, 1, live)
        self.token_budget = slider(w.IntSlider, "token budget", token_budget, 64, 32768, 64, live)
        self.max_batch = slider(w.IntSlider, "max batch", max_batch, 1, 512, 1, live)
        self.chunked = w.Checkbox(value=chunked_prefill, description="colocated chunked prefill", indent=False)
        self.link = log_slider("link GB/s per GPU", link_gb_s, 0, 3, live)
        self.latency = slider(w.FloatSlider, "link latency (ms)", link_latency_ms, 0.0, 20.0, 0.1, live)
        self.model = w.Dropdown(options=list(PRESETS), value=model, description="model", style=STYLE, layout=WIDE)
        self.device = w.Dropdown(options=list(self.devices), value=device, description="device", style=STYLE,
                                 layout=WIDE)  # fmt: skip
        self.tp = w.Dropdown(options=list(TPS), value=tp, description="TP", style=STYLE, layout=WIDE)
        self.dtype = toggles("precision", ["bf16", "fp16", "fp8"], dtype, (), "60px")
        self.decode_device = w.Dropdown(options=[SAME, *self.devices], value=decode_device or SAME,
                                        description="decode device", style=STYLE, layout=WIDE)  # fmt: skip
        self.decode_tp = w.Dropdown(options=[SAME, 1, 2, 4, 8], value=SAME if decode_tp is None else decode_tp,
                                    description="decode TP", style=STYLE, layout=WIDE)  # fmt: skip
        self.draft, self.draft_k, self.acceptance = speculative_controls(
            list(PRESETS), draft, draft_tokens, acceptance, live=live, style=STYLE, layout=WIDE, tooltip=SPEC_TIP)
        self._controls = (self.rate, self.cv, self.prompt, self.output, self.max_new, self.lengths, self.ttft_slo,
                          self.tpot_slo, self.n_prefill, self.n_decode, self.token_budget, self.max_batch,
                          self.chunked, self.link, self.latency, self.model, self.device, self.tp, self.dtype,
                          self.decode_device, self.decode_tp, self.draft, self.draft_k, self.acceptance)  # fmt: skip
        self._step_times = ModelStepTimes()
        self.rows = (SweepRows(64, keep_settings), SweepRows(64, keep_settings))  # colocated and apart, per rate
        self._sizes = Kept(keep_settings)  # the searches' Sizing per setting
        self._keys: tuple[tuple | None, tuple | None] = (None, None)
        self._found: tuple | None = None  # rate, the engines' work, the last counts found (colocated, prefill, decode)
        self._error, self.update_s, self._computed_s, self.updates = "", math.nan, math.nan, 0
        self._request = Latest(self.update, COALESCE_S)
        self._evaluate()
        self.view = Charts(pools_charts(), self._sources(), columns=2)
        self.sources = self.view.sources
        self.summary = w.HTML()
        self._show()
        for c in self._controls:
            c.observe(self._changed, names="value")
        load = w.VBox([w.HTML("<b>load</b>"), self.rate, self.cv, self.prompt, self.output, self.max_new,
                       self.lengths, self.ttft_slo, self.tpot_slo])  # fmt: skip
        pools = w.VBox([w.HTML("<b>deployment</b>"), self.n_prefill, self.n_decode, self.token_budget,
                        self.max_batch, self.chunked, self.link, self.latency])  # fmt: skip
        engine = w.VBox([w.HTML("<b>engine</b>"), self.model, self.device, self.tp, self.dtype, self.decode_device,
                         self.decode_tp, self.draft, self.draft_k, self.acceptance])  # fmt: skip
        super().__init__([w.HBox([load, pools, engine]), self.summary, self.view])

    # ---- inputs ----------------------------------------------------------------------------------------------
    # ---- evaluation ------------------------------------------------------------------------------------------
    def _inputs(self) -> tuple[tuple, tuple]:
        """Keys of what the sweeps and the sizing depend on: every control but the objectives, and but the pools.

        (The sweeps' rows keep each rate's TTFT and TPOT: a new objective recounts the requests within it.)
        """
        values = {c: c.value for c in self._controls}
        sweep = tuple(v for c, v in values.items() if c not in (self.ttft_slo, self.tpot_slo))
        size = tuple(v for c, v in values.items() if c not in (self.n_prefill, self.n_decode))
        return (*sweep, self.n_requests, self.seed), (*size, self.n_requests, self.seed, self.max_replicas)

    def _evaluate(self) -> None:
        sweep_key, size_key = self._inputs()
        engine = self.engine()
        prompts, outputs = workload(str(self.lengths.value), int(self.prompt.value), int(self.output.value),
                                    int(self.max_new.value))  # fmt: skip
        load = {"n_requests": self.n_requests, "arrival_cv": float(self.cv.value), "seed": self.seed}
        rate, p, d = float(self.rate.value), int(self.n_prefill.value), int(self.n_decode.value)
        per_step = 1.0 if engine["speculative"] is None else engine["speculative"].tokens_per_iteration
        work = tuple(request_seconds(engine[k], int(self.prompt.value), int(self.output.value) / per_step,
                                     min(engine["max_batch"], 16)) for k in ("colocated_step_time", "decode_step_time"))
        searches = []
        resize = size_key != self._keys[1]
        if resize and size_key not in self._sizes:  # the two searches beside the sweeps (the controls are read here)
            slos = (float(self.ttft_slo.value), float(self.tpot_slo.value))
            guess = self._guess(rate, work)
            pool = thread_pool(2, "sizing")  # (not the sweeps' pool: they would wait for the searches)
            searches = [pool.submit(self._size_colocated, engine, prompts, outputs, load, rate, slos, guess[0]),
                        pool.submit(self._size_apart, engine, prompts, outputs, load, rate, slos, guess[1:])]
        try:
            if sweep_key != self._keys[0]:  # kept rows for the rates seen with these other inputs, the rest run
                key = (*(c.value for c in self._controls if c not in (self.rate, self.ttft_slo, self.tpot_slo)),
                       self.n_requests, self.seed)  # fmt: skip
                rates, prefill, decode = sweep_rates(rate), *self.pools(engine, p, d)
                raw = (self.rows[0].sweep(key, rates, lambda r: sweep_rows(
                    r, prompts, outputs, replicas=p + d, keep_latencies=True, **load, **self.colocated_engine(engine))),
                       self.rows[1].sweep(key, rates, lambda r: disaggregated_rows(
                           r, prompts, outputs, prefill=prefill, decode=decode, transfer_s=engine["transfer_s"],
                           keep_latencies=True, max_new_tokens=int(self.max_new.value), **load)))  # fmt: skip
            else:
                raw = self._raw
        finally:
            wait(searches)  # nothing of this update runs on after it
        slos = (float(self.ttft_slo.value), float(self.tpot_slo.value))
        colo, apart = (with_attainment(f, slos, before) for f, before in zip(raw, ("busy_fraction",
                                                                                   "prefill_busy_fraction")))
        if searches:
            (c, why_c), (p_need, d_need, why_a) = searches[0].result(), searches[1].result()
            size = Sizing(c, p_need, d_need, why_c, why_a)
            self._sizes.put(size_key, size)
        else:  # a setting sized a moment ago: its answer as it was
            size = self._sizes[size_key] if resize else self._sizing
        # all or nothing: a part that raised leaves the last valid setting whole, and both parts to run again
        self._raw, self._colocated, self._apart, self._sizing = raw, colo, apart, size
        self._keys = (sweep_key, size_key)
        self._transfer_s = engine["transfer_s"][0] + engine["transfer_s"][1] * int(self.prompt.value)
        other = self.decode_device.value not in (SAME, self.device.value)
        self._gpus = (engine["tp"], engine["decode_tp"], self.decode_device.value if other else "")
        if resize:
            last = self._found
            self._found = (rate, work, *(v if v is not None else w for v, w in zip(
                (size.colocated, size.prefill, size.decode), last[2:] if last else (None,) * 3)))

    def _sources(self) -> dict[str, dict]:
        return {"pools": pools_data(self._colocated, self._apart),
                "rate": marker_data(float(self.rate.value), "arrival rate"),
                "ttft_slo": slo_data(float(self.ttft_slo.value), "p99 TTFT"),
                "tpot_slo": slo_data(float(self.tpot_slo.value), "p99 TPOT"),
                "target": {"share": [GOODPUT_TARGET]}}  # fmt: skip

    def update(self) -> None:
        """Simulate what the changes need and refresh the charts and the summary."""
        t0 = time.perf_counter()
        self._request.cancel()
        self.updates += 1
        with self.view.one_patch():
            try:
                self._evaluate()
            except (ValueError, KeyError, ZeroDivisionError) as exc:
                self._error = f"{type(exc).__name__}: {exc}"
            else:
                self._error = ""
                for name, data in self._sources().items():
                    self.sources[name].data = data
            self._computed_s = time.perf_counter() - t0
            self._show()
        self.update_s = time.perf_counter() - t0

    def _changed(self, change: dict) -> None:
        if isinstance(change.get("owner"), (w.IntSlider, w.FloatSlider, w.FloatLogSlider)):
            self._request()
        else:
            self._request.soon()

def with_attainment(rows: pd.DataFrame, slos: tuple[float, float], before: str) -> pd.DataFrame:
    """``rows`` (kept with their ``latencies``) with ``slo_attainment`` for ``slos`` in place of them.

    The column goes where a sweep made with ``slos`` has it: before ``before``, the first column past the summary.
    """
    out = rows.drop(columns="latencies")
    out.insert(out.columns.get_loc(before), "slo_attainment", [attainment(t, p, slos) for t, p in rows["latencies"]])
    return out
