"""Calibration: efficiency factors per op class fitted from a measured trace, with per-op residuals.

Every GPU event launched under a costed op (:func:`aonkit.analysis.roofline.roofline_table`
with ``by="kernel"``) and every communication kernel whose message size the trace records
becomes a row with a *class*, its measured time ``m``, an *ideal* time ``r`` (the time at
efficiency 1), a *fixed* time ``c`` that no efficiency scales and its GPU event count ``n``::

    ops          r = roofline_ns = max(flop / peak, bytes / bandwidth)      c = 0
    collectives  r = bandwidth term of collective_time(..., efficiency=1)    c = its latency term

Rows are per GPU event (``by="kernel"``) or summed per op call (``by="op"``, the default).
A row's achieved fraction is ``f = r / (m - c)`` (``fraction_of_roof`` for ops). Per class,
a factor ``e`` (and with ``"affine"`` an overhead ``t0`` per GPU event) is fitted, and the
prediction is ``c + n * t0 + r / e``:

=========  =================================================================================
method     fit of a class
=========  =================================================================================
total      ``e = sum(r) / sum(m - c)``, the time-weighted mean of ``f``; ``t0 = 0``. Each
           class's total time is reproduced exactly (the default)
median     ``e`` = time-weighted median of ``f``; robust to odd ops, but biased for the total
           when ``f`` is skewed (ResNet-50's convolutions: +28%)
lstsq      least squares on time, ``min sum((m - c - r / e)**2)``: ``1/e = sum(r (m - c)) / sum(r**2)``
affine     least squares on time of ``m - c = n * t0 + r / e`` with ``t0, 1/e >= 0``: a launch
           and tail overhead per GPU event beside the roofline time, which carries a calibration
           across op sizes far better (``docs/calibration.md``). Falls back to ``total``
           when the rows cannot tell the two apart (one size, or no slope left). Collectives,
           whose latency term is already their fixed time, are fitted with ``total``
=========  =================================================================================

Classes and the :data:`~aonkit.model.llm.step.EFFICIENCY` keys they set:

=====================  =====================================================  ==============
class                  rows                                                   key
=====================  =====================================================  ==============
gemm                   op kind ``gemm`` (mm, addmm, bmm, matmul, linear...)   ``matmul``
conv                   op kind ``conv``                                       (none)
attention              op kind ``attention`` (SDPA, flash/efficient)          ``attention``
elementwise            op kind ``elementwise``                                ``memory``
norm                   op kind ``norm`` (layer/group/batch/RMS norm)          ``memory``
reduction              op kind ``reduction`` (sum, mean, softmax...)          ``memory``
copy                   op kind ``copy`` on the device (kernels, DtoD copies)  ``memory``
host_copy              op kind ``copy`` timed by host-device memcpys (PCIe)   (none)
communication.intra    collectives of a group inside one node                 ``intra_link``
communication.inter    collectives of a group spanning nodes                  ``inter_link``
=====================  =====================================================  ==============

The LLM model (:func:`~aonkit.model.llm.training_step`, :func:`~aonkit.model.llm.prefill_time`)
computes a class's time as ``max(flops / (e_class * peak), bytes / (e_memory * bandwidth))``, so
:attr:`Calibration.efficiency` expresses the calibrated time in those terms: ``matmul`` and
``attention`` are ``sum(flop / peak) / sum(predicted)`` over their rows (the fraction of the
compute peak; equal to the class factor when the ops are compute-bound), ``memory`` is
``sum(bytes / bandwidth) / sum(predicted)`` over the memory classes, and the link keys are the
communication factors. Keys without rows are left out, so the model keeps its defaults there.
These are effective efficiencies at the calibrated trace's op sizes (overheads included).

Communication kernels are timed from launch to end on one rank, waiting for the other ranks
included: their factors are lower bounds of the link efficiency. The network defaults to
:data:`~aonkit.model.llm.network.DGX_H100` for H100/H200 and
:data:`~aonkit.model.llm.network.DGX_A100` for A100 specs; other devices need ``network=``,
else their collectives are left out (``attrs["notes"]`` says so). Broadcast, reduce, send and
recv are costed as one point-to-point message.

:func:`transformer_from_trace` reads a :class:`~aonkit.model.llm.TransformerConfig` off a
traced transformer's op shapes, and :func:`compare_forward` sets the LLM model's forward
pass, with default and calibrated efficiencies, beside the trace's measured time per class.
Results on the shared traces: ``docs/calibration.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .hardware import DeviceSpec
from .llm.config import TransformerConfig
from .llm.costs import device_peak, layer_forward, roofline_time
from .llm.network import DGX_A100, DGX_H100, Network, collective_time
from .llm.step import EFFICIENCY

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
_CLASS_ORDER = (*KIND_CLASS, "host_copy", "communication.intra", "communication.inter")


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
    ValueError
        When no spec is given and the trace's GPU is unknown, or ``by`` is neither value.
    """
    from ..analysis.correlation import gpu_launches
    from ..analysis.kernels import kernel_class
    from ..analysis.roofline import roofline_table

    if by not in ("op", "kernel"):
        raise ValueError(f"by must be 'op' or 'kernel', not {by!r}")
    k = roofline_table(trace, spec, by="kernel", tf32=tf32, default_dtype=default_dtype)
    spec = k.attrs["spec"]
    if spec is None:
        raise ValueError("the trace names no known GPU (deviceProperties); pass spec=DeviceSpec(...) or a name")
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


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float = 0.5) -> float:
    """The first value (in sorted order) at which the cumulative weight reaches ``q`` of the total; NaN if none."""
    v, w = np.asarray(values, np.float64), np.asarray(weights, np.float64)
    ok = np.isfinite(v) & np.isfinite(w) & (w > 0)
    if not ok.any():
        return float("nan")
    order = np.argsort(v[ok], kind="stable")
    cum = np.cumsum(w[ok][order])
    return float(v[ok][order][min(int(np.searchsorted(cum, q * cum[-1])), int(ok.sum()) - 1)])


