"""Graph kernels of the critical-path / what-if engine, against a slow, obvious pure-Python reference.

Timing (not asserted; run ``python -m tests.test_dag_kernels`` on the 2-core dev machine): a re-time
(``schedule`` on ``scale_each``-d durations) on 1,000,000 nodes and ~3,000,000 edges takes ~25 ms when nodes
are numbered topologically (by time, or after ``relabel``) and ~130 ms with a random numbering, where every
node access is a cache miss.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from aonkit._kernels import dag
from aonkit._kernels.dag_csr import forward_csr

NO = int(dag.NO_RELEASE)


# ---------------------------------------------------------------- reference


def ref_schedule(n, src, dst, lat, dur, release):
    """start/finish by evaluating each node once all its predecessors are known; crit edge in input order."""
    incoming = [[e for e in range(len(src)) if dst[e] == v] for v in range(n)]
    start, finish, pred, edge = {}, {}, [-1] * n, [-1] * n
    while len(finish) < n:
        progress = False
        for v in range(n):
            if v in finish or any(src[e] not in finish for e in incoming[v]):
                continue
            arrivals = [(finish[src[e]] + lat[e], e) for e in incoming[v]]
            start[v] = max([release[v]] + [t for t, _ in arrivals])
            setters = [e for t, e in arrivals if t == start[v]]  # input order; a predecessor beats the release
            if setters:
                pred[v], edge[v] = int(src[setters[0]]), setters[0]
            finish[v] = start[v] + dur[v]
            progress = True
        assert progress, "reference given a cycle"
    return [start[v] for v in range(n)], [finish[v] for v in range(n)], pred, edge


def ref_topo(n, src, dst):
    """Kahn's algorithm taking the smallest ready node each time; the nodes it could order."""
    indeg = [sum(1 for d in dst if d == v) for v in range(n)]
    ready = {v for v in range(n) if indeg[v] == 0}
    order = []
    while ready:
        u = min(ready)
        ready.remove(u)
        order.append(u)
        for e in range(len(src)):
            if src[e] == u:
                indeg[dst[e]] -= 1
                if indeg[dst[e]] == 0:
                    ready.add(int(dst[e]))
    return order


def ref_path(finish, pred, end=None):
    v = max(range(len(finish)), key=lambda u: (finish[u], -u)) if end is None else end
    path = [v]
    while pred[path[-1]] >= 0:
        path.append(pred[path[-1]])
    return path[::-1]


def ref_latest_start(n, src, dst, lat, dur, finish):
    horizon = max(finish)
    memo = {}

    def ls(v):
        if v not in memo:
            lf = min([horizon] + [ls(int(dst[e])) - lat[e] for e in range(len(src)) if src[e] == v])
            memo[v] = lf - dur[v]
        return memo[v]

    return [ls(v) for v in range(n)]


def ref_scale_each(dur, factor):
    return [d if f == 1.0 else int(round(float(d) * float(f))) for d, f in zip(dur, factor)]


# ---------------------------------------------------------------- helpers


def arr(x, dtype=np.int64):
    return np.asarray(x, dtype=dtype)


def build(n, edges, lat=None):
    src = arr([a for a, _ in edges])
    dst = arr([b for _, b in edges])
    lat = np.zeros(len(edges), np.int64) if lat is None else arr(lat)
    return src, dst, lat


def run(n, src, dst, lat, dur, release):
    """CSR, order and schedule through the kernels; crit edges mapped back to input edge indices."""
    indptr, s, lt, eorder = dag.csr_by_dst(n, src, dst, lat)
    order, ok = dag.topo_order(n, indptr, s)
    assert ok
    start, finish, pred, edge = dag.schedule(order, indptr, s, lt, arr(dur), arr(release))
    edge_in = arr([eorder[e] if e >= 0 else -1 for e in edge])
    return start, finish, pred, edge_in, (order, indptr, s, lt)


def random_dag(rng, n, m, lat_max=3, dur_max=5):
    """Edges from lower to higher index of a random permutation, then random node labels and edge order."""
    a = rng.integers(0, n, m) if n else np.zeros(0, np.int64)
    b = rng.integers(0, n, m) if n else np.zeros(0, np.int64)
    keep = a != b
    lo, hi = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
    labels = rng.permutation(n)
    src, dst = labels[lo].astype(np.int64), labels[hi].astype(np.int64)
    lat = rng.integers(0, lat_max + 1, src.size).astype(np.int64)
    dur = rng.integers(0, dur_max + 1, n).astype(np.int64)
    release = np.where(rng.random(n) < 0.3, rng.integers(0, 15, n), NO).astype(np.int64)
    return src, dst, lat, dur, release


