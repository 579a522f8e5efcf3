"""``show(fig)``: any bokeh model as a notebook widget, with BokehJS loaded inline once per front end.

``bokeh.io.show`` after ``output_notebook(INLINE)`` puts the 4 MB BokehJS
bundle into the notebook twice per call site; this puts it on the page once
(shared with aonkit's other widgets, :mod:`aonkit.widgets._bokehjs`) and
displays the model through jupyter_bokeh, so Python can still change it.
"""

from __future__ import annotations

import ipywidgets as w
from bokeh.models import LayoutDOM
from jupyter_bokeh.widgets import BokehModel

from ._bokehjs import BokehWidget

__all__ = ["Plot", "show"]


class Plot(BokehWidget, w.VBox):
    """A bokeh model (a figure or a layout) as a widget; ``model`` is the model shown.

    Parameters
    ----------
    model : bokeh.models.LayoutDOM
        The figure or layout to show; changes made to it later reach the page.
    """

    def __init__(self, model: LayoutDOM) -> None:
        self.model = model
        super().__init__([BokehModel(model)])


def show(model: LayoutDOM) -> Plot:
    """The widget showing ``model`` (the last expression of a cell displays it).

    Parameters
    ----------
    model : bokeh.models.LayoutDOM
        A bokeh figure or layout, e.g. :func:`aonkit.views.diff.diff_figure`.

    Returns
    -------
    Plot
        The widget; BokehJS is put on the page first, inline, once per front end.

    Raises
    ------
    TypeError
        When ``model`` is not a bokeh figure or layout.
    """
    if not isinstance(model, LayoutDOM):
        raise TypeError(f"show() takes a bokeh figure or layout, not {type(model).__name__}")
    return Plot(model)
