"""A seeded generator of adversarial Kineto traces, for the differential test against HTA 0.5.0.

``adversarial_job(seed)`` gives ``{rank: trace document}``, the same for a
seed on every machine (``random.Random``, no numpy). Each trace mixes the
shapes that broke or could break HTA-compatible analyses: kernels that
overlap on one stream, memcpy and memset between kernels, launches from
before the window (GPU events whose launch is not in the trace), several
devices and streams, CUDA and ROCm launch names, a driver row repeating a
runtime call's correlation, sparse and huge correlation ids, integer- and
float-µs timestamps with sub-µs durations, zero-length events, CUDA graph
launches (one correlation, several kernels), NCCL/RCCL kernels, GPU
annotations and ``cuda_sync`` rows with a stream, and 0 to 3 profiler steps.

Left out on purpose: ties that HTA orders with numpy's unstable sort (two GPU
starts of one stream in the same µs, a launch and a GPU start of one stream,
two steps of one copy kind, edges of different kernel types). There HTA's
own answer depends on the CPU it runs on, so no committed golden could hold;
``docs/hta-compat.md`` says how the real traces' ties are checked instead.
"""

from __future__ import annotations

import math
import random

CUDA = {"launch": "cudaLaunchKernel", "copy": "cudaMemcpyAsync", "set": "cudaMemsetAsync",
        "graph": "cudaGraphLaunch", "driver": "cuLaunchKernel", "sync": "cudaStreamSynchronize"}  # fmt: skip
ROCM = {"launch": "hipLaunchKernel", "copy": "hipMemcpyAsync", "set": "hipMemsetAsync",
        "graph": "hipGraphLaunch", "driver": "hipExtModuleLaunchKernel", "sync": "hipStreamSynchronize"}  # fmt: skip
KERNELS = ["ampere_sgemm_128x64_tn", "void at::native::vectorized_elementwise_kernel<4>(int)",
           "Cijk_Ailk_Bljk_SB_MT64x64x16", "triton_poi_fused_add_0", "void cudnn::bn_fw_tr_1C11_kernel<float>()",
           "void at::native::reduce_kernel<512, 1>()"]  # fmt: skip
COMM = ["ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)"]  # fmt: skip
COPIES = ["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)", "Memcpy DtoD (Device -> Device)"]


class _Rank:
    """One rank's events and the times HTA's sorts must not see tied (rounded as HTA rounds: ceil ts, floor end)."""

    def __init__(self, rng: random.Random, float_us: bool) -> None:
        self.rng = rng
        self.float_us = float_us
        self.events: list[dict] = []
        self.launch_us: dict[int, set[int]] = {}  # stream -> launch starts
        self.start_us: dict[int, set[int]] = {}  # stream -> GPU starts (idle-time kinds)
        self.steps_us: dict[str, set[int]] = {}  # copy kind -> copy starts and ends
        self.edges_us: dict[str, set[int]] = {}  # kernel type -> starts and ends
        self.all_starts: set[int] = set()  # every GPU start
        self.negative_starts: set[int] = set()  # starts of intervals that end before they start (sub-µs, rounded)

    def t(self, us: float) -> float | int:
        return round(us, 3) if self.float_us else int(round(us))

    def cpu(self, name: str, cat: str, ts: float, dur: float, tid: int = 1, **args: object) -> dict:
        ev = {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": self.t(ts), "dur": self.t(dur)}
        if args:
            ev["args"] = args
        self.events.append(ev)
        return ev

    def gpu(self, name: str, cat: str, ts: float, dur: float, stream: int, device: int, corr: int | None,
            **args: object) -> float:  # fmt: skip
        """Place a GPU event at ``ts`` or, to avoid an order-dependent tie, a little later; returns its end."""
        kind = _kernel_type(name)
        copy_kind = "" if kind != "MEMORY" else name[:11] if name.startswith("Memcpy") else "Memset"
        counted = cat in ("kernel", "gpu_memcpy", "gpu_memset")
        for _ in range(1000):
            a, b = self.t(ts), self.t(dur)
            s, e = math.ceil(a), math.floor(a + b)
            mem_end = s + 1 if e - s == 0 else e
            other_edges = set().union(*(v for k, v in self.edges_us.items() if k != kind))
            clash = (
                (counted and s in self.start_us.get(stream, ()))
                or (e < s and s in self.all_starts)  # HTA groups intervals after an unstable sort by start:
                or s in self.negative_starts  # a negative one tied with another start depends on it
                or s in self.launch_us.get(stream, ())
                or (copy_kind and ({s, mem_end} & self.steps_us.get(copy_kind, set()) or s == mem_end))
                or {s, e} & other_edges
            )
            if not clash:
                break
            ts += self.rng.choice([0.25, 0.5, 1.0]) if self.float_us else 1
        args = {"device": device, "stream": stream, **({"correlation": corr} if corr is not None else {}), **args}
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": a, "dur": b,
                            "args": args})  # fmt: skip
        if counted:
            self.start_us.setdefault(stream, set()).add(s)
        if copy_kind:
            self.steps_us.setdefault(copy_kind, set()).update({s, mem_end})
        self.edges_us.setdefault(kind, set()).update({s, e})
        self.all_starts.add(s)
        if e < s:
            self.negative_starts.add(s)
        return a + b


