"""One page of a trace: summary cards, kernel and op tables, roofline; selections linked in the browser."""

from __future__ import annotations

import pandas as pd
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, LayoutDOM, TabPanel, Tabs

from ..analysis.overview import Overview
from . import theme
from .cards import summary_cards
from .linking import link_selection
from .roofline import roofline_figure
from .tables import kernel_table, name_filter, op_table


def dashboard(
    ov: Overview, roofline: pd.DataFrame | None = None, n: int = 5
) -> tuple[LayoutDOM, dict[str, ColumnDataSource]]:
    """Cards over tabs of kernels, ops and (given a roofline table) the roofline.

    A search box above the tabs keeps the kernel and op rows whose name contains
    what is typed. Selecting kernels in the top-kernels card or the kernel table selects them
    in the other, and in a per-kernel roofline; a per-op roofline links to the
    op table by op name (``gpu_time_per_op`` names the top-level ops, the
    roofline the outermost op with a cost model, so only ops that are both link).

    Parameters
    ----------
    ov : Overview
        From :func:`aonkit.analysis.overview.overview`.
    roofline : pandas.DataFrame, optional
        :func:`aonkit.analysis.roofline.roofline_table` of the same trace, by op or kernel.
    n : int
        Rows of the top-kernel and top-op cards.

    Returns
    -------
    layout : bokeh.models.LayoutDOM
    sources : dict of str to ColumnDataSource
        The cards' sources (see :func:`~aonkit.views.cards.summary_cards`),
        ``kernels``, ``ops`` and, with a roofline, ``roofline``.
    """
    cards, sources = summary_cards(ov, n)
    # with a roofline tab the tabs are as tall as the roofline: the tables fill that height instead of leaving
    # a blank band under them
    height = theme.FIG_HEIGHT if roofline is not None else theme.TABLE_HEIGHT
    kt, ksrc = kernel_table(ov.kernels, height=height)
    ot, osrc = op_table(ov.ops, height=height)
    link_selection(sources["top_kernels"], ksrc, "name")
    link_selection(sources["top_ops"], osrc, "name", "op_name")
    tabs = [TabPanel(child=kt, title="kernels"), TabPanel(child=ot, title="ops")]
    sources.update(kernels=ksrc, ops=osrc)
    if roofline is not None:
        fig, psrc = roofline_figure(roofline, width=theme.TABLE_WIDTH)  # as wide as the tables beside it
        by_kernel = "op_name" in roofline.columns
        link_selection(ksrc if by_kernel else osrc, psrc, "name" if by_kernel else "op_name", "name")
        tabs.append(TabPanel(child=fig, title="roofline"))
        sources["roofline"] = psrc
    search = name_filter([(kt, "name"), (ot, "op_name")])
    return column(cards, search, Tabs(tabs=tabs)), sources
