"""ipywidgets compositions of the views, for notebooks.

``Dashboard(trace)`` shows the summary cards, tables, roofline and a timeline
that asks the kernel for the level of detail of each window it is zoomed or panned to
(``TimelineCanvas``, :mod:`aonkit.widgets.timeline`); ``LiveMonitor(sampler)``
streams a sampler's metrics with rollover and a pause button; ``WhatIfPanel(trace)``
re-times the trace's dependency graph as sliders move; ``LLMModelPanel()`` and
``ServingPanel()`` put the analytic LLM model and the serving queue under sliders, ``DisaggPanel()``
compares colocated with disaggregated (prefill/decode) serving; ``show(fig)``
shows any bokeh figure (e.g. :func:`aonkit.views.diff.diff_figure`). The bokeh ones render through
jupyter_bokeh; the first one shown to a front end puts BokehJS on the page inline, once, so
nothing is fetched from a CDN and no ``output_notebook`` call is needed first. The model panels draw
on canvases of their own (:mod:`aonkit.widgets.charts`, ``widgets/charts.js``), which redraw within a
frame of their data's arrival, and so do the monitor, ``WhatIfPanel`` and the live timeline
(``widgets/timeline.js``); they need no BokehJS. ``freeze_heap()`` (opt-in) keeps Python's full garbage
collections, which walk the whole kernel's heap, out of the panels' changes (:mod:`aonkit.widgets.heap`).
Importing this package imports ipywidgets and bokeh; ``import aonkit`` does not.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Dashboard", "DisaggPanel", "LLMModelPanel", "LiveMonitor", "Plot", "ServingPanel", "TimelineCanvas",
           "WhatIfPanel", "freeze_heap", "show", "unfreeze_heap"]


def __getattr__(name: str) -> Any:  # import each widget only when asked for
    if name == "Dashboard":
        from .dashboard import Dashboard

        return Dashboard
    if name == "LiveMonitor":
        from .monitor import LiveMonitor

        return LiveMonitor
    if name == "WhatIfPanel":
        from .whatif import WhatIfPanel

        return WhatIfPanel
    if name == "TimelineCanvas":
        from .timeline import TimelineCanvas

        return TimelineCanvas
    if name == "LLMModelPanel":
        from .llm import LLMModelPanel

        return LLMModelPanel
    if name == "ServingPanel":
        from .serving import ServingPanel

        return ServingPanel
    if name == "DisaggPanel":
        from .disagg import DisaggPanel

        return DisaggPanel
    if name in ("freeze_heap", "unfreeze_heap"):
        from . import heap

        return getattr(heap, name)
    if name in ("Plot", "show"):
        from . import plot

        return getattr(plot, name)
    raise AttributeError(name)
