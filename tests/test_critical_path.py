"""Dependency graph, critical path and what-if (first version: one rank), on hand-built and real traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aonkit
from aonkit._kernels.segments import thread_segments
from aonkit.analysis.critical_path import Rule, critical_path, graph_of, what_if

from .conftest import SAMPLE_TRACES, load_events, require_shared


def _x(name: str, cat: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def small_trace(tmp_path: Path) -> aonkit.Trace:
    """Two launches on one thread, two kernels on one stream (the second queued), a device sync, an op after.

    µs: L1 [0,10] -> K1 [20,120]; L2 [15,25] -> K2 [120,220] (queued behind K1);
    cudaDeviceSynchronize [30,225] waits for K2; op [225,260].
    """
    ev = [
        _x("step", "user_annotation", 0, 260),
        _x("cudaLaunchKernel", "cuda_runtime", 0, 10, correlation=1),
        _x("cudaLaunchKernel", "cuda_runtime", 15, 10, correlation=2),
        _x("cudaDeviceSynchronize", "cuda_runtime", 30, 195),
        _x("aten::add", "cpu_op", 225, 35),
        _x("gemm", "kernel", 20, 100, tid=7, pid=0, correlation=1, device=0, stream=7),
        _x("relu", "kernel", 120, 100, tid=7, pid=0, correlation=2, device=0, stream=7),
    ]
    return load_events(tmp_path, ev)


def test_identity_reproduces_the_measured_trace(tmp_path: Path) -> None:
    t = small_trace(tmp_path)
    r = what_if(t)
    assert r.model_ns == r.measured_ns == r.step_time_ns == 260_000
    g = graph_of(t)
    assert (r.start_ns == g.start_ns).all()  # every node re-timed to its measured start
    path = r.critical_path
    assert path["name"].tolist() == ["cudaLaunchKernel", "gemm", "relu", "cudaDeviceSynchronize", "aten::add"]
    assert path["kind"].tolist() == ["cpu", "gpu", "gpu", "cpu", "cpu"]
    assert path["wait_ns"].tolist() == [0, 10_000, 0, 5_000, 0]  # launch delay, queued, the sync's wake-up
    assert path["dur_ns"].sum() + path["wait_ns"].sum() == r.step_time_ns


def test_faster_kernels_move_the_queued_kernel_and_the_sync(tmp_path: Path) -> None:
    t = small_trace(tmp_path)
    r = what_if(t, [Rule(0.5, kind="gpu")])
    # K1 [20,70]; K2 queued: max(K1 end 70, L2 end 25 + the idle-stream launch delay 10) = 70 -> [70,120];
    # the sync wakes 5 us after K2 as measured: 125; then the op (35) and the step's own end
    assert r.step_time_ns == 160_000 and r.speedup == pytest.approx(260 / 160)
    assert what_if(t, [{"scale": 2.0, "name": "^gemm$"}]).step_time_ns == 360_000  # dict rules too
    assert what_if(t, [Rule(0.0, kind="cpu", name="aten::add")]).step_time_ns == 225_000
    assert critical_path(t)["name"].iloc[1] == "gemm"


def test_a_step_window(tmp_path: Path) -> None:
    ev = []
    for k in range(3):
        base = 1000.0 * k
        ev += [_x(f"ProfilerStep#{k}", "user_annotation", base, 500), _x("cudaLaunchKernel", "cuda_runtime", base,
               10, correlation=k + 1), _x("k", "kernel", base + 20, 300 + 100 * k, tid=7, pid=0, correlation=k + 1,
                                          device=0, stream=7)]  # fmt: skip
    t = load_events(tmp_path, ev)
    r = what_if(t, step=1)
    assert r.measured_ns == r.model_ns == 500_000  # the step annotation spans its kernel (20 + 400 us)
    assert what_if(t, [Rule(2.0, kind="gpu")], step=2).step_time_ns == 20_000 + 1_000_000
    with pytest.raises(ValueError, match="no ProfilerStep#7"):
        what_if(t, step=7)


def test_unlaunched_gpu_events_keep_their_measured_gaps_and_overlaps(tmp_path: Path) -> None:
    """GPU events with no launch in the trace: each keeps its own gap (or overlap) after its stream predecessor."""
    ev = [_x("op", "cpu_op", 0, 5),  # no launch calls: every kernel's launch is outside the trace
          _x("k1", "kernel", 10, 20, tid=7, pid=0, correlation=1, device=0, stream=7),
          _x("k2", "kernel", 33, 20, tid=7, pid=0, correlation=2, device=0, stream=7),  # 3 us after k1 (queued)
          _x("k3", "kernel", 52, 20, tid=7, pid=0, correlation=3, device=0, stream=7),  # 1 us overlap
          _x("k4", "kernel", 572, 20, tid=7, pid=0, correlation=4, device=0, stream=7)]  # 500 us idle  # fmt: skip
    t = load_events(tmp_path, ev)
    g = graph_of(t)
    stream = g.edge_kind == 1
    assert sorted(g.lat_ns[stream].tolist()) == [-1_000, 3_000, 500_000]  # the measured gaps, once each
    r = what_if(t)
    assert (r.start_ns == g.start_ns).all() and r.model_ns == r.measured_ns == 592_000
    assert what_if(t, [Rule(0.5, kind="gpu")]).step_time_ns == 592_000 - 40_000  # four kernels of 20 -> 10 us


def test_a_step_ends_where_its_threads_wait_for_the_next(tmp_path: Path) -> None:
    """A thread idle across the step's end (a worker waiting for the next step) is not the step's time."""
    ev = []
    for k in range(2):
        base = 1000.0 * k
        ev += [_x(f"ProfilerStep#{k}", "user_annotation", base, 900),
               _x("aten::mm", "cpu_op", base + 100, 700),
               _x("autograd::engine", "cpu_op", base + 50, 200, tid=2)]  # done at base + 250, then idle  # fmt: skip
    t = load_events(tmp_path, ev)
    r = what_if(t, step=0)
    assert r.measured_ns == r.model_ns == 900_000  # not 1,050 us: the worker's wait until the next step's op
    path = r.critical_path  # the step's own thread to its end (the annotation's last self time), not the wait
    assert path["lane"].nunique() == 1 and (path["start_ns"] + path["dur_ns"]).max() == 900_000
    assert what_if(t, [Rule(0.5, kind="cpu", name="aten::mm")], step=0).step_time_ns == 900_000 - 350_000


def _reference_segments(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Self time by brute force: each elementary interval belongs to the innermost open event (or a gap)."""
    out = []
    for th in np.unique(thread):
        idx = np.flatnonzero(thread == th)
        cut = {}
        stack: list[int] = []
        for i in idx:  # cut each event at its parent's end, as the kernel does
            while stack and cut[stack[-1]] <= ts[i]:
                stack.pop()
            cut[i] = min(max(end[i], ts[i]), cut[stack[-1]]) if stack else max(end[i], ts[i])
            stack.append(i)
        points = sorted({int(ts[i]) for i in idx} | {int(cut[i]) for i in idx})
        for a, b in zip(points, points[1:]):
            open_ = [i for i in idx if ts[i] <= a and cut[i] >= b]
            owner = max(open_, key=lambda i: (ts[i], -cut[i], i)) if open_ else -1
            if out and out[-1][0] == th and out[-1][3] == owner and out[-1][2] == a:
                out[-1] = (th, out[-1][1], b, owner)
            else:
                out.append((int(th), a, b, owner))
    return out


