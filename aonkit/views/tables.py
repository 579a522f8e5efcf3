"""Sortable tables of kernels and ops: bokeh ``DataTable`` over the analyses' ns tables.

Times are shown in one unit per table (chosen from the largest value of its
time columns) as numbers, so sorting stays numeric; the exact ns columns stay
in the source. Names go through an escaping template (``<%- value %>``): text,
not HTML, with the whole name as the cell's tooltip. :func:`name_filter` makes
a search box for the tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from bokeh.models import (
    CDSView,
    ColumnDataSource,
    CustomJS,
    DataTable,
    HTMLTemplateFormatter,
    IndexFilter,
    NumberFormatter,
    StringFormatter,
    TableColumn,
    TextInput,
)

from ..analysis.kernels import gpu_time_per_op, kernel_stats
from ..trace import Trace
from . import theme
from ._data import frame_source

SHARE_FORMAT = "0.00%"
"""numbro format of share columns (fractions shown as percentages)."""


def time_columns(df: pd.DataFrame, specs: list[tuple[str, str, str]]) -> list[TableColumn]:
    """Add each ``field`` (``ns_col`` converted) to ``df``; return their columns titled ``label (unit)``.

    ``specs`` holds (``ns_col``, ``field``, ``label``). One table uses one time
    unit, chosen from the largest value of all its time columns.
    """
    peak = max((np.nanmax(df[c].to_numpy(np.float64)) for c, _, _ in specs if len(df)), default=0.0)
    unit, scale = theme.time_unit(peak)
    digits = "0,0" if unit == "ns" else "0,0.000"
    out = []
    for ns_col, field, label in specs:
        df[field] = df[ns_col].to_numpy(np.float64) / scale
        out.append(TableColumn(field=field, title=f"{label} ({unit})", formatter=NumberFormatter(format=digits),
                               width=90))
    return out


NAME_TEMPLATE = '<span title="<%- value %>"><%- value %></span>'
"""A name cell: the text, and the whole name as the cell's tooltip; ``<%- %>`` HTML-escapes both."""

FILTER_JS = """
const q = cb_obj.value_input.trim().toLowerCase();
for (const [src, flt, col] of tables) {
  const names = src.data[col];
  const keep = [];
  for (let i = 0; i < names.length; i++) {
    if (q === "" || String(names[i]).toLowerCase().includes(q)) keep.push(i);
  }
  flt.indices = keep;
}
"""
"""Body of the name filter; arg ``tables``: (source, IndexFilter, name column) per table. Fixed text: names are data."""


def name_column(field: str, title: str, width: int) -> TableColumn:
    """A column of names: shown as text (escaped), the full name on hover when the cell cuts it."""
    return TableColumn(field=field, title=title, formatter=HTMLTemplateFormatter(template=NAME_TEMPLATE), width=width)


def data_table(df: pd.DataFrame, columns: list[TableColumn], name: str, width: int, height: int) -> DataTable:
    """A sortable table of ``df`` (source ``name``); its view holds an ``IndexFilter`` for :func:`name_filter`."""
    source = frame_source(df, name)
    view = CDSView(filter=IndexFilter(indices=list(range(len(df)))))
    # reorderable=False: column dragging needs jquery-ui, which BokehJS does not ship (a console warning)
    return DataTable(source=source, columns=columns, width=width, height=height, sortable=True, reorderable=False,
                     index_position=None, name=name, view=view)  # fmt: skip


def name_filter(tables: list[tuple[DataTable, str]], width: int = 400) -> TextInput:
    """A text box that keeps, in each table, the rows whose name column contains the typed text (any case).

    Parameters
    ----------
    tables : list of (DataTable, str)
        Tables made here (their view holds an ``IndexFilter``) and the column to match.
    """
    args = [(t.source, t.view.filter, col) for t, col in tables]
    box = TextInput(placeholder="filter kernels and ops by name", width=width, name="name_filter")
    box.js_on_change("value_input", CustomJS(args={"tables": args}, code=FILTER_JS))
    return box