def _kernel_type(name: str) -> str:
    if name.startswith("nccl") and "Kernel" in name:
        return "COMMUNICATION"
    if name.startswith(("Memcpy", "Memset", "dma")):
        return "MEMORY"
    if "Sync" in name or "Memcpy" in name:
        return "OTHER"
    return "COMPUTATION"


def _one_rank(seed: int, rank: int, world: int, shape: dict) -> dict:
    rng = random.Random(seed * 7919 + rank)
    r = _Rank(rng, shape["float_us"])
    api = ROCM if shape["rocm"] else CUDA
    corr = shape["corr0"]
    stride = shape["stride"]
    streams = shape["streams"]
    free = {s: 0.0 for s in streams}  # when each stream's last event ends
    t = shape["t0"] + rng.uniform(0, 50)
    if shape["pre_window"]:  # GPU work launched before the profiler started: no launch call in the trace
        for _ in range(rng.randint(1, 4)):
            st = rng.choice(streams)
            early = shape["corr0"] - rng.randint(1, 1000) * stride
            free[st] = r.gpu(rng.choice(KERNELS), "kernel", t + rng.uniform(0, 5), rng.uniform(0.3, 30), st[1], st[0],
                             early if early > 0 else shape["corr0"] + 10**7 * stride)  # fmt: skip
    n_steps = shape["steps"]
    per_step = rng.randint(6, 30)
    for step in range(max(n_steps, 1)):
        step_start = t
        ops = []
        for _ in range(per_step):
            dev, stream = rng.choice(streams)
            op_ts = t
            what = rng.choices(["kernel", "copy", "set", "comm", "graph", "sync"], [60, 12, 4, 8, 4, 4])[0]
            launch_ts = op_ts + rng.uniform(0.2, 3)
            launch_dur = rng.uniform(0.5, 8) if rng.random() > 0.1 else rng.uniform(0, 0.9)
            corr += stride
            name = {"kernel": api["launch"], "comm": api["launch"], "copy": api["copy"], "set": api["set"],
                    "graph": api["graph"], "sync": api["sync"]}[what]  # fmt: skip
            while math.ceil(r.t(launch_ts)) in r.start_us.get(stream, ()):  # a GPU start already holds that µs
                launch_ts += 0.5 if r.float_us else 1
            r.launch_us.setdefault(stream, set()).add(math.ceil(r.t(launch_ts)))
            r.cpu(name, "cuda_runtime", launch_ts, launch_dur, correlation=corr, **{"External id": corr % 997})
            if shape["driver"] and rng.random() < 0.3:  # the driver call repeats the correlation (a 2nd CPU-side row)
                r.cpu(api["driver"], "cuda_driver", launch_ts + launch_dur * 0.3, launch_dur * 0.4, correlation=corr)
            if rng.random() < 0.5:
                r.events.append({"ph": "s", "id": corr, "pid": 100, "tid": 1, "ts": r.t(launch_ts), "cat": "ac2g",
                                 "name": "ac2g"})  # fmt: skip
            gap = rng.choices([0, rng.uniform(0, 2), rng.uniform(2, 40), rng.uniform(40, 400), -rng.uniform(0, 3)],
                              [25, 25, 25, 15, 10])[0]  # fmt: skip
            start = max(launch_ts + rng.uniform(1, 15), free[(dev, stream)] + gap)
            dur = rng.choice([0, rng.uniform(0.05, 0.95), rng.uniform(1, 50), rng.uniform(50, 500)])
            if what == "kernel":
                end = r.gpu(rng.choice(KERNELS), "kernel", start, dur, stream, dev, corr)
            elif what == "comm":
                end = r.gpu(rng.choice(COMM), "kernel", start, dur, stream, dev, corr)
            elif what in ("copy", "set"):
                nbytes = rng.choice([0, 4, 4096, 1 << 20, 123_456_789])
                name = rng.choice(COPIES) if what == "copy" else "Memset (Device)"
                bw = round(nbytes / max(dur, 0.001) / 1000, 6)
                cat = "gpu_memcpy" if what == "copy" else "gpu_memset"
                end = r.gpu(name, cat, start, dur, stream, dev, corr, bytes=nbytes, **{"memory bandwidth (GB/s)": bw})
            elif what == "graph":  # one correlation, several kernels back to back or overlapping
                end = start
                for _ in range(rng.randint(2, 4)):
                    end = r.gpu(rng.choice(KERNELS), "kernel", end + rng.uniform(-0.5, 3), rng.uniform(0.5, 20),
                                stream, dev, corr)  # fmt: skip
            else:  # a synchronisation: the CPU waits; the GPU row has the stream (HTA's OTHER type)
                sync = rng.choice(["Stream Sync", "Event Sync", "Context Sync"])
                end = r.gpu(sync, "cuda_sync", start, rng.uniform(0.5, 30), stream, dev, corr)
            free[(dev, stream)] = max(free[(dev, stream)], end)
            ops.append((op_ts, max(launch_ts + launch_dur, op_ts + 1)))
            t = max(t, launch_ts + launch_dur) + rng.uniform(0.5, 20)
        for op_ts, op_end in ops:
            r.cpu(rng.choice(["aten::mm", "aten::add", "aten::copy_", "aten::fill_"]), "cpu_op", op_ts - 0.1,
                  op_end - op_ts + 0.2, **{"External id": rng.randint(1, 999)})  # fmt: skip
        if n_steps:
            r.cpu(f"ProfilerStep#{shape['step0'] + step}", "user_annotation", step_start - 0.5, t - step_start + 1)
        t += rng.uniform(5, 100)
    if shape["annotations"]:  # GPU annotations span several GPU events on a stream (HTA's idle time leaves them out)
        for _ in range(rng.randint(1, 3)):
            dev, stream = rng.choice(streams)
            a = shape["t0"] + rng.uniform(0, t - shape["t0"])
            r.events.append({"ph": "X", "cat": "gpu_user_annotation", "name": rng.choice(["forward", "backward"]),
                             "pid": dev, "tid": stream, "ts": r.t(a), "dur": r.t(rng.uniform(10, 500)),
                             "args": {"device": dev, "stream": stream}})  # fmt: skip
    r.events.append({"ph": "M", "name": "process_name", "pid": 100, "args": {"name": "python"}})
    if shape["shuffle"]:
        rng.shuffle(r.events)
    doc: dict = {"schemaVersion": 1, "traceEvents": r.events,
                 "deviceProperties": [{"id": d, "name": "AMD Instinct MI300X" if shape["rocm"] else "NVIDIA H100"}
                                      for d in sorted({d for d, _ in streams})]}  # fmt: skip
    if world > 1:
        doc["distributedInfo"] = {"rank": rank, "world_size": world, "backend": "nccl"}
    return doc


