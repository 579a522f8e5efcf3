"""Every event of a few names across the whole timeline: where they are at any zoom, how many, the next one.

A dashboard's table says a kernel ran 340 times for 12 ms; the timeline of one window shows a few of them, and
zoomed out they hide inside bins named after the longest event of each pixel. :class:`Focus` holds the events
of the chosen names (the lanes' events whose name is one of them) and answers, for a window at a width,
:meth:`Focus.marks`: their boxes merged where they share a pixel of a track (at most one box per pixel and track,
whatever the count), with how many events each box holds, and the boxes of the GPU work they launched (a kernel
whose launch call ran inside one of them: an op's kernels); :meth:`Focus.overview`: how many start in each part
of the trace; :meth:`Focus.step`: the next or previous one in time, for the page's N/P keys; :meth:`Focus.stats`
and :meth:`Focus.longest`: their durations, and the slowest one (the page's L key). Pure numpy.

:func:`names_matching` is the timeline's find box read the same way in the kernel (a case-insensitive
substring, or ``/regex/flags``), so that Enter in the box focuses every name that matches across the trace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..trace import Trace
from .index import TimelineIndex

STEP_FILL = (0.02, 0.6)
"""A step keeps the view's width while the event it shows fills between these shares of it; else the view is
made as wide as puts the event at the nearer bound (a kernel too short to see is zoomed into)."""
STEP_MIN_NS = 10_000
"""The narrowest view a step makes (an instant, or an event of a few ns, in 10 us of context)."""
_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}
_JS_ONLY = set("guyd")  # flags of JavaScript's RegExp with no meaning for a test of one name


def step_place(starts: np.ndarray, at_ns: int, direction: int, current: int = -1) -> int:
    """The place (in ``starts``, increasing) of the next (``direction`` > 0) or previous event; -1 when none.

    From ``current`` (a place) when it is one, else from the first event starting after ``at_ns`` (or the last
    starting before it); past either end it wraps around.
    """
    n = len(starts)
    if n == 0:
        return -1
    if 0 <= current < n:
        return (current + (1 if direction > 0 else -1)) % n
    if direction > 0:
        k = int(np.searchsorted(starts, int(at_ns), side="right"))
        return k if k < n else 0
    k = int(np.searchsorted(starts, int(at_ns), side="left")) - 1
    return k if k >= 0 else n - 1


def window_of(t0: int, t1: int, view_ns: int) -> tuple[int, int]:
    """The view that shows an event of ``[t0, t1)``, centred on it.

    It is ``view_ns`` wide while the event fills a share of it within :data:`STEP_FILL`, else as wide as puts the
    event at the nearer bound (at least :data:`STEP_MIN_NS`).
    """
    lo, hi = STEP_FILL
    width = max(min(int(view_ns), int((t1 - t0) / lo)), int(np.ceil((t1 - t0) / hi)), STEP_MIN_NS)
    mid = (t0 + t1) // 2
    return mid - width // 2, mid - width // 2 + width


@dataclass
class Launched:
    """GPU events launched from inside focused events (build with :func:`focus_of`).

    ``pos``, ``ts``, ``end``, ``slot``, ``track``, ``row`` and ``order`` as :class:`Focus`'s; ``busy_ns``: their
    summed durations. :meth:`step` and :meth:`window_for` walk them as :class:`Focus`'s walk the named events (the
    page's Shift+N and Shift+P).
    """

    pos: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    slot: np.ndarray
    track: np.ndarray
    busy_ns: int
    row: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    order: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    @classmethod
    def none(cls) -> Launched:
        """No launched work."""
        e = np.empty(0, np.int64)
        return cls(e, e, e, e, e, 0, e, e)

    def __len__(self) -> int:
        return len(self.ts)

    def step(self, at_ns: int, direction: int, current: int = -1) -> int:
        """As :meth:`Focus.step`, over the launched events."""
        return step_place(self.ts[self.order], at_ns, direction, current)

    def window_for(self, place: int, view_ns: int) -> tuple[int, int]:
        """As :meth:`Focus.window_for`, for the launched event at ``place`` of :attr:`order`."""
        i = self.order[place]
        return window_of(int(self.ts[i]), int(self.end[i]), view_ns)


@dataclass
class Focus:
    """The events named in ``names`` among a timeline's lanes (build with :func:`focus_of`).

    Attributes
    ----------
    names : list of str
        The names asked for that name events on the lanes, in the order asked.
    missing : list of str
        The names asked for that name no event on a lane.
    pos, ts, end, slot, track, row : numpy.ndarray
        Per event, by track then start (the index's order): its position in the index, start and end (ns; ``end``
        at least ``ts + 1``), the page's slot (lane slot plus depth), the index's track, the ``trace.events`` row.
    order : numpy.ndarray
        Positions into those arrays by start, then slot, then row: the order :meth:`step` walks.
    dur : numpy.ndarray
        Per event, its ``dur_ns`` (0 for an instant or a missing duration).
    busy_ns : int
        The events' summed durations.
    launched : Launched
        The GPU work they launched that is not itself named, drawn with them (:meth:`marks`) but not counted with
        them, and walked on its own (:meth:`Launched.step`).
    """

    names: list[str]
    missing: list[str]
    pos: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    slot: np.ndarray
    track: np.ndarray
    row: np.ndarray
    order: np.ndarray
    dur: np.ndarray
    busy_ns: int
    launched: Launched = field(default_factory=lambda: Launched.none())
    _stats: dict | None = field(default=None, repr=False)
    _union: tuple | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ts)

    def marks(self, a_ns: int, b_ns: int, width_px: int, origin_ns: int,
              launched: bool = False) -> dict[str, np.ndarray]:  # fmt: skip
        """Boxes of the events in ``[a_ns, b_ns)`` drawn ``width_px`` wide: one per run sharing pixels of a track.

        Returns ``x0``, ``x1`` (ms since ``origin_ns``: the run's first start and latest end), ``slot`` and
        ``count`` (named events in the run; 0 for a run of launched GPU work only), int32 where integer; with
        ``launched``, also ``launched`` (the run's launched GPU events). A run ends where the next event of its
        track starts in a pixel after every pixel the run covers, so there are at most ``width_px`` runs a track.
        """
        a, b, px = int(a_ns), int(b_ns), max(int(width_px), 1)
        ts_all, end_all, track_all, slot_all, named_all = self._drawn()
        keep = np.flatnonzero((end_all > a) & (ts_all < b))
        ts, end, track = ts_all[keep], end_all[keep], track_all[keep]
        per_px = (b - a) / px
        p0 = np.clip(np.floor((ts - a) / per_px), 0, px - 1).astype(np.int64)
        p1 = np.clip(np.floor((end - 1 - a) / per_px), 0, px - 1).astype(np.int64)
        rank = np.cumsum(np.r_[0, np.diff(track) != 0]) if len(track) else track  # dense track rank, ascending
        reach = np.maximum.accumulate(rank * (px + 1) + p1) - rank * (px + 1)  # latest pixel so far, per track
        new = np.ones(len(ts), bool)
        new[1:] = (track[1:] != track[:-1]) | (p0[1:] > reach[:-1])
        starts = np.flatnonzero(new)
        x1 = np.maximum.reduceat(end, starts) if len(starts) else end[:0]
        named = np.add.reduceat(named_all[keep], starts) if len(starts) else named_all[:0]
        out = {"x0": (ts[starts] - origin_ns) / 1e6, "x1": (x1 - origin_ns) / 1e6,
               "slot": slot_all[keep][starts].astype(np.int32), "count": named.astype(np.int32)}  # fmt: skip
        if launched:
            out["launched"] = (np.diff(np.r_[starts, len(ts)]) - named).astype(np.int32)
        return out

    def count(self, a_ns: int, b_ns: int) -> int:
        """How many of the events reach into ``[a_ns, b_ns)``."""
        return int(np.count_nonzero((self.end > int(a_ns)) & (self.ts < int(b_ns))))

    def _drawn(self) -> tuple[np.ndarray, ...]:
        """The named events and the GPU work they launched, by track then start: ts, end, track, slot, named."""
        if self._union is None:  # once per focus
            g = self.launched
            at = np.argsort(np.r_[self.pos, g.pos], kind="stable")  # index positions: by track, then start
            self._union = (np.r_[self.ts, g.ts][at], np.r_[self.end, g.end][at], np.r_[self.track, g.track][at],
                           np.r_[self.slot, g.slot][at],
                           np.r_[np.ones(len(self.ts), np.int64), np.zeros(len(g.ts), np.int64)][at])  # fmt: skip
        return self._union

    def overview(self, origin_ns: int, end_ns: int, bins: int) -> np.ndarray:
        """How many of the events start in each of ``bins`` equal parts of ``[origin_ns, end_ns)`` (int32)."""
        bins = max(int(bins), 1)
        span = max(int(end_ns) - int(origin_ns), 1)
        at = np.clip((self.ts - int(origin_ns)) * bins // span, 0, bins - 1)
        return np.bincount(at, minlength=bins).astype(np.int32)

    def stats(self) -> dict[str, float]:
        """The events' durations (ns): ``mean``, ``min``, ``p50``, ``p90``, ``p99``, ``max`` (empty: no events).

        Percentiles interpolate linearly between the sorted durations (numpy's default).
        """
        if self._stats is None:  # once: every window's message carries them
            if not len(self.dur):
                self._stats = {}
            else:
                d = np.sort(self.dur).astype(np.float64)
                pick = {k: float(np.percentile(d, q)) for k, q in (("p50", 50), ("p90", 90), ("p99", 99))}
                self._stats = {"mean": float(self.busy_ns / len(d)), "min": float(d[0]), **pick, "max": float(d[-1])}
        return dict(self._stats)

    def longest(self) -> int:
        """The place in :attr:`order` of the longest event (the first in time among equals); -1 with none."""
        if not len(self.order):
            return -1
        return int(np.argmax(self.dur[self.order]))  # argmax: the first of the largest

    def step(self, at_ns: int, direction: int, current: int = -1) -> int:
        """The place in :attr:`order` of the next (``direction`` > 0) or previous event; -1 when there is none.

        From ``current`` (a place in :attr:`order`) when it is one, else from the first event starting after
        ``at_ns`` (or the last starting before it); past either end it wraps around.
        """
        return step_place(self.ts[self.order], at_ns, direction, current)

    def window_for(self, place: int, view_ns: int) -> tuple[int, int]:
        """The view that shows the event at ``place`` of :attr:`order`, centred on it.

        It is ``view_ns`` wide while the event fills a share of it within :data:`STEP_FILL`, else as wide as puts
        the event at the nearer bound.
        """
        i = self.order[place]
        return window_of(int(self.ts[i]), int(self.end[i]), view_ns)


def _placed(trace: Trace, index: TimelineIndex, slots: pd.DataFrame, pos: np.ndarray) -> tuple[np.ndarray, ...]:
    """Track, slot, start, end (at least start + 1), row and duration (>= 0) of the index positions ``pos``."""
    track = np.searchsorted(index.track_off, pos, side="right") - 1  # the track whose range holds each position
    slot = slots["slot"].to_numpy(np.int64)[index.track_lane[track]] + index.track_depth[track]
    ts, end, row = index.ts[pos], np.maximum(index.end[pos], index.ts[pos] + 1), index.row[pos]
    dur = np.maximum(trace.events["dur_ns"].to_numpy()[row], 0).astype(np.int64)
    return track, slot, ts, end, row, dur


def _launch_levels(index: TimelineIndex, codes: np.ndarray, launch_of: np.ndarray) -> Iterator[tuple[np.ndarray, ...]]:
    """Per level up the nesting from each GPU event's launch call (itself first): (live mask, name codes there).

    The mask is over ``cand``, the index positions of the GPU events with a launch call, given first.
    """
    launched = launch_of[index.row]  # per index position: its launch call's row (-1: none)
    cand = np.flatnonzero(launched >= 0)
    yield cand, cand
    cur = launched[cand]
    for _ in range(10_000):  # as deep as the deepest stack
        live = cur >= 0
        if not live.any():
            return
        yield live, codes[cur[live]]
        cur = np.where(live, index.parent_of[np.maximum(cur, 0)], -1)


def _launched_by(index: TimelineIndex, codes: np.ndarray, wanted: np.ndarray, launch_of: np.ndarray) -> np.ndarray:
    """Index positions of the GPU events whose launch call, or an event around it, has a wanted name code."""
    levels = _launch_levels(index, codes, launch_of)
    cand, _ = next(levels)
    hit = np.zeros(len(cand), bool)
    for live, c in levels:
        hit[live] |= wanted[c]
    return cand[hit]


def focus_of(trace: Trace, index: TimelineIndex, slots: pd.DataFrame, names: Iterable[str],
             launch_of: np.ndarray | None = None) -> Focus:  # fmt: skip
    """The :class:`Focus` of ``names`` on the lanes of ``index`` (``slots``: :func:`~.view_data.lane_slots`).

    ``launch_of``: per ``trace.events`` row, the row of its launch call (:func:`~.detail.launch_maps`); with it
    the focus also holds the GPU work launched from inside its events (:attr:`Focus.launched`).
    """
    asked = list(dict.fromkeys(str(n) for n in names))  # each once, in the order asked
    cat = trace.events["name"].array
    lookup = {str(v): k for k, v in enumerate(cat.categories)}
    codes = np.array([lookup[n] for n in asked if n in lookup], np.int64)
    all_codes = np.asarray(cat.codes, np.int64)
    pos = np.flatnonzero(np.isin(all_codes[index.row], codes))
    gpos = None
    if launch_of is not None and len(codes):
        wanted = np.zeros(len(cat.categories) + 1, bool)  # the last entry: a missing name (code -1)
        wanted[codes] = True
        gpos = np.setdiff1d(_launched_by(index, all_codes, wanted, np.asarray(launch_of, np.int64)), pos)
    return _focus(trace, index, slots, asked, lookup, pos, gpos)


def focus_of_many(trace: Trace, index: TimelineIndex, slots: pd.DataFrame, names: Iterable[str],
                  launch_of: np.ndarray | None = None) -> dict[str, Focus]:  # fmt: skip
    """``{name: focus_of(trace, index, slots, [name], launch_of)}`` for each of ``names``, in one pass.

    The lanes' events are grouped by name once, and the launch calls' enclosing names are walked once for all
    GPU events: about the cost of one :func:`focus_of`, not one per name (a report's every table row).
    """
    asked = list(dict.fromkeys(str(n) for n in names))
    cat = trace.events["name"].array
    lookup = {str(v): k for k, v in enumerate(cat.categories)}
    all_codes = np.asarray(cat.codes, np.int64)
    on_lane = all_codes[index.row]
    by_code = np.argsort(on_lane, kind="stable")  # index positions grouped by name, in index order within one
    bounds = np.searchsorted(on_lane[by_code], np.arange(len(cat.categories) + 1))
    pairs = None
    if launch_of is not None:
        pairs = _launch_ancestors(index, all_codes, np.asarray(launch_of, np.int64))
        g_order = np.lexsort((pairs[0], pairs[1]))  # by name code, then index position
        g_pos, g_code = pairs[0][g_order], pairs[1][g_order]
        g_bounds = np.searchsorted(g_code, np.arange(len(cat.categories) + 1))
    out = {}
    for n in asked:
        k = lookup.get(n, -1)
        pos = by_code[bounds[k] : bounds[k + 1]] if k >= 0 else np.empty(0, np.int64)
        gpos = None
        if pairs is not None:
            gpos = np.setdiff1d(g_pos[g_bounds[k] : g_bounds[k + 1]], pos) if k >= 0 else np.empty(0, np.int64)
        out[n] = _focus(trace, index, slots, [n], lookup, pos, gpos)
    return out


def _launch_ancestors(index: TimelineIndex, codes: np.ndarray, launch_of: np.ndarray) -> tuple[np.ndarray, ...]:
    """(index position, name code) of each GPU event and each distinct name around its launch call (itself in)."""
    levels = _launch_levels(index, codes, launch_of)
    cand, _ = next(levels)
    got_pos, got_code = [], []
    for live, c in levels:
        named = c >= 0
        got_pos.append(cand[live][named])
        got_code.append(c[named])
    if not got_pos:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    width = int(codes.max(initial=0)) + 1
    key = np.unique(np.concatenate(got_pos) * width + np.concatenate(got_code))
    return key // width, key % width


def _focus(trace: Trace, index: TimelineIndex, slots: pd.DataFrame, asked: list[str], lookup: dict[str, int],
           pos: np.ndarray, gpos: np.ndarray | None) -> Focus:  # fmt: skip
    """The :class:`Focus` of the index positions ``pos`` (named ``asked``) and the launched positions ``gpos``."""
    seen = set(np.asarray(trace.events["name"].cat.codes)[index.row[pos]].tolist())
    track, slot, ts, end, row, dur = _placed(trace, index, slots, pos)
    order = np.lexsort((row, slot, ts)).astype(np.int64)
    launched = Launched.none()
    if gpos is not None:
        g_track, g_slot, g_ts, g_end, g_row, g_dur = _placed(trace, index, slots, gpos)
        g_order = np.lexsort((g_row, g_slot, g_ts)).astype(np.int64)
        launched = Launched(gpos, g_ts, g_end, g_slot, g_track, int(g_dur.sum()), g_row, g_order)
    return Focus([n for n in asked if lookup.get(n, -1) in seen], [n for n in asked if lookup.get(n, -1) not in seen],
                 pos, ts, end, slot, track, row, order, dur, int(dur.sum()), launched)  # fmt: skip


def names_matching(names: Sequence[str], text: str) -> list[str]:
    """The ``names`` the timeline's find box matches with ``text``, in their order.

    ``text`` is a substring (case-insensitive), or ``/pattern/flags``: a regular expression searched in each name,
    case-insensitive as in the page (flags ``m`` and ``s`` as Python's; ``g``, ``u``, ``y``, ``d`` change nothing
    for one name). Empty text matches nothing.

    Raises
    ------
    ValueError
        When the pattern does not compile in Python or names an unknown flag (the message says which).
    """
    t = (text or "").strip()
    if not t:
        return []
    m = re.fullmatch(r"/(.+)/([a-z]*)", t, flags=re.DOTALL)
    if m is None:
        low = t.casefold()
        return [n for n in names if low in n.casefold()]
    flags = re.IGNORECASE
    for f in m.group(2):
        if f not in _FLAGS and f not in _JS_ONLY:
            raise ValueError(f"find: unknown regular-expression flag {f!r} in {t!r} (flags: i, m, s)")
        flags |= _FLAGS.get(f, 0)
    try:
        pattern = re.compile(m.group(1), flags)
    except re.error as e:
        raise ValueError(f"find: the regular expression {m.group(1)!r} does not compile: {e}") from None
    return [n for n in names if pattern.search(n)]