def test_thread_segments_match_a_brute_force_reference(rng: np.random.Generator) -> None:
    for _ in range(30):
        n = int(rng.integers(1, 40))
        thread = np.sort(rng.integers(0, 3, n)).astype(np.int64)
        ts = rng.integers(0, 100, n).astype(np.int64)
        end = ts + rng.integers(1, 60, n)
        order = np.lexsort((-end, ts, thread))
        thread, ts, end = thread[order], ts[order], end[order]
        th, t0, t1, owner, first, last = thread_segments(thread, ts, end)
        got = [(int(a), int(b), int(c), int(d)) for a, b, c, d in zip(th, t0, t1, owner) if c > b]
        merged: list[tuple[int, int, int, int]] = []
        for s in got:  # the kernel may split one owner's time where a child began and ended at one instant
            if merged and merged[-1][0] == s[0] and merged[-1][3] == s[3] and merged[-1][2] == s[1]:
                merged[-1] = (s[0], merged[-1][1], s[2], s[3])
            else:
                merged.append(s)
        assert merged == _reference_segments(thread, ts, end)
        assert (first >= 0).all() and (last >= first).all()  # every event has a segment, leaves included


@pytest.mark.parametrize("rel", ["tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
                                 "hta/nccl_parser_config/nccl_data.json.gz",
                                 "kineto-tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
                                 "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"])  # fmt: skip
def test_identity_on_real_traces(rel: str) -> None:
    t = aonkit.load(require_shared("traces") / rel)
    r = what_if(t)
    assert abs(r.model_ns - r.measured_ns) <= 0.02 * r.measured_ns
    faster = what_if(t, [Rule(0.5, kind="gpu")])
    assert faster.step_time_ns <= r.model_ns  # halving GPU time never slows the trace down
    assert (faster.critical_path["dur_ns"] >= 0).all() and faster.critical_path["share"].sum() == pytest.approx(1)


def _backward_on_its_thread(tmp_path: Path, late_us: float = 0) -> aonkit.Trace:
    """Forward [0,100] on thread 1, which waits (untraced) until [600,650]; backward on thread 2 in between.

    Thread 2 ran [-1500,-1450] before (the last step's backward, over 1 ms before thread 1 starts: no handoff
    that way), starts 10 us (+ ``late_us``) after thread 1 went idle: two ops of 240 us, and thread 1
    resumes 10 us after them.
    """
    b0 = 110 + late_us
    ev = [_x("ProfilerStep#1", "user_annotation", 0, 650), _x("aten::mm", "cpu_op", 0, 100),
          _x("Optimizer.step", "cpu_op", 600, 50),
          _x("autograd::engine::evaluate_function: X", "cpu_op", -1500, 50, tid=2),
          _x("autograd::engine::evaluate_function: A", "cpu_op", b0, 240, tid=2),
          _x("autograd::engine::evaluate_function: B", "cpu_op", b0 + 240, 240, tid=2)]  # fmt: skip
    if late_us:  # thread 1's wait moves with thread 2's start
        ev[0]["dur"] += late_us
        ev[2]["ts"] += late_us
    return load_events(tmp_path, ev)


def test_a_thread_waiting_for_another_is_tied_to_it(tmp_path: Path) -> None:
    """PyTorch's backward on the autograd thread: the Python thread's wait is no host work; both hand off."""
    from aonkit.analysis.depgraph_threads import EDGE_HANDOFF

    t = _backward_on_its_thread(tmp_path)
    g = graph_of(t)
    assert sorted(g.lat_ns[g.edge_kind == EDGE_HANDOFF].tolist()) == [10_000, 10_000]
    r = what_if(t, step=1)
    assert r.model_ns == r.measured_ns == 650_000
    assert r.critical_path["name"].tolist() == ["aten::mm", "autograd::engine::evaluate_function: A",
                                                    "autograd::engine::evaluate_function: B", "Optimizer.step"]
    faster = what_if(t, [Rule(0.5, kind="cpu", tid=2)], step=1)  # the backward ops 480 -> 240 us
    assert faster.step_time_ns == 650_000 - 240_000
    assert what_if(t, [Rule(0.5, kind="cpu", name="aten::mm")], step=1).step_time_ns == 650_000 - 50_000


def test_a_thread_starting_long_after_another_went_idle_is_no_handoff(tmp_path: Path) -> None:
    from aonkit.analysis.depgraph_threads import EDGE_HANDOFF, HANDOFF_NS

    t = _backward_on_its_thread(tmp_path, late_us=HANDOFF_NS / 1000 + 1)
    g = graph_of(t)
    assert not (g.edge_kind == EDGE_HANDOFF).any()
    r = what_if(t, [Rule(0.5, kind="cpu", tid=2)], step=1)
    assert r.step_time_ns == r.measured_ns  # thread 1's untraced time is host work: nothing moves it


