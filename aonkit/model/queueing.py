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

    Parameters
    ----------
    utilization : float
        ``rho = lam * service_s / servers``, the mean fraction of time each server is busy; at or above
        1 the queue is unstable.
    wait_s : float
        Mean time in queue before service, in seconds (``inf`` when unstable).
    response_s : float
        Mean time in the system, ``wait_s + service_s``, in seconds (``inf`` when unstable).
    queue_length : float
        Mean number of requests waiting, ``lam * wait_s`` (``inf`` when unstable).
    in_system : float
        Mean number of requests waiting or in service, ``lam * response_s`` (``inf`` when unstable).
    wait_probability : float
        Probability that an arrival waits at all, 0 to 1 (1 when unstable).
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


def _check_q(q: float) -> None:
    if not 0 <= q < 1:
        raise ValueError(f"the quantile q must be in [0, 1), got {q!r}")


def _check(lam: float, service_s: float) -> None:
    if not (lam > 0 and math.isfinite(lam) and service_s > 0 and math.isfinite(service_s)):
        raise ValueError(f"arrival rate and mean service time must be positive and finite, got {lam!r}, {service_s!r}")


def mg1(lam: float, service_s: float, service_cv: float) -> QueueMetrics:
    """M/G/1 by Pollaczek-Khinchine: ``Wq = rho * S * (1 + cv^2) / (2 * (1 - rho))``.

    Exact for Poisson arrivals, any service-time distribution with mean ``service_s`` and coefficient of
    variation ``service_cv``, one FCFS server.

    Parameters
    ----------
    lam : float
        Arrival rate in requests per second; positive and finite.
    service_s : float
        Mean service time in seconds; positive and finite.
    service_cv : float
        Coefficient of variation of the service time (standard deviation over mean; 0 for constant
        service, 1 for exponential).

    Returns
    -------
    QueueMetrics
        Steady-state means; when utilisation ``rho >= 1`` the waits, response time and lengths are
        ``inf`` and ``wait_probability`` is 1.
        Below that, ``wait_probability`` is ``rho`` (an arrival waits when the server is busy).

    Raises
    ------
    ValueError
        When ``lam`` or ``service_s`` is not positive and finite.
    """
    _check(lam, service_s)
    rho = lam * service_s
    wait = rho * service_s * (1 + service_cv**2) / (2 * (1 - rho)) if rho < 1 else math.inf
    return _metrics(lam, service_s, 1, wait, rho)


def mm1(lam: float, service_s: float) -> QueueMetrics:
    """M/M/1: exponential service, ``Wq = rho * S / (1 - rho)``; see :func:`mm1_wait_quantile` for tails.

    Assumes Poisson arrivals, exponentially distributed service times and one FCFS server
    (:func:`mg1` with ``service_cv=1``).

    Parameters
    ----------
    lam : float
        Arrival rate in requests per second; positive and finite.
    service_s : float
        Mean service time in seconds; positive and finite.

    Returns
    -------
    QueueMetrics
        Steady-state means; when utilisation ``rho >= 1`` the waits, response time and lengths are
        ``inf`` and ``wait_probability`` is 1.

    Raises
    ------
    ValueError
        When ``lam`` or ``service_s`` is not positive and finite.
    """
    return mg1(lam, service_s, 1.0)


def md1(lam: float, service_s: float) -> QueueMetrics:
    """M/D/1: every service takes ``service_s``, ``Wq = rho * S / (2 * (1 - rho))``, half of M/M/1's.

    Assumes Poisson arrivals, a constant (deterministic) service time and one FCFS server
    (:func:`mg1` with ``service_cv=0``).

    Parameters
    ----------
    lam : float
        Arrival rate in requests per second; positive and finite.
    service_s : float
        Service time of every request in seconds; positive and finite.

    Returns
    -------
    QueueMetrics
        Steady-state means; when utilisation ``rho >= 1`` the waits, response time and lengths are
        ``inf`` and ``wait_probability`` is 1.

    Raises
    ------
    ValueError
        When ``lam`` or ``service_s`` is not positive and finite.
    """
    return mg1(lam, service_s, 0.0)


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival waits in M/M/c with ``offered_load = lam * S`` (Erlang C), 1 if unstable.

    Assumes Poisson arrivals, exponential service times and ``servers`` identical servers sharing one
    FCFS queue with unlimited room. Computed from Erlang B by its stable recursion.

    Parameters
    ----------
    servers : int
        Number of servers ``c``, at least 1.
    offered_load : float
        ``lam * S`` in erlangs (arrival rate times mean service time), at least 0.

    Returns
    -------
    float
        The probability, 0 to 1; 1.0 when ``offered_load >= servers`` (unstable).

    Raises
    ------
    ValueError
        When ``servers < 1`` or ``offered_load < 0``.
    """
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

    Parameters
    ----------
    lam : float
        Arrival rate in requests per second; positive and finite.
    service_s : float
        Mean service time in seconds; positive and finite.
    servers : int
        Number of servers ``c``, at least 1.

    Returns
    -------
    QueueMetrics
        Steady-state means; when utilisation ``rho >= 1`` the waits, response time and lengths are
        ``inf`` and ``wait_probability`` is 1.
        Below that, ``wait_probability`` is Erlang C.

    Raises
    ------
    ValueError
        When ``lam`` or ``service_s`` is not positive and finite, or ``servers < 1``.
    """
    _check(lam, service_s)
    a = lam * service_s
    c = erlang_c(servers, a)
    return _metrics(lam, service_s, servers, c * service_s / (servers - a) if a < servers else math.inf, c)


