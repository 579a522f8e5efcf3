"""A self-contained HTML page of trace summaries (no scripts, no network)."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from ..analysis.summary import TraceSummary
from ..units import fmt_ns

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}.warn{color:#a40}"""


def _table(df: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = []
    for rec in df.itertuples(index=False):
        cells = []
        for v in rec:
            num = isinstance(v, (int, float)) and not isinstance(v, bool)
            cells.append(f"<td class='n'>{v:,.4g}</td>" if isinstance(v, float) else
                         f"<td{' class=n' if num else ''}>{html.escape(str(v))}</td>")  # fmt: skip
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def summary_html(summaries: list[tuple[str, TraceSummary]], title: str = "aonkit summary") -> str:
    """HTML page with one section per (label, summary); every string is escaped."""
    parts = [f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title><style>{_STYLE}</style>",
             f"<h1>{html.escape(title)}</h1>"]  # fmt: skip
    for label, s in summaries:
        name = Path(s.path).name if s.path else "<memory>"
        parts.append(f"<h2>{html.escape(label)}: {html.escape(name)}</h2>")
        parts.append(f"<p>{s.n_events:,} events over {fmt_ns(s.span_ns)}; kernel time {fmt_ns(s.gpu_busy_ns)}</p>")
        if len(s.gpus):
            parts.append(_table(s.gpus))
        if len(s.top_kernels):
            k = s.top_kernels.assign(total=s.top_kernels["total_ns"].map(fmt_ns))
            parts.append(_table(k[["name", "count", "total", "share"]]))
        parts.append(_table(s.categories))
        parts += [f"<p class='warn'>warning: {html.escape(w)}</p>" for w in s.warnings]
    return "\n".join(parts)