def test_a_waiting_thread_may_resume_before_the_other_is_done(tmp_path: Path) -> None:
    """The autograd thread's last op can outlast the Python thread's wake-up: the join is from the op done by then."""
    from aonkit.analysis.depgraph_threads import EDGE_HANDOFF

    ev = [_x("aten::mm", "cpu_op", 0, 100), _x("Optimizer.step", "cpu_op", 600, 50),
          _x("autograd::engine::evaluate_function: A", "cpu_op", 110, 240, tid=2),
          _x("autograd::engine::evaluate_function: B", "cpu_op", 350, 240, tid=2),  # done at 590, 10 us before
          _x("autograd::engine::evaluate_function: C", "cpu_op", 590, 300, tid=2)]  # to 890, 290 us after  # fmt: skip
    t = load_events(tmp_path, ev)
    g = graph_of(t)
    handoff = g.edge_kind == EDGE_HANDOFF
    dst = np.repeat(np.arange(len(g)), np.diff(g.indptr))
    names = t.events["name"].astype(str).to_numpy()
    assert sorted((names[g.row[s]], names[g.row[d]], int(lat)) for s, d, lat in
                  zip(g.src[handoff], dst[handoff], g.lat_ns[handoff])) == [
        ("aten::mm", "autograd::engine::evaluate_function: A", 10_000),
        ("autograd::engine::evaluate_function: B", "Optimizer.step", 10_000)]  # fmt: skip
    r = what_if(t, [Rule(0.5, kind="cpu", name=": A$")])  # A 240 -> 120 us: B, then the optimizer, 120 us earlier
    ev2 = r.retimed_trace().events
    assert int(ev2.loc[ev2["name"] == "Optimizer.step", "ts_ns"].iat[0]) == int(
        t.events.loc[t.events["name"] == "Optimizer.step", "ts_ns"].iat[0]) - 120_000  # fmt: skip


def test_identity_with_handoffs_on_random_threads(tmp_path: Path) -> None:
    """Three threads of random ops (zero-length ones, ties on whole µs, idle gaps around the handoff limits):
    whatever handoffs are found, the identity re-times every node to its measured start."""
    rng = np.random.default_rng(0)
    found = 0
    for case in range(200):
        ev = []
        for tid in (1, 2, 3):
            t0 = float(rng.integers(0, 300))
            for _ in range(int(rng.integers(2, 8))):
                d = float(rng.choice([0, 0, 5, 50, 200]))
                ev.append(_x(f"op{tid}", "cpu_op", t0, d, tid=tid))
                t0 += d + float(rng.choice([0, 0, 150, 400, 1500, 3000]))
        t = load_events(tmp_path / str(case), ev)
        g = graph_of(t)
        found += int((g.edge_kind == 6).any())
        r = what_if(t)
        assert r.model_ns == r.measured_ns and (r.start_ns == g.start_ns).all(), case
    assert found > 30  # the cases do exercise handoffs (47 of 200)


def test_backward_on_the_autograd_thread_of_a_real_trace() -> None:
    """df_index_resolver: the Python thread waits through each backward; a faster backward now shortens the run."""
    from aonkit.analysis.depgraph_threads import EDGE_HANDOFF

    t = aonkit.load(require_shared("traces") / "hta/df_index_resolver/df_index_resolver.json.gz")
    g = graph_of(t)
    assert (g.edge_kind == EDGE_HANDOFF).sum() == 2 * 5  # one backward per step, five steps
    base = what_if(t)
    assert base.model_ns == base.measured_ns
    ev = t.events
    backward_tid = ev.loc[ev["name"].astype(str).str.startswith("autograd::engine"), "tid"].astype(str).mode().iat[0]
    faster = what_if(t, [Rule(0.5, kind="cpu", tid=backward_tid)])
    assert faster.step_time_ns < 0.8 * base.model_ns  # it was the identity's time before the handoffs
    assert (base.critical_path["kind"] == "gap").mean() < 0.2


def test_a_poller_thread_sets_no_span_a_user_thread_stays(tmp_path: Path) -> None:
    """A thread of runtime calls tied to nothing (a watchdog's cudaEventQuery) is left out of the graph."""
    ev = [_x("cudaLaunchKernel", "cuda_runtime", 0, 10, correlation=1),
          _x("gemm", "kernel", 20, 100, tid=7, pid=0, correlation=1, device=0, stream=7),
          _x("cudaDeviceSynchronize", "cuda_runtime", 15, 110)]  # fmt: skip
    poll = [_x("cudaEventQuery", "cuda_runtime", t0, 2, tid=3) for t0 in (-50, 40, 150)]
    t = load_events(tmp_path / "poll", ev + poll)
    g = graph_of(t)
    assert not np.isin(g.row[g.row >= 0], np.arange(3, 6)).any()  # the three queries: no node
    r = what_if(t)
    assert r.measured_ns == r.model_ns == 125_000  # the work's span, not the poller's (-50 .. 152 us)
    assert what_if(t, [Rule(0.5, kind="gpu")]).step_time_ns == 125_000 - 50_000
    user = load_events(tmp_path / "user", ev + [_x("aten::add", "cpu_op", 150, 2, tid=3)])
    assert what_if(user).measured_ns == 152_000  # an op: user code, kept although tied to nothing


STEP_TRACES = ["hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "hta/call_stack/backward_thread.json",
               "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
               "hta/df_index_resolver/df_index_resolver.json.gz", "hta/nccl_parser_config/nccl_data.json.gz",
               "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
               "hta/timeline_analysis/sampled_rank-0.json.gz", "hta/trace_compare/base/base.json.gz",
               "hta/trace_compare/test/test.json.gz", "hta/trace_diff/control/control.json.gz",
               "hta/trace_diff/test/test.json.gz", "hta/trace_filter/sampled_rank-1.json.gz",
               "hta/triton_example/triton_example.json.gz",
               "tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz",
               "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
               "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
               "tracelens/mi300/resnet_act_checkpoint.json.gz"]  # fmt: skip
"""Every shared GPU trace with ProfilerSteps (hta/trace_filter/sampled_rank-0 is timeline_analysis' file)."""


@pytest.mark.parametrize("rel", STEP_TRACES)
def test_identity_per_profiler_step_on_real_traces(rel: str) -> None:
    """Each step: the identity within 2% of the measured step, which starts as its ProfilerStep and ends no
    earlier; the path never ends in a thread's wait past the step (a host gap running past its end)."""
    from aonkit.analysis.steps import profiler_steps

    t = aonkit.load(require_shared("traces") / rel)
    steps = profiler_steps(t)
    assert len(steps)
    for _, s in steps.iterrows():
        r = what_if(t, step=int(s["step"]))
        assert abs(r.model_ns - r.measured_ns) <= 0.02 * r.measured_ns, (rel, s["step"])
        assert r.measured_ns >= 0.99 * s["dur_ns"], (rel, s["step"])
        end = int(s["ts_ns"] + s["dur_ns"])
        path = r.critical_path
        gaps = path[path["kind"] == "gap"]
        assert (gaps["start_ns"] + gaps["dur_ns"] <= end).all(), (rel, s["step"])


