"""The CPU call tree merged by call path, with the GPU time each path launched: the data of an icicle chart.

Every CPU-side complete event (ops, annotations, runtime calls) is a node of
its thread's stack (:func:`~aonkit.analysis.columns.op_stack`); events with
the same chain of names from the root, on any thread, merge into one path.
A path's CPU time is the sum of its events' durations (so it includes its
children); its GPU time is the time of the GPU events launched from it or
below it (through :func:`~aonkit.analysis.correlation.gpu_links`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Trace
from .columns import name_codes, op_stack

COLUMNS = ["node", "parent_node", "depth", "name", "calls", "cpu_ns", "self_cpu_ns", "gpu_ns", "x0_ns", "x1_ns"]


def _depths(parent: np.ndarray) -> np.ndarray:
    depth = np.zeros(len(parent), np.int64)
    up = parent.copy()
    while (up >= 0).any():
        has = up >= 0
        depth[has] += 1
        up = np.where(has, parent[np.maximum(up, 0)], -1)
    return depth


def op_tree(trace: Trace) -> pd.DataFrame:
    """One row per call path, nodes numbered root level first; laid out for an icicle.

    Returns
    -------
    pandas.DataFrame
        ``node``, ``parent_node`` (-1: a root), ``depth``, ``name``, ``calls``,
        ``cpu_ns`` (summed durations, children included), ``self_cpu_ns``
        (minus the children's), ``gpu_ns`` (GPU time launched from the path or
        below), and ``x0_ns``/``x1_ns``: the path's extent in an icicle where
        siblings sit side by side, longest first, inside their parent.
    """
    from .correlation import gpu_links

    rows, parent, _ = op_stack(trace)
    ev = trace.events
    n = len(rows)
    if n == 0:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else np.int64) for c in COLUMNS})
    codes, names = name_codes(ev["name"])
    code = codes[rows].astype(np.int64) + 1  # 0: no name
    width = len(names) + 1
    dur = np.maximum(ev["dur_ns"].to_numpy()[rows], 0)
    depth = _depths(parent)
    node = np.full(n, -1, np.int64)
    par, name, lvl = [], [], []
    for d in range(int(depth.max()) + 1):
        at = np.flatnonzero(depth == d)
        up = node[parent[at]] if d else np.full(len(at), -1, np.int64)
        keys, inv = np.unique(up * width + code[at], return_inverse=True)
        node[at] = len(par) + inv.ravel()
        par += (keys // width).tolist()
        name += (keys % width).tolist()
        lvl += [d] * len(keys)
    m = len(par)
    par_a, lvl_a = np.array(par, np.int64), np.array(lvl, np.int64)
    calls = np.bincount(node, minlength=m).astype(np.int64)
    cpu = np.zeros(m, np.int64)
    np.add.at(cpu, node, dur)
    # GPU time of each event's innermost op, then added up the tree (deepest level first)
    pos = np.full(len(ev), -1, np.int64)
    pos[rows] = np.arange(n)
    links = gpu_links(trace)
    op_row = links["op_row"].to_numpy()
    ok = op_row >= 0
    gpu = np.zeros(m, np.int64)
    launched = pos[op_row[ok]]
    keep = launched >= 0
    gdur = np.maximum(ev["dur_ns"].to_numpy()[links["gpu_row"].to_numpy()[ok]], 0)
    np.add.at(gpu, node[launched[keep]], gdur[keep])
    child_cpu = np.zeros(m, np.int64)
    for d in range(int(lvl_a.max()), 0, -1):
        at = np.flatnonzero(lvl_a == d)
        np.add.at(gpu, par_a[at], gpu[at])
        np.add.at(child_cpu, par_a[at], cpu[at])
    # icicle layout: per level, siblings longest first, each starting where the previous ended
    x0 = np.zeros(m, np.int64)
    for d in range(int(lvl_a.max()) + 1):
        at = np.flatnonzero(lvl_a == d)
        order = at[np.lexsort((at, -cpu[at], par_a[at]))]  # by parent, then longest first (ties: node id)
        p = par_a[order]
        start = np.where(p >= 0, x0[np.maximum(p, 0)], 0)
        csum = np.cumsum(cpu[order])
        first = np.r_[True, p[1:] != p[:-1]]
        base = np.maximum.accumulate(np.where(first, csum - cpu[order], 0))
        x0[order] = start + csum - cpu[order] - base
    label = np.array(["", *map(str, names)], dtype=object)
    return pd.DataFrame({"node": np.arange(m), "parent_node": par_a, "depth": lvl_a, "name": label[np.array(name)],
                         "calls": calls, "cpu_ns": cpu, "self_cpu_ns": cpu - child_cpu, "gpu_ns": gpu,
                         "x0_ns": x0, "x1_ns": x0 + cpu})  # fmt: skip
