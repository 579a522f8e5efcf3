"""``Charts``: canvas charts drawn in the page by aonkit's own ES module, for panels that must redraw fast.

In JupyterLab, a BokehJS figure given new data was drawn 60-120 ms later on a 2-CPU machine (its layout pass
and CSS reads restyle the whole page; ``bench/RESULTS.md``, sessions 30-32), over the model panels' 100 ms
budget. ``Charts`` draws lines, points, stacked bars, spans, text, legends and a hover read-out on one
``<canvas>`` per chart (``widgets/charts*.js``, an anywidget module shipped inline: nothing is fetched), and a
change of data touches nothing else in the page.

A chart is described once (``spec``: a dict built in :mod:`aonkit.views.model_charts` or
:mod:`aonkit.views.monitor`); its data are named sources of columns. :class:`ChartSource` gives each source the
``.data`` attribute and the ``.stream(rows, rollover)`` method of a bokeh ``ColumnDataSource``: a panel assigns new
columns the same way, and inside :meth:`Charts.one_patch` the assignments leave as one message; a stream sends
only its new rows, and the page draws at its next frame whatever arrived before it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anywidget
import numpy as np
import traitlets

WEB = Path(__file__).resolve().parent / "web"
"""The browser-side code: ``widgets/`` at the top of the checkout (``aonkit/widgets/web`` links to it)."""
PARTS = ("charts_axes.js", "charts_draw.js", "charts.js")
"""The module's source files, joined in this order (anywidget loads one module from a string)."""
ESM = "\n".join((WEB / name).read_text(encoding="utf-8") for name in PARTS)
"""The ES module the page runs."""


def _clean(values: Any) -> list:
    """A column as JSON: numbers as floats or ints, NaN and infinities as ``None`` (a gap), text as is."""
    if isinstance(values, np.ndarray):
        values = values.tolist()
    out = []
    for v in values:
        if isinstance(v, float) and not math.isfinite(v):
            out.append(None)
        elif isinstance(v, (np.floating, np.integer, np.bool_)):
            x = v.item()
            out.append(None if isinstance(x, float) and not math.isfinite(x) else x)
        else:
            out.append(v)
    return out


def _clean_block(values: np.ndarray) -> list[list]:
    """The columns of a float block (rows x columns) as JSON lists, as :func:`_clean` makes them, in one pass."""
    cols = values.T.tolist()
    bad = ~np.isfinite(values)
    if bad.any():
        for i, j in zip(*np.nonzero(bad.T)):
            cols[i][j] = None
    return cols


def _check_lengths(name: str, columns: Mapping[str, Any]) -> None:
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"source {name!r}: columns of different lengths {sorted(lengths)}")