def adversarial_job(seed: int) -> dict[int, dict]:
    """``{rank: Kineto trace document}`` for ``seed`` (one rank, sometimes two)."""
    rng = random.Random(seed)
    world = 2 if rng.random() < 0.25 else 1
    devices = [0, 1] if rng.random() < 0.2 else [0]
    streams = sorted({(rng.choice(devices), rng.choice([7, 13, 20, 21, 4294967295 // 2])) for _ in range(3)})
    big = rng.random() < 0.3
    float_us = rng.random() < 0.6
    shape = {
        "float_us": float_us,
        "rocm": rng.random() < 0.3,
        "corr0": rng.randint(1, 10**6) + (rng.randint(1, 2**40) if big else 0),
        "stride": rng.choice([1, 1, 1, 3, 1000]) if not big else rng.choice([1, 7919]),
        "streams": streams,
        "t0": rng.choice([0, 1_000, 1_700_000_000]) + rng.randint(0, 10**6),
        "pre_window": rng.random() < 0.4,
        "steps": rng.choice([0, 1, 2, 3]),
        "step0": rng.randint(0, 50),
        "annotations": rng.random() < 0.3,
        "shuffle": rng.random() < 0.2,
        "driver": rng.random() < 0.25,  # HTA's queue length asserts on a second launch row per correlation
    }
    if not float_us and rng.random() < 0.3:  # epoch µs as Kineto writes them (exact only as integers in float64)
        shape["t0"] += 1_700_000_000_000
    return {rank: _one_rank(seed, rank, world, shape) for rank in range(world)}
