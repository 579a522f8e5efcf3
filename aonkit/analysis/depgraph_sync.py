"""The dependency graph's waits: host syncs and cross-stream waits (see :mod:`aonkit.analysis.depgraph`).

Each wait is answered by a binary search in the GPU events of its process
or stream, sorted once, so a job of many ranks costs linear time (a scan of
every GPU event per wait made 64 ranks' graphs quadratic).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..trace import Trace
from .columns import in_categories, name_flags, thread_keys

SYNC_CALLS = frozenset({"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
                        "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize"})
QUEUED_NS = 5000
"""A GPU event that starts within this of its predecessor's end (stream order or a stream wait) was queued
behind it; the measured gap, the GPU's dispatch time, stays on the edge."""


class Groups:
    """Items sorted by (group key, value, position): the items of a key with values in a range, by search."""

    def __init__(self, key: np.ndarray, value: np.ndarray) -> None:
        self.order = np.lexsort((np.arange(len(key)), value, key))
        self.key, self.value = key[self.order], value[self.order]

    def range(self, key: int, lo: int, hi: int, *, lo_open: bool = False) -> tuple[int, int]:
        """Sorted positions ``[a, b)`` of the items of ``key`` with ``lo <= value <= hi`` (``lo <`` if ``lo_open``)."""
        k0 = int(np.searchsorted(self.key, key, "left"))
        k1 = int(np.searchsorted(self.key, key, "right"))
        v = self.value[k0:k1]
        a = int(np.searchsorted(v, lo, "right" if lo_open else "left"))
        return k0 + a, k0 + int(np.searchsorted(v, hi, "right"))


