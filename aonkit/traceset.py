"""``TraceSet``: the traces of one job, keyed by rank."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

from .errors import AonkitWarning, JobError
from .trace import Trace


class TraceSet(Mapping[int, Trace]):
    """Traces keyed by rank (``distributedInfo.rank``, else file order).

    Parameters
    ----------
    traces : mapping of int to Trace
        Rank -> trace, kept sorted by rank.
    """

    def __init__(self, traces: Mapping[int, Trace]) -> None:
        self._traces = dict(sorted(traces.items()))

    def __getitem__(self, rank: int) -> Trace:
        return self._traces[rank]

    def __iter__(self) -> Iterator[int]:
        return iter(self._traces)

    def __len__(self) -> int:
        return len(self._traces)

    @property
    def ranks(self) -> list[int]:
        """Ranks in ascending order."""
        return list(self._traces)

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
        from .jobcheck import check_one_job, claimed_rank, rank_conflicts

        if on_conflict not in ("error", "newest", "file-order"):
            raise ValueError(f"on_conflict must be 'error', 'newest' or 'file-order', not {on_conflict!r}")
        if on_conflict == "file-order":
            return cls(_by_file_order(traces))
        check_one_job(traces)
        ranks = [claimed_rank(t) for t in traces]
        if len(traces) == 1 and ranks[0] is None:
            ranks = [0]  # a job of one trace that names no rank
        conflicts = rank_conflicts(traces, ranks)
        if conflicts and on_conflict == "error":
            raise JobError(conflicts + " Pass on_conflict='newest' (CLI: --on-conflict newest) to keep the newest "
                           "file of each rank, or on_conflict='file-order' to key the traces by file order.")
        out: dict[int, Trace] = {}
        for t, r in sorted(zip(traces, ranks), key=lambda tr: -_mtime(tr[0])):
            if r in out:
                dropped = _name(t)
                msg = f"rank {r}: kept the newer file {_name(out[r])}, dropped {dropped} (on_conflict='newest')"
                out[r].warnings.append(msg)
                _warn(msg)
                continue
            out[r] = t  # type: ignore[index]
        return cls(out)


def _by_file_order(traces: list[Trace]) -> dict[int, Trace]:
    for k, t in enumerate(traces):
        msg = f"{_name(t)} keyed as rank {k} by file order (on_conflict='file-order')"
        t.warnings.append(msg)
    if traces:
        _warn(f"{len(traces)} trace(s) keyed as ranks by file order, not by the ranks they claim")
    return dict(enumerate(traces))


def _mtime(t: Trace) -> int:
    return int((t.source or {}).get("mtime_ns", 0))


def _name(t: Trace) -> str:
    return Path(t.meta.path).name if t.meta.path else "<memory>"


def _warn(msg: str) -> None:
    warnings.warn(msg, AonkitWarning, stacklevel=4)


def rank_from_name(path: str | None) -> int | None:
    """The rank a file name states (``rank-3``, ``rank_3``, ``worker3``), else None."""
    if not path:
        return None
    m = _RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None


_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_ ]?(\d+)", re.IGNORECASE)

