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
from .combine import CombinedLater
from .depgraph import KIND_GAP, KIND_GPU, KIND_HUB, DepGraph

GAP_PART, HUB_PART = "host gap", "collective wait"


def _name_cat_codes(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(name codes, names, category codes, categories) of the events ``rows``; a missing value is ``nan``.

    From the columns' categorical codes when the trace has its events; a job not yet combined reads each row
    from its rank (object arrays, factorized here).
    """
    if isinstance(trace, CombinedLater) and "_later" in trace.__dict__:
        names, cats = trace.names_and_cats(rows)
        n_codes, n_uniq = pd.factorize(names, use_na_sentinel=False)
        c_codes, c_uniq = pd.factorize(cats, use_na_sentinel=False)
        return n_codes, np.asarray(n_uniq, dtype=object), c_codes, np.asarray(c_uniq, dtype=object)
    out = []
    for col in (trace.events["name"].array, trace.events["cat"].array):
        values = np.append(np.asarray(col.categories, dtype=object), np.nan)
        out += [np.asarray(col.codes)[rows].astype(np.int64) % len(values), values]  # code -1 reads the NaN
    return out[0], out[1], out[2], out[3]


def part_codes(trace: Trace, g: DepGraph, nodes: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Each path node's part as a code into the returned labels (distinct, in no particular order)."""
    from .kernels import kernel_class

    kind = g.kind[nodes]
    n_codes, n_vals, c_codes, c_vals = _name_cat_codes(trace, np.maximum(g.row[nodes], 0))
    width = max(len(c_vals), 1)
    pairs, inv = np.unique(n_codes.astype(np.int64) * width + c_codes, return_inverse=True)
    labels: dict[str, int] = {GAP_PART: 0, HUB_PART: 1}
    gpu = np.empty(len(pairs), np.int64)
    cpu = np.empty(len(pairs), np.int64)
    for i, p in enumerate(pairs.tolist()):
        name, cat = str(n_vals[p // width]), str(c_vals[p % width])
        gpu[i] = labels.setdefault(f"gpu {kernel_class(cat, name)}", len(labels))
        cpu[i] = labels.setdefault("launch" if "Launch" in name else "cpu", len(labels))
    inv = inv.reshape(-1)
    codes = np.where(kind == KIND_GPU, gpu[inv] if len(pairs) else 0, cpu[inv] if len(pairs) else 0)
    codes[kind == KIND_GAP] = 0
    codes[kind == KIND_HUB] = 1
    return codes.astype(np.int64), list(labels)


def parts(trace: Trace, g: DepGraph, nodes: np.ndarray) -> np.ndarray:
    """Each path node's part, as an object array of labels."""
    codes, labels = part_codes(trace, g, nodes)
    return np.array(labels, dtype=object)[codes] if len(nodes) else np.empty(0, dtype=object)


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
