"""Each event's JSON text, kept lossless and read on demand: what a source gives a :class:`~aonkit.Trace`.

:class:`EventText` is the interface (``select`` and ``text``); :class:`RawEvents`
is the implementation over one contiguous buffer (the JSON reader's, or a
cache's loaded lazily); :func:`split_rows` and :func:`join_spans` help sources
made of parts (nsys, combined ranks). :mod:`aonkit.trace` re-exports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np


class EventText(Protocol):
    """Per-event JSON text: what a source gives a :class:`Trace` for lossless access to every field.

    Event ``i`` is row ``i`` of the events table; its text is one JSON object
    (Kineto-shaped for sources without JSON, such as nsys). ``event_json``,
    ``event_args``, ``arg_values``/``arg_numbers`` and the Parquet cache read
    it only through these two methods, so a source may build the text on
    demand, for the rows asked for only.
    """

    def select(self, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(buffer, starts, ends, positions) holding the texts of ``rows`` (event numbers; None: every event).

        ``buffer`` is a ``uint8`` array; the text of ``rows[k]`` is
        ``buffer[starts[p]:ends[p]]`` with ``p = positions[k]``. For ``rows=None``
        ``positions`` is ``0..n-1``. The buffer may hold other text too.
        """
        ...

    def text(self, i: int) -> bytes:
        """The JSON text of event ``i``."""
        ...


