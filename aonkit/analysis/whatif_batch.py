"""What if the batch grew (or shrank): per-kernel duration factors from the work each kernel does per sample.

``batch_scales(trace, 2.0)`` asks what the trace's GPU work would take with twice the samples per step. Each
kernel keeps a fixed part (its launch-to-finish floor, ``overhead_ns``: by default the shortest compute kernel of
the trace, at most 5 us) and scales the rest by how its work grows:

* a kernel of a costed op (recorded shapes; :func:`~aonkit.analysis.flops.op_costs`): the op's FLOPs grow ``k``
  times, its bytes ``fixed + k * (bytes - fixed)`` where ``fixed`` is what does not carry the batch: the
  weights, biases and norm parameters at their known argument positions (``linear``, ``addmm``, convolutions,
  norms), a matrix product's operands and result shaped like one of those parameters (the backward's weight
  gradient); the rest scales by the ratio of the op's roofline time, ``max(flop / peak, bytes / bandwidth)``, on
  the trace's GPU (efficiency held: a GEMM that streams its weights at batch 1 barely slows down at batch 8,
  a compute-bound one doubles). The GPU is the trace's (``deviceProperties``) or ``spec``;
* parameter-sized work does not change: kernels under ``Optimizer.step``/``Optimizer.zero_grad`` or
  ``AccumulateGrad``, and ``multi_tensor_apply``/``_foreach_``/fused optimizer kernels (gradient clipping);
* communication: ``comm_scale`` (default 1: data-parallel gradient collectives are parameter-sized; give ``k``
  for tensor- or expert-parallel traffic, which carries activations);
* every other kernel (no formula: embeddings, losses, fused or custom kernels; copies and memsets): ``k``.

Per name, the factor is the time-weighted mean over its events (``batch_rules`` makes one what-if rule per
factor, as :func:`~aonkit.analysis.whatif_hardware.hardware_rules` does). CPU time, launches and host gaps stay
as measured: a host-bound step gains throughput almost linearly with the batch until the GPU becomes the
bottleneck, which is what :func:`batch_sweep` shows, beside each GPU's projected peak memory
(:func:`~aonkit.analysis.whatif_batch_memory.batch_memory`: whether the batch fits). Not modelled: kernels that
pick another algorithm at another size (tile shapes, split-K), data loading that grows with the batch (add
``Rule(k, kind="gap")`` yourself).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from functools import partial

import numpy as np
import pandas as pd

from ..model import DeviceSpec
from ..model.matmul import GEMMS
from ..model.ops import base_name
from ..model.pointwise import NORMS
from ..model.shapes import OpInputs
from ..trace import Trace
from .columns import category_flags
from .correlation import gpu_links
from .flops import nearest_marked, parents
from .kernels import gpu_table
from .roofline import roofline_table
from .whatif_hardware import hardware_rules, pool_scales, resolve_spec

PARAM_SCOPES = re.compile(r"^Optimizer\.(step|zero_grad)#|AccumulateGrad")
"""Events whose GPU work is parameter-sized (the optimizer, gradient accumulation): unchanged with the batch."""
PARAM_KERNELS = re.compile(r"multi_tensor_apply|_foreach_|fused_adam|fused_sgd|lpnorm_cleanup", re.I)
"""Kernel names of parameter-sized work (foreach and fused optimizer kernels, gradient clipping's norms)."""
WEIGHT_ARGS: dict[str, tuple[int, ...]] = {
    "linear": (1, 2), "addmm": (0, 2),
    **dict.fromkeys(("conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d",
                     "conv_transpose2d", "conv_transpose3d", "cudnn_convolution", "cudnn_convolution_transpose",
                     "mkldnn_convolution", "miopen_convolution"), (1, 2)),
    "convolution_backward": (2,), "cudnn_convolution_backward": (2,),
    **{name: (*affine, *other) for name, (_, affine, other) in NORMS.items()},
}  # fmt: skip
"""Op base name -> argument positions holding parameters (weights, biases, norm parameters and statistics)."""
MAX_OVERHEAD_NS = 5_000
COLUMNS = ("name", "kernel_class", "events", "dur_ns", "new_dur_ns", "scale", "how")


def _param_shapes(names: Sequence[str], inputs: Sequence[OpInputs]) -> set[tuple[int, ...]]:
    """Shapes of the tensors at parameter positions (and the transposes of 2-D ones)."""
    shapes: set[tuple[int, ...]] = set()
    for name, x in zip(names, inputs):
        for i in WEIGHT_ARGS.get(base_name(name), ()):
            s = x.shape(i)
            if s:
                shapes.update((s, s[::-1]) if len(s) == 2 else (s,))
    return shapes


def _fixed_bytes(name: str, x: OpInputs, params: set[tuple[int, ...]]) -> float:
    """Bytes of ``x`` that do not carry the batch: parameters by position, and parameter-shaped matrix operands."""
    base = base_name(name)
    fixed = set(WEIGHT_ARGS.get(base, ()))
    total = 0.0
    if base in GEMMS:
        _, ia, ib, transposed = GEMMS[base]
        a, b = x.shape(ia), x.shape(ib)
        fixed.update(i for i in (ia, ib) if x.shape(i) in params)
        if a and b and len(a) == 2 and len(b) == 2:
            out = (a[0], b[0] if transposed else b[1])
            if out in params:  # a weight gradient: the product over the batch lands in a weight-sized result
                total += math.prod(out) * x.itemsize(ia)
    return total + sum(x.nbytes(i) for i in fixed if x.is_tensor(i))


def _op_work(trace: Trace, table: pd.DataFrame, spec: DeviceSpec) -> tuple[np.ndarray, ...]:
    """Per row of a ``roofline_table(by="kernel")``: FLOPs, bytes, the bytes not carrying the batch, roof peak.

    The peak is that of the row's roof on ``spec`` (NaN where the spec has none).
    """
    op_rows = table["op_row"].to_numpy(np.int64)
    uniq = np.unique(op_rows)
    names = trace.events["name"].astype(object).to_numpy()[uniq]
    args = [trace.arg_values(a, uniq) for a in ("Input Dims", "Input type", "Concrete Inputs", "Input Strides")]
    inputs = [OpInputs(d if isinstance(d, list) else [], t if isinstance(t, list) else [], c or (), s or ())
              for d, t, c, s in zip(*args)]  # fmt: skip
    params = _param_shapes(names, inputs)
    fixed_of = dict(zip(uniq.tolist(), (_fixed_bytes(str(n), x, params) for n, x in zip(names, inputs))))
    flop = table["flop"].to_numpy(np.float64)
    nbytes = table["bytes"].to_numpy(np.float64)
    op_bytes = table.groupby("op_row")["bytes"].transform("sum").to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(op_bytes > 0, nbytes / op_bytes, 0.0)  # the kernel's part of its op's bytes
    fixed = np.minimum(np.array([fixed_of[r] for r in op_rows], np.float64) * share, nbytes)
    peak = np.array([spec.peak_flops.get(str(r), np.nan) for r in table["roof"]], np.float64)
    return flop, nbytes, fixed, peak


def in_param_scope(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Whether each event of ``rows`` (-1: none) is, or runs inside, a :data:`PARAM_SCOPES` event."""
    marked = category_flags(trace.events["name"], lambda n: bool(PARAM_SCOPES.search(str(n))))
    return nearest_marked(np.asarray(rows, np.int64), parents(trace), marked) >= 0


def _work(trace: Trace, spec: DeviceSpec | str | None) -> pd.DataFrame:
    """Per GPU event, what :func:`batch_scales` needs whatever the factor (``attrs["spec"]``: the GPU used)."""
    gpu = gpu_table(trace)
    rows = gpu.index.to_numpy(np.int64)
    names = gpu["name"].astype(str).to_numpy()
    n = len(rows)
    cols = {c: np.full(n, np.nan) for c in ("flop", "bytes", "fixed_bytes", "peak")}
    costed = np.zeros(n, bool)
    roof = roofline_table(trace, spec, by="kernel")  # no spec: the trace's GPU, if it names a known one
    roof = roof[roof["kernel_row"].isin(rows) & np.isfinite(roof["bytes"].to_numpy(np.float64))]
    if len(roof):  # the roofline needs the GPU; a trace with no costed kernel does not
        spec = resolve_spec(spec, trace, arg="spec")
        where = np.searchsorted(rows, roof["kernel_row"].to_numpy(np.int64))
        for c, v in zip(cols, _op_work(trace, roof.reset_index(drop=True), spec)):
            cols[c][where] = v
        costed[where] = True
    ops = gpu_links(trace).set_index("gpu_row")["op_row"].reindex(rows).fillna(-1).to_numpy(np.int64)
    param = in_param_scope(trace, ops) | np.array([bool(PARAM_KERNELS.search(x)) for x in names], dtype=bool)
    work = pd.DataFrame({"name": names, "kernel_class": gpu["class"].astype(str).to_numpy(),
                         "dur_ns": gpu["dur_ns"].to_numpy(np.float64), **cols, "costed": costed, "param": param})
    work.attrs["spec"] = spec
    return work


def _one(trace: Trace, k: float, comm_scale: float, overhead_ns: float | None,
         spec: DeviceSpec | str | None) -> pd.DataFrame:  # fmt: skip
    if spec is None or isinstance(spec, str):  # the factor-free part once per trace (a sweep, the panel's slider)
        from .memo import remembered_object

        work = remembered_object(trace, ("batch_work", spec), lambda: _work(trace, spec))
    else:
        work = _work(trace, spec)
    spec = work.attrs["spec"]
    dur = work["dur_ns"].to_numpy(np.float64)
    klass = work["kernel_class"].to_numpy()
    if overhead_ns is None:
        compute = dur[(klass == "computation") & (dur > 0)]
        overhead_ns = float(min(compute.min(), MAX_OVERHEAD_NS)) if len(compute) else 0.0
    ratio, how = np.full(len(work), float(k)), np.full(len(work), "no cost formula: carries the batch", object)
    costed = work["costed"].to_numpy(bool)
    if costed.any():
        flop, nbytes, fixed, peak = (work[c].to_numpy(np.float64)[costed] for c in ("flop", "bytes", "fixed_bytes",
                                                                                    "peak"))  # fmt: skip
        new_flop, new_bytes = k * flop, fixed + k * (nbytes - fixed)
        with np.errstate(divide="ignore", invalid="ignore"):
            old_t = np.maximum(np.where(flop > 0, flop / peak, 0.0), nbytes / spec.memory_bandwidth)
            new_t = np.maximum(np.where(flop > 0, new_flop / peak, 0.0), new_bytes / spec.memory_bandwidth)
            by_op = new_t / old_t
        # a roof the spec has no peak for, or no work recorded: the byte ratio, else the batch's
        by_bytes = np.where(nbytes > 0, new_bytes / np.where(nbytes > 0, nbytes, 1), k)
        ratio[costed] = np.where(np.isfinite(by_op) & (by_op > 0), by_op, by_bytes)
        how[costed] = "its op's roofline time"
    param = work["param"].to_numpy(bool)
    ratio[param], how[param] = 1.0, "parameter-sized (optimizer, gradients): unchanged"
    comm = klass == "communication"
    ratio[comm], how[comm] = comm_scale, "communication: comm_scale"
    fixed = np.minimum(dur, overhead_ns)
    new = np.where(param | comm, dur * ratio, fixed + (dur - fixed) * ratio)
    frame = pd.DataFrame({"name": work["name"].to_numpy(), "kernel_class": klass, "dur_ns": dur, "new": new,
                          "how": how})  # fmt: skip
    out = frame.groupby("name", sort=False).agg(
        kernel_class=("kernel_class", "first"), events=("dur_ns", "size"), dur_ns=("dur_ns", "sum"),
        new_dur_ns=("new", "sum"))  # fmt: skip
    # per name, the rule that took most of its time (ties: the first in text order, whatever the sort)
    by_how = frame.groupby(["name", "how"], sort=True)["dur_ns"].sum().reset_index()
    by_how = by_how.sort_values(["name", "dur_ns"], ascending=[True, False], kind="stable")
    out = out.join(by_how.drop_duplicates("name").set_index("name")["how"]).reset_index()
    out["scale"] = np.where(out["dur_ns"] > 0, out["new_dur_ns"] / out["dur_ns"].where(out["dur_ns"] > 0, 1), k)
    out = out.astype({"dur_ns": np.int64, "new_dur_ns": np.int64})[list(COLUMNS)]
    out.attrs.update(factor=float(k), overhead_ns=float(overhead_ns),
                     spec=spec.name if isinstance(spec, DeviceSpec) else spec)  # fmt: skip
    return out


def batch_scales(trace: Trace | Mapping[int, Trace], factor: float, *, comm_scale: float = 1.0,
                 overhead_ns: float | None = None, spec: DeviceSpec | str | None = None) -> pd.DataFrame:  # fmt: skip
    """Per GPU event name, the factor on its duration were the batch ``factor`` times as large (module doc).

    Parameters
    ----------
    trace : Trace or mapping of int to Trace
        A trace recorded with shapes (``record_shapes=True``: more kernels costed), or a job's ranks (names pooled;
        a lazy job's ranks costed in its workers).
    factor : float
        New batch over measured batch (2: twice the samples per step; 0.5: half).
    comm_scale : float
        Factor on communication kernels (default 1: gradient collectives).
    overhead_ns : float, optional
        Fixed part of each kernel (default: the trace's shortest compute kernel, at most 5 us).
    spec : DeviceSpec or str, optional
        The measured GPU's ceilings (default: the trace's ``deviceProperties``); needed only when some kernel
        is costed from its op's shapes.

    Returns
    -------
    pandas.DataFrame
        ``name``, ``kernel_class``, ``events``, ``dur_ns`` (measured total), ``new_dur_ns``, ``scale``, ``how``
        (the rule that took most of its time); ``attrs``: ``factor``, ``overhead_ns``, ``spec``.

    Raises
    ------
    ValueError
        When ``factor`` is not a finite number above 0, or ``comm_scale`` or ``overhead_ns`` is negative or not
        finite.
    MissingInputError
        When kernels are costed from shapes but the trace names no known GPU and ``spec`` is not given (a
        ``ValueError``).
    """
    if not (factor > 0 and math.isfinite(factor)):
        raise ValueError(f"factor must be a finite number > 0, not {factor!r}")
    if not (comm_scale >= 0 and math.isfinite(comm_scale)):
        raise ValueError(f"comm_scale must be a finite number >= 0, not {comm_scale!r}")
    if overhead_ns is not None and not (overhead_ns >= 0 and math.isfinite(overhead_ns)):
        raise ValueError(f"overhead_ns must be a finite number >= 0, not {overhead_ns!r}")
    one = partial(_one, k=float(factor), comm_scale=float(comm_scale), overhead_ns=overhead_ns, spec=spec)
    if isinstance(trace, Trace):
        return one(trace)
    parts = list(trace.map(one).values()) if hasattr(trace, "map") else [one(t) for t in trace.values()]
    return pool_scales(parts, list(COLUMNS), sums=("events", "dur_ns", "new_dur_ns"))


batch_rules = hardware_rules
"""What-if rules from :func:`batch_scales`: one per factor (rounded) over its names."""


def batch_sweep(trace: Trace | Mapping[int, Trace], factors: Sequence[float] = (0.5, 1, 2, 4, 8), *,
                step: int | None = None, scope: str = "start", comm_scale: float = 1.0,
                overhead_ns: float | None = None, spec: DeviceSpec | str | None = None,
                rules: Sequence = ()) -> pd.DataFrame:  # fmt: skip
    """Step time and throughput at several batch sizes: where a bigger batch stops paying.

    Parameters
    ----------
    trace : Trace or mapping of int to Trace
        As for :func:`batch_scales`.
    factors : sequence of float
        Batch sizes as multiples of the measured one.
    step, scope
        What to time, as for :func:`~aonkit.analysis.critical_path.what_if`.
    comm_scale, overhead_ns, spec
        As for :func:`batch_scales` (``comm_scale`` is applied as given at every factor).
    rules : sequence of Rule
        Further rules applied at every factor (e.g. ``Rule(k, kind="gap")`` for data loading that grows).

    Returns
    -------
    pandas.DataFrame
        One row per factor: ``factor``, ``step_ns`` (what-if step time), ``step_ratio`` (over the identity
        model's), ``throughput_ratio`` (samples per second over the measured batch's: ``factor / step_ratio``)
        ``gpu_share`` (the GPU's part of the critical path: near 1, the GPU is the bottleneck), ``peak_bytes``
        (the fullest GPU's peak allocated memory projected by :func:`~aonkit.analysis.whatif_batch_memory.batch_memory`;
        -1 without ``profile_memory`` events) and ``capacity_bytes`` (that GPU's memory; -1 when unknown).
    """
    from .critical_path import what_if
    from .whatif_batch_memory import batch_memory, fullest

    mem = batch_memory(trace, 1.0)  # the fixed and the growing part of each GPU's peak, read once
    rows = []
    for f in factors:
        scaled = batch_rules(batch_scales(trace, float(f), comm_scale=comm_scale, overhead_ns=overhead_ns,
                                          spec=spec))  # fmt: skip
        r = what_if(trace, [*scaled, *rules], step=step, scope=scope)
        path = r.critical_path
        total = int(path["dur_ns"].sum())
        gpu = int(path.loc[path["kind"] == "gpu", "dur_ns"].sum())
        ratio = r.step_time_ns / r.model_ns if r.model_ns else float("nan")
        peak, capacity = fullest(mem, float(f))
        rows.append((float(f), int(r.step_time_ns), ratio, float(f) / ratio, gpu / total if total else float("nan"),
                     peak, capacity))  # fmt: skip
    return pd.DataFrame(rows, columns=["factor", "step_ns", "step_ratio", "throughput_ratio", "gpu_share", "peak_bytes",
                                       "capacity_bytes"])  # fmt: skip
