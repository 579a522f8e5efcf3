"""Analysis benchmark: every analysis of aonkit on one large trace, side by side with HTA when installed.

Usage: ``PYTHONPATH=. python bench/analyses.py [TRACE]`` (default: the 1,000,000-event
synthetic trace from ``../shared/tools/gen_trace.py``, written to bench/out/).

Times each analysis after the trace is loaded (best of 5 after a warm-up run,
its per-trace memo cleared before each run), then the analyses one after the
other as a notebook runs them (HTA frames made and the memo shared, from a
clean start; best of 3), and, when Holistic Trace Analysis can be imported
(current Python or ``bench/out/hta-venv``), the same analyses in HTA in a
subprocess (best of 5 for calls under 1 s, else one run), and prints the ratios. A real event mix at 1M
events: ``python bench/tile_trace.py ../shared/traces/hta/df_index_resolver/
df_index_resolver.json.gz bench/out/df_index_resolver_x5.json --copies 5``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
GEN = ROOT.parent / "shared" / "tools" / "gen_trace.py"

HTA_SCRIPT = r"""
import json, sys, time, os
from hta.trace_analysis import TraceAnalysis
path = sys.argv[1]
t0 = time.perf_counter()
ta = TraceAnalysis(trace_files={0: path}, trace_dir=os.path.dirname(path))
res = {"load": time.perf_counter() - t0}
calls = {
    "temporal_breakdown": lambda: ta.get_temporal_breakdown(visualize=False),
    "idle_time_breakdown": lambda: ta.get_idle_time_breakdown(ranks=[0], visualize=False, show_idle_interval_stats=True),
    "gpu_kernel_breakdown": lambda: ta.get_gpu_kernel_breakdown(visualize=False),
    "comm_comp_overlap": lambda: ta.get_comm_comp_overlap(visualize=False),
    "cuda_kernel_launch_stats": lambda: ta.get_cuda_kernel_launch_stats(ranks=[0], visualize=False),
    "queue_length_summary": lambda: ta.get_queue_length_summary(ranks=[0]),
    "queue_length_time_series": lambda: ta.get_queue_length_time_series(ranks=[0]),
    "memory_bw_summary": lambda: ta.get_memory_bw_summary(ranks=[0]),
    "memory_bw_time_series": lambda: ta.get_memory_bw_time_series(ranks=[0]),
    "gpu_kernels_with_user_annotations": lambda: ta.get_gpu_kernels_with_user_annotations(rank=0, expand_names=False),
    "gpu_user_annotation_breakdown": lambda: ta.get_gpu_user_annotation_breakdown(visualize=False),
    "aten_op_kernels_and_delay": lambda: ta.get_aten_op_kernels_and_delay(ranks=[0]),
    "profiler_steps": lambda: ta.get_profiler_steps(),
}
for name, fn in calls.items():
    t = time.perf_counter()
    try:
        out = fn()
        res[name] = time.perf_counter() - t
        for _ in range(4 if res[name] < 1.0 else 0):  # best of 5 for the short calls, as for aonkit
            t = time.perf_counter()
            fn()
            res[name] = min(res[name], time.perf_counter() - t)
        if out is None or (hasattr(out, "empty") and out.empty) or (isinstance(out, (dict, list)) and not out):
            res[name] = "no result"  # e.g. the annotation calls on a trace without GPU annotations
    except Exception as exc:
        res[name] = f"error: {type(exc).__name__}"
