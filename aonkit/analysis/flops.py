"""FLOPs and bytes of every CPU op whose recorded shapes fit a cost formula (:mod:`aonkit.model`).

Needs a trace recorded with ``record_shapes=True`` (``Input Dims``,
``Input type``; ``Concrete Inputs`` and ``Input Strides`` in newer traces).
Where an op carries the profiler's own ``flops`` arg it replaces the formula's
FLOPs; bytes always come from the formulas.

An op and the ops it calls describe the same work (``aten::linear`` calls
``aten::addmm``, ``aten::conv2d`` calls ``aten::cudnn_convolution``), so only
the outermost op with a cost on each call stack is ``counted``; the GPU time
of everything launched beneath it is its time (see
:func:`aonkit.analysis.roofline.roofline_table`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..model.ops import is_modelled, op_cost
from ..model.shapes import OpInputs
from ..trace import Trace
from .columns import category_flags
from .correlation import cpu_stack

COLUMNS = ("op_row", "name", "kind", "dtype", "flop", "bytes", "formula_flop", "profiler_flop", "counted", "input_dims")


def parents(trace: Trace) -> np.ndarray:
    """Parent row of every event on its CPU thread's call stack (-1 for roots and non-CPU events)."""
    par = np.full(len(trace.events), -1, dtype=np.int64)
    stack = cpu_stack(trace)
    par[stack.index.to_numpy()] = stack.to_numpy()
    return par


def nearest_marked(start: np.ndarray, parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """For each row of ``start``: itself or its nearest ancestor with ``marked`` set; -1 when none (or start -1)."""
    cur = np.asarray(start, dtype=np.int64).copy()
    found = np.full(len(cur), -1, dtype=np.int64)
    while True:
        live = (found < 0) & (cur >= 0)
        if not live.any():
            return found
        hit = live & marked[np.maximum(cur, 0)]
        found[hit] = cur[hit]
        step = live & ~hit
        cur = np.where(step, parent[np.maximum(cur, 0)], -1)


_DTYPE_ALIASES = {"fp64": "double", "fp32": "float", "fp16": "c10::Half", "bf16": "c10::BFloat16"}


def op_costs(trace: Trace, default_dtype: str | None = None) -> pd.DataFrame:
    """One row per CPU op whose name has a cost formula.

    ``default_dtype`` (``"bf16"``, ``"fp16"``, ``"fp32"``, ``"fp64"`` or a Kineto
    type name) stands for every tensor input of ops that recorded shapes but no
    ``Input type``, as PyTorch's ``emit_nvtx`` ranges in Nsight Systems exports
    do; without it such ops get no cost.

    Parameters
    ----------
    trace : Trace
        A trace recorded with ``record_shapes=True``; its CPU ops (``cpu_op``/``Operator`` events) whose name
        has a formula (:func:`aonkit.model.is_modelled`) are costed.
    default_dtype : str, optional
        ``"bf16"``, ``"fp16"``, ``"fp32"``, ``"fp64"`` (read as ``c10::BFloat16``, ``c10::Half``, ``float``,
        ``double``) or a Kineto type name, used as the type of every input of an op that has ``Input Dims``
        but no ``Input type``. Default None: such ops get no cost.

    Returns
    -------
    pandas.DataFrame
        One row per such op, in ``trace.events`` order:
        ``op_row`` (row in ``trace.events``), ``name``, ``kind`` (``gemm``,
        ``conv``, ``attention``, ``elementwise``, ``reduction``, ``norm``,
        ``copy``; ``""`` when the shapes did not fit), ``dtype`` (``""`` when the shapes did not fit),
        ``flop`` (float: the profiler's ``flops`` when present and the shapes fit, else the formula's; NaN when
        the shapes did not fit), ``bytes`` (float, the bytes the formula counts; NaN when the shapes did not
        fit), ``formula_flop`` (float, NaN when the shapes did not fit), ``profiler_flop`` (float, the
        ``flops`` arg; NaN when absent), ``counted`` (bool: the op has a cost and no op above it on its call
        stack has one) and ``input_dims`` (text of ``Input Dims``; ``""`` when absent). Empty, with these
        columns, when no op has a formula.
    """
    ev = trace.events
    ops = category_flags(ev["cat"], lambda c: c in schema.CPU_OP_CATS)
    rows = np.flatnonzero(ops & category_flags(ev["name"], is_modelled))
    if not len(rows):
        return pd.DataFrame({c: [] for c in COLUMNS})
    names = ev["name"].astype(object).to_numpy()[rows]
    args = [trace.arg_values(k, rows) for k in ("Input Dims", "Input type", "Concrete Inputs", "Input Strides")]
    fallback = _DTYPE_ALIASES.get(default_dtype, default_dtype) if default_dtype else None
    cache: dict[str, tuple[float, float, str, str]] = {}
    out = np.empty((len(rows), 4), dtype=object)
    dims_text = []
    for j, (name, dims, types, conc, strides) in enumerate(zip(names, *args)):
        key = repr((name, dims, types, conc, strides))
        if key not in cache:
            if types is None and fallback is not None and isinstance(dims, list):
                types = [fallback] * len(dims)
            ok = isinstance(dims, list) and isinstance(types, list)
            cost = op_cost(name, OpInputs(dims, types, conc or (), strides or ())) if ok else None
            cache[key] = (cost.flops, cost.bytes, cost.dtype, cost.kind) if cost else (np.nan, np.nan, "", "")
        out[j] = cache[key]
        dims_text.append("" if dims is None else str(dims))
    formula = out[:, 0].astype(np.float64)
    profiler = trace.arg_numbers("flops", rows)
    has_cost = np.isfinite(out[:, 1].astype(np.float64))
    costed = np.zeros(len(ev), dtype=bool)
    costed[rows[has_cost]] = True
    par = parents(trace)
    above = nearest_marked(par[rows], par, costed)
    return pd.DataFrame(
        {
            "op_row": rows,
            "name": names,
            "kind": out[:, 3],
            "dtype": out[:, 2],
            "flop": np.where(np.isfinite(profiler) & has_cost, profiler, formula),
            "bytes": out[:, 1].astype(np.float64),
            "formula_flop": formula,
            "profiler_flop": profiler,
            "counted": has_cost & (above < 0),
            "input_dims": dims_text,
        }
    )
