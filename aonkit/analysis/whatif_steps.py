"""Which nodes a step or window holds, and every step's time and period from one re-time.

Two scopes:

- ``"start"``: the nodes that start in the window, the window being the
  ``ProfilerStep#N`` of every rank (first start to last end). It is the
  step's time on the host's clock: on a trace whose GPU runs behind its host
  it holds the GPU work of earlier steps and not the step's own.
- ``"launched"``: the step's host work and the GPU work that work launched,
  wherever it ran; a collective's hub and transfers go with the kernels that
  arrive at it, and a GPU event whose launch is not in the graph goes by its
  start. Its time is the step's latency, from its first host work to the end
  of its last kernel; with steps that overlap (a GPU running behind), their
  *period* (one step's end to the next's) is the run's cadence, the figure
  a faster step changes. In a job each rank's host nodes go by that rank's
  own ``ProfilerStep#N``.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import MissingInputError
from ..trace import Trace
from .depgraph import KIND_GAP, KIND_GPU, KIND_HUB, DepGraph
from .whatif_rules import Rule

SCOPES = ("start", "launched")
_STEPS: weakref.WeakKeyDictionary[DepGraph, np.ndarray] = weakref.WeakKeyDictionary()
_CODES: weakref.WeakKeyDictionary[DepGraph, tuple] = weakref.WeakKeyDictionary()
EDGE_LAUNCH, EDGE_COLLECTIVE = 2, 5


def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, not {scope!r}")


def own_step_windows(trace: Trace) -> pd.DataFrame:
    """``step``, ``rank``, ``ts_ns``, ``end_ns`` of the host ``ProfilerStep#N`` (a combined job's: every rank's)."""
    from .steps import step_rows

    ev = trace.events
    rows, nums = step_rows(trace)
    own = trace.meta.rank if trace.meta.rank is not None else 0
    rank = ev["rank"].to_numpy()[rows] if "rank" in ev.columns else np.full(len(rows), own)
    ts = ev["ts_ns"].to_numpy()[rows]
    return pd.DataFrame({"step": nums, "rank": rank.astype(np.int64), "ts_ns": ts,
                         "end_ns": ts + np.maximum(ev["dur_ns"].to_numpy()[rows], 0)})  # fmt: skip


def _step_windows(trace: Trace) -> pd.DataFrame:
    """:func:`own_step_windows`, of a job's combined trace read from its ranks while it is not yet made.

    Each rank's windows are shifted as :func:`~aonkit.analysis.combine.combine_ranks` shifts its events
    (combining 64 ranks' events takes seconds).
    """
    from .combine import CombinedLater

    later = trace.__dict__.get("_later") if isinstance(trace, CombinedLater) else None
    if later is None:
        return own_step_windows(trace)
    job, offsets = later
    if hasattr(job, "map"):  # a set: a lazy one's ranks in its workers, remembered
        per = job.map(own_step_windows)
    else:  # a plain mapping of ranks
        per = {r: own_step_windows(job[r]) for r in job}
    parts = [w.assign(rank=np.int64(r), ts_ns=w["ts_ns"] - int(offsets.get(r, 0)),
                      end_ns=w["end_ns"] - int(offsets.get(r, 0))) for r, w in sorted(per.items())]  # fmt: skip
    return pd.concat(parts, ignore_index=True) if parts else own_step_windows(trace)


def _no_step(trace: Trace, step: int) -> MissingInputError:
    steps = sorted(set(_step_windows(trace)["step"].tolist()))
    return MissingInputError(f"no ProfilerStep#{step} in the trace (steps: {steps[:10]})")


def window_nodes(trace: Trace, g: DepGraph, step: int | None, window: tuple[int, int] | None,
                 scope: str = "start") -> np.ndarray | None:  # fmt: skip
    """Which nodes a step or window holds in ``scope`` (None: no step or window, every node).

    A host gap that runs past the window's end is left out: it is a thread waiting for what follows the
    window (the next step's first op), not work of the window. Kept, a worker thread idle across the step's
    end made steps up to 2.2 times their ProfilerStep and ended their critical paths with that wait.
    """
    _check_scope(scope)
    if step is not None and scope == "launched":
        inside = node_steps(trace, g) == step
        if not inside.any() and not (_step_windows(trace)["step"] == step).any():
            raise _no_step(trace, step)
        return inside
    if step is not None:
        w = _step_windows(trace)
        w = w[w["step"] == step]
        if w.empty:
            raise _no_step(trace, step)
        window = (int(w["ts_ns"].min()), int(w["end_ns"].max()))  # every rank's, in a job
    if window is None:
        return None
    inside = (g.start_ns >= window[0]) & (g.start_ns < window[1])
    inside &= ~((g.kind == KIND_GAP) & (g.start_ns + g.dur_ns > window[1]))
    if scope == "start":
        return inside
    return _launched(g, np.where(inside, 0, -1)) == 0


