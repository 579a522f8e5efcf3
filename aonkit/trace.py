"""The trace model: ``Trace`` (one file) with its events table and metadata."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from . import schema


@dataclass
class TraceMeta:
    """Trace-level facts parsed from the file's top-level keys.

    Attributes
    ----------
    path : str or None
        File the trace was read from.
    schema_version : int or None
        ``schemaVersion``.
    base_time_ns : int or None
        ``baseTimeNanoseconds`` (already added to ``ts_ns``).
    rank, world_size : int or None
        From ``distributedInfo``.
    distributed_info : dict
        The whole ``distributedInfo`` block (backend, pg_config, nccl_version...).
    device_properties : list of dict
        ``deviceProperties``: one entry per GPU visible to the process.
    profiler_options : dict
        ``record_shapes``, ``profile_memory``, ``with_stack``, ``with_flops``,
        ``with_modules`` when present.
    versions : dict
        CUDA/CUPTI/ROCm version keys when present.
    trace_id, display_time_unit : str or None
        As in the file.
    layout : str
        ``"object"`` (a ``traceEvents`` object) or ``"array"`` (bare array).
    """

    path: str | None = None
    schema_version: int | None = None
    base_time_ns: int | None = None
    rank: int | None = None
    world_size: int | None = None
    distributed_info: dict[str, Any] = field(default_factory=dict)
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    profiler_options: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    trace_id: str | None = None
    display_time_unit: str | None = None
    layout: str = "object"

    @property
    def pg_config(self) -> list[dict[str, Any]]:
        """Process groups listed in ``distributedInfo.pg_config``."""
        pg = self.distributed_info.get("pg_config", [])
        return pg if isinstance(pg, list) else []

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (for the cache sidecar)."""
        return asdict(self)


_OPTION_KEYS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")
_VERSION_KEYS = (
    "cuda_runtime_version", "cuda_driver_version", "cupti_version",
    "roctracer_version", "hip_runtime_version", "hip_driver_version",
)  # fmt: skip


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def meta_from_top_level(top: dict[str, Any], path: str | None, layout: str) -> TraceMeta:
    """Build :class:`TraceMeta` from the decoded top-level keys of a trace."""
    dist = top.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    props = top.get("deviceProperties")
    props = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    return TraceMeta(
        path=path,
        schema_version=_as_int(top.get("schemaVersion")),
        base_time_ns=_as_int(top.get("baseTimeNanoseconds")),
        rank=_as_int(dist.get("rank")),
        world_size=_as_int(dist.get("world_size")),
        distributed_info=dist,
        device_properties=props,
        profiler_options={k: top[k] for k in _OPTION_KEYS if k in top},
        versions={k: top[k] for k in _VERSION_KEYS if k in top},
        trace_id=top.get("trace_id") if isinstance(top.get("trace_id"), str) else None,
        display_time_unit=top.get("displayTimeUnit") if isinstance(top.get("displayTimeUnit"), str) else None,
        layout=layout,
    )


def no_duration(dur_ns: np.ndarray, warnings: list[str]) -> None:
    """Mark negative durations as missing (-1) in place, with a warning: one rule for every reader.

    A negative ``dur`` is not a duration (a clock or writer error); every
    analysis treats ``dur_ns == -1`` as "no duration", so the rows stay in the
    table but add nothing to any sum. The file's value stays in ``event_json``.
    """
    bad = np.flatnonzero(dur_ns < -1)
    if bad.shape[0]:
        dur_ns[bad] = -1
        warnings.append(
            f"{bad.shape[0]} event(s) have a negative dur (first: event {int(bad[0])}); their dur_ns is -1 "
            "(no duration) and no analysis counts them; trace.event_json(i) keeps the file's value"
        )


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
        Returns ``(buf, ev_start, ev_end)`` on first use when ``buf`` is None.
    """

    def __init__(
        self,
        buf: np.ndarray | None,
        ev_start: np.ndarray | None,
        ev_end: np.ndarray | None,
        loader: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None,
    ) -> None:
        self._buf = buf
        self._start = ev_start
        self._end = ev_end
        self._loader = loader

    def _ensure(self) -> None:
        if self._buf is None and self._loader is not None:
            self._buf, self._start, self._end = self._loader()
            self._loader = None

    def spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(buffer, start offsets, end offsets) of every event's text, in event order (contiguous sources only)."""
        self._ensure()
        assert self._buf is not None and self._start is not None and self._end is not None
        return self._buf, self._start, self._end

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


