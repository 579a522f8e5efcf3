"""What if the trace had run on another GPU: per-kernel duration factors from the two devices' rooflines.

A kernel that reached a fraction of its roof on the measured GPU is taken to reach the same fraction on the
target: its time scales by ``roof_time(target) / roof_time(source)``, where ``roof_time = max(flop / peak,
bytes / bandwidth)`` with the peak of the kernel's own roof (fp32, tf32, bf16... as :func:`roofline_table`
chose it). That holds the kernel's efficiency fixed; it moves a memory-bound kernel with the bandwidth, a
compute-bound one with the peak, and one near the ridge by whichever roof it meets on the target.

Kernels the roofline cannot cost (no shapes: backward kernels, fused or custom ones) are scaled by what their
names say, each row stating how (``how``):

* a name that reads as a matrix or attention kernel (gemm, xmma, cutlass, fmha, flash...): the peak ratio of the
  trace's main matrix roof (the roof holding most of the costed GEMM time);
* communication (NCCL, RCCL...): ``comm_scale`` (default 1: the links are not in a device spec; give the ratio of
  the two systems' link bandwidths);
* host copies (``Memcpy HtoD``/``DtoH``, over PCIe or the host link): unchanged;
* the rest (elementwise, reductions, optimizer ``multi_tensor_apply``, copies on the device): the bandwidth ratio.

:func:`hardware_rules` turns the table into what-if rules (kernels grouped by factor), so
``what_if(trace, hardware_rules(hardware_scales(trace, "H200 SXM")))`` re-times the trace, CPU and launch
overheads unchanged. It is a first-order projection: caches, occupancy, clocks and new features (FP8, a
different SM count for small grids) are not modelled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial

import numpy as np
import pandas as pd

from ..errors import MissingInputError
from ..model import DeviceSpec, device_spec
from ..trace import Trace
from .kernels import gpu_table
from .roofline import roofline_table, trace_spec
from .whatif_rules import Rule

MATRIX_NAMES = re.compile(r"gemm|xmma|cutlass|cublas|hgmma|wgmma|fmha|flash|attention|sm\d+_.*tile", re.I)
"""Uncosted kernels whose names read as matrix or attention kernels: scaled by the matrix peak ratio."""
HOST_COPY = re.compile(r"^Memcpy (HtoD|DtoH|PtoP|HtoH)")
COLUMNS = ("name", "kernel_class", "events", "dur_ns", "costed_dur_ns", "scale", "how")


def resolve_spec(spec: DeviceSpec | str | None, trace: Trace | None = None, arg: str = "source") -> DeviceSpec:
    """``spec`` as a :class:`DeviceSpec` (a name looked up), else the trace's GPU; MissingInputError naming ``arg``."""
    if isinstance(spec, DeviceSpec):
        return spec
    if spec is not None:
        return device_spec(spec)
    found = trace_spec(trace) if trace is not None else None
    if found is None:
        raise MissingInputError(f"the trace names no known GPU (deviceProperties); pass {arg}=DeviceSpec(...) or a "
                                "name")
    return found


