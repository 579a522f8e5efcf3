"""Handoffs between threads of one process: a thread idle while another does its work, then resuming.

PyTorch runs a backward pass on the autograd engine's own thread: the Python
thread calls ``backward()`` and waits, untraced, until the engine's thread has
run every ``autograd::engine::evaluate_function``. In the trace that wait is
a host gap on the Python thread, and :mod:`aonkit.analysis.depgraph` counts a
gap as host work: so making backward faster could not shorten the step (the
gap kept its length), and the critical path ran through the gap instead of
the backward ops.

A **handoff** is found where, in one process, thread A goes idle for a gap G
and thread B, idle before G began, starts a busy run within
:data:`HANDOFF_NS` of it and ends that run within :data:`HANDOFF_NS` of A
resuming: before it (then idle until after G), or after it (the engine's
last bookkeeping ops can outlast the wake-up; A then waited for B's last node
done by then, at most :data:`HANDOFF_NS` before). A's gap and B's idle gap
before the run become waits (no duration of their own) and two edges tie the
threads: A's node before G -> B's first node of the run, and B's node A waited
for -> A's node after G, each with its measured latency (so the identity
re-time is unchanged). On the shared traces true handoffs took 0-880 µs
each way and coincidences (a data-loader thread busy during a wait) 1.2 ms to
tens of ms; gaps under :data:`MIN_WAIT_NS` are left as they are.
"""

from __future__ import annotations

import numpy as np

HANDOFF_NS = 1_000_000
"""Most time from A going idle to B starting, and between B's run ending and A resuming (either first)."""
MIN_WAIT_NS = 100_000
"""Shortest gap taken as a thread being idle (shorter ones stay host work)."""
EDGE_HANDOFF = 6
"""Edge kind of both edges of a handoff (``DepGraph.edge_kind``)."""


