"""Make the sample traces bundled in ``sample_traces/``, reproducibly.

Run from the repository root::

    python tools/make_sample_traces.py              # every file
    python tools/make_sample_traces.py --skip-cpu   # only the synthetic GPU traces

It writes:

``cpu_mlp.pt.trace.json.gz``
    A real ``torch.profiler`` run on the CPU: a 3-layer MLP trained with AdamW,
    ``schedule(wait=1, warmup=1, active=3)``, ``record_shapes``,
    ``profile_memory`` and ``with_flops``, exported with
    ``export_chrome_trace`` and gzipped. Needs torch; without it the file is
    skipped with a message. Its timings (hence its bytes) differ between runs.

``gpu_synthetic_rank0.json.gz``, ``gpu_synthetic_rank1.json.gz``
    Synthetic Kineto traces (2024-era layout) of a 2-rank DDP training job on
    H100s: a 20-layer transformer in fp32/TF32, four ``ProfilerStep``\\ s, the
    forward on the main thread, the backward on the autograd thread with
    bucketed NCCL all-reduces on a second stream, gradient clipping with a
    host sync, and a foreach AdamW step. A seeded simulator
    (``numpy.random.default_rng``) places every event, so the bytes are the same
    on every run for a given ``--seed``. Built in: host-bound GPU idle gaps
    (data loading), a straggler (rank 1 computes ~15% slower, so its
    all-reduces start later and rank 0's NCCL kernels wait), a memory-bound
    kernel far below its roof (the loss's log_softmax forward at ~300 GB/s),
    and kernels launched before the profiling window (GPU events whose
    correlation has no runtime event, ~5%).

``README.md``
    Describes the files (sizes, event counts, torch version).

Only the standard library and numpy are needed for the synthetic traces.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import math
import re
import sys
import tempfile
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "sample_traces"
CPU_FILE = "cpu_mlp.pt.trace.json.gz"
GEN_FILE = "cpu_generate.pt.trace.json.gz"
GPU_FILE = "gpu_synthetic_rank{rank}.json.gz"
NSYS_FILE = "nsys/synthetic_2proc.sqlite"
DEFAULT_SEED = 2024

# --------------------------------------------------------------------------------------------
# Constants of the simulated machine and of Kineto's output
# --------------------------------------------------------------------------------------------
COMPUTE, COMM = 7, 20  # CUDA stream ids: default compute stream, NCCL stream
NUM_SMS = 132
BASE_TIME_NS = 1_736_942_400_000_000_000  # baseTimeNanoseconds (2025-01-15 12:00:00 UTC)
WINDOW_START_NS = 2_418_305_117_483_000  # first ts of the window, relative to the base (uptime-like, as Kineto)
CHUNK = 65536  # elements per multi_tensor_apply chunk
MTA_MAX_BLOCKS = 320
MTA_MAX_TENSORS = {1: 110, 2: 64, 3: 48, 4: 36}

H100 = {
    "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936,
    "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
    "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": NUM_SMS,
    "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472,
}  # fmt: skip

CBID = {
    "cudaLaunchKernel": 211, "cudaLaunchKernelExC": 430, "cudaMemcpyAsync": 41, "cudaMemsetAsync": 51,
    "cudaStreamWaitEvent": 147, "cudaEventRecord": 135, "cudaStreamSynchronize": 131,
}  # fmt: skip

# Flow Kineto attaches to a runtime call that launches no GPU work ("s" for stream waits, "f" otherwise).
LONE_FLOW = {"cudaStreamWaitEvent": "s", "cudaEventRecord": "f", "cudaStreamSynchronize": "f"}


@dataclass(frozen=True)
class KernelSpec:
    """Name and launch resources of one kind of GPU kernel."""

    name: str
    regs: int
    smem: int
    block: tuple[int, int, int]
    occupancy: int  # est. achieved occupancy % once the grid fills the GPU


_AN = "at::native::(anonymous namespace)::"
_GEMM = (
    "sm90_xmma_gemm_f32f32_tf32f32_f32_{}_n_tilesize128x128x32_warpgroupsize1x1x1"
    "_execute_segment_k_off_kernel__5x_cublas"
)
_VEC = (
    "void at::native::vectorized_elementwise_kernel<4, {f}, std::array<char*, {n}ul> >"
    "(int, {f}, std::array<char*, {n}ul>)"
)
_CLAMP = (
    f"{_AN}launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)"
    "::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}"
)
_THRESH = f"{_AN}threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{{lambda(float, float)#1}}"
_SUM = (
    "at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>"
    "::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>"
)
_NORM = "at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, unsigned int, float, 4>"

KERNELS = {
    "gemm_tn": KernelSpec(_GEMM.format("tn"), 168, 218112, (384, 1, 1), 0),
    "gemm_nn": KernelSpec(_GEMM.format("nn"), 168, 218112, (384, 1, 1), 0),
    "gemm_nt": KernelSpec(_GEMM.format("nt"), 168, 218112, (384, 1, 1), 0),
    "layer_norm": KernelSpec(
        f"void {_AN}vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, "
        "float const*, float*, float*, float*)", 32, 0, (256, 1, 1), 88),
    "ln_grad_input": KernelSpec(
        f"void {_AN}layer_norm_grad_input_kernel_vectorized<float, float>(float const*, float const*, "
        "float const*, float const*, float const*, float*, int)", 40, 0, (256, 1, 1), 84),
    "ln_grad_gamma": KernelSpec(
        f"void {_AN}GammaBetaBackwardCUDAKernel_32x32<float, float>(long, long, float const*, float const*, "
        "float const*, float const*, float*, float*)", 54, 8448, (32, 32, 1), 44),
    "add": KernelSpec(_VEC.format(f="at::native::CUDAFunctor_add<float>", n=3), 22, 0, (128, 1, 1), 91),
    "relu": KernelSpec(_VEC.format(f=_CLAMP, n=2), 20, 0, (128, 1, 1), 92),
    "relu_bwd": KernelSpec(_VEC.format(f=_THRESH, n=3), 22, 0, (128, 1, 1), 90),
    "fill": KernelSpec(_VEC.format(f="at::native::FillFunctor<float>", n=1), 16, 0, (128, 1, 1), 93),
    "mul": KernelSpec(
        _VEC.format(f="at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >",
                    n=2), 18, 0, (128, 1, 1), 60),
    "isfinite": KernelSpec(
        _VEC.format(f=f"{_AN}isfinite_kernel(at::TensorIteratorBase&)::{{lambda(float)#1}}", n=2),
        16, 0, (128, 1, 1), 3),
    "sum": KernelSpec(f"void at::native::reduce_kernel<512, 1, {_SUM} >({_SUM})", 32, 16, (32, 16, 1), 62),
    "norm": KernelSpec(f"void at::native::reduce_kernel<512, 1, {_NORM} >({_NORM})", 32, 16, (32, 16, 1), 2),
    "attn_fwd": KernelSpec(
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
        "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", 128, 48384, (32, 4, 1), 24),
    "attn_bwd": KernelSpec(
        "fmha_cutlassB_f32_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<"
        "cutlass::arch::Sm80, float, true, false, false, 64, 64, 64, false>::Params)", 168, 82944, (32, 4, 1), 12),
    "embedding": KernelSpec(
        f"void {_AN}indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo"
        "<float, unsigned int>, at::cuda::detail::TensorInfo<float const, unsigned int>, at::cuda::detail::"
        "TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)", 32, 0, (128, 1, 1), 86),
    "embedding_bwd": KernelSpec(
        f"void {_AN}embedding_backward_feature_kernel<float, float, long>(long const*, float const*, float*, int, "
        "long, int, int)", 38, 4224, (32, 32, 1), 46),
    "log_softmax": KernelSpec(
        f"void {_AN}cunn_SoftMaxForward<4, float, float, float, {_AN}LogSoftMaxForwardEpilogue>(float*, "
        "float const*, int)", 38, 0, (1024, 1, 1), 94),
    "log_softmax_bwd": KernelSpec(
        f"void {_AN}cunn_SoftMaxBackward<4, float, float, float, {_AN}LogSoftMaxBackwardEpilogue>(float*, "
        "float const*, float const*, long)", 40, 0, (1024, 1, 1), 93),
    "nll": KernelSpec(
        f"void {_AN}nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, "
        "long const*, float const*, bool, long, long, long, long)", 30, 0, (32, 1, 1), 1),
    "nll_bwd": KernelSpec(
        f"void {_AN}nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, float const*, long const*, "
        "float const*, float const*, bool, int, int, long, long)", 24, 0, (32, 1, 1), 1),
    "cat": KernelSpec(
        f"void {_AN}CatArrayBatchedCopy_aligned16_contig<{_AN}OpaqueType<4u>, unsigned int, 1, 128, 1>"
        f"({_AN}OpaqueType<4u>*, {_AN}CatArrInputTensorMetadata<{_AN}OpaqueType<4u>, unsigned int, 128, 1>, "
        f"{_AN}TensorSizeStride<unsigned int, 4u>, int, unsigned int)", 30, 0, (512, 1, 1), 5),
    "lpnorm_cleanup": KernelSpec(
        f"void {_AN}lpnorm_cleanup<float, ({_AN}NormType)1, float, float>(float const*, {_AN}TensorListAddresses, "
        "int)", 24, 2048, (512, 1, 1), 4),
}  # fmt: skip


def _mta_spec(depth: int, functor: str, op: str) -> KernelSpec:
    """A ``multi_tensor_apply_kernel`` (the foreach / optimizer kernels)."""
    meta = f"{_AN}TensorListMetadata<{depth}>"
    args = f"{meta}, {_AN}{functor}, {op}"
    return KernelSpec(f"void {_AN}multi_tensor_apply_kernel<{args}>({args})", 30 + 6 * depth, 0, (512, 1, 1), 49)


def _nccl_spec(protocol: str) -> KernelSpec:
    """The NCCL 2.19+ all-reduce kernel for a protocol (LL for tiny messages, SIMPLE for buckets)."""
    name = f"ncclDevKernel_AllReduce_Sum_f32_RING_{protocol}(ncclDevKernelArgsStorage<4096ul>)"
    block = (512, 1, 1) if protocol == "LL" else (640, 1, 1)
    return KernelSpec(name, 96, 41744 if protocol == "LL" else 87568, block, 0)


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------
def us_text(ns: int) -> str:
    """Kineto's µs text with exactly 3 decimals, from integer nanoseconds."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def write_gzip(path: Path, data: bytes) -> None:
    """Write ``data`` gzipped with a fixed header (mtime 0, no file name), so equal data gives equal bytes."""
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------------------------
# 1. The real CPU trace (torch.profiler)
# --------------------------------------------------------------------------------------------
def make_cpu_trace(out_dir: Path, seed: int, steps: int = 5) -> str | None:
    """Profile a small MLP on the CPU with torch.profiler; return the torch version, or None if skipped."""
    try:
        import torch
    except ImportError:
        print(f"torch is not installed: skipping {CPU_FILE} (pip install torch to make it)", file=sys.stderr)
        return None
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(seed)
    model, optimizer, batch = _cpu_model(torch)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "cpu_mlp.pt.trace.json"
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=3),
            record_shapes=True,
            profile_memory=True,
            with_flops=True,
            on_trace_ready=lambda prof: prof.export_chrome_trace(str(raw)),
        ) as prof:
            for _ in range(steps):
                _cpu_train_step(torch, model, optimizer, batch)
                prof.step()
        write_gzip(out_dir / CPU_FILE, raw.read_bytes())
    return str(torch.__version__)


