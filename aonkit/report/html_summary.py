"""A self-contained HTML page of trace summaries (no scripts, no network)."""

from __future__ import annotations

import html
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from ..units import fmt_ns
from ..views.theme import fmt_bytes, fmt_pct

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


def summary_html(summaries: list[tuple], title: str = "aonkit summary", found: pd.DataFrame | None = None) -> str:
    """HTML page with one section per (label, summary[, report file name]); every string is escaped.

    With a report file name (relative to the page) the section links to it. ``found``: the rows of
    :func:`~aonkit.analysis.findings.findings` to list first, under "What to look at first".
    """
    parts = [f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title><style>{_STYLE}</style>",
             f"<h1>{html.escape(title)}</h1>"]  # fmt: skip
    if found is not None and len(found):
        parts.append("<h2>What to look at first</h2><ul>")
        parts += [f"<li>{html.escape(str(t))}</li>" for t in found["text"]]
        parts.append("</ul>")
    for label, s, *report in summaries:
        name = Path(s.path).name if s.path else "<memory>"
        parts.append(f"<h2>{html.escape(label)}: {html.escape(name)}</h2>")
        if report and report[0]:
            parts.append(f"<p><a href='{html.escape(quote(str(report[0])))}'>interactive report</a> (dashboard, "
                         "roofline, zoomable timeline)</p>")
        parts.append(f"<p>{s.n_events:,} events over {fmt_ns(s.span_ns)}; kernel time {fmt_ns(s.gpu_busy_ns)}</p>")
        if len(s.gpus):
            g = s.gpus.assign(memory=s.gpus["memory_bytes"].map(fmt_bytes)) if "memory_bytes" in s.gpus else s.gpus
            parts.append(_table(g.drop(columns=["memory_bytes"], errors="ignore")))
        if len(s.top_kernels):
            k = s.top_kernels.assign(total=s.top_kernels["total_ns"].map(fmt_ns),
                                     share=s.top_kernels["share"].map(fmt_pct))  # fmt: skip
            parts.append(_table(k[["name", "count", "total", "share"]]))
        parts.append(_table(s.categories))
        parts += [f"<p class='warn'>warning: {html.escape(w)}</p>" for w in s.warnings]
    return "\n".join(parts)
