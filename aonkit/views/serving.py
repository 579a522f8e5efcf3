"""Serving figures: latency percentiles and throughput against arrival rate, from a serving sweep.

Tables in, bokeh models out: :func:`sweep_figures` draws a
:func:`~aonkit.model.serving_sweep` table (one row per arrival rate) as TTFT, TPOT and
end-to-end latency p50/p90/p99 lines (ms, log scale) and a throughput panel, with the
saturation knee (:func:`~aonkit.model.saturation_knee`), the chosen arrival rate and the
TTFT objective as markers. Each marker is a small source of its own (``*_data`` functions),
so a widget updates everything by assigning ``source.data``; labels are data fields.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from bokeh.layouts import gridplot
from bokeh.models import ColumnDataSource, HoverTool, LayoutDOM
from bokeh.plotting import figure

from . import theme

METRICS: tuple[tuple[str, str], ...] = (("ttft", "time to first token"), ("tpot", "time per output token"),
                                        ("e2e", "end-to-end latency"))  # fmt: skip
PERCENTILES: tuple[tuple[str, str, str], ...] = (("p50", "#009E73", "solid"), ("p90", "#E69F00", "solid"),
                                                 ("p99", "#D55E00", "solid"))  # fmt: skip
KNEE_COLOR, RATE_COLOR, SLO_COLOR = "#CC79A7", "#0072B2", "#D62728"


def _finite(x: float) -> bool:
    return x is not None and math.isfinite(float(x))


def sweep_data(sweep: pd.DataFrame) -> dict[str, list]:
    """Columns of the sweep source: ``rate`` and ``<metric>_<p>_ms`` per metric and percentile, throughput.

    Non-positive or missing latencies (TPOT of one-token outputs) become NaN, a gap on the log axis.
    """
    s = sweep.sort_values("arrival_rate_per_s")
    out: dict[str, list] = {"rate": s["arrival_rate_per_s"].to_numpy(np.float64).tolist()}
    for m, _ in METRICS:
        for p, _, _ in PERCENTILES:
            ms = s[f"{m}_{p}_s"].to_numpy(np.float64) * 1e3
            out[f"{m}_{p}_ms"] = np.where(ms > 0, ms, np.nan).tolist()
            out[f"{m}_{p}_text"] = [theme.fmt_ns(v * 1e6) if np.isfinite(v) else theme.MISSING for v in ms]
    out["throughput"] = s["throughput_per_s"].to_numpy(np.float64).tolist()
    out["busy"] = (s["busy_fraction"].to_numpy(np.float64) if "busy_fraction" in s else
                   np.full(len(s), np.nan)).tolist()  # fmt: skip
    out["busy_text"] = [theme.fmt_pct(b) for b in out["busy"]]
    return out


def marker_data(rate: float | None, label: str, y_s: float | None = None) -> dict[str, list]:
    """A vertical marker at ``rate``, labelled ``label``, with a point at ``y_s`` (``ms``; NaN without one).

    The columns are empty when ``rate`` is missing or not finite (nothing drawn).
    """
    if not _finite(rate):
        return {"rate": [], "ms": [], "label": []}
    return {"rate": [float(rate)], "ms": [float(y_s) * 1e3 if _finite(y_s) else math.nan], "label": [label]}


def knee_data(knee: dict) -> dict[str, list]:
    """The knee marker of :func:`~aonkit.model.saturation_knee`'s dict, with its p99 TTFT as the point."""
    return marker_data(knee.get("knee_rate_per_s"), knee_label(knee), knee.get("knee_metric_s"))


def slo_data(slo_s: float | None, what: str = "p99 TTFT") -> dict[str, list]:
    """A horizontal marker at an objective (ms), labelled ``what`` and its value; empty without one."""
    if not _finite(slo_s) or not slo_s > 0:
        return {"ms": [], "label": []}
    return {"ms": [float(slo_s) * 1e3], "label": [f"{what} objective {theme.fmt_ns(float(slo_s) * 1e9)}"]}


def pools_data(colocated: pd.DataFrame, apart: pd.DataFrame) -> dict[str, list]:
    """Columns comparing a colocated sweep (:func:`~aonkit.model.serving_sweep`) with a disaggregated one.

    ``apart``: a :func:`~aonkit.model.disaggregated_sweep` over the same rates. Columns: ``rate``;
    ``<deployment>_<metric>_ms`` and ``..._text`` for ``colocated``/``apart`` and ``ttft``/``tpot`` (p99; NaN for
    none, a gap on a log axis); ``colocated_busy``, ``prefill_busy``, ``decode_busy`` (fractions),
    ``colocated_attain`` and ``apart_attain`` (``slo_attainment``; NaN without it) and their texts.
    """
    c, a = (s.sort_values("arrival_rate_per_s") for s in (colocated, apart))
    rates = c["arrival_rate_per_s"].to_numpy(np.float64)
    if not np.array_equal(rates, a["arrival_rate_per_s"].to_numpy(np.float64)):
        raise ValueError("the colocated and disaggregated sweeps must cover the same arrival rates")
    out: dict[str, list] = {"rate": rates.tolist()}
    for name, s in (("colocated", c), ("apart", a)):
        for m in ("ttft", "tpot"):
            ms = s[f"{m}_p99_s"].to_numpy(np.float64) * 1e3
            out[f"{name}_{m}_ms"] = np.where(ms > 0, ms, np.nan).tolist()
            out[f"{name}_{m}_text"] = [theme.fmt_ns(v * 1e6) if np.isfinite(v) else theme.MISSING for v in ms]
    for name, s, col in (("colocated_busy", c, "busy_fraction"), ("prefill_busy", a, "prefill_busy_fraction"),
                         ("decode_busy", a, "decode_busy_fraction"), ("colocated_attain", c, "slo_attainment"),
                         ("apart_attain", a, "slo_attainment")):  # fmt: skip
        out[name] = s[col].to_numpy(np.float64).tolist() if col in s else [math.nan] * len(s)
        out[f"{name}_text"] = [theme.fmt_pct(b) for b in out[name]]
    return out


