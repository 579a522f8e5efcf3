"""Columns of the timeline views: lane slots, glyph geometry, colours, hover text, highlight targets, counter lines.

Pure pandas/numpy; :mod:`aonkit.timeline.view` and
:mod:`aonkit.timeline.static` turn these tables into bokeh sources. The
y axis counts *slots*: each lane row (nesting depth) is one slot, lanes are
stacked in :attr:`TimelineIndex.lanes` order (GPU streams first), so the glyph
of ``(lane, depth)`` spans ``slot + GLYPH_PAD`` to ``slot + 1 - GLYPH_PAD``.
The x axis is milliseconds since the trace's first event (``origin_ns``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..analysis.kernels import kernel_class
from ..analysis.memory import memory_events
from ..sources.samples import part_label, split_metric
from ..trace import Trace
from ..views import theme
from .index import TimelineIndex
from .tiles import counter_tiles

CHAR_PX = 6.2
"""Width of an average character of the bar labels' font, in pixels (a name is cut to what fits)."""
MIN_CHARS = 4
"""Fewest characters (with the ellipsis) worth drawing on a bar."""
MAX_LABELS = 3000
"""At most this many labels per view (the widest bars first keep theirs: they come in time order)."""
GLYPH_PAD = 0.08
"""Gap above and below a glyph inside its slot, in slots."""
CAT_COLORS: dict[str, str] = {
    "cpu_op": "#56B4E9", "user_annotation": "#F0E442", "gpu_user_annotation": "#F0E442",
    "cuda_runtime": "#CC79A7", "cuda_driver": "#CC79A7", "python_function": "#BBBBBB",
}  # fmt: skip
"""Colour of non-GPU-work categories; GPU kernels, copies and sets use :data:`theme.CLASS_COLORS`."""
OTHER_COLOR = "#999999"
LEGEND = (("GPU: computation", theme.CLASS_COLORS["computation"]),
          ("GPU: communication", theme.CLASS_COLORS["communication"]),
          ("GPU: memory copy / set", theme.CLASS_COLORS["memory"]),
          ("CPU op", CAT_COLORS["cpu_op"]), ("annotation", CAT_COLORS["user_annotation"]),
          ("runtime / driver call", CAT_COLORS["cuda_runtime"]), ("Python function", CAT_COLORS["python_function"]),
          ("other", OTHER_COLOR))  # fmt: skip
"""The colour key: (label, colour) of every colour the timelines draw, in a fixed order."""
EVENT_TOOLTIPS = [("", "@name"), ("category", "@cat"), ("duration", "@dur_text"), ("op stack", "@stack"),
                  ("correlation", "@correlation")]  # fmt: skip
BIN_TOOLTIPS = [("events", "@count{0,0} in this pixel, busy @busy_text"), ("longest", "@name"),
                ("category", "@cat"), ("its duration", "@dur_text"), ("op stack", "@stack")]  # fmt: skip
COUNTER_TOOLTIPS = [("", "@series"), ("value", "@value_text"), ("at", "@x{0,0.000} ms")]
TARGETS = ("op", "launch")
"""Highlight targets of a GPU glyph: its launching CPU op (``launch_op``) and launch call (``launch``)."""


def lane_slots(index: TimelineIndex) -> pd.DataFrame:
    """``index.lanes`` plus ``slot`` (first y slot of the lane) and ``center`` (where its label goes)."""
    lanes = index.lanes.copy()
    rows = np.maximum(lanes["rows"].to_numpy(np.int64), 1)
    lanes["slot"] = (np.cumsum(rows) - rows).astype(np.int64)  # each lane starts where those above end (none: empty)
    lanes["center"] = lanes["slot"] + rows / 2
    return lanes


def span(trace: Trace, index: TimelineIndex) -> tuple[int, int]:
    """``[origin_ns, end_ns)`` of the trace's lane events (of its memory events when it has no lane events)."""
    if len(index.ts):
        return int(index.ts.min()), int(index.end.max()) + 1
    ts = trace.events["ts_ns"].to_numpy()
    ts = ts[ts != schema.TS_MISSING]
    return (int(ts.min()), int(ts.max()) + 1) if len(ts) else (0, 1)


