"""What-if figures: the critical path's composition as horizontal bars (a table in, a canvas chart's spec out).

The bars are drawn by aonkit's canvas charts (:mod:`aonkit.widgets.charts`, ``widgets/charts.js``), as the model
panels' are: in JupyterLab on 2 vCPUs a change of ``WhatIfPanel`` costs the page's main thread 35 ms with them,
78-130 ms with the bokeh bars they replaced (``bench/whatif_page.py``; ``bench/RESULTS.md``, session 34).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from . import theme
from .model_charts import axis, chart

PART_COLORS = {"gpu computation": theme.CLASS_COLORS["computation"],
               "gpu communication": theme.CLASS_COLORS["communication"],
               "gpu memory": theme.CLASS_COLORS["memory"], "launch": "#CC79A7", "cpu": "#56B4E9",
               "host gap": "#999999", "collective wait": "#D55E00", "waits": "#F0E442"}  # fmt: skip
"""Colour per part of :func:`aonkit.analysis.critical_path.composition`."""
PARTS = tuple(PART_COLORS)


def composition_data(comp: pd.DataFrame) -> dict[str, list]:
    """A composition table as the bar source's columns: every part, in a fixed order, with ms and text."""
    t = comp.set_index("part").reindex(list(PARTS)).fillna(0)
    ms = t["time_ns"].to_numpy(np.float64) / 1e6
    return {"part": list(PARTS), "left": [0.0] * len(PARTS), "ms": ms.tolist(),
            "color": [PART_COLORS[p] for p in PARTS],
            "text": [f"{theme.fmt_ns(v * 1e6)} ({s:.0%})" for v, s in zip(ms, t["share"].to_numpy())]}  # fmt: skip


def composition_chart(width: int = theme.FIG_WIDTH, height: int = 260) -> dict[str, Any]:
    """Horizontal bars of the critical path's time by part (source ``"composition"``: :func:`composition_data`)."""
    bars = {"kind": "hbar", "source": "composition", "y": "part", "left": "left", "right": "ms", "height": 0.7,
            "color_field": "color"}  # fmt: skip
    return chart("critical path by part", axis("linear", "time on the critical path (ms)", start=0),
                 axis("factor", factors=list(reversed(PARTS))), [bars], width=width, height=height,
                 hover={"mode": "bars", "source": "composition", "fields": [["", "part"], ["time", "text"]]})
