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

import dataclasses
from pathlib import Path

from .errors import JobError
from .schema import TS_MISSING, first_ts
from .trace import Trace, TraceMeta

RUN_ID_KEYS: tuple[str, ...] = ("group_trace_id", "mast_job_name", "mast_job_attempt", "tw_job")
"""Top-level keys that identify a run; traces of one job agree on each one they carry."""

MAX_START_GAP_NS = 24 * 3600 * 10**9
_EPOCH_2001_NS = 10**18  # absolute clocks only: relative traces start near 0
_HINT = ("Load them one at a time, with separate=True (a dict of traces by file), or with "
         "on_conflict='file-order' (aonkit CLI: --on-conflict file-order) to key them as ranks by file order.")


@dataclasses.dataclass(frozen=True)
class Member:
    """What the job rules read of one trace: enough to check a job without holding its events.

    Built by :meth:`of_trace` from a loaded trace, or from a cache's sidecar or
    a file's first bytes by :mod:`aonkit.lazyjob` (a lazily loaded job checks
    its ranks this way). Empty ``run_ids`` and ``start_ns`` of ``TS_MISSING``
    mean "not known yet": those checks pass them by.
    """

    name: str
    rank: int | None
    world_size: int | None
    distributed_info: dict
    run_ids: dict
    start_ns: int
    mtime_ns: int = 0

    @classmethod
    def of_trace(cls, t: Trace) -> Member:
        """The member record of a loaded trace."""
        return cls.of_meta(t.meta, t.metadata, first_ts(t.events["ts_ns"].to_numpy()),
                           int((t.source or {}).get("mtime_ns", 0)))  # fmt: skip

    @classmethod
    def of_meta(cls, meta: TraceMeta, metadata: dict, start_ns: int, mtime_ns: int) -> Member:
        """The member record from a trace's metadata alone (e.g. a cache's sidecar), its start and mtime given."""
        from .traceset import rank_from_name

        name = Path(meta.path).name if meta.path else "<memory>"
        rank = meta.rank if meta.rank is not None else rank_from_name(meta.path)
        return cls(name, rank, meta.world_size, dict(meta.distributed_info or {}),
                   {k: repr(metadata.get(k)) for k in RUN_ID_KEYS}, start_ns, mtime_ns)  # fmt: skip


def _name(t: Trace) -> str:
    return Path(t.meta.path).name if t.meta.path else "<memory>"


def claimed_rank(t: Trace) -> int | None:
    """``distributedInfo.rank``, else the rank the file name states, else None."""
    from .traceset import rank_from_name

    return t.meta.rank if t.meta.rank is not None else rank_from_name(t.meta.path)


def rank_conflicts(names: list[str], ranks: list[int | None]) -> str:
    """One sentence per rank claimed by several files ("rank 0 is claimed by a.json and b.json."), joined."""
    by_rank: dict[int, list[str]] = {}
    for n, r in zip(names, ranks):
        if r is not None:
            by_rank.setdefault(r, []).append(n)
    return " ".join(f"rank {r} is claimed by {' and '.join(ns)}." for r, ns in by_rank.items() if len(ns) > 1)


def check_one_job(traces: list[Trace]) -> None:
    """Raise :class:`~aonkit.JobError` when ``traces`` are not one job (see the module docstring)."""
    if len(traces) > 1:
        check_members([Member.of_trace(t) for t in traces])


def check_members(members: list[Member]) -> None:
    """:func:`check_one_job` on member records (see :class:`Member`)."""
    if len(members) <= 1:
        return
    problem = _rank_problem(members) or _world_problem(members) or _run_problem(members) or _time_problem(members)
    if problem:
        raise JobError(f"not one job: {problem} {_HINT}")