def _runs(lane: np.ndarray, idle: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every lane's busy runs (stretches between idle gaps): their first and their last nodes, in node order."""
    n = len(lane)
    new_lane = np.ones(n, bool)
    new_lane[1:] = lane[1:] != lane[:-1]
    # a run starts at a lane's first node or after an idle gap, at a node that is not idle itself
    starts = np.flatnonzero((new_lane | np.r_[False, idle[:-1]]) & ~idle)
    ends_at = np.flatnonzero((np.r_[new_lane[1:], True] | np.r_[idle[1:], False]) & ~idle)
    return starts, ends_at


def handoff_edges(lane: np.ndarray, kind: np.ndarray, start: np.ndarray, dur: np.ndarray, gap_kind: int,
                  srcs: list, dsts: list, lats: list, kinds: list) -> int:  # fmt: skip
    """Find the handoffs among the CPU nodes (see the module doc), add their edges and zero their waits in ``dur``.

    ``lane``, ``kind``, ``start``, ``dur``: the CPU nodes, ordered by lane then start (``dur`` is changed in
    place). Returns the number of waits made.
    """
    n = len(lane)
    if n < 3 or lane[0] == lane[-1]:  # one thread: nothing to hand off to
        return 0
    end = start + dur
    idle = (kind == gap_kind) & (dur >= MIN_WAIT_NS)
    gaps = np.flatnonzero(idle[1:-1]) + 1
    gaps = gaps[(lane[gaps - 1] == lane[gaps]) & (lane[gaps + 1] == lane[gaps])]  # a node before and after
    if not len(gaps):
        return 0
    first, last = _runs(lane, idle)  # the same runs in the same order: one per first node
    same_prev = np.r_[False, lane[first[1:]] == lane[first[:-1]]]
    same_next = np.r_[lane[first[:-1]] == lane[first[1:]], False]
    prev_end = np.where(same_prev, end[np.r_[last[0], last[:-1]]], np.iinfo(np.int64).min)
    next_start = np.where(same_next, start[np.r_[first[1:], first[-1]]], np.iinfo(np.int64).max)
    by_start = np.argsort(start[first], kind="stable")
    run_t0 = start[first][by_start]
    a0 = start[gaps]
    lo = np.searchsorted(run_t0, a0, "left")  # runs starting at most HANDOFF_NS after a thread went idle
    hi = np.searchsorted(run_t0, a0 + HANDOFF_NS, "right")
    count = hi - lo
    g = np.repeat(gaps, count)
    r = by_start[np.repeat(lo - np.cumsum(np.r_[0, count[:-1]]), count) + np.arange(int(count.sum()))]
    f, m = first[r], last[r]
    ok = ((lane[f] >> 32) == (lane[g] >> 32)) & (lane[f] != lane[g])  # another thread of the same process
    ok &= prev_end[r] <= start[g]  # idle when the other went idle
    # its run ends within HANDOFF_NS either side of the idle thread resuming (and it is idle after, if before)
    ok &= (np.abs(end[m] - end[g]) <= HANDOFF_NS) & ((end[m] > end[g]) | (next_start[r] >= end[g]))
    g, f, m = g[ok], f[ok], m[ok]
    if not len(g):
        return 0
    # a run that ends after the idle thread resumed: its last node done by then is what that thread waited for
    late = np.flatnonzero(end[m] > end[g])
    for i in late:
        m[i] = f[i] + np.searchsorted(end[f[i] : m[i] + 1], end[g[i]], "right") - 1
    fine = (m >= f) & (end[g] - end[m] <= HANDOFF_NS)  # none done just before: no join
    fine &= (start[f] > start[g - 1]) & (start[m] < start[g + 1])  # both edges forward in time: neither dropped
    g, f, m = g[fine], f[fine], m[fine]
    if not len(g):
        return 0
    before = f[(f > 0) & (lane[np.maximum(f - 1, 0)] == lane[f]) & idle[np.maximum(f - 1, 0)]] - 1
    dur[np.concatenate([g, before])] = 0  # the idle thread's gap, and the other's idle gap before its run
    src, dst = np.concatenate([g - 1, m]), np.concatenate([f, g + 1])
    lat = start[dst] - (start[src] + dur[src])  # after the waits are zeroed: a source may be one (idle twice over)
    # two threads handing off in turn (forward -> backward -> optimizer) see each edge from both sides: once
    pairs, once = np.unique(np.stack([src, dst]), axis=1, return_index=True)
    srcs.append(pairs[0]), dsts.append(pairs[1]), lats.append(lat[once])
    kinds.append(np.full(pairs.shape[1], EDGE_HANDOFF))
    return len(g)


def drop_isolated(nodes: dict, n_cpu: int, gpu_node: np.ndarray, user_lanes: np.ndarray, srcs: list, dsts: list,
                  lats: list, kinds: list) -> tuple[dict, np.ndarray, int]:  # fmt: skip
    """Leave out the pollers: threads of runtime calls only, tied to nothing else (no launch, sync or handoff).

    A watchdog polling ``cudaEventQuery`` every 100 ms ran 11-17 ms past the work of two shared traces: its
    calls and the gaps between them, host work to the graph, set the trace's last finish on their own, so that
    no rule could shorten it. A thread that ran an op or an annotation (``user_lanes``) stays, tied or not: its
    untraced time is user code (an annotation on a thread of its own spans a 13 s compile in one trace).
    ``nodes``' CPU nodes come first (``n_cpu``); ``gpu_node``: each GPU event's node. Returns
    ``(nodes, gpu_node, n_cpu)`` renumbered; the edge lists are changed in place.
    """
    lane = nodes["lane"][:n_cpu]
    tied = np.zeros(n_cpu, bool)
    for s, d, k in zip(srcs, dsts, kinds):
        if len(k) and k[0] not in (0, 1):  # thread and stream order stay on their lane
            tied[s[s < n_cpu]] = True
            tied[d[d < n_cpu]] = True
    if tied.all():
        return nodes, gpu_node, n_cpu
    keep_lane = np.union1d(lane[tied], user_lanes)
    keep = np.ones(len(nodes["kind"]), bool)
    keep[:n_cpu] = np.isin(lane, keep_lane)
    if keep.all():
        return nodes, gpu_node, n_cpu
    new = np.cumsum(keep) - 1
    for i, s in enumerate(srcs):  # an isolated thread's edges are its own thread order: both ends go
        e = keep[s]
        srcs[i], dsts[i], lats[i], kinds[i] = new[s[e]], new[dsts[i][e]], lats[i][e], kinds[i][e]
    gone = n_cpu - int(keep[:n_cpu].sum())
    return {k: v[keep] for k, v in nodes.items()}, gpu_node - gone, n_cpu - gone
