"""Linked selection between two ColumnDataSources by a shared key column, in the browser.

Selecting rows in one source (a table's row click, a box select on a scatter)
selects every row of the other source whose key is among the selected keys.
The callback is a :class:`bokeh.models.CustomJS`, so it works in a static HTML
file with no Python kernel. Its code is the fixed text :data:`LINK_JS`; the
sources and the key column names travel as ``args`` (data), never as code.
"""

from __future__ import annotations

from bokeh.document import Document
from bokeh.models import ColumnDataSource, CustomJS, Selection

LINK_JS = """
const mine = src.selected.__aonkitSetBy;
if (mine && mine[1] !== JSON.stringify(src.selected.indices)) delete src.selected.__aonkitSetBy;  // picked since
else if (mine && mine[0] === dst.id) return;
const col = src.data[src_key];
const keys = new Set(src.selected.indices.map((i) => col[i]));
const other = dst.data[dst_key];
const out = [];
for (let i = 0; i < other.length; i++) {
  if (keys.has(other[i])) out.push(i);
}
const cur = dst.selected.indices;
if (out.length === cur.length && out.every((v, j) => v === cur[j])) return;
dst.selected.__aonkitSetBy = [src.id, JSON.stringify(out)];
dst.selected.indices = out;
"""
"""Body of the selection callback; args ``src``, ``dst`` (sources) and ``src_key``, ``dst_key`` (column names).

A pick spreads from the source it was made in through every link, but a selection this callback set is never
sent back to the source it came from: a source with no row for the pick (a kernel without a roofline point, or
beyond the top-kernels card) would otherwise send an empty selection back and clear the pick where it was
made. (BokehJS runs these callbacks after the change, not inside it, so the mark travels with the selection.)
It also leaves ``dst`` alone when its selection already matches.
"""


def selection_callback(src: ColumnDataSource, dst: ColumnDataSource, src_key: str, dst_key: str) -> CustomJS:
    """The :class:`~bokeh.models.CustomJS` that copies ``src``'s selection to ``dst`` by key (not attached)."""
    for source, key in ((src, src_key), (dst, dst_key)):
        if key not in source.data:
            raise KeyError(f"column {key!r} not in source {source.name or source.id}: {sorted(source.data)}")
    return CustomJS(args={"src": src, "dst": dst, "src_key": src_key, "dst_key": dst_key}, code=LINK_JS)


def link_selection(
    a: ColumnDataSource, b: ColumnDataSource, key: str, key_b: str | None = None, both_ways: bool = True
) -> list[CustomJS]:
    """Select in ``b`` the rows whose ``key_b`` value is selected in ``a``'s ``key`` column (and back).

    Parameters
    ----------
    a, b : bokeh.models.ColumnDataSource
        E.g. a :func:`~aonkit.views.tables.kernel_table` source and a
        :func:`~aonkit.views.roofline.roofline_figure` source of kernels.
    key : str
        Key column of ``a``.
    key_b : str, optional
        Key column of ``b`` (default ``key``).
    both_ways : bool
        Also copy ``b``'s selection to ``a``.

    Returns
    -------
    list of bokeh.models.CustomJS
        The callbacks attached to ``a.selected`` (and ``b.selected``) on ``indices``.

    Raises
    ------
    KeyError
        When a key column is missing.
    """
    key_b = key if key_b is None else key_b
    forward = selection_callback(a, b, key, key_b)
    a.selected.js_on_change("indices", forward)
    out = [forward]
    if both_ways:
        back = selection_callback(b, a, key_b, key)
        b.selected.js_on_change("indices", back)
        out.append(back)
    return out


REPLAY_JS = """
for (const s of selections) {
  if (s.indices.length) s.properties.indices.change.emit();
}
"""
"""Body of the replay; arg ``selections``. A table drawn with a selection already set does not show it, and the
links above only act on a change: emitting the change signal (no new value, so nothing is sent anywhere) makes
the tables and the linked figures show it."""


def replay_selections(doc: Document, selections: list[Selection]) -> CustomJS:
    """Show, once the page has drawn ``doc``, the selections it was built with (tables, linked cards and plots).

    Attaches a ``document_ready`` callback (:data:`REPLAY_JS`) to ``doc`` and returns it.
    """
    cb = CustomJS(args={"selections": list(selections)}, code=REPLAY_JS)
    doc.js_on_event("document_ready", cb)
    return cb
