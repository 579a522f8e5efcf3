"""``TimelineCanvas``: the live level-of-detail timeline drawn on canvases in the page, fed typed buffers.

The page (``widgets/timeline*.js``, an anywidget module shipped inline) zooms and pans at once from the glyphs
it holds, draws names on wide bars, hovers, and outlines a selected kernel's launching op and launch call; when
a zoom or pan rests it sets :attr:`TimelineCanvas.view`, and the kernel answers with the new window's glyphs
(:func:`~aonkit.timeline.tiles.timeline_tiles` with a margin on each side) as one message of little-endian
buffers: names, categories and colours travel as codes into tables of the window's distinct values
(:mod:`aonkit.timeline.canvas_data`). Counters (memory, sampled metrics) are step lines under the lanes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anywidget
import pandas as pd
import traitlets

from ..timeline import CanvasTimeline, canvas_timeline, names_matching
from ..trace import Trace

WEB = Path(__file__).resolve().parent / "web"
PARTS = ("charts_axes.js", "timeline_data.js", "timeline_draw.js", "timeline_focus.js", "timeline.js")
"""The module's source files, joined in this order: the charts' axes and ticks, the timeline's data, drawing, the bar
above it and the focus, the widget."""
ESM = "\n".join((WEB / name).read_text(encoding="utf-8") for name in PARTS)
"""The ES module the page runs."""
LAYOUT = {"gutter": 180, "row_px": 16, "max_height": 640, "counter_px": 110}
"""Lane-label column and row height (px), the lanes' visible height before they scroll, a counter chart's height."""
REQUERY_ZOOM = 1.1
"""A window inside the glyphs at hand is not queried again unless its scale changed by more than this factor."""


class TimelineCanvas(anywidget.AnyWidget):
    """The timeline of ``trace`` on canvases: GPU streams and CPU threads as lanes, counters below.

    Parameters
    ----------
    trace : Trace
        The trace (its timeline index is built once and kept with it).
    width_px : int
        Width in pixels, the lane labels' column included; the glyphs' level of detail follows the rest. In a
        narrower output area the page draws as wide as the area and says so (``page_px``, with the view).
    t0_ns, t1_ns : int, optional
        The first window, absolute ns (default: the whole trace).
    margin : float
        Share of the window queried on each side beyond it, so pans show glyphs before the next query.
    title : str
        A line of text over the timeline (default none).

    Attributes
    ----------
    timeline : CanvasTimeline
        The trace's lanes and window queries (:class:`aonkit.timeline.canvas.CanvasTimeline`); ``trace``,
        ``origin_ns`` and ``end_ns`` are its.
    window : tuple of (int, int, int)
        The last queried window with its margin (absolute ns) and its width in pixels.
    columns, tables, counters
        What the last query sent (:class:`aonkit.timeline.canvas.Window`).
    seq : int
        How many windows were sent.
    shown : bool
        Whether a page has drawn the widget (a view of it started).
    focus : list of str
        Names whose events are marked at any zoom, the rest faded (:mod:`aonkit.timeline.focus`); the page's N
        and P keys (:meth:`step`) go from one to the next. Set it, or press Enter in the page's find box
        (:meth:`find`); Escape in the page clears it.
    """

    _esm = ESM
    _css = WEB / "timeline.css"
    geometry = traitlets.Dict().tag(sync=True)
    lanes = traitlets.List().tag(sync=True)
    groups = traitlets.List().tag(sync=True)
    critical = traitlets.Dict().tag(sync=True)
    span_ms = traitlets.Float(1.0).tag(sync=True)
    width_px = traitlets.Int(1200).tag(sync=True)
    view = traitlets.List().tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    legend = traitlets.List().tag(sync=True)
    page_px = traitlets.Int(0).tag(sync=True)
    focus = traitlets.List(traitlets.Unicode()).tag(sync=True)

    def __init__(self, trace: Trace, width_px: int = 1200, t0_ns: int | None = None, t1_ns: int | None = None, *,
                 margin: float = 0.5, **kwargs: Any) -> None:  # fmt: skip
        if int(width_px) <= LAYOUT["gutter"] + 50:
            raise ValueError(f"width_px must exceed {LAYOUT['gutter'] + 50} (the lane labels take "
                             f"{LAYOUT['gutter']}), got {width_px}")  # fmt: skip
        self.timeline: CanvasTimeline = canvas_timeline(trace, margin)
        self.seq, self._last = 0, None
        self._step: tuple[int, list, bool] = (-1, [], False)  # the last step's place, its view, over launched work
        self._extra: dict = {}  # what the next message says besides its glyphs (a step's event)
        self._last_count: dict = {}  # the focus's count in the view, as last sent
        self.shown = False  # whether a page has drawn the widget (a view said hello)
        t0 = self.origin_ns if t0_ns is None else int(t0_ns)
        t1 = self.end_ns if t1_ns is None else int(t1_ns)
        if t0 >= t1:
            raise ValueError(f"the window must have t0_ns < t1_ns, got {t0} and {t1}")
        geometry = {**LAYOUT, "labels": self.timeline.label_rule}
        super().__init__(geometry=geometry, width_px=int(width_px), lanes=self.timeline.lane_list(),
                         groups=self.timeline.groups(), span_ms=self.timeline.span_ms, legend=self.timeline.legend(),
                         view=[(t0 - self.origin_ns) / 1e6, (t1 - self.origin_ns) / 1e6], **kwargs)  # fmt: skip
        self.window = (0, 0, 0)
        self._quiet = False
        self.observe(self._on_view, names="view")
        self.observe(self._on_focus, names="focus")
        self.on_msg(self._message)
        self.update(t0, t1)

    @property
    def trace(self) -> Trace:
        """The drawn trace."""
        return self.timeline.trace

    @property
    def origin_ns(self) -> int:
        """The trace's first nanosecond (x = 0)."""
        return self.timeline.origin_ns

    @property
    def end_ns(self) -> int:
        """The end of the trace's span."""
        return self.timeline.end_ns

    @property
    def lanes_frame(self) -> pd.DataFrame:
        """The lanes with their first ``slot`` (:func:`~aonkit.timeline.view_data.lane_slots`)."""
        return self.timeline.lanes

    @property
    def plot_px(self) -> int:
        """Pixels of the time axis: as the page last drew it (``page_px``), else ``width_px`` less the labels."""
        return self.page_px if self.page_px > 0 else self.width_px - LAYOUT["gutter"]

    def update(self, t0_ns: int, t1_ns: int) -> None:
        """Query ``[t0_ns, t1_ns)`` (absolute ns) and send its glyphs to the page (the view is left as it is)."""
        self.seq += 1
        got = self.timeline.query(t0_ns, t1_ns, self.plot_px, self.seq)
        self.columns, self.tables, self.counters, self.window = got.columns, got.tables, got.counters, got.window
        message = {**got.message, **self._extra}
        self._extra = {}
        self._last = (message, got.buffers)
        self.send(message, got.buffers)

    def covers(self, t0_ns: int, t1_ns: int) -> bool:
        """Whether the glyphs at hand serve the window: inside the last query, at nearly its scale."""
        a, b, px = self.window
        if px <= 0 or t0_ns < a or t1_ns > b:
            return False
        queried = (b - a) / px  # ns per pixel of the last query
        asked = (t1_ns - t0_ns) / self.plot_px
        return 1 / REQUERY_ZOOM <= asked / queried <= REQUERY_ZOOM

    def _on_view(self, change: dict) -> None:
        v = change["new"]  # from the page: two finite numbers, the first the smaller, or nothing is queried
        if self._quiet or not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) and
                                                                            math.isfinite(x) for x in v) and
                               v[0] < v[1]):  # fmt: skip
            return
        t0, t1 = self.range_window()
        if t1 > t0 and not self.covers(t0, t1):
            self.update(t0, t1)
        self._count()

    def _count(self) -> None:
        """Tell the page how many focused events reach into its view (it counts the boxes drawn meanwhile)."""
        f = self.timeline.focus
        if f is not None:
            self._last_count = {"kind": "count", "view": list(self.view), "n": f.count(*self.range_window())}
            self.send(self._last_count)

    def _on_focus(self, change: dict) -> None:
        self.timeline.set_focus(list(change["new"]))
        self._step = (-1, [], False)
        self.update(*self.range_window())  # the same window, with the focus's marks
        self._count()

    def _message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("kind")
        if kind == "hello":
            self.shown = True
        if kind == "hello" and self._last is not None:
            self.send(*self._last)  # a view that starts (a reload, a second view) gets the glyphs at hand
            if self.timeline.focus is not None and self._last_count:
                self.send(self._last_count)
        elif kind == "step" and content.get("dir") in (1, -1):
            self.step(content["dir"], launched=content.get("launched") is True)
        elif kind == "longest":
            self.longest()
        elif kind == "find" and isinstance(content.get("text"), str):
            self.find(content["text"])

    # ---- what a notebook calls ---------------------------------------------------------------------------------
    def step(self, direction: int = 1, launched: bool = False) -> int:
        """Show the next (``direction`` 1) or previous (-1) focused event, selected; return its row (-1: none).

        The row is of ``trace.events``. A step goes from the event the last step showed while the view is still the
        one it set, else from the view's middle. The view keeps its width unless the event would fill too little or
        too much of it (:meth:`aonkit.timeline.focus.Focus.window_for`). ``launched``: step through the GPU work the
        focused events launched instead (an op's kernels; the page's Shift+N and Shift+P).
        """
        walk = self._walk(launched)
        if walk is None or not len(walk):
            return -1
        t0, t1 = self.range_window()
        same = self._step[1] == list(self.view) and self._step[2] == launched
        return self.show_focused(walk.step((t0 + t1) // 2, direction, self._step[0] if same else -1), launched)

    def _walk(self, launched: bool) -> Any:
        """What a step walks: the focused events, or the GPU work they launched (None without a focus)."""
        f = self.timeline.focus
        return None if f is None else f.launched if launched else f

    def longest(self) -> int:
        """Show the longest focused event, selected (what L does in the page); return its row (-1: no focus).

        N and P then step on from it in time.
        """
        f = self.timeline.focus
        return -1 if f is None or not len(f) else self.show_focused(f.longest())

    def show_focused(self, place: int, launched: bool = False) -> int:
        """Show the focused event at ``place`` of its time order, selected, and return its ``trace.events`` row.

        ``launched``: the GPU event at ``place`` of the launched work's time order.
        """
        walk = self._walk(launched)
        if walk is None or not 0 <= place < len(walk):
            raise ValueError(f"no focused {'launched ' if launched else ''}event at place {place} (the focus holds "
                             f"{0 if walk is None else len(walk)})")  # fmt: skip
        t0, t1 = self.range_window()
        a, b = walk.window_for(place, t1 - t0)
        shift = max(self.origin_ns - a, 0) or min(self.end_ns - b, 0)  # inside the trace, as the page would put it
        a, b = max(a + shift, self.origin_ns), min(b + shift, self.end_ns)
        row = int(walk.row[walk.order[place]])
        self._quiet = True  # one query below, for the new view and the event together
        try:
            self.zoom(a, b)
        finally:
            self._quiet = False
        self._step = (place, list(self.view), launched)
        self._extra = {"select": row, "place": place, "launched": launched}
        self.update(*self.range_window())
        self._count()
        return row

    def find(self, text: str) -> list[str]:
        """Focus every name on the lanes that the find box's ``text`` matches, and return them.

        ``text`` is read by :func:`~aonkit.timeline.focus.names_matching`. A pattern that does not compile focuses
        nothing, and the page says why.
        """
        try:
            names = names_matching(self.timeline.lane_names(), text)
        except ValueError as e:
            names = []
            self.send({"kind": "note", "text": str(e)})
        else:
            if not names and text.strip():
                self.send({"kind": "note", "text": "no event on the lanes matches that"})
        self.focus = names
        return names

    def range_window(self) -> tuple[int, int]:
        """The page's view as absolute ns."""
        lo, hi = self.view
        return self.origin_ns + round(lo * 1e6), self.origin_ns + round(hi * 1e6)

    def zoom(self, t0_ns: int, t1_ns: int) -> None:
        """Show ``[t0_ns, t1_ns)`` (absolute ns), as a wheel zoom would."""
        t0, t1 = int(t0_ns), int(t1_ns)
        if not t0 < t1:
            raise ValueError(f"the window must have t0_ns < t1_ns, got {t0} and {t1}")
        self.view = [(t0 - self.origin_ns) / 1e6, (t1 - self.origin_ns) / 1e6]

    def outline(self, trace: Trace, path: pd.DataFrame | None) -> None:
        """Outline the events of a critical-path table of ``trace`` (None: remove the outline)."""
        self.critical = {} if path is None else self.timeline.outline(trace, path)

    def retime(self, trace: Trace) -> None:
        """Draw ``trace``, the same events at other times, in the same lanes and window from the origin.

        Raises ``ValueError`` when its lanes differ from the drawn ones (then build a new widget).
        """
        lo, hi = self.view
        self.timeline = self.timeline.retimed(trace)
        self.span_ms = self.timeline.span_ms
        t0 = self.origin_ns + max(round(lo * 1e6), 0)
        self.update(t0, max(min(self.origin_ns + round(hi * 1e6), self.end_ns), t0 + 1))
