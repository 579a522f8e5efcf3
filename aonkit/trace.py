"""The trace model: ``Trace`` (one file) with its events table and metadata."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import schema, trace_args
from .event_text import EventText, RawEvents, all_spans, join_spans, split_rows  # noqa: F401 - re-exported


@dataclass
class TraceMeta:
    """Trace-level facts parsed from the file's top-level keys.

    Each parameter sets the attribute of the same name (see Attributes).

    Parameters
    ----------
    path, trace_id, display_time_unit : str, optional
        Default None.
    schema_version, base_time_ns, rank, world_size : int, optional
        Default None.
    distributed_info, profiler_options, versions : dict, optional
        Default: a new empty dict.
    device_properties : list of dict, optional
        Default: a new empty list.
    layout : str, optional
        Default ``"object"``.

    Attributes
    ----------
    path : str or None
        File the trace was read from.
    schema_version : int or None
        ``schemaVersion``.
    base_time_ns : int or None
        ``baseTimeNanoseconds`` (already added to ``ts_ns``); for an Nsight Systems export, the session's start
        (ns since the Unix epoch), likewise added.
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
        CUDA/CUPTI/ROCm version keys when present (an Nsight Systems export: ``nsys`` and
        ``nsys_export_schema``).
    trace_id, display_time_unit : str or None
        As in the file.
    layout : str
        ``"object"`` (a ``traceEvents`` object), ``"array"`` (bare array) or ``"nsys-sqlite"`` (an Nsight
        Systems SQLite export).
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
        """Name, path, size and mtime of the file read, taken before reading it (None when not read from a file)."""
        self.bundle: dict[str, Any] | None = None
        """The manifest of the profile bundle the trace was read from (:mod:`aonkit.sources.bundle`), else None."""

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
        return trace_args.values(self._raw, key, self._rows(rows))

    def arg_numbers(self, key: str, rows: np.ndarray | pd.Index | None = None) -> np.ndarray:
        """``args[key]`` of the events ``rows`` as float64; NaN where absent or not a number.

        Integers and most floats are read by Numba passes (the same float64
        ``json.loads`` gives); other values (long or extreme floats, numbers
        given as strings as in ROCm traces) are decoded by ``json``.
        """
        return trace_args.numbers(self._raw, key, self._rows(rows))

    def arg_ints(self, key: str, rows: np.ndarray | pd.Index | None = None) -> np.ndarray:
        """``args[key]`` as exact int64; -1 where absent or not an integer that fits."""
        return trace_args.ints(self._raw, key, self._rows(rows))

    def arg_ints_of(self, keys: Sequence[str], rows: np.ndarray | pd.Index | None = None) -> dict[str, np.ndarray]:
        """:meth:`arg_ints` of several keys, from one pass over the events' text.

        Returns ``{key: int64 array}``, -1 where absent or not an integer that fits.
        """
        return trace_args.ints_of(self._raw, keys, self._rows(rows))

    def _rows(self, rows: np.ndarray | pd.Index | None) -> np.ndarray | None:
        """``rows`` as int64 event positions (None: every event); an IndexError for one outside the events."""
        if rows is None:
            return None
        out = np.asarray(rows, dtype=np.int64)
        if out.size and (out.min() < 0 or out.max() >= len(self.events)):
            bad = out[(out < 0) | (out >= len(self.events))][0]
            raise IndexError(f"event row {bad} is outside this trace's {len(self.events):,} events")
        return out

    def _arg_spans_of(self, keys: Sequence[str], rows: np.ndarray | pd.Index | None) -> tuple[np.ndarray, np.ndarray]:
        """Value spans of ``args[key]`` for each key, shape (rows, keys, 2) (-1: absent), and the text buffer."""
        return trace_args.spans_of(self._raw, keys, self._rows(rows))

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

    def save(self, path: str | Path, *, source_text: bool = False) -> Path:
        """Write the trace as Parquet plus a JSON sidecar (see :mod:`aonkit.cache`); return ``path``.

        With ``source_text`` and an uncompressed JSON source whose bytes are the trace's text, the cache keeps
        each event's span in the source instead of a copy of its text (what a job's caches do); reading the
        text then needs the source, unchanged. By default the cache holds the text itself.
        """
        from .cache import save_trace

        return save_trace(self, path, source_text)

    def equals(self, other: Trace) -> bool:
        """True when both traces hold equal events, trace metadata and top-level keys (the path may differ)."""
        if not isinstance(other, Trace):
            return False
        return (
            self.events.equals(other.events)
            and self.meta.to_dict() == {**other.meta.to_dict(), "path": self.meta.path}
            and self.metadata == other.metadata
        )