def _roof_time(flop: np.ndarray, nbytes: np.ndarray, roof: np.ndarray, spec: DeviceSpec) -> np.ndarray:
    """``max(flop / peak[roof], bytes / bandwidth)`` per row; NaN where ``spec`` has no such peak."""
    peak = np.array([spec.peak_flops.get(str(r), np.nan) for r in roof], np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.where(flop > 0, flop / peak, 0.0)
    return np.maximum(compute, nbytes / spec.memory_bandwidth)


def _one(trace: Trace, target: DeviceSpec, source: DeviceSpec | str | None, comm_scale: float) -> pd.DataFrame:
    src = resolve_spec(source, trace)
    gpu = gpu_table(trace)
    roof = roofline_table(trace, spec=src, by="kernel")
    roof = roof[roof["kernel_row"].isin(gpu.index)]
    host = roof["name"].astype(str).str.match(HOST_COPY).to_numpy()
    flop, nbytes = roof["flop"].to_numpy(np.float64), roof["bytes"].to_numpy(np.float64)
    keys = roof["roof"].astype(str).to_numpy()
    old, new = _roof_time(flop, nbytes, keys, src), _roof_time(flop, nbytes, keys, target)
    lacks = ~host & (old > 0) & ~np.isfinite(new)  # a roof (peak key) the target has no figure for
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(host | ~(old > 0) | lacks, 1.0, new / old)
    dur = roof["dur_ns"].to_numpy(np.float64)
    costed = pd.DataFrame({"name": roof["name"].astype(str).to_numpy(), "w": dur * ratio, "d": dur,
                           "lacks": lacks.astype(np.int64)})  # fmt: skip
    costed = costed.groupby("name", sort=False)[["w", "d", "lacks"]].sum()
    # the main matrix roof: the one holding most of the costed GEMM time, for uncosted matrix kernels
    gemm = roof["kind"].astype(str).to_numpy() == "gemm"
    main = (pd.Series(dur[gemm]).groupby(keys[gemm]).sum().idxmax() if gemm.any() else
            "bf16" if "bf16" in src.peak_flops else next(iter(src.peak_flops)))  # fmt: skip
    matrix = src.peak_flops.get(main, np.nan) / target.peak_flops.get(main, np.nan)
    bandwidth = src.memory_bandwidth / target.memory_bandwidth
    by_name = gpu.groupby("name", observed=True, sort=False).agg(events=("dur_ns", "size"), dur_ns=("dur_ns", "sum"),
                                                                  kernel_class=("class", "first"))  # fmt: skip
    rows = []
    for name, r in by_name.iterrows():
        name = str(name)
        if HOST_COPY.match(name):
            scale, how = 1.0, "host copy (PCIe or host link): unchanged"
        elif name in costed.index and costed.at[name, "d"] > 0:
            c = costed.loc[name]
            scale, how = c["w"] / c["d"], "roofline of its op's FLOPs and bytes"
            if c["d"] < r["dur_ns"]:
                how += f" ({c['d'] / r['dur_ns']:.0%} of its time costed)"
            if c["lacks"]:
                how += f"; {int(c['lacks'])} events on a roof {target.name} has no peak for: unchanged"
        elif r["kernel_class"] == "communication":
            scale, how = comm_scale, "communication: comm_scale"
        elif MATRIX_NAMES.search(name) and np.isfinite(matrix):
            scale, how = matrix, f"not costed; reads as a matrix kernel: {main} peak ratio"
        else:
            scale, how = bandwidth, "not costed; memory-bound assumed: bandwidth ratio"
        rows.append((name, r["kernel_class"], int(r["events"]), int(r["dur_ns"]),
                     int(costed.at[name, "d"]) if name in costed.index else 0, float(scale), how))  # fmt: skip
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    out.attrs.update(source=src.name, target=target.name, matrix_roof=main)
    return out


def hardware_scales(trace: Trace | Mapping[int, Trace], target: DeviceSpec | str,
                    source: DeviceSpec | str | None = None, *, comm_scale: float = 1.0) -> pd.DataFrame:  # fmt: skip
    """Per GPU event name, the factor on its duration were the trace run on ``target`` (see the module doc).

    Parameters
    ----------
    trace : Trace or mapping of int to Trace
        A trace recorded with shapes (``record_shapes=True``: more of its kernels costed), or a job's ranks
        (their names pooled, each rank costed on its own GPU; a lazy job's ranks in its workers).
    target : DeviceSpec or str
        The GPU to project onto (``aonkit.model.device_spec`` names: ``"H200 SXM"``, ``"B200"``, ``"MI300X"``...).
    source : DeviceSpec or str, optional
        The measured GPU (default: the trace's ``deviceProperties``).
    comm_scale : float
        Factor on communication kernels (default 1: unchanged).

    Returns
    -------
    pandas.DataFrame
        ``name``, ``kernel_class``, ``events``, ``dur_ns`` (their measured total), ``costed_dur_ns`` (the part
        the roofline costed), ``scale`` (time-weighted over the name's events), ``how``; ``attrs`` name the
        source, the target and the matrix roof used for uncosted matrix kernels.

    Raises
    ------
    MissingInputError
        When the source GPU is unknown and not given (a ``ValueError``).
    """
    tgt = resolve_spec(target)
    if isinstance(trace, Trace):
        return _one(trace, tgt, source, comm_scale)
    if hasattr(trace, "map"):  # a lazy job: each rank costed in its worker, only the tables come back
        parts = list(trace.map(partial(_one, target=tgt, source=source, comm_scale=comm_scale)).values())
    else:
        parts = [_one(t, tgt, source, comm_scale) for t in trace.values()]
    return pool_scales(parts, list(COLUMNS), sums=("events", "dur_ns", "costed_dur_ns"))


def pool_scales(parts: list[pd.DataFrame], columns: list[str], sums: tuple[str, ...]) -> pd.DataFrame:
    """Per-rank tables of per-name factors as one: ``sums`` added, ``scale`` time-weighted, the rest the first's."""
    both = pd.concat(parts, ignore_index=True)
    both["w"] = both["scale"] * both["dur_ns"]
    firsts = [c for c in columns if c not in (*sums, "name", "scale")]
    grouped = both.groupby("name", sort=False)
    out = grouped[[*sums, "w"]].sum().join(grouped[firsts].first())
    out["scale"] = np.where(out["dur_ns"] > 0, out["w"] / out["dur_ns"].where(out["dur_ns"] > 0, 1), 1.0)
    out = out.reset_index()[columns]
    out.attrs.update(parts[0].attrs if parts else {})
    return out


def hardware_rules(scales: pd.DataFrame, decimals: int = 3) -> list[Rule]:
    """What-if rules from :func:`hardware_scales`: one per factor (rounded to ``decimals``) over its names."""
    rounded = scales["scale"].round(decimals)
    rules = []
    for value, g in scales.groupby(rounded, sort=True):
        if float(value) != 1.0:
            rules.append(Rule(float(value), kind="gpu", names=tuple(sorted(g["name"].astype(str)))))
    return rules