def kernel_table(
    data: Trace | pd.DataFrame,
    *,
    n: int | None = None,
    width: int = theme.TABLE_WIDTH,
    height: int = theme.TABLE_HEIGHT,
) -> tuple[DataTable, ColumnDataSource]:
    """Table of GPU events per name: class, count, total/mean/min/max time and share of GPU time.

    Parameters
    ----------
    data : Trace or pandas.DataFrame
        A trace, or its :func:`~aonkit.analysis.kernels.kernel_stats` (by name).
    n : int, optional
        Keep only the ``n`` names with the most time.
    width, height : int
        Table size in pixels.

    Returns
    -------
    table : bokeh.models.DataTable
    source : bokeh.models.ColumnDataSource
        One row per name, most time first: ``name``, ``class``, ``count``,
        the ns columns of ``kernel_stats``, the displayed ``total``, ``mean``,
        ``min``, ``max`` (in the unit of the column's title) and ``share``.
    """
    stats = kernel_stats(data) if isinstance(data, Trace) else data
    df = stats.head(n).reset_index(drop=True) if n is not None else stats.reset_index(drop=True)
    df = df[["name", "class", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "share"]].copy()
    columns = [
        name_column("name", "kernel", 420),
        TableColumn(field="class", title="class", formatter=StringFormatter(), width=90),
        TableColumn(field="count", title="count", formatter=NumberFormatter(format="0,0"), width=60),
        *time_columns(df, [(f"{s}_ns", s, s) for s in ("total", "mean", "min", "max")]),
        TableColumn(field="share", title="share", formatter=NumberFormatter(format=SHARE_FORMAT), width=60),
    ]
    table = data_table(df, columns, "kernel_table", width, height)
    return table, table.source


def op_table(
    data: Trace | pd.DataFrame,
    *,
    level: str = "top_op",
    n: int | None = None,
    width: int = theme.TABLE_WIDTH,
    height: int = theme.TABLE_HEIGHT,
) -> tuple[DataTable, ColumnDataSource]:
    """Table of CPU ops by the GPU time they launched: calls, GPU events, GPU and CPU time, share.

    Parameters
    ----------
    data : Trace or pandas.DataFrame
        A trace, or its :func:`~aonkit.analysis.kernels.gpu_time_per_op`.
    level : {"top_op", "op"}
        Op level when ``data`` is a trace.
    n : int, optional
        Keep only the ``n`` ops with the most GPU time (shares stay of the total).
    width, height : int
        Table size in pixels.

    Returns
    -------
    table : bokeh.models.DataTable
    source : bokeh.models.ColumnDataSource
        ``op_name``, ``calls``, ``gpu_events``, ``gpu_ns``, ``cpu_ns``, the
        displayed ``gpu_time``/``cpu_time`` (in the unit of the column's
        title) and ``share`` (of all GPU time attributed to ops).
    """
    ops = gpu_time_per_op(data, level=level) if isinstance(data, Trace) else data
    df = ops[["op_name", "calls", "gpu_events", "gpu_ns", "cpu_ns"]].reset_index(drop=True)
    total = float(df["gpu_ns"].sum())
    df = df.assign(share=df["gpu_ns"] / total if total else 0.0)
    df = df.head(n).copy() if n is not None else df.copy()
    columns = [
        name_column("op_name", "op", 420),
        TableColumn(field="calls", title="calls", formatter=NumberFormatter(format="0,0"), width=60),
        TableColumn(field="gpu_events", title="GPU events", formatter=NumberFormatter(format="0,0"), width=80),
        *time_columns(df, [("gpu_ns", "gpu_time", "GPU time"), ("cpu_ns", "cpu_time", "CPU time")]),
        TableColumn(field="share", title="share", formatter=NumberFormatter(format=SHARE_FORMAT), width=60),
    ]
    table = data_table(df, columns, "op_table", width, height)
    return table, table.source
