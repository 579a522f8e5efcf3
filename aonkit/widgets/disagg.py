"""``DisaggPanel``: colocated against disaggregated serving under sliders, and the GPUs each needs for two objectives.

The same model on the same GPUs served two ways: ``P + D`` colocated replicas doing chunked (or whole) prefill
and decode together (:func:`~aonkit.model.serving_sweep`), or ``P`` prefill replicas handing each request's KV
cache over a link to ``D`` decode replicas (:func:`~aonkit.model.disaggregated_sweep`, DistServe and Splitwise's
design). A change sweeps both over the rates :func:`~aonkit.model.serving_grid.sweep_rates` gives around the chosen
one (common random numbers: the same requests in both), and sizes both for the p99 TTFT and p99 TPOT objectives at
the chosen rate: the fewest colocated replicas meeting both (:func:`~aonkit.model.serving_analysis.fewest_meeting`),
and the fewest prefill, then decode replicas (:func:`~aonkit.model.pools_needed`), each search starting at its
last answer scaled by the rate and the engine's speed (two simulations colocated, three apart, when that is
right). The sweeps run on the caller's thread (their rates side by side), the two searches beside them on kept
threads; a change of an objective runs only the searches (the sweeps' rows keep each rate's TTFT and TPOT: the
requests within the new objectives are counted again), a change of a pool's size only the sweeps, and a change of
the rate simulates only the rates not seen since the other inputs last changed
(:class:`~aonkit.model.serving_grid.SweepRows`). Each deployment's goodput (:func:`~aonkit.model.goodput`: the
highest rate at which 90% of requests meet both objectives) is read from its sweep.

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
from ..model.llm import PRESETS, kv_cache_bytes
from ..model.serving import thread_pool
from ..model.serving_analysis import replicas_needed, sweep_rows
from ..model.serving_disagg import Pool, disaggregated_rows, pools_needed
from ..model.serving_grid import SweepRows, sweep_rates
from ..model.serving_spec import Speculation, speculative_memory
from ..model.serving_stats import attainment
from ..model.serving_steps import ModelStepTimes, request_seconds
from ..views.model_charts import pools_charts
from ..views.serving import marker_data, pools_data, slo_data
from ._bokehjs import TextWidget
from ._loop import Latest
from .charts import Charts
from .disagg_results import GOODPUT_TARGET, DisaggResults, Sizing
from .llm_controls import SPEC_OFF, chosen_draft, speculative_controls
from .serving_controls import SPEC_TIP, STYLE, WIDE, log_slider, slider, toggles
from .serving_engine import check_fits, engine_step_time, workload

SAME = "same"
"""The decode device and TP controls' value for the prefill replicas' own."""
TPS = (1, 2, 4, 8)
COALESCE_S = 0.005
"""In a kernel, a change is simulated this long after it arrives, with those that arrived meanwhile."""


class DisaggPanel(DisaggResults, TextWidget, w.VBox):
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
    n_requests, max_replicas, seed, live
        Requests per simulation, the most replicas a search tries (per pool), the seed, and whether sliders answer
        while dragged.

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
                 max_replicas: int = 64, seed: int = 0, live: bool = True) -> None:  # fmt: skip
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
        self.rows = (SweepRows(64), SweepRows(64))  # colocated and disaggregated rows kept per rate (64 rates)
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
    def engine(self) -> dict:
        """Step times, KV cache, batch and budget of the replicas, and the transfer: what the simulations take.

        ``step_time``, ``kv_tokens``, ``tp``: a prefill replica's; ``colocated_step_time``, ``colocated_kv_tokens``:
        a colocated one's; ``decode_step_time``, ``decode_kv_tokens``, ``decode_tp``: a decode replica's (its own
        device and TP, or the same); ``speculative``: the decoding replicas' draft (None: plain; its step times and
        memory are then in theirs). Raises ValueError for a precision a device lacks, or weights and one request
        (mean prompt plus max new tokens) that do not fit on one.
        """
        dtype, tokens = str(self.dtype.value), int(self.prompt.value) + int(self.max_new.value)
        device, tp = self.devices[self.device.value], int(self.tp.value)
        dec_device = device if self.decode_device.value == SAME else self.devices[self.decode_device.value]
        dec_tp = tp if self.decode_tp.value == SAME else int(self.decode_tp.value)
        spec = None if self.draft.value == SPEC_OFF else Speculation(int(self.draft_k.value),
                                                                    float(self.acceptance.value))  # fmt: skip
        draft = chosen_draft(self.draft.value, PRESETS)
        parts, cfg = [], PRESETS[self.model.value]
        for dev, n, s in ((device, tp, None), (device, tp, spec), (dec_device, dec_tp, spec)):
            step = engine_step_time(self._step_times, self.model.value, dev, n, dtype, s, draft)
            mem = speculative_memory(cfg, None if s is None else draft, dev, n, dtype)
            check_fits(mem, self.model.value, dev, n, TPS, dtype, tokens, int(self.max_batch.value),
                       "mean prompt + max new tokens")
            parts.append((step, mem))
        (step, mem), (colo_step, colo_mem), (dec_step, dec_mem) = parts
        # each GPU of a replica sends (receives) its shard of the target's cache over its own link: the larger
        # shard's time (a draft's cache is computed where it decodes, at no cost here)
        sent = max(mem.kv_bytes_per_token, kv_cache_bytes(cfg, 1, 1, dec_tp))
        return {"step_time": step, "kv_tokens": mem.kv_tokens, "tp": tp, "colocated_step_time": colo_step,
                "colocated_kv_tokens": colo_mem.kv_tokens, "decode_step_time": dec_step,
                "decode_kv_tokens": dec_mem.kv_tokens, "decode_tp": dec_tp, "max_batch": int(self.max_batch.value),
                "token_budget": int(self.token_budget.value), "speculative": spec,
                "transfer_s": (float(self.latency.value) / 1e3, sent / (float(self.link.value) * 1e9))}  # fmt: skip

    def pools(self, engine: dict, prefill: int, decode: int) -> tuple[Pool, Pool]:
        """The prefill and decode pools of ``prefill`` and ``decode`` replicas of ``engine``."""
        batch = engine["max_batch"]
        return (Pool(prefill, engine["step_time"], batch, engine["token_budget"], True, kv_tokens=engine["kv_tokens"]),
                Pool(decode, engine["decode_step_time"], batch, kv_tokens=engine["decode_kv_tokens"],
                     speculative=engine["speculative"]))

    def colocated_engine(self, engine: dict) -> dict:
        """Keyword arguments of :func:`~aonkit.model.simulate_serving` for the colocated replicas (not how many)."""
        return {"step_time": engine["colocated_step_time"], "kv_tokens": engine["colocated_kv_tokens"],
                "max_batch": engine["max_batch"], "token_budget": engine["token_budget"],
                "chunked_prefill": bool(self.chunked.value), "max_new_tokens": int(self.max_new.value),
                "speculative": engine["speculative"]}  # fmt: skip

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
        if size_key != self._keys[1]:  # the two searches beside the sweeps (the controls are read here)
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
        else:
            size = self._sizing
        # all or nothing: a part that raised leaves the last valid setting whole, and both parts to run again
        self._raw, self._colocated, self._apart, self._sizing = raw, colo, apart, size
        self._keys = (sweep_key, size_key)
        self._transfer_s = engine["transfer_s"][0] + engine["transfer_s"][1] * int(self.prompt.value)
        other = self.decode_device.value not in (SAME, self.device.value)
        self._gpus = (engine["tp"], engine["decode_tp"], self.decode_device.value if other else "")
        if searches:
            last = self._found
            self._found = (rate, work, *(v if v is not None else w for v, w in zip(
                (size.colocated, size.prefill, size.decode), last[2:] if last else (None,) * 3)))

    def _size_colocated(self, engine: dict, prompts: object, outputs: object, load: dict, rate: float,
                        slos: tuple[float, float], start: int) -> tuple[int | None, str]:  # fmt: skip
        """The fewest colocated replicas meeting both objectives at ``rate``.

        None when none found, with why no number can ("": the search reached ``max_replicas``).
        """
        try:
            plan = replicas_needed(rate, slos[0], prompts, outputs, also={"tpot_p99_s": slos[1]}, start=start,
                                   max_replicas=self.max_replicas, **load, **self.colocated_engine(engine))
        except ValueError as exc:
            return _not_met(exc)
        return plan.replicas, ""

    def _size_apart(self, engine: dict, prompts: object, outputs: object, load: dict, rate: float,
                    slos: tuple[float, float], start: tuple[int, int]) -> tuple[int | None, int | None, str]:
        """The fewest prefill, then decode replicas meeting the objectives at ``rate``.

        None when none found, with why no number can ("": the search reached ``max_replicas``).
        """
        prefill, decode = self.pools(engine, 1, 1)
        try:
            plan = pools_needed(rate, prompts, outputs, ttft_slo_s=slos[0], tpot_slo_s=slos[1], prefill=prefill,
                                decode=decode, n_requests=load["n_requests"], transfer_s=engine["transfer_s"],
                                arrival_cv=load["arrival_cv"], seed=load["seed"], max_replicas=self.max_replicas,
                                start=start, max_new_tokens=int(self.max_new.value))  # fmt: skip
        except ValueError as exc:
            count, why = _not_met(exc)
            return count, None, why
        return plan.prefill, plan.decode, ""

    def _guess(self, rate: float, work: tuple[float, float]) -> tuple[int, int, int]:
        """Where the searches start (colocated, prefill, decode).

        The last counts found, scaled by the rate and the engines' :func:`~aonkit.model.serving_steps.request_seconds`
        (the decode replicas' for the decode count; the sliders' pools where none was found yet): right, each search
        takes two simulations.
        """
        p, d = int(self.n_prefill.value), int(self.n_decode.value)
        found = self._found
        if found is None:
            return p + d, p, d

        def at(count: int | None, fallback: int, now: float, then: float) -> int:
            scale = rate / found[0] * (now / then if 0 < min(now, then) < math.inf else 1.0)
            return max(1, min(self.max_replicas, round(count * scale))) if count is not None else fallback

        (w, wd), (was, was_d) = work, found[1]
        return at(found[2], p + d, w, was), at(found[3], p, w, was), at(found[4], d, wd, was_d)

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

def _not_met(exc: ValueError) -> tuple[None, str]:
    """None, and why no number of replicas can meet the objectives ("": the search reached its most).

    Any other error is raised again.
    """
    text = str(exc)
    if "not met with" not in text:
        raise exc
    _, _, why = text.partition("not met with any number of replicas: ")
    return None, why


def with_attainment(rows: pd.DataFrame, slos: tuple[float, float], before: str) -> pd.DataFrame:
    """``rows`` (kept with their ``latencies``) with ``slo_attainment`` for ``slos`` in place of them.

    The column goes where a sweep made with ``slos`` has it: before ``before``, the first column past the summary.
    """
    out = rows.drop(columns="latencies")
    out.insert(out.columns.get_loc(before), "slo_attainment", [attainment(t, p, slos) for t, p in rows["latencies"]])
    return out
