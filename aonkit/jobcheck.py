"""Whether several traces are one job: the rules :meth:`aonkit.TraceSet.from_traces` enforces.

A job is one trace per rank, all from one run. Evidence that files come from
different runs, each enough to refuse them as one job:

- some name a rank and some do not, or none does (unrelated single-GPU runs);
- different ``distributedInfo.world_size`` or backend, or some files carry
  ``distributedInfo`` and others do not;
- a rank outside its world (``rank >= world_size``);
- different run ids (``group_trace_id``, ``mast_job_name``,
  ``mast_job_attempt``, ``tw_job``: keys some profilers add);
- absolute start times more than a day apart.

Hosts are not a criterion: the ranks of a multi-node job run on different
hosts. Messages name files and keys, never the values of trace metadata (it
can hold secrets), except world sizes.
"""

from __future__ import annotations

from pathlib import Path

from .errors import JobError
from .schema import TS_MISSING
from .trace import Trace

RUN_ID_KEYS: tuple[str, ...] = ("group_trace_id", "mast_job_name", "mast_job_attempt", "tw_job")
"""Top-level keys that identify a run; traces of one job agree on each one they carry."""

MAX_START_GAP_NS = 24 * 3600 * 10**9
_EPOCH_2001_NS = 10**18  # absolute clocks only: relative traces start near 0
_HINT = ("Load them one at a time, with separate=True (a dict of traces by file), or with "
         "on_conflict='file-order' (aonkit CLI: --on-conflict file-order) to key them as ranks by file order.")


def _name(t: Trace) -> str:
    return Path(t.meta.path).name if t.meta.path else "<memory>"


def claimed_rank(t: Trace) -> int | None:
    """``distributedInfo.rank``, else the rank the file name states, else None."""
    from .traceset import rank_from_name

    return t.meta.rank if t.meta.rank is not None else rank_from_name(t.meta.path)


def rank_conflicts(traces: list[Trace], ranks: list[int | None]) -> str:
    """One sentence per rank claimed by several traces ("rank 0 is claimed by a.json and b.json."), joined."""
    by_rank: dict[int, list[str]] = {}
    for t, r in zip(traces, ranks):
        if r is not None:
            by_rank.setdefault(r, []).append(_name(t))
    return " ".join(f"rank {r} is claimed by {' and '.join(names)}." for r, names in by_rank.items()
                    if len(names) > 1)


def check_one_job(traces: list[Trace]) -> None:
    """Raise :class:`~aonkit.JobError` when ``traces`` are not one job (see the module docstring)."""
    if len(traces) <= 1:
        return
    problem = _rank_problem(traces) or _world_problem(traces) or _run_problem(traces) or _time_problem(traces)
    if problem:
        raise JobError(f"not one job: {problem} {_HINT}")


def _rank_problem(traces: list[Trace]) -> str:
    unranked = [_name(t) for t in traces if claimed_rank(t) is None]
    if len(unranked) == len(traces):
        return (f"none of the {len(traces)} traces names a rank (no distributedInfo, no rank in the file name), "
                "so they look like separate runs.")
    if unranked:
        return f"{', '.join(unranked[:4])}{' ...' if len(unranked) > 4 else ''} name(s) no rank while the others do."
    return ""


def _world_problem(traces: list[Trace]) -> str:
    with_info = [t for t in traces if t.meta.distributed_info]
    if with_info and len(with_info) != len(traces):
        bare = next(t for t in traces if not t.meta.distributed_info)
        return f"{_name(with_info[0])} has distributedInfo and {_name(bare)} has none."
    sizes = {t.meta.world_size for t in traces if t.meta.world_size is not None}
    if len(sizes) > 1:
        eg = {t.meta.world_size: _name(t) for t in traces if t.meta.world_size is not None}
        return "different world sizes (" + ", ".join(f"{w} in {n}" for w, n in sorted(eg.items())) + ")."
    for t in traces:
        r, w = claimed_rank(t), t.meta.world_size
        if r is not None and w is not None and not 0 <= r < w:
            return f"{_name(t)} claims rank {r}, outside its world of {w}."
    backends = {str(t.meta.distributed_info.get("backend")) for t in with_info}
    if len(backends) > 1:
        return "their distributedInfo.backend differs."
    return ""


def _run_problem(traces: list[Trace]) -> str:
    for key in RUN_ID_KEYS:
        values = {repr(t.metadata.get(key)) for t in traces}
        if len(values) > 1:
            return f"their run ids ({key}) differ."
    return ""


def _time_problem(traces: list[Trace]) -> str:
    starts = []
    for t in traces:
        ts = t.events["ts_ns"].to_numpy()
        ts = ts[ts != TS_MISSING]
        if not len(ts) or ts.min() < _EPOCH_2001_NS:
            return ""
        starts.append((int(ts.min()), _name(t)))
    lo, hi = min(starts), max(starts)
    if hi[0] - lo[0] > MAX_START_GAP_NS:
        return f"{hi[1]} starts {(hi[0] - lo[0]) / 86400e9:.1f} days after {lo[1]}."
    return ""
