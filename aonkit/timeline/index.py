"""Timeline lanes: which events go on which lane and row, prepared once per trace for fast window queries.

A *lane* is a GPU stream (GPU-side events: kernels, memcpys, memsets and GPU
annotations, keyed by the file's ``pid``/``tid``, labelled with their device
and stream) or a CPU thread (``pid``, ``tid``). Lanes are ordered GPU first by
device and stream, then CPU threads by ``pid`` and ``tid``. Within a lane,
events that enclose others sit on lower *rows* (nesting depth, ``0`` outermost);
a lane's rows are its *tracks*.

:func:`timeline_index` sorts each track's events by start once and builds the
coarser levels :func:`aonkit.timeline.tiles.timeline_tiles` answers zoomed-out
queries from: at bucket sizes 256 ns x 4**k, groups of consecutive short events
in one bucket, with their count, union length, latest end and longest event.
A level is kept when it is much smaller than the finer kept one, so the levels
take less memory than the events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import schema
from ..trace import Trace

GPU_SIDE_CATS = schema.GPU_CATS | {"gpu_user_annotation", "cuda_sync"}  # Kineto/nsys sync events sit on streams
LEVEL_BASE_NS = 256
"""Bucket size of the finest level; each next level is ``LEVEL_FACTOR`` times coarser."""
LEVEL_FACTOR = 4
LEVEL_KEEP = 4
"""A level is kept when it has at most 1/LEVEL_KEEP of the items of the previous kept one (or of the events),
or at most 1/LEVEL_KEEP**2 of the events (coarse levels cost little memory and bound the zoomed-out queries)."""


@dataclass
class TimelineIndex:
    """Lanes, rows and sorted per-track arrays of one trace (see the module doc).

    Built by :func:`timeline_index` (from a trace) or :func:`build_index` (from lane ids); the fields are not
    meant to be filled by hand. Times are the trace's absolute ns; "events" below are the events on lanes.

    Parameters
    ----------
    lanes : pandas.DataFrame
    track_lane, track_depth, track_off, ts, end, row, cmax, level_ns, item_off, items : numpy.ndarray
    lane_of, depth_of, parent_of : numpy.ndarray
        The fields, in this order, as described under Attributes.

    Attributes
    ----------
    lanes : pandas.DataFrame
        One row per lane in display order: ``lane`` (its id, 0..n-1), ``kind``
        (``"gpu"``/``"cpu"``), ``rank`` (-1 when the trace names none), ``pid``, ``tid``,
        ``device``, ``stream`` (-1 on CPU lanes and when unknown), ``label``,
        ``rows`` (deepest nesting depth + 1), ``events``.
    track_lane, track_depth : int64[tracks]
        Lane and row of each track; tracks are ordered by (lane, row).
    track_off : int64[tracks + 1]
        Each track's range in the flat arrays below.
    ts, end, row : int64[events]
        Start, end (ns) and ``trace.events`` row of each event, by track then start.
    cmax : int64[events]
        Running max of ``max(end, ts + 1)`` within each track.
    level_ns : int64[levels]
        Bucket size (ns) of each coarser level.
    item_off : int64[levels, tracks + 1]
        Each track's range of items, per level, in ``items``.
    items : int64[8, items]
        Items of the coarser levels, all levels side by side (see :mod:`aonkit._kernels.pyramid`).
    lane_of, depth_of : int32[len(trace.events)]
        Lane and row of every event; -1 where the event is on no lane.
    parent_of : int64[len(trace.events)]
        Enclosing event (a row of ``trace.events``) of every event; -1 where
        the event is on no lane or has no parent.
    """

    lanes: pd.DataFrame
    track_lane: np.ndarray
    track_depth: np.ndarray
    track_off: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    row: np.ndarray
    cmax: np.ndarray
    level_ns: np.ndarray
    item_off: np.ndarray
    items: np.ndarray
    lane_of: np.ndarray
    depth_of: np.ndarray
    parent_of: np.ndarray

    def stack(self, row: int) -> list[int]:
        """Rows of the events enclosing ``row`` on its lane, outermost first, ending with ``row``."""
        out = [int(row)]
        while self.parent_of[out[-1]] >= 0:
            out.append(int(self.parent_of[out[-1]]))
        return out[::-1]

    def level_for(self, t0_ns: int, t1_ns: int, width_px: int, min_px: float = 1.0) -> int:
        """Coarsest level whose buckets are at most ``min_px / 2`` pixels wide (0: single events)."""
        fits = self.level_ns * 2 * width_px <= (t1_ns - t0_ns) * min_px
        return int(np.flatnonzero(fits)[-1]) + 1 if fits.any() else 0


_MAX_LEVEL_NS = np.iinfo(np.int64).max // 16  # the coarsest level the kernels take (int64 ns, with headroom)


def _levels(ts: np.ndarray, end: np.ndarray, track_off: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bucket sizes, item columns (all levels side by side) and per-level track offsets of the kept levels."""
    from .._kernels.pyramid import build_level, cut_scales
    from ..analysis.standin import kernel_or_standin
    from .index_standin import numpy_build_level, numpy_cut_scales

    n_tracks = len(track_off) - 1
    if len(ts) == 0:
        return np.empty(0, np.int64), np.empty((8, 0), np.int64), np.empty((0, n_tracks + 1), np.int64)
    cut = kernel_or_standin(cut_scales, numpy_cut_scales, ts, end, track_off, int(ts.min()))
    span = int(end.max()) - int(ts.min())
    levels, offs, parts = [], [], []
    prev, g = len(ts), LEVEL_BASE_NS
    while g < 2 * span and g <= _MAX_LEVEL_NS:  # a span near int64's range (clock garbage) stops at the top level
        count = int(np.count_nonzero(cut >= g))
        if count <= prev / LEVEL_KEEP or count <= len(ts) / LEVEL_KEEP**2:
            items = kernel_or_standin(build_level, numpy_build_level, ts, end, cut, g, count)
            item_of_start = np.searchsorted(items[0], track_off[:-1])  # tracks without events: empty ranges
            offs.append(np.concatenate([item_of_start, [count]]) + sum(p.shape[1] for p in parts))
            levels.append(g), parts.append(items)
            prev = count
        g *= LEVEL_FACTOR
    item_off = np.array(offs, np.int64).reshape(len(levels), n_tracks + 1)
    return np.array(levels, np.int64), np.concatenate(parts, axis=1) if parts else np.empty((8, 0), np.int64), item_off