def knee_label(knee: dict) -> str:
    """Text of the knee marker from :func:`~aonkit.model.saturation_knee`'s dict."""
    rate = knee.get("knee_rate_per_s", math.nan)
    if not _finite(rate):
        return "knee: below the lowest rate"
    return f"knee {rate:.3g}/s (capacity {knee.get('capacity_per_s', math.nan):.3g}/s)"


def sweep_figures(sweep: pd.DataFrame, knee: dict | None = None, rate: float | None = None,
                  slo_s: float | None = None, width: int = 380,
                  height: int = 260) -> tuple[LayoutDOM, dict[str, ColumnDataSource]]:  # fmt: skip
    """Latency percentiles (TTFT, TPOT, end-to-end) and throughput against arrival rate, in a 2x2 grid.

    Parameters
    ----------
    sweep : DataFrame
        A :func:`~aonkit.model.serving_sweep` table.
    knee : dict, optional
        :func:`~aonkit.model.saturation_knee` of ``sweep``: its rate is marked on every panel.
    rate : float, optional
        The chosen arrival rate, marked on every panel.
    slo_s : float, optional
        The p99 TTFT objective, a horizontal line on the TTFT panel.
    width, height : int
        Size of one panel.

    Returns
    -------
    layout, sources
        ``sources``: ``"sweep"`` (:func:`sweep_data`), ``"knee"`` (:func:`knee_data`), ``"rate"`` (:func:`marker_data`),
        ``"slo"`` (:func:`slo_data`).
    """
    knee = knee or {}
    sources = {
        "sweep": ColumnDataSource(sweep_data(sweep), name="serving_sweep"),
        "knee": ColumnDataSource(knee_data(knee), name="serving_knee"),
        "rate": ColumnDataSource(marker_data(rate, "arrival rate"), name="serving_rate"),
        "slo": ColumnDataSource(slo_data(slo_s), name="serving_slo"),
    }
    src = sources["sweep"]
    figs = []
    for m, title in METRICS:
        fig = figure(width=width, height=height, y_axis_type="log", tools="", toolbar_location=None,
                     x_axis_label="arrival rate (requests/s)", y_axis_label="ms")  # fmt: skip
        lines = []
        for p, color, dash in PERCENTILES:
            lines.append(fig.line("rate", f"{m}_{p}_ms", source=src, color=color, line_dash=dash, line_width=2,
                                  legend_label=p))  # fmt: skip
            fig.scatter("rate", f"{m}_{p}_ms", source=src, color=color, size=4)
        fig.add_tools(HoverTool(renderers=lines[-1:], mode="vline", tooltips=[
            ("rate", "@rate{0.00}/s"), *((p, f"@{m}_{p}_text") for p, _, _ in PERCENTILES)]))
        if m == "ttft":
            fig.hspan(y="ms", source=sources["slo"], line_color=SLO_COLOR, line_dash="dotted", line_width=2)
        figs.append(fig)
        fig.title.text = theme.plain(title)
    thr = figure(width=width, height=height, tools="", toolbar_location=None, x_axis_label="arrival rate (requests/s)",
                 y_axis_label="requests/s")  # fmt: skip
    thr.line("rate", "rate", source=src, color="#999999", line_dash="dashed", legend_label="offered")
    r = thr.line("rate", "throughput", source=src, color="#0072B2", line_width=2, legend_label="served")
    thr.scatter("rate", "throughput", source=src, color="#0072B2", size=4)
    thr.add_tools(HoverTool(renderers=[r], mode="vline", tooltips=[("rate", "@rate{0.00}/s"),
                                                                   ("served", "@throughput{0.00}/s"),
                                                                   ("replicas busy", "@busy_text")]))  # fmt: skip
    thr.title.text = theme.plain("throughput")
    figs.append(thr)
    for fig in figs:
        fig.vspan(x="rate", source=sources["knee"], line_color=KNEE_COLOR, line_width=2, line_dash="dashed")
        fig.vspan(x="rate", source=sources["rate"], line_color=RATE_COLOR, line_width=1, line_alpha=0.6)
        fig.legend.location = "top_left"
        fig.legend.label_text_font_size = "8pt"
        fig.legend.background_fill_alpha = 0.6
    # the knee on the p99 TTFT line (the metric it is found on), labelled from the data field
    figs[0].scatter("rate", "ms", source=sources["knee"], marker="diamond", size=12, color=KNEE_COLOR)
    figs[0].text(x="rate", y="ms", text="label", source=sources["knee"], text_color=KNEE_COLOR,
                 text_font_size="8pt", x_offset=6, y_offset=4, text_baseline="top")  # fmt: skip
    return gridplot([figs[:2], figs[2:]], toolbar_location=None), sources
