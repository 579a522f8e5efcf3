"""What each node of a critical path is (its part), and the path's time by part, without building its table.

A path's part is ``gpu <kernel class>``, ``launch``, ``cpu``, ``host gap`` or ``collective wait``
(:func:`part_codes`). It is decided once per distinct (name, category) pair, not per node: a long path
(190,000 nodes on a 216,000-event trace) repeats a few hundred names. :func:`path_composition` sums a path's
durations by part as :func:`~aonkit.analysis.critical_path.composition` does from the path's table, for
``WhatIfPanel``'s bars, which need nothing else of the table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Trace
from .columns import name_codes, pair_keys
from .combine import CombinedLater
from .depgraph import KIND_GAP, KIND_GPU, KIND_HUB, DepGraph

GAP_PART, HUB_PART = "host gap", "collective wait"


def _name_cat_codes(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, pd.Index, np.ndarray, pd.Index]:
    """(name codes, names, category codes, categories) of the events ``rows``; code -1 is a missing value.

    From the columns' codes (:func:`~aonkit.analysis.columns.name_codes`) when the trace has its events; a job
    not yet combined reads each row from its rank (object arrays, factorized here).
    """
    if isinstance(trace, CombinedLater) and "_later" in trace.__dict__:
        names, cats = trace.names_and_cats(rows)
        (n_codes, n_vals), (c_codes, c_vals) = (pd.factorize(v, use_na_sentinel=True) for v in (names, cats))
        return n_codes, pd.Index(n_vals), c_codes, pd.Index(c_vals)
    (n_codes, n_vals), (c_codes, c_vals) = (name_codes(trace.events[c]) for c in ("name", "cat"))
    return n_codes[rows], n_vals, c_codes[rows], c_vals


def part_codes(trace: Trace, g: DepGraph, nodes: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Each path node's part as a code into the returned labels (distinct, in no particular order)."""
    from .kernels import kernel_class

    kind = g.kind[nodes]
    n_codes, n_vals, c_codes, c_vals = _name_cat_codes(trace, np.maximum(g.row[nodes], 0))
    keys, back = pair_keys(n_codes.astype(np.int64), c_codes.astype(np.int64))  # the one signature its callers use
    pairs, inv = np.unique(keys, return_inverse=True)
    labels: dict[str, int] = {GAP_PART: 0, HUB_PART: 1}
    gpu = np.empty(len(pairs), np.int64)
    cpu = np.empty(len(pairs), np.int64)
    for i, (n, c) in enumerate(zip(*back(pairs))):
        name, cat = (str(vals[k]) if k >= 0 else "nan" for vals, k in ((n_vals, n), (c_vals, c)))
        gpu[i] = labels.setdefault(f"gpu {kernel_class(cat, name)}", len(labels))
        cpu[i] = labels.setdefault("launch" if "Launch" in name else "cpu", len(labels))
    inv = inv.reshape(-1)
    codes = np.where(kind == KIND_GPU, gpu[inv], cpu[inv])
    codes[kind == KIND_GAP] = 0
    codes[kind == KIND_HUB] = 1
    return codes, list(labels)


def parts(trace: Trace, g: DepGraph, nodes: np.ndarray) -> np.ndarray:
    """Each path node's part, as an object array of labels."""
    codes, labels = part_codes(trace, g, nodes)
    return np.array(labels, dtype=object)[codes]


def path_composition(trace: Trace, g: DepGraph, nodes: np.ndarray, dur_ns: np.ndarray,
                     wait_ns: np.ndarray) -> pd.DataFrame:  # fmt: skip
    """Time of a critical path by part, waits apart: ``part`` (sorted), ``time_ns`` (int64), ``share``.

    The same table as :func:`~aonkit.analysis.critical_path.composition` of the path's table (tested), from
    the path's nodes, durations and the latencies of the edges into them.
    """
    codes, labels = part_codes(trace, g, nodes)
    present = sorted((labels[k], k) for k in np.unique(codes).tolist())
    dur = np.asarray(dur_ns, dtype=np.int64)
    times = [int(dur[codes == k].sum()) for _, k in present]
    waits = int(np.clip(np.asarray(wait_ns, dtype=np.int64), 0, None).sum())
    out = pd.DataFrame({"part": [p for p, _ in present] + ["waits"],
                        "time_ns": np.array([*times, waits], dtype=np.int64)})  # fmt: skip
    out["share"] = out["time_ns"] / (int(out["time_ns"].sum()) or 1)
    return out