def test_edges_against_measured_time_are_dropped_not_cycled(tmp_path: Path) -> None:
    # clocks that disagree: the kernel starts (50 us) before the call that launched it (100 us)
    ev = [_x("cudaLaunchKernel", "cuda_runtime", 100, 10, correlation=1),
          _x("k", "kernel", 50, 30, tid=7, pid=0, correlation=1, device=0, stream=7)]  # fmt: skip
    t = load_events(tmp_path / "skew", ev)
    assert graph_of(t).dropped_edges == 1  # the launch edge cannot be kept: it would point back in time
    r = what_if(t)
    assert r.model_ns == r.measured_ns
    real = aonkit.load(require_shared("traces") / "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    r = what_if(real)  # a real ROCm trace builds (no cycle) and reproduces itself
    assert abs(r.model_ns - r.measured_ns) <= 0.02 * r.measured_ns


def test_the_top_level_interface(tmp_path: Path) -> None:
    t = small_trace(tmp_path)
    r = aonkit.what_if(t, [])
    assert r.step_time_ns == r.measured_ns and r.speedup == 1.0 and len(r.critical_path) == 5
    assert aonkit.what_if(aonkit.TraceSet({0: t})).step_time_ns == r.step_time_ns  # a job of one rank


def _stream_wait(b_start: float) -> list[dict]:
    """A on stream 7 [10,110]; B on stream 9 waits for it (cudaEventRecord + cudaStreamWaitEvent) from ``b_start``."""
    return [
        _x("cudaLaunchKernel", "cuda_runtime", 0, 5, correlation=1),
        _x("cudaEventRecord", "cuda_runtime", 6, 2, correlation=3),
        _x("cudaStreamWaitEvent", "cuda_runtime", 9, 2, correlation=4),
        _x("cudaLaunchKernel", "cuda_runtime", 12, 3, correlation=2),
        _x("A", "kernel", 10, 100, tid=7, pid=0, correlation=1, device=0, stream=7),
        _x("Stream Wait Event", "cuda_sync", 11, 1, tid=9, pid=0, stream=9, wait_on_stream=7,
           wait_on_cuda_event_record_corr_id=3, correlation=4, device=0),
        _x("B", "kernel", b_start, 50, tid=9, pid=0, correlation=2, device=0, stream=9),
    ]


def test_a_stream_wait_passes_a_speedup_across_streams(tmp_path: Path) -> None:
    t = load_events(tmp_path, _stream_wait(110))  # B runs [110,160], right after A
    assert int((graph_of(t).edge_kind == 4).sum()) == 1
    r = what_if(t, [Rule(0.5, name="^A$")])
    assert r.model_ns == r.measured_ns == 160_000
    assert r.step_time_ns == 110_000  # B follows A across streams instead of keeping its measured launch delay
    assert r.critical_path["name"].tolist() == ["cudaLaunchKernel", "A", "B"]


def test_a_recorded_wait_the_measurement_contradicts_pushes_nothing(tmp_path: Path) -> None:
    # B waits for A by Kineto's row but starts 10 us before A ends (a mismatched row or clock): the identity
    # must still start B when it was measured; the wait stays, with the measured overlap as its latency
    t = load_events(tmp_path, _stream_wait(100))
    g = graph_of(t)
    assert int((g.edge_kind == 4).sum()) == 1
    r = what_if(t)
    assert (r.start_ns == g.start_ns).all() and r.step_time_ns == r.measured_ns == 150_000
    assert g.lat_ns[g.edge_kind == 4].tolist() == [-10_000]
    slower = what_if(t, [Rule(1.5, name="^A$")])
    assert slower.step_time_ns == 200_000  # A ends at 160 us, B 10 us before it: [150, 200]


def test_the_what_if_panel_updates_on_a_slider(tmp_path: Path) -> None:
    from aonkit.widgets import WhatIfPanel

    t = small_trace(tmp_path)
    p = WhatIfPanel(t)
    assert p.result.step_time_ns == 260_000 and "speed-up <b>1.000x" in p.summary.value
    before = list(p.source.data["ms"])
    p.sliders["GPU computation"].value = 0.5  # the observer re-times at once
    assert p.result.step_time_ns == 160_000 and "1.625x" in p.summary.value
    assert p.source.data["ms"] != before and p.source.data["part"][0] == "gpu computation"
    p.pattern.value, p.pattern_scale.value = "^aten::add$", 0.0
    assert p.result.step_time_ns == 125_000
    # the op scaled to nothing changes the lanes: a new re-timed timeline takes the old one's place
    assert p.children[-1] is p.timeline and "re-timed" in p.timeline.trace.warnings[-1]
    p.pattern.value = "(["  # a bad pattern says so and keeps the last result
    assert "cannot apply" in p.summary.value and p.result.step_time_ns == 125_000
    assert p._repr_mimebundle_()["text/plain"].startswith("what-if: step 125,000 ns")


def test_the_panel_re_times_changes_that_arrive_together_once_and_a_read_applies_a_waiting_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import asyncio

    import aonkit.widgets.whatif as wi
    from aonkit.widgets import WhatIfPanel

    t = small_trace(tmp_path)
    p = WhatIfPanel(t, timeline=False)
    calls: list[int] = []
    real = wi.what_if
    monkeypatch.setattr(wi, "what_if", lambda *a, **k: calls.append(1) or real(*a, **k))

    async def in_a_kernel() -> None:  # the kernel's loop is running: changes wait for it
        # WHEN a dragged slider's values and another slider's arrive together (the kernel was busy meanwhile)
        for v in (0.9, 0.7, 0.5):
            p.sliders["GPU computation"].value = v
        p.sliders["host gaps"].value = 0.5
        assert calls == []
        await asyncio.sleep(0.1)
        # THEN one re-time answers them all, with the latest values
        assert len(calls) == 1
        want = what_if(t, [Rule(0.5, gpu_class="computation"), Rule(0.5, kind="gap")]).step_time_ns
        assert p._result.step_time_ns == want and p.source.data["ms"][0] > 0
        # AND a cell that sets a slider and reads the result at once sees the new answer
        p.sliders["GPU computation"].value = 1.0
        assert p.result.step_time_ns == what_if(t, [Rule(0.5, kind="gap")]).step_time_ns and len(calls) == 2
        await asyncio.sleep(0.05)
        assert len(calls) == 2  # nothing left waiting

    asyncio.run(in_a_kernel())


def test_the_panel_gives_the_step_period_of_a_gpu_running_behind(tmp_path: Path) -> None:
    from aonkit.units import fmt_ns
    from aonkit.widgets import WhatIfPanel

    p = WhatIfPanel(load_events(tmp_path, _lagging(20, steps=True)), step=2, scope="launched", timeline=False)
    assert p.result.step_time_ns == 467_000 and f"step period (median) <b>{fmt_ns(190_000)}" in p.summary.value
    p.sliders["GPU computation"].value = 0.5
    assert f"step period (median) <b>{fmt_ns(115_000)}</b> (model {fmt_ns(190_000)}); <b>1.652x" in p.summary.value
    assert "step period" not in WhatIfPanel(small_trace(tmp_path / "one"), timeline=False).summary.value


def test_the_panel_redraws_the_retimed_timeline(tmp_path: Path) -> None:
    from aonkit.widgets import WhatIfPanel

    # GIVEN the panel over a small trace (no event loop here: the debounced redraw runs at once)
    t = small_trace(tmp_path)
    p = WhatIfPanel(t, width_px=800)
    tl = p.timeline

    def gpu_bars() -> dict[str, float]:  # each kernel's drawn width (ms), by name: what the page was last sent
        c, names = tl.columns, tl.tables["names"]
        return {names[k]: r - lo for k, r, lo in zip(c["name"], c["x1"], c["x0"]) if names[k] in ("gemm", "relu")}

    before = gpu_bars()
    # WHEN GPU computation is made twice as fast
    p.sliders["GPU computation"].value = 0.5
    # THEN the same figure and source now draw the re-timed kernels: each half as long as measured
    after = gpu_bars()
    assert p.timeline is tl and set(after) == set(before) == {"gemm", "relu"}
    for name, width in after.items():
        assert width == pytest.approx(before[name] / 2, rel=1e-6), name
    assert p.timeline.trace.warnings[-1].startswith("re-timed by aonkit.what_if")
    # and the outline follows the new critical path: its boxes are the re-timed path's events where they now lie
    from aonkit.timeline import critical_boxes

    want = critical_boxes(p.timeline.trace, p.result.critical_path)
    assert "relu" in list(want["name"]) and len(p.timeline.critical["x1"]) == len(want["name"])
    np.testing.assert_allclose(p.timeline.critical["x1"], want["right"])
    assert max(p.timeline.critical["x1"]) == pytest.approx(p.result.step_time_ns / 1e6)  # the path ends the step
    # and a trace with other lanes is refused rather than drawn wrong
    with pytest.raises(ValueError, match="lanes differ"):
        p.timeline.retime(aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"))


def test_the_compared_timelines_stay_linked_when_the_retimed_one_is_replaced(tmp_path: Path) -> None:
    from aonkit.widgets import WhatIfPanel

    p = WhatIfPanel(small_trace(tmp_path), width_px=800, compare=True)
    assert list(p.children[-2:]) == [p.measured, p.timeline]
    assert p._link.source == (p.measured, "view") and p._link.target == (p.timeline, "view")
    assert p.measured.critical == p.timeline.critical  # no change yet: the same path
    p.measured.focus = ["relu"]  # a focus on either is the other's
    assert p.timeline.focus == ["relu"] and len(p.timeline.timeline.focus) > 0
    first = p.timeline
    p.pattern.value, p.pattern_scale.value = "^aten::add$", 0.0  # the op scaled to nothing: other lanes
    assert p.timeline is not first and p.children[-1] is p.timeline
    assert p._link.source == (p.measured, "view") and p._link.target == (p.timeline, "view")  # linked anew
    assert p.timeline.focus == ["relu"]  # the focus carried over, and linked anew
    p.timeline.focus = []
    assert p.measured.focus == [] and first.focus == ["relu"]  # the old timeline is out of the link
    # without the comparison too, a replaced timeline keeps the focus
    q = WhatIfPanel(small_trace(tmp_path), width_px=800)
    q.timeline.focus = ["relu"]
    before = q.timeline
    q.pattern.value, q.pattern_scale.value = "^aten::add$", 0.0
    assert q.timeline is not before and q.timeline.focus == ["relu"] and len(q.timeline.timeline.focus) > 0


def test_a_faster_straggler_shortens_the_job_by_the_planted_numbers(tmp_path: Path) -> None:
    from .gen_ranks import GEMM, write_job

    write_job(tmp_path, ranks=4, steps=1, straggler=2, exposed_ranks=(0, 1, 2, 3), seed=3, launches=True)
    job = aonkit.load_job(tmp_path)
    base = what_if(job)
    assert base.model_ns == base.measured_ns  # the identity, across ranks on one clock
    g = graph_of(job)
    assert int((g.kind == 3).sum()) == 1 and int((g.edge_kind == 4).sum()) == 4  # one collective, 4 stream waits

    def compute(rank: int, scale: float = 1.0) -> int:  # each rank's GEMMs, then 2 us each: its arrival
        ev = job[rank].events
        d = ev.loc[(ev["name"] == GEMM) & (ev["stream"] == 7), "dur_ns"].to_numpy()
        return int(sum(int(np.rint(x * scale)) + 2_000 for x in d))

    arrivals = {r: compute(r) for r in range(4)}
    assert max(arrivals, key=arrivals.get) == 2  # the planted straggler arrives last
    faster = what_if(job, [Rule(1 / 1.3, rank=2, name="gemm")])
    new_last = max(max(v for r, v in arrivals.items() if r != 2), compute(2, 1 / 1.3))
    assert base.step_time_ns - faster.step_time_ns == arrivals[2] - new_last > 0
    half = what_if(job, [Rule(0.5, gpu_class="communication")])
    assert base.step_time_ns - half.step_time_ns == 200_000  # every rank's transfer (400 us) halved


def test_monte_carlo_redraws_kernels_from_their_names_durations(tmp_path: Path) -> None:
    # each kernel launched as the stream is idle, 5 us before it runs: its start is its launch's, so a slower
    # earlier kernel moves nothing (a kernel launched while its stream was busy would follow that kernel)
    ev = [_x("cudaLaunchKernel", "cuda_runtime", 100.0 * k, 2, correlation=k + 1) for k in range(6)]
    ev += [_x("k", "kernel", 100.0 * k + 5, d, tid=7, pid=0, correlation=k + 1, device=0, stream=7)
           for k, d in enumerate([10, 10, 10, 10, 10, 60])]  # one slow instance of "k"
    t = load_events(tmp_path, ev)
    r = what_if(t, samples=400, seed=1)
    assert r.samples_ns is not None and len(r.samples_ns) == 400
    # the last kernel ends the trace: its duration is 10 us (5 of 6 draws) or 60 us (1 of 6)
    values, counts = np.unique(r.samples_ns, return_counts=True)
    assert values.tolist() == [r.step_time_ns - 50_000, r.step_time_ns]
    assert 0.1 < counts[1] / 400 < 0.25
    again = what_if(t, samples=400, seed=1).samples_ns
    assert (again == r.samples_ns).all()  # seeded
    half = what_if(t, [Rule(0.5, kind="gpu")], samples=50, seed=1).samples_ns
    assert set(np.unique(half).tolist()) <= {r.step_time_ns - 55_000, r.step_time_ns - 30_000}


def test_the_panel_takes_a_job_and_a_straggler(tmp_path: Path) -> None:
    from aonkit.widgets import WhatIfPanel

    from .gen_ranks import write_job

    write_job(tmp_path, ranks=4, steps=1, straggler=2, exposed_ranks=(0, 1, 2, 3), seed=3, launches=True)
    job = aonkit.load_job(tmp_path)
    p = WhatIfPanel(job)
    assert p.rank.options == (0, 1, 2, 3) and p.result.speedup == 1.0
    p.rank.value = 2
    p.rank_scale.value = 1 / 1.3
    assert p.result.step_time_ns == what_if(job, [Rule(1 / 1.3, kind="gpu", gpu_class="computation",
                                                       rank=2)]).step_time_ns < p.result.model_ns
    assert "collective wait" in p.source.data["part"]


def test_the_path_is_outlined_on_the_dashboard_timeline(tmp_path: Path) -> None:
    from aonkit.timeline import critical_boxes
    from aonkit.widgets import Dashboard

    t = small_trace(tmp_path)
    d = Dashboard(t, width_px=600, critical_path=True)
    boxes = d.timeline.critical  # what the page outlines: the path's events, in path order
    want = critical_boxes(t, critical_path(t))
    assert list(want["name"]) == ["cudaLaunchKernel", "gemm", "relu", "cudaDeviceSynchronize", "aten::add"]
    assert boxes["x0"] == want["left"].tolist() and boxes["x1"] == want["right"].tolist()
    assert boxes["x0"][1] == pytest.approx(0.020) and boxes["x1"][1] == pytest.approx(0.120)  # gemm, ms
    gpu_slot = d.timeline.lanes_frame.set_index("kind").loc["gpu", "slot"]
    assert boxes["slot"][1] == gpu_slot  # on the GPU lane
    assert len(critical_boxes(t, critical_path(t).iloc[:0])["left"]) == 0


def test_the_report_outlines_the_path(tmp_path: Path) -> None:
    from aonkit.cli import main

    t = small_trace(tmp_path)
    page = aonkit.to_html(t, critical_path=True)
    assert "timeline_critical_path" in page and "timeline_critical_path" not in aonkit.to_html(t)
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "t.json"), "-o", str(out), "--critical-path"]) == 0
    assert "timeline_critical_path" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize("call", ["cudaMemcpy", "cudaMemcpyAsync"])