def mmc_wait_quantile(lam: float, service_s: float, servers: int, q: float) -> float:
    """The ``q`` quantile of the M/M/c wait: ``P(Wq > t) = C * exp(-(c/S - lam) * t)``; 0 when ``1 - q >= C``.

    Assumes Poisson arrivals, exponential service times and ``servers`` identical servers sharing one
    FCFS queue, in steady state.

    Parameters
    ----------
    lam : float
        Arrival rate in requests per second; positive and finite.
    service_s : float
        Mean service time in seconds; positive and finite.
    servers : int
        Number of servers ``c``, at least 1.
    q : float
        The quantile, ``0 <= q < 1`` (e.g. 0.99).

    Returns
    -------
    float
        The wait in queue (seconds) that a fraction ``q`` of arrivals do not exceed; 0 when at least
        that fraction does not wait, ``inf`` when ``lam * service_s >= servers`` (unstable).

    Raises
    ------
    ValueError
        When ``lam`` or ``service_s`` is not positive and finite, ``servers < 1``, or ``q`` is outside
        ``[0, 1)``.
    """
    _check(lam, service_s)
    _check_q(q)
    c = erlang_c(servers, lam * service_s)
    if lam * service_s >= servers:
        return math.inf
    return 0.0 if c <= 1 - q else math.log(c / (1 - q)) / (servers / service_s - lam)


def mm1_wait_quantile(lam: float, service_s: float, q: float) -> float:
    """The ``q`` quantile of the M/M/1 wait (:func:`mmc_wait_quantile` with one server).

    Assumes Poisson arrivals, exponential service times and one FCFS server, in steady state.

    Parameters
    ----------
    lam : float
        Arrival rate in requests per second; positive and finite.
    service_s : float
        Mean service time in seconds; positive and finite.
    q : float
        The quantile, ``0 <= q < 1`` (e.g. 0.99).

    Returns
    -------
    float
        The wait in queue (seconds) that a fraction ``q`` of arrivals do not exceed; 0 when at least
        that fraction does not wait, ``inf`` when ``lam * service_s >= 1`` (unstable).

    Raises
    ------
    ValueError
        When ``lam`` or ``service_s`` is not positive and finite, or ``q`` is outside ``[0, 1)``.
    """
    return mmc_wait_quantile(lam, service_s, 1, q)


def ggc(lam: float, arrival_cv: float, service_s: float, service_cv: float, servers: int) -> QueueMetrics:
    """G/G/c by Allen-Cunneen: M/M/c's wait times ``(ca^2 + cs^2) / 2``.

    An approximation, not exact: good to some 10% at moderate to heavy load (``rho`` above about
    0.5) for arrival and service CVs up to about 2; exact for M/M/c, and for M/G/1 (P-K).

    Assumes renewal arrivals (independent, identically distributed gaps), independent, identically
    distributed service times and ``servers`` identical servers sharing one FCFS queue.

    Parameters
    ----------
    lam : float
        Arrival rate in requests per second; positive and finite.
    arrival_cv : float
        Coefficient of variation of the inter-arrival times (1 for Poisson arrivals).
    service_s : float
        Mean service time in seconds; positive and finite.
    service_cv : float
        Coefficient of variation of the service time (1 for exponential service).
    servers : int
        Number of servers ``c``, at least 1.

    Returns
    -------
    QueueMetrics
        Steady-state means; when utilisation ``rho >= 1`` the waits, response time and lengths are
        ``inf`` and ``wait_probability`` is 1.
        Below that, ``wait_probability`` is M/M/c's Erlang C, not adjusted for the CVs.

    Raises
    ------
    ValueError
        When ``lam`` or ``service_s`` is not positive and finite, or ``servers < 1``.
    """
    base = mmc(lam, service_s, servers)
    wait = base.wait_s * (arrival_cv**2 + service_cv**2) / 2
    return _metrics(lam, service_s, servers, wait, base.wait_probability)


def mmc_servers_needed(lam: float, service_s: float, wait_s: float, q: float = 0.99, max_servers: int = 100_000) -> int:
    """Fewest M/M/c servers whose ``q`` quantile of wait is at most ``wait_s``.

    Assumes Poisson arrivals, exponential service times and servers sharing one FCFS queue
    (:func:`mmc_wait_quantile`). Counts up one server at a time from the fewest that keep the queue
    stable, ``floor(lam * service_s) + 1``.

    Parameters
    ----------
    lam : float
        Arrival rate in requests per second; positive and finite.
    service_s : float
        Mean service time in seconds; positive and finite.
    wait_s : float
        Objective for the ``q`` quantile of the wait in queue, in seconds.
    q : float, default 0.99
        The quantile, ``0 <= q < 1``.
    max_servers : int, default 100000
        Largest server count tried.

    Returns
    -------
    int
        The server count, at least 1.

    Raises
    ------
    ValueError
        When ``lam`` or ``service_s`` is not positive and finite, ``wait_s`` is negative or not a number,
        ``q`` is outside ``[0, 1)``, or more than ``max_servers`` servers would be needed.
    """
    _check(lam, service_s)
    _check_q(q)
    if not wait_s >= 0:  # no server count makes a wait negative: refuse before counting to max_servers
        raise ValueError(f"wait_s must be >= 0 seconds, got {wait_s!r}")
    c = max(1, math.floor(lam * service_s) + 1)
    while mmc_wait_quantile(lam, service_s, c, q) > wait_s:
        c += 1
        if c > max_servers:
            raise ValueError(f"more than {max_servers} servers needed")
    return c
