"""Waits between streams that the trace does not record, inferred from when a GPU event starts.

A GPU event that starts more than dispatch time (:data:`~aonkit.analysis.depgraph_sync.QUEUED_NS`) after its
stream predecessor ended, and after its launch returned, waited for something. Kineto's ``Stream Wait Event``
rows name a ``cudaStreamWaitEvent``'s streams, but many traces have none (none of the 17 shared GPU traces with
steps, nor the bundled sample traces); without them the wait was charged to the launch (a GPU-side wait pinned
to host time) or to the stream (a fixed gap). When the event starts within dispatch time of the end of an event
on another stream of its device (DDP's compute stream resuming as the all-reduce ends), that event is taken as
the one it waited for: a stream-wait edge (kind 4) with the measured gap, provided such starts follow that
stream's ends far more often than chance would have them (:data:`ODDS`, against control windows
:data:`CONTROL_NS` earlier). On the shared traces: ``df_index_resolver`` 1,966 of 2,140 unexplained starts
follow another stream's end within 5 µs against 16-305 in the control windows (kept); ``trace_diff/test`` 87
against 49-66 (chance: 14 kept, of its stream pairs that beat the odds). The rest of the unexplained starts (a
sampled trace's missing events) stay as they were.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .depgraph_sync import QUEUED_NS

NONE = np.iinfo(np.int64).min
CONTROL_NS = (10_000, 20_000, 50_000)
"""Windows as wide as dispatch time, this long before the start: how often another stream's end falls near a
start by chance."""
ODDS = 4
"""A stream pair's waits are kept when starts follow the other stream's ends at least this many times more often
right after them than in a control window (on average); and at least :data:`MIN_HITS` times."""
MIN_HITS = 2


def inferred_waits(g_lane: np.ndarray, g_ts: np.ndarray, g_end: np.ndarray, prev_end: np.ndarray,
                   launched_at: np.ndarray, gpu_node: np.ndarray, srcs: list, dsts: list, lats: list,
                   kinds: list) -> np.ndarray:  # fmt: skip
    """Stream-wait edges for GPU events whose start nothing else explains (appended to the edge lists).

    Parameters
    ----------
    g_lane, g_ts, g_end : numpy.ndarray
        Per GPU event: its lane (``device << 32 | stream``, a job's rank above), start and end.
    prev_end : numpy.ndarray
        The end of what it is known to follow (stream predecessor, recorded stream wait; int64 min: none).
    launched_at : numpy.ndarray
        When its launch call returned (int64 min: no launch in the trace).
    gpu_node : numpy.ndarray
        Each GPU event's node.

    Returns
    -------
    numpy.ndarray
        Per GPU event the end of the event it is inferred to wait for (int64 min: none).
    """
    out = np.full(len(g_lane), NONE, np.int64)
    known = np.maximum(prev_end, launched_at)  # NONE: first on its stream and not launched in the trace
    # g_ts - known > QUEUED_NS, without subtracting NONE (int64 overflow)
    late = (known > NONE) & (g_ts - np.maximum(known, g_ts - 2 * QUEUED_NS) > QUEUED_NS) & (g_end > g_ts)
    cand = np.flatnonzero(late)
    if not len(cand):
        return out
    from .._kernels.step_nodes import latest_other_end

    dev = g_lane >> 32
    order = np.lexsort((g_end, dev))
    dev_s = dev[order]
    group_lo = np.searchsorted(dev_s, dev[cand], "left")
    group_hi = np.searchsorted(dev_s, dev[cand], "right")
    end_s, lane_s, c_lane = g_end[order], g_lane[order], g_lane[cand]

    def other_end(shift: int) -> np.ndarray:
        """Per candidate, the other stream's event ending last in the window ``shift`` ns before it (-1: none)."""
        at = g_ts[cand] - shift
        pos = latest_other_end(dev_s, end_s, lane_s, group_lo, group_hi, c_lane, at - QUEUED_NS, at)
        return np.where(pos >= 0, order[np.maximum(pos, 0)], -1)

    code, lanes = pd.factorize(g_lane)  # stream pairs as small integers
    n_pairs = len(lanes) * len(lanes)

    def pair_of(src: np.ndarray) -> np.ndarray:
        """Per candidate, its (waiting lane, other lane) pair's number (-1: no source)."""
        return np.where(src >= 0, code[cand] * len(lanes) + code[np.maximum(src, 0)], -1)

    def counts(pair: np.ndarray) -> np.ndarray:
        return np.bincount(pair[pair >= 0], minlength=n_pairs)

    src = other_end(0)
    pair = pair_of(src)
    # a stream pair's waits are kept when its starts follow the other stream's ends far more often right after
    # them than in the windows CONTROL_NS before: on a busy multi-stream GPU they otherwise meet by chance
    hits = counts(pair)
    chance = sum(counts(pair_of(other_end(shift))) for shift in CONTROL_NS) / len(CONTROL_NS)
    keep = (hits >= MIN_HITS) & (hits >= ODDS * chance)
    hit = (pair >= 0) & keep[np.maximum(pair, 0)]
    i, j = cand[hit], src[hit]
    out[i] = g_end[j]
    srcs.append(gpu_node[j]), dsts.append(gpu_node[i]), lats.append(g_ts[i] - g_end[j])
    kinds.append(np.full(len(i), 4))
    return out