def node_steps(trace: Trace, g: DepGraph) -> np.ndarray:
    """Each node's step in the ``"launched"`` scope (-1: none); kept per graph (do not write to it).

    A host node is in the step of its rank whose ``ProfilerStep#N`` it starts in (a host gap that runs past
    that step's end: in none); GPU work, hubs and transfers as the module says.
    """
    if g in _STEPS:
        return _STEPS[g]
    from .._kernels.step_nodes import window_steps

    w = _step_windows(trace)
    step = np.full(len(g), -1, np.int64)
    if not w.empty and len(g):
        if g.rank is not None:  # a job's graph: its nodes' ranks (hubs: -1); its combined trace need not be made
            rank = g.rank.astype(np.int64)
        else:
            rank = np.full(len(g), trace.meta.rank if trace.meta.rank is not None else 0, np.int64)
        w = w[w["rank"] >= 0].sort_values(["rank", "ts_ns"], kind="stable", ignore_index=True)
        w_rank = w["rank"].to_numpy(np.int64)
        slots = int(w_rank.max()) + 1 if len(w_rank) else 0
        lo = np.searchsorted(w_rank, np.arange(slots), "left")
        hi = np.searchsorted(w_rank, np.arange(slots), "right")
        step = window_steps(rank, g.start_ns, g.dur_ns, g.kind == KIND_GAP, lo, hi, w["ts_ns"].to_numpy(np.int64),
                            w["end_ns"].to_numpy(np.int64), w["step"].to_numpy(np.int64))  # fmt: skip
        step = _launched(g, step)
    step.flags.writeable = False
    _STEPS[g] = step
    return step


def _launched(g: DepGraph, step: np.ndarray) -> np.ndarray:
    """``step`` (by start time) with GPU work moved to its launch's step, hubs and transfers to their arrivals'."""
    from .._kernels.step_nodes import follow_launches

    return follow_launches(g.order, g.indptr, g.src, g.edge_kind, g.kind, step, EDGE_LAUNCH, EDGE_COLLECTIVE,
                           KIND_GPU, KIND_HUB)  # fmt: skip


def _step_codes(trace: Trace, g: DepGraph) -> tuple[np.ndarray, np.ndarray]:
    """The steps that hold nodes (sorted) and each node's index among them (-1: none); kept per graph."""
    if g not in _CODES:
        step = node_steps(trace, g)
        steps = np.unique(step[step >= 0])
        code = np.where(step >= 0, np.searchsorted(steps, step), -1)
        code.flags.writeable = False
        _CODES[g] = (steps, code)
    return _CODES[g]


def median_period_ns(trace: Trace, g: DepGraph, finish: np.ndarray) -> int:
    """The median of the step periods (one step's last finish to the next's) in ``finish``; -1 under two steps."""
    from .._kernels.step_nodes import group_span

    steps, code = _step_codes(trace, g)
    if len(steps) < 2:
        return -1
    return int(np.median(np.diff(group_span(code, len(steps), finish, finish)[1])))


def step_table(trace: Trace, g: DepGraph, start: np.ndarray, finish: np.ndarray, base: tuple) -> pd.DataFrame:
    """Every step's latency and period after the rules (``start``, ``finish``) and under the identity (``base``).

    Returns
    -------
    pandas.DataFrame
        One row per step with nodes, in step order: ``step``, ``start_ns`` and ``end_ns`` (its first start and
        last finish after the rules), ``step_time_ns`` (their difference), ``period_ns`` (its end minus the
        previous step's end; -1 for the first), ``model_ns`` and ``model_period_ns`` (the same with no rule),
        ``measured_ns`` and ``measured_period_ns``.
    """
    steps, code = _step_codes(trace, g)

    def span(s: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from .._kernels.step_nodes import group_span

        return group_span(code, len(steps), s, f)

    def period(hi: np.ndarray) -> np.ndarray:
        return np.concatenate([[-1], np.diff(hi)]) if len(hi) else hi

    lo, hi = span(start, finish)
    mlo, mhi = span(base[0], base[1])
    olo, ohi = span(g.start_ns, g.start_ns + g.dur_ns)
    return pd.DataFrame({"step": steps, "start_ns": lo, "end_ns": hi, "step_time_ns": hi - lo,
                         "period_ns": period(hi), "model_ns": mhi - mlo, "model_period_ns": period(mhi),
                         "measured_ns": ohi - olo, "measured_period_ns": period(ohi)})  # fmt: skip


def step_times(trace: Trace | Mapping[int, Trace], rules: Sequence[Rule | dict] = ()) -> pd.DataFrame:
    """Every ProfilerStep's latency and period with ``rules``, next to the identity's and the measured.

    ``what_if(trace, rules).per_step()``: one re-time of the whole trace or job (see :func:`step_table`).

    Parameters
    ----------
    trace : Trace or TraceSet
        A trace with ``ProfilerStep#N`` annotations, or a job's ranks.
    rules : sequence of Rule or dict
        As :func:`aonkit.analysis.critical_path.what_if` takes them (``[]``: the identity).

    Returns
    -------
    pandas.DataFrame
        As :func:`step_table`; no rows when the trace has no steps.
    """
    from .critical_path import what_if

    return what_if(trace, rules).per_step()
