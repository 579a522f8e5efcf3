"""One trace from the ranks of a job, on one clock: what a multi-rank timeline and dashboard draw.

``combine_ranks(job)`` concatenates the ranks' events after shifting each
rank by its clock offset (:func:`aonkit.analysis.collectives.clock_offsets`:
matched collectives, else ``ProfilerStep`` starts). So that nothing links or
nests across ranks:

* ``pid`` values become ``"<pid>@rank<r>"`` (processes on different hosts can
  share a pid), so CPU call stacks and lanes stay per rank;
* ``correlation``, ``external_id`` and flow ``id`` get ``(r + 1) << 40`` added
  (each rank numbers them from 1);
* an int64 ``rank`` column says where each event came from; the timeline
  puts the ranks' lanes one after another, labelled by rank;
* the ranks' live samples (a job ``aonkit trace`` wrote) are kept once per
  node (:func:`combined_samples`), on the combined clock.

Every event's original text stays reachable (``event_json``/``event_args``),
so hover and args work as on a single trace.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from .. import schema
from ..trace import RawEvents, Trace, TraceMeta, join_spans, split_rows
from .collectives import clock_offsets

ID_SHIFT = 40
"""Each rank's correlation, external and flow ids get ``(rank + 1) << ID_SHIFT`` added."""