class RawEvents:
    """Byte spans of each event's JSON text in one contiguous buffer: the :class:`EventText` of most sources.

    A source provides per-event text through :class:`EventText`: ``select(rows)
    -> (buffer, starts, ends, positions)`` and ``text(i) -> bytes``. This class
    implements both for a source whose text sits in one buffer (the JSON file
    itself, the cache's text column), given now or by ``loader`` on first use
    (the Parquet cache reads the texts only when first asked). ``spans()``,
    the whole buffer with every event's offsets, is only for such sources.

    A source without JSON text does not have to make a whole buffer: it
    implements :class:`EventText` (building the rows asked for in
    ``select``), or subclasses this with a ``loader`` that builds everything
    and overrides ``select`` to build only the rows asked for until then, as
    nsys's ``PartsText`` (:mod:`aonkit.sources.nsys.sqlite`) does.

    Parameters
    ----------
    buf : numpy.ndarray or None
        ``uint8`` buffer holding the texts (None: made by ``loader``).
    ev_start, ev_end : numpy.ndarray or None
        int64 offsets of each event's text in ``buf``.
    loader : callable, optional
        Returns ``(buf, ev_start, ev_end)`` on first use when ``buf`` is None,
        or ``(buf, ev_start, ev_end, args_at)`` when it knows the args offsets.
    args_at : numpy.ndarray, optional
        int64 offset in ``buf`` of each event's ``args`` object (-1: none), as the JSON scanner records it;
        otherwise found on the first arg look-up (:meth:`args_offsets`).
    """

    def __init__(
        self,
        buf: np.ndarray | None,
        ev_start: np.ndarray | None,
        ev_end: np.ndarray | None,
        loader: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None,
        args_at: np.ndarray | None = None,
    ) -> None:
        self._buf = buf
        self._start = ev_start
        self._end = ev_end
        self._loader = loader
        self._args_at = args_at

    def _ensure(self) -> None:
        if self._buf is None and self._loader is not None:
            made = self._loader()
            self._buf, self._start, self._end = made[:3]
            if len(made) > 3 and made[3] is not None:  # a cache's loader brings the args offsets it stored
                self._args_at = made[3]
            self._loader = None

    def spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(buffer, start offsets, end offsets) of every event's text, in event order (contiguous sources only)."""
        self._ensure()
        assert self._buf is not None and self._start is not None and self._end is not None
        return self._buf, self._start, self._end

    def args_offsets(self) -> np.ndarray | None:
        """Offset in the buffer of every event's ``args`` object (-1: none): arg look-ups start there.

        Recorded by the JSON scanner while it loads, and stored in caches; otherwise found by one pass on first use.
        ``None`` for subclasses that build their text on demand (their buffers differ per selection).
        """
        if not self.offsets_apply:
            return None
        self._ensure()
        if self._args_at is None:
            from ._kernels.args import args_starts

            buf, start, end = self.spans()
            self._args_at = args_starts(buf, np.ascontiguousarray(start, np.int64),
                                        np.ascontiguousarray(end, np.int64))  # fmt: skip
        return self._args_at

    @property
    def offsets_apply(self) -> bool:
        """Whether :meth:`args_offsets` applies: False for subclasses that build their text per selection."""
        return type(self).select is RawEvents.select

    def known_args_offsets(self) -> np.ndarray | None:
        """:meth:`args_offsets` when already known (recorded, stored or found before), without finding them."""
        if not self.offsets_apply:
            return None
        self._ensure()
        return self._args_at

    def subset(self, rows: np.ndarray) -> tuple[RawEvents, np.ndarray] | None:
        """A part of the text holding ``rows`` and their positions in it, when reading only a part pays; else None.

        None here (the text is whole, or built per selection); a cache's text read in row groups gives one
        (:class:`aonkit._cache_text.CacheText`), so a look-up over a few events decodes only theirs.
        """
        return None

    def select(self, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(buffer, start offsets, end offsets, positions of ``rows`` in them); all events when ``rows`` is None.

        Readers whose text is made on demand (nsys) override this to build only the rows asked for.
        """
        buf, start, end = self.spans()
        idx = np.arange(len(start), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        return buf, start, end, idx

    def text(self, i: int) -> bytes:
        """Raw JSON bytes of event ``i`` (through :meth:`select`, so on-demand readers build only that event)."""
        buf, start, end, idx = self.select(None if self._buf is not None else np.array([i]))
        j = i if self._buf is not None else int(idx[0])
        return buf[int(start[j]) : int(end[j])].tobytes()


class PartlyRead(RawEvents):
    """A :class:`RawEvents` that can read only the part of its text a few rows need (a cache's text).

    Subclasses give :meth:`RawEvents.subset`; ``select`` takes that part while it pays, else the whole text
    (the ``loader``). The whole text comes with every event's args offset.
    """

    def select(self, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Texts of ``rows``: from the part that holds them while few, else from the whole text."""
        if rows is not None and (part := self.subset(rows)) is not None:
            return part[0].select(part[1])
        return super().select(rows)

    @property
    def offsets_apply(self) -> bool:
        """True: the text comes with every event's args offset, read whole or in parts."""
        return True


def all_spans(text: EventText) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(buffer, starts, ends) of every event's text in event order, for any :class:`EventText`.

    ``spans()`` of a :class:`RawEvents`; otherwise made from ``select(None)``.
    """
    if isinstance(text, RawEvents):
        return text.spans()
    buf, start, end, idx = text.select(None)
    return buf, np.asarray(start, np.int64)[idx], np.asarray(end, np.int64)[idx]


def split_rows(rows: np.ndarray, bounds: np.ndarray) -> tuple[list[tuple[int, np.ndarray]], np.ndarray]:
    """Event rows grouped by the part holding them (``bounds``: cumulative part sizes from 0).

    Returns (part, local rows ascending) pairs and, per input row, its position in that grouped order:
    what an :meth:`EventText.select` made of parts needs.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) and (rows.min() < 0 or rows.max() >= bounds[-1]):
        raise IndexError(f"event rows out of range 0..{bounds[-1] - 1}")
    order = np.argsort(rows, kind="stable")
    ranked = rows[order]
    groups = []
    for k in range(len(bounds) - 1):
        lo, hi = np.searchsorted(ranked, [bounds[k], bounds[k + 1]])
        if hi > lo:
            groups.append((k, ranked[lo:hi] - bounds[k]))
    idx = np.empty(len(rows), np.int64)
    idx[order] = np.arange(len(rows))
    return groups, idx


def join_spans(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One (buffer, starts, ends) from several, offsets shifted to the joined buffer."""
    if not parts:
        return np.empty(0, np.uint8), np.empty(0, np.int64), np.empty(0, np.int64)
    bases = np.cumsum([0, *(len(b) for b, _, _ in parts[:-1])])
    return (np.concatenate([b for b, _, _ in parts]),
            np.concatenate([np.asarray(st, np.int64) + o for (_, st, _), o in zip(parts, bases)]),
            np.concatenate([np.asarray(en, np.int64) + o for (_, _, en), o in zip(parts, bases)]))
