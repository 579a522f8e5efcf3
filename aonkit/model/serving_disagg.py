"""Disaggregated serving: prompts on prefill replicas, generation on decode replicas, the KV cache sent between.

DistServe (Zhong et al., OSDI 2024) and Splitwise (Patel et al., ISCA 2024), and the engines that followed them
(NVIDIA Dynamo; vLLM's and SGLang's prefill/decode disaggregation), run each request's prefill on one pool of
replicas and its decode on another, moving its KV cache between them: a long prompt then never stalls other
requests' decode steps, and each pool is sized for its own phase. :func:`simulate_disaggregated` runs that as two
continuous-batching simulations (:func:`~aonkit.model.serving.simulate_serving`), one after the other:

1. the prefill pool serves each request as a one-token request: its first token comes at the end of the step that
   completes its prompt (prompts batched up to the pool's token budget, whole or in chunks);
2. its KV cache reaches the decode pool ``transfer_s`` later (a latency plus seconds per prompt token: the cache's
   bytes over the link), where the request is queued, routed and admitted as in any simulation (the pool's KV
   cache reserving its prompt plus output, or ``max_new_tokens``). Its context enters with the replica's next step
   at no cost of its own (the pool's prefill time is zero: chunked, with no token budget; a replica with nothing
   to decode then takes one step of its overhead alone), and it generates its other tokens there.

A request whose prompt plus output (or ``max_new_tokens``) exceeds the decode pool's ``kv_tokens`` is refused at
arrival, as the prefill pool's is when its prompt and first token exceed that pool's. Not modelled: back-pressure
(a prefill replica here never waits for the decode pool to take a cache), contention on the transfer link, and a
paged cache (its preemptions would be recomputed in the decode pool at no cost: the pools reserve).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from .serving import ROUTINGS, ServingResult, prepare, request_table, run_result, simulate_serving
from .serving_analysis import fewest_meeting
from .serving_floor import beyond_floor
from .serving_inputs import ArrivalProcess, Lengths, StepTime
from .serving_pools import alone_pools, pool_engine, prepare_pools, rerun_pools, summarize_pools
from .serving_spec import Speculation, with_iterations
from .serving_stats import serving_summary

__all__ = ["Pool", "PoolPlan", "disaggregated_rows", "disaggregated_sweep", "pools_needed", "simulate_disaggregated"]


@dataclass(frozen=True)
class Pool:
    """One pool of replicas of a disaggregated deployment (:func:`simulate_disaggregated`).

    Parameters
    ----------
    replicas : int
        Engines in the pool.
    step_time : StepTime
        Their step times: a prefill pool uses the prefill part, a decode pool the decode part and ``overhead_s``.
    max_batch : int
        Sequences one engine runs at once.
    token_budget : int, optional
        Prompt tokens a prefill step may take (as :func:`~aonkit.model.simulate_serving`'s); not used by a decode
        pool.
    chunked_prefill : bool
        Prompts in chunks of the budget (a prefill pool); not used by a decode pool.
    routing : {"jsq", "round_robin", "central"}
        How requests reach the pool's replicas.
    kv_tokens : int, optional
        Tokens of KV cache per engine (unlimited when None), reserved per request as
        :func:`~aonkit.model.simulate_serving` reserves them.
    speculative : Speculation, optional
        A decode pool that decodes speculatively (:mod:`aonkit.model.serving_spec`; its ``step_time``'s decode
        part an iteration's). Each request's iterations are drawn once, after the arrivals and lengths, for the
        pool it reaches. Not for a prefill pool.
    """

    replicas: int = 1
    step_time: StepTime = StepTime()
    max_batch: int = 1
    token_budget: int | None = None
    chunked_prefill: bool = False
    routing: str = "jsq"
    kv_tokens: int | None = None
    speculative: Speculation | None = None

    def __post_init__(self) -> None:
        for name in ("replicas", "max_batch", *(("kv_tokens",) if self.kv_tokens is not None else ())):
            v = getattr(self, name)
            if not (isinstance(v, (int, np.integer)) and v >= 1):
                raise ValueError(f"Pool {name} must be a positive integer, got {v!r}")
        if not isinstance(self.step_time, StepTime):
            raise ValueError(f"Pool step_time must be a StepTime, got {type(self.step_time).__name__}")
        if self.routing not in ROUTINGS:
            raise ValueError(f"Pool routing must be one of {ROUTINGS}, got {self.routing!r}")
        if self.speculative is not None and not isinstance(self.speculative, Speculation):
            raise ValueError(f"Pool speculative must be a Speculation, got {self.speculative!r}")


def simulate_disaggregated(arrivals: ArrivalProcess | object, prompt_tokens: int | Lengths | object,
                           output_tokens: int | Lengths | object, *, prefill: Pool, decode: Pool,
                           transfer_s: tuple[float, float] = (0.0, 0.0), n_requests: int | None = None,
                           max_new_tokens: int | None = None, seed: int | None = None,
                           warmup: float = 0.0) -> ServingResult:  # fmt: skip
    """Simulate requests served by a prefill pool and a decode pool, their KV caches sent from one to the other.

    Parameters
    ----------
    arrivals, prompt_tokens, output_tokens, n_requests, max_new_tokens, seed, warmup
        As for :func:`~aonkit.model.simulate_serving` (the same draws for the same seed).
    prefill, decode : Pool
        The two pools.
    transfer_s : tuple of 2 floats
        ``(latency, per_token)``: a request's KV cache reaches the decode pool ``latency + per_token * prompt``
        seconds after its first token (both at least 0; e.g. ``kv_cache_bytes`` per token over the link's bytes/s).

    Returns
    -------
    ServingResult
        ``requests`` as :func:`~aonkit.model.simulate_serving` gives them (``replica``, ``start_s`` and
        ``queue_s`` of the prefill pool; ``finish_s`` of the decode pool; ``tpot_s`` from the first token, so it
        counts the transfer and the wait for the decode pool), plus ``decode_replica``, ``kv_ready_s`` (the cache
        in the decode pool) and ``decode_start_s`` (admitted there); ``replicas``: the prefill pool's rows, then the
        decode pool's, with a ``pool`` column; ``summary`` of the requests.

    Raises
    ------
    ValueError
        As :func:`~aonkit.model.simulate_serving` raises it for either pool, and for a transfer time that is
        negative or not finite.
    """
    lat, per_token = _check(transfer_s, prefill, decode)
    drawn = prepare(arrivals, prompt_tokens, output_tokens, step_time=StepTime(), n_requests=n_requests, seed=seed,
                    max_new_tokens=max_new_tokens, warmup=warmup, speculative=decode.speculative)  # (draws, checks)
    arr, prompt, output = drawn.arrivals, drawn.prompt, drawn.output
    limit = output if max_new_tokens is None else np.full(output.size, int(max_new_tokens))
    kv = np.inf if decode.kv_tokens is None else decode.kv_tokens
    fits = prompt + limit <= kv  # the decode pool could never hold the others: refused at arrival
    first = np.full(arr.size, np.nan)
    start, rep = first.copy(), np.full(arr.size, -1, np.int64)
    pre = _pool(prefill, arr[fits], prompt[fits], 1, None, decode=False)
    first[fits] = pre.requests["first_token_s"].to_numpy()
    start[fits] = pre.requests["start_s"].to_numpy()
    rep[fits] = pre.requests["replica"].to_numpy()
    ready = first + lat + per_token * prompt
    fin, dstart, drep = first.copy(), np.full(arr.size, np.nan), np.full(arr.size, -1, np.int64)
    go = ~np.isnan(first) & (output > 1)  # (one output token: done at the prefill pool)
    fin[go] = np.nan
    steps = None if drawn.steps is None else drawn.steps[go] - 1  # (each request's iterations: drawn above)
    dec = _pool(decode, ready[go], prompt[go], output[go], max_new_tokens, decode=True, iterations=steps)
    fin[go], dstart[go] = dec.requests["finish_s"].to_numpy(), dec.requests["start_s"].to_numpy()
    drep[go] = dec.requests["replica"].to_numpy()
    requests = request_table(arr, prompt, output, rep, start, first, fin, np.zeros(arr.size, np.int64)).assign(
        decode_replica=drep, kv_ready_s=np.where(go, ready, np.nan), decode_start_s=dstart)
    replicas = pd.concat([pre.replicas.assign(pool="prefill"), dec.replicas.assign(pool="decode")],
                         ignore_index=True)  # fmt: skip
    return ServingResult(requests, replicas, serving_summary(requests, warmup))


def disaggregated_sweep(rates_per_s: object, prompt_tokens: int | Lengths | object,
                        output_tokens: int | Lengths | object, *, n_requests: int, prefill: Pool, decode: Pool,
                        transfer_s: tuple[float, float] = (0.0, 0.0), arrival_cv: float = 1.0, seed: int = 0,
                        warmup: float = 0.1, threads: int | None = None, slos: tuple[float, float] | None = None,
                        max_new_tokens: int | None = None) -> pd.DataFrame:  # fmt: skip
    """:func:`simulate_disaggregated` at each rate: one summary row per rate, as :func:`~aonkit.model.serving_sweep`.

    The same seed at every rate (common random numbers); the rates run side by side on ``threads`` (default: one
    per rate, at most the CPU count and 8; the rows do not depend on it). Columns: ``arrival_rate_per_s``, the
    summary keys, and ``prefill_busy_fraction`` and ``decode_busy_fraction`` (each pool's mean), so that
    :func:`~aonkit.model.saturation_knee` reads it as it reads a sweep (with ``slos``, ``slo_attainment`` too, for
    :func:`~aonkit.model.goodput`). The requests are drawn and both pools' step times tabulated once
    (:mod:`.serving_pools`), and no table is built per rate: 8 rates of 20,000 requests took 48-61 ms on 2 CPUs,
    against 144-241 ms for a table per rate (``bench/RESULTS.md``, session 53). ``max_new_tokens``: as for
    :func:`simulate_disaggregated` (what the decode pool's cache reserves for a request's output; None: its own).
    """
    return pd.DataFrame(disaggregated_rows(rates_per_s, prompt_tokens, output_tokens, n_requests=n_requests,
                                           prefill=prefill, decode=decode, transfer_s=transfer_s,
                                           arrival_cv=arrival_cv, seed=seed, warmup=warmup, threads=threads,
                                           slos=slos, max_new_tokens=max_new_tokens))  # fmt: skip


def disaggregated_rows(rates_per_s: object, prompt_tokens: int | Lengths | object,
                       output_tokens: int | Lengths | object, *, n_requests: int, prefill: Pool, decode: Pool,
                       transfer_s: tuple[float, float] = (0.0, 0.0), arrival_cv: float = 1.0, seed: int = 0,
                       warmup: float = 0.1, threads: int | None = None, slos: tuple[float, float] | None = None,
                       keep_latencies: bool = False, max_new_tokens: int | None = None) -> list[dict]:  # fmt: skip
    """:func:`disaggregated_sweep`'s rows as dicts, one per rate in order (no table made: a caller that keeps rows).

    ``keep_latencies``: each row also holds the measured requests' TTFT and TPOT arrays
    (:func:`~aonkit.model.serving_pools.summarize_pools`).
    """
    rates = [float(r) for r in np.atleast_1d(np.asarray(rates_per_s, dtype=np.float64))]
    if not rates:
        raise ValueError("rates_per_s is empty: give at least one arrival rate")
    _check(transfer_s, prefill, decode)
    base = prepare_pools(ArrivalProcess(rates[0], arrival_cv), prompt_tokens, output_tokens, prefill=prefill,
                         decode=decode, transfer_s=transfer_s, n_requests=n_requests, seed=seed, warmup=warmup,
                         max_new_tokens=max_new_tokens)  # fmt: skip
    # the same lengths and tables at every rate, and the same draws for the arrival times, scaled to each rate
    draws = ArrivalProcess(rates[0], arrival_cv).draws(int(n_requests), np.random.default_rng(seed))
    runs = [base, *(rerun_pools(base, arrivals=ArrivalProcess(r, arrival_cv).from_draws(draws, int(n_requests)))
                    for r in rates[1:])]  # fmt: skip
    rows = summarize_pools(runs, threads, slos, keep_latencies)
    return [{"arrival_rate_per_s": r, **row} for r, row in zip(rates, rows)]


class PoolPlan(NamedTuple):
    """What :func:`pools_needed` returns: the replicas of each pool, and every simulation tried (one row each)."""

    prefill: int
    decode: int
    tried: pd.DataFrame


def pools_needed(rate_per_s: float, prompt_tokens: int | Lengths | object, output_tokens: int | Lengths | object, *,
                 ttft_slo_s: float, tpot_slo_s: float, prefill: Pool, decode: Pool, n_requests: int,
                 transfer_s: tuple[float, float] = (0.0, 0.0), arrival_cv: float = 1.0, seed: int = 0,
                 warmup: float = 0.1, max_replicas: int = 256, ttft_metric: str = "ttft_p99_s",
                 tpot_metric: str = "tpot_p99_s", start: tuple[int, int] = (1, 1),
                 max_new_tokens: int | None = None) -> PoolPlan:  # fmt: skip
    """Fewest prefill replicas for the TTFT objective, then fewest decode replicas for the TPOT one, at a rate.

    A request's first token depends on the prefill pool alone, so that pool is sized first (its replica count as
    given in ``prefill`` is not used, nor ``decode``'s: the search tries its own); then, with it, the decode pool,
    whose TPOT includes the transfer and the wait for a decode replica. Each search starts at its ``start`` count
    and goes up or down by 1, 2, 4... replicas until one count meets its objective and one fails, then bisects
    (:func:`~aonkit.model.serving_analysis.fewest_meeting`; the prefill search runs with ``start[1]`` decode
    replicas, which its TTFT does not depend on). The metrics do not grow with more replicas, up to sampling
    noise, which the common random numbers of one ``seed`` keep small: the answer does not depend on ``start``,
    only the work does (a good guess, such as the answer at a nearby setting, takes three simulations: it, and one
    fewer in each pool).

    Parameters
    ----------
    rate_per_s, arrival_cv, prompt_tokens, output_tokens, n_requests, seed, warmup
        The load, as for :func:`~aonkit.model.replicas_needed`.
    ttft_slo_s, tpot_slo_s : float
        The objectives: the largest acceptable ``ttft_metric`` and ``tpot_metric``, in seconds.
    prefill, decode, transfer_s
        As for :func:`simulate_disaggregated`.
    max_replicas : int
        The most replicas tried in either pool.
    ttft_metric, tpot_metric : str
        Summary keys compared with the objectives.
    start : tuple of 2 int, default (1, 1)
        The prefill and decode counts tried first (each clipped to ``[1, max_replicas]``).
    max_new_tokens : int, optional
        As for :func:`simulate_disaggregated`.

    Returns
    -------
    PoolPlan
        ``prefill`` and ``decode`` replica counts, and ``tried``: one row per simulation (``prefill_replicas``,
        ``decode_replicas``, the summary keys, each pool's busy fraction).

    Raises
    ------
    ValueError
        When ``max_replicas`` replicas of a pool do not meet its objective ("not met with"), or no number can (a
        count fails, and the requests each served alone miss it too: "not met with any number of replicas", one
        simulation more; :mod:`~aonkit.model.serving_floor`), or as :func:`simulate_disaggregated` raises it.
    """
    rows: dict[tuple[int, int], dict] = {}
    _check(transfer_s, prefill, decode)
    p0, d0 = (min(max(int(c), 1), max_replicas) for c in start)
    base = prepare_pools(ArrivalProcess(rate_per_s, arrival_cv), prompt_tokens, output_tokens, prefill=prefill,
                         decode=decode, transfer_s=transfer_s, n_requests=n_requests, seed=seed, warmup=warmup,
                         max_new_tokens=max_new_tokens)  # fmt: skip

    def run(p: int, d: int) -> dict:
        if (p, d) not in rows:  # (the decode search starts where the prefill search ended)
            row = summarize_pools([rerun_pools(base, prefill=p, decode=d)])[0]
            rows[p, d] = {"prefill_replicas": p, "decode_replicas": d, **row}
        return rows[p, d]

    floor: list = []
    met: set[str] = set()

    def meets(metric: str, slo: float, ok: list[bool]) -> list[bool]:
        if any(ok):
            met.add(metric)
        elif metric not in met:  # only failures so far: if every request alone fails too, no count can meet it
            if not floor:
                floor.append(alone_pools(base))
            why = beyond_floor(floor[0], metric, slo)
            if why:
                raise ValueError(f"{metric} <= {slo} s not met with any number of replicas: {why}")
        return ok

    p = fewest_meeting(lambda ns: meets(ttft_metric, ttft_slo_s, [run(n, d0)[ttft_metric] <= ttft_slo_s for n in ns]),
                       p0, max_replicas, f"{ttft_metric} <= {ttft_slo_s} s")  # fmt: skip
    d = fewest_meeting(lambda ns: meets(tpot_metric, tpot_slo_s, [run(p, n)[tpot_metric] <= tpot_slo_s for n in ns]),
                       d0, max_replicas, f"{tpot_metric} <= {tpot_slo_s} s")  # fmt: skip
    return PoolPlan(p, d, pd.DataFrame(list(rows.values())))


def _check(transfer_s: object, prefill: object, decode: object) -> tuple[float, float]:
    """``transfer_s`` as two floats, once it and the pools are checked (ValueError naming what is wrong)."""
    try:
        lat, per_token = (float(x) for x in transfer_s)
        ok = np.isfinite(lat) and np.isfinite(per_token) and lat >= 0 and per_token >= 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"transfer_s must be (latency, seconds per token), both finite and >= 0, got {transfer_s!r}")
    for name, pool in (("prefill", prefill), ("decode", decode)):
        if not isinstance(pool, Pool):
            raise ValueError(f"{name} must be a Pool, got {type(pool).__name__}")
    if prefill.speculative is not None:
        raise ValueError("a prefill pool does not decode: give speculative to the decode pool")
    return lat, per_token


def _pool(pool: Pool, arr: np.ndarray, prompt: np.ndarray, output: object, max_new: int | None,
          decode: bool, iterations: np.ndarray | None = None) -> ServingResult:  # fmt: skip
    """One pool's simulation of the requests that reach it (arrival order kept as given).

    ``iterations``: a speculative decode pool's, per request (:func:`~aonkit.model.serving_spec.with_iterations`).
    """
    if arr.size == 0:  # (nothing reached it: no simulation, idle replicas)
        none = pd.DataFrame({c: np.zeros(0) for c in ("first_token_s", "start_s", "finish_s")})
        idle = pd.DataFrame({"replica": np.arange(pool.replicas), "requests": 0, "steps": 0, "busy_s": 0.0,
                             "busy_fraction": np.nan, "prefill_tokens": 0, "decode_tokens": 0, "preemptions": 0})
        return ServingResult(none.assign(replica=np.zeros(0, np.int64)), idle, {})
    if iterations is None:
        return simulate_serving(arr, prompt, output, **pool_engine(pool, max_new, decode))
    run = prepare(arr, prompt, output, **pool_engine(pool, max_new, decode))
    return run_result(with_iterations(run, pool.speculative, iterations))
