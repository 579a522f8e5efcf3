"""The latency floor of a serving simulation: every request served alone, as no count of replicas betters.

A request's latencies can only grow when others share its replica: its prompt's steps then carry other prompts'
tokens and decode tokens (a step takes longer with more of either), a chunked prompt gets at most the budget it
would get alone, and its decode steps carry more sequences and more context. So each request's TTFT, TPOT,
end-to-end time and queueing time alone are at most what they are in any run of the same requests on any number of
replicas, and so are their means and percentiles. :func:`alone` simulates that: the same requests, in the same
order, each arriving :data:`GAP_S` after the one before. A search for the fewest replicas meeting an objective that
the floor already misses can stop at once (:func:`~aonkit.model.replicas_needed`,
:func:`~aonkit.model.pools_needed`) instead of trying every count up to its most.
"""

from __future__ import annotations

import math

import numpy as np

from .serving import Prepared, kernel_output, rerun
from .serving_stats import METRICS, PERCENTILES, latencies, summary_in_arrival_order

__all__ = ["GAP_S", "alone", "beyond_floor", "served_apart", "spaced"]

GAP_S = 1e4
"""Seconds between two requests' arrivals in :func:`alone` (a request served longer overlaps the next: no floor)."""
LATENCIES = ("queue_", "ttft_", "tpot_", "e2e_")
"""Summary keys the floor bounds: latencies (throughput and counts are not)."""


def spaced(n: int) -> np.ndarray:
    """Arrival times of ``n`` requests :data:`GAP_S` apart, from 0 (in arrival order)."""
    return np.arange(n, dtype=np.float64) * GAP_S


def served_apart(arr: np.ndarray, fin: np.ndarray) -> bool:
    """Whether each served request (finish not NaN) finished before the next one arrived (arrays in arrival order)."""
    served = ~np.isnan(fin[:-1])
    return bool(np.all(fin[:-1][served] < arr[1:][served]))


def alone(run: Prepared) -> dict | None:
    """The summary of ``run``'s requests each served alone on one replica (None if one outlasts :data:`GAP_S`).

    The same requests in the same order (so the same ones measured after the warm-up), refused alike; its latency
    keys are floors for any replica count of ``run``'s engine.
    """
    from .._kernels.serving import simulate

    o = run.order
    arr, output = spaced(run.arrivals.size), run.output[o]
    one = rerun(run, replicas=1)
    start, first, fin = simulate(arr, run.prompt[o], kernel_output(run)[o], *one.kernel_args, True, *run.spec)[:3]
    if not served_apart(arr, fin):
        return None
    k = int(np.floor(run.warmup * arr.size))
    lat = latencies(arr[k:], output[k:], start[k:], first[k:], fin[k:])
    return summary_in_arrival_order(arr, fin, output, dict(zip(METRICS, lat)), k, PERCENTILES)


def beyond_floor(floor: dict | None, metric: str, slo_s: float) -> str:
    """Why no replica count can meet ``metric <= slo_s``, when the floor shows it ("" when it does not).

    Only latency keys are bounded by the floor; a margin of 10 us (and a billionth of the objective) covers the
    rounding of the spaced arrival times.
    """
    if floor is None or not metric.startswith(LATENCIES):
        return ""
    v = floor.get(metric, math.nan)
    if not (math.isfinite(v) and v > slo_s + 1e-5 + 1e-9 * abs(slo_s)):
        return ""
    return f"served alone, the requests' {metric} is {v:.4g} s"
