"""A trace's dependency graph closed in one kernel: forward edges kept, nodes numbered, edges grouped.

:func:`aonkit.analysis.depgraph.build_graph` (``numbered=True``) keeps the
edges that go forward in measured (start, node) order, numbers the nodes in
their start order and groups the edges by destination (CSR of incoming
edges). In numpy that is a mask, four gathers, a renumbering and
:func:`aonkit._kernels.dag.csr_by_dst`, each a pass over the edges with its
own temporary arrays; here it is two passes.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit


@njit
def forward_csr(n, start, pos, src, dst, lat, kind):
    """Forward edges, numbered by ``pos`` (node -> its new id) and grouped by new destination.

    Edge ``e`` is kept when ``start[src[e]] < start[dst[e]]``, or the starts are equal and ``src[e] < dst[e]``
    (ids before numbering). Returns ``(indptr[n + 1], src[k], lat[k], kind[k], dropped)``: the kept edges'
    new sources, latencies and kinds, those into one node in input order, and how many were left out.
    Raises ValueError on an endpoint outside ``[0, n)``.
    """
    m = src.shape[0]
    indptr = np.zeros(n + 1, np.int64)
    keep = np.zeros(m, np.bool_)
    kept = 0
    for e in range(m):
        s = src[e]
        d = dst[e]
        if s < 0 or s >= n or d < 0 or d >= n:
            raise ValueError("forward_csr: edge endpoint outside [0, n)")
        if start[s] < start[d] or (start[s] == start[d] and s < d):
            keep[e] = True
            indptr[pos[d] + 1] += 1
            kept += 1
    for v in range(n):
        indptr[v + 1] += indptr[v]
    fill = indptr[:n].copy()
    src_out = np.empty(kept, np.int64)
    lat_out = np.empty(kept, np.int64)
    kind_out = np.empty(kept, np.int8)
    for e in range(m):
        if keep[e]:
            d = pos[dst[e]]
            k = fill[d]
            fill[d] = k + 1
            src_out[k] = pos[src[e]]
            lat_out[k] = lat[e]
            kind_out[k] = kind[e]
    return indptr, src_out, lat_out, kind_out, m - kept