print(json.dumps(res))
"""


def best(fn, n: int = 5) -> float:
    """The shortest of ``n`` runs (one more untimed run first compiles and warms)."""
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def aonkit_times(
    path: Path, paired: set[str] | None = None
) -> tuple[dict[str, float], dict[str, float], dict[str, float], int]:
    """(point 2 per analysis, point 2 in sequences, HTA-compatible report functions, events), times in s.

    ``paired``: the analyses whose HTA counterpart answered (default: all that have one).
    """
    import aonkit
    from aonkit.analysis import (
        bandwidth,
        collectives,
        correlation,
        diff,
        hta_compat,
        hta_counters,
        idle,
        kernels,
        memo,
        memory,
        queues,
        steps,
    )

    trace = aonkit.load(path)
    frames = hta_compat.hta_frames(trace)
    # the same frames with no launch call and GPU start at one µs (ts doubled, GPU starts odd): no tie then needs
    # the tie rule, and the queue counter's merge of launches and starts runs without falling back to a sort
    untied = {}
    for rank, f in frames.items():
        gpu = f["stream"].to_numpy() != -1
        untied[rank] = f.assign(ts=f["ts"] * 2 + gpu)

    # point 2 as a user calls it, each with its per-trace memo cleared first (so the correlation join, the GPU
    # table and the copy sizes they share are in each one's time); the HTA-semantics ones take the HTA frames,
    # made once per trace like HTA's own load
    native = {
        "GPU links (launch, op stack, annotation, step)": lambda: correlation.gpu_links(trace),
        "kernel breakdown (by class + by name)": lambda: (kernels.kernel_stats(trace, by="class"),
                                                          kernels.kernel_stats(trace)),
        "exposed communication (native)": lambda: collectives.exposed_communication(trace),
        "launch stats (CUDA + HIP)": lambda: kernels.launch_stats(trace),
        "queue length summary (native ns)": lambda: queues.queue_length_summary(trace),
        "queue length series (native ns)": lambda: queues.queue_length_series(trace),
        "copy bandwidth summary (native ns)": lambda: bandwidth.memory_bandwidth_summary(trace),
        "copy bandwidth series (native ns)": lambda: bandwidth.memory_bandwidth_series(trace),
        "GPU time per CPU op": lambda: kernels.gpu_time_per_op(trace),
        "profiler steps with their GPU work (native)": lambda: steps.profiler_steps(trace),
        "memory timeline peaks": lambda: memory.memory_peaks(trace),
        "idle time by cause (native ns, per device)": lambda: idle.idle_summary(trace),
    }  # fmt: skip
    on_frames = {
        "temporal breakdown": lambda: hta_compat.temporal_breakdown(frames),
        "idle time breakdown + interval stats": lambda: hta_counters.idle_time_breakdown(frames),
        "comm/comp overlap": lambda: hta_compat.comm_comp_overlap(frames),
        "GPU user-annotation breakdown": lambda: hta_compat.gpu_user_annotation_breakdown(frames),
        "profiler steps (HTA's list)": lambda: hta_compat.profiler_step_numbers(frames),
    }
    point2 = {"HTA frames (prep, once per trace)": best(lambda: hta_compat.hta_frames(trace))}
    for name, fn in {**native, **on_frames}.items():
        point2[name] = best((lambda f: lambda: (memo.clear(), f()))(fn))
    order = [k for k in point2 if k != "HTA frames (prep, once per trace)"]

    def sequence(names: list[str]) -> float:  # a notebook's run: frames made, memo shared, from a clean start
        def run() -> None:
            memo.clear()
            nonlocal frames
            frames = hta_compat.hta_frames(trace)
            for k in names:
                {**native, **on_frames}[k]()

        return best(run, 3)

    paired = [k for k in order if k in HTA_OF and (paired is None or k in paired)]
    sequences = {
        "every point-2 analysis": sequence(order),
        "paired": sequence(paired),
        "paired without GPU time per op": sequence([k for k in paired if k != "GPU time per CPU op"]),
    }
    report = {
        "temporal_breakdown": point2["temporal breakdown"],
        "idle_time_breakdown": point2["idle time breakdown + interval stats"],
        "gpu_kernel_breakdown": best(
            lambda: (hta_compat.gpu_kernel_breakdown_type(frames), hta_compat.gpu_kernel_breakdown_kernels(frames))
        ),
        "comm_comp_overlap": point2["comm/comp overlap"],
        "cuda_kernel_launch_stats": best(lambda: hta_counters.cuda_kernel_launch_stats(frames)),
        "queue_length_summary": best(lambda: hta_counters.queue_length_summary(frames)),
        "(queue_length_summary, no ties)": best(lambda: hta_counters.queue_length_summary(untied)),
        "memory_bw_summary": best(lambda: hta_counters.memory_bw_summary(frames)),
    }
    point2["trace diff against itself (200 reps, point 5)"] = best(lambda: diff.trace_diff(trace, trace, reps=200), 1)
    return point2, sequences, report, len(trace)


# point 2 analysis -> the HTA call that answers the same question
HTA_OF = {
    "GPU links (launch, op stack, annotation, step)": "gpu_kernels_with_user_annotations",
    "temporal breakdown": "temporal_breakdown",
    "idle time breakdown + interval stats": "idle_time_breakdown",
    "idle time by cause (native ns, per device)": "idle_time_breakdown",
    "kernel breakdown (by class + by name)": "gpu_kernel_breakdown",
    "comm/comp overlap": "comm_comp_overlap",
    "exposed communication (native)": "comm_comp_overlap",
    "launch stats (CUDA + HIP)": "cuda_kernel_launch_stats",
    "queue length summary (native ns)": "queue_length_summary",
    "queue length series (native ns)": "queue_length_time_series",
    "copy bandwidth summary (native ns)": "memory_bw_summary",
    "copy bandwidth series (native ns)": "memory_bw_time_series",
    "GPU user-annotation breakdown": "gpu_user_annotation_breakdown",
    "GPU time per CPU op": "aten_op_kernels_and_delay",
    "profiler steps (HTA's list)": "profiler_steps",
}


def hta_times(path: Path) -> dict | None:
    for py in (sys.executable, str(OUT / "hta-venv" / "bin" / "python")):
        if not Path(py).exists():
            continue
        if subprocess.run([py, "-c", "import hta"], capture_output=True).returncode == 0:
            proc = subprocess.run([py, "-c", HTA_SCRIPT, str(path)], capture_output=True, text=True, timeout=3600)
            if proc.returncode == 0:
                return json.loads(proc.stdout.strip().splitlines()[-1])
            print("HTA failed:", proc.stderr[-500:])
            return None
    print("HTA not installed")
    return None


def _row(name: str, t: float, h: object) -> tuple[str, float | None]:
    ratio = f"{h / t:8.1f}x" if isinstance(h, float) and t > 0 else ""
    hs = h if isinstance(h, str) else (f"{h:10.3f}" if isinstance(h, float) else "")
    print(f"{name:48} {t:10.4f} {hs:>10} {ratio:>9}")
    return name, h if isinstance(h, float) else None


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT / "synthetic_1000000.json"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(GEN), str(path), "--events", "1000000"], check=True)
    hta = hta_times(path) or {}
    answered = {k for k, c in HTA_OF.items() if isinstance(hta.get(c), float)} if hta else None
    point2, sequences, report, n = aonkit_times(path, answered)
    print(f"trace: {path.name}, {n:,} events" + (f"; HTA load {hta['load']:.1f} s" if "load" in hta else ""))
    print(
        f"\npoint 2: each aonkit analysis from a cleared memo vs HTA's call for the same question\n"
        f"{'analysis':48} {'aonkit s':>10} {'HTA s':>10} {'speed-up':>9}"
    )
    for name, t in point2.items():
        _row(name, t, hta.get(HTA_OF.get(name, "")))
    print("\npoint 2 in one run from a clean start (HTA frames made, per-trace memo shared), best of 3")
    print(f"every analysis of point 2: {sequences['every point-2 analysis']:.3f} s")
    for label, key, skip in (("", "paired", ()), (" (without GPU time per CPU op)", "paired without GPU time per op",
                                                   ("GPU time per CPU op",))):  # fmt: skip
        calls = {HTA_OF[k] for k in point2 if k in (answered or ()) and k not in skip}
        h = sum(hta[c] for c in calls)  # each HTA call once, even when two analyses share it
        if h:
            a = sequences[key]
            print(f"analyses with an HTA counterpart{label}: aonkit {a:.3f} s vs HTA {h:.3f} s -> {h / a:.1f}x")
    print(f"\nHTA-compatible report functions (HTA frames as input)\n{'file':48} {'aonkit s':>10} {'HTA s':>10}")
    a_sum = h_sum = 0.0
    for name, t in report.items():
        _, h = _row(name, t, hta.get(name))
        if h is not None and not name.startswith("("):
            a_sum, h_sum = a_sum + t, h_sum + h
    if h_sum:
        a_sum += point2["HTA frames (prep, once per trace)"]
        print(f"report set: aonkit {a_sum:.3f} s (frames included) vs HTA {h_sum:.3f} s -> {h_sum / a_sum:.1f}x")


if __name__ == "__main__":
    main()
