"""Per-trace memo of derived tables, so that several analyses of one trace share the work.

:func:`aonkit.analysis.correlation.gpu_links`,
:func:`aonkit.analysis.correlation.gpu_launches`,
:func:`aonkit.analysis.kernels.gpu_table` and
:func:`aonkit.analysis.bandwidth.copies` are remembered per
:class:`~aonkit.Trace`. An entry belongs to the trace's current ``events``
table: assigning a new table to ``trace.events`` makes the next call
recompute. Changing the table in place is not detected; call
:func:`clear` after doing that. The memo holds traces weakly, so it never
keeps one alive, and callers get shallow copies, which pandas' copy-on-write
keeps from changing the remembered table.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any

import pandas as pd

from ..trace import Trace

_MEMO: weakref.WeakKeyDictionary[Trace, tuple[weakref.ref, dict[Hashable, Any]]] = weakref.WeakKeyDictionary()


def _tables(trace: Trace) -> dict[Hashable, Any]:
    entry = _MEMO.get(trace)
    if entry is None or entry[0]() is not trace.events:
        entry = (weakref.ref(trace.events), {})
        _MEMO[trace] = entry
    return entry[1]


def remembered(trace: Trace, key: Hashable, compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """``compute()`` for ``trace`` and ``key``, computed once per events table of the trace.

    Parameters
    ----------
    trace : Trace
        The trace the table is derived from.
    key : hashable
        What is derived, with its parameters (e.g. ``("gpu_table", pattern)``).
    compute : callable
        Builds the table from the trace's current events.

    Returns
    -------
    pandas.DataFrame
        A shallow copy of the remembered table.
    """
    tables = _tables(trace)
    if key not in tables:
        tables[key] = compute()
    return tables[key].copy(deep=False)


def remembered_object(trace: Trace, key: Hashable, compute: Callable[[], Any]) -> Any:
    """Like :func:`remembered` for a derived object that callers only read (a graph): returned as is."""
    tables = _tables(trace)
    if key not in tables:
        tables[key] = compute()
    return tables[key]


def peek(trace: Trace, key: Hashable) -> Any:
    """What is remembered for ``trace`` and ``key`` (a shallow copy of a table), or None: nothing is computed."""
    entry = _MEMO.get(trace)
    if entry is None or entry[0]() is not trace.events or key not in entry[1]:
        return None
    value = entry[1][key]
    return value.copy(deep=False) if isinstance(value, pd.DataFrame) else value


def clear(trace: Trace | None = None) -> None:
    """Forget what was derived from ``trace`` (every trace when None)."""
    if trace is None:
        _MEMO.clear()
    else:
        _MEMO.pop(trace, None)


def size(trace: Trace) -> int:
    """How many tables are remembered for ``trace`` (for tests and diagnostics)."""
    entry = _MEMO.get(trace)
    return 0 if entry is None or entry[0]() is not trace.events else len(entry[1])
