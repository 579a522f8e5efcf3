"""The rows a calibration fits: every costed op or kernel and every sized collective, with its class.

See :mod:`aonkit.model.calibration` for the classes, the ideal and fixed times and the methods.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..errors import MissingInputError
from .hardware import DeviceSpec
from .llm.network import DGX_A100, DGX_H100, Network, collective_time

if TYPE_CHECKING:
    from ..trace import Trace


KIND_CLASS = {"gemm": "gemm", "conv": "conv", "attention": "attention", "elementwise": "elementwise",
              "norm": "norm", "reduction": "reduction", "copy": "copy"}  # fmt: skip
"""Roofline op kind -> calibration class (host-device copies become ``host_copy``)."""
MEMORY_CLASSES = ("elementwise", "norm", "reduction", "copy")
"""Classes whose rows set the model's ``memory`` efficiency."""
MODEL_KEY = {"gemm": "matmul", "attention": "attention", **dict.fromkeys(MEMORY_CLASSES, "memory"),
             "communication.intra": "intra_link", "communication.inter": "inter_link"}  # fmt: skip
"""Calibration class -> :data:`~aonkit.model.llm.step.EFFICIENCY` key (classes not listed set none)."""
MODEL_CLASS = {"gemm": "matmul", "attention": "attention", **dict.fromkeys(MEMORY_CLASSES, "elementwise")}
"""Calibration class -> op class of the LLM model (:data:`~aonkit.model.llm.costs.CLASSES`)."""
METHODS = ("total", "median", "lstsq", "affine")

_HOST_COPY = re.compile(r"HtoD|DtoH|HtoH|Pageable|Pinned", re.IGNORECASE)
_COLLECTIVE = (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
               ("alltoall", "all_to_all"), ("broadcast", "send"), ("send", "send"), ("recv", "send"),
               ("reduce", "send"))  # fmt: skip
_TABLE_COLUMNS = ("op", "name", "class", "kind", "bound", "link", "op_row", "kernel_row", "step", "ts_ns", "kernels",
                  "measured_ns", "flop", "bytes", "compute_ns", "memory_ns", "ideal_ns", "fixed_ns", "input_dims")
CLASS_ORDER = (*KIND_CLASS, "host_copy", "communication.intra", "communication.inter")
"""The order of classes in summaries."""


def default_network(spec: DeviceSpec | None) -> Network | None:
    """The network preset for a device spec: DGX H100 for H100/H200, DGX A100 for A100; else None."""
    name = spec.name if spec is not None else ""
    if re.search(r"H100|H200|H800", name):
        return DGX_H100
    if re.search(r"A100|A800", name):
        return DGX_A100
    return None


def _collective_kind(name: object) -> str | None:
    key = str(name or "").lower().replace("_", "")
    return next((kind for pat, kind in _COLLECTIVE if pat in key), None)


def _step_of(trace: Trace, ts: np.ndarray) -> np.ndarray:
    """``ProfilerStep#N`` whose CPU span holds each time (-1: none)."""
    from ..analysis.steps import profiler_steps

    st = profiler_steps(trace).sort_values("ts_ns", kind="stable")
    out = np.full(len(ts), -1, dtype=np.int64)
    if not len(st) or not len(ts):
        return out
    start, end, num = (st[c].to_numpy(np.int64) for c in ("ts_ns", "dur_ns", "step"))
    end = start + np.maximum(end, 0)
    i = np.searchsorted(start, ts, side="right") - 1
    inside = (i >= 0) & (ts < end[np.maximum(i, 0)])
    out[inside] = num[i[inside]]
    return out