class Trace:
    """One profiler trace: an events table plus trace-level metadata.

    Parameters
    ----------
    events : pandas.DataFrame
        The events table (see :mod:`aonkit.schema`).
    meta : TraceMeta
        Parsed trace-level facts.
    raw : EventText
        Each event's JSON text, for lossless per-event access (usually a
        :class:`RawEvents`; any object with its ``select`` and ``text``).
    metadata : dict
        Every top-level key of the file except ``traceEvents``, decoded. It can
        hold secrets (environment dumps), so aonkit never prints it.
    warnings : list of str
        What the reader had to work around (truncation, rounding...).
    samples : pandas.DataFrame, optional
        Metric samples on the events' clock, long form ``ts_ns`` (int64),
        ``device`` (int64, -1 for the host), ``metric`` (category), ``value``
        (float64). This attribute is the one way samples reach a trace (the
        timeline draws them as counter lanes; the cache saves them): set by
        the source (nsys ``GPU_METRICS``) or afterwards from a live sampler
        with :func:`aonkit.sources.samplers.attach_samples`. None when there
        are none.
    """

    def __init__(
        self,
        events: pd.DataFrame,
        meta: TraceMeta,
        raw: EventText,
        metadata: dict[str, Any] | None = None,
        warnings: list[str] | None = None,
        samples: pd.DataFrame | None = None,
    ) -> None:
        self.events = events
        self.meta = meta
        self._raw = raw
        self.metadata: dict[str, Any] = metadata if metadata is not None else {}
        self.warnings: list[str] = list(warnings or [])
        self.samples: pd.DataFrame | None = samples
        """Metric samples, long form ``ts_ns, device, metric, value`` (see the class doc); None when none."""
        self.source: dict[str, Any] | None = None
        self.bundle: dict[str, Any] | None = None
        """The manifest of the profile bundle the trace was read from (:mod:`aonkit.sources.bundle`), else None."""
        """Name, path, size and mtime of the file read, taken before reading it (None when not read from a file)."""

    def __len__(self) -> int:
        return len(self.events)

    def __repr__(self) -> str:
        name = Path(self.meta.path).name if self.meta.path else "<memory>"
        rank = "" if self.meta.rank is None else f", rank={self.meta.rank}"
        warn = f", {len(self.warnings)} warning(s)" if self.warnings else ""
        return f"<aonkit.Trace {name}: {len(self.events):,} events{rank}{warn}>"

    # -- lossless access -------------------------------------------------------------------
    def event_bytes(self, i: int) -> bytes:
        """The exact bytes of event ``i``'s JSON text in the file (invalid UTF-8 included)."""
        return self._raw.text(i)

    def event_json(self, i: int) -> dict[str, Any]:
        """The whole event ``i`` as decoded JSON (every key, exact integers)."""
        # invalid UTF-8 can only sit in parts the scanner did not decode; show it as U+FFFD
        value = json.loads(self._raw.text(i).decode("utf-8", "replace"))
        return value if isinstance(value, dict) else {"_value": value}

    def event_args(self, i: int) -> dict[str, Any]:
        """``args`` of event ``i`` as decoded JSON; ``{}`` when it has none."""
        args = self.event_json(i).get("args")
        return args if isinstance(args, dict) else {}

    def arg_values(self, key: str, rows: np.ndarray | pd.Index | None = None) -> list[Any]:
        """Decoded ``args[key]`` of the events ``rows`` (positions; default all), None where absent.

        One Numba pass finds the values in the events' JSON text; only the found
        values are decoded.
        """
        spans, buf = self._arg_spans(key, rows)
        return [None if s < 0 else json.loads(buf[s:e].tobytes()) for s, e in spans.tolist()]

    def arg_numbers(self, key: str, rows: np.ndarray | pd.Index | None = None) -> np.ndarray:
        """``args[key]`` of the events ``rows`` as float64; NaN where absent or not a number.

        Integers and most floats are read by Numba passes (the same float64
        ``json.loads`` gives); other values (long or extreme floats, numbers
        given as strings as in ROCm traces) are decoded by ``json``.
        """
        from ._kernels.args import span_floats, span_ints

        spans, buf = self._arg_spans(key, rows)
        ints, ok = span_ints(buf, spans)
        out = ints.astype(np.float64)
        rest = np.flatnonzero(~ok & (spans[:, 0] >= 0))
        if len(rest):  # floats, where one IEEE operation gives them exactly (most of them)
            floats, fok = span_floats(buf, np.ascontiguousarray(spans[rest]))
            out[rest[fok]] = floats[fok]
            rest = rest[~fok]
        if len(rest):  # the other values, decoded by one json.loads of them all as one array
            view = memoryview(buf)
            text = b"[" + b",".join([view[s:e] for s, e in spans[rest].tolist()]) + b"]"
            values = json.loads(text.decode("utf-8", "replace"))
            first = buf[spans[rest, 0]]
            if ((first == 45) | ((first >= 48) & (first <= 57))).all():  # JSON numbers only: no per-value checks
                out[rest] = np.array(values, dtype=np.float64)
            else:
                for r, v in zip(rest.tolist(), values):
                    try:
                        out[r] = float(v) if not isinstance(v, (bool, dict, list, type(None))) else np.nan
                    except ValueError:
                        out[r] = np.nan
        out[spans[:, 0] < 0] = np.nan
        return out

    def arg_ints(self, key: str, rows: np.ndarray | pd.Index | None = None) -> np.ndarray:
        """``args[key]`` as exact int64; -1 where absent or not an integer that fits."""
        from ._kernels.args import span_ints

        spans, buf = self._arg_spans(key, rows)
        ints, ok = span_ints(buf, spans)
        return np.where(ok, ints, -1)

    def arg_ints_of(self, keys: Sequence[str], rows: np.ndarray | pd.Index | None = None) -> dict[str, np.ndarray]:
        """:meth:`arg_ints` of several keys, from one pass over the events' text.

        Returns ``{key: int64 array}``, -1 where absent or not an integer that fits.
        """
        from ._kernels.args import span_ints

        spans, buf = self._arg_spans_of(keys, rows)
        out = {}
        for k, key in enumerate(keys):
            ints, ok = span_ints(buf, np.ascontiguousarray(spans[:, k, :]))
            out[key] = np.where(ok, ints, -1)
        return out

    def _arg_spans(self, key: str, rows: np.ndarray | pd.Index | None) -> tuple[np.ndarray, np.ndarray]:
        spans, buf = self._arg_spans_of([key], rows)
        return np.ascontiguousarray(spans[:, 0, :]), buf

    def _arg_spans_of(self, keys: Sequence[str], rows: np.ndarray | pd.Index | None) -> tuple[np.ndarray, np.ndarray]:
        """Value spans of ``args[key]`` for each key, shape (rows, keys, 2) (-1: absent), and the text buffer."""
        from ._kernels.args import find_args

        buf, start, end, idx = self._raw.select(None if rows is None else np.asarray(rows, dtype=np.int64))
        quoted = [np.frombuffer(json.dumps(k).encode(), np.uint8) for k in keys]
        key_off = np.concatenate([[0], np.cumsum([len(q) for q in quoted])]).astype(np.int64)
        flat = np.concatenate(quoted) if quoted else np.empty(0, np.uint8)
        return find_args(buf, np.ascontiguousarray(start), np.ascontiguousarray(end), idx, flat, key_off), buf

    # -- convenience views -----------------------------------------------------------------
    def _cat_in(self, cats: frozenset[str]) -> pd.DataFrame:
        return self.events[self.events["cat"].isin(cats)]

    @property
    def kernels(self) -> pd.DataFrame:
        """GPU kernel events (``kernel``; 2020-21 ``Kernel``)."""
        return self._cat_in(schema.KERNEL_CATS)

    @property
    def gpu_events(self) -> pd.DataFrame:
        """Kernels, memcpys and memsets."""
        return self._cat_in(schema.GPU_CATS)

    @property
    def cpu_ops(self) -> pd.DataFrame:
        """CPU operator events (``cpu_op``; 2020-21 ``Operator``)."""
        return self._cat_in(schema.CPU_OP_CATS)

    @property
    def runtime(self) -> pd.DataFrame:
        """Runtime/driver API calls (CUDA, HIP through ``cuda_runtime``, MTIA)."""
        return self._cat_in(schema.RUNTIME_CATS)

    @property
    def flows(self) -> pd.DataFrame:
        """Flow events (``ph`` in ``s``, ``t``, ``f``)."""
        return self.events[self.events["ph"].isin(schema.FLOW_PHASES)]

    # -- persistence -----------------------------------------------------------------------
    def with_samples(self, samples: Any, *, replace: bool = False) -> Trace:
        """Add live samples taken beside this trace (a sampler or its long-form table); return the trace.

        The samples must be on the trace's clock (``time.time_ns()``, as every
        aonkit sampler and Kineto use). See
        :func:`aonkit.sources.samplers.attach_samples`.
        """
        from .sources.samplers import attach_samples

        attach_samples(self, samples, replace=replace)
        return self

    def save(self, path: str | Path) -> Path:
        """Write the trace as Parquet plus a JSON sidecar (see :mod:`aonkit.cache`)."""
        from .cache import save_trace

        return save_trace(self, path)

    def equals(self, other: Trace) -> bool:
        """True when both traces hold equal events, trace metadata and top-level keys (the path may differ)."""
        if not isinstance(other, Trace):
            return False
        return (
            self.events.equals(other.events)
            and self.meta.to_dict() == {**other.meta.to_dict(), "path": self.meta.path}
            and self.metadata == other.metadata
        )
