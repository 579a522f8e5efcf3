"""A self-contained HTML page of a trace diff: the picture (:func:`aonkit.views.diff.diff_figure`) and its table."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd
from bokeh.embed import file_html
from bokeh.layouts import column
from bokeh.models import Div
from bokeh.resources import INLINE

from ..views.diff import diff_figure, diff_table

__all__ = ["diff_html", "write_diff_report"]

def diff_html(diff: pd.DataFrame, base_label: str, new_label: str, top: int = 15) -> str:
    """The page as a string (BokehJS inline): a heading, the picture of the ``top`` rows, then every row."""
    n_sig = int(diff["significant"].sum()) if len(diff) else 0
    head = Div(text=f"<b>aonkit diff</b>: {html.escape(base_label)} → {html.escape(new_label)}: {len(diff):,} "
                    f"names, {n_sig:,} with a significant change of the mean per call (Mann-Whitney p and 95% "
                    "bootstrap interval). Hover a row for its numbers.")  # fmt: skip
    parts = [head, diff_figure(diff, top=top)]
    if len(diff):
        parts.append(diff_table(diff))
    return file_html(column(*parts), resources=INLINE, title=f"aonkit diff: {base_label} → {new_label}")


def write_diff_report(diff: pd.DataFrame, path: str | Path, base_label: str, new_label: str, top: int = 15) -> Path:
    """Write :func:`diff_html` to ``path`` (UTF-8) and return the path."""
    path = Path(path)
    path.write_text(diff_html(diff, base_label, new_label, top), encoding="utf-8")
    return path