class _RanksText(RawEvents):
    """The ranks' event texts, each read through its rank's own ``RawEvents`` (nothing copied until asked)."""

    def __init__(self, traces: list[Trace]) -> None:
        super().__init__(None, None, None, loader=lambda: self._texts(None))
        self._raws = [t._raw for t in traces]
        self._bounds = np.cumsum([0, *(len(t.events) for t in traces)])

    def _texts(self, groups: list[tuple[int, np.ndarray | None]] | None) -> tuple[np.ndarray, ...]:
        from .._kernels.inputs import frozen
        from .._kernels.spans import gather_spans

        groups = groups if groups is not None else [(k, None) for k in range(len(self._raws))]
        parts = []
        for k, local in groups:
            buf, start, end, idx = self._raws[k].select(local)
            st, en = np.asarray(start, np.int64)[idx], np.asarray(end, np.int64)[idx]
            if local is not None:  # a few rows: copy their texts, not the rank's whole buffer
                blob, off = gather_spans(frozen(buf), frozen(st), frozen(en))
                st, en, buf = off[:-1], off[1:], blob
            parts.append((buf, st, en))
        return join_spans(parts)

    def select(self, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Texts of ``rows``, each asked of its own rank (an nsys rank builds only those rows)."""
        if rows is None or self._buf is not None:
            return super().select(rows)
        groups, idx = split_rows(rows, self._bounds)
        return (*self._texts(groups), idx)


def _categorical(parts: list[pd.Categorical]) -> pd.Categorical:
    try:
        return union_categoricals(parts, ignore_order=True)
    except TypeError:  # categories of different kinds (int pids here, strings there)
        return union_categoricals([pd.Categorical(p.astype(object)) for p in parts], ignore_order=True)


def combine_ranks(job: Mapping[int, Trace], align: bool = True, offsets: pd.Series | None = None) -> Trace:
    """The ranks of ``job`` as one trace on the lowest rank's clock (see the module doc).

    Parameters
    ----------
    job : mapping of int to Trace
        A :class:`~aonkit.TraceSet` or any rank -> trace mapping.
    align : bool
        Shift ranks by their clock offsets (else keep each file's clock).
    offsets : pandas.Series, optional
        The offsets to shift by (ns per rank, :func:`~aonkit.analysis.collectives.clock_offsets`'s form),
        when the caller has them; default: computed.

    Returns
    -------
    Trace
        ``meta.rank`` is None and ``meta.world_size`` the number of ranks;
        ``offsets`` (ns per rank) are in ``trace.metadata["clock_offsets_ns"]``.
    """
    ranks = sorted(job)
    if not ranks:
        raise ValueError("combine_ranks needs at least one rank")
    traces = [job[r] for r in ranks]
    if offsets is not None:
        off = offsets
    else:
        off = clock_offsets(job) if align and len(ranks) > 1 else pd.Series(0, index=ranks)
    frames, cat_parts = [], {c: [] for c in schema.CATEGORY_COLUMNS}
    for rank, t in zip(ranks, traces):
        ev = t.events
        ts = ev["ts_ns"].to_numpy()
        shift = int(off.get(rank, 0))
        cols = {"ts_ns": np.where(ts != schema.TS_MISSING, ts - shift, ts), "dur_ns": ev["dur_ns"].to_numpy()}
        for c in ("correlation", "external_id", "id"):
            v = ev[c].to_numpy()
            cols[c] = np.where(v >= 0, v + ((rank + 1) << ID_SHIFT), v)
        cols["stream"], cols["device"] = ev["stream"].to_numpy(), ev["device"].to_numpy()
        cols["rank"] = np.full(len(ev), rank, np.int64)
        frames.append(cols)
        for c in schema.CATEGORY_COLUMNS:
            part = ev[c].array
            if c == "pid":
                part = part.rename_categories(pid_names(part.categories, rank))
            cat_parts[c].append(part)
    data = {c: _categorical(cat_parts[c]) for c in schema.CATEGORY_COLUMNS}
    for c in (*schema.INT_COLUMNS, "rank"):
        data[c] = np.concatenate([f[c] for f in frames])
    events = pd.DataFrame({c: data[c] for c in (*schema.EVENT_COLUMNS, "rank")}, copy=False)
    first = traces[0].meta
    meta = TraceMeta(path=first.path, world_size=len(ranks), device_properties=first.device_properties,
                     base_time_ns=first.base_time_ns, layout=first.layout)  # fmt: skip
    warnings = [f"rank {r}: {w}" for r, t in zip(ranks, traces) for w in t.warnings]
    return Trace(events, meta, _RanksText(traces),
                 metadata={"clock_offsets_ns": {int(r): int(v) for r, v in off.items()}}, warnings=warnings,
                 samples=combined_samples(dict(zip(ranks, traces)), off, getattr(job, "hosts", None)))


def combined_samples(traces: Mapping[int, Trace], off: pd.Series,
                     hosts: Mapping[int, str] | None = None) -> pd.DataFrame | None:  # fmt: skip
    """The ranks' samples on the combined clock, each node's once: what :func:`combine_ranks` puts on ``samples``.

    Ranks of one node carry that node's samples (a job ``aonkit trace`` wrote: the daemon's, over each rank's
    window). Ranks are one node when ``hosts`` says so, else when their samples are equal. Each node's samples are
    shifted by its lowest rank's clock offset and their union kept (a sample in two ranks' windows once). With
    more than one node, each node's metrics end in ``@r<R>`` (``R``: its lowest rank), so that GPU 0 of one node
    and GPU 0 of another are two series (:func:`~aonkit.sources.samples.part_label`: "GPU 0, node of rank 2").
    None when no rank has samples.
    """
    from ..sources.samples import samples_table

    hosts = hosts or {}
    nodes: list[tuple[list[int], list[pd.DataFrame]]] = []
    for rank, t in sorted(traces.items()):
        s = t.samples
        if s is None or not len(s):
            continue
        for members, tables in nodes:
            first = members[0]
            if (hosts.get(rank) and hosts.get(rank) == hosts.get(first)) or (
                    not hosts.get(rank) and not hosts.get(first) and tables[0].equals(s)):
                members.append(rank)
                tables.append(s)
                break
        else:
            nodes.append(([rank], [s]))
    if not nodes:
        return None
    parts = []
    for members, tables in nodes:
        part = pd.concat(tables, ignore_index=True) if len(tables) > 1 else tables[0]
        part = part.assign(ts_ns=part["ts_ns"].to_numpy() - int(off.get(members[0], 0)))
        if len(nodes) > 1:
            part = part.assign(metric=part["metric"].astype(str) + f"@r{members[0]}")
        parts.append(part)
    table = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    return samples_table(table.drop_duplicates(["ts_ns", "device", "metric"], ignore_index=True))


class CombinedLater(Trace):
    """:func:`combine_ranks` of a job, made on the first use of anything a :class:`~aonkit.Trace` holds.

    A job's dependency graph needs only the ranks; a what-if reads the combined events when a rule asks for
    names, a step window or the re-timed trace. ``row_base``: each rank's first row in the combined events,
    with which :meth:`names_and_cats` reads a few rows from their ranks instead.
    """

    def __init__(self, job: Mapping[int, Trace], offsets: pd.Series,
                 row_base: Mapping[int, int] | None = None) -> None:  # noqa: D107 - see the class
        self.__dict__["_later"] = (job, offsets)
        self.__dict__["_row_base"] = dict(row_base) if row_base is not None else None

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or "_later" not in self.__dict__:
            raise AttributeError(name)
        job, offsets = self.__dict__["_later"]
        combined = combine_ranks(job, offsets=offsets)  # should it raise, the next read tries again
        del self.__dict__["_later"]
        self.__dict__.update(combined.__dict__)
        return getattr(self, name)

    def names_and_cats(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``name`` and ``cat`` of the combined events ``rows`` (object arrays, NaN where missing).

        Before the events are combined (and when the first combined row of each rank is known), each row is
        read from its own rank, only the ranks that hold them: a job's critical-path table names a few
        thousand events of a few ranks, which need not combine 64 ranks' events.
        """
        from .columns import names_and_cats

        rows = np.asarray(rows, dtype=np.int64)
        base = self.__dict__.get("_row_base")
        if "_later" not in self.__dict__ or base is None:
            return names_and_cats(self.events, rows)
        job = self.__dict__["_later"][0]
        ranks = sorted(base)
        starts = np.array([base[r] for r in ranks], np.int64)
        which = np.searchsorted(starts, rows, "right") - 1
        names, cats = np.empty(len(rows), object), np.empty(len(rows), object)
        for i in np.unique(which):
            sel = np.flatnonzero(which == i)
            ev = job[ranks[i]].events
            local = rows[sel] - starts[i]
            if local.max() >= len(ev):
                raise IndexError(f"combined event row {int(rows[sel].max())} is past rank {ranks[i]}'s events")
            names[sel], cats[sel] = names_and_cats(ev, local)
        return names, cats


def combined_categories(job: Mapping[int, Trace], column: str, cats: list[pd.Index] | None = None) -> pd.Index:
    """The categories :func:`combine_ranks` gives ``column``, without combining the events.

    ``cats``: the ranks' own categories (``pid`` already renamed per rank) when the caller has them; the
    ranks' events are read only when the categories are of different kinds (then the values decide).
    """
    if cats is None:
        cats = [job[r].events[column].array.categories for r in sorted(job)]
        if column == "pid":
            cats = [pd.Index(pid_names(c, r)) for c, r in zip(cats, sorted(job))]
    try:  # the categories alone, as union_categoricals appends them
        return union_categoricals([pd.Categorical.from_codes(np.zeros(0, np.int8), categories=c) for c in cats],
                                  ignore_order=True).categories  # fmt: skip
    except TypeError:  # categories of different kinds: combine_ranks takes them from the values
        parts = []
        for r in sorted(job):
            part = job[r].events[column].array
            parts.append(part.rename_categories(pid_names(part.categories, r)) if column == "pid" else part)
        return _categorical(parts).categories


def pid_names(pids: pd.Index, rank: int) -> list[str]:
    """``<pid>@rank<r>`` per pid category, distinct.

    A string pid that reads like another pid (``"100"`` beside ``100``) keeps its quotes.
    """
    names = [f"{v}@rank{rank}" for v in pids]
    if len(set(names)) < len(names):
        plain = {f"{v}" for v in pids if not isinstance(v, str)}
        names = [f"{v!r}@rank{rank}" if isinstance(v, str) and v in plain else n for v, n in zip(pids, names)]
    return names
