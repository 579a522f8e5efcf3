"""Launch-queue counters per stream: +1 at a launch call, -1 when its GPU event starts.

The events (``e_ts``, ``e_step``) come from
:func:`aonkit.analysis.hta_queues.queue_events`, their order from
``pos``/``offsets`` (per stream, in time order). Loops index with
``range(n)`` from 0 or ``np.uintp`` (see :mod:`.keys`).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit


@njit
def queue_rows(stream, ts, corr, codes, is_api, linked, use_linked):
    """GPU rows (correlation, ts, stream) and launch-API rows (correlation, ts) of one rank, in row order.

    GPU rows are ``stream != -1``; an API row is a CPU-side row with
    ``is_api[codes[i]]`` (a flag per name code; code -1 reads the last flag)
    and, with ``use_linked``, ``linked[i] > 0`` (else ``linked`` is not read).
    One pass. Returns (gpu corr, gpu ts, gpu stream, api corr, api ts).
    """
    n = stream.shape[0]
    last = np.uintp(is_api.shape[0] - 1)
    g = np.empty((3, n), np.int64)
    a = np.empty((2, n), np.int64)
    m = np.uintp(0)
    q = np.uintp(0)
    for i in range(n):
        c = codes[i]
        gpu = stream[i] != -1
        api = (not gpu) and is_api[last if c < 0 else np.uintp(c)] and (not use_linked or linked[i] > 0)
        g[0, m] = corr[i]  # branch-free: every row is written to both, the counts keep what belongs
        g[1, m] = ts[i]
        g[2, m] = stream[i]
        a[0, q] = corr[i]
        a[1, q] = ts[i]
        m += np.uintp(gpu)
        q += np.uintp(api)
    return g[0, :m], g[1, :m], g[2, :m], a[0, :q], a[1, :q]


@njit
def queue_event_arrays(up_ts, up_stream, launched, g_ts, g_stream, counted):
    """The counter's events (ts, stream, step): the ``launched`` launches (+1), then the ``counted`` GPU rows (-1).

    Each in its input order; two branch-free compaction passes.
    """
    n_up = 0
    for j in range(launched.shape[0]):
        n_up += launched[j]
    n = n_up
    for j in range(counted.shape[0]):
        n += counted[j]
    e_ts = np.empty(n + 1, np.int64)  # + 1: every row is written, the flags say which stay
    e_stream = np.empty(n + 1, np.int64)
    e_step = np.empty(n, np.int64)
    k = np.uintp(0)
    for j in range(launched.shape[0]):
        e_ts[k] = up_ts[j]
        e_stream[k] = up_stream[j]
        k += np.uintp(launched[j])
    for j in range(counted.shape[0]):
        e_ts[k] = g_ts[j]
        e_stream[k] = g_stream[j]
        k += np.uintp(counted[j])
    for j in range(n):
        e_step[j] = 1 if j < n_up else -1
    return e_ts[:n], e_stream[:n], e_step


@njit
def queue_table(rank, e_ts, e_step, pos, offsets, streams):
    """Rows (rank, ts, stream, queue length) of the counter, restarted per stream; shape (4, events)."""
    out = np.empty((4, pos.shape[0]), np.int64)
    out[0] = rank
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        seg = pos[lo : offsets[s + 1]]
        acc = 0
        for k in range(seg.shape[0]):
            j = np.uintp(seg[k])
            acc += e_step[j]
            out[1, np.uintp(lo + k)] = e_ts[j]
            out[2, np.uintp(lo + k)] = streams[s]
            out[3, np.uintp(lo + k)] = acc
    return out


@njit
def levels(e_step, pos, offsets):
    """Running sum of ``e_step`` in the order ``pos``, restarted at each stream's offset."""
    out = np.empty(pos.shape[0], np.int64)
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        seg = pos[lo : offsets[s + 1]]
        acc = 0
        for k in range(seg.shape[0]):
            acc += e_step[np.uintp(seg[k])]
            out[np.uintp(lo + k)] = acc
    return out