def build_index(lane: np.ndarray, ts: np.ndarray, end: np.ndarray, rows: np.ndarray, n_rows: int,
                lanes: pd.DataFrame) -> TimelineIndex:  # fmt: skip
    """Index events given their lane ids (``0 .. len(lanes) - 1``), start, end and row in the events table."""
    from .._kernels.pyramid import depths, running_max_end
    from ..analysis.enclosing import parents
    from ..analysis.standin import kernel_or_standin
    from .index_standin import numpy_depths, numpy_running_max_end

    lane, ts, end, rows = (np.ascontiguousarray(a, dtype=np.int64) for a in (lane, ts, end, rows))
    order = np.lexsort((-end, ts, lane))
    parent = parents(lane, ts, end, order)
    depth = kernel_or_standin(depths, numpy_depths, parent, order)
    n_lanes = len(lanes)
    counts = np.bincount(lane, minlength=n_lanes)
    lane_rows = np.zeros(n_lanes, np.int64)
    if len(lane):
        sorted_depth = (depth + 1)[order]  # order groups events by lane
        lane_rows[counts > 0] = np.maximum.reduceat(sorted_depth, np.cumsum(counts)[counts > 0] - counts[counts > 0])
    base = np.concatenate([[0], np.cumsum(lane_rows)])
    track = base[lane] + depth
    order = order[np.argsort(track[order], kind="stable")]
    track_off = np.concatenate([[0], np.cumsum(np.bincount(track, minlength=base[-1]))])
    f_ts, f_end = ts[order], end[order]
    level_ns, items, item_off = _levels(f_ts, f_end, track_off)
    cmax = kernel_or_standin(running_max_end, numpy_running_max_end, f_ts, f_end, track_off)
    n_tracks = len(track_off) - 1
    lane_of, depth_of, parent_of = np.full(n_rows, -1, np.int32), np.full(n_rows, -1, np.int32), np.full(n_rows, -1)
    lane_of[rows], depth_of[rows] = lane, depth
    parent_of[rows] = np.where(parent >= 0, rows[np.maximum(parent, 0)], -1)
    lanes = lanes.reset_index(drop=True).assign(rows=lane_rows, events=counts)
    lanes.insert(0, "lane", np.arange(n_lanes))
    return TimelineIndex(
        lanes=lanes,
        track_lane=np.repeat(np.arange(n_lanes), lane_rows),
        track_depth=np.arange(n_tracks) - base[:-1].repeat(lane_rows),
        track_off=track_off, ts=f_ts, end=f_end, row=rows[order], cmax=cmax,
        level_ns=level_ns, item_off=item_off, items=items,
        lane_of=lane_of, depth_of=depth_of, parent_of=parent_of,
    )  # fmt: skip