def padded_window(t0_ns: int, t1_ns: int, width_px: int, margin: float, origin_ns: int,
                  end_ns: int) -> tuple[int, int, int]:  # fmt: skip
    """The window ``[t0_ns, t1_ns)`` widened by ``margin`` of its length on each side, kept inside the trace's span.

    Returns ``(a, b, px)``: the widened window (absolute ns; the span's first nanosecond when the window lies
    outside it) and its width in pixels at the scale of ``width_px`` for ``[t0_ns, t1_ns)``.
    """
    t0, t1, width = int(t0_ns), int(t1_ns), int(width_px)
    pad = int((t1 - t0) * margin)
    a, b = max(t0 - pad, origin_ns), min(t1 + pad, end_ns)
    if a >= b:  # the window is outside the trace
        a, b = origin_ns, origin_ns + 1
    return a, b, max(1, round(width * (b - a) / max(t1 - t0, 1)))


def colors(cat: np.ndarray, name: np.ndarray, gpu: np.ndarray) -> np.ndarray:
    """Colour per glyph: GPU work by kernel class, everything else by category (decided once per distinct triple)."""
    key = pd.MultiIndex.from_arrays([pd.Series(cat, dtype=object), pd.Series(name, dtype=object), gpu])
    codes, uniq = pd.factorize(key)
    pick = [theme.CLASS_COLORS[kernel_class(c, n)] if g and c in schema.GPU_CATS else CAT_COLORS.get(c, OTHER_COLOR)
            for c, n, g in uniq]  # fmt: skip
    return np.array(pick, dtype=object)[codes] if len(codes) else np.empty(0, dtype=object)


def event_boxes(trace: Trace, index: TimelineIndex, slots: pd.DataFrame, rows: np.ndarray,
                origin_ns: int) -> dict[str, np.ndarray]:  # fmt: skip
    """``left``/``right`` (ms) and ``top``/``bottom`` (slots) of events ``rows``; NaN where a row is -1 or off-lane."""
    rows = np.asarray(rows, dtype=np.int64)
    safe = np.maximum(rows, 0)
    lane = np.where(rows >= 0, index.lane_of[safe], -1)
    ok = lane >= 0
    slot = np.where(ok, slots["slot"].to_numpy()[np.maximum(lane, 0)] + index.depth_of[safe], 0)
    ts = trace.events["ts_ns"].to_numpy()[safe] - origin_ns
    dur = np.maximum(trace.events["dur_ns"].to_numpy()[safe], 0)
    nan = np.where(ok, 0.0, np.nan)
    return {"left": ts / 1e6 + nan, "right": (ts + dur) / 1e6 + nan, "top": slot + GLYPH_PAD + nan,
            "bottom": slot + 1 - GLYPH_PAD + nan}  # fmt: skip


def glyph_frame(trace: Trace, index: TimelineIndex, slots: pd.DataFrame, details: pd.DataFrame,
                origin_ns: int) -> pd.DataFrame:  # fmt: skip
    """Everything a quad source holds, from :func:`~aonkit.timeline.detail.tile_details` output.

    Columns: ``left``, ``right`` (ms since ``origin_ns``), ``top``, ``bottom``
    (slots), ``rel_start_ns``, ``rel_end_ns`` (exact ns since ``origin_ns``),
    ``lane``, ``depth``, ``row``, ``count``, ``busy_ns``, ``kind`` (``event``
    or ``bin``), ``color``, ``name``, ``cat``, ``dur_ns``, ``dur_text``,
    ``busy_text``, ``correlation``, ``stack``, ``launch``, ``launch_op`` and
    for each of :data:`TARGETS` its box ``op_left`` ... ``launch_bottom``
    (NaN when there is none).
    """
    d = details
    slot = slots["slot"].to_numpy()[d["lane"].to_numpy()] + d["depth"].to_numpy()
    gpu = (slots["kind"].to_numpy() == "gpu")[d["lane"].to_numpy()]
    out = pd.DataFrame({
        "left": (d["start_ns"].to_numpy() - origin_ns) / 1e6, "right": (d["end_ns"].to_numpy() - origin_ns) / 1e6,
        "top": slot + GLYPH_PAD, "bottom": slot + 1 - GLYPH_PAD,
        "rel_start_ns": d["start_ns"].to_numpy() - origin_ns, "rel_end_ns": d["end_ns"].to_numpy() - origin_ns,
        "lane": d["lane"].to_numpy(), "depth": d["depth"].to_numpy(), "row": d["row"].to_numpy(),
        "count": d["count"].to_numpy(), "busy_ns": d["busy_ns"].to_numpy(),
        "kind": np.where(d["count"].to_numpy() == 1, "event", "bin").astype(object),
        "color": colors(d["cat"].to_numpy(), d["name"].to_numpy(), gpu),
        "name": d["name"].to_numpy(), "cat": d["cat"].to_numpy(), "dur_ns": d["dur_ns"].to_numpy(),
        "dur_text": [theme.fmt_ns(v) if v >= 0 else "instant" for v in d["dur_ns"].to_numpy()],
        "busy_text": [theme.fmt_ns(v) for v in d["busy_ns"].to_numpy()],
        "correlation": d["correlation"].to_numpy(), "stack": d["stack"].to_numpy(),
        "launch": d["launch"].to_numpy(), "launch_op": d["launch_op"].to_numpy(),
    })  # fmt: skip
    for target, col in zip(TARGETS, ("launch_op", "launch")):
        for k, v in event_boxes(trace, index, slots, d[col].to_numpy(), origin_ns).items():
            out[f"{target}_{k}"] = v
    return out