# ---------------------------------------------------------------- hand-built graphs


def test_chain() -> None:
    src, dst, lat = build(4, [(2, 0), (1, 2), (3, 1)], lat=[5, 0, 1])  # 3 -> 1 -> 2 -> 0, numbered out of order
    start, finish, pred, edge, (order, *_) = run(4, src, dst, lat, [10, 20, 30, 40], [NO, NO, NO, 0])
    assert order.tolist() == [3, 1, 2, 0]
    assert start.tolist() == [96, 41, 61, 0] and finish.tolist() == [106, 61, 91, 40]
    assert pred.tolist() == [2, 3, 1, -1] and edge.tolist() == [0, 2, 1, -1]
    assert dag.critical_path(finish, pred).tolist() == [3, 1, 2, 0]


def test_diamond_with_a_latency_on_one_branch() -> None:
    # 0 -> {1, 2} -> 3; branch 2 is shorter but its edge into 3 has a latency that makes it critical
    src, dst, lat = build(4, [(0, 1), (0, 2), (1, 3), (2, 3)], lat=[0, 0, 0, 7])
    start, finish, pred, edge, _ = run(4, src, dst, lat, [1, 5, 3, 2], [0, NO, NO, NO])
    assert start.tolist() == [0, 1, 1, 11] and finish.tolist() == [1, 6, 4, 13]
    assert pred[3] == 2 and edge[3] == 3
    assert dag.critical_path(finish, pred).tolist() == [0, 2, 3]


def test_release_dominates() -> None:
    src, dst, lat = build(3, [(0, 1), (1, 2)], lat=[1, 1])
    start, finish, pred, edge, _ = run(3, src, dst, lat, [2, 2, 2], [0, 100, NO])
    assert start.tolist() == [0, 100, 103] and pred.tolist() == [-1, -1, 1] and edge[1] == -1
    assert dag.critical_path(finish, pred).tolist() == [1, 2]  # the path starts where the release took over


def test_ties() -> None:
    # into 3: edges from 2 and 0 (that input order) both arrive at 4, and the release is 4 too
    src, dst, lat = build(4, [(2, 3), (0, 3), (1, 3), (0, 3)], lat=[0, 2, 0, 2])
    start, finish, pred, edge, _ = run(4, src, dst, lat, [2, 1, 4, 0], [0, 0, 0, 4])
    assert start[3] == 4 and pred[3] == 2 and edge[3] == 0  # a predecessor beats the release; first edge wins
    # parallel edges from one node: the first in input order
    src, dst, lat = build(2, [(0, 1), (0, 1)], lat=[3, 3])
    assert run(2, src, dst, lat, [1, 1], [0, NO])[3].tolist() == [-1, 0]
    # two nodes finish last together: the path ends at the smaller index
    assert dag.critical_path(arr([5, 9, 9]), arr([-1, -1, -1])).tolist() == [1]


def test_zero_duration_nodes() -> None:
    src, dst, lat = build(3, [(0, 1), (1, 2)])
    start, finish, pred, _, _ = run(3, src, dst, lat, [0, 0, 5], [7, NO, NO])
    assert start.tolist() == [7, 7, 7] and finish.tolist() == [7, 7, 12] and pred.tolist() == [-1, 0, 1]
    assert dag.critical_path(finish, pred).tolist() == [0, 1, 2]


def test_empty_graph() -> None:
    e = np.zeros(0, np.int64)
    indptr, s, lt, eorder = dag.csr_by_dst(0, e, e, e)
    assert indptr.tolist() == [0] and s.size == lt.size == eorder.size == 0
    order, ok = dag.topo_order(0, indptr, s)
    assert ok and order.size == 0
    for out in dag.schedule(order, indptr, s, lt, e, e):
        assert out.size == 0
    assert dag.scale_each(e, np.zeros(0)).size == 0
    assert dag.critical_path(e, e).size == 0
    assert all(x.size == 0 for x in dag.slack(order, indptr, s, lt, e, e, e))