def _sort_key(v: object) -> tuple[int, object]:
    return (0, v) if isinstance(v, (int, np.integer)) else (1, str(v))


def _int_in(v: object) -> int:
    """The device or stream number a pid or tid holds (``stream 7`` -> 7); -1 for none or one beyond int64."""
    if isinstance(v, (int, np.integer)):
        x = int(v)
    else:
        m = re.search(r"\d{1,19}", str(v))
        x = int(m.group()) if m else -1
    return x if -1 <= x <= np.iinfo(np.int64).max else -1


def _numeric(v: object) -> bool:
    return isinstance(v, (int, np.integer)) or (isinstance(v, str) and v.strip().lstrip("-").isdigit())


def cpu_label(pid: object, tid: object) -> str:
    """A CPU lane's label: ``CPU <pid> thread <tid>`` for a process and thread, else what the file named it.

    Kineto also writes the profiler's own markers under names (pid ``Spans``, tid ``PyTorch Profiler``) or
    under empty ones; those read ``Spans: PyTorch Profiler`` and ``events without pid and tid``.
    """
    p = "" if pid is None else str(pid).strip()
    t = "" if tid is None else str(tid).strip()
    if not p and not t:
        return "events without pid and tid"
    if _numeric(pid) or not p:
        return f"CPU {p or '?'} thread {t or '?'}"
    return f"{p}: {t}" if t else p


