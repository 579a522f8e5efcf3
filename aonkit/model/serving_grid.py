"""Arrival rates of a latency sweep on a fixed grid, and the sweep's rows kept per rate.

A sweep whose rates are fractions of a chosen rate must simulate every point again when the chosen rate moves,
although each row depends only on its own rate (:func:`~aonkit.model.serving_analysis.serving_sweep` draws the
same requests at every rate). :func:`sweep_rates` takes the points from one grid, 20 per decade
(``10 ** (k / 20)`` requests/s), so that a slider dragged along its steps needs the chosen rate and, one step in
three, one or two more; :class:`SweepRows` keeps the rows simulated for the last few settings of everything else.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import pandas as pd

PER_DECADE = 20
"""Grid points per decade of arrival rate (``10 ** (k / 20)``: the ``ServingPanel`` rate slider's own steps)."""


def grid_rate(k: int) -> float:
    """The ``k``-th point of the grid, ``10 ** (k / PER_DECADE)`` requests/s (the same float at every call)."""
    return 10.0 ** (k / PER_DECADE)


def _up_to(k: int, every: int) -> int:
    return -(-k // every) * every


def sweep_rates(rate_per_s: float, low: float = 0.125, fine: float = 0.5, high: float = 2.0, fine_every: int = 3,
                coarse_every: int = 6) -> np.ndarray:
    """A sweep's rates around ``rate_per_s``: the rate itself and grid points from about ``low`` to ``high`` times it.

    Every ``fine_every``-th grid point (a factor of about 1.41 for the defaults) from ``fine`` times the rate up
    to the first at or past ``high`` times it, and below that every ``coarse_every``-th (a factor of 2) from the
    first at or above ``low`` times it (so the lowest is ``low`` to ``2 low`` times the rate): the light loads,
    where the curves are flat, get fewer points (they are also the slowest to simulate). Only the grid's
    multiples of each step are used, so a point stays a point while the rate moves; one within half a step (6%)
    of the rate is left out. Sorted, without repeats.

    Parameters
    ----------
    rate_per_s : float
        The chosen rate, positive and finite.
    low, fine, high : float
        The span, as fractions of the rate (``0 < low <= fine <= 1 <= high``).
    fine_every, coarse_every : int
        Grid steps between two points above and below ``fine`` (``coarse_every`` a multiple of ``fine_every``).

    Returns
    -------
    numpy.ndarray
        float64 rates in requests/s: for the defaults, 7 or 8.

    Raises
    ------
    ValueError
        For a rate that is not positive and finite, or a span or steps out of order.
    """
    r = float(rate_per_s)
    if not (math.isfinite(r) and r > 0):
        raise ValueError(f"rate_per_s must be positive and finite, got {rate_per_s!r}")
    f, c = int(fine_every), int(coarse_every)
    if not (0 < low <= fine <= 1 <= high) or f < 1 or c < f or c % f:
        raise ValueError(f"need 0 < low <= fine <= 1 <= high and coarse_every a multiple of fine_every >= 1, got "
                         f"{low}, {fine}, {high}, {fine_every}, {coarse_every}")  # fmt: skip
    x = PER_DECADE * math.log10(r)
    eps = 0.1  # within a tenth of a grid step (about 1.2%) counts as reached: 10**0.3 is "twice"
    lo_fine = _up_to(math.ceil(x + PER_DECADE * math.log10(fine) - eps), f)
    hi = _up_to(math.ceil(x + PER_DECADE * math.log10(high) - eps), f)
    first = _up_to(math.ceil(x + PER_DECADE * math.log10(low) - eps), c)
    ks = [*range(first, lo_fine, c), *range(lo_fine, hi + 1, f)]
    near = [k for k in ks if abs(k - x) < 0.5]  # a grid point within half a step (6%) of the rate adds little
    return np.unique(np.array([*(grid_rate(k) for k in ks if k not in near), r], dtype=np.float64))


class SweepRows:
    """The rows of a sweep kept per rate, for the last ``settings`` settings of everything else.

    At most ``keep`` rates a setting; the setting used least recently is dropped first, so going back to a
    setting compared a moment ago (another device and back) simulates nothing again.

    Attributes
    ----------
    simulated : int
        Rates simulated so far (a measure of the work saved: a sweep of ``n`` rates all kept adds nothing).
    """

    def __init__(self, keep: int = 512, settings: int = 8) -> None:
        self.keep, self.settings = int(keep), max(1, int(settings))
        self.simulated = 0
        self._kept: OrderedDict[object, dict[float, dict]] = OrderedDict()  # per setting (the latest used last)

    def sweep(self, key: object, rates: np.ndarray, simulate: Callable[[np.ndarray], list[dict]]) -> pd.DataFrame:
        """The sweep over ``rates`` (one row each, in their order): kept rows, and ``simulate(missing)`` for the rest.

        Parameters
        ----------
        key : hashable
            Everything but the rate the rows depend on (a setting); past ``settings`` settings, the one used least
            recently is dropped.
        rates : numpy.ndarray
            The rates wanted.
        simulate : callable
            ``simulate(rates)`` returns :func:`~aonkit.model.serving_analysis.sweep_rows` of those rates (one dict
            per rate, in their order). If it raises, nothing is kept from this call and the error propagates.
        """
        kept = self._kept
        rows = kept.get(key, {})
        missing = np.array([r for r in dict.fromkeys(map(float, rates)) if r not in rows], dtype=np.float64)
        if missing.size:
            got = simulate(missing)
            self.simulated += missing.size
            for rate, row in zip(missing, got):
                rows[float(rate)] = row
        kept[key] = rows
        kept.move_to_end(key)
        while len(kept) > self.settings:
            kept.popitem(last=False)
        out = pd.DataFrame([rows[float(r)] for r in rates])
        while len(rows) > max(self.keep, len(out)):  # the oldest first (a dict keeps the order of insertion)
            del rows[next(iter(rows))]
        return out


class Kept:
    """Results kept by key for the last ``kept`` keys asked for (the one used least recently dropped first).

    ``ServingPanel`` and ``DisaggPanel`` keep their replica searches' answers so: a setting compared a moment ago
    is answered without a simulation; :class:`~aonkit.model.serving_steps.ModelStepTimes` its step-time tables.
    """

    def __init__(self, kept: int = 8) -> None:
        self.kept = max(1, int(kept))
        self._values: OrderedDict[object, object] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __getitem__(self, key: object) -> object:
        """The value kept under ``key`` (now the latest used); KeyError when none is."""
        self._values.move_to_end(key)
        return self._values[key]

    def get(self, key: object, make: Callable[[], object]) -> object:
        """The value kept under ``key`` (now the latest used), or ``make()``'s, kept (unless it raises)."""
        if key in self._values:
            return self[key]
        value = make()
        self.put(key, value)
        return value

    def put(self, key: object, value: object) -> None:
        """Keep ``value`` under ``key`` as the latest used, dropping the least recently used past ``kept``."""
        values = self._values
        values[key] = value
        values.move_to_end(key)
        while len(values) > self.kept:
            values.popitem(last=False)