def test_nodes_without_edges() -> None:
    e = np.zeros(0, np.int64)
    indptr, s, lt, _ = dag.csr_by_dst(3, e, e, e)
    order, ok = dag.topo_order(3, indptr, s)
    assert ok and order.tolist() == [0, 1, 2]
    start, finish, pred, edge = dag.schedule(order, indptr, s, lt, arr([1, 2, 3]), arr([5, 0, NO]))
    assert start.tolist() == [5, 0, NO] and pred.tolist() == edge.tolist() == [-1, -1, -1]


def test_csr_by_dst_is_a_stable_counting_sort() -> None:
    src, dst, lat = arr([4, 0, 3, 1, 2, 0]), arr([1, 2, 1, 0, 1, 2]), arr([10, 11, 12, 13, 14, 15])
    indptr, s, lt, eorder = dag.csr_by_dst(5, src, dst, lat)
    assert indptr.tolist() == [0, 1, 4, 6, 6, 6]
    assert eorder.tolist() == [3, 0, 2, 4, 1, 5]
    assert s.tolist() == src[eorder].tolist() and lt.tolist() == lat[eorder].tolist()
    with pytest.raises(ValueError):
        dag.csr_by_dst(5, arr([0]), arr([5]), arr([0]))
    with pytest.raises(ValueError):
        dag.csr_by_dst(5, arr([-1]), arr([0]), arr([0]))


def _forward_csr_reference(n, start, pos, src, dst, lat, kind):
    """The steps forward_csr fuses, one at a time in numpy: keep forward edges, renumber, counting sort."""
    fwd = (start[src] < start[dst]) | ((start[src] == start[dst]) & (src < dst))
    indptr, s, lt, eorder = dag.csr_by_dst(n, pos[src[fwd]], pos[dst[fwd]], lat[fwd])
    return indptr, s, lt, kind[fwd][eorder], int((~fwd).sum())


@pytest.mark.parametrize("seed", range(6))
def test_forward_csr_is_the_mask_renumbering_and_counting_sort_in_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 300)), int(rng.integers(0, 2000))
    start = rng.integers(0, 50, n).astype(np.int64)  # many equal starts: the id rule decides those
    pos = np.empty(n, np.int64)
    pos[np.argsort(start, kind="stable")] = np.arange(n)
    src, dst = rng.integers(0, n, m).astype(np.int64), rng.integers(0, n, m).astype(np.int64)
    lat, kind = rng.integers(0, 1000, m).astype(np.int64), rng.integers(0, 6, m).astype(np.int8)
    got = forward_csr(n, start, pos, src, dst, lat, kind)
    want = _forward_csr_reference(n, start, pos, src, dst, lat, kind)
    for g, w in zip(got[:4], want[:4]):
        assert g.dtype == w.dtype and np.array_equal(g, w)
    assert got[4] == want[4] and want[4] > 0 or m == 0  # some edges went back and were left out


def test_forward_csr_refuses_endpoints_outside_the_graph() -> None:
    one = arr([0])
    for s_, d_ in (([0], [3]), ([-1], [0]), ([3], [0])):
        with pytest.raises(ValueError):
            forward_csr(3, arr([0, 1, 2]), arr([0, 1, 2]), arr(s_), arr(d_), one, np.zeros(1, np.int8))


def test_cycle_detected() -> None:
    # 0 -> 1 -> 2 -> 3 -> 1 (a cycle); 4 hangs off the cycle; 5 is free
    src, dst, lat = build(6, [(0, 1), (1, 2), (2, 3), (3, 1), (2, 4)])
    indptr, s, lt, _ = dag.csr_by_dst(6, src, dst, lat)
    order, ok = dag.topo_order(6, indptr, s)
    assert not ok and order.tolist() == [0, 5, -1, -1, -1, -1]
    assert order[order >= 0].tolist() == ref_topo(6, src, dst)
    start, finish, pred, edge = dag.schedule(order, indptr, s, lt, arr([1] * 6), arr([0] * 6))
    assert start.tolist() == [0, dag.UNSET, dag.UNSET, dag.UNSET, dag.UNSET, 0]
    assert pred.tolist() == edge.tolist() == [-1] * 6
    # a self-loop is a cycle too
    indptr, s, _, _ = dag.csr_by_dst(2, arr([0, 1]), arr([1, 1]), arr([0, 0]))
    order, ok = dag.topo_order(2, indptr, s)
    assert not ok and order.tolist() == [0, -1]


