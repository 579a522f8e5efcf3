"""Seeded generator of small multi-rank Kineto-like traces with planted problems, for tests.

Each rank runs ``steps`` iterations: compute kernels on stream 7, then an
all-reduce (stream 20) that starts when the rank's gradients are ready and
ends, on every rank, ``transfer`` after the last rank arrives. Compute of the
next bucket overlaps the all-reduce except on ``exposed_ranks``. The
``straggler`` computes 30% longer. Each rank's clock is shifted by a random
offset of up to +-3 ms, as on different hosts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32"


def _kernel(name: str, stream: int, ts_ns: int, dur_ns: int, corr: int, extra: dict | None = None) -> dict:
    args = {"device": 0, "stream": stream, "correlation": corr, **(extra or {})}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream,
            "ts": ts_ns / 1000, "dur": dur_ns / 1000, "args": args}  # fmt: skip


def _cpu(name: str, ts_ns: int, dur_ns: int, cat: str = "cpu_op", args: dict | None = None) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts_ns / 1000, "dur": dur_ns / 1000,
            "args": args or {}}  # fmt: skip


def write_job(out: Path, ranks: int = 64, steps: int = 6, straggler: int = 37, exposed_ranks: tuple[int, ...] = (5,),
              seed: int = 7, *, args_on: str = "kernel", seq: bool = False, vary_sizes: bool = False,
              late_ranks: tuple[int, ...] = (), profiler_steps: bool = False, collectives: bool = True,
              launches: bool = False, host_in_steps: bool = False,
              clocks: dict[int, int] | None = None) -> dict[int, int]:  # fmt: skip
    """Write ``rank{r}.json`` files into ``out``; return the true clock offset (ns) of each rank.

    ``args_on``: ``"kernel"``, ``"param_comms"`` (a ``record_param_comms`` op
    around a ``cudaLaunchKernel``) or ``"none"``. ``late_ranks`` miss the
    first all-reduce (their window opened after it). ``launches`` adds the
    host side as PyTorch DDP has it: a ``cudaLaunchKernel`` per kernel, ahead
    of the GPU, and before the all-reduce a ``cudaEventRecord`` on the compute
    stream, a ``cudaStreamWaitEvent`` of the communication stream (with
    Kineto's ``Stream Wait Event`` row) and the NCCL launch. ``host_in_steps``:
    each ``ProfilerStep`` opens before its host work (else at its GPU work). ``clocks``: the offsets of some
    ranks (ns), in place of drawn ones (ranks on one host share a clock).
    """
    rng = np.random.default_rng(seed)
    offsets = {r: int(rng.integers(-3_000_000, 3_000_000)) for r in range(ranks)} | (clocks or {})
    events: dict[int, list[dict]] = {r: [] for r in range(ranks)}
    t = 1_000_000_000
    corr = 1
    for step in range(steps):
        if profiler_steps:
            for r in range(ranks):
                jitter = int(rng.integers(0, 20_000))
                early = 100_000 + 20_000 if host_in_steps else 0  # open before the host's launches, as torch does
                events[r].append(_cpu(f"ProfilerStep#{100 + step}", t + offsets[r] + jitter - early, 1_000_000,
                                      "user_annotation"))  # fmt: skip
        ready = {}
        host = {}
        for r in range(ranks):
            cur = t
            host[r] = t + offsets[r] - 100_000  # the host runs ahead of the GPU
            for k in range(8):
                d = int(rng.integers(180_000, 220_000) * (1.3 if r == straggler else 1.0))
                events[r].append(_kernel(GEMM, 7, cur + offsets[r], d, corr))
                if launches:
                    events[r].append(_cpu("cudaLaunchKernel", host[r] + 5_000 * k, 3_000, "cuda_runtime",
                                          {"correlation": corr}))  # fmt: skip
                corr += 1
                cur += d + 2_000
            ready[r] = cur
        last = max(ready.values())
        transfer = 400_000
        nelems = 25_000_000 + (step * 1_000_000 if vary_sizes else 0)
        for r in range(ranks):
            meta = {"Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems,
                    "dtype": "Float", "Process Group Name": "0", "Group size": ranks}  # fmt: skip
            if seq:
                meta["Seq"] = step + 1
            if not collectives or (step == 0 and r in late_ranks):
                pass
            elif args_on == "kernel":
                events[r].append(_kernel(NCCL, 20, ready[r] + offsets[r], last + transfer - ready[r], corr, meta))
                if launches:
                    h, rec, wait = host[r] + 40_000, 10_000_000 + corr, 20_000_000 + corr
                    events[r] += [
                        _cpu("cudaEventRecord", h, 2_000, "cuda_runtime", {"correlation": rec}),
                        _cpu("cudaStreamWaitEvent", h + 3_000, 2_000, "cuda_runtime", {"correlation": wait}),
                        _cpu("cudaLaunchKernel", h + 6_000, 3_000, "cuda_runtime", {"correlation": corr}),
                        {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 20,
                         "ts": (h + 4_000) / 1000, "dur": 1, "args": {"stream": 20, "wait_on_stream": 7, "device": 0,
                         "wait_on_cuda_event_record_corr_id": rec, "correlation": wait}},
                    ]  # fmt: skip
            else:
                host = ready[r] + offsets[r] - 50_000
                pc_args = meta if args_on == "param_comms" else {}
                events[r].append(_cpu("record_param_comms", host, 20_000, args=pc_args))
                events[r].append(_cpu("cudaLaunchKernel", host + 5_000, 5_000, "cuda_runtime", {"correlation": corr}))
                events[r].append(_kernel(NCCL, 20, ready[r] + offsets[r], last + transfer - ready[r], corr))
            if r not in exposed_ranks:  # the next bucket's compute hides the all-reduce
                events[r].append(_kernel(GEMM, 7, ready[r] + 10_000 + offsets[r], last + transfer - ready[r], corr + 1))
                if launches:
                    events[r].append(_cpu("cudaLaunchKernel", host[r] + 50_000, 3_000, "cuda_runtime",
                                          {"correlation": corr + 1}))  # fmt: skip
            corr += 2
        t = last + transfer + 50_000
    out.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        doc = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": r, "world_size": ranks},
               "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": events[r]}  # fmt: skip
        (out / f"rank{r}.json").write_text(json.dumps(doc))
    return offsets