def stream_wait_edges(trace: Trace, links: pd.DataFrame, gpu_node: np.ndarray, srcs: list, dsts: list,
                      lats: list, kinds: list) -> np.ndarray:  # fmt: skip
    """``cudaStreamWaitEvent``: the waiting stream's next GPU event waits for the recorded stream's last one.

    Returns, per GPU event (``links`` order), the latest end of a GPU event it waits for (int64 min: none).

    From Kineto's ``Stream Wait Event`` rows (``cat`` ``cuda_sync``): the event was recorded by the
    ``cudaEventRecord`` call whose correlation the row names, on stream ``wait_on_stream``; the source is
    the GPU event on that stream whose launch call started last at or before the record; the destination
    is the first GPU event on the waiting stream launched, from the waiting call's thread, after the call.
    Ties go to the first GPU event in ``links`` order.
    """
    ev = trace.events
    waited = np.full(len(links), np.iinfo(np.int64).min, np.int64)
    waits = np.flatnonzero(in_categories(ev["cat"], {"cuda_sync"}) & in_categories(ev["name"], {"Stream Wait Event"}))
    if not len(waits) or not len(links):
        return waited
    a = trace.arg_ints_of(("stream", "wait_on_stream", "wait_on_cuda_event_record_corr_id", "correlation"), waits)
    if "rank" in ev.columns:  # a combined job shifts each rank's correlations; the args keep the file's
        from .combine import ID_SHIFT

        shift = (ev["rank"].to_numpy()[waits] + 1) << ID_SHIFT
        for key in ("wait_on_cuda_event_record_corr_id", "correlation"):
            a[key] = np.where(a[key] >= 0, a[key] + shift, a[key])
    corr = ev["correlation"].to_numpy()
    named = np.concatenate([a["wait_on_cuda_event_record_corr_id"], a["correlation"]])
    hit = np.flatnonzero(in_categories(ev["cat"], schema.RUNTIME_CATS) & np.isin(corr, named[named >= 0]))
    ids, first = np.unique(corr[hit], return_index=True)  # the calls the waits name: the first row per id

    def call_of(x: np.ndarray) -> np.ndarray:
        """The first runtime call's row with correlation ``x`` (float; NaN where none)."""
        if not len(ids):
            return np.full(len(x), np.nan)
        i = np.minimum(np.searchsorted(ids, x), len(ids) - 1)
        return np.where((ids[i] == x) & (x >= 0), hit[first[i]], np.nan)
    g_rows, launch = links["gpu_row"].to_numpy(), links["launch_row"].to_numpy()
    ts, dur = ev["ts_ns"].to_numpy(), ev["dur_ns"].to_numpy()
    g_dev = ev["device"].to_numpy()[g_rows].astype(np.int64)
    dev_of_wait = ev["device"].to_numpy()[waits].astype(np.int64)
    if "rank" in ev.columns:  # a combined job: a stream is (rank, device, stream)
        g_dev = g_dev + (ev["rank"].to_numpy()[g_rows].astype(np.int64) << 32)
        dev_of_wait = dev_of_wait + (ev["rank"].to_numpy()[waits].astype(np.int64) << 32)
    l_ts = np.where(launch >= 0, ts[np.maximum(launch, 0)], np.iinfo(np.int64).max)
    # GPU events ordered by (stream, launch start); a wait's searches run in its stream's slice of that order
    dev_codes, devs = pd.factorize(g_dev)
    stream_codes, streams = pd.factorize(ev["stream"].to_numpy()[g_rows])
    code = dev_codes.astype(np.int64) * len(streams) + stream_codes
    order = np.lexsort((np.arange(len(code)), l_ts, code))
    code_s, lts_s = code[order], l_ts[order]

    def code_of(dev: np.ndarray, stream: np.ndarray) -> np.ndarray:
        d, st = pd.Index(devs).get_indexer(dev), pd.Index(streams).get_indexer(stream)
        return np.where((d >= 0) & (st >= 0), d.astype(np.int64) * len(streams) + st, -1)

    def find(c: np.ndarray, t: np.ndarray, side: str) -> tuple[np.ndarray, np.ndarray]:
        """Per query: the end of stream ``c``'s slice, and where launch start ``t`` goes in it (``side``)."""
        lo, hi = np.searchsorted(code_s, c, "left"), np.searchsorted(code_s, c, "right")
        pos = lo.copy()
        for u in np.unique(c):  # a few streams
            q = np.flatnonzero(c == u)
            a, b = lo[q[0]], hi[q[0]]
            pos[q] = a + np.searchsorted(lts_s[a:b], t[q], side)
        return hi, pos

    rec, call = call_of(a["wait_on_cuda_event_record_corr_id"]), call_of(a["correlation"])
    s_code, d_code = code_of(dev_of_wait, a["wait_on_stream"]), code_of(dev_of_wait, a["stream"])
    ok = ~np.isnan(rec) & ~np.isnan(call) & (s_code >= 0) & (d_code >= 0)
    rec, call = np.where(ok, rec, 0).astype(np.int64), np.where(ok, call, 0).astype(np.int64)
    # source: the last launched at or before the record on the recorded stream, then the first of its equals
    _, after = find(s_code, ts[rec], "right")
    s_pos = after - 1
    ok &= (s_pos >= 0) & (code_s[np.maximum(s_pos, 0)] == s_code)
    s_pos = np.maximum(s_pos, 0)
    s_pos = find(s_code, lts_s[s_pos], "left")[1]
    # destination: the first event on the waiting stream launched after the call, from the call's thread
    d_hi, d_lo = find(d_code, ts[call], "right")
    want = thread_keys(ev, call)

    def launch_thread(pos: np.ndarray) -> np.ndarray:
        lr = launch[order[pos]]
        return np.where(lr >= 0, thread_keys(ev, np.maximum(lr, 0)), -1)

    d_pos = np.full(len(waits), -1, np.int64)
    cand = np.flatnonzero(ok & (d_lo < d_hi))
    hit = launch_thread(d_lo[cand]) == want[cand]  # almost always the first one; else the first of the thread's
    d_pos[cand[hit]] = d_lo[cand[hit]]
    for k in cand[~hit]:
        mine = np.flatnonzero(launch_thread(np.arange(d_lo[k], d_hi[k])) == want[k])
        d_pos[k] = d_lo[k] + mine[0] if len(mine) else -1
    ok &= d_pos >= 0
    s_i, d_i = order[s_pos[ok]], order[d_pos[ok]]
    g_end = ts[g_rows[s_i]] + np.maximum(dur[g_rows[s_i]], 0)
    gap = ts[g_rows[d_i]] - g_end
    srcs.append(gpu_node[s_i]), dsts.append(gpu_node[d_i])
    # a gap past dispatch time is another edge's to explain; a source that ended after the start (a mismatched
    # row or clock) keeps that overlap as a negative latency: the identity then starts every event when measured
    lats.append(np.where(gap <= QUEUED_NS, gap, 0)), kinds.append(np.full(len(s_i), 4))
    np.maximum.at(waited, d_i, g_end)
    return waited


def _sync_rows(trace: Trace, g_rows: np.ndarray) -> tuple[dict[int, int], np.ndarray]:
    """From Kineto's ``cuda_sync`` rows: the stream each sync call waited on, by the call's correlation.

    ``Stream Sync`` names the stream (``stream``), ``Event Sync`` the recorded one (``wait_on_stream``);
    ``Context Sync`` waits for every stream and adds nothing. Streams are keyed as
    ``(rank, device, stream)``; returns that key per GPU event too.
    """
    ev = trace.events
    rank = ev["rank"].to_numpy() if "rank" in ev.columns else np.zeros(len(ev), np.int64)
    key = (rank << 40) | ((ev["device"].to_numpy() & 0xFF) << 32) | (ev["stream"].to_numpy() & 0xFFFFFFFF)
    syncs = in_categories(ev["cat"], {"cuda_sync"}) & in_categories(ev["name"], {"Stream Sync", "Event Sync"})
    rows = np.flatnonzero(syncs)
    out: dict[int, int] = {}
    if len(rows):
        waited = trace.arg_ints("wait_on_stream", rows)
        stream = np.where(ev["name"].to_numpy()[rows] == "Event Sync", waited, ev["stream"].to_numpy()[rows])
        k = (rank[rows] << 40) | ((ev["device"].to_numpy()[rows] & 0xFF) << 32) | (stream & 0xFFFFFFFF)
        corr = ev["correlation"].to_numpy()[rows]
        out = {int(c): int(x) for c, x, s in zip(corr, k, stream) if c >= 0 and s >= 0}
    return out, key[g_rows]