def calibration_table(trace: Trace, spec: DeviceSpec | str | None = None, *, by: str = "op",
                      network: Network | None = None, tf32: bool | None = None,
                      default_dtype: str | None = None) -> pd.DataFrame:  # fmt: skip
    """One row per costed op call (or GPU event) and per sized collective: class, measured and ideal time.

    Parameters
    ----------
    trace : Trace
        Recorded with ``record_shapes=True`` (collectives need the ``In msg nelems`` args of
        PyTorch 2.x, else they are left out).
    spec : DeviceSpec or str, optional
        Device ceilings (default: the trace's GPU, as in :func:`~aonkit.analysis.roofline.roofline_table`).
    by : {"op", "kernel"}
        Rows per op call (its GPU events summed) or per GPU event.
    network : Network, optional
        Links for the collectives (default :func:`default_network` of the spec).
    tf32, default_dtype
        As for :func:`~aonkit.analysis.roofline.roofline_table`.

    Returns
    -------
    pandas.DataFrame
        ``op`` (op name; collective kind for collectives), ``name`` (kernel name; per op the op's),
        ``class`` (see the module doc), ``kind``, ``bound``, ``link`` (``"intra"``/``"inter"`` for
        collectives), ``op_row``, ``kernel_row`` (-1 per op), ``step`` (the ``ProfilerStep#N`` whose
        CPU span holds the op's start or the collective's launch; -1 none), ``ts_ns`` (GPU start;
        per op of its first GPU event), ``kernels`` (GPU events),
        ``measured_ns``, ``flop``, ``bytes``, ``compute_ns`` (``flop / peak``), ``memory_ns``
        (``bytes / bandwidth``), ``ideal_ns``, ``fixed_ns`` and ``input_dims``, in time order.
        Rows with no GPU time or no roof are left out. ``attrs``: ``spec``, ``network``, ``by``,
        ``gpu_ns`` (all GPU events of the trace), ``excluded_ns`` (GPU time under costed ops left
        out), ``notes``.

    Raises
    ------
    MissingInputError
        When no spec is given and the trace's GPU is unknown (a ``ValueError``).
    ValueError
        When ``by`` is neither value.
    """
    from ..analysis.correlation import gpu_launches
    from ..analysis.kernels import kernel_class
    from ..analysis.roofline import roofline_table

    if by not in ("op", "kernel"):
        raise ValueError(f"by must be 'op' or 'kernel', not {by!r}")
    k = roofline_table(trace, spec, by="kernel", tf32=tf32, default_dtype=default_dtype)
    spec = k.attrs["spec"]
    if spec is None:
        raise MissingInputError("the trace names no known GPU (deviceProperties); pass spec=DeviceSpec(...) or a name")
    notes: list[str] = []
    ev = trace.events
    ts_all = ev["ts_ns"].to_numpy(np.int64)
    cats = ev["cat"].astype(object).to_numpy()
    rows = k["kernel_row"].to_numpy(np.int64)
    op_rows = k["op_row"].to_numpy(np.int64)
    names = k["name"].astype(str).to_numpy()
    comm = np.array([kernel_class(str(c), n) == "communication" for c, n in zip(cats[rows], names)], dtype=bool)
    host = np.array([c in ("gpu_memcpy", "Memcpy") and bool(_HOST_COPY.search(n))
                     for c, n in zip(cats[rows], names)], dtype=bool)  # fmt: skip
    flop, nbytes = k["flop"].to_numpy(np.float64), k["bytes"].to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute_ns = np.where(flop > 0, flop / k["peak_flop_per_s"].to_numpy(np.float64) * 1e9, 0.0)
    kind = k["kind"].astype(object).to_numpy()
    klass = np.where(host & (kind == "copy"), "host_copy", np.array([KIND_CLASS.get(x, "") for x in kind], object))
    kt = pd.DataFrame({
        "op": k["op_name"].to_numpy(), "name": names, "class": klass, "kind": kind,
        "bound": k["bound"].to_numpy(), "link": "", "op_row": op_rows, "kernel_row": rows,
        "step": _step_of(trace, ts_all[op_rows]), "ts_ns": ts_all[rows], "kernels": 1,
        "measured_ns": k["dur_ns"].to_numpy(np.float64), "flop": flop, "bytes": nbytes, "compute_ns": compute_ns,
        "memory_ns": nbytes / spec.memory_bandwidth * 1e9, "ideal_ns": k["roofline_ns"].to_numpy(np.float64),
        "fixed_ns": 0.0, "input_dims": k["input_dims"].to_numpy(),
    })[~comm]  # fmt: skip
    keep = (kt["measured_ns"] > 0) & np.isfinite(kt["ideal_ns"]) & (kt["ideal_ns"] > 0) & (kt["class"] != "")
    excluded = float(kt.loc[~keep, "measured_ns"].sum())
    parts = [kt[keep]]
    net = network if network is not None else default_network(spec)
    coll = _collective_rows(trace, net, notes)
    if len(coll):
        launch = gpu_launches(trace).set_index("gpu_row")["launch_row"].reindex(coll["kernel_row"].to_numpy())
        launch = launch.fillna(-1).to_numpy(np.int64)
        at = np.where(launch >= 0, ts_all[np.maximum(launch, 0)], coll["ts_ns"].to_numpy(np.int64))
        parts.append(coll.assign(step=_step_of(trace, at)))
    table = pd.concat([p for p in parts if len(p)], ignore_index=True) if any(len(p) for p in parts) else parts[0]
    table = table.reindex(columns=list(_TABLE_COLUMNS)).sort_values("ts_ns", kind="stable", ignore_index=True)
    table = table.astype({"op_row": np.int64, "kernel_row": np.int64, "step": np.int64, "kernels": np.int64})
    table.attrs.update(spec=spec, network=net, by="kernel", gpu_ns=int(k.attrs["gpu_ns"]), excluded_ns=excluded,
                       notes=notes)  # fmt: skip
    return per_op(table) if by == "op" else table