def test_critical_path_to_a_given_end() -> None:
    src, dst, lat = build(4, [(0, 1), (1, 2), (0, 3)])
    _, finish, pred, _, _ = run(4, src, dst, lat, [1, 1, 1, 50], [0, NO, NO, NO])
    assert dag.critical_path(finish, pred).tolist() == [0, 3]
    assert dag.critical_path(finish, pred, 2).tolist() == [0, 1, 2]
    assert dag.critical_path(finish, pred, 0).tolist() == [0]
    with pytest.raises(ValueError):
        dag.critical_path(finish, pred, 4)


# ---------------------------------------------------------------- random graphs against the reference


@pytest.mark.parametrize("seed", range(40))
def test_random_dags_match_the_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    src, dst, lat, dur, release = random_dag(rng, n, int(rng.integers(0, 3 * n + 1)))
    start, finish, pred, edge, (order, indptr, s, lt) = run(n, src, dst, lat, dur, release)
    assert order.tolist() == ref_topo(n, src, dst)
    r_start, r_finish, r_pred, r_edge = ref_schedule(n, src.tolist(), dst.tolist(), lat.tolist(), dur.tolist(),
                                                     release.tolist())
    assert start.tolist() == r_start and finish.tolist() == r_finish
    assert pred.tolist() == r_pred and edge.tolist() == r_edge
    path = dag.critical_path(finish, pred)
    assert path.tolist() == ref_path(r_finish, r_pred)
    end = int(rng.integers(0, n))
    assert dag.critical_path(finish, pred, end).tolist() == ref_path(r_finish, r_pred, end)
    # the path is made of edges that are tight, and starts at a node its release (or nothing) set
    assert pred[path[0]] == -1 and finish[path[-1]] == finish.max()
    for u, v in zip(path[:-1], path[1:]):
        assert start[v] == finish[u] + lat[edge[v]] and src[edge[v]] == u and dst[edge[v]] == v
    latest, sl = dag.slack(order, indptr, s, lt, dur, start, finish)
    assert latest.tolist() == ref_latest_start(n, src, dst, lat, dur, r_finish)
    assert (sl == latest - start).all() and (sl >= 0).all() and (sl[path] == 0).all()


@pytest.mark.parametrize("seed", range(10))
def test_relabel_keeps_the_schedule(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 60))
    src, dst, lat, dur, release = random_dag(rng, n, 3 * n, lat_max=1, dur_max=2)  # many ties
    start, finish, pred, _, (order, indptr, s, lt) = run(n, src, dst, lat, dur, release)
    ip2, s2, l2, edge_of = dag.relabel(order, indptr, s, lt)
    ident, ok = dag.topo_order(n, ip2, s2)
    assert ok and ident.tolist() == list(range(n))  # a topological numbering is its own smallest order
    st2, fi2, pr2, ed2 = dag.schedule(ident, ip2, s2, l2, dur[order], release[order])
    assert (st2 == start[order]).all() and (fi2 == finish[order]).all()
    assert [order[u] if u >= 0 else -1 for u in pr2] == pred[order].tolist()  # ties too: edge order is kept
    _, _, _, csr_edge = dag.schedule(order, indptr, s, lt, dur, release)
    assert [edge_of[e] if e >= 0 else -1 for e in ed2] == csr_edge[order].tolist()
    with pytest.raises(ValueError):
        dag.relabel(np.zeros(n, np.int64) if n > 1 else arr([-1]), indptr, s, lt)


# ---------------------------------------------------------------- retime


def test_scale_each_rounds_half_to_even() -> None:
    dur = arr([1, 3, 5, 7, 10, 4, 9, 2**60 + 1])
    factor = np.array([0.5, 0.5, 0.5, 0.5, 0.25, 1.0, 1 / 3, 1.0])
    assert dag.scale_each(dur, factor).tolist() == [0, 2, 2, 4, 2, 4, 3, 2**60 + 1] == ref_scale_each(dur, factor)