class ChartSource:
    """One named source of a :class:`Charts`: set :attr:`data` (a dict of columns) to redraw what uses it.

    ``data`` reads back exactly what was assigned (NaN stays NaN); the page gets NaN as a gap.
    """

    def __init__(self, charts: Charts, name: str, data: Mapping[str, Any]) -> None:
        self.charts, self.name = charts, name
        self._data = dict(data)
        # rows streamed since the columns were last joined: (names, a 2-D block of rows x names, or one array each)
        self._tail: list[tuple[tuple[str, ...], Any]] = []
        self._tail_rows, self._keep = 0, None

    @property
    def data(self) -> dict[str, Any]:
        """The columns last assigned, with the rows streamed since (the last ``rollover`` of them)."""
        self._join()
        return self._data

    @data.setter
    def data(self, value: Mapping[str, Any]) -> None:
        _check_lengths(self.name, value)
        self._data, self._tail, self._tail_rows = dict(value), [], 0
        self.charts._streamed.discard(self.name)
        self.charts._changed(self.name)

    def _join(self) -> None:
        """Append the streamed rows to the columns and apply the rollover (at most one copy per kept length)."""
        if not self._tail_rows:
            return
        keep, where = self._keep, {}
        for names, _ in self._tail:
            where.setdefault(names, {n: j for j, n in enumerate(names)})
        for k in self._data:
            parts = [rows[:, where[names][k]] if isinstance(rows, np.ndarray) else rows[where[names][k]]
                     for names, rows in self._tail]  # fmt: skip
            col = np.concatenate([np.asarray(self._data[k]), *parts])
            self._data[k] = col[-keep:] if keep is not None and len(col) > keep else col
        self._tail, self._tail_rows = [], 0

    def stream(self, rows: Mapping[str, Any], rollover: int | None = None) -> None:
        """Append ``rows`` (the same columns as :attr:`data`) and keep the last ``rollover`` rows.

        Only the new rows go to the page (a small message at each call, whatever the length kept), at once. Here
        the rows wait beside the columns until :attr:`data` is read or they number ``rollover`` (256 without
        one): a stream of one row costs no copy of what is kept.
        """
        _check_lengths(self.name, rows)
        names, columns = tuple(rows), list(rows.values())
        if columns and all(isinstance(c, np.ndarray) and c.dtype == np.float64 for c in columns):
            self.stream_array(names, np.stack(columns, axis=1), rollover)  # numbers only: one block
            return
        self._stream(names, [np.array(v) for v in columns], rollover)  # a copy: the caller may reuse its arrays

    def stream_array(self, names: Sequence[str], values: np.ndarray, rollover: int | None = None) -> None:
        """:meth:`stream` of float columns given as one block: ``values[i, j]`` is row ``i`` of ``names[j]``.

        The block is kept as it is (not copied): the caller must not change it afterwards. Its JSON is made in
        one pass (NaN and infinities as gaps), not column by column.
        """
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != len(names):
            raise ValueError(f"source {self.name!r}: a block of shape {values.shape} for {len(names)} columns")
        self._stream(tuple(names), values, rollover)

    def _stream(self, names: tuple[str, ...], rows: Any, rollover: int | None) -> None:
        if set(names) != set(self._data) or len(names) != len(self._data):
            raise ValueError(f"source {self.name!r}: stream columns {sorted(names)} are not {sorted(self._data)}")
        block = isinstance(rows, np.ndarray)
        n = rows.shape[0] if block else len(rows[0]) if rows else 0
        if n == 0:
            return
        keep = None if rollover is None or rollover <= 0 else int(rollover)
        if keep != self._keep:
            self._join()  # (the rows before, under the rollover they came with)
            self._keep = keep
        self._tail.append((names, rows))
        self._tail_rows += n
        if self._tail_rows >= (keep or 256):
            self._join()
        self.charts._streamed.add(self.name)
        json_rows = dict(zip(names, _clean_block(rows) if block else map(_clean, rows)))
        self.charts.send({"kind": "stream", "source": self.name, "rollover": keep or 0, "rows": json_rows})


class Charts(anywidget.AnyWidget):
    """A row or grid of canvas charts sharing named data sources.

    Parameters
    ----------
    charts : list of dict
        One spec per chart (see ``widgets/charts.js`` and :mod:`aonkit.views.model_charts`).
    sources : mapping of str to mapping
        Initial columns per source name.
    columns : int, optional
        Charts per row (default: all in one row).

    Attributes
    ----------
    sources : dict of str to ChartSource
    """

    _esm = ESM
    _css = WEB / "charts.css"
    spec = traitlets.Dict().tag(sync=True)
    data = traitlets.Dict().tag(sync=True)

    def __init__(self, charts: list[dict], sources: Mapping[str, Mapping[str, Any]], columns: int | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        names = {m["source"] for c in charts for m in c["marks"]} | {c["hover"]["source"] for c in charts
                                                                     if c.get("hover")}  # fmt: skip
        missing = sorted(names - set(sources))
        if missing:
            raise ValueError(f"charts use sources {missing} that were not given")
        self._held: set[str] | None = None
        self._streamed: set[str] = set()  # sources whose rows in the page came by stream(), not by `data`
        self.sources = {name: ChartSource(self, name, cols) for name, cols in sources.items()}
        super().__init__(spec={"charts": list(charts), "columns": int(columns or len(charts))},
                         data={n: {k: _clean(v) for k, v in s.data.items()} for n, s in self.sources.items()},
                         **kwargs)  # fmt: skip
        self.on_msg(self._message)

    def _message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """A view that starts asks for the rows streamed before it: they go as one message to all views."""
        if isinstance(content, dict) and content.get("kind") == "snapshot" and self._streamed:
            self.send({"kind": "reset", "data": {n: {k: _clean(v) for k, v in self.sources[n].data.items()}
                                                 for n in sorted(self._streamed)}})  # fmt: skip

    def _changed(self, name: str) -> None:
        if self._held is not None:
            self._held.add(name)
        else:
            self._send_sources({name})

    def _send_sources(self, names: set[str]) -> None:
        data = dict(self.data)
        for n in names:
            data[n] = {k: _clean(v) for k, v in self.sources[n].data.items()}
        self.data = data  # one message

    @contextmanager
    def one_patch(self) -> Iterator[None]:
        """Send the sources changed inside the block as one message when it ends (even on an error)."""
        if self._held is not None:
            yield
            return
        self._held = set()
        try:
            yield
        finally:
            held, self._held = self._held, None
            if held:
                self._send_sources(held)
