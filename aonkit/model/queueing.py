"""Closed-form queues: M/M/1, M/D/1, M/G/1 (Pollaczek-Khinchine), M/M/c (Erlang C), and G/G/c approximated.

Validity, for all of them: one FCFS queue with unlimited room, in steady state
(long runs, warm-up left out), servers of equal speed that serve one request at
a time, and arrival rate ``lam`` below capacity (utilisation ``rho < 1``; at or
above it the waits are infinite and returned as ``inf``). In the serving model
(:func:`~aonkit.model.serving.simulate_serving`) that is ``max_batch=1`` and
``output_tokens=1``, each request's service time being its prefill step, with
Poisson arrivals; M/M/c needs ``routing="central"`` (join-shortest-queue and
round robin hold a queue per replica, which waits longer). Continuous batching
(several sequences per step) is not any of these queues: simulate it.

Times are in seconds, rates per second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class QueueMetrics:
    """Steady-state means of a queue.

    ``wait_s`` is the time in queue before service, ``response_s`` wait plus service, ``queue_length``
    and ``in_system`` the mean numbers waiting and present (Little's law), ``wait_probability`` the
    chance that an arrival waits at all.
    """

    utilization: float
    wait_s: float
    response_s: float
    queue_length: float
    in_system: float
    wait_probability: float


def _metrics(lam: float, service_s: float, servers: int, wait_s: float, p_wait: float) -> QueueMetrics:
    rho = lam * service_s / servers
    if rho >= 1:
        return QueueMetrics(rho, math.inf, math.inf, math.inf, math.inf, 1.0)
    return QueueMetrics(rho, wait_s, wait_s + service_s, lam * wait_s, lam * (wait_s + service_s), p_wait)


def _check(lam: float, service_s: float) -> None:
    if not (lam > 0 and math.isfinite(lam) and service_s > 0 and math.isfinite(service_s)):
        raise ValueError(f"arrival rate and mean service time must be positive and finite, got {lam!r}, {service_s!r}")


def mg1(lam: float, service_s: float, service_cv: float) -> QueueMetrics:
    """M/G/1 by Pollaczek-Khinchine: ``Wq = rho * S * (1 + cv^2) / (2 * (1 - rho))``.

    Exact for Poisson arrivals, any service-time distribution with mean ``service_s`` and coefficient of
    variation ``service_cv``, one FCFS server.
    """
    _check(lam, service_s)
    rho = lam * service_s
    wait = rho * service_s * (1 + service_cv**2) / (2 * (1 - rho)) if rho < 1 else math.inf
    return _metrics(lam, service_s, 1, wait, rho)


def mm1(lam: float, service_s: float) -> QueueMetrics:
    """M/M/1: exponential service, ``Wq = rho * S / (1 - rho)``; see :func:`mm1_wait_quantile` for tails."""
    return mg1(lam, service_s, 1.0)


def md1(lam: float, service_s: float) -> QueueMetrics:
    """M/D/1: every service takes ``service_s``, ``Wq = rho * S / (2 * (1 - rho))``, half of M/M/1's."""
    return mg1(lam, service_s, 0.0)


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival waits in M/M/c with ``offered_load = lam * S`` (Erlang C), 1 if unstable."""
    if servers < 1 or offered_load < 0:
        raise ValueError("servers must be >= 1 and offered_load >= 0")
    if offered_load >= servers:
        return 1.0
    b = 1.0  # Erlang B by its stable recursion, then C from B
    for k in range(1, servers + 1):
        b = offered_load * b / (k + offered_load * b)
    rho = offered_load / servers
    return b / (1 - rho * (1 - b))


def mmc(lam: float, service_s: float, servers: int) -> QueueMetrics:
    """M/M/c: Poisson arrivals, exponential service, ``servers`` servers sharing one FCFS queue.

    ``Wq = C(c, a) * S / (c - a)`` with ``a = lam * S`` and ``C`` from :func:`erlang_c`.
    """
    _check(lam, service_s)
    a = lam * service_s
    c = erlang_c(servers, a)
    return _metrics(lam, service_s, servers, c * service_s / (servers - a) if a < servers else math.inf, c)


def mmc_wait_quantile(lam: float, service_s: float, servers: int, q: float) -> float:
    """The ``q`` quantile of the M/M/c wait: ``P(Wq > t) = C * exp(-(c/S - lam) * t)``; 0 when ``1 - q >= C``."""
    _check(lam, service_s)
    c = erlang_c(servers, lam * service_s)
    if lam * service_s >= servers:
        return math.inf
    return 0.0 if c <= 1 - q else math.log(c / (1 - q)) / (servers / service_s - lam)


def mm1_wait_quantile(lam: float, service_s: float, q: float) -> float:
    """The ``q`` quantile of the M/M/1 wait (:func:`mmc_wait_quantile` with one server)."""
    return mmc_wait_quantile(lam, service_s, 1, q)


def ggc(lam: float, arrival_cv: float, service_s: float, service_cv: float, servers: int) -> QueueMetrics:
    """G/G/c by Allen-Cunneen: M/M/c's wait times ``(ca^2 + cs^2) / 2``.

    An approximation, not exact: good to some 10% at moderate to heavy load (``rho`` above about
    0.5) for arrival and service CVs up to about 2; exact for M/M/c, and for M/G/1 (P-K).
    """
    base = mmc(lam, service_s, servers)
    wait = base.wait_s * (arrival_cv**2 + service_cv**2) / 2
    return _metrics(lam, service_s, servers, wait, base.wait_probability)


def mmc_servers_needed(lam: float, service_s: float, wait_s: float, q: float = 0.99, max_servers: int = 100_000) -> int:
    """Fewest M/M/c servers whose ``q`` quantile of wait is at most ``wait_s``."""
    _check(lam, service_s)
    c = max(1, math.floor(lam * service_s) + 1)
    while mmc_wait_quantile(lam, service_s, c, q) > wait_s:
        c += 1
        if c > max_servers:
            raise ValueError(f"more than {max_servers} servers needed")
    return c
