"""Capacity questions answered with :func:`~aonkit.model.serving.simulate_serving`.

* :func:`serving_sweep`: latency percentiles and throughput against arrival rate.
* :func:`saturation_knee`: where a sweep's latency turns up and its throughput stops following the load.
* :func:`replicas_needed`: the fewest replicas that meet a latency objective at one arrival rate.

Every simulation of one call draws from the same seed (common random numbers), so
neighbouring rates or replica counts see the same requests, scaled in time, and
the curves are smooth and monotone up to the policy's own effects.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from .serving import simulate_serving
from .serving_inputs import ArrivalProcess


def serving_sweep(rates_per_s: object, prompt_tokens: object, output_tokens: object, *, n_requests: int,
                  arrival_cv: float = 1.0, seed: int = 0, warmup: float = 0.1, **engine: object) -> pd.DataFrame:
    """One :func:`serving_summary` row per arrival rate (column ``arrival_rate_per_s``), plus ``busy_fraction``.

    ``engine`` holds the other arguments of :func:`simulate_serving` (``step_time``, ``replicas``,
    ``max_batch``, ``token_budget``, ``chunked_prefill``, ``routing``). Arrivals are a renewal process
    with gamma gaps of coefficient of variation ``arrival_cv`` (1: Poisson).
    """
    rows = []
    for rate in np.atleast_1d(np.asarray(rates_per_s, dtype=np.float64)):
        res = simulate_serving(ArrivalProcess(float(rate), arrival_cv), prompt_tokens, output_tokens,
                               n_requests=n_requests, seed=seed, warmup=warmup, **engine)
        rows.append({"arrival_rate_per_s": float(rate), **res.summary,
                     "busy_fraction": float(res.replicas["busy_fraction"].mean())})
    return pd.DataFrame(rows)


def saturation_knee(sweep: pd.DataFrame, metric: str = "ttft_p99_s", factor: float = 2.0,
                    efficiency: float = 0.95) -> dict:
    """The knee of a :func:`serving_sweep`, and the capacity it shows.

    ``knee_rate_per_s`` is the highest swept rate, going up from the lowest, before the first rate at
    which ``metric`` exceeds ``factor`` times its value at the lowest rate or throughput falls below
    ``efficiency`` times the arrival rate (NaN if even the lowest rate fails). ``capacity_per_s`` is
    the highest throughput in the sweep: the saturation throughput once the sweep goes past the knee
    (otherwise a lower bound). ``knee_metric_s`` is ``metric`` at the knee.
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
                    warmup: float = 0.1, max_replicas: int = 4096, **engine: object) -> ReplicaPlan:
    """Fewest replicas whose simulated ``metric`` is at most ``slo_s`` at ``rate_per_s``.

    Doubles the count until the objective holds, then bisects; this assumes ``metric`` does not grow
    with more replicas (true of the routings here up to sampling noise, which common random numbers
    keep small). Raises ValueError past ``max_replicas``.
    """
    tried: dict[int, dict] = {}

    def meets(c: int) -> bool:
        if c not in tried:
            res = simulate_serving(ArrivalProcess(rate_per_s, arrival_cv), prompt_tokens, output_tokens,
                                   n_requests=n_requests, replicas=c, seed=seed, warmup=warmup, **engine)
            tried[c] = {"replicas": c, **res.summary, "busy_fraction": float(res.replicas["busy_fraction"].mean())}
        return tried[c][metric] <= slo_s

    hi = 1
    while not meets(hi):
        if hi >= max_replicas:
            raise ValueError(f"{metric} <= {slo_s} s not met with {max_replicas} replicas")
        hi = min(2 * hi, max_replicas)
    lo = hi // 2  # fails (or 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return ReplicaPlan(hi, pd.DataFrame(sorted(tried.values(), key=lambda r: r["replicas"])))
