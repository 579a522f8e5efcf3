"""A shareable report: one self-contained HTML file with the dashboard and a multi-resolution timeline.

``write_report(trace, "report.html")`` (CLI: ``aonkit report TRACE -o
report.html``) writes a page that opens offline: BokehJS is inlined (about
1.6 MB) and nothing is fetched. It shows the summary cards, the kernel and op
tables, the roofline (when the trace recorded shapes) and a timeline whose
levels of detail were computed ahead (:func:`aonkit.timeline.static.
static_timeline`), so zoom and pan stay responsive without a Python kernel.

Size bound: BokehJS plus the dashboard's tables (one row per distinct kernel
and op name) plus the timeline pyramid, whose glyph count is capped by its
``budget``; see :mod:`aonkit.timeline.static` for the per-level bound.
Every string from the trace reaches the page as data and is shown as text;
``trace.metadata`` (which can hold secrets) is never written.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bokeh.embed import file_html
from bokeh.layouts import column
from bokeh.models import Div, LayoutDOM
from bokeh.resources import INLINE
from bokeh.settings import settings

from ..analysis.op_tree import op_tree
from ..analysis.overview import overview
from ..analysis.roofline import roofline_table
from ..timeline import color_legend, static_timeline, timeline_pyramid
from ..trace import Trace
from ..units import fmt_ns
from ..views.dashboard import dashboard
from ..views.icicle import icicle_figure

_NOTE = "aonkit report: {n:,} events over {span}. Hover for details; drag to pan, wheel to zoom."
NO_GPU = ("No GPU events in this trace (a CPU-only profile, or GPU activities were not recorded): the GPU cards and "
          "the kernel table stay empty.")
MAX_WARNINGS = 10


def _header(trace: Trace, span_ns: int, n_gpu: int) -> Div:
    # fixed text, numbers and aonkit's own reader warnings, escaped: no name or metadata from the trace
    parts = [html.escape(_NOTE.format(n=len(trace.events), span=fmt_ns(span_ns)))]
    if n_gpu == 0:
        parts.append(f"<b>{html.escape(NO_GPU)}</b>")
    if trace.warnings:
        shown = [f"<li>{html.escape(str(w))}</li>" for w in trace.warnings[:MAX_WARNINGS]]
        more = len(trace.warnings) - len(shown)
        if more > 0:
            shown.append(f"<li>{more} more (see <code>trace.warnings</code>)</li>")
        parts.append(f"{len(trace.warnings)} reader warning(s):<ul style='margin:2px 0'>{''.join(shown)}</ul>")
    return Div(text="<br>".join(parts), disable_math=True)


def report_layout(trace: Trace, *, width_px: int = 1400, timeline: bool = True,
                  critical_path: bool = False) -> LayoutDOM:  # fmt: skip
    """The report's bokeh layout: header, dashboard (cards, tables, roofline) and the static timeline.

    With ``critical_path`` the timeline outlines the trace's critical path
    (:func:`aonkit.analysis.critical_path.critical_path`).
    """
    ov = overview(trace)
    roof = roofline_table(trace)
    layout, srcs = dashboard(ov, roof if len(roof) else None)
    parts: list[LayoutDOM] = [_header(trace, ov.summary.span_ns, len(ov.kernels)), layout]
    tree = op_tree(trace)
    if len(tree):
        parts.append(icicle_figure(tree, width=min(width_px, 1400))[0])
    if timeline and len(trace.events):
        critical = None
        if critical_path:
            from ..analysis.critical_path import critical_path as path_of

            critical = path_of(trace)
        pyr = timeline_pyramid(trace, width_px)
        tl = static_timeline(pyr, critical=critical, source=trace,
                             pickers=[(srcs["kernels"], "name"), (srcs["ops"], "op_name")])
        parts[1:1] = [color_legend(list(pyr.palette)), tl]  # the colour key (the colours drawn), then the timeline
    return column(*parts)


@contextmanager
def unvalidated() -> Iterator[None]:
    """Bokeh's document validation off while a page is written (as ``BOKEH_VALIDATE_DOC=0`` would).

    The validation only logs what it finds, and took 0.3 s of a report's 2.6 s here; the report's layouts
    are validated by the tests instead (``tests/test_report.py`` asserts bokeh's ``check_integrity`` finds
    nothing on real traces). A choice of the user's (``BOKEH_VALIDATE_DOC``, or the setting set in code) stands.
    """
    setting = settings.perform_document_validation
    chosen = getattr(setting, "_user_value", None)  # bokeh's record of a value set in code; its "unset" is a class
    if "BOKEH_VALIDATE_DOC" in os.environ or (chosen is not None and not isinstance(chosen, type)):
        yield
        return
    setting.set_value(False)
    try:
        yield
    finally:
        setting.unset_value()


def report_html(trace: Trace, *, title: str | None = None, width_px: int = 1400, timeline: bool = True,
                critical_path: bool = False) -> str:  # fmt: skip
    """The report page as a string (BokehJS inline, no network access when opened)."""
    name = Path(trace.meta.path).name if trace.meta.path else "trace"
    layout = report_layout(trace, width_px=width_px, timeline=timeline, critical_path=critical_path)
    with unvalidated():
        return file_html(layout, resources=INLINE,
                         title=title or f"aonkit report: {name}")  # bokeh's template escapes the title


def write_report(trace: Trace, path: str | Path, **kwargs: object) -> Path:
    """Write :func:`report_html` to ``path`` (UTF-8) and return the path."""
    path = Path(path)
    path.write_text(report_html(trace, **kwargs), encoding="utf-8")  # type: ignore[arg-type]
    return path
