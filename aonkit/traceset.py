"""``TraceSet``: the traces of one job, keyed by rank."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .trace import Trace


class TraceSet(Mapping[int, Trace]):
    """Traces keyed by rank (``distributedInfo.rank``, else file order).

    Parameters
    ----------
    traces : mapping of int to Trace
        Rank -> trace, kept sorted by rank.

    Attributes
    ----------
    step_lags : pandas.DataFrame or None
        For a job traced by ``aonkit trace --job`` or ``--all-ranks`` (:func:`aonkit.load` of its folder): per
        rank, how long after the earliest rank it passed the step boundaries before the trace
        (:func:`aonkit.sources.traced_job.step_lag_table`). None otherwise.
    trace_notes : sequence of str
        What ``aonkit trace`` noted while tracing the job (a rank without samples, ranks that may not have traced
        the same steps...); empty otherwise.
    hosts : mapping of int to str
        Rank -> host name, where known (a job ``aonkit trace`` wrote). The ranks of one host's samples are one
        node's (:func:`aonkit.analysis.combine.combined_samples`). Empty otherwise.
    clocks : mapping of int to str
        Rank -> the clock its trace is on, where known (a job ``aonkit trace`` wrote:
        :func:`aonkit.sources.traced_job.job_clocks`, by the node's boot id). Ranks with one clock get one offset
        from :func:`aonkit.analysis.collectives.clock_offsets`. When empty, ``hosts`` stand for the clocks (one per
        host), so setting ``hosts`` by hand is enough.
    """

    step_lags: Any = None
    trace_notes: Sequence[str] = ()
    hosts: Mapping[int, str] = MappingProxyType({})
    clocks: Mapping[int, str] = MappingProxyType({})

    def __init__(self, traces: Mapping[int, Trace]) -> None:
        self._traces = dict(sorted(traces.items()))

    def _by_rank(self) -> Mapping[int, Any]:
        """Rank -> what holds the rank (here its trace; a lazy set's: its file), in rank order."""
        return self._traces

    def __getitem__(self, rank: int) -> Trace:
        return self._traces[rank]

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_rank())

    def __len__(self) -> int:
        return len(self._by_rank())

    @property
    def ranks(self) -> list[int]:
        """Ranks in ascending order."""
        return list(self._by_rank())

    @property
    def warnings(self) -> list[str]:
        """Every trace's warnings, prefixed with its rank."""
        return [f"rank {r}: {w}" for r, t in self._traces.items() for w in t.warnings]

    def __repr__(self) -> str:
        n = sum(len(t) for t in self._traces.values())
        return f"<aonkit.TraceSet {len(self)} rank(s) {self.ranks[:8]}{'...' if len(self) > 8 else ''}: {n:,} events>"

    @classmethod
    def from_traces(cls, traces: list[Trace], on_conflict: str = "error") -> TraceSet:
        """Key the traces of one job by rank.

        The rank is ``distributedInfo.rank``, else a ``rank-N`` / ``rank_N`` /
        ``worker N`` in the file name. The traces must be one job (see
        :func:`aonkit.jobcheck.check_one_job`) with one trace per rank.

        Parameters
        ----------
        traces : list of Trace
            In file order.
        on_conflict : {"error", "newest", "file-order"}
            What to do when two traces claim one rank, or some name no rank:
            raise :class:`~aonkit.JobError` naming the files (default); keep
            the most recently modified file of each rank (the others are
            dropped, with a warning); or key every trace by its position in
            ``traces`` (with a warning).
        """
        from .jobcheck import Member, assign_ranks, say_assignment

        members = [Member.of_trace(t) for t in traces] if on_conflict != "file-order" else [
            Member(_name(t), None, None, {}, {}, 0) for t in traces]
        chosen, notes = assign_ranks(members, on_conflict)
        for k, text in notes:
            traces[k].warnings.append(text)
        say_assignment(notes, on_conflict, len(traces))
        return cls({r: traces[k] for r, k in chosen.items()})

    def map(self, fn: Callable[[Trace], Any]) -> dict[int, Any]:
        """``{rank: fn(trace)}`` for every rank (a lazily loaded job runs ``fn`` in worker processes).

        Parameters
        ----------
        fn : callable
            A function of one :class:`~aonkit.Trace`.

        Returns
        -------
        dict of int to object
            ``fn``'s result per rank, in rank order.
        """
        return {r: fn(t) for r, t in self._traces.items()}


def _name(t: Trace) -> str:
    return Path(t.meta.path).name if t.meta.path else "<memory>"


def rank_from_name(path: str | None) -> int | None:
    """The rank a file name states (``rank-3``, ``rank_3``, ``worker3``), else None."""
    if not path:
        return None
    m = _RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None


_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_ ]?(\d+)", re.IGNORECASE)



def each_rank(traces: Mapping[int, Trace], fn: Callable[[Trace], Any]) -> dict[int, Any]:
    """``{rank: fn(trace)}``: through :meth:`TraceSet.map` for a TraceSet (a lazy job: in worker processes)."""
    if isinstance(traces, TraceSet):
        return traces.map(fn)
    return {r: fn(t) for r, t in traces.items()}
