"""Which rank of a traced job passed the step boundaries last, from what ``aonkit trace`` measured before tracing.

``aonkit trace --job`` and ``--all-ranks`` compare the times at which the ranks passed their last step boundaries
before the trace, so that all start at the same step (:func:`aonkit.live.board_steps.agree`). The same comparison
says how long after the earliest rank each one passes a boundary: in a job whose ranks meet in every step's
collectives, the latest is the rank the others wait for. The job folder keeps it per rank (``boundary_lag_ms``);
:func:`aonkit.live.load_traced_job` puts it in :attr:`aonkit.TraceSet.step_lags`, which
:func:`~aonkit.analysis.findings.findings` reads (the ``late_rank`` finding). Unlike
:func:`~aonkit.analysis.collectives.stragglers` it needs no communication kernels in the trace (a CPU job on gloo
has none), but it is measured on each host's own clock: across nodes it includes their clocks' offset.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

LATE_MIN_MS = 1.0
"""A rank is named the latest only when it passes the boundaries at least this long after the earliest."""
NOT_TOGETHER = "the same steps"
"""The words of a note of ``aonkit trace`` saying the ranks may not have traced the same steps (then they do not step
together, and no rank is "the latest")."""
COLUMNS = {"rank": np.int64, "host": object, "boundary_lag_ms": np.float64}


class LateRank(NamedTuple):
    """The rank that passed the step boundaries last (``rank``), the first (``first``) and the gap in ms."""

    rank: int
    first: int
    lag_ms: float
    hosts: int
    """How many hosts the ranks with a lag ran on (more than one: the lag includes their clocks' offset)."""


def step_lag_table(ranks: Sequence[dict]) -> pd.DataFrame:
    """The ranks of a job manifest (``aonkit-trace.meta.json``'s ``ranks``) as a table.

    Parameters
    ----------
    ranks : sequence of dict
        One per rank: ``rank`` (int; None when the process had none, kept as -1), ``host`` (str, optional) and
        ``boundary_lag_ms`` (a number, or None when not measured).

    Returns
    -------
    pandas.DataFrame
        ``rank``, ``host`` ("" when not recorded) and ``boundary_lag_ms`` (NaN when not measured), sorted by rank.

    Raises
    ------
    ValueError
        When a rank is not a whole number, or a lag is neither a finite number nor None.
    """
    rows = []
    for r in ranks:
        rank, lag, host = r.get("rank", -1), r.get("boundary_lag_ms"), r.get("host")
        rank = -1 if rank is None else rank
        if isinstance(rank, bool) or not isinstance(rank, int):
            raise ValueError(f"a rank must be a whole number, got {rank!r}")
        if lag is not None and (isinstance(lag, bool) or not isinstance(lag, (int, float)) or not math.isfinite(lag)):
            raise ValueError(f"rank {rank}: boundary_lag_ms must be a finite number or null, got {lag!r}")
        rows.append((rank, host if isinstance(host, str) else "", math.nan if lag is None else float(lag)))
    table = pd.DataFrame(rows, columns=list(COLUMNS)).astype(COLUMNS)
    return table.sort_values("rank", kind="stable", ignore_index=True)


def latest_rank(table: pd.DataFrame, notes: Sequence[str] = ()) -> LateRank | None:
    """The rank the others waited for at the step boundaries before the trace, from :func:`step_lag_table`.

    None when fewer than two lags are known, all are within :data:`LATE_MIN_MS`, or a note of the trace says the
    ranks may not have traced the same steps (:data:`NOT_TOGETHER`). Ties go to the lowest rank.
    """
    known = table[table["boundary_lag_ms"].notna()]
    if len(known) < 2 or any(NOT_TOGETHER in n for n in notes):
        return None
    lag = known["boundary_lag_ms"].to_numpy()
    rank = known["rank"].to_numpy()
    hi, lo = int(np.argmax(lag)), int(np.argmin(lag))  # the first of equal values: the lowest rank (sorted)
    if lag[hi] - lag[lo] < LATE_MIN_MS:
        return None
    hosts = known["host"].where(known["host"] != "", "?").nunique()
    return LateRank(int(rank[hi]), int(rank[lo]), float(lag[hi] - lag[lo]), int(hosts))
