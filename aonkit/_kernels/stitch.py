"""One rank's graph written into a job graph's arrays (:mod:`aonkit.analysis.depgraph_stitch`'s second pass).

A rank's nodes go to new ids ``nw`` and its edges to their destinations' new
places in the job's CSR of incoming edges; an edge from a collective's kernel
(``moved[src] >= 0``) leaves its transfer instead, and dropped edges are left
out. Ranks write disjoint places, so several run at once on threads (the
kernel holds no GIL); each thread also first-touches the pages it writes,
which is most of the cost on a new job's arrays.
"""

from __future__ import annotations

from ._jit import njit
from .dag import NO_RELEASE

_CPU, _GAP, _GPU = 0, 1, 2  # aonkit.analysis.depgraph's node kinds


@njit
def place_rank(nw, moved, keep, kind_in, row_in, lane_in, start_in, dur_in, indptr_in, src_in, lat_in, ekind_in,
               pid_map, tid_map, meta, indptr, kind, row, lane, start, dur, release, rank, src, lat, edge_kind):
    """Write one rank's nodes and edges into the job's arrays.

    ``meta`` is ``(row_base, shift_ns, rank)``. Lanes: a CPU or gap node's ``pid << 32 | tid`` codes through
    ``pid_map``/``tid_map`` (whose last entry, -1, stands for a code beyond them); a GPU node's stream gets the
    rank in bits 48 and up. A collective's kernel (``moved[v] >= 0``) keeps no length (its transfer has it).
    A node left with no incoming edge is released at its start. Returns the number of edges written.
    """
    row_base, shift, r = meta[0], meta[1], meta[2]
    n_tid = tid_map.shape[0]
    written = 0
    for v in range(nw.shape[0]):
        w = nw[v]
        k = kind_in[v]
        kind[w] = k
        x = row_in[v]
        row[w] = x + row_base if x >= 0 else -1
        ln = lane_in[v]
        if (k == _CPU or k == _GAP) and ln != -1:
            t = ln & 0xFFFFFFFF
            if t >= n_tid - 1:
                t = n_tid - 1
            ln = (pid_map[ln >> 32] << 32) | tid_map[t]
        elif k == _GPU:
            ln = ln | (r << 48)
        lane[w] = ln
        st = start_in[v] - shift
        start[w] = st
        dur[w] = 0 if moved[v] >= 0 else dur_in[v]
        rank[w] = r
        pos = indptr[w]
        for e in range(indptr_in[v], indptr_in[v + 1]):
            if keep[e]:
                s = src_in[e]
                src[pos] = moved[s] if moved[s] >= 0 else nw[s]
                lat[pos] = lat_in[e]
                edge_kind[pos] = ekind_in[e]
                pos += 1
        written += pos - indptr[w]
        release[w] = st if pos == indptr[w] else NO_RELEASE
    return written
