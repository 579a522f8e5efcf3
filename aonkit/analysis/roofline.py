"""Roofline points per op or per kernel: work, traffic, time, and how close each gets to the device's roof.

Work and bytes come from :func:`aonkit.analysis.flops.op_costs` (counted ops
only: the outermost op with a cost on each call stack). An op's time is the
summed duration of the GPU events launched beneath it (kernels, and the
memcpy/memset a ``copy_`` or ``zero_`` may issue instead); an op that launched
none keeps its own CPU duration (``timing == "cpu"``: CPU-only traces, ops on
CPU tensors). Per kernel, each op's FLOPs and bytes are split over its GPU
events in proportion to their durations (evenly when all last 0 ns).

Derived columns (formulas in :mod:`aonkit.model.roofline`)::

    intensity_flop_per_byte = flop / bytes
    achieved_flop_per_s     = flop / dur
    attainable_flop_per_s   = min(peak, intensity * bandwidth)
    roofline_ns             = max(flop / peak, bytes / bandwidth)   # the shortest time the roofs allow
    fraction_of_roof        = roofline_ns / dur_ns                  # = achieved / attainable when flop > 0
    bound                   = "memory" below the ridge (intensity < peak / bandwidth), else "compute"

fp32 matrix ops are bounded by the TF32 peak when their kernels' names show
TF32 tensor-core math (``tf32``, CUTLASS ``tensorop_s1688``...; PyTorch
before 1.12 enabled it for matmuls by default), or when ``tf32=True``.

``fraction_of_roof`` can exceed 1: Winograd and FFT convolutions multiply less
than the direct formula counts, inputs still in L2 from the previous op cost
no DRAM traffic, and boost clocks can run above the datasheet's.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .. import schema
from ..model.hardware import DeviceSpec, device_spec
from ..model.roofline import attainable, bound, roof_key
from ..trace import Trace
from .columns import category_flags
from .correlation import gpu_links
from .flops import nearest_marked, op_costs, parents

TF32_KERNELS = re.compile(r"tf32|tensorop_s\d", re.IGNORECASE)
"""Kernel names that show TF32 tensor-core math on fp32 data."""


def trace_spec(trace: Trace) -> DeviceSpec | None:
    """The built-in spec of the GPU the trace's kernels ran on (``deviceProperties``); None when unknown."""
    props = trace.meta.device_properties
    if not props:
        return None
    ev = trace.events
    dev = ev.loc[ev["cat"].isin(schema.KERNEL_CATS), "device"]
    dev = dev[dev >= 0]
    want = int(dev.mode().iloc[0]) if len(dev) else None
    prop = next((p for p in props if want is not None and p.get("id") == want), props[0])
    mem, sms = prop.get("totalGlobalMem"), prop.get("numSms")
    try:
        return device_spec(str(prop.get("name", "")), mem if isinstance(mem, int) else None,
                           sms if isinstance(sms, int) else None)  # fmt: skip
    except KeyError:
        return None


def _owned_kernels(trace: Trace, counted: np.ndarray) -> pd.DataFrame:
    """GPU event rows (kernels, memcpys, memsets), their durations and the counted op (row) each belongs to."""
    links = gpu_links(trace)
    ev = trace.events
    marked = np.zeros(len(ev), dtype=bool)
    marked[np.asarray(counted, dtype=np.int64)] = True
    owner = nearest_marked(links["op_row"].to_numpy(), parents(trace), marked)
    gpu = links["gpu_row"].to_numpy()
    dur = np.maximum(ev["dur_ns"].to_numpy()[gpu], 0)
    tf32 = category_flags(ev["name"], lambda n: bool(TF32_KERNELS.search(str(n))))[gpu]
    return pd.DataFrame({"kernel_row": gpu, "op_row": owner, "dur_ns": dur, "tf32": tf32})


def _per_kernel(trace: Trace, owned: pd.DataFrame, costs: pd.DataFrame) -> pd.DataFrame:
    """One row per GPU event under a counted op, with its duration's share of the op's FLOPs and bytes."""
    cols = ["op_row", "name", "kind", "dtype", "input_dims", "flop", "bytes", "dur_ns", "gpu_events", "tf32"]
    k = owned.drop(columns="tf32").merge(costs[cols], on="op_row", how="left", suffixes=("", "_op"))
    op_ns = k["dur_ns_op"].to_numpy()
    share = np.where(op_ns > 0, k["dur_ns"].to_numpy() / np.maximum(op_ns, 1), 1.0 / k["gpu_events"].to_numpy())
    rows = k["kernel_row"].to_numpy()
    return pd.DataFrame(
        {
            "kernel_row": rows,
            "name": trace.events["name"].astype(object).to_numpy()[rows],
            "op_row": k["op_row"].to_numpy(),
            "op_name": k["name"].to_numpy(),
            **{c: k[c].to_numpy() for c in ("kind", "dtype", "input_dims")},
            "flop": k["flop"].to_numpy() * share,
            "bytes": k["bytes"].to_numpy() * share,
            "dur_ns": k["dur_ns"].to_numpy(),
            "timing": "gpu",
            "gpu_events": 1,
            "tf32": k["tf32"].to_numpy(bool),
        }
    )


