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
           class's total time is reproduced exactly
median     ``e`` = time-weighted median of ``f``; robust to odd ops, but biased for the total
           when ``f`` is skewed (ResNet-50's convolutions: +28%)
lstsq      least squares on time, ``min sum((m - c - r / e)**2)``: ``1/e = sum(r (m - c)) / sum(r**2)``
affine     least squares on time of ``m - c = n * t0 + r / e`` with ``t0, 1/e >= 0``: a launch
           and tail overhead per GPU event beside the roofline time, which carries a calibration
           across op sizes far better (``docs/calibration.md``); the default. Falls back to
           ``total`` when the rows cannot tell the two apart (one size) or the fit would need a
           negative overhead or no slope, so a class's total is reproduced either way. Collectives,
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
Results on the shared traces: ``docs/calibration.md``. The rows are built in
:mod:`aonkit.model.calibration_table`, the forward-pass comparison lives in
:mod:`aonkit.model.calibration_forward`; their public names are importable from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .calibration_table import (  # noqa: F401 - calibration_table, per_op: importable from here too
    CLASS_ORDER,
    MEMORY_CLASSES,
    METHODS,
    MODEL_KEY,
    calibration_table,
    per_op,
)
from .hardware import DeviceSpec
from .llm.network import Network

if TYPE_CHECKING:
    from ..trace import Trace

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
    if t0 < 0 or k <= 0:  # a bound is active: t0 = 0, and the factor that keeps the class's total
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
                    key=lambda kv: CLASS_ORDER.index(kv[0]) if kv[0] in CLASS_ORDER else 99)  # fmt: skip
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

    Built by :func:`calibrate`; the fields are its constructor parameters and attributes.

    Parameters
    ----------
    factors : dict of str to float
        Class -> fitted efficiency ``e``: the fraction of the ideal (roofline or link bandwidth) time
        the class reaches, dimensionless. Only classes with at least ``min_rows`` rows have one.
    overheads : dict of str to float
        Class -> fitted overhead ``t0`` in ns per GPU event (non-zero only with ``method="affine"``,
        and 0 for collectives, which ``"affine"`` fits with ``"total"``).
    efficiency : dict of str to float
        :data:`~aonkit.model.llm.step.EFFICIENCY` keys set by the fit, in the model's terms; pass as
        ``efficiency=`` to :func:`~aonkit.model.llm.training_step`, :func:`~aonkit.model.llm.prefill_time`
        or :func:`~aonkit.model.llm.decode_time`. Keys without rows are absent.
    residuals : pandas.DataFrame
        :func:`residual_table` of the fitted rows: ``op``, ``class``, ``measured_ns``,
        ``predicted_ns``, ``residual`` (ns), ``fraction``, then the columns of :func:`calibration_table`.
    summary : pandas.DataFrame
        :func:`summarize` of the residuals, one row per class and a last row ``all``.
    method : {"affine", "total", "median", "lstsq"}, default "affine"
        The fit used (see the module doc).
    spec : DeviceSpec or None, default None
        Device whose ceilings gave the ideal times (the table's ``attrs["spec"]``).
    network : Network or None, default None
        Links the collectives were costed with (the table's ``attrs["network"]``); None when none was
        given or defaulted.
    notes : list of str, default []
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




# the table and the forward-pass comparison live beside the fit; their names stay importable from here
from .calibration_forward import TracedTransformer, compare_forward, transformer_from_trace  # noqa: E402, F401
