"""The first things to look at in a trace or a job, as a table of findings with their numbers.

Each finding comes from one of the analyses (named in ``source``) and holds
only aonkit's own numbers: the text names ranks, steps and causes, never an
event name or metadata from the trace. Checks, in order:

* ``straggler``: a rank that arrives last at most of the job's collectives
  (:func:`~aonkit.analysis.collectives.stragglers`) and the wait it imposes;
* ``late_rank``: in a job traced by ``aonkit trace --job`` or ``--all-ranks``, the rank that passed the step
  boundaries last before the trace, by how much (:func:`~aonkit.analysis.step_lags.latest_rank`; needs no
  communication kernels, so it names the rank a CPU job on gloo waits for too);
* ``exposed_communication``: communication time not overlapped by
  computation, per rank (:func:`~aonkit.analysis.collectives.exposed_communication`);
* ``gpu_idle``: the GPU's idle share of its span and its main cause, per rank
  (:func:`~aonkit.analysis.idle.idle_summary`);
* ``slow_step``: profiler steps much longer than the rank's median step
  (:func:`~aonkit.analysis.steps.profiler_steps`);
* ``below_roof``: an op (all its calls) that takes a fair share of the GPU
  time at a small fraction of its roofline bound, memory or compute
  (:func:`~aonkit.analysis.roofline.roofline_table`; needs recorded shapes).
  The text gives the op's kind and bound, not its name: the name is the
  table's ``name`` for that op.

A finding is listed when it passes its threshold (the ``*_MIN`` constants).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..trace import Trace
from ..units import fmt_ns

COLUMNS = ["finding", "rank", "value", "text", "source"]
STRAGGLER_MIN = 0.5
"""A rank is a straggler when it arrives last at more than this share of the collectives (two ranks or more)."""
EXPOSED_MIN = 0.10
"""Exposed communication listed from this share of the communication time."""
IDLE_MIN = 0.05
"""GPU idle listed from this share of the GPU span."""
SLOW_STEP_MIN = 1.10
"""A step is slow from this multiple of the rank's median step time."""
BELOW_ROOF_MAX = 0.25
"""An op is far below its roof when its calls reach at most this fraction of it (time-weighted)."""
BELOW_ROOF_SHARE_MIN = 0.02
"""... and take at least this share of the rank's kernel time."""

_CAUSES = {"host_wait_ns": "waiting for the host (launches came late)",
           "kernel_wait_ns": "short gaps between kernels", "other_ns": "other gaps"}  # fmt: skip


def _row(finding: str, rank: int | None, value: float, text: str, source: str) -> dict:
    return {"finding": finding, "rank": -1 if rank is None else int(rank), "value": float(value), "text": text,
            "source": source}


def _per_trace(trace: Trace, rank: int | None) -> list[dict]:
    from .collectives import exposed_communication
    from .idle import idle_summary
    from .steps import profiler_steps

    out = []
    who = "" if rank is None else f"rank {rank}: "
    exp = exposed_communication(trace)
    comm, exposed = float(exp["comm_ns"].sum()), float(exp["exposed_comm_ns"].sum())
    if comm > 0 and exposed / comm >= EXPOSED_MIN:
        out.append(_row("exposed_communication", rank, exposed / comm,
                        f"{who}{100 * exposed / comm:.0f}% of the communication ({fmt_ns(exposed)} of {fmt_ns(comm)}) "
                        "is not overlapped by computation", "collectives.exposed_communication"))  # fmt: skip
    idle = idle_summary(trace)
    span, idle_ns = float(idle["span_ns"].sum()), float(idle["idle_ns"].sum())
    if span > 0 and idle_ns / span >= IDLE_MIN:
        causes = idle[list(_CAUSES)].sum().astype(float)  # float: 100 * a clock-garbage sum must not wrap
        main = str(causes.idxmax())
        out.append(_row("gpu_idle", rank, idle_ns / span,
                        f"{who}the GPU idles {100 * idle_ns / span:.0f}% of its span ({fmt_ns(idle_ns)}), "
                        f"{100 * causes[main] / idle_ns:.0f}% of it {_CAUSES[main]}", "idle.idle_summary"))  # fmt: skip
    steps = profiler_steps(trace)
    if len(steps) >= 3:
        median = float(np.median(steps["dur_ns"]))
        for s in steps.itertuples():
            if median > 0 and s.dur_ns >= SLOW_STEP_MIN * median:
                ratio = s.dur_ns / median
                text = f"{who}step {s.step} takes {fmt_ns(s.dur_ns)}, {ratio:.2f}x the median ({fmt_ns(median)})"
                out.append(_row("slow_step", rank, ratio, text, "steps.profiler_steps"))
    out += _below_roof(trace, who, rank)
    return out