def _lane_table(keys: np.ndarray, n_pid: int, n_tid: int, pid_vals: list, tid_vals: list, device: np.ndarray,
                stream: np.ndarray, rank: int | None, ranks: np.ndarray | None = None,
                ) -> tuple[pd.DataFrame, np.ndarray]:  # fmt: skip
    """Lanes of the dense (rank code, gpu, pid code, tid code) ``keys`` in display order, and each key's lane id.

    ``ranks`` (the rank of each rank code) is given for combined traces; else every lane is ``rank``.
    """
    gpu = (keys // (n_pid * n_tid)) % 2 == 1
    lane_rank = ranks[keys // (2 * n_pid * n_tid)] if ranks is not None else np.full(len(keys), -1 if rank is None
                                                                                         else rank)
    pids = [pid_vals[c] for c in (keys // n_tid) % n_pid]
    tids = [tid_vals[c] for c in keys % n_tid]
    dev = [int(d) if d >= 0 or not g else _int_in(p) for d, g, p in zip(device, gpu, pids)]
    stm = [int(s) if s >= 0 or not g else _int_in(t) for s, g, t in zip(stream, gpu, tids)]
    dev = [d if g else -1 for d, g in zip(dev, gpu)]
    stm = [s if g else -1 for s, g in zip(stm, gpu)]
    sort = sorted(range(len(keys)), key=lambda i: (lane_rank[i], not gpu[i], dev[i], stm[i], _sort_key(pids[i]),
                                                   _sort_key(tids[i])))  # fmt: skip
    shown = [str(p).split("@rank")[0] if isinstance(p, str) else p for p in pids]  # combined traces: "<pid>@rank<r>"

    def prefix(i: int) -> str:
        return "" if lane_rank[i] < 0 else f"rank {lane_rank[i]} "

    lanes = pd.DataFrame({
        "kind": ["gpu" if gpu[i] else "cpu" for i in sort],
        "rank": np.array([lane_rank[i] for i in sort], np.int64),
        "pid": pd.Series([pids[i] for i in sort], dtype=object),
        "tid": pd.Series([tids[i] for i in sort], dtype=object),
        "device": np.array([dev[i] for i in sort], np.int64),
        "stream": np.array([stm[i] for i in sort], np.int64),
        "label": [prefix(i) + (f"GPU {dev[i]} stream {stm[i]}" if gpu[i] else cpu_label(shown[i], tids[i]))
                  for i in sort],
    })  # fmt: skip
    return lanes, np.argsort(np.array(sort, np.int64), kind="stable")


def timeline_index(trace: Trace, instants: bool = True) -> TimelineIndex:
    """Lanes, rows and sorted per-track arrays of ``trace`` (see the module doc).

    Complete events (``ph == "X"``) with a start and a duration go on lanes;
    with ``instants``, instant events too (as zero-length events) except the
    allocator's ``[memory]`` events, which are a counter lane of their own.

    Parameters
    ----------
    trace : Trace
        A single trace, or a combined job (a ``rank`` column in ``trace.events``: lanes per rank, by rank).
    instants : bool
        Put instant events (``ph`` ``"i"`` or ``"I"`` with a start) on the lanes as zero-length events
        (default True).

    Returns
    -------
    TimelineIndex
        Events of GPU-side categories (kernels, memcpys, memsets, ``gpu_user_annotation``, ``cuda_sync``) go
        on GPU stream lanes, the others on CPU thread lanes; complete events with a negative duration are left
        out.
    """
    ev = trace.events
    ph, ts, dur = ev["ph"], ev["ts_ns"].to_numpy(), ev["dur_ns"].to_numpy()
    ok = (ts != schema.TS_MISSING) & ((ph == "X").to_numpy() & (dur >= 0))
    if instants:
        ok |= (ts != schema.TS_MISSING) & ph.isin(["i", "I"]).to_numpy() & (ev["name"] != "[memory]").to_numpy()
    rows = np.flatnonzero(ok)
    pid, tid = ev["pid"].cat, ev["tid"].cat
    n_pid, n_tid = len(pid.categories) + 1, len(tid.categories) + 1
    gpu = ev["cat"].isin(GPU_SIDE_CATS).to_numpy()[rows]
    ranks, r_code = None, np.zeros(len(rows), np.int64)
    if "rank" in ev.columns:  # a combined job (aonkit.analysis.combine): lanes per rank
        ranks, r_code = np.unique(ev["rank"].to_numpy()[rows], return_inverse=True)
    dense = ((r_code * 2 + gpu) * n_pid + pid.codes.to_numpy()[rows] + 1).astype(np.int64) * n_tid
    dense += tid.codes.to_numpy()[rows] + 1
    keys = np.flatnonzero(np.bincount(dense))
    key_of = np.searchsorted(keys, dense)
    top = pd.DataFrame({"k": key_of, "device": ev["device"].to_numpy()[rows], "stream": ev["stream"].to_numpy()[rows]})
    top = top.groupby("k").max()
    lanes, lane_of_key = _lane_table(keys, n_pid, n_tid, [None, *pid.categories], [None, *tid.categories],
                                     top["device"].to_numpy(), top["stream"].to_numpy(), trace.meta.rank,
                                     ranks)  # fmt: skip
    end = ts[rows] + np.maximum(dur[rows], 0)
    return build_index(lane_of_key[key_of], ts[rows], end, rows, len(ev), lanes)
