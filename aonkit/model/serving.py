"""LLM serving as a queue: continuous batching on replicas, simulated event by event.

:func:`simulate_serving` validates the workload and engine, draws what is random,
and runs the Numba simulation (:mod:`aonkit._kernels.serving`; the policy is
described there and in docs/serving-model.md). It returns one row per request
(arrival, admission, first token, finish, and from them queueing time, TTFT,
TPOT and end-to-end latency), one row per replica and a summary of percentiles
and throughput (:func:`serving_summary`). :func:`prepare` and :func:`summarize` are the
same steps for many simulations whose summaries are all that is wanted (a sweep):
they run side by side on threads and build no tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from .serving_inputs import ArrivalProcess, Lengths, StepTime, draw_lengths, reserved_output
from .serving_spec import Speculation, held_at_most, recomputed, speculative_steps
from .serving_stats import METRICS, PERCENTILES, busy_fraction, latencies, serving_summary, summary_in_arrival_order
from .serving_threads import busiest_first, sweep_threads, thread_pool

__all__ = ["KV_POLICIES", "METRICS", "PERCENTILES", "ROUTINGS", "Prepared", "ServingResult", "prepare", "rerun",
           "serving_summary", "simulate_serving", "summarize", "thread_pool"]

ROUTINGS = ("jsq", "round_robin", "central")
KV_POLICIES = ("reserve", "paged")
UNLIMITED = 2**62


@dataclass(frozen=True)
class ServingResult:
    """What :func:`simulate_serving` returns.

    The fields are the constructor parameters and attributes; times are in seconds from the
    simulation's time origin (that of the arrival times).

    Parameters
    ----------
    requests : pandas.DataFrame
        One row per request, in input order: ``arrival_s``, ``prompt_tokens`` (a shared prefix included),
        ``output_tokens``, ``replica`` (index of the engine that served it), ``start_s`` (its first prefill step
        starts), ``first_token_s``, ``finish_s``, ``queue_s`` (start - arrival), ``ttft_s`` (first token -
        arrival), ``tpot_s`` ((finish - first token) / (output - 1), NaN for one output token), ``e2e_s`` (finish -
        arrival) and ``preemptions`` (times it was preempted, ``kv_policy="paged"``).
    replicas : pandas.DataFrame
        One row per replica: ``replica`` (index), ``requests`` (served), ``steps``, ``busy_s``,
        ``busy_fraction`` (of the span from the first arrival to the last finish), ``prefill_tokens`` (prompts
        computed again after a preemption included), ``decode_tokens``, ``preemptions`` (``kv_policy="paged"``).
    summary : dict
        :func:`serving_summary` of ``requests`` with the call's ``warmup``.
    """

    requests: pd.DataFrame
    replicas: pd.DataFrame
    summary: dict


def simulate_serving(arrivals: ArrivalProcess | object, prompt_tokens: int | Lengths | object,
                     output_tokens: int | Lengths | object, *, step_time: StepTime, n_requests: int | None = None,
                     replicas: int = 1, max_batch: int = 1, token_budget: int | None = None,
                     kv_tokens: int | None = None, kv_policy: str = "reserve", max_new_tokens: int | None = None,
                     prefix_tokens: int = 0, prefix_cache: bool = False, chunked_prefill: bool = False,
                     routing: str = "jsq", seed: int | None = None, warmup: float = 0.0,
                     context_points: int = 513, speculative: Speculation | None = None) -> ServingResult:
    """Simulate requests served by ``replicas`` continuous-batching engines.

    Parameters
    ----------
    arrivals : ArrivalProcess or array_like
        A process (then ``n_requests`` is required) or recorded arrival times in seconds (any order).
    prompt_tokens, output_tokens : int, Lengths or array_like
        Fixed, a distribution to draw from, or one value per request (each at least 1).
    step_time : StepTime
        Engine step duration as a function of prompt tokens, decode batch and total context.
    replicas, max_batch : int
        Number of engines; sequences one engine runs at once.
    token_budget : int, optional
        Tokens one step may process (unlimited when None). Without chunking it bounds the prompt
        tokens of a prefill step and must hold the longest prompt; with chunking it bounds decode
        plus prefill tokens and must be at least ``max_batch``.
    kv_tokens : int, optional
        Tokens of context one engine's KV cache holds (unlimited when None). A request is admitted only when the
        cache has room for it (``kv_policy`` says how that is counted); one whose prompt plus output tokens (its
        ``max_new_tokens``, when given) exceed it is refused at arrival (no replica, -1, and no times, NaN; counted
        in the summary's ``rejected``).
    kv_policy : {"reserve", "paged"}
        How the cache admits: ``"reserve"`` holds a request's prompt plus output tokens (or ``max_new_tokens``)
        from admission (nothing is preempted); ``"paged"`` holds what its context has grown to (vLLM's blocks, of
        one token) and preempts the latest-admitted sequence when a decode step would not fit, to be computed again
        (prompt and generated tokens) when admitted next (:mod:`aonkit._kernels.serving_paged`). Without chunked
        prefill the token budget must then hold the longest context a preempted request computes again.
    max_new_tokens : int, optional
        The most tokens a request may generate, as clients send it (None: each request's own output length, known
        in advance: an oracle). An engine does not know how long an output will be: ``"reserve"`` then holds the
        prompt plus ``max_new_tokens`` from admission (TGI's token budget), and under either policy a request whose
        prompt plus ``max_new_tokens`` exceeds ``kv_tokens`` is refused (as vLLM and TGI refuse one over the
        context they can hold). Every output length must be at most this (an engine stops a request there: cap a
        distribution with :meth:`Lengths.capped`).
    prefix_tokens : int, default 0
        Tokens every prompt starts with besides its ``prompt_tokens``: a system prompt (or few-shot examples) that
        the requests share. Without ``prefix_cache`` each prefill computes them and each sequence holds them.
    prefix_cache : bool, default False
        Hold the shared prefix once per replica (vLLM's automatic prefix caching, SGLang's radix cache, every
        request a hit): a prefill computes only the request's own prompt, the KV cache holds the prefix once beside
        the sequences' own tokens (``kv_tokens`` less the prefix; what a request needs of it is counted without the
        prefix), and each decode step still attends to it (:meth:`StepTime.with_prefix`). Not modelled: the
        prefill's attention to the cached prefix (its time counts the tokens computed), the prefix's first
        computation on each replica, and its eviction under memory pressure.
    chunked_prefill : bool
        Mix prompt chunks into decode steps (vLLM's chunked prefill, Sarathi) instead of running
        whole prompts in prefill-only steps that pause decoding (the default).
    routing : {"jsq", "round_robin", "central"}
        Join-shortest-queue at arrival (fewest waiting plus running, lowest index on ties), round
        robin in arrival order, or one shared FIFO that every replica admits from.
    seed : int, optional
        Seed of the draws (arrivals, then prompts, then outputs).
    warmup : float
        Fraction of the earliest arrivals left out of the summary.
    context_points : int
        Grid points of a ``decode_time_s`` function along total context (see :class:`StepTime`).
    speculative : Speculation, optional
        Engines that decode speculatively (:mod:`aonkit.model.serving_spec`): a decode step is an iteration that
        gives each sequence 1 to ``k + 1`` tokens (each request's iterations drawn after every other draw of the
        seed: the arrivals and lengths are those of the same call without it), and ``step_time``'s decode part
        should be an iteration's (:func:`~aonkit.model.serving_spec.speculative_step_time`). ``steps`` per replica
        then counts iterations (``decode_tokens`` the tokens, of the requests it served; where requests were
        preempted, its iterations times the run's mean tokens an iteration). A reserving cache with a ``kv_tokens``
        limit needs ``max_new_tokens``; a paged one grows each sequence's cache by the run's mean tokens an
        iteration a step. With chunked prefill a decoding sequence takes ``k + 1`` of a step's ``token_budget``.
    """
    run = prepare(arrivals, prompt_tokens, output_tokens, step_time=step_time, n_requests=n_requests,
                  replicas=replicas, max_batch=max_batch, token_budget=token_budget, kv_tokens=kv_tokens,
                  kv_policy=kv_policy, max_new_tokens=max_new_tokens, prefix_tokens=prefix_tokens,
                  prefix_cache=prefix_cache, chunked_prefill=chunked_prefill, routing=routing, seed=seed,
                  warmup=warmup, context_points=context_points, speculative=speculative)  # fmt: skip
    return run_result(run, int(prefix_tokens) if prefix_cache else 0)


def run_result(run: Prepared, cached_prefix: int = 0) -> ServingResult:
    """Simulate a prepared run and tabulate it, as :func:`simulate_serving` returns it.

    ``cached_prefix``: the tokens of a prefix the replicas hold once (added back to each prompt in the table).
    """
    start, first, fin, rep, steps, busy, ptok, dtok, preempted, npre = _execute(run)
    arr, output = run.arrivals, run.output
    if run.steps is not None:  # speculative: the kernel counted a sequence's iterations; its tokens are these
        served = rep >= 0  # (preempted, a request's tokens were decoded on several replicas or made by prefills)
        dtok = (np.bincount(rep[served], weights=output[served] - 1, minlength=run.replicas).astype(np.int64)
                if not npre.any() else np.rint(dtok * run.spec[0]).astype(np.int64))
    prompt = run.prompt + int(cached_prefix)  # whole prompts, the prefix included
    requests = request_table(arr, prompt, output, rep, start, first, fin, npre)
    per_replica = pd.DataFrame({
        "replica": np.arange(run.replicas), "requests": np.bincount(rep[rep >= 0], minlength=run.replicas),
        "steps": steps,
        "busy_s": busy, "busy_fraction": busy_fraction(busy, arr, fin), "prefill_tokens": ptok,
        "decode_tokens": dtok, "preemptions": preempted,
    })
    return ServingResult(requests, per_replica, serving_summary(requests, run.warmup))


def request_table(arr: np.ndarray, prompt: np.ndarray, output: np.ndarray, rep: np.ndarray, start: np.ndarray,
                  first: np.ndarray, fin: np.ndarray, preemptions: np.ndarray) -> pd.DataFrame:
    """:attr:`ServingResult.requests` from per-request columns (in one order), its latencies computed."""
    queue, ttft, tpot, e2e = latencies(arr, output, start, first, fin)
    return pd.DataFrame({
        "arrival_s": arr, "prompt_tokens": prompt, "output_tokens": output, "replica": rep, "start_s": start,
        "first_token_s": first, "finish_s": fin, "queue_s": queue, "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e,
        "preemptions": preemptions,
    })


class Prepared(NamedTuple):
    """One simulation's checked inputs, drawn and sorted (what :func:`prepare` returns).

    ``arrivals``, ``prompt`` and ``output`` are in input order (``prompt``: the tokens each request's first prefill
    computes, the shared prefix included unless cached); ``order`` sorts them by arrival;
    ``kernel_args`` are the rest of the kernel's arguments (replicas, engine, step-time tables). With speculative
    decoding ``steps`` holds what the kernel simulates instead of ``output`` (each request's first token and its
    iterations, :mod:`aonkit.model.serving_spec`) and ``spec`` the kernel's ``(cs, dq)`` (on a paged cache
    ``(cs, dq, ku, kg)``).
    """

    arrivals: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    order: np.ndarray
    replicas: int
    warmup: float
    kernel_args: tuple
    steps: np.ndarray | None = None
    spec: tuple = (1.0, 1)


def prepare(arrivals: ArrivalProcess | object, prompt_tokens: int | Lengths | object,
            output_tokens: int | Lengths | object, *, step_time: StepTime, n_requests: int | None = None,
            replicas: int = 1, max_batch: int = 1, token_budget: int | None = None, kv_tokens: int | None = None,
            kv_policy: str = "reserve", max_new_tokens: int | None = None, prefix_tokens: int = 0,
            prefix_cache: bool = False, chunked_prefill: bool = False, routing: str = "jsq", seed: int | None = None,
            warmup: float = 0.0, context_points: int = 513, speculative: Speculation | None = None) -> Prepared:
    """Validate and draw one simulation's inputs; nothing runs yet (:func:`summarize` runs it).

    Parameters
    ----------
    arrivals, prompt_tokens, output_tokens, step_time, n_requests, replicas, max_batch, token_budget, kv_tokens,
    kv_policy, max_new_tokens, prefix_tokens, prefix_cache, chunked_prefill, routing, seed, warmup, context_points,
    speculative
        As for :func:`simulate_serving`, which calls this first.

    Returns
    -------
    Prepared
        The drawn arrivals and lengths, their arrival order and the kernel's other arguments.

    Raises
    ------
    ValueError
        As :func:`simulate_serving` raises it, before anything is simulated.
    """
    rng = np.random.default_rng(seed)
    if isinstance(arrivals, ArrivalProcess):
        if n_requests is None or int(n_requests) < 1:
            raise ValueError("n_requests (>= 1) is required with an ArrivalProcess")
        arr = arrivals.sample(int(n_requests), rng)
    else:
        arr = np.asarray(arrivals, dtype=np.float64)
        if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
            raise ValueError("arrivals must be a non-empty 1-D array of finite times (s)")
        if n_requests is not None and int(n_requests) != arr.size:
            raise ValueError(f"n_requests={n_requests} but {arr.size} arrival times")
    n = arr.size
    prompt = draw_lengths(prompt_tokens, n, rng, "prompt_tokens")
    output = draw_lengths(output_tokens, n, rng, "output_tokens")
    if not (isinstance(prefix_tokens, (int, np.integer, float)) and prefix_tokens >= 0
            and int(prefix_tokens) == prefix_tokens):  # fmt: skip
        raise ValueError(f"prefix_tokens must be a whole number of tokens >= 0, got {prefix_tokens!r}")
    cached = int(prefix_tokens) if prefix_cache else 0  # held once per replica, outside each request's tokens
    prompt = prompt + (int(prefix_tokens) - cached)  # what a request's first prefill computes
    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {ROUTINGS}, got {routing!r}")
    for name, v in (("replicas", replicas), ("max_batch", max_batch), ("context_points", context_points)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    budget = UNLIMITED if token_budget is None else int(token_budget)
    if budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget!r}")
    if chunked_prefill and budget < max_batch:
        raise ValueError(f"with chunked prefill token_budget ({budget}) must be >= max_batch ({max_batch})")
    if not chunked_prefill and prompt.max() > budget:
        raise ValueError(f"a {prompt.max()}-token prompt exceeds token_budget={budget} (no chunked prefill)")
    kv = UNLIMITED if kv_tokens is None else kv_tokens
    if int(kv) != kv or kv < 1:
        raise ValueError(f"kv_tokens must be a positive integer, got {kv_tokens!r}")
    kv = int(kv)
    if cached and kv < UNLIMITED:
        if kv <= cached:
            raise ValueError(f"kv_tokens={kv} leaves no room beside the cached prefix of {cached} tokens")
        kv -= cached
    if kv_policy not in KV_POLICIES:
        raise ValueError(f"kv_policy must be one of {KV_POLICIES}, got {kv_policy!r}")
    resv = reserved_output(max_new_tokens, output)
    need = prompt + (resv if resv else output)  # what a request needs of the cache: refused when over kv
    if kv < UNLIMITED and kv >= int(max_batch) * (int(need.max()) + 1):
        kv = UNLIMITED  # a cache that no batch can fill (the kernel then runs ahead and lazily): the same run
    paged = kv_policy == "paged" and kv < UNLIMITED
    if not 0 <= warmup < 1:
        raise ValueError(f"warmup must be in [0, 1), got {warmup!r}")
    steps, spec = None, (1.0, 1)
    if speculative is not None:  # after every other draw: the arrivals and lengths are the plain run's
        steps, spec = speculative_steps(speculative, output, rng, kv < UNLIMITED, resv, paged, chunked_prefill,
                                        budget, int(max_batch))  # fmt: skip
    # paged: a preempted request computes its prompt and the tokens it made again (the kernel's count of them)
    prefilled = recomputed(prompt, output if steps is None else steps, spec) if paged else prompt
    if paged and not chunked_prefill:
        served = held_at_most(prompt, output if steps is None else steps, resv, kv, spec)
        longest = int(prefilled[served].max()) if served.any() else 0
        if longest > budget:
            raise ValueError(f"with kv_policy='paged' and no chunked prefill, token_budget={budget} must hold the "
                             f"{longest} tokens a preempted request may compute again (its prompt and the tokens it "
                             "may have made)")  # fmt: skip
    k = min(int(max_batch), n)
    max_tokens = min(budget, int(np.partition(prefilled, n - k)[n - k:].sum()))
    max_context = min(int(np.partition(prompt + output - 1, n - k)[n - k:].sum()), kv)
    tabs = step_time.with_prefix(cached).tables(max_tokens, int(max_batch), max_context, int(context_points))
    from .._kernels.serving import CENTRAL, JSQ, ROUND_ROBIN, UNLIMITED_KV

    code = {"jsq": JSQ, "round_robin": ROUND_ROBIN, "central": CENTRAL}[routing]
    args = (int(replicas), int(max_batch), budget, min(kv, UNLIMITED_KV), resv, paged, bool(chunked_prefill), code,
            float(step_time.overhead_s), *tabs)  # fmt: skip
    return Prepared(arr, prompt, output, np.argsort(arr, kind="stable"), int(replicas), float(warmup), args, steps,
                    spec)  # fmt: skip


def rerun(run: Prepared, *, arrivals: np.ndarray | None = None, replicas: int | None = None) -> Prepared:
    """``run`` with other arrival times or another replica count, nothing else drawn or tabulated again.

    For runs that differ only there and share a seed: the lengths :func:`prepare` draws after the arrivals are
    the same at any rate (the gamma gaps take as many random numbers at any scale), and the step-time tables do
    not depend on either. ``arrivals`` must be drawn as :func:`prepare` draws them (``ArrivalProcess.sample``
    with a fresh generator of the same seed).
    """
    if arrivals is not None:
        run = run._replace(arrivals=arrivals, order=np.argsort(arrivals, kind="stable"))
    if replicas is not None:
        if int(replicas) != replicas or replicas < 1:
            raise ValueError(f"replicas must be a positive integer, got {replicas!r}")
        run = run._replace(replicas=int(replicas), kernel_args=(int(replicas), *run.kernel_args[1:]))
    return run


def summarize(runs: Sequence[Prepared], threads: int | None = None, slos: tuple[float, float] | None = None,
              keep_latencies: bool = False) -> list[dict]:  # fmt: skip
    """Run each prepared simulation and keep only its summary (plus ``busy_fraction``), several at once.

    Parameters
    ----------
    runs : sequence of Prepared
        From :func:`prepare`.
    threads : int, optional
        Simulations run at once (default: one per run, at most the CPU count and 8). The kernel and numpy's
        partitions release the GIL, so they run side by side, the busiest (most arrivals per second) first; the
        results do not depend on it.
    slos : tuple of 2 float, optional
        ``(ttft_s, tpot_s)``: each summary then has ``slo_attainment`` (:func:`serving_summary`'s).
    keep_latencies : bool, default False
        Each summary then has ``latencies``: the measured requests' TTFT and TPOT arrays, in arrival order (so that
        a caller can count the requests within other objectives, :func:`~aonkit.model.serving_stats.attainment`,
        without simulating again).

    Returns
    -------
    list of dict
        Per run, in order: what ``serving_summary(simulate_serving(...).requests, warmup, slos=slos)`` holds for the
        same arguments, to the last bit, ``busy_fraction`` (the mean of the replicas') and ``preemptions`` (their
        sum). No per-request table is built.
    """
    def one(run: Prepared) -> dict:  # in arrival order, as the kernel gives it: no column goes back to input order
        arr, output = run.arrivals[run.order], run.output[run.order]
        start, first, fin, _, _, busy, _, _, preempted, _ = _kernel(run, arr, kernel_output(run)[run.order])
        k = int(np.floor(run.warmup * arr.size))  # the measured requests: from the k-th arrival on
        lat = latencies(arr[k:], output[k:], start[k:], first[k:], fin[k:])
        summary = summary_in_arrival_order(arr, fin, output, dict(zip(METRICS, lat)), k, PERCENTILES, slos)
        row = {**summary, "busy_fraction": float(np.mean(busy_fraction(busy, arr, fin))),
               "preemptions": int(preempted.sum())}
        if keep_latencies:
            row["latencies"] = (lat[1], lat[2])
        return row

    n = sweep_threads(len(runs), threads)
    if n <= 1 or len(runs) <= 1:
        return [one(r) for r in runs]
    # the busiest first: a sweep's highest rates take longest, and the short ones left over fill the threads' ends
    pool = thread_pool(n)
    futures = {i: pool.submit(one, runs[i]) for i in busiest_first(runs)}
    try:
        return [futures[i].result() for i in range(len(runs))]
    finally:  # one raised: those not started yet do not run
        for f in futures.values():
            f.cancel()


def kernel_output(run: Prepared) -> np.ndarray:
    """What the kernel simulates of each request's output, in input order.

    Its tokens, or with speculative decoding its first token and its iterations (``run.steps``).
    """
    return run.output if run.steps is None else run.steps


def _kernel(run: Prepared, arr: np.ndarray, output: np.ndarray) -> tuple[np.ndarray, ...]:
    """The kernel on one prepared run, given its arrivals and :func:`kernel_output` in arrival order (``run.order``).

    Per request (start, first token, finish, replica) in arrival order, then per replica (steps, busy s, prefill
    tokens, decode tokens, preemptions), then per request its preemptions (arrival order).
    """
    from .._kernels.serving import simulate

    return simulate(arr, run.prompt[run.order], output, *run.kernel_args, True, *run.spec)


def _execute(run: Prepared) -> tuple[np.ndarray, ...]:
    """:func:`_kernel` with the per-request results (the first four and the last) in input order."""
    o = run.order
    res = _kernel(run, run.arrivals[o], kernel_output(run)[o])
    per_request = (*res[:4], res[-1])
    start, first, fin, rep, npre = (np.empty_like(x) for x in per_request)
    for dst, src in zip((start, first, fin, rep, npre), per_request):
        dst[o] = src
    return (start, first, fin, rep, *res[4:-1], npre)
