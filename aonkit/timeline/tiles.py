"""Level-of-detail tables for a timeline: what to draw of each lane in a time window at a given width.

:func:`timeline_tiles` returns every event at least about a pixel wide on its
own and merges the smaller ones into per-pixel bins (the exact rule is in
:mod:`aonkit._kernels.binning`), so a view draws at most two glyphs per pixel
per lane row however many events the window holds. :func:`counter_tiles`
decimates counter samples (sampler metrics, allocated/reserved memory) to the
first, last, minimum and maximum sample per pixel (M4).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..trace import Trace
from .index import TimelineIndex, timeline_index

_INDEXES: weakref.WeakKeyDictionary[Trace, tuple[int, TimelineIndex]] = weakref.WeakKeyDictionary()


def index_of(source: TimelineIndex | Trace) -> TimelineIndex:
    """The trace's :func:`~aonkit.timeline.index.timeline_index`, built once per events table.

    It is kept weakly, with the trace; an index passed in is returned as it is.

    Parameters
    ----------
    source : TimelineIndex or Trace
        An index, or a trace. A trace's index is built with the default options (``instants=True``) on first
        use and rebuilt when ``trace.events`` has been replaced by another table since (changes made in
        place to the table are not noticed).

    Returns
    -------
    TimelineIndex

    Raises
    ------
    TypeError
        ``source`` is neither a :class:`TimelineIndex` nor a :class:`~aonkit.trace.Trace`.
    """
    if isinstance(source, TimelineIndex):
        return source
    if not isinstance(source, Trace):
        raise TypeError(f"expected a Trace or a TimelineIndex, got {type(source).__name__}")
    cached = _INDEXES.get(source)
    if cached is None or cached[0] != id(source.events):
        cached = (id(source.events), timeline_index(source))
        _INDEXES[source] = cached
    return cached[1]


def _window(t0_ns: int, t1_ns: int, width_px: int) -> tuple[int, int, int]:
    t0, t1, width = int(t0_ns), int(t1_ns), int(width_px)
    if t0 >= t1:
        raise ValueError(f"the window must have t0_ns < t1_ns, got t0_ns={t0} and t1_ns={t1}")
    if width < 1:
        raise ValueError(f"width_px must be at least 1, got {width_px}")
    return t0, t1, width


def timeline_tiles(source: TimelineIndex | Trace, t0_ns: int, t1_ns: int, width_px: int,
                   lanes: Sequence[int | str] | None = None, min_px: float = 1.0,
                   level: int | None = None) -> pd.DataFrame:  # fmt: skip
    """Glyphs to draw of each lane row in the window ``[t0_ns, t1_ns)`` at ``width_px`` pixels.

    Parameters
    ----------
    source : TimelineIndex or Trace
        An index from :func:`aonkit.timeline.index.timeline_index` (build it once
        per trace), or a trace, whose index is built on first use and kept.
    t0_ns, t1_ns : int
        The window, in the trace's absolute nanoseconds.
    width_px : int
        Width of the view in pixels.
    lanes : sequence of int or str, optional
        Lane ids or labels (``index.lanes``); default all.
    min_px : float
        Events at least this many pixels wide are returned individually.
    level : int, optional
        Level to answer from: 0 applies the per-event rule exactly; coarser
        levels (the default is the coarsest whose buckets are at most
        ``min_px / 2`` pixels) merge groups of short events in one bucket whole.

    Returns
    -------
    pandas.DataFrame
        One row per glyph, by lane, row (``depth``) and time: ``lane``,
        ``depth``, ``start_ns``, ``end_ns`` (clipped to the window), ``row`` (the
        event in ``trace.events``; for a bin its longest event), ``count``
        (events represented: 1 for an individual event), ``busy_ns`` (length of
        the union of the events' clipped intervals).

    Raises
    ------
    ValueError
        If ``t0_ns >= t1_ns``, ``width_px < 1``, ``min_px <= 0`` or a lane is unknown.
    """
    from .._kernels.binning import tiles

    index = index_of(source)
    t0, t1, width = _window(t0_ns, t1_ns, width_px)
    if not min_px > 0:
        raise ValueError(f"min_px must be positive, got {min_px}")
    n_lanes = len(index.lanes)
    if lanes is None:
        tracks = np.arange(len(index.track_lane), dtype=np.int64)
    else:
        labels = {lab: i for i, lab in enumerate(index.lanes["label"])}
        ids = [labels.get(v, -1) if isinstance(v, str) else int(v) for v in lanes]
        bad = [v for v, i in zip(lanes, ids) if not 0 <= i < n_lanes]
        if bad:
            raise ValueError(f"unknown lane(s) {bad}; lanes are 0..{n_lanes - 1} or their labels")
        tracks = np.flatnonzero(np.isin(index.track_lane, ids)).astype(np.int64)
    lv = index.level_for(t0, t1, width, min_px) if level is None else int(level)
    if not 0 <= lv <= index.level_for(t0, t1, width, min_px):
        raise ValueError(f"level {lv} is too coarse for this window (at most {index.level_for(t0, t1, width, min_px)})")
    track, start, end, pos, count, busy = tiles(tracks, t0, t1, width, float(min_px), lv, index.track_off, index.ts,
                                                index.end, index.cmax, index.item_off, index.items)  # fmt: skip
    return pd.DataFrame({"lane": index.track_lane[track], "depth": index.track_depth[track], "start_ns": start,
                         "end_ns": end, "row": index.row[pos], "count": count, "busy_ns": busy})  # fmt: skip


def counter_tiles(ts_ns: np.ndarray, values: np.ndarray, t0_ns: int, t1_ns: int, width_px: int) -> pd.DataFrame:
    """First, last, minimum and maximum sample of each pixel of a counter in ``[t0_ns, t1_ns)`` (M4).

    Parameters
    ----------
    ts_ns, values : array-like
        Sample times (sorted here when they are not) and values; NaN values are skipped.
    t0_ns, t1_ns, width_px : int
        The window and the view's width in pixels.

    Returns
    -------
    pandas.DataFrame
        One row per non-empty pixel: ``px``, ``count``, ``first``, ``last``,
        ``min``, ``max`` and the sample times ``ts_first_ns``, ``ts_last_ns``,
        ``ts_min_ns``, ``ts_max_ns``. A first row with ``px == -1`` holds the
        last sample before ``t0_ns`` (the value when the window opens) when
        there is one.
    """
    from .._kernels.counters import m4

    t0, t1, width = _window(t0_ns, t1_ns, width_px)
    ts = np.ascontiguousarray(ts_ns, dtype=np.int64)
    val = np.ascontiguousarray(values, dtype=np.float64)
    if ts.shape != val.shape or ts.ndim != 1:
        raise ValueError(f"ts_ns and values must be 1-d and of one length, got {ts.shape} and {val.shape}")
    if len(ts) and (np.diff(ts) < 0).any():
        order = np.argsort(ts, kind="stable")
        ts, val = ts[order], val[order]
    before, px, count, idx = m4(ts, val, t0, t1, width)
    if before >= 0:
        px = np.concatenate([[-1], px])
        count = np.concatenate([[1], count])
        idx = np.concatenate([np.full((1, 4), before), idx])
    cols = {"px": px, "count": count}
    for k, name in enumerate(("first", "last", "min", "max")):
        cols[name] = val[idx[:, k]]
    for k, name in enumerate(("first", "last", "min", "max")):
        cols[f"ts_{name}_ns"] = ts[idx[:, k]]
    return pd.DataFrame(cols)
