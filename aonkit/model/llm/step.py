"""Training step time, MFU and tokens/s of a parallel layout on a device and network.

Per micro-batch, a pipeline rank runs its ``ceil(l/p)`` layers forward and backward
(backward: twice the forward's FLOPs and bytes), plus the recomputed forward
(all layers' classes with ``"full"``, the attention with ``"selective"``);
each op class goes through :func:`~aonkit.model.llm.costs.roofline_time`.
The last rank adds the logits. Communication per micro-batch and layer
(:mod:`~aonkit.model.llm.network` for the time of each)::

    TP   4 all-reduces of b*s/c*h*2 bytes (2 forward, 2 backward; +2 with full recompute);
         with sequence parallelism each is an all-gather plus a reduce-scatter (the same volume)
    CP   all-gathers of the layer's keys and values: 1 forward, 2 backward (with dK/dV's reduce-scatter)
    EP   4 all-to-alls per MoE layer (dispatch and combine, forward and backward) of b*s/c*k*h*2 bytes
    PP   2*v sends of b*s/c*h*2/t bytes per micro-batch (Megatron's scatter/gather over tensor ranks)

and once per iteration the data-parallel gradient reduction: an all-reduce
(ZeRO 0), a reduce-scatter plus an all-gather of the weights (ZeRO 1-2), or
with ZeRO 3 two weight all-gathers and a gradient reduce-scatter per
micro-batch; then the optimizer step, memory-bound at ``24 + 2 + 2`` bytes
per local parameter (Adam states read and written, gradient read, 16-bit
weights written). The ``*_overlap`` factors hide that fraction of each.

With ``m`` micro-batches, pipeline ``p`` and ``v`` virtual stages, and
``t_mb`` the per-micro-batch time of a rank (the last one, with the logits,
paces the pipeline)::

    step = m * t_mb(last) + (p - 1)/v * mean(t_mb) + dp_exposed + optimizer

The second term is the 1F1B bubble, ``(p - 1)/(v * m)`` of the ideal time
(Narayanan et al. 2021). MFU divides the model FLOPs (no recomputation,
:func:`~aonkit.model.llm.flops.training_flops`) by ``step * gpus * peak``;
HFU counts the recomputed FLOPs too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..hardware import DeviceSpec
from .config import TransformerConfig
from .costs import CLASSES, device_peak, layer_forward, logits_forward, roofline_time
from .flops import training_flops
from .footprint import params_per_gpu
from .network import DGX_H100, Network, collective_time
from .parallel import Parallelism

EFFICIENCY: dict[str, float] = {
    "matmul": 0.8,
    "attention": 0.6,
    "memory": 0.8,
    "intra_link": 0.8,
    "inter_link": 0.8,
    "tp_overlap": 0.0,
    "cp_overlap": 0.0,
    "ep_overlap": 0.0,
    "pp_overlap": 0.0,
    "dp_overlap": 0.0,
}
"""Default efficiency factors, a priori (not fitted): ``matmul`` and ``attention`` are the fractions of the
matrix peak those classes reach (large cuBLAS GEMMs reach about 80%, attention kernels less); ``memory`` the
fraction of memory bandwidth of memory-bound work; ``*_link`` the fraction of nominal link bandwidth a
collective attains (nccl-tests bus bandwidth over nominal); ``*_overlap`` the fraction of that
communication hidden behind compute (0: none, as Megatron-LM in 2021). Pass ``efficiency={...}`` to
override any of them; calibration sets them from measurements."""


@dataclass(frozen=True)
class TrainingStepTime:
    """One training iteration; times in seconds, ``compute``/``communication`` on the critical rank.

    ``step_s == sum(compute.values()) + sum(communication.values()) + bubble_s + optimizer_s``.
    Returned by :func:`training_step`; the fields are its constructor parameters and attributes.

    Parameters
    ----------
    step_s : float
        Seconds per iteration.
    compute : dict of str to float
        Seconds of each op class (``matmul``, ``attention``, ``elementwise``, ``logits``) over all
        micro-batches on the last pipeline rank (``ceil(layers / pp)`` layers and the logits), forward,
        backward and recomputation included.
    communication : dict of str to float
        Exposed seconds (after the ``*_overlap`` factors) of ``tp``, ``cp``, ``ep`` and ``pp``
        communication over all micro-batches, and ``dp``: the data-parallel gradient reduction of the
        iteration (with ZeRO 3, its per-micro-batch gathers and reduce-scatters).
    bubble_s : float
        Seconds of pipeline bubble, ``(pp - 1) / vpp`` times the mean per-micro-batch time of a rank
        (the logits averaged over the ``pp`` ranks); 0 without pipeline parallelism.
    optimizer_s : float
        Seconds of the memory-bound optimizer step.
    micro_batches : int
        Micro-batches per pipeline per iteration, ``global_batch / (micro_batch * dp)``.
    model_flops : float
        FLOPs of the iteration over all GPUs without recomputation
        (:func:`~aonkit.model.llm.flops.training_flops` with ``"none"``).
    hardware_flops : float
        FLOPs of the iteration over all GPUs with the layout's recomputation.
    mfu : float
        Model FLOPs utilisation, ``model_flops / (step_s * gpus * peak)``, a fraction.
    hfu : float
        Hardware FLOPs utilisation, ``hardware_flops / (step_s * gpus * peak)``.
    tokens_per_s : float
        Training tokens per second, ``global_batch * seq / step_s``.
    flops_per_gpu_s : float
        Model FLOP/s per GPU, ``model_flops / (step_s * gpus)``.
    gpus : int
        GPUs in the layout, ``tp * cp * dp * pp``.
    efficiency : mapping of str to float, default {}
        The efficiency factors used: :data:`EFFICIENCY` with the caller's overrides.
    """

    step_s: float
    compute: dict[str, float]
    communication: dict[str, float]
    bubble_s: float
    optimizer_s: float
    micro_batches: int
    model_flops: float
    hardware_flops: float
    mfu: float
    hfu: float
    tokens_per_s: float
    flops_per_gpu_s: float
    gpus: int
    efficiency: Mapping[str, float] = field(repr=False, default_factory=dict)


def training_step(config: TransformerConfig, device: DeviceSpec, parallel: Parallelism, global_batch: int, *,
                  network: Network = DGX_H100, efficiency: Mapping[str, float] | None = None,
                  dtype: str = "bf16", weight_bytes: float = 2, grad_bytes: float = 2, causal: bool = False,
                  allreduce: str = "ring", flash: bool = True) -> TrainingStepTime:  # fmt: skip
    """Predicted time of one training iteration (see the module doc).

    Parameters
    ----------
    config : TransformerConfig
    device : DeviceSpec
        Its ``dtype`` peak and memory bandwidth bound every op class.
    parallel : Parallelism
    global_batch : int
        Sequences per iteration.
    network : Network
        Link figures (default :data:`~aonkit.model.llm.network.DGX_H100`).
    efficiency : mapping, optional
        Overrides of :data:`EFFICIENCY`.
    dtype : str
        Peak key of the GEMMs (``"bf16"``, ``"fp16"``, ``"fp8"``).
    weight_bytes, grad_bytes : float
        Bytes per weight and per gradient element communicated.
    causal : bool
        Count causal attention pairs only in the time (FLOP counts for MFU follow the same choice).
    allreduce : {"ring", "tree"}
        Algorithm of the data-parallel all-reduce.
    flash : bool
        Fused (flash) attention; ``False`` charges the score matrix's memory traffic
        (:data:`~aonkit.model.llm.costs.SCORE_BYTES`), as in Megatron-LM before 2022.

    Returns
    -------
    TrainingStepTime
    """
    parallel.check(config, global_batch)
    eff = {**EFFICIENCY, **(efficiency or {})}
    unknown = set(eff) - set(EFFICIENCY)
    if unknown:
        raise ValueError(f"unknown efficiency keys {sorted(unknown)}; known: {sorted(EFFICIENCY)}")
    par, m = parallel, parallel.micro_batches(global_batch)
    peak, bw = device_peak(device, dtype), device.memory_bandwidth
    ceff = {"matmul": eff["matmul"], "attention": eff["attention"], "elementwise": 1.0, "logits": eff["matmul"]}
    s_local, b = config.seq / par.cp, par.micro_batch
    tokens = b * s_local
    passes = {"none": 3.0, "selective": 3.0, "full": 4.0}[par.recompute]

    def link_time(kind: str, nbytes: float, size: int, stride: int, algorithm: str = "ring") -> float:
        link, where = network.link(size, stride)
        return collective_time(kind, nbytes, size, link, algorithm, eff[f"{where}_link"])

    compute = dict.fromkeys(CLASSES, 0.0)
    comm = dict.fromkeys(("tp", "cp", "ep", "pp", "dp"), 0.0)
    act = 2.0 * tokens * config.hidden
    for moe, count in ((False, config.dense_layers), (True, config.moe_layers)):
        if not count:
            continue
        n = count * par.stage_layers(config) / config.layers
        costs = layer_forward(config, moe, b, s_local, config.seq, tp=par.tp, ep=par.ep, expert_tp=par.expert_tp,
                              sp=par.sp, causal=causal, weight_bytes=weight_bytes, flash=flash)  # fmt: skip
        for cls, (fl, by) in costs.items():
            k = passes + (1.0 if cls == "attention" and par.recompute == "selective" else 0.0)
            compute[cls] += n * float(roofline_time(fl * k, by * k, peak, bw, ceff[cls], eff["memory"]))
        coll = 6.0 if par.recompute == "full" else 4.0  # 2 forward, 2 backward, 2 in the recomputed forward
        if par.tp > 1:
            ar = link_time("all_gather", act, par.tp, 1) + link_time("reduce_scatter", act, par.tp, 1) \
                if par.sp else link_time("all_reduce", act, par.tp, 1)
            comm["tp"] += n * coll * ar * (1 - eff["tp_overlap"])
        if par.cp > 1:
            kv = 2.0 * b * config.seq * config.kv_heads * (config.qk_dim + config.v_dim) / min(par.tp, config.kv_heads)
            t = link_time("all_gather", kv, par.cp, par.tp)
            comm["cp"] += n * t * (3 + (1 if par.recompute == "full" else 0)) * (1 - eff["cp_overlap"])
        if moe and par.ep > 1:
            t = link_time("all_to_all", act * config.top_k, par.ep, par.expert_tp)
            comm["ep"] += n * coll * t * (1 - eff["ep_overlap"])
    if par.pp > 1:
        send = link_time("send", act / par.tp, 2, par.tp * par.cp * par.dp)
        comm["pp"] = 2 * par.vpp * send * (1 - eff["pp_overlap"])
    lf, lb = logits_forward(config, tokens, par.tp, weight_bytes)
    logits = float(roofline_time(3 * lf, 3 * lb, peak, bw, eff["matmul"], eff["memory"]))
    body = sum(compute.values()) + sum(comm.values())
    compute["logits"] = logits
    compute = {k: m * v for k, v in compute.items()}
    comm = {k: m * v for k, v in comm.items()}
    bubble = (par.pp - 1) / par.vpp * (body + logits / par.pp)

    dense, expert = params_per_gpu(config, par)
    dp_t = 0.0
    for p, size, stride in ((dense, par.dp * par.cp, par.tp), (expert, par.expert_dp, par.ep * par.expert_tp)):
        if not p or size == 1:
            continue
        g, w = p * grad_bytes, p * weight_bytes
        if par.zero == 0:
            dp_t += link_time("all_reduce", g, size, stride, allreduce)
        elif par.zero in (1, 2):
            dp_t += link_time("reduce_scatter", g, size, stride) + link_time("all_gather", w, size, stride)
        else:
            dp_t += m * (2 * link_time("all_gather", w, size, stride) + link_time("reduce_scatter", g, size, stride))
    comm["dp"] = dp_t * (1 - eff["dp_overlap"])
    shard_d = par.dp * par.cp if par.zero >= 1 else 1
    shard_e = par.expert_dp if par.zero >= 1 else 1
    optimizer = (dense / shard_d + expert / shard_e) * (24 + grad_bytes + weight_bytes) / (bw * eff["memory"])

    step = sum(compute.values()) + sum(comm.values()) + bubble + optimizer
    model = training_flops(config, global_batch, "none", causal)
    hardware = training_flops(config, global_batch, par.recompute, causal)
    gpus = par.gpus
    return TrainingStepTime(
        step_s=step, compute=compute, communication=comm, bubble_s=bubble, optimizer_s=optimizer,
        micro_batches=m, model_flops=model, hardware_flops=hardware, mfu=model / (step * gpus * peak),
        hfu=hardware / (step * gpus * peak), tokens_per_s=global_batch * config.seq / step,
        flops_per_gpu_s=model / (step * gpus), gpus=gpus, efficiency=eff,
    )  # fmt: skip
