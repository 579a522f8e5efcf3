"""Launch-queue counters per stream: +1 at a launch call, -1 when its GPU event starts.

Rows are events of one rank: ``stream`` (-1 on the CPU side), ``ts``,
``corr`` (correlation), ``is_api`` (CPU rows that are launch calls).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .keys import compact, group_rows


@njit
def queue_events(stream, ts, corr, is_api):
    """The +1/-1 events of HTA's queue length: launches first, then GPU starts, each in row order.

    Launches are CPU-side ``is_api`` rows whose correlation some GPU row has;
    their stream is that of the first such GPU row. GPU rows count when a
    launch has their correlation. Returns (ts, stream, step) of the events.
    """
    n = stream.shape[0]
    slot, lo, size = compact(corr, (stream != -1) | is_api)
    has_gpu = np.zeros(size, np.bool_)
    gpu_stream = np.zeros(size, np.int64)
    for i in range(n):
        if stream[i] != -1 and not has_gpu[slot[i] - lo]:
            has_gpu[slot[i] - lo] = True
            gpu_stream[slot[i] - lo] = stream[i]
    launched = np.zeros(size, np.bool_)
    n_launch = 0
    for i in range(n):
        if is_api[i] and stream[i] == -1 and has_gpu[slot[i] - lo]:
            launched[slot[i] - lo] = True
            n_launch += 1
    n_gpu = 0
    for i in range(n):
        if stream[i] != -1 and launched[slot[i] - lo]:
            n_gpu += 1
    e_ts = np.empty(n_launch + n_gpu, np.int64)
    e_stream = np.empty(n_launch + n_gpu, np.int64)
    e_step = np.empty(n_launch + n_gpu, np.int64)
    a = 0
    b = n_launch
    for i in range(n):
        j = slot[i] - lo
        if stream[i] == -1:
            if is_api[i] and has_gpu[j]:
                e_ts[a], e_stream[a], e_step[a] = ts[i], gpu_stream[j], 1
                a += 1
        elif launched[j]:
            e_ts[b], e_stream[b], e_step[b] = ts[i], stream[i], -1
            b += 1
    return e_ts, e_stream, e_step


@njit
def by_stream(order, e_stream):
    """``order`` split by stream, ascending stream values, keeping ``order``'s sequence in a stream.

    Returns (positions, offsets, stream values).
    """
    return group_rows(e_stream, order, True, e_stream, False)


@njit
def stable_time_order(e_ts, e_stream, e_step):
    """Events grouped by stream (ascending), stably by time within one; and whether ties matter.

    ``mixed_ties`` tells whether a stream has a launch and a GPU start at the
    same time: then the order of those ties changes the counter.
    Returns (positions, offsets, stream values, mixed_ties).
    """
    pos, offsets, streams = group_rows(e_stream, np.arange(e_stream.shape[0]), True, e_ts, True)
    mixed = False
    for s in range(streams.shape[0]):
        for k in range(offsets[s] + 1, offsets[s + 1]):
            if e_ts[pos[k]] == e_ts[pos[k - 1]] and e_step[pos[k]] != e_step[pos[k - 1]]:
                mixed = True
    return pos, offsets, streams, mixed


@njit
def queue_table(rank, e_ts, e_step, pos, offsets, streams):
    """Rows (rank, ts, stream, queue length) of the counter, restarted per stream; shape (4, events)."""
    out = np.empty((4, pos.shape[0]), np.int64)
    for s in range(offsets.shape[0] - 1):
        acc = 0
        for k in range(offsets[s], offsets[s + 1]):
            acc += e_step[pos[k]]
            out[0, k] = rank
            out[1, k] = e_ts[pos[k]]
            out[2, k] = streams[s]
            out[3, k] = acc
    return out
