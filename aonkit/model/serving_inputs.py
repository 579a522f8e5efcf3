"""Inputs of the serving model: arrival processes, token-length distributions and engine step times.

Step times are supplied as functions (an analytic LLM model, a fit to a measured
trace) or as linear coefficients, and reach the simulation kernel as tables:
``prefill_time_s(tokens)`` on a uniform grid of prompt tokens per step (every
integer up to 65,536 tokens, exact there) and ``decode_time_s(batch, total_context)``
at every batch size on a uniform grid of ``context_points`` total-context values,
linearly interpolated between (exact for a function linear in context; linear
coefficients are always exact).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

PREFILL_POINTS = 65_537


@dataclass(frozen=True)
class ArrivalProcess:
    """Renewal arrivals at ``rate_per_s``: gamma inter-arrival times with coefficient of variation ``cv``.

    ``cv=1`` is a Poisson process, ``cv=0`` evenly spaced arrivals, ``cv>1`` bursts.
    The first request arrives after one inter-arrival time.

    Parameters
    ----------
    rate_per_s : float
        Mean arrival rate in requests per second (mean gap ``1 / rate_per_s`` seconds); positive and finite.
    cv : float, default 1.0
        Coefficient of variation of the inter-arrival times (standard deviation over mean); finite, at
        least 0.

    Raises
    ------
    ValueError
        When ``rate_per_s`` is not positive and finite, or ``cv`` is negative or not finite.
    """

    rate_per_s: float
    cv: float = 1.0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.rate_per_s) and self.rate_per_s > 0):
            raise ValueError(f"rate_per_s must be a positive number, got {self.rate_per_s!r}")
        if not (np.isfinite(self.cv) and self.cv >= 0):
            raise ValueError(f"cv must be >= 0, got {self.cv!r}")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Arrival times (s) of ``n`` requests."""
        return self.from_draws(self.draws(n, rng), n)

    def draws(self, n: int, rng: np.random.Generator) -> np.ndarray | None:
        """The random numbers :meth:`sample` takes from ``rng`` (None for ``cv=0``, which takes none).

        They depend on ``cv`` only, not on the rate: processes of one ``cv`` at several rates turn the same
        draws into their arrivals with :meth:`from_draws` (common random numbers, drawn once).
        """
        return None if self.cv == 0 else rng.standard_gamma(1.0 / self.cv**2, n)

    def from_draws(self, draws: np.ndarray | None, n: int | None = None) -> np.ndarray:
        """Arrival times from :meth:`draws` of a process with this ``cv``: :meth:`sample`'s, to the bit.

        ``n`` is needed only with ``cv=0`` (no draws).
        """
        mean = 1.0 / self.rate_per_s
        if draws is None:
            return np.cumsum(np.full(n, mean))
        shape = 1.0 / self.cv**2
        return np.cumsum(draws * (mean / shape))


