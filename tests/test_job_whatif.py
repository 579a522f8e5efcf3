"""What-if at job scale: the lean re-time kernels, rule codes, and the job graph stitched from per-rank graphs.

The lean kernels (:mod:`aonkit._kernels.retime`) are checked against :func:`aonkit._kernels.dag.schedule`
(itself checked against a pure-Python reference in ``test_dag_kernels``); the stitched job graph against
each rank's own graph, against itself built in worker processes and from a lazily loaded job, and against
its rank-by-rank fallback.
"""

from __future__ import annotations

import mmap
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit._kernels import dag, retime
from aonkit.analysis import depgraph_job, depgraph_stitch
from aonkit.analysis.collectives import comm_kernels
from aonkit.analysis.critical_path import Rule, graph_of, what_if
from aonkit.analysis.depgraph import KIND_GPU, KIND_HUB, build_graph, relabelled
from aonkit.analysis.whatif_rules import factors, rule_codes

from .conftest import SAMPLE_TRACES
from .gen_ranks import write_job
from .test_dag_kernels import random_dag


def _topological(rng: np.random.Generator, n: int) -> tuple:
    """A random DAG numbered in topological order, as CSR of incoming edges."""
    src, dst, lat, dur, release = random_dag(rng, n, int(rng.integers(0, 3 * n + 1)))
    indptr, s, lt, _ = dag.csr_by_dst(n, src, dst, lat)
    order, ok = dag.topo_order(n, indptr, s)
    assert ok
    ip2, s2, l2, _ = dag.relabel(order, indptr, s, lt)
    return ip2, s2, l2, dur[order], release[order]