def fit_class(ideal_ns: np.ndarray, measured_ns: np.ndarray, fixed_ns: np.ndarray | float = 0.0,
              kernels: np.ndarray | float = 1.0, method: str = "affine") -> tuple[float, float]:  # fmt: skip
    """``(e, t0)`` of one class such that ``fixed + kernels * t0 + ideal / e`` predicts ``measured``.

    See the module doc for the methods; ``t0`` (ns per GPU event) is 0 except with ``"affine"``.
    ``(nan, 0)`` when there are no rows.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    r = np.asarray(ideal_ns, np.float64)
    if not len(r):
        return float("nan"), 0.0
    m = np.asarray(measured_ns, np.float64) - np.broadcast_to(np.asarray(fixed_ns, np.float64), r.shape)
    m = np.maximum(m, 1e-3)  # a collective shorter than its latency term: all of it is the bandwidth part
    if method == "median":
        return weighted_quantile(r / m, m), 0.0
    if method == "lstsq":
        return float((r * r).sum() / (r * m).sum()), 0.0
    total = float(r.sum() / m.sum())
    if method == "total":
        return total, 0.0
    n = np.broadcast_to(np.asarray(kernels, np.float64), r.shape)
    per = r / n
    if len(r) < 3 or per.std() < 0.05 * per.mean():  # one size: overhead and efficiency cannot be told apart
        return total, 0.0
    x = np.column_stack([n, r])
    (t0, k), *_ = np.linalg.lstsq(x, m, rcond=None)
    if t0 < 0 or k <= 0:  # the bound is active: the better one-term fit (t0 only leaves no slope: fall back)
        k1 = float((r * m).sum() / (r * r).sum())
        t1 = float((n * m).sum() / (n * n).sum())
        sse_k, sse_t = ((m - k1 * r) ** 2).sum(), ((m - t1 * n) ** 2).sum()
        if sse_k <= sse_t:
            return 1.0 / k1, 0.0
        return total, 0.0
    return float(1.0 / k), float(t0)


def residual_table(table: pd.DataFrame, factors: Mapping[str, float],
                   overheads: Mapping[str, float] | None = None) -> pd.DataFrame:  # fmt: skip
    """``table`` (of :func:`calibration_table`) with ``predicted_ns = fixed + kernels * t0 + ideal / factor``.

    Columns ``op``, ``class``, ``measured_ns``, ``predicted_ns``, ``residual`` (measured - predicted,
    ns), ``fraction`` (achieved ``ideal / (measured - fixed)``), then the rest of ``table``.
    Rows of classes without a factor get NaN predictions.
    """
    overheads = overheads or {}
    t = table.copy()
    e = t["class"].map(lambda c: factors.get(c, np.nan)).to_numpy(np.float64)
    t0 = t["class"].map(lambda c: overheads.get(c, 0.0)).to_numpy(np.float64)
    r, m, c = (t[x].to_numpy(np.float64) for x in ("ideal_ns", "measured_ns", "fixed_ns"))
    t["predicted_ns"] = c + t["kernels"].to_numpy(np.float64) * t0 + r / e
    t["residual"] = m - t["predicted_ns"]
    t["fraction"] = r / np.maximum(m - c, 1e-3)
    first = ["op", "class", "measured_ns", "predicted_ns", "residual", "fraction"]
    return t[first + [x for x in t.columns if x not in first]]


def summarize(residuals: pd.DataFrame, factors: Mapping[str, float] | None = None,
              overheads: Mapping[str, float] | None = None) -> pd.DataFrame:  # fmt: skip
    """Per class: factor, rows, measured and predicted ns, time share, total error and residual spread.

    Columns: ``class``, ``model_key``, ``factor``, ``overhead_ns`` (per GPU event), ``n`` (rows),
    ``measured_ns``, ``predicted_ns``, ``time_share`` (of the measured time of all rows), ``error``
    (``predicted / measured - 1`` of the class totals), ``abs_error_median`` (time-weighted median of
    ``|residual| / measured``), ``ratio_p10``/``ratio_p90`` (time-weighted 10th/90th percentiles of
    ``measured / predicted``) and ``compute_bound_share`` (of the class's time in compute-bound rows).
    A last row ``all`` totals the rows with a prediction (its ``n``, ``time_share``: of all rows).
    """
    factors, overheads = factors or {}, overheads or {}
    m_all = float(residuals["measured_ns"].sum())
    groups = sorted(residuals.groupby("class", sort=False),
                    key=lambda kv: _CLASS_ORDER.index(kv[0]) if kv[0] in _CLASS_ORDER else 99)  # fmt: skip
    out = []
    for cls, g in [*groups, ("all", residuals[np.isfinite(residuals["predicted_ns"])])]:
        m, p = g["measured_ns"].to_numpy(np.float64), g["predicted_ns"].to_numpy(np.float64)
        tot = m.sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio, rel = m / p, np.abs(m - p) / m
        out.append({
            "class": cls, "model_key": MODEL_KEY.get(cls, ""), "factor": factors.get(cls, np.nan),
            "overhead_ns": overheads.get(cls, 0.0) if cls in factors else np.nan, "n": len(g), "measured_ns": tot,
            "predicted_ns": p.sum() if len(g) else np.nan, "time_share": tot / m_all if m_all > 0 else np.nan,
            "error": p.sum() / tot - 1 if tot > 0 else np.nan, "abs_error_median": weighted_quantile(rel, m),
            "ratio_p10": weighted_quantile(ratio, m, 0.1), "ratio_p90": weighted_quantile(ratio, m, 0.9),
            "compute_bound_share": float(m[(g["bound"] == "compute").to_numpy()].sum() / tot) if tot > 0 else np.nan,
        })  # fmt: skip
    return pd.DataFrame(out)


def _model_efficiency(res: pd.DataFrame, factors: Mapping[str, float]) -> dict[str, float]:
    eff: dict[str, float] = {}
    fitted = res[np.isfinite(res["predicted_ns"])]
    for key, classes, col in (("matmul", ("gemm",), "compute_ns"), ("attention", ("attention",), "compute_ns"),
                              ("memory", MEMORY_CLASSES, "memory_ns")):  # fmt: skip
        g = fitted[fitted["class"].isin(classes)]
        if len(g) and g["predicted_ns"].sum() > 0 and g[col].sum() > 0:
            eff[key] = float(g[col].sum() / g["predicted_ns"].sum())
    for where in ("intra", "inter"):
        if np.isfinite(factors.get(f"communication.{where}", np.nan)):
            eff[f"{where}_link"] = float(factors[f"communication.{where}"])
    return eff


@dataclass(frozen=True)
class Calibration:
    """Fitted efficiency factors of one trace (see the module doc).

    Attributes
    ----------
    factors : dict
        Class -> fitted fraction of the ideal (roofline or link) time.
    overheads : dict
        Class -> fitted ns per GPU event (non-zero only with ``method="affine"``).
    efficiency : dict
        :data:`~aonkit.model.llm.step.EFFICIENCY` keys set by the fit, in the model's terms; pass as
        ``efficiency=`` to :func:`~aonkit.model.llm.training_step`, :func:`~aonkit.model.llm.prefill_time`
        or :func:`~aonkit.model.llm.decode_time`.
    residuals : pandas.DataFrame
        :func:`residual_table` of the fitted rows: ``op``, ``class``, ``measured_ns``,
        ``predicted_ns``, ``residual``...
    summary : pandas.DataFrame
        :func:`summarize` of the residuals.
    method : str
    spec : DeviceSpec
    network : Network or None
    notes : list of str
        Rows left out and why.
    """

    factors: dict[str, float]
    overheads: dict[str, float]
    efficiency: dict[str, float]
    residuals: pd.DataFrame = field(repr=False)
    summary: pd.DataFrame = field(repr=False)
    method: str = "affine"
    spec: DeviceSpec | None = None
    network: Network | None = None
    notes: list[str] = field(default_factory=list, repr=False)

    def predict(self, source: Trace | pd.DataFrame, spec: DeviceSpec | str | None = None, *, by: str = "op",
                network: Network | None = None) -> pd.DataFrame:  # fmt: skip
        """:func:`residual_table` of another trace (or :func:`calibration_table`) under these factors.

        The other trace is costed on its own device (``spec``, default its GPU), so a calibration
        carries across devices as fractions of each one's roofline. ``summarize(...)`` of the
        result gives the errors per class.
        """
        table = source if isinstance(source, pd.DataFrame) else calibration_table(
            source, spec, by=by, network=network if network is not None else self.network)  # fmt: skip
        return residual_table(table, self.factors, self.overheads)

    def predict_ns(self, source: Trace | pd.DataFrame, spec: DeviceSpec | str | None = None, **kw: Any) -> float:
        """Predicted GPU time (ns) of the rows of ``source`` whose class has a factor."""
        p = self.predict(source, spec, **kw)["predicted_ns"].to_numpy(np.float64)
        return float(p[np.isfinite(p)].sum())


def calibrate(source: Trace | pd.DataFrame, spec: DeviceSpec | str | None = None, *, method: str = "affine",
              by: str = "op", network: Network | None = None, min_rows: int = 1) -> Calibration:  # fmt: skip
    """Fit one efficiency factor per op class from a measured trace.

    Parameters
    ----------
    source : Trace or pandas.DataFrame
        A trace recorded with shapes, or a (filtered: one step, a time window)
        :func:`calibration_table`. The fit runs on the table's rows: per GPU event for a trace
        (so ``"affine"``'s overhead is per event and each class's total is reproduced).
    spec : DeviceSpec or str, optional
        Device ceilings (default: the trace's GPU).
    method : {"affine", "total", "median", "lstsq"}
        See the module doc.
    by : {"op", "kernel"}
        Rows of :attr:`Calibration.residuals`: per op call (its GPU events summed, :func:`per_op`)
        or per GPU event.
    network : Network, optional
        Links of the collectives (default :func:`default_network`).
    min_rows : int
        Classes with fewer rows get no factor.

    Returns
    -------
    Calibration

    Examples
    --------
    >>> cal = calibrate(aonkit.load("trace.json.gz"))            # doctest: +SKIP
    >>> cal.summary                                               # doctest: +SKIP
    >>> prefill_time(cfg, h100, 16, 559, efficiency=cal.efficiency)   # doctest: +SKIP
    >>> summarize(cal.predict(other_trace), cal.factors)          # doctest: +SKIP
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if by not in ("op", "kernel"):
        raise ValueError(f"by must be 'op' or 'kernel', not {by!r}")
    table = source if isinstance(source, pd.DataFrame) else calibration_table(source, spec, by="kernel",
                                                                               network=network)  # fmt: skip
    factors, overheads = {}, {}
    for cls, g in table.groupby("class", sort=False):
        if len(g) >= min_rows:
            how = "total" if method == "affine" and str(cls).startswith("communication") else method
            e, t0 = fit_class(g["ideal_ns"], g["measured_ns"], g["fixed_ns"], g["kernels"], how)
            factors[str(cls)], overheads[str(cls)] = e, t0
    shown = per_op(table) if by == "op" else table
    res = residual_table(shown, factors, overheads)
    return Calibration(factors=factors, overheads=overheads, efficiency=_model_efficiency(res, factors),
                       residuals=res, summary=summarize(res, factors, overheads), method=method,
                       spec=table.attrs.get("spec"), network=table.attrs.get("network"),
                       notes=list(table.attrs.get("notes", [])))  # fmt: skip


# --- the analytic LLM model against a traced forward pass --------------------------------------------------


@dataclass(frozen=True)
class TracedTransformer:
    """A transformer read off a trace's op shapes: its config and the batch and sequence it ran."""

    config: TransformerConfig
    batch: int
    seq: int
    causal: bool
    how: dict[str, str] = field(default_factory=dict, repr=False)


def _dims(trace: Trace, name_pattern: str) -> list[list]:
    ev = trace.events
    rows = np.flatnonzero(ev["name"].astype(str).str.fullmatch(name_pattern).to_numpy()
                          & ev["cat"].isin(("cpu_op", "Operator")).to_numpy())  # fmt: skip
    return [d for d in trace.arg_values("Input Dims", rows) if isinstance(d, list)] if len(rows) else []


def transformer_from_trace(trace: Trace, vocab: int | None = None, name: str = "") -> TracedTransformer:
    """The :class:`~aonkit.model.llm.TransformerConfig` of a traced transformer forward pass.

    Read from the op shapes of ``aten::scaled_dot_product_attention`` (batch ``B``, heads ``a``,
    KV heads ``g``, sequence ``s``, head size ``d``; one call per layer), ``aten::linear``
    (hidden ``h``: the commonest input size; ``ffn``: the commonest output size of an ``h``-input
    linear other than ``a*d``, ``g*d`` and ``h``; gated when there are twice as many ``h -> ffn``
    as ``ffn -> h`` linears; biases when the query projection has one), ``aten::embedding``
    (vocabulary: the table whose width is ``h`` and that has the most rows) and
    ``aten::layer_norm`` (LayerNorm when present, else RMSNorm). Causal when the SDPA calls pass
    ``is_causal=True`` (``Concrete Inputs``). One forward pass per trace (or per table window).

    Raises
    ------
    ValueError
        When the trace has no SDPA or linear ops with shapes, or no vocabulary is found or given.
    """
    ev = trace.events
    sdpa_rows = np.flatnonzero((ev["name"] == "aten::scaled_dot_product_attention").to_numpy())
    sdpa = [d for d in trace.arg_values("Input Dims", sdpa_rows) if isinstance(d, list) and len(d) >= 3]
    if not sdpa:
        raise ValueError("no aten::scaled_dot_product_attention with recorded shapes: cannot read the heads")
    q, k = sdpa[0][0], sdpa[0][1]
    if len(q) != 4 or len(k) != 4:
        raise ValueError(f"SDPA query/key shapes {q}, {k} are not (batch, heads, seq, head_dim)")
    b, a, s, d = (int(x) for x in q)
    g = int(k[1])
    conc = trace.arg_values("Concrete Inputs", sdpa_rows[:1])[0] or []
    causal = len(conc) > 5 and str(conc[5]) == "True"
    lin = [(int(x[0][-1]), int(x[1][0]), bool(len(x) > 2 and x[2])) for x in _dims(trace, "aten::linear")
           if len(x) >= 2 and len(x[0]) >= 1 and len(x[1]) == 2]  # fmt: skip
    if not lin:
        raise ValueError("no aten::linear with recorded shapes: cannot read the hidden and MLP sizes")
    ins = pd.Series([i for i, _, _ in lin])
    h = int(ins.mode().iloc[0])
    outs = pd.Series([o for i, o, _ in lin if i == h and o not in (a * d, g * d, h)])
    ffn = int(outs.mode().iloc[0]) if len(outs) else 4 * h
    up = sum(1 for i, o, _ in lin if i == h and o == ffn)
    down = sum(1 for i, o, _ in lin if i == ffn and o == h)
    gated = down > 0 and up == 2 * down
    bias = any(bb for i, o, bb in lin if i == h and o == a * d)
    if vocab is None:
        tables = [int(x[0][0]) for x in _dims(trace, "aten::embedding") if len(x) and len(x[0]) == 2
                  and int(x[0][1]) == h]  # fmt: skip
        if not tables:
            raise ValueError("no aten::embedding of width hidden: pass vocab=")
        vocab = max(tables)
    norm = "layernorm" if _dims(trace, "aten::layer_norm") else "rmsnorm"
    cfg = TransformerConfig(layers=len(sdpa), hidden=h, heads=a, vocab=vocab, seq=s, kv_heads=g, ffn=ffn,
                            gated_mlp=gated, head_dim=d, bias=bias, norm=norm, name=name)  # fmt: skip
    how = {"layers": f"{len(sdpa)} SDPA calls", "heads": f"SDPA query {q}", "kv_heads": f"SDPA key {k}",
           "hidden": f"commonest linear input ({int((ins == h).sum())} of {len(lin)})",
           "ffn": f"{up} linears {h}->{ffn}, {down} {ffn}->{h}", "vocab": f"{vocab}", "norm": norm}  # fmt: skip
    return TracedTransformer(cfg, b, s, causal, how)


def compare_forward(calibration: Calibration, config: TransformerConfig, batch: int, seq: int, *,
                    causal: bool = True, dtype: str = "bf16", device: DeviceSpec | None = None,
                    efficiency: Mapping[str, float] | None = None) -> pd.DataFrame:  # fmt: skip
    """The LLM model's forward pass (its layers, no logits) beside the calibrated trace's, per model class.

    The trace's fitted rows map to the model's classes (``gemm`` -> ``matmul``, ``attention``,
    the memory classes -> ``elementwise``; others are left out). The model's time per class is
    :func:`~aonkit.model.llm.costs.roofline_time` of :func:`~aonkit.model.llm.costs.layer_forward`
    times the layers, as :func:`~aonkit.model.llm.prefill_time` computes it, with the default
    :data:`~aonkit.model.llm.step.EFFICIENCY` and with ``calibration.efficiency`` (or ``efficiency``).

    Returns
    -------
    pandas.DataFrame
        Index ``matmul``, ``attention``, ``elementwise``, ``total``; columns ``trace_flop``,
        ``model_flop``, ``trace_bytes``, ``model_bytes``, ``measured_ns``, ``default_ns``,
        ``calibrated_ns``, ``default_error``, ``calibrated_error`` (``model / measured - 1``).
    """
    device = device or calibration.spec
    if device is None:
        raise ValueError("no device: pass device=")
    peak, bw = device_peak(device, dtype), device.memory_bandwidth
    costs = layer_forward(config, False, batch, seq, seq, causal=causal)
    res = calibration.residuals
    res = res.assign(model_class=res["class"].map(MODEL_CLASS))
    tr = res.dropna(subset=["model_class"]).groupby("model_class")[["flop", "bytes", "measured_ns"]].sum()
    cal_eff = dict(efficiency if efficiency is not None else calibration.efficiency)
    rows = {}
    for cls in ("matmul", "attention", "elementwise"):
        fl, by = (config.layers * x for x in costs[cls])
        times = []
        for eff in (EFFICIENCY, {**EFFICIENCY, **cal_eff}):
            ce = 1.0 if cls == "elementwise" else eff[cls]
            times.append(float(roofline_time(fl, by, peak, bw, ce, eff["memory"])) * 1e9)
        t = tr.loc[cls] if cls in tr.index else pd.Series({"flop": 0.0, "bytes": 0.0, "measured_ns": 0.0})
        rows[cls] = {"trace_flop": t["flop"], "model_flop": fl, "trace_bytes": t["bytes"], "model_bytes": by,
                     "measured_ns": t["measured_ns"], "default_ns": times[0], "calibrated_ns": times[1]}  # fmt: skip
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.loc["total"] = out.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["default_error"] = out["default_ns"] / out["measured_ns"] - 1
        out["calibrated_error"] = out["calibrated_ns"] / out["measured_ns"] - 1
    return out