def _cpu_model(torch: Any) -> tuple[Any, Any, tuple[Any, Any]]:
    """A 3-layer MLP classifier, its AdamW optimizer and one fixed batch."""
    nn = torch.nn
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = (torch.randn(32, 64), torch.randint(0, 10, (32,)))
    return model, optimizer, batch


def _cpu_train_step(torch: Any, model: Any, optimizer: Any, batch: tuple[Any, Any]) -> None:
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()


# --------------------------------------------------------------------------------------------
# 2. The synthetic GPU traces: configuration and the model's parameters
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SynthConfig:
    """What the synthetic job runs. Sizes are elements unless named ``*_bytes``."""

    seed: int = DEFAULT_SEED
    world_size: int = 2
    steps: int = 4
    first_step: int = 2  # schedule(wait=1, warmup=1): the first recorded step is ProfilerStep#2
    layers: int = 20
    batch: int = 4
    seq: int = 1024
    hidden: int = 1024
    heads: int = 16
    ffn: int = 4096
    vocab: int = 50304
    straggler_rank: int = 1
    straggler_slowdown: float = 1.15
    first_bucket_bytes: int = 1 << 20
    bucket_bytes: int = 25 << 20
    loader_ms: float = 15.0  # host time of data loading per step
    slow_loader_step: int = 4  # ProfilerStep whose data loading stalls (a long host-bound gap)
    slow_loader_ms: float = 30.0
    slow_kernel_gbps: float = 300.0  # the loss's log_softmax forward: an unvectorised path far below the roof
    compute_scale: float = 1.0  # every compute kernel's duration times this (what-if ground truth; tests)

    @property
    def tokens(self) -> int:
        """Rows of the activations matrices (batch x sequence)."""
        return self.batch * self.seq