def sync_edges(trace: Trace, nodes: dict, last_seg: np.ndarray, gpu_node: np.ndarray, g_rows: np.ndarray,
               g_ts: np.ndarray, g_end: np.ndarray, launch: np.ndarray, srcs: list, dsts: list, lats: list,
               kinds: list, dur: np.ndarray) -> dict[int, int]:  # fmt: skip
    """Blocking calls wait for the latest-ending GPU event of their process launched before them.

    A call whose own copy ran entirely inside it (``cudaMemcpy``, or a pageable ``cudaMemcpyAsync`` that
    blocked) waits for that copy. Returns ``{segment: call start}`` of the blocking copies' calls, whose
    launch edges :func:`aonkit.analysis.depgraph._relaunch` moves. Among GPU events ending at the same
    time, the first in ``g_rows`` order is waited for.
    """
    ev = trace.events
    is_rt = in_categories(ev["cat"], schema.RUNTIME_CATS)
    copy_of = np.full(len(ev), -1, np.int64)
    copy_of[launch[launch >= 0]] = np.flatnonzero(launch >= 0)
    cand = np.flatnonzero(is_rt & (last_seg >= 0))
    name_codes, is_sync = name_flags(ev["name"], SYNC_CALLS)
    sync_code = is_sync[name_codes[cand]]
    if not len(cand) or not len(g_rows):
        return {}
    # a call that launched a copy blocks when the copy ran entirely inside it (a kernel launch never does)
    own = copy_of[cand]
    o = np.maximum(own, 0)
    c_ts_all = ev["ts_ns"].to_numpy()[cand]
    c_end_all = c_ts_all + np.maximum(ev["dur_ns"].to_numpy()[cand], 0)
    inside = (own >= 0) & (c_ts_all <= g_ts[o]) & (g_end[o] <= c_end_all)
    launch_name = np.append(np.array(["Launch" in str(x) for x in ev["name"].array.categories], bool), False)
    inside &= ~launch_name[name_codes[cand]]
    calls, copy_inside = cand[sync_code | inside], inside[sync_code | inside]
    woken: dict[int, int] = {}
    if not len(calls) or not len(g_rows):
        return woken
    blocking = is_sync[name_codes[calls]]
    c_ts = ev["ts_ns"].to_numpy()[calls]
    c_end = c_ts + np.maximum(ev["dur_ns"].to_numpy()[calls], 0)
    lr = np.maximum(launch, 0)
    launch_end = np.where(launch >= 0, ev["ts_ns"].to_numpy()[lr] + np.maximum(ev["dur_ns"].to_numpy()[lr], 0),
                          np.iinfo(np.int64).max)
    pid = np.asarray(ev["pid"].array.codes).astype(np.int64)
    launch_pid = np.where(launch >= 0, pid[lr], -2)  # a sync waits for work its own process launched
    by_pid = Groups(launch_pid, g_end)
    sync_stream, g_lane_key = _sync_rows(trace, g_rows)
    corr = ev["correlation"].to_numpy()
    for j, c in enumerate(calls):
        if copy_inside[j]:
            target = int(copy_of[c])  # a blocking copy: its own GPU event ran inside it
            woken[int(last_seg[c])] = int(c_ts[j])
        elif blocking[j]:  # what it waited for: the last GPU event launched before it that ended while it waited
            a, b = by_pid.range(int(pid[c]), int(c_ts[j]), int(c_end[j]), lo_open=True)
            cand_i = by_pid.order[a:b]
            ok = launch_end[cand_i] <= c_ts[j]
            on = sync_stream.get(int(corr[c]))
            if on is not None:  # Kineto's Stream Sync / Event Sync row names the stream it waited on
                ok &= g_lane_key[cand_i] == on
            hit = np.flatnonzero(ok)
            if not len(hit):
                continue
            last_end = by_pid.value[a + hit[-1]]
            target = int(cand_i[hit[by_pid.value[a + hit] == last_end][0]])
        else:
            continue
        seg = last_seg[c]
        srcs.append(np.array([gpu_node[target]])), dsts.append(np.array([seg]))
        # negative only where a blocking copy's GPU event ends after its call returned (clocks that disagree)
        lats.append(np.array([int(c_end[j] - g_end[target])])), kinds.append(np.array([3]))
        dur[seg] = 0  # the wait is the edge's; the call keeps no length of its own: its node is the wake-up
        nodes["start_ns"][seg] = c_end[j]
    return woken