def _below_roof(trace: Trace, who: str, rank: int | None) -> list[dict]:
    from .roofline import roofline_table

    roof = roofline_table(trace)
    kernel_ns = float(trace.kernels["dur_ns"].clip(lower=0).sum())
    if not len(roof) or kernel_ns <= 0:
        return []
    roof = roof[roof["bound"].isin(["memory", "compute"]) & (roof["dur_ns"] > 0) & (roof["roofline_ns"] > 0)]
    by = roof.groupby(["name", "bound"], observed=True).agg(
        calls=("dur_ns", "size"), dur_ns=("dur_ns", "sum"), roof_ns=("roofline_ns", "sum"), kind=("kind", "first"))
    by = by[(by["roof_ns"] <= BELOW_ROOF_MAX * by["dur_ns"]) & (by["dur_ns"] >= BELOW_ROOF_SHARE_MIN * kernel_ns)]
    out = []
    for (_, bound), r in by.sort_values("dur_ns", ascending=False).iterrows():
        frac = r["roof_ns"] / r["dur_ns"]
        text = (f"{who}{r['calls']} calls of one {bound}-bound {r['kind']} op run at {100 * frac:.0f}% of the "
                f"{bound} roof: {fmt_ns(r['dur_ns'])} ({100 * r['dur_ns'] / kernel_ns:.0f}% of the kernel time) "
                f"where the roof allows {fmt_ns(r['roof_ns'])}")  # fmt: skip
        out.append(_row("below_roof", rank, frac, text, "roofline.roofline_table"))
    return out


def findings(subject: Trace | Mapping[int, Trace]) -> pd.DataFrame:
    """What to look at first in a trace or a job (a TraceSet of ranks): one row per finding, in check order.

    Returns
    -------
    pandas.DataFrame
        ``finding``, ``rank`` (-1: a single trace without a rank), ``value`` (the share or ratio the
        finding is about), ``text`` (one sentence with the numbers) and ``source`` (the analysis it comes from).
        Empty when nothing passes its threshold.
    """
    rows: list[dict] = []
    if isinstance(subject, Trace):
        rows += _per_trace(subject, subject.meta.rank)
        return pd.DataFrame(rows, columns=COLUMNS)
    if len(subject) >= 2:
        from .collectives import stragglers

        s = stragglers(subject)
        for r in s.itertuples():
            if r.share_last > STRAGGLER_MIN:
                rows.append(_row("straggler", r.rank, r.share_last,
                                 f"rank {r.rank} arrives last at {100 * r.share_last:.0f}% of {r.collectives} "
                                 f"collectives, {fmt_ns(r.median_late_ns)} late (median); the others wait "
                                 f"{fmt_ns(r.imposed_wait_ns)} for it in all", "collectives.stragglers"))  # fmt: skip
    if getattr(subject, "step_lags", None) is not None:
        rows += _late_rank(subject)
    for rank in sorted(subject):
        rows += _per_trace(subject[rank], rank)
    return pd.DataFrame(rows, columns=COLUMNS)


def _late_rank(job: Mapping[int, Trace]) -> list[dict]:
    """The ``late_rank`` finding of a traced job; its value is the lag's share of the earliest rank's median step."""
    from .step_lags import latest_rank
    from .steps import profiler_steps

    late = latest_rank(job.step_lags, job.trace_notes)  # type: ignore[attr-defined]
    if late is None:
        return []
    steps = profiler_steps(job[late.first]) if late.first in job else None
    step_ns = float(np.median(steps["dur_ns"])) if steps is not None and len(steps) else np.nan
    share = late.lag_ms * 1e6 / step_ns if step_ns > 0 else np.nan
    of_step = f" ({100 * share:.0f}% of its median traced step, {fmt_ns(step_ns)})" if share == share else ""
    clock = "; on each node's clock, so the gap includes their clocks' offset" if late.clocks > 1 else ""
    text = (f"rank {late.rank} passed each step's boundary {fmt_ns(late.lag_ms * 1e6)} after rank {late.first} "
            f"before the trace{of_step}: the others wait about that long for it in each step's collectives{clock}")
    return [_row("late_rank", late.rank, share, text, "step_lags.latest_rank")]
