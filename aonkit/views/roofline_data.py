"""Roofline chart data: point positions, sizes, colours and text, and roof segments.

Pure table-to-table functions under :func:`aonkit.views.roofline.roofline_figure`:
no bokeh models are built here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..model.hardware import DeviceSpec
from . import theme
from .theme import fmt_bytes, fmt_flop, fmt_flop_rate, fmt_ns, fmt_pct, fmt_si

POINT_COLUMNS = (
    "row", "name", "op_name", "kind", "dtype", "roof", "timing", "intensity", "achieved", "flop", "bytes", "dur_ns",
    "fraction", "bound", "bound_label", "color", "size", "flop_text", "bytes_text", "time_text", "achieved_text",
    "fraction_text",
)  # fmt: skip


def point_data(table: pd.DataFrame, size_range: tuple[float, float] = theme.POINT_SIZE) -> pd.DataFrame:
    """The plottable rows of a roofline table with marker sizes, colours and display text.

    A row is plottable when its intensity and achieved FLOP/s are finite and
    positive (log axes). ``row`` is the row's position in ``table``; ``size``
    grows with the square root of ``dur_ns`` (marker area with time) from
    ``size_range[0]`` to ``size_range[1]`` at the longest point.
    """
    x = table["intensity_flop_per_byte"].to_numpy(np.float64) if len(table) else np.empty(0)
    y = table["achieved_flop_per_s"].to_numpy(np.float64) if len(table) else np.empty(0)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    t = table[keep]
    dur = t["dur_ns"].to_numpy(np.float64) if len(t) else np.empty(0)
    lo, hi = size_range
    scale = np.sqrt(dur / dur.max()) if len(dur) and dur.max() > 0 else np.zeros(len(dur))
    bound = t["bound"].astype(str).to_numpy() if len(t) else np.empty(0, dtype=object)
    by_kernel = "op_name" in t.columns
    frac = t["fraction_of_roof"].to_numpy(np.float64) if len(t) else np.empty(0)
    out = pd.DataFrame(
        {
            "row": np.flatnonzero(keep),
            "name": t["name"].astype(str).to_numpy() if len(t) else [],
            "op_name": t["op_name" if by_kernel else "name"].astype(str).to_numpy() if len(t) else [],
            **{c: t[c].astype(str).to_numpy() if len(t) else [] for c in ("kind", "dtype", "roof", "timing")},
            "intensity": x[keep],
            "achieved": y[keep],
            "flop": t["flop"].to_numpy(np.float64) if len(t) else [],
            "bytes": t["bytes"].to_numpy(np.float64) if len(t) else [],
            "dur_ns": dur,
            "fraction": frac,
            "bound": bound,
            "bound_label": [theme.BOUND_LABELS.get(b, b) for b in bound],
            "color": [theme.BOUND_COLORS.get(b, theme.BOUND_COLORS[""]) for b in bound],
            "size": np.clip(lo + (hi - lo) * scale, lo, hi),
        }
    )
    out["flop_text"] = [fmt_flop(v) for v in out["flop"]]
    out["bytes_text"] = [fmt_bytes(v) for v in out["bytes"]]
    out["time_text"] = [fmt_ns(v) for v in out["dur_ns"]]
    out["achieved_text"] = [fmt_flop_rate(v) for v in out["achieved"]]
    out["fraction_text"] = [fmt_pct(v) for v in out["fraction"]]
    return out[list(POINT_COLUMNS)]


def span(values: list[float], default: tuple[float, float]) -> tuple[float, float]:
    """Log-axis range around the finite positive ``values`` (a factor 3 each side); ``default`` when none."""
    v = [x for x in values if math.isfinite(x) and x > 0]
    return (min(v) / 3, max(v) * 3) if v else default


def roof_data(
    spec: DeviceSpec | None,
    keys: list[str],
    x_range: tuple[float, float],
    ceilings: Mapping[str, float] | None = None,
    bandwidths: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Roof segments: memory slopes (spec bandwidth, L2, ``bandwidths``) and compute roofs (``keys``, ``ceilings``).

    Compute roofs start at their ridge point (``spec.ridge(key)`` for the
    spec's peaks, the ceiling over the spec's bandwidth for user ceilings) and
    run to the right edge; slopes run from the left edge up to the highest roof.
    """
    slopes: list[tuple[str, float, str]] = []
    if spec is not None:
        slopes.append(("memory", spec.memory_bandwidth, "solid"))
        if spec.l2_bandwidth:
            slopes.append(("L2", spec.l2_bandwidth, "dotted"))
    slopes += [(str(k), float(v), "dashed") for k, v in (bandwidths or {}).items()]
    roofs = [(k, spec.peak(k), spec.ridge(k), "solid") for k in keys] if spec is not None else []
    main_bw = slopes[0][1] if slopes else math.nan
    roofs += [(str(k), float(v), float(v) / main_bw, "dashed") for k, v in (ceilings or {}).items()]
    roofs = [r for r in roofs if math.isfinite(r[1]) and r[1] > 0]
    x_lo, x_hi = x_range
    top = max((r[1] for r in roofs), default=math.nan)
    rows = []
    for label, bw, dash in slopes:
        end = top / bw if math.isfinite(top) else x_hi
        rows.append((f"{label} {fmt_si(bw, 'B/s')}", "memory", bw, math.nan, [x_lo, end], [x_lo * bw, end * bw], dash))
    for label, peak, ridge, dash in roofs:
        start = ridge if math.isfinite(ridge) else x_lo
        rows.append((f"{label} {fmt_flop_rate(peak)}", "compute", peak, ridge, [start, x_hi], [peak, peak], dash))
    df = pd.DataFrame(rows, columns=["label", "kind", "value", "ridge", "xs", "ys", "dash"])
    df["ridge_text"] = [f"{r:.3g} FLOP/byte" if math.isfinite(r) else "" for r in df["ridge"]]
    df["color"] = [theme.ROOF_COLORS[i % len(theme.ROOF_COLORS)] for i in range(len(df))]
    return df