def per_op(table: pd.DataFrame) -> pd.DataFrame:
    """A per-GPU-event :func:`calibration_table` (or its :func:`residual_table`) summed per op call.

    Times, FLOPs, bytes and GPU event counts add up; an op's class is the class of most of its
    time (a copy op timed mostly by host-device memcpys is ``host_copy``), ``ts_ns`` its first GPU start.
    Collectives stay as they are. Tables already per op are returned unchanged.
    """
    if table.attrs.get("by") == "op":
        return table
    is_op = (table["op_row"] >= 0).to_numpy()
    ops, rest = table[is_op], table[~is_op]
    sums = [c for c in ("kernels", "measured_ns", "predicted_ns", "residual", "flop", "bytes", "compute_ns",
                        "memory_ns", "ideal_ns", "fixed_ns") if c in table.columns]  # fmt: skip
    g = ops.groupby("op_row", sort=False)
    share = ops.groupby(["op_row", "class"], sort=False)["measured_ns"].sum().reset_index()
    major = share.sort_values("measured_ns", kind="stable").drop_duplicates("op_row", keep="last")
    out = g[["op", "kind", "bound", "link", "step", "input_dims"]].first().join(g[sums].sum())
    out["class"] = major.set_index("op_row")["class"].reindex(out.index)
    out = out.reset_index()
    out["name"], out["kernel_row"] = out["op"], -1
    out["ts_ns"] = g["ts_ns"].min().reindex(out["op_row"]).to_numpy()
    if "fraction" in table.columns:
        out["fraction"] = out["ideal_ns"] / np.maximum(out["measured_ns"] - out["fixed_ns"], 1e-3)
    both = pd.concat([out, rest], ignore_index=True)[list(table.columns)]
    both = both.sort_values("ts_ns", kind="stable", ignore_index=True).astype(table.dtypes.to_dict())
    both.attrs.update({**table.attrs, "by": "op"})
    return both


def _collective_rows(trace: Trace, network: Network | None, notes: list[str]) -> pd.DataFrame:
    """Rows of the communication kernels whose collective, group size and message size are known."""
    from ..analysis.collectives import comm_kernels

    c = comm_kernels(trace)
    if not len(c):
        return pd.DataFrame()
    kinds = np.array([_collective_kind(x) for x in c["coll"]], dtype=object)
    n = c["group_size"].to_numpy(np.float64)
    nbytes = c["bytes"].to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out_bytes = c["out_nelems"].to_numpy(np.float64) * nbytes / c["in_nelems"].to_numpy(np.float64)
    msg = np.where(kinds == "all_gather", out_bytes, nbytes)  # all-gather: the gathered buffer
    ok = np.array([x is not None for x in kinds]) & np.isfinite(n) & (n > 1) & np.isfinite(msg) & (msg >= 0)
    ok &= c["dur_ns"].to_numpy() > 0
    if (~ok).any():
        notes.append(f"{int((~ok).sum())} communication kernels ({int(c['dur_ns'].to_numpy()[~ok].sum())} ns) left "
                     "out: collective, group size or message size unknown")  # fmt: skip
    if network is None and ok.any():
        notes.append(f"{int(ok.sum())} collectives left out: no network for this device (pass network=)")
        ok[:] = False
    c, kinds, n, msg = c[ok], kinds[ok], n[ok].astype(np.int64), msg[ok]
    if not len(c):
        return pd.DataFrame()
    ideal, fixed, where = [], [], []
    for kind, size, m in zip(kinds, n.tolist(), msg.tolist()):
        link, at = network.link(size)  # type: ignore[union-attr]
        lat = collective_time(kind, 0.0, size, link)
        ideal.append((collective_time(kind, m, size, link) - lat) * 1e9)
        fixed.append(lat * 1e9)
        where.append(at)
    return pd.DataFrame({
        "op": kinds, "name": c["name"].astype(str).to_numpy(), "class": [f"communication.{w}" for w in where],
        "kind": "communication", "bound": "", "link": where, "op_row": -1, "kernel_row": c.index.to_numpy(np.int64),
        "ts_ns": c["ts_ns"].to_numpy(np.int64), "kernels": 1, "measured_ns": c["dur_ns"].to_numpy(np.float64),
        "flop": 0.0, "bytes": msg, "compute_ns": 0.0, "memory_ns": 0.0, "ideal_ns": ideal, "fixed_ns": fixed,
        "input_dims": [f"group {s}" for s in n.tolist()],
    })  # fmt: skip
