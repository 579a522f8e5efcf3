"""Capacity questions answered with :func:`~aonkit.model.serving.simulate_serving`.

* :func:`serving_sweep`: latency percentiles and throughput against arrival rate.
* :func:`saturation_knee`: where a sweep's latency turns up and its throughput stops following the load.
* :func:`replicas_needed`: the fewest replicas that meet a latency objective at one arrival rate.

Every simulation of one call draws from the same seed (common random numbers), so
neighbouring rates or replica counts see the same requests, scaled in time, and
the curves are smooth and monotone up to the policy's own effects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pandas as pd

from .serving import prepare, rerun, summarize
from .serving_floor import alone, beyond_floor
from .serving_inputs import ArrivalProcess


def serving_sweep(rates_per_s: object, prompt_tokens: object, output_tokens: object, *, n_requests: int,
                  arrival_cv: float = 1.0, seed: int = 0, warmup: float = 0.1, threads: int | None = None,
                  slos: tuple[float, float] | None = None, **engine: object) -> pd.DataFrame:
    """One :func:`serving_summary` row per arrival rate (column ``arrival_rate_per_s``), plus ``busy_fraction``.

    ``engine`` holds the other arguments of :func:`simulate_serving` (``step_time``, ``replicas``,
    ``max_batch``, ``token_budget``, ``kv_tokens``, ``kv_policy``, ``chunked_prefill``, ``routing``). Arrivals are a
    renewal process
    with gamma gaps of coefficient of variation ``arrival_cv`` (1: Poisson).

    Parameters
    ----------
    rates_per_s : float or array_like
        Arrival rates in requests per second, each positive; simulated in the order given.
    prompt_tokens, output_tokens : int, Lengths or array_like
        Tokens per request, as for :func:`simulate_serving`: fixed, a
        :class:`~aonkit.model.serving_inputs.Lengths` to draw from, or one value per request
        (then ``n_requests`` values).
    n_requests : int
        Requests simulated per run, at least 1.
    arrival_cv : float, default 1.0
        Coefficient of variation of the gamma inter-arrival times (1: Poisson, 0: evenly spaced).
    seed : int, default 0
        Seed of every simulation (common random numbers).
    warmup : float, default 0.1
        Fraction of the earliest arrivals left out of each summary, in ``[0, 1)``.
    slos : tuple of 2 float, optional
        ``(ttft_s, tpot_s)``: each row then has ``slo_attainment``, the share of measured requests meeting both
        (:func:`~aonkit.model.serving_stats.attainment`; :func:`goodput` reads it).
    threads : int, optional
        Simulations run at once (default: one per rate, at most the CPU count and 8); the rows do not
        depend on it.
    **engine
        Keyword arguments of :func:`simulate_serving`; ``step_time`` is required.

    Returns
    -------
    pandas.DataFrame
        One row per rate: ``arrival_rate_per_s``, the :func:`~aonkit.model.serving.serving_summary` keys
        (``requests``, ``measured``, ``rejected``, ``window_s``, ``throughput_per_s``, ``output_tokens_per_s``,
        ``<m>_mean_s`` and ``<m>_p50_s``/``_p90_s``/``_p99_s`` for ``queue``, ``ttft``, ``tpot``, ``e2e``),
        ``busy_fraction`` (mean over the replicas) and ``preemptions`` (their sum).

    Raises
    ------
    ValueError
        As :func:`simulate_serving` and :class:`~aonkit.model.serving_inputs.ArrivalProcess` raise it
        (a rate that is not positive, a bad engine argument...), and for no rate at all.
    """
    return pd.DataFrame(sweep_rows(rates_per_s, prompt_tokens, output_tokens, n_requests=n_requests,
                                   arrival_cv=arrival_cv, seed=seed, warmup=warmup, threads=threads, slos=slos,
                                   **engine))  # fmt: skip


def sweep_rows(rates_per_s: object, prompt_tokens: object, output_tokens: object, *, n_requests: int,
               arrival_cv: float = 1.0, seed: int = 0, warmup: float = 0.1, threads: int | None = None,
               slos: tuple[float, float] | None = None, keep_latencies: bool = False,
               **engine: object) -> list[dict]:  # fmt: skip
    """:func:`serving_sweep`'s rows as dicts, one per rate in order (no table made: a caller that keeps rows).

    ``keep_latencies``: each row also holds the measured requests' TTFT and TPOT arrays
    (:func:`~aonkit.model.serving.summarize`).
    """
    rates = [float(r) for r in np.atleast_1d(np.asarray(rates_per_s, dtype=np.float64))]
    if not rates:
        raise ValueError("rates_per_s is empty: give at least one arrival rate")
    runs = [prepare(ArrivalProcess(rates[0], arrival_cv), prompt_tokens, output_tokens, n_requests=n_requests,
                    seed=seed, warmup=warmup, **engine)]  # fmt: skip
    # the same lengths and tables at every rate, and the same draws for the arrival times, scaled to each rate
    draws = ArrivalProcess(rates[0], arrival_cv).draws(int(n_requests), np.random.default_rng(seed))
    for rate in rates[1:]:
        runs.append(rerun(runs[0], arrivals=ArrivalProcess(rate, arrival_cv).from_draws(draws, int(n_requests))))
    rows = summarize(runs, threads, slos, keep_latencies)
    return [{"arrival_rate_per_s": rate, **row} for rate, row in zip(rates, rows)]


def goodput(sweep: pd.DataFrame, target: float = 0.9) -> dict:
    """The highest arrival rate at which at least ``target`` of the requests meet both objectives (DistServe).

    Going up the sweep's rates from the lowest, the first rate whose ``slo_attainment`` falls below ``target`` ends
    it: the goodput is interpolated linearly in attainment between that rate and the one before.

    Parameters
    ----------
    sweep : pandas.DataFrame
        A :func:`serving_sweep` (or :func:`~aonkit.model.disaggregated_sweep`) made with ``slos``; any row order.
    target : float, default 0.9
        The share of requests that must meet both objectives, in ``(0, 1]``.

    Returns
    -------
    dict
        ``goodput_per_s`` (NaN when even the lowest rate misses the target; the highest rate when none does) and
        ``beyond_sweep`` (True when no swept rate misses it: the goodput is then at least that).

    Raises
    ------
    ValueError
        For a sweep without ``slo_attainment`` or a target outside ``(0, 1]``.
    """
    if "slo_attainment" not in sweep:
        raise ValueError("the sweep has no slo_attainment: make it with slos=(ttft_s, tpot_s)")
    if not 0 < target <= 1:
        raise ValueError(f"target must be in (0, 1], got {target!r}")
    s = sweep.sort_values("arrival_rate_per_s", kind="stable")
    rates, got = s["arrival_rate_per_s"].to_numpy(np.float64), s["slo_attainment"].to_numpy(np.float64)
    miss = np.flatnonzero(~(got >= target))
    if miss.size == 0:
        return {"goodput_per_s": float(rates[-1]), "beyond_sweep": True}
    i = int(miss[0])
    if i == 0:
        return {"goodput_per_s": np.nan, "beyond_sweep": False}
    (r0, r1), (a0, a1) = rates[i - 1:i + 1], got[i - 1:i + 1]
    at = r0 + (r1 - r0) * (a0 - target) / (a0 - a1) if np.isfinite(a1) and a0 > a1 else r0
    return {"goodput_per_s": float(at), "beyond_sweep": False}


def saturation_knee(sweep: pd.DataFrame, metric: str = "ttft_p99_s", factor: float = 2.0,
                    efficiency: float = 0.95) -> dict:
    """The knee of a :func:`serving_sweep`, and the capacity it shows.

    ``knee_rate_per_s`` is the highest swept rate, going up from the lowest, before the first rate at
    which ``metric`` exceeds ``factor`` times its value at the lowest rate or throughput falls below
    ``efficiency`` times the arrival rate (NaN if even the lowest rate fails). ``capacity_per_s`` is
    the highest throughput in the sweep: the saturation throughput once the sweep goes past the knee
    (otherwise a lower bound). ``knee_metric_s`` is ``metric`` at the knee.

    Parameters
    ----------
    sweep : pandas.DataFrame
        A :func:`serving_sweep` table (any row order; sorted by ``arrival_rate_per_s`` here); needs
        ``arrival_rate_per_s``, ``throughput_per_s`` and ``metric``.
    metric : str, default "ttft_p99_s"
        Latency column to watch, in seconds.
    factor : float, default 2.0
        Allowed growth of ``metric`` over its value at the lowest rate.
    efficiency : float, default 0.95
        Least throughput, as a fraction of the arrival rate, that still follows the load.

    Returns
    -------
    dict
        ``knee_rate_per_s`` (requests per second), ``knee_metric_s`` (seconds), ``capacity_per_s``
        (requests per second) and ``saturated`` (True when some swept rate fails either test).

    Raises
    ------
    KeyError
        When ``metric`` is not a column of ``sweep``.
    """
    s = sweep.sort_values("arrival_rate_per_s")
    rate = s["arrival_rate_per_s"].to_numpy()
    lat = s[metric].to_numpy()
    ok = (lat <= factor * lat[0]) & (s["throughput_per_s"].to_numpy() >= efficiency * rate)
    bad = np.flatnonzero(~ok)
    k = (bad[0] if bad.size else rate.size) - 1
    return {
        "knee_rate_per_s": float(rate[k]) if k >= 0 else np.nan,
        "knee_metric_s": float(lat[k]) if k >= 0 else np.nan,
        "capacity_per_s": float(s["throughput_per_s"].max()),
        "saturated": bool(bad.size),
    }


class ReplicaPlan(NamedTuple):
    """What :func:`replicas_needed` returns: the answer and every simulation tried (one row per count)."""

    replicas: int
    tried: pd.DataFrame


def replicas_needed(rate_per_s: float, slo_s: float, prompt_tokens: object, output_tokens: object, *,
                    n_requests: int, metric: str = "ttft_p99_s", arrival_cv: float = 1.0, seed: int = 0,
                    warmup: float = 0.1, max_replicas: int = 4096, start: int = 1, threads: int = 1,
                    on_row: Callable[[int, dict], None] | None = None, also: dict[str, float] | None = None,
                    **engine: object) -> ReplicaPlan:  # fmt: skip
    """Fewest replicas whose simulated ``metric`` is at most ``slo_s`` at ``rate_per_s``.

    Tries ``start`` replicas, then goes up or down by 1, 2, 4... replicas until one count meets the
    objective and one fails, and bisects between them: the answer meets it and one replica fewer does not.
    This assumes ``metric`` does not grow with more replicas (true of the routings here up to sampling noise,
    which common random numbers keep small); then the answer does not depend on ``start``, only the work does:
    a good guess (the answer at a nearby rate, scaled by the rates' ratio) takes two simulations where a search
    from one replica takes about ``2 log2(answer)``. Raises ValueError past ``max_replicas``, or as soon as the
    counts tried all fail and the requests each served alone miss the objective too
    (:func:`~aonkit.model.serving_floor.alone`: no count can meet it; one simulation more, run only when no count
    tried has met it yet).

    Parameters
    ----------
    rate_per_s : float
        Arrival rate in requests per second, positive.
    slo_s : float
        Objective: the largest acceptable ``metric``, in seconds.
    prompt_tokens, output_tokens : int, Lengths or array_like
        Tokens per request, as for :func:`simulate_serving`: fixed, a
        :class:`~aonkit.model.serving_inputs.Lengths` to draw from, or one value per request
        (then ``n_requests`` values).
    n_requests : int
        Requests simulated per run, at least 1.
    metric : str, default "ttft_p99_s"
        :func:`~aonkit.model.serving.serving_summary` key compared with ``slo_s``.
    arrival_cv : float, default 1.0
        Coefficient of variation of the gamma inter-arrival times (1: Poisson, 0: evenly spaced).
    seed : int, default 0
        Seed of every simulation (common random numbers).
    warmup : float, default 0.1
        Fraction of the earliest arrivals left out of each summary, in ``[0, 1)``.
    max_replicas : int, default 4096
        Largest replica count tried.
    start : int, default 1
        The first count tried (clipped to ``[1, max_replicas]``).
    threads : int, default 1
        Counts simulated at once after the first two (side by side on threads, :func:`summarize`): when those
        two show the guess was off, each round then takes the next ``threads`` steps up or down at once, or cuts
        the bracket in ``threads + 1`` parts. More simulations in all, fewer rounds: for a machine with CPUs to
        spare. 1: one count at a time (each step from the last one's answer).
    also : dict of str to float, optional
        More objectives a count must meet too (summary key -> largest acceptable value, seconds), e.g.
        ``{"tpot_p99_s": 0.015}`` beside a TTFT objective.
    on_row : callable, optional
        Called as ``on_row(replicas, row)`` after each simulation (``row``: the summary keys, ``busy_fraction`` and
        ``preemptions``, what :func:`serving_sweep` gives at this rate for that count), so that a caller running a
        sweep beside the search can take the row it shares instead of simulating it again.
    **engine
        Keyword arguments of :func:`simulate_serving` other than ``replicas``; ``step_time`` is required.

    Returns
    -------
    ReplicaPlan
        ``replicas``: the fewest replicas found to meet the objective; ``tried``: one row per count
        simulated, sorted by ``replicas``, with the summary keys, ``busy_fraction`` and ``preemptions``.

    Raises
    ------
    ValueError
        When ``max_replicas`` replicas do not meet the objective (the message says "not met with"), or no number
        can ("not met with any number of replicas", with the floor), or as
        :class:`~aonkit.model.serving_inputs.ArrivalProcess` and :func:`simulate_serving` raise it.
    KeyError
        When ``metric`` is not a summary key.
    """
    tried: dict[int, dict] = {}
    base = prepare(ArrivalProcess(rate_per_s, arrival_cv), prompt_tokens, output_tokens, n_requests=n_requests,
                   seed=seed, warmup=warmup, **engine)  # fmt: skip
    wide = max(1, int(threads))

    floor_seen = []
    objectives = {metric: slo_s, **(also or {})}
    what = " and ".join(f"{m} <= {v} s" for m, v in objectives.items())

    def meets(counts: list[int]) -> list[bool]:
        new = [c for c in dict.fromkeys(counts) if c not in tried]  # the same requests at every count
        for c, row in zip(new, summarize([rerun(base, replicas=c) for c in new], wide)):
            if on_row is not None:
                on_row(c, row)
            tried[c] = {"replicas": c, **row}
        ok = [all(tried[c][m] <= v for m, v in objectives.items()) for c in counts]
        if not floor_seen and not any(all(r[m] <= v for m, v in objectives.items()) for r in tried.values()):
            floor_seen.append(True)  # only failures so far: if every request alone fails too, no count can meet it
            floor = alone(base)
            why = next((w for m, v in objectives.items() if (w := beyond_floor(floor, m, v))), "")
            if why:
                raise ValueError(f"{what} not met with any number of replicas: {why}")
        return ok

    hi = fewest_meeting(meets, start, max_replicas, what, wide)
    return ReplicaPlan(hi, pd.DataFrame(sorted(tried.values(), key=lambda r: r["replicas"])))


def fewest_meeting(meets: Callable[[list[int]], list[bool]], start: int, most: int, what: str, wide: int = 1) -> int:
    """The fewest count in ``[1, most]`` that ``meets``, for a test that holds from some count on.

    Tries ``start`` (clipped to ``[1, most]``), then goes up or down by 1, 2, 4... until one count meets the test
    and one fails, and bisects between them. ``meets`` takes a list of counts and says for each whether it meets.
    The first two rounds try one count each (a good ``start`` needs only them); later ones ``wide`` at once (the
    next steps up or down, or the bracket cut in ``wide + 1`` parts): for a caller that simulates them side by
    side. Raises ValueError (``what`` not met with ``most`` replicas) when ``most`` fails.
    """
    widths = iter((1,))  # the second round one count too (start +- 1: all a good start needs), then `wide`
    hi = min(max(int(start), 1), most)
    lo, step = 0, 1  # lo: a count that fails (0 replicas always does)
    if meets([hi])[0]:
        while hi - step > lo:  # down, 1, 2, 4... fewer, until one fails
            counts, c, s = [], hi, step
            for _ in range(next(widths, wide)):
                if c - s <= lo:
                    break
                c, s = c - s, 2 * s
                counts.append(c)
            ok = meets(counts)
            if all(ok):
                hi, step = counts[-1], s
                continue
            i = ok.index(False)
            lo, hi = counts[i], counts[i - 1] if i else hi
            break
    else:
        top = hi  # a count that fails
        while True:  # up, 1, 2, 4... more (from 1: doubling), until one meets
            if top >= most:
                raise ValueError(f"{what} not met with {most} replicas")
            counts, c, s = [], top, step
            for _ in range(next(widths, wide)):
                if c >= most:
                    break
                c, s = min(c + s, most), 2 * s
                counts.append(c)
            ok = meets(counts)
            if any(ok):
                i = ok.index(True)
                lo, hi = counts[i - 1] if i else top, counts[i]
                break
            top, step = counts[-1], s
    while hi - lo > 1:  # bisect (with several counts a round: cut in as many parts plus one)
        n = next(widths, wide)
        counts = [(lo + hi) // 2] if n == 1 else sorted({lo + (hi - lo) * j // (n + 1) for j in range(1, n + 1)}
                                                        - {lo, hi})  # fmt: skip
        ok = meets(counts)
        if any(ok):
            i = ok.index(True)
            lo, hi = counts[i - 1] if i else lo, counts[i]
        else:
            lo = counts[-1]
    return hi