@pytest.mark.parametrize("seed", range(10))
def test_schedule_with_a_class_halved_matches_the_reference(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    n = int(rng.integers(1, 40))
    src, dst, lat, dur, release = random_dag(rng, n, 2 * n, dur_max=9)  # odd durations: halves to round
    indptr, s, lt, eorder = dag.csr_by_dst(n, src, dst, lat)
    order, _ = dag.topo_order(n, indptr, s)
    factor = np.where(rng.integers(0, 2, n) == 1, 0.5, 1.0)
    start, finish, pred, edge = dag.schedule(order, indptr, s, lt, dag.scale_each(dur, factor), release)
    halved = ref_scale_each(dur.tolist(), factor.tolist())
    r_start, r_finish, r_pred, r_edge = ref_schedule(n, src.tolist(), dst.tolist(), lat.tolist(), halved,
                                                     release.tolist())
    assert start.tolist() == r_start and finish.tolist() == r_finish and pred.tolist() == r_pred
    assert [eorder[e] if e >= 0 else -1 for e in edge] == r_edge


# ---------------------------------------------------------------- timing (not a test)


def _bench(n: int = 1_000_000, m: int = 3_000_000) -> None:
    """Median time of a re-time (after compiling) on a random DAG: mostly local edges plus long-range ones."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, n - 1, m)
    span = np.where(rng.random(m) < 0.8, rng.integers(1, 64, m), rng.integers(1, n, m))
    b = np.minimum(a + span, n - 1)
    a, b = a[b > a], b[b > a]
    lat = rng.integers(0, 1000, a.size).astype(np.int64)
    dur = rng.integers(0, 100_000, n).astype(np.int64)
    release = np.where(rng.random(n) < 0.1, rng.integers(0, 10**9, n), NO).astype(np.int64)
    cls = rng.integers(-1, 8, n).astype(np.int32)
    scale = rng.random(8) * 2
    labels = rng.permutation(n)  # node i of the generation gets number labels[i]
    for name, relabelled in (("topological numbering", False), ("random numbering", True)):
        src, dst, d, r, c = (labels[a], labels[b], *_renumber(labels, dur, release, cls)) if relabelled else (
            a, b, dur, release, cls)
        indptr, s, lt, _ = dag.csr_by_dst(n, src.astype(np.int64), dst.astype(np.int64), lat)
        order, ok = dag.topo_order(n, indptr, s)
        assert ok
        t = _median_ms(_retime, order, indptr, s, lt, d, r, c, scale)
        print(f"{name}, {n} nodes, {a.size} edges: retime {t}")
        if relabelled:
            ip2, s2, l2, _ = dag.relabel(order, indptr, s, lt)
            ident = np.arange(n, dtype=np.int64)
            t = _median_ms(_retime, ident, ip2, s2, l2, d[order], r[order], c[order], scale)
            print(f"{name} after relabel: retime {t}")


def _retime(order, indptr, src, lat, dur, release, cls, scale):
    factor = np.where(cls < 0, 1.0, scale[np.maximum(cls, 0)])
    return dag.schedule(order, indptr, src, lat, dag.scale_each(dur, factor), release)


def _renumber(labels, *node_arrays):
    out = []
    for x in node_arrays:
        y = np.empty_like(x)
        y[labels] = x
        out.append(y)
    return out


def _median_ms(f, *args, reps=15):
    f(*args)  # compiled (or loaded from the cache) and warm
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f(*args)
        times.append(time.perf_counter() - t0)
    return f"median {np.median(times) * 1e3:.1f} ms, min {min(times) * 1e3:.1f} ms"


if __name__ == "__main__":
    _bench()


def test_gather_spans_matches_python_slices() -> None:
    """``gather_spans`` (the cache writer's copy of each event's text) against plain slicing, bad spans included."""
    from aonkit._kernels.spans import copy_spans, gather_spans, span_offsets

    rng = np.random.default_rng(11)
    buf = rng.integers(0, 256, 5000, dtype=np.uint8)
    start = rng.integers(-5, 5000, 400).astype(np.int64)
    end = start + rng.integers(-3, 60, 400)
    blob, offsets = gather_spans(buf, start, end)
    want = [buf[s:e].tobytes() if s >= 0 and e >= s and e <= len(buf) else b"" for s, e in zip(start, end)]
    assert blob.tobytes() == b"".join(want)
    assert [blob[offsets[i] : offsets[i + 1]].tobytes() for i in range(len(want))] == want
    assert np.array_equal(span_offsets(buf, start, end), offsets)
    kept = np.full(len(blob) + 100, 7, np.uint8)  # a buffer kept from a longer text: the same bytes, then its rest
    copy_spans(buf, start, offsets, kept)
    assert kept[: len(blob)].tobytes() == blob.tobytes() and (kept[len(blob) :] == 7).all()
    with pytest.raises(ValueError):
        copy_spans(buf, start, offsets, np.empty(len(blob) - 1, np.uint8))
