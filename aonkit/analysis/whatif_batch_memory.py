"""Would a bigger batch fit: each GPU's peak allocated memory projected from the allocations live at its peak.

Read from the allocator's ``[memory]`` events (``profile_memory=True``; :mod:`aonkit.analysis.memory`). At the
measured peak, the allocator's total splits into

* what does not grow with the batch: memory allocated before the trace (weights, gradient buckets, optimizer
  states of earlier steps: the allocator's total minus the allocations the trace saw that are live at the peak)
  and live allocations made under a parameter-sized scope (``Optimizer.step``/``zero_grad``,
  ``AccumulateGrad``: gradients, optimizer states);
* the rest of the live allocations (activations kept for the backward, workspaces), which grow ``k`` times.

``projected = fixed + k * rest``, beside the GPU's memory (``deviceProperties``, else the device spec). This is the
allocated total, not the caching allocator's reserved memory, which fragmentation can push higher: a projection
within a few percent of the capacity is not a promise that the batch fits. Parameter-sized allocations the scopes
do not mark (a weight cast to bf16 in the forward) count as growing, so the projection errs high.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np
import pandas as pd

from ..trace import Trace
from .correlation import enclosing_ops
from .memory import live_at, memory_events
from .roofline import trace_spec
from .whatif_batch import in_param_scope

COLUMNS = ("rank", "device", "peak_bytes", "fixed_bytes", "batch_bytes", "projected_bytes", "capacity_bytes")


def _capacity(trace: Trace, device: int) -> int:
    """The GPU's memory in bytes from ``deviceProperties`` (else its spec); -1 when unknown."""
    for prop in trace.metadata.get("deviceProperties") or []:
        if isinstance(prop, dict) and prop.get("id") == device and isinstance(prop.get("totalGlobalMem"), int):
            return int(prop["totalGlobalMem"])
    spec = trace_spec(trace)
    return int(spec.memory_bytes) if spec is not None and spec.memory_bytes else -1


def _one(trace: Trace, k: float, rank: int) -> pd.DataFrame:
    mem = memory_events(trace)
    mem = mem[mem["device"] >= 0]
    rows = []
    if len(mem):
        scoped = in_param_scope(trace, enclosing_ops(trace, mem["row"].to_numpy()))
        where = pd.Series(np.arange(len(mem)), index=mem.index)
        for device, d in mem.groupby("device", sort=True):
            total = d["allocated_bytes"].to_numpy()
            at = int(np.argmax(total))
            live = live_at(d, at)
            nbytes = d["bytes"].to_numpy()[live]
            param = scoped[where[d.index].to_numpy()[live]]
            peak = int(total[at])
            fixed = min(peak, max(peak - int(nbytes.sum()), 0) + int(nbytes[param].sum()))
            rows.append((rank, int(device), peak, fixed, peak - fixed, 0, _capacity(trace, int(device))))
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    out["projected_bytes"] = _projected(out, k)
    return out


def _projected(mem: pd.DataFrame, k: float) -> np.ndarray:
    """``fixed + k * batch`` bytes per row of a :func:`batch_memory` table."""
    return np.round(mem["fixed_bytes"].to_numpy(np.float64) + k * mem["batch_bytes"].to_numpy(np.float64)).astype(
        np.int64)  # fmt: skip


def fullest(mem: pd.DataFrame, k: float) -> tuple[int, int]:
    """(projected peak, capacity) of the GPU a :func:`batch_memory` table says is fullest at ``k`` times the batch.

    ``(-1, -1)`` for a table without rows (no ``profile_memory`` events).
    """
    if not len(mem):
        return -1, -1
    projected = _projected(mem, k)
    at = int(np.argmax(projected))
    return int(projected[at]), int(mem["capacity_bytes"].iloc[at])


def batch_memory(trace: Trace | Mapping[int, Trace], factor: float) -> pd.DataFrame:
    """Each GPU's peak allocated memory, measured and projected for ``factor`` times the batch (module doc).

    Parameters
    ----------
    trace : Trace or mapping of int to Trace
        A trace recorded with ``profile_memory=True`` (no rows without ``[memory]`` events), or a job's ranks.
    factor : float
        New batch over measured batch.

    Returns
    -------
    pandas.DataFrame
        One row per (rank, GPU): ``rank`` (-1 for a single trace), ``device``, ``peak_bytes`` (measured peak of
        the allocated total), ``fixed_bytes`` (the part that does not grow), ``batch_bytes`` (the part that does),
        ``projected_bytes`` and ``capacity_bytes`` (the GPU's memory; -1 when unknown).

    Raises
    ------
    ValueError
        When ``factor`` is not a finite number above 0.
    """
    if not (factor > 0 and np.isfinite(factor)):
        raise ValueError(f"factor must be a finite number > 0, not {factor!r}")
    if isinstance(trace, Trace):
        return _one(trace, float(factor), -1)
    if hasattr(trace, "map"):  # a lazy job: each rank read in its worker
        parts = [p.assign(rank=r) for r, p in trace.map(partial(_one, k=float(factor), rank=-1)).items()]
    else:
        parts = [_one(t, float(factor), int(r)) for r, t in trace.items()]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(COLUMNS))
