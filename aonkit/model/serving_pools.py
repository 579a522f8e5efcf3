"""Disaggregated serving for sweeps and searches: two pools' simulations drawn and tabulated once, summaries only.

:func:`~aonkit.model.serving_disagg.simulate_disaggregated` builds both pools' step-time tables and three request
tables at every call (about 28 ms for 20,000 requests, 9 ms of it simulation). A sweep of rates, or a search over
pool sizes, changes only the arrival times or the replica counts: :func:`prepare_pools` draws the requests and
tabulates both pools once, :func:`rerun_pools` swaps the arrivals or the pool sizes, and :func:`summarize_pools`
runs the two kernels of each and keeps the summary, in arrival order as :func:`~aonkit.model.serving.summarize`
does. The summaries are :func:`~aonkit.model.serving_disagg.simulate_disaggregated`'s to the last bit (tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .serving import Prepared, kernel_output, prepare, rerun, sweep_threads, thread_pool
from .serving_floor import served_apart, spaced
from .serving_inputs import ArrivalProcess, Lengths, StepTime
from .serving_spec import with_iterations
from .serving_stats import METRICS, PERCENTILES, busy_fraction, latencies, summary_in_arrival_order

__all__ = ["PreparedPools", "alone_pools", "pool_engine", "prepare_pools", "rerun_pools", "summarize_pools"]


class PreparedPools(NamedTuple):
    """Both pools' checked inputs (what :func:`prepare_pools` returns); arrays in arrival order.

    ``arrivals``, ``prompt``, ``output``: every request's; ``index``: its place in the order given (ties in a
    decode pool's arrival go by it, as :func:`~aonkit.model.serving_disagg.simulate_disaggregated` orders them);
    ``fits``: those the decode pool can hold; ``go``: those that reach it (held by both pools, more than one
    output token); ``prefill``, ``decode``: each pool's prepared run (``decode`` None when no request reaches it;
    its arrival times are set per run from the first tokens); ``transfer``: ``(latency, seconds per token)``.
    """

    arrivals: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    index: np.ndarray
    fits: np.ndarray
    go: np.ndarray
    prefill: Prepared
    decode: Prepared | None
    transfer: tuple[float, float]
    warmup: float


def prepare_pools(arrivals: ArrivalProcess | object, prompt_tokens: int | Lengths | object,
                  output_tokens: int | Lengths | object, *, prefill: object, decode: object,
                  transfer_s: tuple[float, float], n_requests: int | None = None, max_new_tokens: int | None = None,
                  seed: int | None = None, warmup: float = 0.0) -> PreparedPools:  # fmt: skip
    """Validate, draw and tabulate a disaggregated simulation; nothing runs yet (:func:`summarize_pools` runs it).

    Parameters are :func:`~aonkit.model.serving_disagg.simulate_disaggregated`'s (``prefill`` and ``decode``: its
    ``Pool`` objects; ``transfer_s`` already checked there). Raises ValueError as that function raises it.
    """
    drawn = prepare(arrivals, prompt_tokens, output_tokens, step_time=StepTime(), n_requests=n_requests, seed=seed,
                    max_new_tokens=max_new_tokens, warmup=warmup,
                    speculative=decode.speculative)  # (draws and checks: nothing is simulated)
    o = drawn.order
    arr, prompt, output = drawn.arrivals[o], drawn.prompt[o], drawn.output[o]
    limit = output if max_new_tokens is None else np.full(output.size, int(max_new_tokens))
    kv = np.inf if decode.kv_tokens is None else decode.kv_tokens
    fits = prompt + limit <= kv  # the decode pool could never hold the others: refused at arrival
    pre = _pool_run(prefill, arr[fits], prompt[fits], 1, None, as_decode=False)
    held = np.zeros(arr.size, bool)
    held[fits] = prompt[fits] + 1 <= pre.kernel_args[3]  # (the kernel refuses a prompt and token over its cache)
    go = held & (output > 1)  # (one output token: done at the prefill pool)
    dec = None
    if go.any():  # the decode pool's tables depend on the lengths only: its arrivals come per run
        dec = _pool_run(decode, np.zeros(int(go.sum())), prompt[go], output[go], max_new_tokens, as_decode=True)
        if drawn.steps is not None:  # a speculative decode pool: each request's iterations, drawn above
            dec = with_iterations(dec, decode.speculative, drawn.steps[o][go] - 1)
    return PreparedPools(arr, prompt, output, o, fits, go, pre, dec, tuple(transfer_s), float(warmup))


def rerun_pools(run: PreparedPools, *, arrivals: np.ndarray | None = None, prefill: int | None = None,
                decode: int | None = None) -> PreparedPools:  # fmt: skip
    """``run`` with other arrival times (drawn as :func:`~aonkit.model.serving.rerun` says) or pool sizes."""
    if arrivals is not None:
        if not np.all(np.diff(arrivals) >= 0):
            raise ValueError("rerun_pools takes arrivals in order (a process's, as drawn)")
        run = run._replace(arrivals=arrivals)
    if prefill is not None:
        run = run._replace(prefill=rerun(run.prefill, replicas=prefill))
    if decode is not None and run.decode is not None:
        run = run._replace(decode=rerun(run.decode, replicas=decode))
    return run


def summarize_pools(runs: Sequence[PreparedPools], threads: int | None = None,
                    slos: tuple[float, float] | None = None, keep_latencies: bool = False) -> list[dict]:  # fmt: skip
    """Run each prepared disaggregated simulation and keep its summary and each pool's mean busy fraction.

    Per run, in order: ``simulate_disaggregated(...).summary`` for the same arguments, to the last bit, plus
    ``prefill_busy_fraction`` and ``decode_busy_fraction`` (the pools' mean; NaN for a pool no request reaches),
    as :func:`~aonkit.model.serving_disagg.disaggregated_sweep` gives them. ``threads``: runs at once (default one
    each, at most the CPU count and 8); the kernels release the GIL. ``slos``: ``(ttft_s, tpot_s)``, adding
    ``slo_attainment`` (:func:`~aonkit.model.serving_stats.attainment`); ``keep_latencies``: adding ``latencies``,
    the measured requests' TTFT and TPOT arrays (arrival order).
    """
    n = sweep_threads(len(runs), threads)

    def one(r: PreparedPools) -> dict:
        return _one(r, slos=slos, keep_latencies=keep_latencies)

    if n <= 1 or len(runs) <= 1:
        return [one(r) for r in runs]
    return list(thread_pool(n).map(one, runs))


def alone_pools(run: PreparedPools) -> dict | None:
    """:func:`summarize_pools`'s row of ``run``'s requests each served alone (one replica a pool), or None.

    The latency floor of either pool's searches (:mod:`.serving_floor`): its requests arrive
    :data:`~aonkit.model.serving_floor.GAP_S` apart, in the same order; None when one outlasts that.
    """
    one = rerun_pools(run, arrivals=spaced(run.arrivals.size), prefill=1, decode=1)
    row, fin = _one(one, with_finish=True)
    return row if served_apart(one.arrivals, fin) else None


def _one(run: PreparedPools, with_finish: bool = False, slos: tuple[float, float] | None = None,
         keep_latencies: bool = False) -> dict | tuple[dict, np.ndarray]:  # fmt: skip
    """One run's summary row (arrays in arrival order throughout; the kernels as each pool's prepared run says).

    ``with_finish``: the finish times too (arrival order); ``slos``, ``keep_latencies``: as for
    :func:`summarize_pools`.
    """
    from .._kernels.serving import simulate

    arr, prompt, output, fits, go = run.arrivals, run.prompt, run.output, run.fits, run.go
    pre = run.prefill
    start, first, fin = (np.full(arr.size, np.nan) for _ in range(3))
    pre_busy = np.nan
    if fits.any():
        res = simulate(arr[fits], prompt[fits], np.ones(int(fits.sum()), np.int64), *pre.kernel_args)
        start[fits], first[fits] = res[0], res[1]
        pre_busy = _mean_busy(res[5], arr[fits], res[2])
    if not np.array_equal(~np.isnan(first) & (output > 1), go):
        raise RuntimeError("the prefill pool refused other requests than prepare_pools counted")
    fin[:] = first  # (one output token: its first token ends it; refused: NaN)
    dec_busy = np.nan
    if run.decode is not None:
        lat, per_token = run.transfer
        ready = first[go] + lat + per_token * prompt[go]
        o = np.lexsort((run.index[go], ready))  # by time, ties in the order the requests were given
        d = simulate(ready[o], prompt[go][o], kernel_output(run.decode)[o], *run.decode.kernel_args, True,
                     *run.decode.spec)  # fmt: skip
        got = np.empty(o.size)
        got[o] = d[2]
        fin[go] = got
        dec_busy = _mean_busy(d[5], ready, got)
    k = int(np.floor(run.warmup * arr.size))  # the measured requests: from the k-th arrival on
    lat = latencies(arr[k:], output[k:], start[k:], first[k:], fin[k:])
    summary = summary_in_arrival_order(arr, fin, output, dict(zip(METRICS, lat)), k, PERCENTILES, slos)
    row = {**summary, "prefill_busy_fraction": pre_busy, "decode_busy_fraction": dec_busy}
    if keep_latencies:
        row["latencies"] = (lat[1], lat[2])
    return (row, fin) if with_finish else row


def _mean_busy(busy: np.ndarray, arr: np.ndarray, fin: np.ndarray) -> float:
    """A pool's mean busy fraction, as its replicas' table gives it (NaN when every request was refused)."""
    return float(np.mean(busy_fraction(busy, arr, fin)))


def pool_engine(pool: object, max_new: int | None, as_decode: bool) -> dict:
    """Keyword arguments of :func:`~aonkit.model.simulate_serving` (or ``prepare``) for one pool's replicas.

    A decode pool's prompts enter at no cost (its prefill time is zero, chunked, with no budget) and it reserves
    ``max_new`` new tokens; a prefill pool's requests are one-token requests.
    """
    step = pool.step_time
    if as_decode:  # the context enters at no cost; the steps are the decode pool's
        step = StepTime(prefill_time_s=(0.0, 0.0), decode_time_s=step.decode_time_s, overhead_s=step.overhead_s)
    return {"step_time": step, "replicas": pool.replicas, "max_batch": pool.max_batch,
            "token_budget": None if as_decode else pool.token_budget, "kv_tokens": pool.kv_tokens,
            "chunked_prefill": True if as_decode else pool.chunked_prefill, "routing": pool.routing,
            "max_new_tokens": max_new if as_decode else None}  # fmt: skip


def _pool_run(pool: object, arr: np.ndarray, prompt: np.ndarray, output: object, max_new: int | None,
              as_decode: bool) -> Prepared:
    """One pool's prepared run of the requests that reach it, as ``serving_disagg`` simulates a pool."""
    return prepare(arr if arr.size else np.zeros(1), prompt if arr.size else np.ones(1, np.int64), output,
                   **pool_engine(pool, max_new, as_decode))
