"""Analysis benchmark: every analysis of aonkit on one large trace, side by side with HTA when installed.

Usage: ``PYTHONPATH=. python bench/analyses.py [TRACE]`` (default: the 1,000,000-event
synthetic trace from ``../shared/tools/gen_trace.py``, written to bench/out/).

Times each analysis after the trace is loaded (best of 3) and, when Holistic
Trace Analysis can be imported (current Python or ``bench/out/hta-venv``), the
same analyses in HTA in a subprocess, and prints the ratios.
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
    "memory_bw_summary": lambda: ta.get_memory_bw_summary(ranks=[0]),
}
for name, fn in calls.items():
    t = time.perf_counter()
    try:
        fn()
        res[name] = time.perf_counter() - t
    except Exception as exc:
        res[name] = f"error: {type(exc).__name__}"
print(json.dumps(res))
"""


def best(fn, n: int = 3) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def aonkit_times(path: Path) -> tuple[dict[str, float], int]:
    import aonkit
    from aonkit.analysis import (
        bandwidth,
        collectives,
        correlation,
        diff,
        hta_compat,
        hta_counters,
        kernels,
        memo,
        memory,
        queues,
        steps,
    )

    trace = aonkit.load(path)
    frames = hta_compat.hta_frames(trace)
    # the same frames with no launch call and GPU start at one µs (ts doubled, GPU starts odd): HTA's tie order
    # (numpy's unstable sort) then cannot matter, and the queue counter skips that sort
    untied = {}
    for rank, f in frames.items():
        gpu = f["stream"].to_numpy() != -1
        untied[rank] = f.assign(ts=f["ts"] * 2 + gpu)

    def cold(fn):  # gpu_links and gpu_table are remembered per trace: time each call from scratch
        return lambda: (memo.clear(), fn())

    def dashboard():  # several views of one trace share gpu_links through the memo
        memo.clear()
        kernels.gpu_time_per_op(trace), kernels.launch_stats(trace), steps.profiler_steps(trace)
        queues.queue_summary(trace)

    out = {
        "hta_frames (prep)": best(lambda: hta_compat.hta_frames(trace)),
        "temporal_breakdown": best(lambda: hta_compat.temporal_breakdown(frames)),
        "idle_time_breakdown": best(lambda: hta_counters.idle_time_breakdown(frames)),
        "gpu_kernel_breakdown": best(
            lambda: (hta_compat.gpu_kernel_breakdown_type(frames), hta_compat.gpu_kernel_breakdown_kernels(frames))
        ),
        "comm_comp_overlap": best(lambda: hta_compat.comm_comp_overlap(frames)),
        "cuda_kernel_launch_stats": best(lambda: hta_counters.cuda_kernel_launch_stats(frames)),
        "queue_length_summary": best(lambda: hta_counters.queue_length_summary(frames)),
        "(queue_length_summary, no ties)": best(lambda: hta_counters.queue_length_summary(untied)),
        "memory_bw_summary": best(lambda: hta_counters.memory_bw_summary(frames)),
        "gpu_links (correlation)": best(cold(lambda: correlation.gpu_links(trace))),
        "kernel_stats": best(cold(lambda: kernels.kernel_stats(trace))),
        "gpu_time_per_op": best(cold(lambda: kernels.gpu_time_per_op(trace))),
        "launch_stats": best(cold(lambda: kernels.launch_stats(trace))),
        "queue_length (native ns)": best(cold(lambda: queues.queue_summary(trace))),
        "memory_bandwidth (native ns)": best(lambda: bandwidth.memory_bandwidth(trace)),
        "memory_peaks": best(lambda: memory.memory_peaks(trace)),
        "exposed_communication": best(cold(lambda: collectives.exposed_communication(trace))),
        "dashboard: 4 views, gpu_links once": best(dashboard),
        "trace_diff (vs itself)": best(lambda: diff.trace_diff(trace, trace, reps=200), 1),
    }
    return out, len(trace)


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


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT / "synthetic_1000000.json"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(GEN), str(path), "--events", "1000000"], check=True)
    ours, n = aonkit_times(path)
    hta = hta_times(path)
    print(f"trace: {path.name}, {n:,} events")
    print(f"{'analysis':36} {'aonkit s':>10} {'HTA s':>10} {'speed-up':>9}")
    total_hta = 0.0
    for name, t in ours.items():
        h = hta.get(name) if hta else None
        if isinstance(h, float):
            total_hta += h
        ratio = f"{h / t:8.1f}x" if isinstance(h, float) and t > 0 else ""
        print(f"{name:36} {t:10.4f} {h if isinstance(h, str) else (f'{h:10.3f}' if h else ''):>10} {ratio:>9}")
    shared = [k for k in ours if hta and isinstance(hta.get(k), float)]
    a_sum = sum(ours[k] for k in shared) + ours["hta_frames (prep)"]
    point2 = sum(v for k, v in ours.items() if not k.startswith(("trace_diff", "dashboard", "(")))
    print(f"sum of aonkit analyses of issue point 2 (all but trace_diff): {point2:.3f} s")
    if shared:
        print(
            f"HTA-equivalent set: aonkit {a_sum:.3f} s (prep included) vs HTA {total_hta:.3f} s -> "
            f"{total_hta / a_sum:.1f}x; HTA load {hta['load']:.1f} s"
        )


if __name__ == "__main__":
    main()
