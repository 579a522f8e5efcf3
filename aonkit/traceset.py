"""``TraceSet``: the traces of one job, keyed by rank."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

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
        """Key ``traces`` by rank.

        The rank is ``distributedInfo.rank``, else a ``rank-N`` / ``rank_N`` /
        ``worker N`` in the file name. Traces with neither take the lowest free
        ranks in list order (with a warning). If two traces claim one rank,
        every trace is keyed by list order instead (with a warning).
        """
        ranks = [t.meta.rank if t.meta.rank is not None else _rank_from_name(t.meta.path) for t in traces]
        known = [r for r in ranks if r is not None]
        if len(set(known)) != len(known):
            for t, r in zip(traces, ranks):
                t.warnings.append(f"rank {r} is claimed by several files; ranks follow file order")
            return cls(dict(enumerate(traces)))
        out: dict[int, Trace] = {r: t for r, t in zip(ranks, traces) if r is not None}
        free = (k for k in range(len(traces) + len(out)) if k not in out)
        for t, r in zip(traces, ranks):
            if r is None:
                key = next(free)
                t.warnings.append(f"the file names no rank; keyed as rank {key} (file order)")
                out[key] = t
        return cls(out)


_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_ ]?(\d+)", re.IGNORECASE)


def _rank_from_name(path: str | None) -> int | None:
    if not path:
        return None
    m = _RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None
