"""Which rank of a traced job passed the step boundaries last, from what ``aonkit trace`` measured before tracing.

``aonkit trace --job`` and ``--all-ranks`` compare the times at which the ranks passed their last step boundaries
before the trace, so that all start at the same step (:func:`aonkit.live.board_steps.agree`). The same comparison
says how long after the earliest rank each one passes a boundary: in a job whose ranks meet in every step's
collectives, the latest is the rank the others wait for. The job folder keeps it per rank (``boundary_lag_ms``);
:func:`aonkit.load` of the folder puts it in :attr:`aonkit.TraceSet.step_lags`
(:func:`aonkit.sources.traced_job.step_lag_table`), which
:func:`~aonkit.analysis.findings.findings` reads (the ``late_rank`` finding). Unlike
:func:`~aonkit.analysis.collectives.stragglers` it needs no communication kernels in the trace (a CPU job on gloo
has none), but it is measured on each node's own clock: across nodes it includes their clocks' offset. A node is
known by its boot id where the manifest has it, else by its host name
(:func:`aonkit.sources.traced_job.job_clocks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..sources.traced_job import clock_key

LATE_MIN_MS = 1.0
"""A rank is named the latest only when it passes the boundaries at least this long after the earliest."""
NOT_TOGETHER = "the same steps"
"""The words of a note of ``aonkit trace`` saying the ranks may not have traced the same steps (then they do not step
together, and no rank is "the latest")."""


class LateRank(NamedTuple):
    """The rank that passed the step boundaries last (``rank``), the first (``first``) and the gap in ms."""

    rank: int
    first: int
    lag_ms: float
    clocks: int
    """How many clocks (nodes) the ranks with a lag ran on (more than one: the lag includes their clocks' offset)."""

    def sentence(self) -> str:
        """"rank 3 passed each step's boundary 5.1 ms after rank 0 before the trace (the latest: ...)", one line."""
        clock = " (on each node's clock: the gap includes their clocks' offset)" if self.clocks > 1 else ""
        return (f"rank {self.rank} passed each step's boundary {self.lag_ms:.1f} ms after rank {self.first} before "
                f"the trace (the latest: the others wait for it in each step's collectives){clock}")


def latest_rank(table: pd.DataFrame, notes: Sequence[str] = ()) -> LateRank | None:
    """The rank the others waited for at the step boundaries before the trace, from its lags.

    ``table`` is :func:`aonkit.sources.traced_job.step_lag_table` of the job's manifest (``rank``, ``host``,
    ``boundary_lag_ms``).

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
    clocks = len({clock_key(h, b) for h, b in zip(known["host"], known["boot_id"])})  # an unknown one counted once
    return LateRank(int(rank[hi]), int(rank[lo]), float(lag[hi] - lag[lo]), clocks)