def model_params(cfg: SynthConfig) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every parameter, in registration order."""
    h, f = cfg.hidden, cfg.ffn
    params: list[tuple[str, tuple[int, ...]]] = [("embed.weight", (cfg.vocab, h))]
    for i in range(cfg.layers):
        for name, shape in (
            ("ln1.weight", (h,)), ("ln1.bias", (h,)), ("attn.qkv.weight", (3 * h, h)), ("attn.qkv.bias", (3 * h,)),
            ("attn.proj.weight", (h, h)), ("attn.proj.bias", (h,)), ("ln2.weight", (h,)), ("ln2.bias", (h,)),
            ("mlp.fc1.weight", (f, h)), ("mlp.fc1.bias", (f,)), ("mlp.fc2.weight", (h, f)), ("mlp.fc2.bias", (h,)),
        ):  # fmt: skip
            params.append((f"layers.{i}.{name}", shape))
    params += [("ln_f.weight", (h,)), ("ln_f.bias", (h,)), ("head.weight", (cfg.vocab, h))]
    return params


def ddp_buckets(cfg: SynthConfig, numels: list[int]) -> list[list[int]]:
    """Parameter indices of each DDP gradient bucket (reverse registration order, 1 MiB then 25 MiB caps)."""
    buckets: list[list[int]] = []
    current: list[int] = []
    size = 0
    for idx in reversed(range(len(numels))):
        current.append(idx)
        size += numels[idx] * 4
        cap = cfg.first_bucket_bytes if not buckets else cfg.bucket_bytes
        if size >= cap:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


def mta_launches(numels: list[int], depth: int) -> list[int]:
    """Blocks (chunks) of each launch of a ``multi_tensor_apply`` over tensors of ``numels`` (PyTorch's packing)."""
    launches: list[int] = []
    tensors = blocks = 0
    for i, numel in enumerate(numels):
        tensors += 1
        chunks = _ceil_div(numel, CHUNK)
        for c in range(chunks):
            blocks += 1
            last_chunk = c == chunks - 1
            full = (tensors == MTA_MAX_TENSORS[depth] and last_chunk) or blocks == MTA_MAX_BLOCKS
            if full or (last_chunk and i == len(numels) - 1):
                launches.append(blocks)
                blocks = 0
                tensors = 0 if last_chunk else 1
    return launches


# --------------------------------------------------------------------------------------------
# 3. The event recorder: threads, CPU ops, runtime calls, GPU work, the caching allocator
# --------------------------------------------------------------------------------------------
class _Thread:
    """A CPU thread of the simulated process: its id, clock (ns) and stack of open op External ids."""

    def __init__(self, tid: int, clock: int, name: str) -> None:
        self.tid, self.clock, self.name = tid, clock, name
        self.stack: list[int] = []


class _Allocator:
    """PyTorch's CUDA caching allocator, enough to produce ``[memory]`` events."""

    def __init__(self, rng: np.random.Generator, allocated: int) -> None:
        self.allocated = allocated
        self.reserved = _ceil_div(allocated + (448 << 20), 20 << 20) * (20 << 20)
        self.base = 0x7F3A_0000_0000 + int(rng.integers(0, 4096)) * (2 << 20)
        self.top = 0
        self.free_blocks: dict[int, list[int]] = {}

    def malloc(self, nbytes: int) -> tuple[int, int]:
        """Return (address, rounded size) of a new block."""
        size = _ceil_div(max(nbytes, 1), 512) * 512
        pool = self.free_blocks.get(size)
        if pool:
            addr = pool.pop()
        else:
            addr = self.base + self.top
            self.top += size
        self.allocated += size
        if self.allocated > self.reserved:
            self.reserved = _ceil_div(self.allocated, 20 << 20) * (20 << 20)
        return addr, size

    def free(self, block: tuple[int, int]) -> None:
        """Return a block to its size pool."""
        addr, size = block
        self.allocated -= size
        self.free_blocks.setdefault(size, []).append(addr)


class Recorder:
    """Kineto-style event recording for one rank: CPU ops, runtime calls, GPU work and memory events."""

    def __init__(self, cfg: SynthConfig, rank: int, t0: int) -> None:
        self.cfg, self.rank, self.t0 = cfg, rank, t0
        self.rng = np.random.default_rng([cfg.seed, rank])
        self.slow = cfg.straggler_slowdown if rank == cfg.straggler_rank else 1.0
        self.pid = 48213 + 3 * rank
        self.main = _Thread(self.pid, t0, "python")
        self.bwd = _Thread(self.pid + 119, t0, "pt_autograd_0")
        self.th = self.main
        self.free_at = {COMPUTE: t0, COMM: t0}
        self.ext = 0
        self.corr = 1_204_117 + 211 * rank
        self.seq = 23_000
        self.tape_seq = 0
        self.flow = 0
        self.recording = True
        self.cpu_events: list[dict[str, Any]] = []
        self.gpu_groups: list[list[dict[str, Any]]] = []
        self.flows_after: dict[int, dict[str, Any]] = {}
        self.fwd_flow: dict[int, int] = {}
        self.mem: _Allocator | None = None

    # -- randomness -------------------------------------------------------------------------
    def jitter(self, ns: float, sigma: float = 0.04) -> int:
        """``ns`` times a log-normal factor (median 1)."""
        return max(1, int(ns * math.exp(self.rng.normal(0.0, sigma))))

    def cpu_cost(self, mean_us: float) -> int:
        """Host time of a piece of Python/dispatcher work, slowed on the straggler."""
        return self.jitter(mean_us * 1000 * self.slow, 0.3)

    # -- CPU ops ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def op(
        self,
        name: str,
        dims: list[Any] | None = None,
        types: list[str] | None = None,
        *,
        cat: str = "cpu_op",
        seq: int | None = None,
        backward: bool = False,
        extra: dict[str, Any] | None = None,
        cost: float = 3.0,
    ) -> Iterator[dict[str, Any]]:
        """Record a ``cpu_op`` / ``user_annotation`` spanning whatever the body does on the current thread."""
        th = self.th
        th.clock += self.cpu_cost(cost)
        if not self.recording:  # before the window: only the clock moves
            yield {}
            th.clock += self.cpu_cost(cost * 0.4)
            return
        self.ext += 1
        args: dict[str, Any] = {"External id": self.ext, "Record function id": 0}
        if seq is not None:
            args.update({"Sequence number": seq, "Fwd thread id": 1 if backward else 0})
        if dims is not None:
            args.update({"Input Dims": dims, "Input type": types or ["float"] * len(dims)})
        args.update(extra or {})
        event = {"ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": th.tid, "ts": th.clock, "args": args}
        self.cpu_events.append(event)
        th.stack.append(self.ext)
        yield event
        th.stack.pop()
        th.clock += self.cpu_cost(cost * 0.4)
        event["dur"] = th.clock - event["ts"]

    def leaf(self, name: str, dims: list[Any] | None = None, types: list[str] | None = None, cost: float = 1.5) -> None:
        """A CPU op that launches nothing (views, transposes...)."""
        with self.op(name, dims, types, cost=cost):
            pass

    def next_seq(self) -> int:
        """A new autograd sequence number."""
        self.seq += 1
        return self.seq

    def add_fwdbwd(self, event: dict[str, Any], seq: int, finish: bool) -> None:
        """Link a forward op and its backward node with a ``fwdbwd`` flow."""
        if not finish:
            self.flow += 1
            self.fwd_flow[seq] = self.flow
        fid = self.fwd_flow.pop(seq) if finish else self.flow
        flow = {"ph": "f" if finish else "s", "id": fid, "pid": self.pid, "tid": event["tid"], "ts": event["ts"],
                "cat": "fwdbwd", "name": "fwdbwd"}  # fmt: skip
        if finish:
            flow["bp"] = "e"
        self.flows_after[event["args"]["External id"]] = flow

    # -- memory -----------------------------------------------------------------------------
    def _memory_event(self, addr: int, nbytes: int) -> None:
        assert self.mem is not None
        if self.recording:
            self.cpu_events.append({
                "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": self.pid,
                "tid": self.th.tid, "ts": self.th.clock,
                "args": {"Total Reserved": self.mem.reserved, "Total Allocated": self.mem.allocated, "Bytes": nbytes,
                         "Addr": addr, "Device Id": 0, "Device Type": 1},
            })  # fmt: skip
        self.th.clock += self.jitter(350, 0.3)

    def malloc(self, nbytes: int) -> tuple[int, int]:
        """Allocate device memory (records a ``[memory]`` event)."""
        assert self.mem is not None
        block = self.mem.malloc(nbytes)
        self._memory_event(block[0], block[1])
        return block

    def free(self, block: tuple[int, int] | None) -> None:
        """Free device memory (records a ``[memory]`` event with negative Bytes)."""
        if block is not None and self.mem is not None:
            self.mem.free(block)
            self._memory_event(block[0], -block[1])

    # -- runtime calls and GPU work -------------------------------------------------------------
    def _runtime(self, api: str, cost_us: float) -> tuple[int, dict[str, Any] | None]:
        """Record a CUDA runtime call on the current thread; return its correlation id and event."""
        self.corr += 1
        th = self.th
        ts = th.clock
        th.clock += self.cpu_cost(cost_us) if self.rng.random() > 0.01 else self.jitter(45_000, 0.4)
        if not self.recording:
            return self.corr, None
        args = {"External id": th.stack[-1]} if th.stack else {}
        args.update({"cbid": CBID[api], "correlation": self.corr})
        return self.corr, {"ph": "X", "cat": "cuda_runtime", "name": api, "pid": self.pid, "tid": th.tid,
                           "ts": ts, "dur": th.clock - ts, "args": args}  # fmt: skip

    def _flow(self, ph: str, corr: int, pid: int, tid: int, ts: int) -> dict[str, Any]:
        flow = {"ph": ph, "id": corr, "pid": pid, "tid": tid, "ts": ts, "cat": "ac2g", "name": "ac2g"}
        if ph == "f":
            flow["bp"] = "e"
        return flow

    def runtime_only(self, api: str, cost_us: float = 2.5, until: int | None = None) -> None:
        """A runtime call that launches no GPU work (event record, stream wait, synchronize)."""
        corr, event = self._runtime(api, cost_us)
        if until is not None:  # a blocking call lasts until the GPU work it waits for is done
            self.th.clock = max(self.th.clock, until + self.jitter(4_000, 0.2))
            if event is not None:
                event["dur"] = self.th.clock - event["ts"]
        if event is not None:
            flow = self._flow(LONE_FLOW[api], corr, self.pid, self.th.tid, event["ts"])
            self.gpu_groups.append([event, flow])

    def gpu_start(self, stream: int, launch_ts: int, after: int = 0) -> int:
        """When work queued on ``stream`` at ``launch_ts`` can start (in order, after a launch delay)."""
        gap = self.jitter(1_200, 0.4)
        delay = self.jitter(5_000, 0.25)
        return max(self.free_at[stream] + gap, launch_ts + delay, after)

    def submit(self, stream: int, event: dict[str, Any], corr: int, rt: dict[str, Any] | None) -> None:
        """Queue a GPU event (with ts/dur set) and its runtime call and ac2g flows."""
        self.free_at[stream] = event["ts"] + event["dur"]
        finish = self._flow("f", corr, 0, stream, event["ts"])
        if rt is None:
            self.gpu_groups.append([event, finish])
        else:
            self.gpu_groups.append([rt, self._flow("s", corr, self.pid, rt["tid"], rt["ts"]), event, finish])

    def _gpu_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {}
        if self.recording and self.th.stack:
            args["External id"] = self.th.stack[-1]
        return args

    def kernel(self, key: str | KernelSpec, dur_ns: float, grid: tuple[int, int, int]) -> None:
        """Launch a compute kernel from the current thread (``cudaLaunchKernel``); slower on the straggler."""
        spec = KERNELS[key] if isinstance(key, str) else key
        launch_ts = self.th.clock
        corr, rt = self._runtime("cudaLaunchKernel", 5.0)
        start = self.gpu_start(COMPUTE, launch_ts)
        args = self._gpu_args()
        args.update(_occupancy_args(spec, grid, COMPUTE, corr))
        event = {"ph": "X", "cat": "kernel", "name": spec.name, "pid": 0, "tid": COMPUTE, "ts": start,
                 "dur": self.jitter(dur_ns * self.slow * self.cfg.compute_scale), "args": args}  # fmt: skip
        self.submit(COMPUTE, event, corr, rt)

    def copy(self, name: str, nbytes: int, gbps: float, *, memset: bool = False) -> None:
        """A ``cudaMemcpyAsync`` / ``cudaMemsetAsync`` on the compute stream."""
        api = "cudaMemsetAsync" if memset else "cudaMemcpyAsync"
        launch_ts = self.th.clock
        corr, rt = self._runtime(api, 4.0 if memset else 9.0)
        start = self.gpu_start(COMPUTE, launch_ts)
        dur = self.jitter(1_300 + nbytes / gbps)
        args = self._gpu_args()
        args.update({"device": 0, "context": 1, "stream": COMPUTE, "correlation": corr, "bytes": nbytes,
                     "memory bandwidth (GB/s)": nbytes / dur})  # fmt: skip
        event = {"ph": "X", "cat": "gpu_memset" if memset else "gpu_memcpy", "name": name, "pid": 0,
                 "tid": COMPUTE, "ts": start, "dur": dur, "args": args}  # fmt: skip
        self.submit(COMPUTE, event, corr, rt)


def _occupancy_args(spec: KernelSpec, grid: tuple[int, int, int], stream: int, corr: int) -> dict[str, Any]:
    """CUPTI's kernel fields: device, stream, correlation and the occupancy estimate."""
    blocks = grid[0] * grid[1] * grid[2]
    threads = spec.block[0] * spec.block[1] * spec.block[2]
    per_sm = blocks / NUM_SMS
    warps = per_sm * threads / 32
    occupancy = min(spec.occupancy, int(warps / 64 * 100))
    return {
        "queued": 0, "device": 0, "context": 1, "stream": stream, "correlation": corr,
        "registers per thread": spec.regs, "shared memory": spec.smem, "blocks per SM": round(per_sm, 6),
        "warps per SM": round(warps, 6), "grid": list(grid), "block": list(spec.block),
        "est. achieved occupancy %": occupancy,
    }  # fmt: skip


# --------------------------------------------------------------------------------------------
# 4. Cost model (H100, fp32 with TF32 GEMMs)
# --------------------------------------------------------------------------------------------
def gemm_ns(m: int, n: int, k: int) -> float:
    """A TF32 GEMM at ~300 TFLOP/s plus a few µs of tail."""
    return 2.0 * m * n * k / 300e3 + 3_000


def mem_ns(nbytes: float) -> float:
    """A memory-bound kernel at ~2.6 TB/s plus launch tail."""
    return nbytes / 2_600 + 2_200


def ew_grid(numel: int) -> tuple[int, int, int]:
    """Grid of a vectorized elementwise kernel (128 threads x 4 elements per block)."""
    return (_ceil_div(numel, 512), 1, 1)


def gemm_grid(m: int, n: int) -> tuple[int, int, int]:
    """Grid of a persistent sm90 GEMM: one CTA per SM at most."""
    return (min(NUM_SMS, _ceil_div(m, 128) * _ceil_div(n, 128)), 1, 1)


def nccl_ns(nbytes: int, rng: np.random.Generator) -> int:
    """Transfer time of a 2-rank ring all-reduce over NVLink (LL for tiny messages)."""
    base = 9_000 + nbytes / 8.0 if nbytes <= 65536 else 18_000 + nbytes / 140.0
    return max(1, int(base * math.exp(rng.normal(0.0, 0.05))))


# --------------------------------------------------------------------------------------------
# 5. The training step, forward and backward
# --------------------------------------------------------------------------------------------
Collective = tuple[int, int]  # (time the NCCL kernel is ready to start on this rank, message bytes)
Steps = Generator[Collective, int, None]  # a simulation that stops at collectives and is sent their end time


