"""Steps of a what-if: the step kernels against plain Python, every step's time in a job, on real traces."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit._kernels.step_nodes import follow_launches, window_steps
from aonkit.analysis.critical_path import Rule, prepared, what_if
from aonkit.analysis.steps import profiler_steps
from aonkit.analysis.whatif_steps import node_steps, step_times

from .conftest import require_shared
from .gen_ranks import write_job
from .test_critical_path import STEP_TRACES
from .test_dag_kernels import random_dag


def _ref_window_steps(rank, start, dur, is_gap, windows):  # noqa: ANN001, ANN202
    """Each node: the window of its rank with the latest start at or before it, if it starts before its end."""
    out = []
    for r, s, d, gap in zip(rank, start, dur, is_gap):
        mine = [w for w in windows if w[0] == r and w[1] <= s]
        if not mine:
            out.append(-1)
            continue
        _, ts, end, step = max(mine, key=lambda w: (w[1], windows.index(w)))
        out.append(step if s < end and not (gap and s + d > end) else -1)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_window_steps_is_the_plain_reading(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, ranks = int(rng.integers(0, 80)), int(rng.integers(1, 5))
    windows = []
    for r in range(ranks):  # each rank's windows: back to back or apart, some ranks with none
        t = int(rng.integers(0, 50))
        for s in range(int(rng.integers(0, 4))):
            length = int(rng.integers(1, 40))
            windows.append((r, t, t + length, 100 + s))
            t += length + int(rng.integers(0, 10))
    windows.sort(key=lambda w: (w[0], w[1]))
    rank = rng.integers(-1, ranks + 1, n).astype(np.int64)  # -1 (a hub) and a rank with no windows
    start = rng.integers(0, 200, n).astype(np.int64)
    dur = rng.integers(0, 30, n).astype(np.int64)
    is_gap = rng.random(n) < 0.3
    w = np.array(windows, np.int64).reshape(-1, 4)
    lo = np.searchsorted(w[:, 0], np.arange(ranks), "left")
    hi = np.searchsorted(w[:, 0], np.arange(ranks), "right")
    got = window_steps(rank, start, dur, is_gap, lo, hi, w[:, 1].copy(), w[:, 2].copy(), w[:, 3].copy())
    assert got.tolist() == _ref_window_steps(rank.tolist(), start.tolist(), dur.tolist(), is_gap.tolist(), windows)


@pytest.mark.parametrize("seed", range(20))
def test_follow_launches_is_the_plain_reading(seed: int) -> None:
    from aonkit._kernels import dag

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    src, dst, lat, _, _ = random_dag(rng, n, int(rng.integers(0, 3 * n + 1)))
    indptr, s, _, perm = dag.csr_by_dst(n, src, dst, lat)
    ek = rng.integers(0, 7, len(src)).astype(np.int8)[perm]
    kind = rng.integers(0, 4, n).astype(np.int8)
    order, ok = dag.topo_order(n, indptr, s)
    assert ok
    step = rng.integers(-1, 4, n).astype(np.int64)
    got = follow_launches(order, indptr, s, ek, kind, step, 2, 5, 2, 3)
    want = step.copy()
    for v in order.tolist():  # sources first
        edges = range(indptr[v], indptr[v + 1])
        if kind[v] == 3:
            want[v] = max([want[s[e]] for e in edges if ek[e] == 5], default=-1)
        elif kind[v] == 2:
            fed = [e for e in edges if ek[e] == 2 or (ek[e] == 5 and kind[s[e]] == 3)]
            if fed:
                want[v] = want[s[fed[0]]]
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("seed", range(10))
def test_group_span_is_the_plain_reading(seed: int) -> None:
    from aonkit._kernels.step_nodes import group_span

    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(0, 100)), int(rng.integers(1, 6))
    code = rng.integers(-1, k, n).astype(np.int64)
    start = rng.integers(-50, 50, n).astype(np.int64)
    finish = start + rng.integers(0, 30, n)
    lo, hi = group_span(code, k, start, finish)
    for c in range(k):
        mine = code == c
        assert lo[c] == (start[mine].min() if mine.any() else np.iinfo(np.int64).max)
        assert hi[c] == (finish[mine].max() if mine.any() else np.iinfo(np.int64).min)


@pytest.mark.parametrize("seed", range(10))
def test_latest_other_end_is_the_plain_reading(seed: int) -> None:
    from aonkit._kernels.step_nodes import latest_other_end

    rng = np.random.default_rng(seed)
    n, q = int(rng.integers(0, 60)), int(rng.integers(1, 20))
    key, end, lane = rng.integers(0, 3, n), rng.integers(0, 100, n), rng.integers(0, 4, n)
    order = np.lexsort((end, key))
    key, end, lane = key[order], end[order], lane[order]
    c_key, c_lane = rng.integers(0, 3, q), rng.integers(0, 4, q)
    hi = rng.integers(0, 110, q)
    lo = hi - rng.integers(0, 20, q)
    got = latest_other_end(key, end, lane, np.searchsorted(key, c_key, "left"), np.searchsorted(key, c_key, "right"),
                           c_lane, lo, hi)  # fmt: skip
    for k in range(q):
        fits = [p for p in range(n) if key[p] == c_key[k] and lo[k] <= end[p] <= hi[k] and lane[p] != c_lane[k]]
        want = max(fits, key=lambda p: (end[p], p)) if fits else -1
        assert got[k] == want or (want >= 0 and end[got[k]] == end[want] and lane[got[k]] != c_lane[k]), k


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> aonkit.TraceSet:
    out = tmp_path_factory.mktemp("job4")
    write_job(out, ranks=4, steps=4, straggler=2, seed=5, launches=True, profiler_steps=True, host_in_steps=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return aonkit.load(out)


def test_every_step_of_a_job_at_once_is_each_step_on_its_own(job: aonkit.TraceSet) -> None:
    ps = step_times(job)
    assert len(ps) == 4 and (ps["model_ns"] == ps["measured_ns"]).all()  # the identity, step by step
    assert step_times({r: job[r] for r in job}).equals(ps)  # a plain mapping of ranks too
    trace, g = prepared(job)
    steps = node_steps(trace, g)
    assert set(np.unique(g.rank[(steps >= 0) & (g.kind != 3)]).tolist()) == {0, 1, 2, 3}  # by each rank's own steps
    assert (steps[g.kind == 3] >= 0).all()  # hubs: the step of the kernels that arrive at them
    rules = [Rule(0.5, kind="gpu")]
    per = what_if(job, rules).per_step()
    for _, row in per.iterrows():
        one = what_if(job, rules, step=int(row["step"]), scope="launched")
        assert (one.step_time_ns, one.model_ns, one.measured_ns) == (row["step_time_ns"], row["model_ns"],
                                                                     row["measured_ns"])  # fmt: skip
    assert (per["step_time_ns"] < ps["step_time_ns"]).all()


def test_a_lazy_job_reads_its_steps_without_combining_its_ranks(tmp_path: Path) -> None:
    write_job(tmp_path, ranks=3, steps=3, straggler=1, seed=2, launches=True, profiler_steps=True, host_in_steps=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = step_times(aonkit.load(tmp_path))
        lazy_job = aonkit.load(tmp_path, lazy=True)
        try:
            r = what_if(lazy_job)
            lazy = r.per_step()
            assert "_later" in r._context[0].__dict__  # the combined events were never made
        finally:
            lazy_job.close()
    assert lazy.equals(eager)


@pytest.mark.parametrize("rel", STEP_TRACES)
def test_identity_of_every_step_launched_scope_on_real_traces(rel: str) -> None:
    """Each ProfilerStep with the GPU work it launched: reproduced exactly, and at least as long as the step."""
    t = aonkit.load(require_shared("traces") / rel)
    steps = profiler_steps(t).set_index("step")
    ps = what_if(t).per_step().set_index("step")
    assert ps.index.tolist() == steps.index.tolist()
    assert (ps["model_ns"] == ps["measured_ns"]).all() and (ps["model_ns"] == ps["step_time_ns"]).all()
    assert (ps["measured_ns"] >= steps["dur_ns"] * 0.99).all()
    ends = steps["gpu_end_ns"].where(steps["gpu_end_ns"] >= 0, steps["ts_ns"] + steps["dur_ns"])
    assert (ps["end_ns"] >= np.minimum(ends, steps["ts_ns"] + steps["dur_ns"])).all()
