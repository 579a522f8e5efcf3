"""The dependency graph of a job: the ranks on one clock, their matched collectives tied together.

The ranks are combined (:func:`aonkit.analysis.combine.combine_ranks`) and
the single-rank graph (:mod:`aonkit.analysis.depgraph`) is built over them;
then each collective matched across ranks
(:func:`aonkit.analysis.comm_match.matched`) becomes:

- each rank's kernel keeps its start (the rank's *arrival*) and no length;
- a **hub** node, measured at the last arrival, that every arrival leads to;
- per rank a **transfer** node after the hub, as long as the rank's kernel
  outlived the last arrival; whatever followed the kernel now follows it.

So a collective ends when its last rank arrives plus the transfer: a
straggler made faster moves every rank's collective, and a rule on
communication kernels scales the transfers.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..trace import Trace
from .collectives import comm_kernels
from .combine import combine_ranks
from .comm_match import assign_keys, matched
from .depgraph import KIND_GPU, KIND_HUB, DepGraph, build_graph


def build_job_graph(job: Mapping[int, Trace]) -> tuple[Trace, DepGraph]:
    """The combined trace of ``job`` and its dependency graph, collectives tied across ranks."""
    ranks = sorted(job)
    combined = combine_ranks(job)
    base = dict(zip(ranks, np.cumsum([0, *(len(job[r].events) for r in ranks[:-1])])))
    per = {}
    for r in ranks:
        ck = comm_kernels(job[r])
        per[r] = ck.assign(row=ck.index.to_numpy(np.int64) + int(base[r]))
    m = matched(assign_keys(per)) if per else pd.DataFrame()

    def hubs(nodes: dict, node_of_row: np.ndarray, srcs: list, dsts: list, lats: list, kinds: list) -> dict:
        if m.empty or "row" not in m:
            return nodes
        n0 = len(nodes["kind"])
        src_all = np.concatenate(srcs).astype(np.int64) if srcs else np.empty(0, np.int64)
        new = {k: [] for k in nodes}
        moved = np.arange(n0, dtype=np.int64)  # kernel node -> its transfer node
        add_src, add_dst = [], []
        nxt = n0
        for _, g in m.groupby(["group", "seq"], sort=False):
            k = node_of_row[g["row"].to_numpy(np.int64)]
            if (k < 0).any():
                continue
            arrival = nodes["start_ns"][k]
            end = arrival + nodes["dur_ns"][k]
            last = int(arrival.max())
            hub = nxt
            new["kind"].append(KIND_HUB), new["row"].append(-1), new["lane"].append(-1)
            new["start_ns"].append(last), new["dur_ns"].append(0)
            add_src += list(k)
            add_dst += [hub] * len(k)
            for i, node in enumerate(k):
                x = hub + 1 + i
                new["kind"].append(KIND_GPU), new["row"].append(nodes["row"][node])
                new["lane"].append(nodes["lane"][node]), new["start_ns"].append(last)
                new["dur_ns"].append(max(0, int(end[i] - last)))
                moved[node] = x
                add_src.append(hub), add_dst.append(x)
            nodes["dur_ns"][k] = 0
            nxt = hub + 1 + len(k)
        if nxt == n0:
            return nodes
        srcs[:] = [moved[src_all]]  # what followed a kernel now follows its transfer
        srcs.append(np.array(add_src, np.int64)), dsts.append(np.array(add_dst, np.int64))
        lats.append(np.zeros(len(add_src), np.int64)), kinds.append(np.full(len(add_src), 5))
        return {key: np.concatenate([nodes[key], np.array(new[key], dtype=nodes[key].dtype)]) for key in nodes}

    return combined, build_graph(combined, hubs)