class RankSim(Recorder):
    """One rank of the DDP job. :meth:`run` is a generator that yields at each collective.

    It yields ``(ready_ns, nbytes)`` and expects the collective's end time back: the
    driver (:func:`simulate_job`) ends a collective on every rank at the same
    time, once the last rank has reached it.
    """

    def __init__(self, cfg: SynthConfig, rank: int) -> None:
        super().__init__(cfg, rank, WINDOW_START_NS + 41_517 * rank)
        self.params = model_params(cfg)
        self.numels = [math.prod(shape) for _, shape in self.params]
        self.buckets = ddp_buckets(cfg, self.numels)
        self.bucket_of = {p: b for b, ps in enumerate(self.buckets) for p in ps}
        self.pending: list[int] = []
        total = sum(self.numels) * 4
        self.mem = _Allocator(self.rng, 5 * total + (38 << 20))  # params, grads, DDP buckets, 2 Adam states
        self.end_ns = self.t0

    def run(self) -> Steps:
        """Simulate the profiled steps; yields at each collective (see the class docstring)."""
        self.pre_window_tail()
        for i in range(self.cfg.steps):
            yield from self.train_step(self.cfg.first_step + i)
        self.end_ns = self.main.clock + self.jitter(60_000, 0.1)

    def pre_window_tail(self) -> None:
        """The optimizer step of the step before the window: launched earlier, it runs into the window.

        Its GPU events have correlation ids but no runtime events (like every real
        trace whose window opens with a busy GPU).
        """
        self.recording = False
        first_corr = self.corr
        self.corr -= 2_000
        self.main.clock = self.t0 - 2_900_000
        self.free_at[COMPUTE] = self.t0 + self.jitter(38_000, 0.1)
        self.clip_scale()
        with self.op("Optimizer.step#AdamW.step", cat="user_annotation", cost=30.0):
            self.optimizer_kernels()
        self.recording = True
        self.corr = first_corr
        self.main.clock = self.t0 + self.jitter(110_000, 0.1)

    def train_step(self, n: int) -> Steps:
        """One ``ProfilerStep#n``: load, forward, backward (+ all-reduces), clip, optimizer."""
        with self.op(f"ProfilerStep#{n}", cat="user_annotation", cost=8.0):
            self.load_batch(n)
            self.leaf("Optimizer.zero_grad#AdamW.zero_grad", cost=40.0)
            with self.op("DistributedDataParallel.forward", cat="user_annotation", cost=25.0):
                tape = self.forward()
            yield from self.backward(tape)
            yield from self.log_loss()
            self.clip_grad_norm()
            self.clip_scale()
            with self.op("Optimizer.step#AdamW.step", cat="user_annotation", cost=30.0):
                self.optimizer_kernels()

    def load_batch(self, n: int) -> None:
        """Host-bound data loading (the GPU idles once it drains), then the H2D copies."""
        cfg = self.cfg
        with self.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", cat="user_annotation"):
            stall_ms = cfg.slow_loader_ms if n == cfg.slow_loader_step else cfg.loader_ms
            self.th.clock += int(stall_ms * 1e6 * float(self.rng.uniform(0.9, 1.15)))
            for _ in range(2):
                self.leaf("aten::stack", [[], []], ["TensorList", "Scalar"], cost=60.0)
        for _ in range(2):  # input ids and labels, int64, pinned
            dims = [[cfg.batch, cfg.seq], [], [], [], [], []]
            with self.op("aten::to", dims, ["long int", "Scalar", "Scalar", "Scalar", "Scalar", ""]):
                with self.op("aten::_to_copy", dims[:1], ["long int"]):
                    self.leaf(
                        "aten::empty_strided",
                        [[], [], [], [], [], []],
                        ["ScalarList", "ScalarList", "Scalar", "", "", ""],
                    )
                    with self.op("aten::copy_", [[cfg.batch, cfg.seq]] * 2 + [[]], ["long int"] * 2 + ["Scalar"]):
                        self.copy("Memcpy HtoD (Pinned -> Device)", cfg.tokens * 8, 22.0)

    # -- forward ------------------------------------------------------------------------------
    def fwd_op(self, name: str, dims: list[Any], types: list[str] | None = None) -> contextlib.AbstractContextManager:
        """A forward op that creates an autograd node (gets a sequence number and a fwdbwd flow)."""
        seq = self.next_seq()
        self.tape_seq = seq
        return self._fwd_op(name, dims, types, seq)

    @contextlib.contextmanager
    def _fwd_op(self, name: str, dims: list[Any], types: list[str] | None, seq: int) -> Iterator[dict[str, Any]]:
        with self.op(name, dims, types, seq=seq) as event:
            self.add_fwdbwd(event, seq, finish=False)
            yield event

    def forward(self) -> list[tuple[Any, ...]]:
        """Embedding, the transformer layers, final norm, LM head and loss; returns the autograd tape."""
        cfg = self.cfg
        tape: list[tuple[Any, ...]] = []
        x = [cfg.batch, cfg.seq, cfg.hidden]
        with self.fwd_op("aten::embedding", [[cfg.vocab, cfg.hidden], [cfg.batch, cfg.seq], [], [], []]):
            self.leaf("aten::reshape", [[cfg.batch, cfg.seq], []], ["long int", "ScalarList"])
            with self.op("aten::index_select", [[cfg.vocab, cfg.hidden], [], [cfg.tokens]],
                         ["float", "Scalar", "long int"]):  # fmt: skip
                act = self.malloc(cfg.tokens * cfg.hidden * 4)
                self.kernel("embedding", mem_ns(cfg.tokens * cfg.hidden * 8), ew_grid(cfg.tokens * cfg.hidden))
        tape.append(("embedding", self.tape_seq, 0, [act]))
        first = 1
        for _ in range(cfg.layers):
            tape += self.forward_layer(first)
            first += 12
        tape.append(self.layer_norm(x, first))
        tape += self.linear(x, cfg.vocab, first + 2, bias=False)
        tape += self.loss()
        return tape

    def forward_layer(self, p: int) -> list[tuple[Any, ...]]:
        """One pre-norm transformer block; ``p`` is the index of its first parameter."""
        cfg = self.cfg
        x = [cfg.batch, cfg.seq, cfg.hidden]
        tape = [self.layer_norm(x, p)]
        tape += self.linear(x, 3 * cfg.hidden, p + 2)
        for _ in range(3):
            self.leaf("aten::view", [[cfg.batch, cfg.seq, 3 * cfg.hidden], []], ["float", "ScalarList"])
            self.leaf("aten::transpose", [[cfg.batch, cfg.seq, cfg.heads, 64], [], []], ["float", "Scalar", "Scalar"])
        tape.append(self.attention())
        self.leaf("aten::transpose", [[cfg.batch, cfg.heads, cfg.seq, 64], [], []], ["float", "Scalar", "Scalar"])
        self.leaf("aten::reshape", [[cfg.batch, cfg.seq, cfg.heads, 64], []], ["float", "ScalarList"])
        tape += self.linear(x, cfg.hidden, p + 4)
        tape.append(self.add(x))
        tape.append(self.layer_norm(x, p + 6))
        tape += self.linear(x, cfg.ffn, p + 8)
        tape.append(self.relu([cfg.batch, cfg.seq, cfg.ffn]))
        tape += self.linear([cfg.batch, cfg.seq, cfg.ffn], cfg.hidden, p + 10)
        tape.append(self.add(x))
        return tape

    def layer_norm(self, x: list[int], p: int) -> tuple[Any, ...]:
        """``aten::layer_norm`` -> ``aten::native_layer_norm`` -> one kernel."""
        h = x[-1]
        dims = [x, [h], [h], [h], []]
        types = ["float", "ScalarList", "float", "float", "Scalar"]
        with self.op("aten::layer_norm", dims + [[]], types + ["Scalar"]):
            with self.fwd_op("aten::native_layer_norm", dims, types):
                out = self.malloc(self.cfg.tokens * h * 4)
                stats = self.malloc(self.cfg.tokens * 8)  # mean and rstd, kept for backward
                self.kernel("layer_norm", mem_ns(self.cfg.tokens * h * 8), (self.cfg.tokens, 1, 1))
        return ("layer_norm", self.tape_seq, p, [out, stats])

    def linear(self, x: list[int], n: int, p: int, bias: bool = True) -> list[tuple[Any, ...]]:
        """``aten::linear``: a transpose node for the weight and an addmm (or mm) node."""
        m, k = self.cfg.tokens, x[-1]
        dims = [x, [n, k], [n] if bias else []]
        with self.op("aten::linear", dims, ["float", "float", "float" if bias else ""]):
            with self.fwd_op("aten::t", [[n, k]]):
                self.leaf("aten::transpose", [[n, k], [], []], ["float", "Scalar", "Scalar"], cost=1.0)
            t_entry = ("t", self.tape_seq, p, [])
            name = "aten::addmm" if bias else "aten::mm"
            mm_dims = [[n], [m, k], [k, n], [], []] if bias else [[m, k], [k, n]]
            with self.fwd_op(name, mm_dims, ["float"] * 3 + ["Scalar"] * 2 if bias else None):
                out = self.malloc(m * n * 4)
                self.kernel("gemm_tn", gemm_ns(m, n, k), gemm_grid(m, n))
            mm_entry = ("addmm", self.tape_seq, p, (m, k, n, bias), [out])
            self.leaf("aten::view", [[m, n], []], ["float", "ScalarList"])
        return [t_entry, mm_entry]

    def attention(self) -> tuple[Any, ...]:
        """Memory-efficient scaled dot product attention (fp32 cannot use flash)."""
        cfg = self.cfg
        q = [cfg.batch, cfg.heads, cfg.seq, cfg.hidden // cfg.heads]
        flops = 4.0 * cfg.batch * cfg.heads * cfg.seq * cfg.seq * (cfg.hidden // cfg.heads)
        with self.op("aten::scaled_dot_product_attention", [q, q, q, [], [], [], [], []],
                     ["float"] * 3 + ["", "Scalar", "Scalar", "", "Scalar"]):  # fmt: skip
            with self.fwd_op("aten::_scaled_dot_product_efficient_attention", [q, q, q, [], [], [], [], []],
                             ["float"] * 3 + ["", "Scalar", "Scalar", "", "Scalar"]):  # fmt: skip
                with self.op("aten::_efficient_attention_forward", [q, q, q, [], [], [], [], [], [], [], []]):
                    out = self.malloc(cfg.tokens * cfg.hidden * 4)
                    lse = self.malloc(cfg.batch * cfg.heads * cfg.seq * 4)  # logsumexp, kept for backward
                    self.kernel("attn_fwd", flops / 95e3, (cfg.seq // 64, cfg.heads, cfg.batch))
        return ("attention", self.tape_seq, 0, [out, lse])

    def add(self, x: list[int]) -> tuple[Any, ...]:
        """The residual add."""
        numel = math.prod(x)
        with self.fwd_op("aten::add", [x, x, []], ["float", "float", "Scalar"]):
            out = self.malloc(numel * 4)
            self.kernel("add", mem_ns(numel * 12), ew_grid(numel))
        return ("add", self.tape_seq, 0, [out])

    def relu(self, x: list[int]) -> tuple[Any, ...]:
        """``aten::relu`` -> ``aten::clamp_min``."""
        numel = math.prod(x)
        with self.fwd_op("aten::relu", [x]):
            with self.op("aten::clamp_min", [x, []], ["float", "Scalar"]):
                out = self.malloc(numel * 4)
                self.kernel("relu", mem_ns(numel * 8), ew_grid(numel))
        return ("relu", self.tape_seq, 0, [out])

    def loss(self) -> list[tuple[Any, ...]]:
        """Cross entropy: log_softmax then nll_loss."""
        cfg = self.cfg
        logits = [cfg.tokens, cfg.vocab]
        with self.op("aten::cross_entropy_loss", [logits, [cfg.tokens], [], [], [], []],
                     ["float", "long int", "", "Scalar", "Scalar", "Scalar"]):  # fmt: skip
            with self.fwd_op("aten::log_softmax", [logits, [], []], ["float", "Scalar", ""]):
                with self.op("aten::_log_softmax", [logits, [], []], ["float", "Scalar", "Scalar"]):
                    out = self.malloc(cfg.tokens * cfg.vocab * 4)
                    # planted: a memory-bound kernel far below its roof (~9% of the H100's 3.35 TB/s)
                    self.kernel("log_softmax", cfg.tokens * cfg.vocab * 8 / cfg.slow_kernel_gbps + 2_200,
                                (cfg.tokens, 1, 1))  # fmt: skip
            soft = ("log_softmax", self.tape_seq, 0, [out])
            with self.fwd_op("aten::nll_loss_nd", [logits, [cfg.tokens], [], [], []]):
                with self.op("aten::nll_loss_forward", [logits, [cfg.tokens], [], [], []]):
                    loss = self.malloc(8)
                    self.kernel("nll", mem_ns(cfg.tokens * 8), (1, 1, 1))
        return [soft, ("nll", self.tape_seq, 0, [loss])]

    # -- backward -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def node(self, name: str, seq: int, dims: list[Any] | None = None) -> Iterator[None]:
        """``evaluate_function: <node>`` and the node itself, which closes the fwdbwd flow."""
        with self.op(f"autograd::engine::evaluate_function: {name}", seq=seq, backward=True, cost=4.0):
            with self.op(name, dims, seq=seq, backward=True) as event:
                self.add_fwdbwd(event, seq, finish=True)
                yield

    def backward(self, tape: list[tuple[Any, ...]]) -> Steps:
        """``loss.backward()``: the engine runs the tape in reverse on the autograd thread."""
        with self.op("aten::ones_like", [[], [], [], [], [], []]):
            self.kernel("fill", 2_000, (1, 1, 1))
        self.pending = [len(b) for b in self.buckets]
        self.bwd.clock = self.main.clock + self.jitter(9_000, 0.2)
        self.th = self.bwd
        grad: tuple[int, int] | None = None
        for entry in reversed(tape):
            grad, ready = self.backward_node(entry, grad)
            for p in ready:
                yield from self.accumulate_grad(p)
        self.free(grad)
        if any(self.pending):
            raise RuntimeError("some DDP buckets never became ready")
        self.finalize_ddp()
        self.th = self.main
        self.main.clock = self.bwd.clock + self.jitter(15_000, 0.2)

    def backward_node(self, entry: tuple[Any, ...], grad: tuple[int, int] | None) -> tuple[Any, list[int]]:
        """Run one autograd node; return the current gradient block and the params whose grads are ready."""
        kind, seq = entry[0], entry[1]
        width = self.cfg.vocab if kind in ("nll", "log_softmax") else self.cfg.hidden
        with self.node(_NODE_NAMES[kind], seq, [[self.cfg.tokens, width]]):
            new_grad, ready = getattr(self, f"bwd_{kind}")(entry)
        if new_grad is not None:
            self.free(grad)
            grad = new_grad
        for block in entry[-1]:  # the activations saved for this node
            self.free(block)
        return grad, ready

    def bwd_t(self, entry: tuple[Any, ...]) -> tuple[Any, list[int]]:
        """TBackward0: a transpose; the weight's gradient is then ready."""
        self.leaf("aten::t", [[1, 1]])
        return None, [entry[2]]

    def bwd_addmm(self, entry: tuple[Any, ...]) -> tuple[Any, list[int]]:
        """AddmmBackward0 / MmBackward0: input and weight gradients, and the bias gradient."""
        m, k, n, bias = entry[3]
        self.leaf("aten::t", [[k, n]])
        with self.op("aten::mm", [[m, n], [n, k]]):
            grad = self.malloc(m * k * 4)
            self.kernel("gemm_nn", gemm_ns(m, k, n), gemm_grid(m, k))
        self.leaf("aten::t", [[m, n]])
        with self.op("aten::mm", [[n, m], [m, k]]):
            wgrad = self.malloc(n * k * 4)
            self.kernel("gemm_nt", gemm_ns(n, k, m), gemm_grid(n, k))
        self.leaf("aten::t", [[n, k]])
        if not bias:
            self.free(wgrad)
            return grad, []
        with self.op("aten::sum", [[m, n], [], [], []], ["float", "ScalarList", "Scalar", ""]):
            bgrad = self.malloc(n * 4)
            self.kernel("sum", mem_ns(m * n * 4), (_ceil_div(n, 32), 4, 1))
        self.free(wgrad)
        self.free(bgrad)
        return grad, [entry[2] + 1]

    def _elementwise_bwd(self, op: str, kernel: str, numel: int, nbytes: int) -> tuple[Any, list[int]]:
        with self.op(op, [[numel], [numel], []], ["float", "float", "Scalar"]):
            grad = self.malloc(numel * 4)
            self.kernel(kernel, mem_ns(nbytes), ew_grid(numel))
        return grad, []

    def bwd_relu(self, entry: tuple[Any, ...]) -> tuple[Any, list[int]]:
        """ReluBackward0: ``threshold_backward``."""
        numel = self.cfg.tokens * self.cfg.ffn
        return self._elementwise_bwd("aten::threshold_backward", "relu_bwd", numel, numel * 12)

    def bwd_add(self, entry: tuple[Any, ...]) -> tuple[Any, list[int]]:
        """AddBackward0 passes the gradient through; the engine sums the two branches."""
        numel = self.cfg.tokens * self.cfg.hidden
        return self._elementwise_bwd("aten::add", "add", numel, numel * 12)

    def bwd_layer_norm(self, entry: tuple[Any, ...]) -> tuple[Any, list[int]]:
        """NativeLayerNormBackward0: input gradient, then gamma/beta gradients."""
        m, h = self.cfg.tokens, self.cfg.hidden
        with self.op("aten::native_layer_norm_backward", [[m, h], [m, h], [], [m, 1], [m, 1], [h], [h], []]):
            grad = self.malloc(m * h * 4)
            self.kernel("ln_grad_input", mem_ns(m * h * 12), (m, 1, 1))
            self.kernel("ln_grad_gamma", mem_ns(m * h * 8), (_ceil_div(h, 32), 1, 1))
        return grad, [entry[2], entry[2] + 1]

    def bwd_attention(self, entry: tuple[Any, ...]) -> tuple[Any, list[int]]:
        """ScaledDotProductEfficientAttentionBackward0: memset of the accumulator, one kernel."""
        cfg = self.cfg
        q = [cfg.batch, cfg.heads, cfg.seq, cfg.hidden // cfg.heads]
        flops = 10.0 * cfg.batch * cfg.heads * cfg.seq * cfg.seq * (cfg.hidden // cfg.heads)
        with self.op("aten::_efficient_attention_backward", [q, q, q, q, [], q, [], [], [], [], [], [], [], []]):
            grad = self.malloc(3 * cfg.tokens * cfg.hidden * 4)
            delta = self.malloc(cfg.batch * cfg.heads * cfg.seq * 4)
            self.copy("Memset (Device)", cfg.batch * cfg.heads * cfg.seq * 4, 900.0, memset=True)
            self.kernel("attn_bwd", flops / 80e3, (cfg.seq // 64, cfg.heads, cfg.batch))
            self.free(delta)
        return grad, []

    def bwd_embedding(self, entry: tuple[Any, ...]) -> tuple[Any, list[int]]:
        """EmbeddingBackward0: zero the dense gradient, scatter-add the rows."""
        cfg = self.cfg
        with self.op("aten::embedding_dense_backward", [[cfg.batch, cfg.seq, cfg.hidden], [cfg.batch, cfg.seq]]):
            self.copy("Memset (Device)", cfg.vocab * cfg.hidden * 4, 2_100.0, memset=True)
            self.kernel("embedding_bwd", mem_ns(cfg.tokens * cfg.hidden * 12), (_ceil_div(cfg.tokens, 32), 1, 1))
        return None, [0]

    def bwd_log_softmax(self, entry: tuple[Any, ...]) -> tuple[Any, list[int]]:
        """LogSoftmaxBackward0."""
        cfg = self.cfg
        with self.op("aten::_log_softmax_backward_data", [[cfg.tokens, cfg.vocab]] * 2 + [[], []]):
            grad = self.malloc(cfg.tokens * cfg.vocab * 4)
            self.kernel("log_softmax_bwd", mem_ns(cfg.tokens * cfg.vocab * 12), (cfg.tokens, 1, 1))
        return grad, []

    def bwd_nll(self, entry: tuple[Any, ...]) -> tuple[Any, list[int]]:
        """NllLossBackward0: zero-filled gradient, then one scatter kernel."""
        cfg = self.cfg
        with self.op("aten::nll_loss_backward", [[], [cfg.tokens, cfg.vocab], [cfg.tokens], [], [], [], []]):
            grad = self.malloc(cfg.tokens * cfg.vocab * 4)
            with self.op("aten::zero_", [[cfg.tokens, cfg.vocab]]):
                self.kernel("fill", mem_ns(cfg.tokens * cfg.vocab * 4), ew_grid(cfg.tokens * cfg.vocab))
            self.kernel("nll_bwd", mem_ns(cfg.tokens * 8), (1, 1, 1))
        return grad, []

    # -- DDP ----------------------------------------------------------------------------------
    def accumulate_grad(self, p: int) -> Steps:
        """AccumulateGrad (``gradient_as_bucket_view``: no copy); a full bucket is all-reduced from its hook."""
        with self.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", cost=3.0):
            with self.op("torch::autograd::AccumulateGrad", cost=2.0):
                self.leaf("aten::detach", [list(self.params[p][1])], cost=1.0)
            b = self.bucket_of[p]
            self.pending[b] -= 1
            if self.pending[b] == 0:
                yield from self.all_reduce(sum(self.numels[q] for q in self.buckets[b]))

    def log_loss(self) -> Steps:
        """``dist.all_reduce(loss.detach().clone())`` for logging: a DtoD copy and a 4-byte LL all-reduce."""
        with self.op("aten::clone", [[], []], ["float", ""]):
            block = self.malloc(4)
            with self.op("aten::copy_", [[], [], []], ["float", "float", "Scalar"]):
                self.copy("Memcpy DtoD (Device -> Device)", 4, 0.8)
        yield from self.all_reduce(1)
        self.free(block)

    def all_reduce(self, nelems: int) -> Steps:
        """``c10d::allreduce_`` on the NCCL stream, ordered after the compute stream's queued work."""
        comm = {"Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems, "Group size": 2,
                "dtype": "Float", "In split size": "[]", "Out split size": "[]", "Process Group Name": "0",
                "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]"}  # fmt: skip
        with self.op("c10d::allreduce_", [[nelems], [], [], [], []], ["TensorList", "", "", "", "Scalar"]):
            with self.op("record_param_comms", [[nelems]], extra={**comm, "Global rank start": 0,
                                                                  "Global rank stride": 1}):  # fmt: skip
                self.runtime_only("cudaEventRecord")
                self.runtime_only("cudaStreamWaitEvent", 1.8)
                compute_done = self.free_at[COMPUTE]
                with self.op("nccl:all_reduce", [[nelems]], cat="user_annotation"):
                    yield from self.nccl_kernel(nelems * 4, compute_done, comm)
                self.runtime_only("cudaEventRecord")

    def nccl_kernel(self, nbytes: int, after: int, comm: dict[str, Any]) -> Steps:
        """Launch the all-reduce kernel; its end comes from the other ranks (see :func:`simulate_job`)."""
        spec = _nccl_spec("LL" if nbytes <= 65536 else "SIMPLE")
        launch_ts = self.th.clock
        corr, rt = self._runtime("cudaLaunchKernelExC", 11.0)
        start = self.gpu_start(COMM, launch_ts, after)
        end = (yield (start, nbytes)) + self.jitter(1_500, 0.5)  # each GPU sees the end a little apart
        grid = (1 if nbytes <= 65536 else 16, 1, 1)
        args = self._gpu_args()
        args.update(_occupancy_args(spec, grid, COMM, corr))
        args.update(comm)
        event = {"ph": "X", "cat": "kernel", "name": spec.name, "pid": 0, "tid": COMM, "ts": start,
                 "dur": end - start, "args": args}  # fmt: skip
        self.submit(COMM, event, corr, rt)

    def finalize_ddp(self) -> None:
        """End of backward: the compute stream waits for every bucket's all-reduce."""
        for _ in self.buckets:
            self.runtime_only("cudaStreamWaitEvent", 1.6)
        self.free_at[COMPUTE] = max(self.free_at[COMPUTE], self.free_at[COMM])

    # -- clip and optimizer -------------------------------------------------------------------
    def foreach(self, op: str, spec: KernelSpec, depth: int, types: list[str], nbytes_per_elem: int) -> None:
        """A ``torch._foreach_*`` op over every parameter: several multi_tensor_apply launches."""
        with self.op(op, [[] for _ in types], types, cost=20.0):
            for chunks in mta_launches(self.numels, depth):
                self.kernel(spec, mem_ns(chunks * CHUNK * nbytes_per_elem), (chunks, 1, 1))

    def clip_grad_norm(self) -> None:
        """``clip_grad_norm_(error_if_nonfinite=True)``: norms, scaling, and a host sync on the result."""
        n = len(self.numels)
        norm = _mta_spec(1, "LpNormFunctor<float, (at::native::(anonymous namespace)::NormType)1, float, 1, 1, 0>",
                         "float*, int")  # fmt: skip
        with self.op("aten::_foreach_norm", [[], []], ["TensorList", "Scalar"], cost=25.0):
            for chunks in mta_launches(self.numels, 1):
                self.kernel(norm, mem_ns(chunks * CHUNK * 4), (chunks, 1, 1))
            self.kernel("lpnorm_cleanup", 3_500, (n, 1, 1))
        with self.op("aten::stack", [[], []], ["TensorList", "Scalar"]):
            self.kernel("cat", 2_600, (1, 1, 1))
        for name, key in (("aten::linalg_vector_norm", "norm"), ("aten::add", "mul"), ("aten::reciprocal", "mul"),
                          ("aten::mul", "mul"), ("aten::clamp", "mul"), ("aten::isfinite", "isfinite")):  # fmt: skip
            with self.op(name, [[], []], ["float", "Scalar"]):
                self.kernel(key, 2_400, (1, 1, 1))
        with self.op("aten::is_nonzero", [[]]):
            with self.op("aten::item", [[]]):
                with self.op("aten::_local_scalar_dense", [[]]):
                    self.copy("Memcpy DtoH (Device -> Pageable)", 1, 0.5)
                    self.runtime_only("cudaStreamSynchronize", until=self.free_at[COMPUTE])

    def clip_scale(self) -> None:
        """The second half of ``clip_grad_norm_``: scale every gradient by the clip coefficient."""
        mul = _mta_spec(1, "BinaryOpScalarTensorFunctor<float, 1, 1, 0>", "std::multiplies<float>, float")
        self.foreach("aten::_foreach_mul_", mul, 1, ["TensorList", "float"], 8)

    def optimizer_kernels(self) -> None:
        """Foreach AdamW (``capturable=False``: the step counters stay on the CPU)."""
        self.leaf("aten::_foreach_add_", [[], []], ["TensorList", "Scalar"], cost=40.0)
        for op, depth, functor, fn, types, nbytes in _ADAMW_OPS:
            self.foreach(op, _mta_spec(depth, functor, fn), depth, types, nbytes)


_ADAMW_OPS = (
    ("aten::_foreach_lerp_", 2, "TernaryOpScalarFunctor<float, 2, 2, 0>", "at::native::LerpFunctor<float>, float",
     ["TensorList", "TensorList", "Scalar"], 12),
    ("aten::_foreach_mul_", 1, "BinaryOpScalarFunctor<float, 1, 1, 0>", "std::multiplies<float>, float",
     ["TensorList", "Scalar"], 8),
    ("aten::_foreach_addcmul_", 3, "PointwiseOpScalarFunctor<float, 3, 3, 0>", "std::multiplies<float>, float",
     ["TensorList", "TensorList", "TensorList", "Scalar"], 16),
    ("aten::_foreach_mul_", 1, "BinaryOpScalarFunctor<float, 1, 1, 0>", "std::multiplies<float>, float",
     ["TensorList", "Scalar"], 8),
    ("aten::_foreach_sqrt", 2, "UnaryOpFunctor<float, 2, 1, 1>", "at::native::Sqrt<float>", ["TensorList"], 8),
    ("aten::_foreach_div_", 1, "BinaryOpScalarListFunctor<float, 1, 1, 0>", "std::divides<float>, float",
     ["TensorList", "ScalarList"], 8),
    ("aten::_foreach_add_", 1, "BinaryOpScalarFunctor<float, 1, 1, 0>", "std::plus<float>, float",
     ["TensorList", "Scalar"], 8),
    ("aten::_foreach_addcdiv_", 3, "PointwiseOpScalarListFunctor<float, 3, 3, 0>", "std::divides<float>, float",
     ["TensorList", "TensorList", "TensorList", "ScalarList"], 16),
)  # fmt: skip

_NODE_NAMES = {
    "t": "TBackward0", "addmm": "AddmmBackward0", "relu": "ReluBackward0", "add": "AddBackward0",
    "layer_norm": "NativeLayerNormBackward0", "attention": "ScaledDotProductEfficientAttentionBackward0",
    "embedding": "EmbeddingBackward0", "log_softmax": "LogSoftmaxBackward0", "nll": "NllLossBackward0",
}  # fmt: skip


# --------------------------------------------------------------------------------------------
# 6. Running the ranks together
# --------------------------------------------------------------------------------------------
def _advance(gen: Steps, value: int | None) -> Collective | None:
    try:
        return next(gen) if value is None else gen.send(value)
    except StopIteration:
        return None


def simulate_job(cfg: SynthConfig) -> list[RankSim]:
    """Run every rank's simulation in lock-step at the collectives.

    A collective starts on each rank when that rank is ready and ends on all
    ranks together, a transfer time after the last rank got there.
    """
    sims = [RankSim(cfg, rank) for rank in range(cfg.world_size)]
    gens = [sim.run() for sim in sims]
    net = np.random.default_rng([cfg.seed, 10_000])
    pending = [_advance(g, None) for g in gens]
    while any(p is not None for p in pending):
        if any(p is None for p in pending) or len({p[1] for p in pending if p}) != 1:
            raise RuntimeError("the ranks disagree on their sequence of collectives")
        end = max(p[0] for p in pending if p) + nccl_ns(pending[0][1], net)  # type: ignore[index]
        pending = [_advance(g, end) for g in gens]
    return sims


# --------------------------------------------------------------------------------------------
# 7. Writing Kineto's JSON layout
# --------------------------------------------------------------------------------------------
def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _render_args(args: dict[str, Any]) -> str:
    return ", ".join(f"{_j(k)}: {_j(v)}" for k, v in args.items())


def render_event(ev: dict[str, Any]) -> str:
    """One event in the 2024 Kineto text layout."""
    ph = ev["ph"]
    if ph in ("s", "f"):
        bp = ', "bp": "e"' if "bp" in ev else ""
        return (f'  {{\n    "ph": "{ph}", "id": {ev["id"]}, "pid": {_j(ev["pid"])}, "tid": {_j(ev["tid"])}, '
                f'"ts": {us_text(ev["ts"])},\n    "cat": "{ev["cat"]}", "name": "{ev["name"]}"{bp}\n  }}')  # fmt: skip
    if ph == "M":
        return (f'  {{\n    "name": "{ev["name"]}", "ph": "M", "ts": {us_text(ev["ts"])}, "pid": {_j(ev["pid"])}, '
                f'"tid": {_j(ev["tid"])},\n    "args": {{\n      {_render_args(ev["args"])}\n    }}\n  }}')  # fmt: skip
    if ph == "i" and "args" not in ev:
        return (f'  {{\n    "name": {_j(ev["name"])}, "ph": "i", "s": "g",\n    "pid": {_j(ev["pid"])}, '
                f'"tid": {_j(ev["tid"])}, "ts": {us_text(ev["ts"])}\n  }}')  # fmt: skip
    if ph == "i":
        head = f'"ph": "i", "cat": "{ev["cat"]}", "s": "t", "name": {_j(ev["name"])},\n    '
        times = f'"pid": {ev["pid"]}, "tid": {ev["tid"]},\n    "ts": {us_text(ev["ts"])},'
    else:
        head = f'"ph": "X", "cat": "{ev["cat"]}", "name": {_j(ev["name"])}, "pid": {_j(ev["pid"])}, '
        times = f'"tid": {_j(ev["tid"])},\n    "ts": {us_text(ev["ts"])}, "dur": {us_text(ev["dur"])},'
    return f'  {{\n    {head}{times}\n    "args": {{\n      {_render_args(ev["args"])}\n    }}\n  }}'


def metadata_events(sim: RankSim, ts: int) -> list[dict[str, Any]]:
    """Process and thread name/label/sort-index events (``ph: M``)."""

    def meta(name: str, pid: int | str, tid: int, args: dict[str, Any]) -> dict[str, Any]:
        return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": ts, "args": args}

    out = [meta("process_name", sim.pid, 0, {"name": "python"}), meta("process_labels", sim.pid, 0, {"labels": "CPU"}),
           meta("process_sort_index", sim.pid, 0, {"sort_index": sim.pid}),
           meta("process_name", 0, 0, {"name": "python"}), meta("process_labels", 0, 0, {"labels": "GPU 0"}),
           meta("process_sort_index", 0, 0, {"sort_index": 16777216})]  # fmt: skip
    for stream in (COMPUTE, COMM):
        out += [meta("thread_name", 0, stream, {"name": f"stream {stream} "}),
                meta("thread_sort_index", 0, stream, {"sort_index": stream})]  # fmt: skip
    for th in (sim.main, sim.bwd):
        out += [meta("thread_name", sim.pid, th.tid, {"name": f"thread {th.tid} ({th.name})"}),
                meta("thread_sort_index", sim.pid, th.tid, {"sort_index": th.tid})]  # fmt: skip
    return out


def ordered_events(sim: RankSim) -> list[dict[str, Any]]:
    """Every event in Kineto's file order: CPU side, GPU side, metadata, then the window markers."""
    cpu = sorted(sim.cpu_events, key=lambda e: (e["ts"], -e.get("dur", 0)))
    out: list[dict[str, Any]] = []
    for idx, ev in enumerate(cpu):
        ev["args"]["Ev Idx"] = idx
        out.append(ev)
        flow = sim.flows_after.get(ev["args"].get("External id", -1)) if ev["ph"] == "X" else None
        if flow is not None:
            out.append(flow)
    for group in sim.gpu_groups:
        out += group
    last = max(e["ts"] + e.get("dur", 0) for e in out)
    start = sim.t0 - 87_211
    out += metadata_events(sim, sim.t0 - 61_044)
    out.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
                "ts": start, "dur": last - start, "args": {"Op count": 0}})  # fmt: skip
    out.append({"ph": "M", "name": "process_sort_index", "pid": "Spans", "tid": 0, "ts": start,
                "args": {"sort_index": 536870912}})  # fmt: skip
    out.append({"ph": "i", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces",
                "tid": "Trace PyTorch Profiler", "ts": start})  # fmt: skip
    out.append({"ph": "i", "name": "Record Window End", "pid": "", "tid": "", "ts": max(last, sim.end_ns)})
    return out


def _trace_id(rng: np.random.Generator) -> str:
    return "".join(f"{int(b):02X}" for b in rng.integers(0, 256, 16))


def render_trace(sim: RankSim) -> bytes:
    """The whole file of one rank as UTF-8 JSON text."""
    cfg = sim.cfg
    dist = {"backend": "nccl", "rank": sim.rank, "world_size": cfg.world_size, "pg_count": 1,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                           "pg_size": cfg.world_size, "ranks": list(range(cfg.world_size))}],
            "nccl_version": "2.21.5"}  # fmt: skip
    props = ", ".join(f"{_j(k)}: {_j(v)}" for k, v in H100.items())
    events = ",\n".join(render_event(e) for e in ordered_events(sim))
    head = (
        f'{{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {{\n      {props}\n    }}\n  ],\n'
        f'  "distributedInfo": {_j(dist)},\n  "cuda_runtime_version": 12040,\n  "cuda_driver_version": 12040,\n'
        f'  "cupti_version": 22,\n  "trace_id": "{_trace_id(np.random.default_rng([cfg.seed, 7, sim.rank]))}",\n'
        f'  "record_shapes": 1,\n  "profile_memory": 1,\n  "with_flops": 1,\n'
    )
    tail = (f'\n  ],\n  "traceName": "/workspace/traces/rank{sim.rank}.pt.trace.json",\n'
            f'  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": {BASE_TIME_NS}\n}}\n')  # fmt: skip
    return (head + '  "traceEvents": [\n' + events + tail).encode()


def make_gpu_traces(out_dir: Path, seed: int) -> list[Path]:
    """Simulate the job and write one gzipped trace per rank."""
    sims = simulate_job(SynthConfig(seed=seed))
    paths = []
    for sim in sims:
        path = out_dir / GPU_FILE.format(rank=sim.rank)
        write_gzip(path, render_trace(sim))
        paths.append(path)
    return paths


# --------------------------------------------------------------------------------------------
# 8. README and command line
# --------------------------------------------------------------------------------------------
CUDA_HEADING = "## `cuda/`"
"""The heading of the README's section on ``cuda/``, which :func:`write_readme` carries over unchanged."""

README_TEMPLATE = """\
# Sample traces

Small traces bundled with aonkit for examples, docs and tests. Every file here but `cuda/` is made by
`tools/make_sample_traces.py`; regenerate them all from the repository root with

    python tools/make_sample_traces.py

(`--seed N` changes the synthetic traces, `--skip-cpu` / `--skip-gpu` / `--skip-nsys` leave one kind out.)

| file | bytes (gzip) | events | what |
|---|---:|---:|---|
{rows}

## `{cpu_file}`

A real `torch.profiler` run on the CPU, made with torch {torch_version}: a 3-layer MLP
(64-128-128-10, ReLU) trained with AdamW on one fixed batch of 32, five steps under
`schedule(wait=1, warmup=1, active=3)` (so `ProfilerStep#2..#4` are recorded) with
`record_shapes=True`, `profile_memory=True`, `with_flops=True`, exported with
`prof.export_chrome_trace(...)` and gzipped. It has CPU ops, `[memory]` instants and
`fwdbwd` flows, and no GPU events (nor FLOP counts: this torch writes none for these CPU ops).
Its timings differ from run to run, so regenerating it changes its bytes; without torch the
script skips it and leaves the existing file alone.

## `{gen_file}`

A real `torch.profiler` run on the CPU, made with the same torch by `tools/generate_trace.py`: a 2-layer decoder
(hidden 256, 8 heads, 2 KV heads, vocabulary 1,000; token and position embeddings, a KV cache, causal SDPA)
generates greedily for five batches of requests, (batch, prompt tokens, new tokens) = (1, 64, 8), (2, 128, 8),
(4, 32, 8), (8, 96, 8) and (3, 192, 8), after an unprofiled warm-up: 40 forward passes, 5 prefills and 35
decodes, each inside a `record_function("engine_step")`, with `record_shapes=True`.
`aonkit.analysis.forward_passes` reads the passes back, and `aonkit.model.fit_step_time` fits the serving
model's step times to them (`notebooks/03_models.ipynb`). It is remade with `{cpu_file}`, and its bytes
change as that one's do.

## `gpu_synthetic_rank0.json.gz`, `gpu_synthetic_rank1.json.gz`

Synthetic, not measured: a seeded simulator (`numpy.random.default_rng`, default seed
{seed}) writes Kineto traces in the 2024 layout of a 2-rank DDP training job (NCCL,
`world_size` 2, one "NVIDIA H100 80GB HBM3" per rank, device 0) of a {layers}-layer fp32/TF32
transformer. The same seed gives the same bytes on every run (gzip with mtime 0). Each file has:

* top-level `schemaVersion`, `deviceProperties`, `distributedInfo` (`pg_config`),
  CUDA/CUPTI versions, `baseTimeNanoseconds` (the `ts` values are µs relative to it, with 3 decimals);
* four `ProfilerStep#2..#5` annotations; data loading, `DistributedDataParallel.forward` and the
  backward on the autograd thread (`pt_autograd_0`), `clip_grad_norm_` with a host sync
  (`cudaStreamSynchronize`), then a foreach AdamW step;
* nested `cpu_op`s with `External id`, `Input Dims`, `Input type`, `Sequence number`; `fwdbwd` flows;
* `cuda_runtime` calls (`cudaLaunchKernel`, `cudaLaunchKernelExC`, `cudaMemcpyAsync`,
  `cudaMemsetAsync`, `cudaEventRecord`, `cudaStreamWaitEvent`, `cudaStreamSynchronize`) with
  `correlation` and `External id`, and `ac2g` flows (`s`/`f` pairs; a lone one on calls that launch nothing);
* `kernel`s on stream 7 (compute) and stream 20 (NCCL: `ncclDevKernel_AllReduce_Sum_f32_RING_SIMPLE`
  for the gradient buckets, `..._RING_LL` for the 4-byte loss all-reduce) with `grid`, `block` and
  CUPTI's occupancy fields; `gpu_memcpy` (HtoD, DtoD, DtoH) and `gpu_memset` with `bytes`;
* `[memory]` instants (`cpu_instant_event`) with `Bytes`, `Addr`, `Total Allocated`, `Total Reserved`,
  `Device Type` 1, `Device Id` 0; process/thread `M` events; the `Trace` span and window markers.

Built-in behaviours to find:

* **host-bound gaps**: data loading takes ~{loader_ms:.0f} ms of host time per step (~{slow_loader_ms:.0f} ms in
  `ProfilerStep#{slow_step}`), longer than the GPU's tail of the previous step, so the GPU idles before most
  steps' input copy (a few ms; over 15 ms in `ProfilerStep#{slow_step}`);
* **a straggler**: rank 1 computes ~{slow_pct:.0f}% slower (CPU and GPU), so its all-reduces start later.
  A collective ends on both ranks at about the same time, so rank 0's NCCL kernels are much longer
  (they wait for rank 1), and rank 0's compute stream idles at the end of each backward until the
  last all-reduce is done;
* **a memory-bound kernel far below its roof**: the loss's `log_softmax` forward (`cunn_SoftMaxForward`, once
  per step) moves its bytes at ~{slow_gbps:.0f} GB/s, about a tenth of the H100's memory bandwidth (the other
  memory-bound kernels run at 65-80% of it), so `roofline_table` puts `aten::log_softmax` under 10% of its
  roof and `findings` lists it (`below_roof`);
* **launches before the window**: the gradient-scaling and optimizer kernels of the step before the
  window run at its start; their correlation ids have no runtime event and they have no
  `External id` ({pre} of rank 0's GPU events, {pre_pct:.1f}%);
* kernels start at least a launch delay after their runtime call and never overlap on a stream.

## `{nsys_file}`

Synthetic, not measured: an Nsight Systems SQLite export written by `tools/gen_nsys.py`
(seed 7) with the tables and columns of real exports (`nsys` 2024.6, schema 3.16):
{nsys_kernels:,} kernels in two processes on two H100s (one stream each), one
`cudaLaunchKernel_v7000` per kernel with the same correlation id (both processes reuse the
same ids, as real ones do), NVTX push/pop ranges around every ten launches, and
`GPU_METRICS` samples (SM Active, DRAM Read Bandwidth, GR Active). It lives in a folder of its
own so that loading `sample_traces/` as a job leaves it out. `notebooks/07_nsight_systems.ipynb`
reads it (and a real export from `../shared/nsys` when that is present).
"""


def _count_events(path: Path) -> tuple[int, dict[str, Any]]:
    data = json.loads(gzip.decompress(path.read_bytes()))
    events = data["traceEvents"] if isinstance(data, dict) else data
    return len(events), data if isinstance(data, dict) else {}


def _pre_window_stats(path: Path) -> tuple[int, float]:
    """GPU events whose correlation has no runtime event, and their share of the GPU events."""
    events = _count_events(path)[1].get("traceEvents", [])
    runtime = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    pre = sum(1 for e in gpu if e["args"]["correlation"] not in runtime)
    return pre, 100.0 * pre / max(1, len(gpu))


def write_readme(out_dir: Path, seed: int, torch_version: str | None) -> None:
    """Describe the files present in ``out_dir`` (sizes and event counts are measured)."""
    readme = out_dir / "README.md"
    cuda_section = ""  # real CUDA runs (tools/make_cuda_samples.py, on a GPU): their section is kept as written
    if readme.exists():
        old = readme.read_text()
        if torch_version is None:
            found = re.search(r"made with torch (\S+):", old)
            torch_version = found.group(1) if found else None
        if (at := old.find(CUDA_HEADING)) >= 0:
            cuda_section = "\n" + old[at:]
    what = {CPU_FILE: "real torch.profiler CPU run, 3-layer MLP",
            GEN_FILE: "real torch.profiler CPU run, a decoder generating with a KV cache",
            GPU_FILE.format(rank=0): "synthetic 2-rank DDP on H100, rank 0",
            GPU_FILE.format(rank=1): "synthetic 2-rank DDP on H100, rank 1 (the straggler)"}  # fmt: skip
    rows = []
    for name, text in what.items():
        path = out_dir / name
        if path.exists():
            rows.append(f"| `{name}` | {path.stat().st_size:,} | {_count_events(path)[0]:,} | {text} |")
    nsys = out_dir / NSYS_FILE
    nsys_kernels = _nsys_rows(nsys, "CUPTI_ACTIVITY_KIND_KERNEL") if nsys.exists() else 0
    if nsys.exists():
        n = sum(_nsys_rows(nsys, t) for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
                                               "NVTX_EVENTS"))  # fmt: skip
        rows.append(f"| `{NSYS_FILE}` | {nsys.stat().st_size:,} (SQLite) | {n:,} | synthetic Nsight Systems export |")
    rank0 = out_dir / GPU_FILE.format(rank=0)
    pre, pct = _pre_window_stats(rank0) if rank0.exists() else (0, 0.0)
    cfg = SynthConfig(seed=seed)
    readme.write_text(README_TEMPLATE.format(
        rows="\n".join(rows), cpu_file=CPU_FILE, gen_file=GEN_FILE, torch_version=torch_version or "(unknown)",
        seed=seed,
        pre=pre, pre_pct=pct, layers=cfg.layers, loader_ms=cfg.loader_ms, slow_loader_ms=cfg.slow_loader_ms,
        slow_step=cfg.slow_loader_step, slow_pct=100 * (cfg.straggler_slowdown - 1), nsys_file=NSYS_FILE,
        slow_gbps=cfg.slow_kernel_gbps,
        nsys_kernels=nsys_kernels) + cuda_section)  # fmt: skip


def _nsys_rows(path: Path, table: str) -> int:
    import sqlite3

    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as con:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def make_generate_trace(out_dir: Path) -> Path:
    """A small decoder generating for batches of requests on the CPU, its passes annotated (``generate_trace.py``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from generate_trace import generation_trace

    info = generation_trace(out_dir / GEN_FILE, annotate=True)
    print(f"wrote {out_dir / GEN_FILE} ({sum(len(t) for t in info['pass_s'])} passes)")
    return out_dir / GEN_FILE


def make_nsys_sample(out_dir: Path) -> Path:
    """The synthetic Nsight Systems export (``tools/gen_nsys.py``, seed 7): 3,000 kernels, 2 processes."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gen_nsys import generate

    path = out_dir / NSYS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    return generate(path, 3000, processes=2, nvtx=True, metrics=True, seed=7)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: sample_traces/)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the synthetic GPU traces")
    parser.add_argument("--skip-cpu", action="store_true", help="do not make the torch.profiler CPU trace")
    parser.add_argument("--skip-gpu", action="store_true", help="do not make the synthetic GPU traces")
    parser.add_argument("--skip-nsys", action="store_true", help="do not make the synthetic Nsight Systems export")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch_version = None if args.skip_cpu else make_cpu_trace(args.out, args.seed)
    if torch_version is not None:
        make_generate_trace(args.out)
    if not args.skip_gpu:
        for path in make_gpu_traces(args.out, args.seed):
            print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    if not args.skip_nsys:
        path = make_nsys_sample(args.out)
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    if torch_version is not None:
        print(f"wrote {args.out / CPU_FILE} ({(args.out / CPU_FILE).stat().st_size:,} bytes, torch {torch_version})")
    write_readme(args.out, args.seed, torch_version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