def _derive(df: pd.DataFrame, spec: DeviceSpec | None) -> pd.DataFrame:
    tf32 = df.pop("tf32").to_numpy(bool)
    flop, nbytes = df["flop"].to_numpy(np.float64), df["bytes"].to_numpy(np.float64)
    dur = df["dur_ns"].to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        df["intensity_flop_per_byte"] = flop / nbytes
        df["achieved_flop_per_s"] = np.where(dur > 0, flop / dur * 1e9, np.nan)
        df["achieved_bytes_per_s"] = np.where(dur > 0, nbytes / dur * 1e9, np.nan)
        if spec is None:
            df["roof"] = ""
            peak = np.full(len(df), np.nan)
            bw = np.nan
        else:
            keys = [roof_key(k, d, spec, bool(t)) or "" for k, d, t in zip(df["kind"], df["dtype"], tf32)]
            df["roof"] = keys
            peak = np.array([spec.peak(k) if k else np.nan for k in keys], dtype=np.float64)
            bw = spec.memory_bandwidth
        df["peak_flop_per_s"] = peak
        df["attainable_flop_per_s"] = attainable(df["intensity_flop_per_byte"], peak, bw)
        roof_ns = np.maximum(np.where(flop > 0, flop / peak, 0.0), nbytes / bw) * 1e9
        df["roofline_ns"] = roof_ns
        df["fraction_of_roof"] = np.where(dur > 0, roof_ns / dur, np.nan)
    df["bound"] = bound(df["intensity_flop_per_byte"], peak, bw)
    return df


def roofline_table(
    trace: Trace, spec: DeviceSpec | str | None = None, by: str = "op", tf32: bool | None = None,
    default_dtype: str | None = None,
) -> pd.DataFrame:
    """One roofline point per counted op (``by="op"``) or per kernel (``by="kernel"``).

    Parameters
    ----------
    trace : Trace
        Recorded with ``record_shapes=True``.
    spec : DeviceSpec or str, optional
        Device ceilings, or a name for :func:`aonkit.model.device_spec`.
        Default: the trace's GPU from ``deviceProperties`` (:func:`trace_spec`);
        without one the roof columns are NaN and ``bound`` is ``""``.
    by : {"op", "kernel"}
        Rows per op call or per GPU event (kernel, memcpy, memset).
    tf32 : bool, optional
        Bound fp32 matrix ops by the TF32 peak (True) or the FP32 one (False);
        default: TF32 for the ops whose kernels' names show TF32 math.
    default_dtype : str, optional
        Tensor dtype of ops that recorded shapes without types (nsys
        ``emit_nvtx`` ranges); see :func:`aonkit.analysis.flops.op_costs`.

    Returns
    -------
    pandas.DataFrame
        ``op_row`` (row of the op), ``name`` (op name; per kernel: ``kernel_row``,
        ``name`` the kernel's, ``op_name``), ``kind``, ``dtype``,
        ``input_dims``, ``flop``, ``bytes``, ``dur_ns``, ``timing``
        (``"gpu"``/``"cpu"``), ``gpu_events``, then the derived columns of the
        module doc plus ``achieved_bytes_per_s``, ``roof`` (peak key used) and
        ``peak_flop_per_s``. ``attrs["spec"]`` is the spec used;
        ``attrs["gpu_ns"]`` and ``attrs["gpu_ns_modelled"]`` the total GPU
        event time and the part launched under counted ops. Remembered per trace and arguments
        (:mod:`aonkit.analysis.memo`) unless ``spec`` is a :class:`DeviceSpec`: the dashboard, the report and
        :func:`~aonkit.analysis.findings.findings` share one computation.
    """
    if by not in ("op", "kernel"):
        raise ValueError(f"by must be 'op' or 'kernel', not {by!r}")
    if spec is None or isinstance(spec, str):
        from .memo import remembered

        key = ("roofline_table", spec, by, tf32, default_dtype)
        return remembered(trace, key, lambda: _roofline_table(trace, spec, by, tf32, default_dtype))
    return _roofline_table(trace, spec, by, tf32, default_dtype)


def _roofline_table(trace: Trace, spec: DeviceSpec | str | None, by: str, tf32: bool | None,
                    default_dtype: str | None) -> pd.DataFrame:  # fmt: skip
    if isinstance(spec, str):
        spec = device_spec(spec)
    elif spec is None:
        spec = trace_spec(trace)
    costs = op_costs(trace, default_dtype)
    costs = costs.loc[costs["counted"].astype(bool)].drop(columns=["counted", "formula_flop", "profiler_flop"])
    costs = costs.reset_index(drop=True).astype({"op_row": np.int64})
    kern = _owned_kernels(trace, costs["op_row"].to_numpy())
    owned = kern[kern["op_row"] >= 0]
    per_op = owned.groupby("op_row").agg(sum=("dur_ns", "sum"), size=("dur_ns", "size"), tf32=("tf32", "any"))
    gpu_ns = per_op["sum"].reindex(costs["op_row"]).to_numpy()
    n_k = per_op["size"].reindex(costs["op_row"]).fillna(0).to_numpy(np.int64)
    cpu_ns = trace.events["dur_ns"].to_numpy()[costs["op_row"].to_numpy()]
    costs["dur_ns"] = np.where(n_k > 0, np.nan_to_num(gpu_ns), np.maximum(cpu_ns, 0)).astype(np.int64)
    costs["timing"] = np.where(n_k > 0, "gpu", "cpu")
    costs["gpu_events"] = n_k
    auto = per_op["tf32"].reindex(costs["op_row"]).fillna(False).to_numpy(bool)
    costs["tf32"] = auto if tf32 is None else np.full(len(costs), bool(tf32))
    out = _per_kernel(trace, owned, costs) if by == "kernel" else costs
    out = _derive(out.reset_index(drop=True), spec)
    out.attrs.update(spec=spec, gpu_ns=int(kern["dur_ns"].sum()), gpu_ns_modelled=int(owned["dur_ns"].sum()))
    return out
