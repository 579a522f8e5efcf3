"""A dependency graph re-timed by what-if rules, and its critical path (:mod:`aonkit.analysis.critical_path`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..trace import Trace
from .depgraph import DepGraph
from .whatif_rules import Rule, factors, rule_codes

TIED_ENDS = 64
"""At most this many nodes finishing last together are compared for the critical path (the first ones)."""


def longest_tied(t: Timing, end: int, inside: np.ndarray | None) -> tuple:
    """The critical path (nodes, edges into them) to the node that finishes last.

    Among nodes that finish last together, the one whose path starts first (it explains the most of the
    span), so that the choice does not depend on how the nodes are numbered.
    """
    fin = t.finish
    tied = np.flatnonzero(fin == fin[end]) if end >= 0 else np.zeros(0, np.int64)
    if inside is not None:
        tied = tied[inside[tied]]
    best = t.path(end)
    if len(tied) > 1:
        first_start = fin[best[0][0]] - t.dur_at(best[0][:1])[0]
        for v in tied[:TIED_ENDS]:
            if v == end:
                continue
            p = t.path(int(v))
            s0 = fin[p[0][0]] - t.dur_at(p[0][:1])[0]
            if s0 < first_start:
                best, first_start = p, s0
    return best


class Timing:
    """A graph re-timed by rules: finish times, with starts, scaled durations and paths derived on demand.

    No rule: the identity schedule. Up to 16 rules: :func:`aonkit._kernels.retime.finish_times` (one lean
    pass; the rules' masks are kept per graph). More: :func:`aonkit._kernels.dag.schedule` on scaled durations.
    """

    def __init__(self, trace: Trace, g: DepGraph, rules: Sequence[Rule | dict], base: tuple) -> None:
        from .._kernels.dag import scale_each, schedule
        from .._kernels.retime import finish_times

        self.g, self.coded, self._start, self._factor = g, None, None, None
        self._first = self._last = -1
        if not rules:
            self._start, self.finish = base[0], base[1]
            self._dur = g.dur_ns
            return
        self.coded = rule_codes(trace, g, rules)
        if self.coded is None:
            self._factor = factors(trace, g, rules)
            self._dur = scale_each(g.dur_ns, self._factor)
            self._start, self.finish, _, _ = schedule(g.order, g.indptr, g.src, g.lat_ns, self._dur, g.release_ns)
            return
        code, tab = self.coded
        self.finish, self._first, self._last = finish_times(g.indptr, g.src, g.lat_ns, g.dur_ns, g.release_ns,
                                                            code, tab)  # fmt: skip

    def factor(self) -> np.ndarray:
        """Each node's duration factor."""
        if self._factor is None:
            self._factor = np.ones(len(self.g)) if self.coded is None else self.coded[1][self.coded[0]]
        return self._factor

    def dur_at(self, idx: np.ndarray) -> np.ndarray:
        """Scaled durations of the nodes ``idx``."""
        from .._kernels.dag import scale_each

        if self.coded is None:
            return self._dur[idx]
        return scale_each(self.g.dur_ns[idx], self.coded[1][self.coded[0][idx]])

    def start(self) -> np.ndarray:
        """Every node's start."""
        if self._start is None:
            from .._kernels.dag import scale_each

            self._start = self.finish - scale_each(self.g.dur_ns, self.factor())
        return self._start

    def last(self) -> tuple[int, int]:
        """(the first node with the latest finish, first start to last finish)."""
        if self.coded is not None:
            return int(self._last), int(self.finish[self._last]) - int(self._first) if self._last >= 0 else 0
        end = int(np.argmax(self.finish))
        return end, int(self.finish[end]) - int(self._start.min())

    def path(self, end: int) -> tuple[np.ndarray, np.ndarray]:
        """The critical path to ``end``: its nodes in order and the edge into each (-1: released).

        Walked back from the finish times (:func:`aonkit._kernels.retime.path_back`), taking the edge the schedule
        took, whichever way the graph was re-timed.
        """
        from .._kernels.retime import path_back

        g = self.g
        return path_back(g.indptr, g.src, g.lat_ns, g.release_ns, self.finish, end)