@pytest.mark.parametrize("seed", range(30))
def test_finish_times_and_path_back_equal_the_full_schedule(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    indptr, src, lat, dur, release = _topological(rng, n)
    code = rng.integers(0, 4, n).astype(np.uint8)
    table = np.array([1.0, 0.5, 1.5, 0.0])[: 1 + int(code.max())] if seed % 3 else np.ones(4)
    factor = table[code]
    scaled = dag.scale_each(dur, factor)
    start, finish, pred, edge = dag.schedule(np.arange(n), indptr, src, lat, scaled, release)
    fin, first, last = retime.finish_times(indptr, src, lat, dur, release, code, table)
    assert fin.tolist() == finish.tolist()
    assert first == start.min() and last == int(np.argmax(finish))
    for end in {last, int(rng.integers(0, n))}:
        nodes, edges = retime.path_back(indptr, src, lat, release, fin, end)
        assert nodes.tolist() == dag.critical_path(finish, pred, end).tolist()
        assert edges.tolist() == edge[nodes].tolist()


def test_scaling_keeps_untouched_durations_and_rounds_half_to_even() -> None:
    dur = np.array([3, 5, 2**60 + 1, 7], np.int64)
    out = dag.scale_each(dur, np.array([0.5, 0.5, 1.0, 1.0]))
    assert out.tolist() == [2, 2, 2**60 + 1, 7]  # 1.5 -> 2, 2.5 -> 2; a factor of 1 keeps every bit


def test_rule_codes_give_the_factors_bit_for_bit() -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    g = graph_of(t)
    rules = [Rule(0.7, kind="gpu"), Rule(1.3, name="Launch|Memcpy"), Rule(0.9, gpu_class="communication"),
             Rule(0.33, kind="cpu"), Rule(2.0, kind="gap")]  # fmt: skip
    for k in range(1, len(rules) + 1):
        code, table = rule_codes(t, g, rules[:k])
        assert np.array_equal(table[code], factors(t, g, rules[:k]))
    assert rule_codes(t, g, [Rule(0.5, kind="gpu")] * 17) is None  # past 16 rules: the full schedule


def test_many_rules_take_the_full_schedule_and_agree() -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    few = what_if(t, [Rule(0.5, kind="gpu")])
    many = what_if(t, [Rule(0.5, kind="gpu")] + [Rule(1.0, kind="cpu")] * 16)
    assert (few.step_time_ns, few.critical_path["row"].tolist()) == (many.step_time_ns,
                                                                     many.critical_path["row"].tolist())
    assert np.array_equal(few.start_ns, many.start_ns) and np.array_equal(few.finish_ns, many.finish_ns)


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("job8")
    write_job(out, ranks=8, steps=3, straggler=5, exposed_ranks=(1, 2), seed=11, launches=True)
    return out


def _load(path: Path, **kw: object) -> aonkit.TraceSet:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return aonkit.load(path, **kw)


def _arrays(g: object) -> dict:
    return {k: np.asarray(getattr(g, k)).copy() for k in ("kind", "row", "lane", "start_ns", "dur_ns", "release_ns",
                                                            "indptr", "src", "lat_ns", "edge_kind", "order", "rank")}


@pytest.mark.parametrize("name", ["gpu_synthetic_rank0.json.gz", "cpu_mlp.pt.trace.json.gz", "job"])
def test_a_graph_numbered_as_it_is_built_is_the_relabelled_graph(name: str, job_dir: Path) -> None:
    """``build_graph(numbered=True)`` renumbers before the CSR; :func:`relabelled` after it: the same arrays."""
    traces = [_load(job_dir)[r] for r in (0, 5)] if name == "job" else [aonkit.load(SAMPLE_TRACES / name)]
    for t in traces:
        a, b = _arrays(relabelled(build_graph(t))), _arrays(build_graph(t, numbered=True))
        assert all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
        assert np.array_equal(b["order"], np.arange(len(b["kind"])))


def test_the_job_graph_is_numbered_topologically_and_holds_each_rank_graph(job_dir: Path) -> None:
    job = _load(job_dir)
    combined, g = depgraph_job.build_job_graph(job)
    dst = np.repeat(np.arange(len(g)), np.diff(g.indptr))
    assert (g.src < dst).all() and np.array_equal(g.order, np.arange(len(g)))
    hubs = np.flatnonzero(g.kind == KIND_HUB)
    assert len(hubs) and (np.diff(g.indptr)[hubs] == len(job)).all()  # every rank arrives at every collective
    into = np.diff(g.indptr)
    transfer = (into == 1) & (g.kind[g.src[np.minimum(g.indptr[:-1], len(g.src) - 1)]] == KIND_HUB)
    assert transfer.sum() == len(hubs) * len(job)
    base = np.cumsum([0, *(len(job[r].events) for r in sorted(job))])
    offsets = combined.metadata["clock_offsets_ns"]
    for i, r in enumerate(sorted(job)):
        own = build_graph(job[r])
        mine = np.flatnonzero((g.rank == r) & ~transfer)
        rows = np.where(g.row[mine] >= 0, g.row[mine] - base[i], -1)
        job_key = np.lexsort((g.start_ns[mine], rows, g.kind[mine]))
        own_key = np.lexsort((own.start_ns, own.row, own.kind))
        assert np.array_equal(g.kind[mine][job_key], own.kind[own_key])
        assert np.array_equal(rows[job_key], own.row[own_key])
        assert np.array_equal(g.start_ns[mine][job_key] + offsets[r], own.start_ns[own_key])  # one clock


@pytest.mark.parametrize("ship_from", [None, 0], ids=["default-threshold", "every-array-shipped"])
def test_workers_and_a_lazy_job_build_the_same_graph(job_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                     ship_from: int | None) -> None:  # fmt: skip
    from aonkit import _shipping

    _, here = depgraph_job.build_job_graph(_load(job_dir))
    if ship_from is not None:  # the workers are forked after this: they write every array to a file
        monkeypatch.setattr(_shipping, "MIN_BYTES", ship_from)
    before = set(Path("/dev/shm").glob("aonkit-*")) if Path("/dev/shm").is_dir() else set()
    monkeypatch.setattr(depgraph_job, "PARALLEL_EVENTS", 1)  # forked workers even for a small job
    _, forked = depgraph_job.build_job_graph(_load(job_dir))
    lazy = _load(job_dir, lazy=True)
    try:
        _, from_lazy = depgraph_job.build_job_graph(lazy)
    finally:
        lazy.close()
    cached = _load(job_dir, lazy=True)  # the caches the first lazy load wrote: nothing remembered from a parse
    here_first = []
    first_here = depgraph_job._first_here
    monkeypatch.setattr(depgraph_job, "_first_here", lambda job, r: (here_first.append(r), first_here(job, r)))
    try:
        assert not cached.remembered(comm_kernels) and not cached.has_workers
        _, from_cached = depgraph_job.build_job_graph(cached)  # graph and comm kernels in one pass per rank
        assert cached.remembered(comm_kernels) == sorted(cached.files)
        assert here_first == [min(cached.files)]  # before the workers were forked: they inherit its kernels
    finally:
        cached.close()
    a = _arrays(here)
    for other in (forked, from_lazy, from_cached):
        b = _arrays(other)
        assert all(np.array_equal(a[k], b[k]) for k in a), [k for k in a if not np.array_equal(a[k], b[k])]
        assert all(a[k].dtype == b[k].dtype for k in a)
    if Path("/dev/shm").is_dir():
        assert set(Path("/dev/shm").glob("aonkit-*")) == before  # each call's folder is gone


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the arena is Linux's")
def test_a_job_graph_in_memory_written_ahead_is_the_same(job_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The arena written while the parent makes the first rank (forked workers and a lazy job) changes nothing."""
    _, here = depgraph_job.build_job_graph(_load(job_dir))
    n_events = sum(len(t.events) for t in _load(job_dir).values())
    monkeypatch.setattr(depgraph_job, "AHEAD_BYTES_PER_EVENT", -(-(80 << 20) // n_events))  # 80 MB for 8 ranks
    monkeypatch.setattr(depgraph_job, "PARALLEL_EVENTS", 1)
    arenas = []
    make = depgraph_job._arena
    monkeypatch.setattr(depgraph_job, "_arena", lambda n: arenas.append(make(n)) or arenas[-1])
    _, forked = depgraph_job.build_job_graph(_load(job_dir))
    _load(job_dir, lazy=True).close()  # writes the caches
    cached = _load(job_dir, lazy=True)
    try:
        _, from_cached = depgraph_job.build_job_graph(cached)
    finally:
        cached.close()
    from aonkit._fresh import usable_cores

    spare = usable_cores() > 1
    assert len(arenas) == 2 and all((a is not None and a.used > 0) == spare for a in arenas)  # no core: none
    page = mmap.PAGESIZE
    assert all(a.written <= -(-a.used // page) * page for a in arenas if a is not None)  # trimmed to what it took
    a = _arrays(here)
    for other in (forked, from_cached):
        b = _arrays(other)
        assert all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)


def _lanes_reference(p) -> np.ndarray:
    """A rank's nodes' lanes as the combined trace numbers them (streams get the rank in bits 48 and up)."""
    from aonkit.analysis.depgraph import KIND_CPU, KIND_GAP

    g = p.graph
    lane = g.lane.copy()
    cpu = ((g.kind == KIND_CPU) | (g.kind == KIND_GAP)) & (lane != -1)
    pid, tid = lane[cpu] >> 32, lane[cpu] & 0xFFFFFFFF
    tid = np.where(tid >= len(p.tid_map) - 1, -1, tid)
    lane[cpu] = (p.pid_map[pid].astype(np.int64) << 32) | p.tid_map[tid].astype(np.int64)
    gpu = g.kind == KIND_GPU
    lane[gpu] = lane[gpu] | (np.int64(p.rank) << 48)
    return lane


def _place_reference(p, nw, arrivals, transfers, drops, out) -> None:
    """The second pass of the stitch in plain numpy, one array operation at a time (the kernel's slow reference)."""
    indptr, kind, row, lane, start, dur, release, rank, src, lat, edge_kind = out
    g = p.graph
    kind[nw], row[nw], lane[nw] = g.kind, np.where(g.row >= 0, g.row + p.row_base, -1), _lanes_reference(p)
    start[nw], rank[nw] = g.start_ns - p.shift_ns, p.rank
    d = g.dur_ns.copy()
    d[arrivals] = 0
    dur[nw] = d
    moved = np.full(len(g), -1, np.int64)
    moved[arrivals] = transfers
    s_new = np.where(moved[g.src] >= 0, moved[g.src], nw[g.src])
    keep = np.ones(len(g.src), bool)
    keep[drops] = False
    e_idx = np.flatnonzero(keep)
    dst = np.repeat(np.arange(len(g)), np.diff(g.indptr))[e_idx]
    kept_before = np.r_[0, np.cumsum(keep)]  # kept edges among the first i
    pos = indptr[nw[dst]] + kept_before[e_idx] - kept_before[g.indptr[dst]]
    src[pos], lat[pos], edge_kind[pos] = s_new[keep], g.lat_ns[keep], g.edge_kind[keep]
    n_in = np.diff(indptr)[nw]
    release[nw] = np.where(n_in == 0, start[nw], dag.NO_RELEASE)


def test_the_stitch_kernel_writes_what_plain_numpy_writes(job_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, fast = depgraph_job.build_job_graph(_load(job_dir))
    monkeypatch.setattr(depgraph_stitch, "_place", _place_reference)
    _, slow = depgraph_job.build_job_graph(_load(job_dir))
    a, b = _arrays(fast), _arrays(slow)
    assert all(np.array_equal(a[k], b[k]) for k in a), [k for k in a if not np.array_equal(a[k], b[k])]
    assert all(a[k].dtype == b[k].dtype for k in a)


def test_the_stitch_kernel_leaves_out_an_edge_that_a_collective_turns_back_in_time(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import pandas as pd

    from aonkit.analysis.depgraph import KIND_CPU, DepGraph

    def rank_graph(rank: int, arrive: int, after: int) -> depgraph_stitch.RankGraph:
        # a launch call (CPU), the collective's kernel, then a kernel the collective's stream runs next
        i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
        g = DepGraph(np.array([KIND_CPU, KIND_GPU, KIND_GPU], np.int8), i64(0, 1, 2), i64(0, 7, 7),
                     i64(arrive - 50, arrive, after), i64(10, 400, 30), i64(), i64(0, 0, 1, 2), i64(0, 1),
                     i64(40, 0), np.array([2, 1], np.int8), i64())  # fmt: skip
        return depgraph_stitch.RankGraph(g, rank, 0, 3 * rank, 3, i64(0, -1), i64(0, -1))

    def stitched() -> dict:
        parts = [rank_graph(0, 100, 200), rank_graph(1, 300, 800)]  # rank 0's next kernel starts before rank 1 arrives
        m = pd.DataFrame({"row": [1, 4], "group": [0, 0], "seq": [0, 0]})
        g = depgraph_stitch.stitch(parts, m)
        assert g.dropped_edges == 1
        return _arrays(g)

    a = stitched()
    monkeypatch.setattr(depgraph_stitch, "_place", _place_reference)
    b = stitched()
    assert all(np.array_equal(a[k], b[k]) for k in a), [k for k in a if not np.array_equal(a[k], b[k])]
    # two launch edges, rank 1's stream edge (from its transfer now), two arrivals into the hub, the hub into each
    # transfer; rank 0's stream edge is the one left out
    assert len(a["src"]) == 3 + 2 + 2


def test_ranks_that_do_not_merge_are_ordered_whole(job_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = _load(job_dir)
    _, merged = depgraph_job.build_job_graph(job)
    monkeypatch.setattr(depgraph_stitch, "_merged", lambda *a: None)
    _, whole = depgraph_job.build_job_graph(_load(job_dir))
    assert not np.array_equal(whole.order, np.arange(len(whole)))
    a, b = relabelled(whole), merged
    sa, sb = dag.schedule(a.order, a.indptr, a.src, a.lat_ns, a.dur_ns, a.release_ns), \
        dag.schedule(b.order, b.indptr, b.src, b.lat_ns, b.dur_ns, b.release_ns)  # fmt: skip
    key = lambda g, s: sorted(zip(g.kind.tolist(), g.row.tolist(), g.lane.tolist(), s[1].tolist()))  # noqa: E731
    assert key(a, sa) == key(b, sb)
    from aonkit.analysis.critical_path import graph_of

    renumbered = graph_of(_load(job_dir))  # what-if renumbers a job graph that is not in topological order
    assert np.array_equal(renumbered.order, np.arange(len(renumbered))) and len(renumbered) == len(whole)
    assert key(renumbered, dag.schedule(renumbered.order, renumbered.indptr, renumbered.src, renumbered.lat_ns,
                                        renumbered.dur_ns, renumbered.release_ns)) == key(b, sb)  # fmt: skip


def test_merging_ranks_that_wait_on_each_other_crosswise_fails() -> None:
    class Part:  # only the number of nodes is read
        def __init__(self, n: int) -> None:
            self.graph = np.zeros(n)

    kl = [np.array([5, 10]), np.array([5, 10])]
    js = [np.array([0, 1]), np.array([2, 3])]
    crosswise = np.array([0, 1, 1, 0])  # rank 1 reaches the collectives in the other order
    assert depgraph_stitch._merged([Part(20), Part(20)], kl, js, crosswise, np.array([2, 2])) is None
    items = depgraph_stitch._merged([Part(20), Part(20)], kl, js, np.array([0, 1, 0, 1]), np.array([2, 2]))
    assert [i[0] for i in items].count("hub") == 2 and sum(b - a for w, _, a, b in items if w == "run") == 40


def test_kind_and_rank_rules_leave_the_ranks_uncombined(job_dir: Path) -> None:
    job = _load(job_dir)
    base = what_if(job)
    trace = job._aon_graph[0]
    faster = what_if(job, [Rule(0.5, kind="gpu")])
    straggler = what_if(job, [Rule(0.7, rank=5)])
    assert "events" not in trace.__dict__  # the combined trace is still to be made
    assert faster.step_time_ns < base.model_ns and straggler.step_time_ns <= base.model_ns
    assert len(straggler.per_rank_ns) == 8
    named = what_if(job, [Rule(0.5, name="nccl")])  # names need the combined events
    assert "events" in trace.__dict__ and len(trace.events) == sum(len(job[r].events) for r in job)
    assert named.critical_path["name"].notna().all()
    assert abs(base.model_ns - base.measured_ns) <= 0.02 * base.measured_ns


def test_the_critical_path_table_names_its_events_from_their_ranks(job_dir: Path) -> None:
    """A job's path table reads the names of its few events from the ranks that hold them: the same as combined."""
    from aonkit.analysis.combine import combine_ranks

    job = _load(job_dir)
    faster = what_if(job, [Rule(0.5, kind="gpu")])
    trace = job._aon_graph[0]
    path = faster.critical_path
    assert "events" not in trace.__dict__ and len(path) and path["name"].notna().all()
    combined = combine_ranks(job)
    rows = np.r_[path["row"].to_numpy()[path["row"].to_numpy() >= 0], 0, len(combined.events) - 1]
    names, cats = trace.names_and_cats(rows)
    assert "events" not in trace.__dict__
    assert list(names) == list(combined.events["name"].to_numpy()[rows])
    assert list(cats) == list(combined.events["cat"].to_numpy()[rows])
    with pytest.raises(IndexError):
        trace.names_and_cats(np.array([len(combined.events)]))
    _ = trace.events  # combined now: the path's names are the same read from the combined events
    again = trace.names_and_cats(rows)
    assert list(again[0]) == list(names) and list(again[1]) == list(cats)
    assert list(what_if(job, [Rule(0.5, kind="gpu")]).critical_path["part"]) == list(path["part"])


def test_the_job_graph_numbers_lanes_as_the_combined_trace(job_dir: Path) -> None:
    from aonkit.analysis.columns import thread_keys
    from aonkit.analysis.combine import combine_ranks, combined_categories
    from aonkit.analysis.depgraph import KIND_CPU

    job = _load(job_dir)
    _, g = depgraph_job.build_job_graph(job)
    combined = combine_ranks(job)
    for column in ("pid", "tid"):
        assert list(combined_categories(job, column)) == list(combined.events[column].cat.categories)
    cpu = np.flatnonzero((g.kind == KIND_CPU) & (g.row >= 0))
    assert len(cpu) and np.array_equal(g.lane[cpu], thread_keys(combined.events, g.row[cpu]))
    gpu = np.flatnonzero(g.kind == KIND_GPU)
    ev = combined.events
    want = (ev["device"].to_numpy()[g.row[gpu]] << 32) | (ev["stream"].to_numpy()[g.row[gpu]] & 0xFFFFFFFF)
    assert np.array_equal(g.lane[gpu], want | (ev["rank"].to_numpy()[g.row[gpu]] << 48))
