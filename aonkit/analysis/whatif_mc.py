"""Monte Carlo what-if: step times when every kernel takes a duration drawn from its name's measured ones.

Each sample redraws, for every GPU node, a duration from the measured
durations of the GPU nodes that share its event name (uniformly, with
replacement), applies the rules' factors and re-times the graph. The spread of
the resulting step times says how much of a what-if answer is the luck of one
recorded step. CPU segments and host gaps keep their (scaled) lengths.
"""

from __future__ import annotations

import numpy as np

from .depgraph import KIND_GPU, DepGraph


def sampler_groups(trace_names: np.ndarray, g: DepGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(nodes, sorted_durations, group_start, group_size)``: the GPU nodes and, per node, its name's pool.

    ``trace_names`` are the name codes of the events table (one per row).
    """
    nodes = np.flatnonzero((g.kind == KIND_GPU) & (g.row >= 0))
    codes = trace_names[g.row[nodes]].astype(np.int64)
    order = np.argsort(codes, kind="stable")
    sorted_codes, sorted_dur = codes[order], g.dur_ns[nodes][order]
    first = np.searchsorted(sorted_codes, codes, side="left")
    size = np.searchsorted(sorted_codes, codes, side="right") - first
    return nodes, sorted_dur, first, size


def step_time_samples(g: DepGraph, trace_names: np.ndarray, factor: np.ndarray, inside: np.ndarray, samples: int,
                      seed: int = 0) -> np.ndarray:  # fmt: skip
    """``samples`` step times (ns) of the window ``inside``, durations drawn per kernel name (see the module doc)."""
    from .._kernels.dag import schedule

    rng = np.random.default_rng(seed)
    nodes, pool, first, size = sampler_groups(trace_names, g)
    out = np.empty(samples, np.int64)
    dur = g.dur_ns.astype(np.float64) * factor
    for k in range(samples):
        d = dur.copy()
        pick = first + (rng.random(len(nodes)) * size).astype(np.int64)
        d[nodes] = pool[pick] * factor[nodes]
        start, finish, _, _ = schedule(g.order, g.indptr, g.src, g.lat_ns, np.rint(d).astype(np.int64), g.release_ns)
        out[k] = finish[inside].max() - start[inside].min()
    return out