def counter_series(trace: Trace) -> list[tuple[str, str, str, np.ndarray, np.ndarray]]:
    """``(group, label, unit, ts_ns, values)`` of each counter.

    Group ``"memory"``: allocated and reserved bytes per device; then one group per sampled metric, a series per device
    (and per part of one: a MIG GPU instance's ``<metric>.gi<G>`` or a process's ``<metric>.<pid>`` in its metric's
    group, labelled ``GPU 0 gi2``, ``GPU 0 pid 7``).
    """
    out = []
    has_memory = (trace.events["name"] == "[memory]").any()
    mem = memory_events(trace) if has_memory else pd.DataFrame(columns=["device"])
    for device, d in mem.groupby("device", sort=True):
        where = "host" if device < 0 else f"GPU {device}"
        for col in ("allocated", "reserved"):
            v = d[f"{col}_bytes"].to_numpy(np.float64)
            if (v >= 0).any():
                ts = d["ts_ns"].to_numpy()
                out.append(("memory", f"{where} {col}", "bytes", ts, np.where(v >= 0, v, np.nan)))
    s = trace.samples
    if s is not None and len(s):
        parts = []
        for (metric, device), d in s.groupby(["metric", "device"], sort=True, observed=True):
            base, tag = split_metric(str(metric))
            parts.append((base, int(device), tag, d["ts_ns"].to_numpy(), d["value"].to_numpy(np.float64)))
        for base, device, tag, ts, v in sorted(parts, key=lambda p: p[:3]):  # a metric's whole devices, parts after
            out.append((base, f"{base} ({part_label(device, tag)})", "", ts, v))  # live host samplers: device -1
    return out


def counter_points(ts_ns: np.ndarray, values: np.ndarray, t0_ns: int, t1_ns: int, width_px: int,
                   origin_ns: int) -> pd.DataFrame:  # fmt: skip
    """The M4 samples of a counter in the window, in time order: ``x`` (ms), ``rel_ns``, ``value``.

    The last sample before the window comes first (the value when the window opens) and the last value is
    repeated at ``t1_ns``, so a step line drawn from these points covers the window.
    """
    m4 = counter_tiles(ts_ns, values, t0_ns, t1_ns, width_px)
    ts = m4[["ts_first_ns", "ts_min_ns", "ts_max_ns", "ts_last_ns"]].to_numpy()
    val = m4[["first", "min", "max", "last"]].to_numpy()
    order = np.argsort(ts, axis=1, kind="stable")
    ts, val = np.take_along_axis(ts, order, 1).ravel(), np.take_along_axis(val, order, 1).ravel()
    keep = np.concatenate([[True], ts[1:] != ts[:-1]]) if len(ts) else np.empty(0, bool)
    ts, val = ts[keep], val[keep]
    if len(ts) and ts[-1] < t1_ns:  # hold the last value to the window's end, so a step line spans the window
        ts, val = np.append(ts, t1_ns), np.append(val, val[-1])
    rel = ts - origin_ns
    return pd.DataFrame({"x": rel / 1e6, "rel_ns": rel, "value": val})


def counter_frame(label: str, unit: str, points: pd.DataFrame) -> pd.DataFrame:
    """``points`` with the hover columns ``series`` and ``value_text``."""
    fmt = theme.fmt_bytes if unit == "bytes" else (lambda v: f"{v:.4g}")
    return points.assign(series=[label] * len(points), value_text=[fmt(v) for v in points["value"].to_numpy()])
