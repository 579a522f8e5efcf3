"""Columns and tables that several analyses share: per-category flags, row names, pair keys, the CPU op stack.

Every analysis builds on these instead of writing its own version (a test
checks that no module imports another module's private name). Flag tables
are computed once per category, not per row: ``flags[codes]`` with code -1
(missing) reading a trailing False.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from .. import schema
from .._kernels.inputs import frozen, owned
from ..trace import Trace

_CPU_SIDE_EXCLUDED = schema.GPU_CATS | {"gpu_user_annotation", "Trace", "cuda_sync", "overhead", "cuda_profiler_range"}


def code_flags(col: pd.Series, test) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001 - a predicate on categories
    """(codes, flags): a categorical column's codes and ``test(category)`` per code, plus False for code -1 (last)."""
    cat = col.array
    return np.asarray(cat.codes), np.array([bool(test(v)) for v in cat.categories] + [False], dtype=bool)


def category_flags(col: pd.Series, test) -> np.ndarray:  # noqa: ANN001 - a predicate on category values
    """Per event, ``test(category value)`` computed once per category (False where missing)."""
    codes, flags = code_flags(col, test)
    return np.take(flags, codes)  # code -1 picks the trailing False


def in_categories(col: pd.Series, values: frozenset | set) -> np.ndarray:
    """Per event, whether the categorical column's value is one of ``values`` (False where missing)."""
    cat = col.array
    cats = cat.categories
    flags = np.zeros(len(cats) + 1, bool)
    if len(cats) <= 256:  # a set look-up per category beats building an index to ask isin
        flags[:-1] = [v in values for v in cats]
    else:
        flags[:-1] = pd.Index(cats).isin(values)
    return np.take(flags, np.asarray(cat.codes))  # take: half the time of flags[codes] for int8 codes


def rank_columns(df: pd.DataFrame, *cols: str) -> list[np.ndarray]:
    """Contiguous, read-only int64 arrays of the frame's columns, for the kernels.

    Read-only whether or not the column had to be converted (pandas hands out
    read-only int64 columns): one kernel specialization, the one warmup compiles.
    """
    return [frozen(df[c].to_numpy(), np.int64) for c in cols]


def name_codes(col: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """(codes, categories) of a name column: a categorical's own (-1: missing), else factorized.

    The codes are writable int32 whatever pandas chose (int8, int16 or int32 by the number of categories,
    read-only), so a kernel that takes them has one specialization, which ``aonkit warmup`` compiles on any
    trace (a trace of over 32,767 names gave read-only codes, and a second one, before).
    """
    arr = col.array
    if isinstance(arr, pd.Categorical):
        return owned(arr.codes, np.int32), pd.Index(arr.categories)
    codes, cats = pd.factorize(col.to_numpy(), use_na_sentinel=True)
    return np.ascontiguousarray(codes, dtype=np.int32), pd.Index(cats)


def name_flags(col: pd.Series, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(codes, flags): ``flags[codes[i]]`` tells whether row i's name is one of ``names``.

    Codes are :func:`name_codes`'; code -1 (missing) reads the trailing False.
    """
    codes, cats = name_codes(col)
    return codes, np.append(cats.isin(names), False)


def names_of(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Names of the events ``rows`` as an object array (NaN where missing), without converting every name."""
    col = events["name"].array
    names = np.append(np.asarray(col.categories, dtype=object), np.nan)
    return names[np.asarray(col.codes)[rows]]  # code -1 (missing) picks the trailing NaN


def names_and_cats(events: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``name`` and ``cat`` of the events ``rows`` as object arrays (NaN where missing)."""
    col = events["cat"].array
    cats = np.append(np.asarray(col.categories, dtype=object), np.nan)
    return names_of(events, rows), cats[np.asarray(col.codes)[rows]]


def pair_keys(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, Callable[[np.ndarray], tuple]]:
    """One int64 key per (a, b) pair, ordered like the pairs; and a function from keys back to (a, b)."""
    from .._kernels.keys import pair_codes

    keys, a_lo, b_lo, width, ok = pair_codes(frozen(a), frozen(b))
    if ok:
        return keys, lambda k: (k // width + a_lo, k % width + b_lo)
    codes, uniq = pd.MultiIndex.from_arrays([a, b]).factorize(sort=True)
    first, second = uniq.get_level_values(0).to_numpy(), uniq.get_level_values(1).to_numpy()
    return codes.astype(np.int64), lambda k: (first[k], second[k])


def thread_keys(events: pd.DataFrame, rows: np.ndarray | None = None) -> np.ndarray:
    """One int64 per event (or per one of ``rows``) naming its thread: ``pid code << 32 | tid code``.

    The codes are those of the categorical ``pid`` and ``tid`` columns, so
    equal keys mean the same (pid, tid) pair within one table.
    """
    pid, tid = np.asarray(events["pid"].array.codes), np.asarray(events["tid"].array.codes)
    if rows is not None:  # the rows first: a few of them cost a few, not the whole table
        pid, tid = pid[rows], tid[rows]
    return (pid.astype(np.int64) << 32) | tid.astype(np.int64)


def op_stack(trace: Trace, extra: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CPU op stack: (rows, parent, order) of the CPU-side complete events plus ``extra`` rows as instants.

    ``parent`` is a position in ``rows`` (-1: a root); ``order`` sorts by
    thread, start, then longest first. Without ``extra`` the result is
    remembered per trace (:mod:`aonkit.analysis.memo`): the correlation,
    FLOP, projection and CUPTI analyses share one computation. The arrays are
    shared and read-only.
    """
    if extra is None:
        from .memo import remembered

        return remembered(trace, "op_stack", lambda: _Stack(*_op_stack(trace, None))).arrays()
    return _op_stack(trace, extra)


class _Stack(tuple):
    """A tuple the memo can hold (it asks for ``copy(deep=False)``)."""

    def __new__(cls, *parts: np.ndarray) -> _Stack:
        for p in parts:
            p.flags.writeable = False  # shared by every caller
        return super().__new__(cls, parts)

    def copy(self, deep: bool = False) -> _Stack:  # noqa: ARG002 - the memo's protocol
        return self

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self[0], self[1], self[2]


def _op_stack(trace: Trace, extra: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from .enclosing import parents

    ev = trace.events
    cat = ev["cat"]
    cpu = in_categories(ev["ph"], {"X"}) & ~in_categories(cat, _CPU_SIDE_EXCLUDED) & (np.asarray(cat.array.codes) >= 0)
    cpu &= (ev["dur_ns"].to_numpy() >= 0) & (ev["ts_ns"].to_numpy() != schema.TS_MISSING)
    if extra is not None:
        cpu[extra] = True
    rows = np.flatnonzero(cpu)
    thread = thread_keys(ev, rows)
    ts = ev["ts_ns"].to_numpy()[rows]
    end = ts + np.maximum(ev["dur_ns"].to_numpy()[rows], 0)
    order = np.lexsort((-end, ts, thread))
    return rows, parents(thread, ts, end, order), order