def test_a_blocking_copy_keeps_its_launch_and_its_wait(tmp_path: Path, call: str) -> None:
    # the call [100,400] submits a copy that runs [150,390] inside it; the host continues after the call
    ev = [_x("aten::copy_", "cpu_op", 0, 500),
          _x(call, "cuda_runtime", 100, 300, correlation=1),
          _x("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 150, 240, tid=7, pid=0, correlation=1, device=0,
             stream=7)]  # fmt: skip
    t = load_events(tmp_path, ev)
    r = what_if(t)
    assert r.model_ns == r.measured_ns == 500_000  # the identity holds (the launch edge is not lost)
    assert "Memcpy HtoD (Pageable -> Device)" in r.critical_path["name"].tolist()
    assert what_if(t, [Rule(0.5, kind="gpu")]).step_time_ns == 500_000 - 120_000  # the host waits for the copy


def _lagging(n: int = 20, copy: bool = False, steps: bool = False) -> list[dict]:
    """A host launching every 10 us, its GPU running behind: 30-us kernels 8 us apart (more than dispatch).

    Kernel k runs [5 + 38k, 35 + 38k]; each but the first was launched while its stream was busy. With
    ``copy``, a blocking ``cudaMemcpyAsync`` at 10n us whose copy waits 8 us behind the last kernel; with
    ``steps``, ``ProfilerStep#s`` [50s, 50s + 50] around launches 5s..5s+4.
    """
    ev = [_x("cudaLaunchKernel", "cuda_runtime", 10.0 * k, 2, correlation=k + 1) for k in range(n)]
    if steps:
        ev += [_x(f"ProfilerStep#{s}", "user_annotation", 50.0 * s, 50) for s in range(n // 5)]
    ev += [_x(f"k{k}", "kernel", 5.0 + 38 * k, 30, tid=7, pid=0, correlation=k + 1, device=0, stream=7)
           for k in range(n)]  # fmt: skip
    if copy:
        c0 = 5.0 + 38 * n  # the last kernel's end + 8 us
        ev += [_x("cudaMemcpyAsync", "cuda_runtime", 10.0 * n, c0 + 4 + 2 - 10 * n, correlation=n + 1),
               _x("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", c0, 4, tid=7, pid=0, correlation=n + 1,
                  device=0, stream=7)]  # fmt: skip
    return ev


def test_a_gpu_running_behind_its_host_is_sped_up_by_faster_kernels(tmp_path: Path) -> None:
    # the gaps between queued kernels are the GPU's: kept on the stream, not charged to the launches (whose
    # delays grow with the lag); a launch reaches an idle stream in 3 us (kernel 0)
    t = load_events(tmp_path, _lagging())
    r = what_if(t)
    assert r.model_ns == r.measured_ns == 5_000 + 38_000 * 19 + 30_000
    # GPU x0.5: kernel k starts at max(previous end + 8, launch end + 3) = 5 + 23k (still GPU-bound)
    assert what_if(t, [Rule(0.5, kind="gpu")]).step_time_ns == 5_000 + 23_000 * 19 + 15_000
    # the host is not the bottleneck: only the first launch's 1 us comes off
    assert what_if(t, [Rule(0.5, kind="cpu")]).step_time_ns == r.model_ns - 1_000
    # GPU x0.1: 3-us kernels, 11 us apart, against launches every 10 us: still the GPU, by 1 us a kernel
    assert what_if(t, [Rule(0.1, kind="gpu")]).step_time_ns == 5_000 + 11_000 * 19 + 3_000


def test_a_blocking_copy_queued_behind_a_lagging_gpu_follows_it(tmp_path: Path) -> None:
    t = load_events(tmp_path / "copy", _lagging(5, copy=True))
    r = what_if(t)
    assert r.model_ns == r.measured_ns
    path = r.critical_path
    assert path["name"].tolist()[-2:] == ["Memcpy DtoH (Device -> Pageable)", "cudaMemcpyAsync"]
    # GPU x0.5: kernels end at 20 + 23k; the copy 8 us after the last (112 + 8 = 120) for 2 us, the call
    # wakes 2 us after it, as measured: 124 us (before, the copy kept its 145-us delay after the call's start,
    # and the run its 201 us)
    assert what_if(t, [Rule(0.5, kind="gpu")]).step_time_ns == 124_000


def test_steps_of_a_gpu_running_behind_their_latency_and_period(tmp_path: Path) -> None:
    from aonkit.analysis.whatif_steps import step_times

    t = load_events(tmp_path, _lagging(20, steps=True))
    ps = what_if(t).per_step()
    s = np.arange(4)
    # step s: its host work from 50s, its kernels 5s..5s+4 ending at 35 + 38 (5s + 4) = 187 + 190s
    assert ps["step"].tolist() == s.tolist()
    assert (ps["end_ns"] == (187 + 190 * s) * 1000).all() and (ps["step_time_ns"] == (187 + 140 * s) * 1000).all()
    assert ps["period_ns"].tolist() == [-1, 190_000, 190_000, 190_000]  # the GPU's five kernels, not the host's 50 us
    assert (ps["model_ns"] == ps["measured_ns"]).all() and (ps["model_ns"] == ps["step_time_ns"]).all()
    # kernels x0.5: 23 us each (15 + the GPU's 8-us gap), still behind the host: 115 us a step
    half = step_times(t, [Rule(0.5, kind="gpu")])
    assert half["period_ns"].tolist() == [-1, 115_000, 115_000, 115_000]
    assert (half["end_ns"] == (112 + 115 * s) * 1000).all()
    assert (half["model_period_ns"] == ps["period_ns"]).all()
    assert what_if(t).periods_ns == (190_000, 190_000)
    assert what_if(t, [Rule(0.5, kind="gpu")], step=1, scope="launched").periods_ns == (115_000, 190_000)
    # one step, launched scope: the same latency; the default scope holds what starts in the host's 50 us
    one = what_if(t, step=2, scope="launched")
    assert one.step_time_ns == one.model_ns == one.measured_ns == (187 + 280) * 1000
    assert what_if(t, step=2).step_time_ns == 50_000
    assert set(critical_path(t, step=2, scope="launched")["name"]) >= {f"k{k}" for k in range(10, 15)}
    assert what_if(t, window=(100_000, 150_000), scope="launched").step_time_ns == one.step_time_ns
    with pytest.raises(ValueError, match="scope"):
        what_if(t, step=2, scope="ends")
    with pytest.raises(ValueError, match="no ProfilerStep#9"):
        what_if(t, step=9, scope="launched")
    assert step_times(load_events(tmp_path / "none", _lagging(5))).empty  # no steps: no rows


def test_a_wait_for_another_stream_is_inferred_when_the_trace_has_no_wait_row(tmp_path: Path) -> None:
    # DDP without Kineto's Stream Wait Event rows: compute kernel K_k (stream 7, launched early) starts 2 us
    # after the all-reduce C_k (stream 20, launched 1 us before it runs) ends, three steps running
    nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
    ev = []
    for k in range(3):
        ev += [_x("cudaLaunchKernel", "cuda_runtime", 100.0 * k + 7, 2, correlation=2 * k + 1),
               _x("cudaLaunchKernel", "cuda_runtime", 10.0 * k + 20, 2, correlation=2 * k + 2),
               _x(nccl, "kernel", 100.0 * k + 10, 50, tid=20, pid=0, correlation=2 * k + 1, device=0, stream=20),
               _x(f"K{k}", "kernel", 100.0 * k + 62, 10, tid=7, pid=0, correlation=2 * k + 2, device=0, stream=7)]
    t = load_events(tmp_path, ev)
    g = graph_of(t)
    assert int((g.edge_kind == 4).sum()) == 3
    assert what_if(t).model_ns == what_if(t).measured_ns == 272_000 - 7_000
    # the all-reduce twice as fast: each K_k 25 us earlier (before, K_k kept its launch's delay: no change)
    assert what_if(t, [Rule(0.5, gpu_class="communication")]).step_time_ns == 247_000 - 7_000
    # once only: not told apart from chance (two at least), and the old answer stands
    assert int((graph_of(load_events(tmp_path / "one", ev[:4])).edge_kind == 4).sum()) == 0


def test_the_retimed_trace_and_per_rank_times(tmp_path: Path) -> None:
    from aonkit.analysis.kernels import kernel_stats

    t = small_trace(tmp_path)
    r = what_if(t, [Rule(0.5, kind="gpu")])
    rt = r.retimed_trace()
    ev = rt.events.set_index("name")
    assert (int(ev.loc["gemm", "ts_ns"]), int(ev.loc["gemm", "dur_ns"])) == (20_000, 50_000)
    assert (int(ev.loc["relu", "ts_ns"]), int(ev.loc["relu", "dur_ns"])) == (70_000, 50_000)
    assert int(ev.loc["aten::add", "ts_ns"]) == 125_000  # after the sync woke at 125 us
    assert int(kernel_stats(rt)["total_ns"].sum()) == 100_000 and "re-timed by aonkit.what_if" in rt.warnings[-1]
    assert int(t.events.set_index("name").loc["relu", "ts_ns"]) == 120_000  # the measured trace is untouched
    assert r.per_rank_ns.to_dict() == {0: 160_000} and r.critical_path["rank"].tolist() == [0] * 5
    assert what_if(t, [Rule(0.0, tid=1)]).step_time_ns < 260_000  # the host thread's own time removed
    assert what_if(t, [Rule(0.0, tid=99)]).step_time_ns == 260_000  # no such thread: nothing scaled


def test_the_retimed_trace_moves_blocking_calls_and_annotations_with_the_work(tmp_path: Path) -> None:
    t = small_trace(tmp_path)
    cols = ["name", "ts_ns", "dur_ns"]
    # the identity gives the measured trace back, the sync call from where its thread reached it to its wake-up
    same = what_if(t).retimed_trace().events[cols]
    assert same.equals(t.events[cols])
    # GPU x0.5: the sync waits 95 us instead of 195, and the step annotation ends with the op after it
    ev = what_if(t, [Rule(0.5, kind="gpu")]).retimed_trace().events.set_index("name")
    assert (int(ev.loc["cudaDeviceSynchronize", "ts_ns"]), int(ev.loc["cudaDeviceSynchronize", "dur_ns"])) == (
        30_000, 95_000)
    assert (int(ev.loc["step", "ts_ns"]), int(ev.loc["step", "dur_ns"])) == (0, 160_000)


def test_the_identity_retimed_sample_is_the_measured_one_for_nearly_every_event() -> None:
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    a, b = t.events, what_if(t).retimed_trace().events
    same = (a["ts_ns"].to_numpy() == b["ts_ns"].to_numpy()) & (a["dur_ns"].to_numpy() == b["dur_ns"].to_numpy())
    assert same.mean() > 0.98
    syncs = (a["name"] == "cudaStreamSynchronize").to_numpy()
    steps = a["name"].astype(str).str.startswith("ProfilerStep#").to_numpy()
    assert syncs.sum() == 4 and same[syncs].all() and steps.sum() == 4 and same[steps].all()


def test_per_rank_times_of_a_job(tmp_path: Path) -> None:
    from .gen_ranks import write_job

    write_job(tmp_path, ranks=4, steps=1, straggler=2, exposed_ranks=(0, 1, 2, 3), seed=3, launches=True)
    job = aonkit.load_job(tmp_path)
    r = what_if(job)
    spans = r.per_rank_ns
    assert list(spans.index) == [0, 1, 2, 3] and spans.max() <= r.step_time_ns
    assert set(r.critical_path["rank"]) <= {-1, 0, 1, 2, 3}
    assert len(r.retimed_trace().events) == sum(len(x.events) for x in job.values())  # the combined trace


def test_an_nsys_export_has_the_same_graph() -> None:
    path = require_shared("nsys") / "hpcgroup__pipit" / "perlmutter-cloverleaf-cuda.sqlite"
    if not path.exists():
        pytest.skip(f"{path} not found")
    t = aonkit.load(path)
    g = graph_of(t)
    assert int((g.edge_kind == 3).sum()) > 1000 and int((g.edge_kind == 2).sum()) > 1000  # syncs and launches
    r = what_if(t)
    assert r.model_ns == r.measured_ns
    assert what_if(t, [Rule(0.5, kind="gpu")]).speedup > 1.2  # a GPU-bound Cloverleaf: faster GPU, faster run


@pytest.mark.parametrize("with_row", [True, False])
def test_a_stream_sync_waits_for_its_own_stream(tmp_path: Path, with_row: bool) -> None:
    # cudaStreamSynchronize(stream 7) returns at 185 us: its kernel A ended at 180; B on stream 9 ended at 184
    ev = [_x("cudaLaunchKernel", "cuda_runtime", 0, 5, correlation=1),
          _x("cudaLaunchKernel", "cuda_runtime", 6, 5, correlation=2),
          _x("cudaStreamSynchronize", "cuda_runtime", 12, 173, correlation=3),
          _x("aten::add", "cpu_op", 185, 15),
          _x("A", "kernel", 10, 170, tid=7, pid=0, correlation=1, device=0, stream=7),
          _x("B", "kernel", 20, 164, tid=9, pid=0, correlation=2, device=0, stream=9)]  # fmt: skip
    if with_row:
        ev.append(_x("Stream Sync", "cuda_sync", 180, 5, tid=7, pid=0, stream=7, correlation=3, device=0))
    t = load_events(tmp_path, ev)
    r = what_if(t, [Rule(2.0, name="^B$")])
    add = r.retimed_trace().events.set_index("name").loc["aten::add", "ts_ns"]
    # with Kineto's row the host waits for A only, so a slower B does not hold it; without it, the latest
    # kernel that ended while the call waited (B) is taken as the one it waited for
    assert int(add) == (185_000 if with_row else 20_000 + 328_000 + 1_000)


def test_a_sync_does_not_wait_for_another_process(tmp_path: Path) -> None:
    """Process 1's device sync waits for its own kernel, not for process 2's that ended later inside the call."""
    ev = [_x("cudaLaunchKernel", "cuda_runtime", 0, 5, correlation=1),
          _x("cudaDeviceSynchronize", "cuda_runtime", 6, 94),
          _x("aten::add", "cpu_op", 100, 10),
          _x("cudaLaunchKernel", "cuda_runtime", 1, 5, pid=2, tid=2, correlation=2),
          _x("mine", "kernel", 6, 80, tid=7, pid=0, correlation=1, device=0, stream=7),
          _x("theirs", "kernel", 7, 92, tid=9, pid=0, correlation=2, device=0, stream=9)]  # fmt: skip
    t = load_events(tmp_path, ev)
    r = what_if(t, [Rule(2.0, name="^theirs$")])
    add = r.retimed_trace().events.set_index("name").loc["aten::add", "ts_ns"]
    assert int(add) == 100_000  # a slower kernel of another process does not hold this one's host
    r = what_if(t, [Rule(0.5, name="^mine$")])
    add = r.retimed_trace().events.set_index("name").loc["aten::add", "ts_ns"]
    assert int(add) == 100_000 - 40_000  # its own kernel does
