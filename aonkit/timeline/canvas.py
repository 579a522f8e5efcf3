"""What the canvas timeline widget asks of a trace: its lanes, a window's glyphs as one binary message, outlines.

:class:`CanvasTimeline` is the kernel side of :class:`aonkit.widgets.timeline.TimelineCanvas` without the widget:
the lanes and counter groups the page lays out once, and for a window (:meth:`~CanvasTimeline.query`) the glyphs
of :func:`~aonkit.timeline.tiles.timeline_tiles` with a margin on each side, as the columns of
:func:`~aonkit.timeline.canvas_data.canvas_frame` packed into little-endian buffers, with the counters' points.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..analysis.correlation import gpu_links
from ..trace import Trace
from ..views import theme
from .canvas_data import canvas_frame, pack
from .critical import critical_boxes
from .detail import launch_maps
from .focus import Focus, focus_of
from .index import TimelineIndex
from .tiles import index_of, timeline_tiles
from .view_data import (
    CHAR_PX,
    GLYPH_PAD,
    LEGEND,
    MAX_LABELS,
    MIN_CHARS,
    counter_points,
    counter_series,
    lane_slots,
    padded_window,
    span,
)

KEY_COUNTERS = ("memory", "gpu_util_pct", "gpm_sm_util_pct", "gpm_tensor_util_pct", "gpm_dram_bw_util_pct",
                "power_w", "sm_clock_mhz", "cpu_percent")
"""The counter charts shown under the lanes when there are many: device memory, how busy the GPU and its SMs,
tensor cores and DRAM are, its power and clock, the host's CPU."""
OPEN_ALL = 6
"""Up to this many counter charts are all shown."""


@dataclass
class Window:
    """One query's answer: the message and buffers for the page, and what they hold.

    Attributes
    ----------
    message : dict
        ``{"kind": "tiles", "seq", "n", "px", "window": [a_ms, b_ms], "columns": {name: [dtype, buffer]},
        "tables", "counters": [[x spec, value spec], ...], "focus": summary or None}``; with a focus the columns
        include its marks (``f_x0``, ``f_x1``, ``f_slot``, ``f_count``) and ``f_overview``
        (:meth:`CanvasTimeline.set_focus`).
    buffers : list of bytes
    window : tuple of (int, int, int)
        The window queried (absolute ns, the margin included) and its width in pixels.
    columns, tables : dict
        :func:`~aonkit.timeline.canvas_data.canvas_frame` of the window.
    counters : list of tuple of numpy.ndarray
        Per counter series (in :attr:`CanvasTimeline.groups` order): ``(x_ms, value)``.
    """

    message: dict
    buffers: list[bytes]
    window: tuple[int, int, int]
    columns: dict[str, np.ndarray]
    tables: dict[str, list[str]]
    counters: list[tuple[np.ndarray, np.ndarray]]