def assign_ranks(members: list[Member], on_conflict: str = "error") -> tuple[dict[int, int], list[tuple[int, str]]]:
    """Rank -> index into ``members``, by the rules of :meth:`aonkit.TraceSet.from_traces`.

    Returns the mapping and notes ``(index, text)`` to attach to the member at
    ``index`` (a file dropped or keyed by file order). Raises
    :class:`~aonkit.JobError` when the members are not one job.
    """
    if on_conflict not in ("error", "newest", "file-order"):
        raise ValueError(f"on_conflict must be 'error', 'newest' or 'file-order', not {on_conflict!r}")
    if on_conflict == "file-order":
        return ({k: k for k in range(len(members))},
                [(k, f"{m.name} keyed as rank {k} by file order (on_conflict='file-order')")
                 for k, m in enumerate(members)])  # fmt: skip
    check_members(members)
    ranks = [m.rank for m in members]
    if len(members) == 1 and ranks[0] is None:
        ranks = [0]  # a job of one trace that names no rank
    conflicts = rank_conflicts([m.name for m in members], ranks)
    if conflicts and on_conflict == "error":
        raise JobError(conflicts + " Pass on_conflict='newest' (CLI: --on-conflict newest) to keep the newest "
                       "file of each rank, or on_conflict='file-order' to key the traces by file order.")
    out: dict[int, int] = {}
    notes: list[tuple[int, str]] = []
    for k in sorted(range(len(members)), key=lambda k: -members[k].mtime_ns):
        r = ranks[k]
        assert r is not None  # check_members refused members that name no rank
        if r in out:
            notes.append((out[r], f"rank {r}: kept the newer file {members[out[r]].name}, dropped "
                                  f"{members[k].name} (on_conflict='newest')"))  # fmt: skip
            continue
        out[r] = k
    return dict(sorted(out.items())), notes


def _rank_problem(members: list[Member]) -> str:
    unranked = [m.name for m in members if m.rank is None]
    if len(unranked) == len(members):
        return (f"none of the {len(members)} traces names a rank (no distributedInfo, no rank in the file name), "
                "so they look like separate runs.")
    if unranked:
        return f"{', '.join(unranked[:4])}{' ...' if len(unranked) > 4 else ''} name(s) no rank while the others do."
    return ""


def _world_problem(members: list[Member]) -> str:
    with_info = [m for m in members if m.distributed_info]
    if with_info and len(with_info) != len(members):
        bare = next(m for m in members if not m.distributed_info)
        return f"{with_info[0].name} has distributedInfo and {bare.name} has none."
    sizes = {m.world_size for m in members if m.world_size is not None}
    if len(sizes) > 1:
        eg = {m.world_size: m.name for m in members if m.world_size is not None}
        return "different world sizes (" + ", ".join(f"{w} in {n}" for w, n in sorted(eg.items())) + ")."
    for m in members:
        if m.rank is not None and m.world_size is not None and not 0 <= m.rank < m.world_size:
            return f"{m.name} claims rank {m.rank}, outside its world of {m.world_size}."
    backends = {str(m.distributed_info.get("backend")) for m in with_info}
    if len(backends) > 1:
        return "their distributedInfo.backend differs."
    return ""


def _run_problem(members: list[Member]) -> str:
    known = [m for m in members if m.run_ids]  # {}: not read yet (a lazily opened job's rank)
    for key in RUN_ID_KEYS:
        if len({m.run_ids.get(key, "None") for m in known}) > 1:
            return f"their run ids ({key}) differ."
    return ""


def _time_problem(members: list[Member]) -> str:
    starts = []
    for m in members:
        if m.start_ns == TS_MISSING or m.start_ns < _EPOCH_2001_NS:
            return ""
        starts.append((m.start_ns, m.name))
    lo, hi = min(starts), max(starts)
    if hi[0] - lo[0] > MAX_START_GAP_NS:
        return f"{hi[1]} starts {(hi[0] - lo[0]) / 86400e9:.1f} days after {lo[1]}."
    return ""


def say_assignment(notes: list[tuple[int, str]], on_conflict: str, n: int) -> None:
    """Warn what :func:`assign_ranks` chose (each file dropped by ``"newest"``, or that ``n`` were keyed by order).

    The warnings point at the user's line, through however many aonkit calls (``load``, ``open_job``).
    """
    from .errors import warn_user

    if on_conflict == "newest":
        for _, text in notes:
            warn_user(text)
    elif on_conflict == "file-order" and n:
        warn_user(f"{n} trace(s) keyed as ranks by file order, not by the ranks they claim")
