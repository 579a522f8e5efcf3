"""Print a digest of aonkit's figures on a trace, for the CPU- and thread-independence test.

Run as ``python -m tests.digest_native TRACE THREADS``; the test runs it under
several numpy CPU-dispatch settings and thread counts and compares the lines.
"""

from __future__ import annotations

import hashlib
import sys

import pandas as pd


def _digest(obj: object) -> str:
    if isinstance(obj, pd.DataFrame):
        obj = obj.reset_index(drop=True)
        text = obj.to_csv(index=False, float_format="%.17g")
    else:
        text = repr(obj)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def main(path: str, threads: int) -> None:
    import aonkit
    from aonkit.analysis import bandwidth, hta_compat, hta_counters, idle, kernels, memory, queues, summary

    t = aonkit.load(path, threads=threads)
    frames = hta_compat.hta_frames(t)
    out = {
        "events": t.events,
        "summary": summary.summarize(t).top_kernels,
        "kernel_stats": kernels.kernel_stats(t),
        "classes": kernels.kernel_stats(t, by="class"),
        "per_op": kernels.gpu_time_per_op(t),
        "launch_stats": kernels.launch_stats(t),
        "idle_device": idle.idle_summary(t),
        "idle_stream": idle.idle_summary(t, by="stream"),
        "idle_gaps": idle.idle_series(t),
        "queue_summary": queues.queue_length_summary(t),
        "bandwidth": bandwidth.memory_bandwidth_summary(t),
        **{f"memory_peaks_{i}": part for i, part in enumerate(memory.memory_peaks(t))},
        "hta_temporal": hta_compat.temporal_breakdown(frames),
        "hta_idle": hta_counters.idle_time_breakdown(frames)[0],
        "hta_idle_stats": hta_counters.idle_time_breakdown(frames)[1],
        "hta_queue": hta_counters.queue_length_summary(frames),
        "hta_memory_bw": hta_counters.memory_bw_summary(frames),
        "hta_launch": hta_counters.cuda_kernel_launch_stats(frames),
    }
    for name, value in out.items():
        print(name, _digest(value))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
