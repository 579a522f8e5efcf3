"""Seeded small traces with odd but valid values, for running every analysis on them.

``hostile_trace(seed)`` gives a trace document (the same for a seed on every
machine: ``random.Random``): the usual Kineto shapes (CPU ops, launches and
their kernels, copies, steps, NCCL kernels, metadata, flows, counters, user
annotations) with values a writer or a user's tool may produce: null or
numeric names, string or huge pids and tids, negative, huge, fractional or
missing times, zero and missing durations, correlations that match nothing or
several events, string ids, ``args`` that are not objects, events out of order,
steps repeated, and traces without any GPU event or CPU op.
"""

from __future__ import annotations

import random
from typing import Any

NAMES = ["aten::mm", "aten::linear", "ampere_sgemm_128x64_tn", "ncclKernel_AllReduce_RING_LL_Sum_float",
         "Memcpy HtoD (Pageable -> Device)", "Memset (Device)", "void at::native::elementwise_kernel<4>(int)",
         "cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize", "cudaDeviceSynchronize",
         "ProfilerStep#1", "## forward ##", "flash_fwd_kernel", ""]  # fmt: skip
CATS = ["cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset", "user_annotation", "gpu_user_annotation",
        "python_function", "cuda_driver", "ac2g", "Trace", None, "", "kernel "]  # fmt: skip


def _odd(rng: random.Random, usual: Any, *odd: Any) -> Any:
    return rng.choice(odd) if rng.random() < 0.15 else usual


def hostile_trace(seed: int, n: int = 40) -> dict:
    """A trace document of about ``n`` events with odd values (see the module doc)."""
    rng = random.Random(seed)
    no_gpu, no_cpu = rng.random() < 0.1, rng.random() < 0.1
    events: list[dict] = []
    t = rng.choice([0.0, 1.7e12, 12.5])
    for k in range(n):
        t += rng.choice([0.0, 0.5, 3.0, 1000.0])
        kind = rng.choice(["cpu", "launch", "kernel", "copy", "step", "nccl", "meta", "flow", "counter", "ann"])
        if (no_gpu and kind in ("kernel", "copy", "nccl")) or (no_cpu and kind in ("cpu", "launch", "step")):
            continue
        corr = _odd(rng, k // 2, -1, 2**62, 0, "7")
        gpu = {"device": _odd(rng, rng.choice([0, 1]), -1, None, 2**40),
               "stream": _odd(rng, rng.choice([7, 13]), -1, 0, None), "correlation": corr}  # fmt: skip
        ts: Any = _odd(rng, t, -5.0, 0, 9.2e15, 1e3 + 1e-4, None, "12")
        dur: Any = _odd(rng, rng.choice([0.0, 1.5, 10.0, 250.0]), 0, -1.0, None)
        ev: dict[str, Any] = {"ph": "X", "ts": ts, "dur": dur,
                              "pid": _odd(rng, 100, "100", 2**63 + 5, -1), "tid": _odd(rng, 100, "stream 7", 0)}
        if kind == "cpu":
            ev.update(cat="cpu_op", name=_odd(rng, rng.choice(NAMES[:2]), None, 12, ""),
                      args=_odd(rng, {"External id": k, "Input Dims": [[64, 64], [64, 64]],
                                      "Input type": ["float", "float"]}, [], "x", None))  # fmt: skip
        elif kind == "launch":
            ev.update(cat="cuda_runtime", name=rng.choice(NAMES[7:11]), args={"correlation": corr, "External id": k})
        elif kind == "kernel":
            ev.update(cat=_odd(rng, "kernel", None, "", "Kernel"), name=rng.choice([NAMES[2], NAMES[6], NAMES[13]]),
                      args={**gpu, "grid": [1, 1, 1], "registers per thread": 32})
        elif kind == "copy":
            ev.update(cat=rng.choice(["gpu_memcpy", "gpu_memset"]), name=rng.choice(NAMES[4:6]),
                      args={**gpu, "bytes": _odd(rng, 4096, 0, -1, 2**70, "1"), "memory bandwidth (GB/s)": 1.0})
        elif kind == "step":
            ev.update(cat="user_annotation", name=f"ProfilerStep#{_odd(rng, k // 10, -1, 'x')}")
        elif kind == "nccl":
            ev.update(cat="kernel", name=NAMES[3], args={**gpu, "Collective name": "allreduce",
                                                          "In msg nelems": _odd(rng, 1024, 0, None)})
        elif kind == "meta":
            ev = {"ph": "M", "name": rng.choice(["process_name", "thread_name", "process_labels"]),
                  "pid": ev["pid"], "tid": ev["tid"], "args": _odd(rng, {"name": "python", "labels": "GPU 0"}, 5)}
        elif kind == "flow":
            ev = {"ph": rng.choice(["s", "f"]), "id": _odd(rng, corr, "0x1f", 1.5), "pid": ev["pid"],
                  "tid": ev["tid"], "ts": ts, "cat": "ac2g", "name": "ac2g", "bp": _odd(rng, "e", None)}
        elif kind == "counter":
            ev = {"ph": "C", "name": "Memory", "pid": ev["pid"], "ts": ts,
                  "args": _odd(rng, {"Total Allocated": 1.0e6, "Device Id": 0}, {})}
        else:
            ev.update(cat=rng.choice(["gpu_user_annotation", "user_annotation"]), name=_odd(rng, "## fwd ##", None),
                      args=gpu)
        events.append({key: v for key, v in ev.items() if v is not None or rng.random() < 0.5})
    if rng.random() < 0.3:
        rng.shuffle(events)
    if not events:
        events.append({"ph": "i", "name": "only", "ts": 0, "pid": 0, "tid": 0})
    doc: dict[str, Any] = {"traceEvents": events}
    if rng.random() < 0.5:
        doc["deviceProperties"] = [{"id": 0, "name": _odd(rng, "NVIDIA H100 80GB HBM3", "", None), "numSms": 132}]
    if rng.random() < 0.3:
        doc["distributedInfo"] = {"rank": _odd(rng, 0, -1, "0"), "world_size": _odd(rng, 1, 0, 3)}
    if rng.random() < 0.3:
        doc["baseTimeNanoseconds"] = _odd(rng, 1_700_000_000_000_000_000, -1, 1.5)
    return doc
