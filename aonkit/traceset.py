"""``TraceSet``: the traces of one job, keyed by rank."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

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
    def from_traces(cls, traces: list[Trace]) -> TraceSet:
        """Key ``traces`` by their rank; fall back to list order when ranks are missing or clash."""
        ranks = [t.meta.rank for t in traces]
        if all(r is not None for r in ranks) and len(set(ranks)) == len(ranks):
            return cls({r: t for r, t in zip(ranks, traces)})  # type: ignore[misc]
        out: dict[int, Trace] = {}
        for i, t in enumerate(traces):
            if t.meta.rank is not None and ranks.count(t.meta.rank) > 1:
                t.warnings.append(
                    f"rank {t.meta.rank} is claimed by {ranks.count(t.meta.rank)} files; ranks follow file order"
                )
            out[i] = t
        return cls(out)