@dataclass
class CanvasTimeline:
    """A trace's timeline for the canvas widget: lanes, counter groups, and window queries.

    Build it with :func:`canvas_timeline`.

    Attributes
    ----------
    trace : Trace
    index : TimelineIndex
    lanes : pandas.DataFrame
        :func:`~aonkit.timeline.view_data.lane_slots` of the index.
    origin_ns, end_ns : int
        The trace's span; x is ms since ``origin_ns``.
    margin : float
        Share of a window queried beyond each side of it.
    """

    trace: Trace
    index: TimelineIndex
    lanes: pd.DataFrame
    origin_ns: int
    end_ns: int
    margin: float = 0.5
    _maps: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _series: list = field(default_factory=list, repr=False)
    focus: Focus | None = field(default=None, repr=False)

    @property
    def span_ms(self) -> float:
        """The trace's span in ms."""
        return (self.end_ns - self.origin_ns) / 1e6

    def lane_list(self) -> list[dict]:
        """The lanes as the page lays them out: ``label``, first ``slot``, ``rows``, ``kind``."""
        cols = self.lanes[["label", "slot", "rows", "kind"]].itertuples(index=False)
        return [{"label": str(lab), "slot": int(s), "rows": int(r), "kind": str(k)} for lab, s, r, k in cols]

    @property
    def label_rule(self) -> dict[str, float]:
        """Which bars carry their name, as the bokeh timelines decide it (:mod:`aonkit.timeline.labels`)."""
        return {"min_chars": MIN_CHARS, "char_px": CHAR_PX, "max_labels": MAX_LABELS}

    def legend(self) -> list[list[str]]:
        """The colour key, ``[label, colour]`` per entry (:data:`~aonkit.timeline.view_data.LEGEND`)."""
        return [[label, color] for label, color in LEGEND]

    def groups(self) -> list[dict]:
        """The counter charts: ``{name, unit, open, series: [{label, color, dash}]}``, series in query order.

        ``open``: shown under the lanes; the others are folded in a list (a GPU bundle records some 35 metrics).
        With at most :data:`OPEN_ALL` charts all are open, else those in :data:`KEY_COUNTERS`.
        """
        out: dict[str, dict] = {}
        for group, label, unit, *_ in self._series:
            g = out.setdefault(group, {"name": group, "unit": unit, "open": True, "series": []})
            k = len(g["series"])
            color = theme.ROOF_COLORS[(k // 2 if group == "memory" else k) % len(theme.ROOF_COLORS)]
            g["series"].append({"label": label, "color": color,
                                "dash": group == "memory" and label.endswith("reserved")})  # fmt: skip
        if len(out) > OPEN_ALL:
            for name, g in out.items():
                g["open"] = name in KEY_COUNTERS
        return list(out.values())

    def query(self, t0_ns: int, t1_ns: int, width_px: int, seq: int = 0) -> Window:
        """The glyphs and counter points of ``[t0_ns, t1_ns)`` at ``width_px``, with the margin, as a message."""
        a, b, px = padded_window(int(t0_ns), int(t1_ns), int(width_px), self.margin, self.origin_ns, self.end_ns)
        tiles = timeline_tiles(self.index, a, b, px)
        cols, tables = canvas_frame(self.trace, self.index, self.lanes, tiles, self._launch_maps(), self.origin_ns)
        counters, columns, pairs = [], dict(cols), []
        for k, (_, _, _, ts, v) in enumerate(self._series):
            pts = counter_points(ts, v, a, b, px, self.origin_ns)
            counters.append((pts["x"].to_numpy(np.float64), pts["value"].to_numpy(np.float64)))
            columns[f"c{k}_x"], columns[f"c{k}_v"] = counters[-1]
            pairs.append((f"c{k}_x", f"c{k}_v"))
        if self.focus is not None:
            marks = self.focus.marks(a, b, px, self.origin_ns)
            columns.update({f"f_{k}": v for k, v in marks.items()})
            columns["f_overview"] = self.focus.overview(self.origin_ns, self.end_ns, width_px)
        spec, buffers = pack(columns)
        message = {"kind": "tiles", "seq": int(seq), "n": int(len(cols["x0"])), "px": px, "tables": tables,
                   "window": [(a - self.origin_ns) / 1e6, (b - self.origin_ns) / 1e6], "columns": spec,
                   "counters": [[spec[x], spec[v]] for x, v in pairs], "focus": self.focus_summary()}  # fmt: skip
        return Window(message, buffers, (a, b, px), cols, tables, counters)

    def lane_names(self) -> list[str]:
        """The distinct names of the events on the lanes (what the find box can focus)."""
        cat = self.trace.events["name"].array
        used = np.unique(np.asarray(cat.codes, np.int64)[self.index.row])
        return [str(cat.categories[k]) for k in used if k >= 0]

    def set_focus(self, names: list[str]) -> Focus | None:
        """Focus the events of ``names`` (:mod:`aonkit.timeline.focus`); none: no focus. Returns the focus."""
        if not names:
            self.focus = None
            return None
        self.focus = focus_of(self.trace, self.index, self.lanes, names, self._launch_maps()[0])
        return self.focus

    def _launch_maps(self) -> tuple[np.ndarray, np.ndarray]:
        if self._maps is None:
            self._maps = launch_maps(self.trace, gpu_links(self.trace))
        return self._maps

    def focus_summary(self) -> dict | None:
        """What the page says of the focus (None without one).

        ``n`` events, ``busy_ns``, ``names`` and ``missing`` counts, their durations' ``stats``
        (:meth:`~aonkit.timeline.focus.Focus.stats`), and the GPU work they launched: ``launched`` events,
        ``launched_busy_ns``.
        """
        f = self.focus
        if f is None:
            return None
        return {"n": len(f), "busy_ns": f.busy_ns, "names": len(f.names), "missing": len(f.missing),
                "stats": f.stats(), "launched": len(f.launched.ts), "launched_busy_ns": f.launched.busy_ns}  # fmt: skip

    def outline(self, trace: Trace, path: pd.DataFrame) -> dict[str, list]:
        """The boxes of a critical-path table of ``trace`` as the page draws them: ``x0``, ``x1`` (ms), ``slot``."""
        boxes = critical_boxes(trace, path)
        return {"x0": boxes["left"].tolist(), "x1": boxes["right"].tolist(),
                "slot": (boxes["top"] - GLYPH_PAD).round().astype(int).tolist()}  # fmt: skip

    def retimed(self, trace: Trace) -> CanvasTimeline:
        """The same timeline over ``trace``, the same events at other times (their GPU links are kept).

        Raises ``ValueError`` when its lanes differ from these.
        """
        index = index_of(trace)
        lanes = lane_slots(index)
        if not lanes[["label", "rows"]].equals(self.lanes[["label", "rows"]]):
            raise ValueError("the trace's lanes differ from the drawn ones: build a new timeline for it")
        origin, end = span(trace, index)
        out = CanvasTimeline(trace, index, lanes, origin, end, self.margin, self._maps, counter_series(trace))
        if self.focus is not None:
            out.set_focus(self.focus.names + self.focus.missing)
        return out


def canvas_timeline(trace: Trace, margin: float = 0.5) -> CanvasTimeline:
    """The :class:`CanvasTimeline` of ``trace`` (its timeline index built once and kept with it)."""
    index = index_of(trace)
    origin, end = span(trace, index)
    return CanvasTimeline(trace, index, lane_slots(index), origin, end, float(margin), None, counter_series(trace))