@dataclass(frozen=True, eq=False)
class Lengths:
    """A distribution of token counts (each at least 1); build one with the class methods (compared by identity).

    Parameters
    ----------
    kind : {"fixed", "empirical", "geometric", "uniform", "lognormal"}
        The distribution.
    params : tuple, default ()
        Its parameters, as the class methods set them: ``(tokens,)`` for ``fixed``, ``(values,)`` (a 1-D
        int64 array) for ``empirical``, ``(mean,)`` for ``geometric``, ``(low, high)`` for ``uniform`` and
        ``(mean, cv)`` for ``lognormal``; token counts and means at least 1, ``low <= high``, ``cv >= 0``.
    cap : int, optional
        Draws above it are ``cap`` (:meth:`capped`; an engine stops a request at its ``max_new_tokens``).

    Raises
    ------
    ValueError
        When ``kind`` is unknown or ``params`` break its constraints.
    """

    kind: str
    params: tuple = ()
    cap: int | None = None

    @classmethod
    def fixed(cls, tokens: int) -> Lengths:
        """Always ``tokens``."""
        return cls("fixed", (int(tokens),))

    @classmethod
    def empirical(cls, values: object) -> Lengths:
        """Drawn uniformly, with replacement, from ``values`` (e.g. lengths recorded from production)."""
        return cls("empirical", (np.asarray(values, dtype=np.int64),))

    @classmethod
    def geometric(cls, mean: float) -> Lengths:
        """Geometric on 1, 2, ... with ``mean`` (the discrete exponential: memoryless)."""
        return cls("geometric", (float(mean),))

    @classmethod
    def uniform(cls, low: int, high: int) -> Lengths:
        """Integers ``low`` to ``high`` inclusive, equally likely."""
        return cls("uniform", (int(low), int(high)))

    @classmethod
    def lognormal(cls, mean: float, cv: float) -> Lengths:
        """Lognormal with ``mean`` and coefficient of variation ``cv``, rounded up to an integer."""
        return cls("lognormal", (float(mean), float(cv)))

    def capped(self, tokens: int) -> Lengths:
        """These lengths, each at most ``tokens`` (those drawn above it are ``tokens``; the draws are the same)."""
        return Lengths(self.kind, self.params, int(tokens))

    def share_over(self, tokens: int) -> float:
        """The probability that a draw (before any cap) exceeds ``tokens``: exact for each kind.

        With ``tokens`` a client's ``max_new_tokens``, the share of outputs an engine stops there.
        """
        p, t = self.params, int(tokens)
        if self.kind == "fixed":
            return float(p[0] > t)
        if self.kind == "empirical":
            return float(np.mean(p[0] > t))
        if self.kind == "geometric":
            return float((1.0 - 1.0 / p[0]) ** max(t, 0))
        if self.kind == "uniform":
            return float(min(1.0, max(0.0, (p[1] - t) / (p[1] - p[0] + 1))))
        if p[1] == 0:  # lognormal with no spread: its mean, rounded up
            return float(np.ceil(p[0]) > t)
        if t <= 0:
            return 1.0
        sigma = np.sqrt(np.log1p(p[1] ** 2))  # ceil(x) > t exactly when x > t, t whole
        return float(0.5 * math.erfc((np.log(t) - (np.log(p[0]) - sigma**2 / 2)) / (sigma * np.sqrt(2.0))))

    def __post_init__(self) -> None:
        if self.cap is not None and self.cap < 1:
            raise ValueError(f"a cap of lengths must be >= 1, got {self.cap!r}")
        p = self.params
        ok = {
            "fixed": lambda: p[0] >= 1,
            "empirical": lambda: p[0].ndim == 1 and p[0].size > 0 and p[0].min() >= 1,
            "geometric": lambda: np.isfinite(p[0]) and p[0] >= 1,
            "uniform": lambda: 1 <= p[0] <= p[1],
            "lognormal": lambda: np.isfinite(p[0]) and p[0] >= 1 and np.isfinite(p[1]) and p[1] >= 0,
        }.get(self.kind)
        if ok is None:
            raise ValueError(f"unknown length distribution {self.kind!r}")
        if not ok():
            raise ValueError(f"{self.kind} lengths need token counts >= 1, got {p!r}")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` token counts (int64)."""
        v = self._draw(n, rng)
        return v if self.cap is None else np.minimum(v, self.cap)

    def _draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        p = self.params
        if self.kind == "fixed":
            return np.full(n, p[0], np.int64)
        if self.kind == "empirical":
            return p[0][rng.integers(0, p[0].size, n)]
        if self.kind == "geometric":
            return rng.geometric(1.0 / p[0], n).astype(np.int64)
        if self.kind == "uniform":
            return rng.integers(p[0], p[1] + 1, n, dtype=np.int64)
        sigma2 = np.log1p(p[1] ** 2)  # lognormal
        return np.ceil(rng.lognormal(np.log(p[0]) - sigma2 / 2, np.sqrt(sigma2), n)).astype(np.int64)


TimeSpec = Callable[..., object] | float | tuple


@dataclass(frozen=True)
class StepTime:
    """Duration of one engine step.

    ``overhead_s + prefill_time_s(P) [if P > 0] + decode_time_s(b, C) [if b > 0]`` for a step with
    ``P`` prompt tokens and ``b`` decoding sequences attending to ``C`` tokens in all (prompt plus
    tokens generated so far, summed over the batch). ``prefill_time_s`` is a function of tokens or
    linear coefficients ``(a, b)`` for ``a + b*P``; ``decode_time_s`` a function of (batch, context)
    or ``(a, b, c)`` for ``a + b*batch + c*context``. Functions should accept arrays (they are
    called once on a grid); scalar-only functions are called point by point.

    Nothing is checked at construction: :meth:`tables` (run by
    :func:`~aonkit.model.serving.simulate_serving`) raises ValueError when coefficients have the wrong
    count, a time is negative or not finite on the simulated range, or ``overhead_s`` is negative.

    Parameters
    ----------
    prefill_time_s : callable, float or tuple of 2 floats, default (0.0, 0.0)
        Seconds of a step's prefill part as a function of its prompt tokens ``P``, a constant in
        seconds, or coefficients ``(a, b)`` of ``a + b*P`` (``a`` in s, ``b`` in s per token).
    decode_time_s : callable, float or tuple of 3 floats, default (0.0, 0.0, 0.0)
        Seconds of a step's decode part as a function of (batch, total context), a constant in seconds,
        or coefficients ``(a, b, c)`` of ``a + b*batch + c*context`` (s, s per sequence, s per token).
    overhead_s : float, default 0.0
        Fixed seconds added to every step, at least 0.
    """

    prefill_time_s: TimeSpec = (0.0, 0.0)
    decode_time_s: TimeSpec = (0.0, 0.0, 0.0)
    overhead_s: float = 0.0

    def tables(self, max_tokens: int, max_batch: int, max_context: int,
               context_points: int = 513) -> tuple[np.ndarray, float, float, np.ndarray, float, float]:
        """(prefill table, x0, h, decode table (batch x context), x0, h) for the kernel."""
        pf = self.prefill_time_s
        if isinstance(pf, tuple):
            a, b = _coeffs(pf, 2, "prefill_time_s")
            x = _grid(max_tokens, 2)
            pf_tab = a + b * x
        else:
            x = _grid(max_tokens, PREFILL_POINTS)
            pf_tab = _evaluate(pf, (x,))
        dc = self.decode_time_s
        batch = np.arange(1, max_batch + 1, dtype=np.float64)[:, None]
        if isinstance(dc, tuple):
            a, b, c = _coeffs(dc, 3, "decode_time_s")
            ctx = _grid(max_context, 2)
            dc_tab = a + b * batch + c * ctx[None, :]
        else:
            ctx = _grid(max_context, max(2, context_points))
            dc_tab = _evaluate(dc, (batch, ctx[None, :]))
        for name, tab in (("prefill_time_s", pf_tab), ("decode_time_s", dc_tab)):
            if not np.all(np.isfinite(tab)) or np.any(tab < 0):
                raise ValueError(f"{name} must give finite times >= 0 on the range simulated")
        if not (np.isfinite(self.overhead_s) and self.overhead_s >= 0):
            raise ValueError(f"overhead_s must be >= 0, got {self.overhead_s!r}")
        dc_tab = np.vstack([np.zeros((1, dc_tab.shape[1])), dc_tab])  # batch 0: never used
        return (pf_tab[None, :], 1.0, float(x[1] - x[0]), np.ascontiguousarray(dc_tab), 1.0, float(ctx[1] - ctx[0]))

    def with_prefix(self, tokens: int) -> StepTime:
        """The step time of decoding sequences that each attend to ``tokens`` more context than is counted.

        For a prompt prefix held once in a prefix cache (``prefix_cache`` of
        :func:`~aonkit.model.serving.simulate_serving`): the simulation counts each sequence's own tokens, and a
        decode step of ``b`` sequences attends to ``b * tokens`` more. Linear coefficients stay exact (``c *
        tokens`` joins the per-sequence term), a function is called at the larger context; the prefill part is
        unchanged (it counts the tokens a step computes).
        """
        dc = self.decode_time_s
        if int(tokens) == 0 or not (isinstance(dc, tuple) or callable(dc)):  # (a constant has no context)
            return self
        if isinstance(dc, tuple):
            a, b, c = _coeffs(dc, 3, "decode_time_s")
            return replace(self, decode_time_s=(a, b + c * int(tokens), c))
        return replace(self, decode_time_s=_MoreContext(dc, int(tokens)))


@dataclass(frozen=True)
class _MoreContext:
    """A decode time function called with ``tokens`` more context per sequence (equal when its parts are)."""

    f: Callable
    tokens: int

    def __call__(self, batch, context):  # noqa: D102
        return self.f(batch, context + batch * self.tokens)


def _grid(top: int, points: int) -> np.ndarray:
    """Uniform grid from 1 to at least ``top``: every integer when it fits in ``points``."""
    top = max(int(top), 2)
    if top <= points:
        return np.arange(1, top + 1, dtype=np.float64)
    return np.linspace(1.0, float(top), points)


def _coeffs(spec: tuple, k: int, name: str) -> tuple[float, ...]:
    vals = tuple(float(v) for v in spec)
    if len(vals) != k:
        raise ValueError(f"{name} as coefficients takes {k} numbers, got {spec!r}")
    return vals


def _evaluate(f: TimeSpec, args: tuple[np.ndarray, ...]) -> np.ndarray:
    """``f`` on a broadcast grid: vectorised if it can be, else point by point."""
    shape = np.broadcast_shapes(*(a.shape for a in args))
    if not callable(f):
        return np.full(shape, float(f))  # a constant
    try:
        out = np.broadcast_to(np.asarray(f(*args), dtype=np.float64), shape).copy()
    except (TypeError, ValueError):
        out = np.vectorize(lambda *xs: float(f(*xs)), otypes=[np.float64])(*args)
    return out


def reserved_output(max_new_tokens: int | None, output: np.ndarray) -> int:
    """The serving kernel's ``resv`` for ``max_new_tokens`` (0 for None), checked against the output lengths."""
    if max_new_tokens is None:
        return 0
    if int(max_new_tokens) != max_new_tokens or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    m = int(max_new_tokens)
    over = output > m
    if over.any():
        raise ValueError(f"{int(over.sum())} of {output.size} output lengths exceed max_new_tokens={m} (the longest "
                         f"{int(output.max())}): an engine stops a request there; cap them (Lengths.capped({m}) or "
                         f"numpy.minimum)")
    return m


def draw_lengths(spec: int | Lengths | object, n: int, rng: np.random.Generator, name: str) -> np.ndarray:
    """``n`` token counts from ``spec`` (fixed, a :class:`Lengths` to draw from, or one per request), checked."""
    if isinstance(spec, Lengths):
        v = spec.sample(n, rng)
    elif np.ndim(spec) == 0:
        v = np.full(n, int(spec), np.int64)
    else:
        v = np.asarray(spec)
        if v.shape != (n,):
            raise ValueError(f"{name}: {v.shape} values for {n} requests (use Lengths.empirical to draw from them)")
        if not np.all(v == np.round(v)):
            raise ValueError(f"{name} must be whole token counts")
        v = v.astype(np.int64)
    if v.min() < 1:
        raise ValueError(f"{name} must be >= 1")
    return np.ascontiguousarray(v, dtype=np.int64)
