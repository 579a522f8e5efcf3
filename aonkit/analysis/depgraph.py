"""The dependency graph of one trace, for the critical path and what-if (a job: :mod:`.depgraph_job`).

Nodes are pieces of time that take their measured length unless a what-if
rule rescales them:

- ``cpu``: a self-time segment of a CPU event (the innermost event open on its
  thread; :func:`aonkit._kernels.segments.thread_segments`); zero-length
  pieces are dropped except a launch or sync call's; ``gap``: time between a
  thread's top-level events, or an annotation's own time (``user_annotation``,
  ``python_function``): untraced host work, kept as measured;
- ``gpu``: a kernel, memcpy or memset on its stream.

Edges, each with a latency; every edge holds in the measured trace, so the
identity never starts a node later than it was measured:

- **thread order**: consecutive segments of a thread (0);
- **stream order**: consecutive GPU events of a (device, stream): the gap up to
  :data:`QUEUED_NS` (dispatch), a negative latency where clock noise makes
  them overlap, and the whole measured gap when the later event's launch is
  not in the trace (e.g. a GPU-only trace), since nothing else explains it,
  or when its launch call had returned while the stream was still busy (the
  event waited in the queue: what held it after its predecessor was the
  GPU's, not the launch's; a GPU running behind its host has such gaps);
- **launch**: the launch call's last segment -> its GPU event. The latency is the
  measured delay (GPU start - call end, negative when the GPU started before
  the call returned) when the stream was idle; for an event queued behind its
  stream predecessor or a stream wait it is the smaller of the delay and the
  median delay of the idle-stream launches, so a faster predecessor moves it
  (a queued event's measured delay holds the GPU's lag behind its host: kept
  whole, it would stop any faster kernel from shortening a GPU-bound run);
- **host sync**: a blocking call (``*Synchronize``, or a call whose correlated
  copy runs entirely inside it: ``cudaMemcpy``, or a pageable
  ``cudaMemcpyAsync`` that blocked; its launch edge then leaves from the node
  before the call) waits for the GPU event that ended last while it waited,
  among those launched (launch call ended) before it, on the stream Kineto's
  ``Stream Sync`` / ``Event Sync`` row names when there is one; the call's
  segment becomes the wake-up instant (no length, at the call's end) and the
  edge carries the measured wake-up delay;
- **stream wait**: ``cudaStreamWaitEvent`` (Kineto's ``Stream Wait Event``
  rows): the waiting stream's next GPU event after the call waits for the
  recorded stream's last GPU event launched before the ``cudaEventRecord``
  (a source that ended after the event started, by a mismatched row or
  clock, keeps that overlap as a negative latency);
  without such rows, a GPU event that nothing else explains and that starts
  within dispatch time of another stream's event's end, as its stream pair
  does far more often than chance, waits for it
  (:mod:`aonkit.analysis.depgraph_streams`);
- **handoff** (6): a thread idle while another of its process runs (PyTorch's
  backward on the autograd thread), the two tied both ways and the waits no
  longer host work (:mod:`aonkit.analysis.depgraph_threads`).

Nodes with nothing before them (a thread's first segment, a GPU event whose
launch is outside the trace) are released at their measured start, so the
identity re-times every node to its measured start when the edges explain
the trace. nsys's ``Stream Sync`` rows name their stream as Kineto's do; its
``Event Sync`` rows do not name the recorded stream (the host-sync rule stands
in) and its ``Stream Wait Event`` rows are not used. Not yet modelled (open
parts of issue 15): GPU contention between streams; a GPU event held back by
it keeps its measured launch delay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import schema
from ..trace import Trace
from .columns import in_categories, op_stack, thread_keys
from .correlation import gpu_launches
from .depgraph_streams import inferred_waits
from .depgraph_sync import QUEUED_NS, SYNC_CALLS, stream_wait_edges, sync_edges
from .depgraph_threads import drop_isolated, handoff_edges

KIND_CPU, KIND_GAP, KIND_GPU, KIND_HUB = 0, 1, 2, 3
KIND_NAMES = ("cpu", "gap", "gpu", "hub")
ANNOTATION_CATS = frozenset({"user_annotation", "python_function"})
"""CPU categories whose own time is host work the trace does not break down: their pieces are ``gap`` nodes."""


@dataclass(eq=False)
class DepGraph:
    """Nodes (arrays of equal length) and incoming-edge CSR of a trace's dependency graph.

    Attributes
    ----------
    kind, row, lane, start_ns, dur_ns : numpy.ndarray
        Per node: :data:`KIND_NAMES` code, owning event row (-1 for gaps),
        lane (thread key for CPU nodes, ``device << 32 | stream`` for GPU),
        measured start and duration.
    release_ns : numpy.ndarray
        Earliest start of nodes with no predecessor (else the kernels' no-release value).
    indptr, src, lat_ns, edge_kind : numpy.ndarray
        Incoming edges by destination; ``edge_kind``: 0 thread, 1 stream, 2 launch, 3 sync, 4 stream wait,
        5 collective (a rank's arrival -> the hub -> every rank's transfer), 6 handoff between threads
        (:mod:`aonkit.analysis.depgraph_threads`).
    order : numpy.ndarray
        A topological order of the nodes.
    dropped_edges : int
        Edges left out because they point back in measured time (clock skew between CPU and GPU).
    rank : numpy.ndarray, optional
        A job's graph: the rank of each node's event (-1 for hubs). None for one trace's graph.
    """

    kind: np.ndarray
    row: np.ndarray
    lane: np.ndarray
    start_ns: np.ndarray
    dur_ns: np.ndarray
    release_ns: np.ndarray
    indptr: np.ndarray
    src: np.ndarray
    lat_ns: np.ndarray
    edge_kind: np.ndarray
    order: np.ndarray
    dropped_edges: int = 0
    rank: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.kind)


def _cpu_nodes(trace: Trace) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """The CPU nodes (thread segments and gaps), each event row's last node (-1: none), user code's threads.

    A thread is user code's when it ran more than runtime calls (an op or an annotation).
    """
    from .._kernels.segments import thread_segments

    ev = trace.events
    rows, _, order = op_stack(trace)
    rows = rows[order]
    thread = thread_keys(ev, rows)
    ts = ev["ts_ns"].to_numpy()[rows]
    end = ts + np.maximum(ev["dur_ns"].to_numpy()[rows], 0)
    th, t0, t1, owner, _, last = thread_segments(thread, ts, end)
    row = np.where(owner >= 0, rows[np.maximum(owner, 0)], -1)
    # a zero-length piece carries no time: only a call that launches GPU work or may wait keeps it
    needed = np.zeros(len(ev), bool)
    launch = gpu_launches(trace)["launch_row"].to_numpy()
    needed[launch[launch >= 0]] = True
    runtime = in_categories(ev["cat"], schema.RUNTIME_CATS)
    needed |= runtime & in_categories(ev["name"], SYNC_CALLS)
    keep = (t1 > t0) | ((row >= 0) & needed[np.maximum(row, 0)])
    renum = np.cumsum(keep) - 1
    th, t0, t1, row = th[keep], t0[keep], t1[keep], row[keep]
    # an annotation's own time (record_function, ProfilerStep) is untraced host work, like a gap
    is_annotation = in_categories(ev["cat"], ANNOTATION_CATS)
    annotation = is_annotation[np.maximum(row, 0)] & (row >= 0)
    row = np.where(annotation, -1, row)
    nodes = {"kind": np.where(row < 0, KIND_GAP, KIND_CPU), "row": row, "lane": th, "start_ns": t0,
             "dur_ns": t1 - t0}
    last_of_row = np.full(len(ev), -1, np.int64)
    last_of_row[rows] = np.where(keep[np.maximum(last, 0)] & (last >= 0), renum[np.maximum(last, 0)], -1)
    last_of_row[rows[is_annotation[rows]]] = -1  # an annotation is no node's owner
    user = thread[~runtime[rows]]  # sorted by thread (the op stack's order): unique by neighbours
    return nodes, last_of_row, user[np.r_[True, user[1:] != user[:-1]]] if len(user) else user


def _queue_gaps(queued: np.ndarray, gap: np.ndarray, dst_pos: np.ndarray, lat: np.ndarray) -> None:
    """A GPU event that waited in its stream's queue keeps its measured gap after its predecessor (in place).

    That gap is the GPU's own (dispatch, a barrier packet), not the launch's: the launch edge cannot explain
    it, so the stream edge must. ``queued``, ``gap``: per GPU event in stream order; ``dst_pos``, ``lat``:
    the stream edges' destinations (stream order) and latencies.
    """
    at = queued[dst_pos]
    lat[at] = gap[dst_pos[at]]


def build_graph(trace: Trace, hook: Callable[..., dict[str, np.ndarray]] | None = None, *,
                numbered: bool = False) -> DepGraph:  # fmt: skip
    """The dependency graph of ``trace`` (see the module doc).

    ``numbered``: the nodes numbered in topological order (``order`` is ``arange``), as :func:`relabelled`
    would give, renumbered before the edges are grouped rather than after (one CSR instead of two).

    ``hook(nodes, node_of_row, srcs, dsts, lats, kinds)`` may add nodes and
    edges before the graph is closed (the job graph adds its collectives): it
    gets the node arrays (``nodes["dur_ns"]`` as re-timing will use them), the
    GPU node of each event row (-1: none) and the edge lists, and returns the
    new ``nodes`` dict.
    """
    from .._kernels.dag import NO_RELEASE, csr_by_dst
    from .._kernels.dag_csr import forward_csr

    ev = trace.events
    cpu, last_seg, user_lanes = _cpu_nodes(trace)
    n_cpu = len(cpu["kind"])
    links = gpu_launches(trace)  # (gpu_row, launch_row): all the graph reads of gpu_links, without its op stack walk
    g_rows = links["gpu_row"].to_numpy()
    ok = (ev["dur_ns"].to_numpy()[g_rows] >= 0) & (ev["ts_ns"].to_numpy()[g_rows] != schema.TS_MISSING)
    links, g_rows = links[ok].reset_index(drop=True), g_rows[ok]
    g_ts = ev["ts_ns"].to_numpy()[g_rows]
    g_dur = ev["dur_ns"].to_numpy()[g_rows]
    g_lane = (ev["device"].to_numpy()[g_rows] << 32) | (ev["stream"].to_numpy()[g_rows] & 0xFFFFFFFF)
    if "rank" in ev.columns:  # a combined job: streams are per rank
        g_lane = g_lane | (ev["rank"].to_numpy()[g_rows] << 48)
    g_order = np.lexsort((g_rows, g_ts, g_lane))
    gpu_node = np.empty(len(g_rows), np.int64)
    gpu_node[g_order] = n_cpu + np.arange(len(g_rows))
    nodes = {k: np.concatenate([cpu[k], v]) for k, v in {
        "kind": np.full(len(g_rows), KIND_GPU), "row": g_rows[g_order], "lane": g_lane[g_order],
        "start_ns": g_ts[g_order], "dur_ns": g_dur[g_order]}.items()}  # fmt: skip
    srcs, dsts, lats, kinds = [], [], [], []

    def chain(first: int, lane: np.ndarray, start: np.ndarray, dur: np.ndarray, kind: int) -> None:
        """Consecutive nodes of one lane.

        An overlap (clock noise) is a negative latency, never a push; a gap up to
        :data:`QUEUED_NS` (dispatch) is kept; a longer one is for another edge to explain.
        """
        same = np.flatnonzero(lane[1:] == lane[:-1])
        gap = start[same + 1] - (start[same] + dur[same])
        srcs.append(first + same), dsts.append(first + same + 1), lats.append(np.where(gap <= QUEUED_NS, gap, 0))
        kinds.append(np.full(len(same), kind))

    chain(0, cpu["lane"], cpu["start_ns"], cpu["dur_ns"], 0)
    chain(n_cpu, nodes["lane"][n_cpu:], nodes["start_ns"][n_cpu:], nodes["dur_ns"][n_cpu:], 1)
    # a GPU event whose launch is not in the trace keeps its measured gap (or overlap) after its stream
    # predecessor, however long: no launch edge explains a longer one
    unlaunched = np.zeros(len(g_rows), bool)
    unlaunched[gpu_node[links["launch_row"].to_numpy() < 0] - n_cpu] = True
    keep_gap = unlaunched[dsts[-1] - n_cpu]
    measured_gap = nodes["start_ns"][dsts[-1]] - (nodes["start_ns"][srcs[-1]] + nodes["dur_ns"][srcs[-1]])
    lats[-1] = np.where(keep_gap, measured_gap, lats[-1])
    # launch edges, with the queued-or-not latency rule
    launch = links["launch_row"].to_numpy()
    has = (launch >= 0) & (last_seg[np.maximum(launch, 0)] >= 0)
    lr = np.maximum(launch, 0)
    call_end = ev["ts_ns"].to_numpy()[lr] + np.maximum(ev["dur_ns"].to_numpy()[lr], 0)
    delay = g_ts - call_end
    prev_end = np.full(len(g_rows), np.iinfo(np.int64).min)
    lane_sorted, end_sorted = g_lane[g_order], (g_ts + g_dur)[g_order]
    same = np.flatnonzero(lane_sorted[1:] == lane_sorted[:-1])
    prev_end[g_order[same + 1]] = end_sorted[same]
    # a predecessor that overlaps the event by more than dispatch time (clocks that disagree, traces joined on
    # one stream id) says nothing about queueing; its edge is the first a job's stitch drops
    prev_end[prev_end > g_ts + QUEUED_NS] = np.iinfo(np.int64).min
    stream_prev = prev_end
    waited = stream_wait_edges(trace, links, gpu_node, srcs, dsts, lats, kinds)
    waited[waited > g_ts] = np.iinfo(np.int64).min  # a wait whose source ended after the start explains nothing
    prev_end = np.maximum(prev_end, waited)  # a stream wait that ended at the start explains it like a queue
    waited = np.maximum(waited, inferred_waits(g_lane, g_ts, g_ts + g_dur, prev_end,
                                               np.where(has, call_end, np.iinfo(np.int64).min), gpu_node, srcs,
                                               dsts, lats, kinds))  # fmt: skip
    prev_end = np.maximum(prev_end, waited)
    # queued: the event followed its predecessor (or a wait) within dispatch time, or its launch call had
    # returned while its stream was still busy (it waited in the queue; the stream edge then keeps the gap,
    # which a wait that ended later could not: its edge holds no gap past dispatch time, or was dropped)
    busy = has & (stream_prev >= call_end) & (stream_prev >= waited)
    queued = busy | (prev_end >= g_ts - QUEUED_NS)
    by_pos = np.zeros(len(g_rows), bool), np.empty(len(g_rows), np.int64)  # stream order
    by_pos[0][gpu_node - n_cpu] = busy
    by_pos[1][gpu_node - n_cpu] = stream_prev
    queue_gap = g_ts[g_order] - by_pos[1]
    _queue_gaps(by_pos[0], queue_gap, dsts[1] - n_cpu, lats[1])
    # the launch delay of an idle stream; an event that ended before its call returned (a blocking copy) says
    # nothing about when a launch reaches the GPU
    idle_delays = delay[has & ~queued & (g_ts + g_dur > call_end)]
    typical = int(np.median(idle_delays)) if len(idle_delays) else 0
    lat = np.where(queued, np.minimum(delay, typical), delay)
    k_launch = len(srcs)
    srcs.append(last_seg[launch[has]]), dsts.append(gpu_node[has]), lats.append(lat[has])
    kinds.append(np.full(int(has.sum()), 2))
    dur = nodes["dur_ns"].copy()
    woken = sync_edges(trace, nodes, last_seg, gpu_node, g_rows, g_ts, g_ts + g_dur, launch, srcs, dsts, lats,
                        kinds, dur)
    queued_copy = _relaunch(woken, cpu["lane"], k_launch, srcs, dsts, lats, kinds, nodes["start_ns"][n_cpu:], n_cpu,
                            by_pos[1], typical)  # fmt: skip
    _queue_gaps(queued_copy, queue_gap, dsts[1] - n_cpu, lats[1])
    handoff_edges(cpu["lane"], cpu["kind"], cpu["start_ns"], dur[:n_cpu], KIND_GAP, srcs, dsts, lats, kinds)
    nodes["dur_ns"] = dur
    nodes, gpu_node, n_cpu = drop_isolated(nodes, n_cpu, gpu_node, user_lanes, srcs, dsts, lats, kinds)
    if hook is not None:
        node_of_row = np.full(len(ev), -1, np.int64)
        node_of_row[g_rows] = gpu_node
        nodes = hook(nodes, node_of_row, srcs, dsts, lats, kinds)
    n = len(nodes["kind"])
    src, dst, lat_all = (np.concatenate(x).astype(np.int64) for x in (srcs, dsts, lats))
    kind_all = np.concatenate(kinds).astype(np.int8)
    # every edge must go forward in measured (start, node) order: that makes the graph acyclic. An edge
    # against it comes from clocks that disagree (a GPU event starting before the call that launched it).
    # That order is then topological; nodes that start close together sit close together, which keeps a
    # schedule's reads of predecessors in cache
    st = nodes["start_ns"]
    order = np.argsort(st, kind="stable")
    if numbered:  # keep, renumber and group in one kernel (the same arrays as the steps below)
        pos = np.empty(n, np.int64)
        pos[order] = np.arange(n, dtype=np.int64)
        indptr, src_s, lat_s, edge_kind, dropped = forward_csr(n, st, pos, src, dst, lat_all, kind_all)
        dropped = int(dropped)
        nodes = {k: v[order] for k, v in nodes.items()}
        order = np.arange(n, dtype=np.int64)
    else:
        forward = (st[src] < st[dst]) | ((st[src] == st[dst]) & (src < dst))
        dropped = int((~forward).sum())
        src, dst, lat_all, kind_all = src[forward], dst[forward], lat_all[forward], kind_all[forward]
        indptr, src_s, lat_s, eorder = csr_by_dst(n, src, dst, lat_all)
        edge_kind = kind_all[eorder]
    release = np.full(n, NO_RELEASE, np.int64)
    no_pred = indptr[1:] == indptr[:-1]
    release[no_pred] = nodes["start_ns"][no_pred]
    return DepGraph(nodes["kind"], nodes["row"], nodes["lane"], nodes["start_ns"], nodes["dur_ns"], release,
                    indptr, src_s, lat_s, edge_kind, order, dropped)


def _relaunch(woken: dict[int, int], cpu_lane: np.ndarray, k: int, srcs: list, dsts: list, lats: list,
              kinds: list, gpu_start: np.ndarray, n_cpu: int, stream_prev: np.ndarray,
              typical: int) -> np.ndarray:  # fmt: skip
    """A blocking copy's call became its wake-up node: its launch edge leaves from the node before the call.

    The latency is then the GPU start minus the call's start, or, when the stream was still busy as the call
    began (the copy waited in its queue), the smaller of that and ``typical`` (the idle-stream launch delay);
    a call first on its thread loses the edge. Returns which GPU events (stream order) were such queued
    copies: their stream edge must keep the measured gap (:func:`_queue_gaps`).
    """
    queued = np.zeros(len(gpu_start), bool)
    if not woken:
        return queued
    src, dst, lat = srcs[k].copy(), dsts[k], lats[k].copy()
    keep = np.ones(len(src), bool)
    for e in np.flatnonzero(np.isin(src, list(woken))):
        seg, p = int(src[e]), int(dst[e]) - n_cpu
        if seg > 0 and cpu_lane[seg - 1] == cpu_lane[seg]:
            src[e], lat[e] = seg - 1, int(gpu_start[p]) - woken[seg]
            if stream_prev[p] >= woken[seg]:
                lat[e], queued[p] = min(int(lat[e]), typical), True
        else:
            keep[e] = False
    srcs[k], dsts[k], lats[k], kinds[k] = src[keep], dst[keep], lat[keep], kinds[k][keep]
    return queued


def relabelled(g: DepGraph) -> DepGraph:
    """``g`` with its nodes renumbered in topological order (``order`` becomes ``arange``)."""
    from .._kernels.dag import relabel

    o = g.order
    indptr, src, lat, edge_of = relabel(o, g.indptr, g.src, g.lat_ns)
    return DepGraph(g.kind[o], g.row[o], g.lane[o], g.start_ns[o], g.dur_ns[o], g.release_ns[o], indptr, src, lat,
                    g.edge_kind[edge_of], np.arange(len(o), dtype=np.int64), g.dropped_edges,
                    None if g.rank is None else g.rank[o])
