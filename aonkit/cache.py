"""Parquet cache of a :class:`~aonkit.Trace`: columns in Parquet, metadata in a JSON sidecar.

Layout for the cache of ``run.pt.trace.json.gz`` (``aonkit cache`` names it
with :func:`cache_path_for`; ``trace.save(path)`` takes any ``*.parquet``):

``run.pt.trace.aon.parquet``
    One row per event. Category columns are stored as their int32 codes,
    integer columns as int64, in one row group (read without a copy).
``run.pt.trace.aon.text.parquet``
    Each event's original JSON text (``event_json``) and where its ``args``
    object starts in it (``args_rel``, -1: none; arg look-ups need not walk
    the events), zstd-compressed in row groups of a few thousand events. It is
    read only when first needed, and a look-up over a few events reads only
    the row groups that hold them (:mod:`aonkit._cache_text`). A cache written
    as the cache of an uncompressed JSON source (``source_text=True``: a job's
    caches, ``aonkit cache``) keeps only each event's span in the source here
    and reads the text from the source, checked chunk by chunk against the
    sidecar (:mod:`aonkit._cache_source`); it then needs its source for the
    text (not for the events table).
``run.pt.trace.aon.samples.parquet``
    Only when the trace carries metric samples (``trace.samples``, e.g. nsys
    ``GPU_METRICS``): that table as it is.
``run.pt.trace.aon.meta.json``
    The sidecar: format version, size and CRC-32 of each Parquet file, the
    source's name, size and mtime, the first timestamp, the categories of each category column,
    ``TraceMeta``, the file's top-level keys and warnings, the source's size
    and CRC-32 per 256 KiB when the text stays there (``text_source``, else null),
    and last a CRC-32 of its own text without that key.

Integrity: every file is written to a temporary name and renamed, the
sidecar last. A reader checks the sizes and checksums before it trusts a byte,
so a flipped bit, a truncated file, a sidecar of another cache or a half-done
write is a :class:`~aonkit.TraceFormatError` naming the file, never wrong
values. The files are not synced (fsync): a crash can lose a cache, which is
then made again from its source, but the checksums never pass a torn one off
as whole (64 ranks' caches: 0.6-1.0 s of a 7 s first open was their syncs).
Whether the cache still matches its source is the caller's question
(:func:`same_source`; :func:`aonkit.load` reads the source instead).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from . import schema
from ._filecheck import atomic_write, crc32_buffer, crc32_file, dir_lock, fingerprint, same_version, staged_write
from .errors import TraceFormatError
from .event_text import RawEvents
from .trace import Trace, all_spans

FORMAT = "aonkit-trace"
VERSION = 4
"""4: the text may stay in the source (``text_source``); 3: the text in a file of its own, in row groups."""
READABLE = (3, 4)
"""Versions this aonkit reads: a version 3 cache is a version 4 one whose text is in the cache."""
CACHE_SUFFIX = ".aon.parquet"
_SOURCE_SUFFIXES = (".pt.trace.json", ".json", ".sqlite3", ".sqlite", ".db", ".nsys-rep", ".qdrep")


class CacheVersionError(TraceFormatError):
    """A cache written by an aonkit of another cache format: re-created from its source, not an error to report."""


def cache_path_for(source: str | Path, out_dir: str | Path | None = None) -> Path:
    """Default cache file of a trace file: ``<name without .gz/.json/...>.aon.parquet`` in ``out_dir`` or beside it."""
    source = Path(source)
    stem = source.name.removesuffix(".gz")
    for suffix in _SOURCE_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return Path(out_dir if out_dir is not None else source.parent) / f"{stem}{CACHE_SUFFIX}"


def sidecar_path(path: str | Path) -> Path:
    """Path of the JSON sidecar that goes with a Parquet cache file."""
    return Path(path).with_suffix(".meta.json")


def samples_path(path: str | Path) -> Path:
    """Path of the samples table that goes with a Parquet cache file (when the trace has samples)."""
    return Path(path).with_suffix(".samples.parquet")


def text_path(path: str | Path) -> Path:
    """Path of the event text that goes with a Parquet cache file."""
    return Path(path).with_suffix(".text.parquet")


def is_cache_part(path: str | Path) -> bool:
    """True for a cache's sidecar, text or samples file (never a trace by itself)."""
    name = Path(path).name
    return name.endswith((".meta.json", ".samples.parquet", ".text.parquet"))


_SCRATCH: list[np.ndarray] = []  # a worker process's text blob, kept for its next cache
_SCRATCH_LOCK = threading.Lock()


@contextmanager
def _text_blob(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The events' texts as one blob and its offsets, for the duration of the block.

    In a worker process (a job's, which writes one cache after another) the blob is a buffer kept from the
    previous cache: a new 50 MB blob cost 26 ms a cache on the dev VM to fault in, against 5 ms to copy into.
    """
    import multiprocessing

    from ._fresh import fresh
    from ._kernels.inputs import frozen
    from ._kernels.spans import copy_spans, gather_spans, span_offsets

    b, s, e = frozen(buf), frozen(start, np.int64), frozen(end, np.int64)  # one specialization
    if multiprocessing.parent_process() is None or not _SCRATCH_LOCK.acquire(blocking=False):
        yield gather_spans(b, s, e)
        return
    try:
        offsets = span_offsets(b, s, e)
        total = int(offsets[-1])
        if not _SCRATCH or len(_SCRATCH[0]) < total:
            _SCRATCH[:] = [fresh(total + total // 8, np.uint8)]
        copy_spans(b, s, offsets, _SCRATCH[0])
        yield _SCRATCH[0][:total], offsets
    finally:
        _SCRATCH_LOCK.release()


def save_trace(trace: Trace, path: str | Path, source_text: bool = False) -> Path:
    """Write ``trace`` to ``path`` (Parquet), its text, samples and sidecar, each atomically; return ``path``.

    ``source_text``: when the trace's text is its source file's bytes (an uncompressed JSON file, unchanged),
    keep only each event's span in the cache and read the text from the source (see the module's notes).
    """
    buf, start, end = all_spans(trace._raw)
    source = trace.source if trace.source is not None else _source_of(trace)
    if source_text and source is not None:
        from ._cache_source import source_record, spans_table, write_spans

        if (record := source_record(buf, source)) is not None:
            table = spans_table(start, end, _args_rel(trace, start, end))
            return _save(trace, Path(path), source, lambda tmp: write_spans(table, tmp), record)
    with _text_blob(buf, start, end) as (blob, offsets):
        from ._cache_text import ARGS, GROUP_ROWS, TEXT

        texts = {TEXT: pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(start),
                                                        [None, pa.py_buffer(offsets), pa.py_buffer(blob)])}  # fmt: skip
        if isinstance(trace._raw, RawEvents) and trace._raw.offsets_apply:
            texts[ARGS] = pa.array(_args_rel(trace, start, end))
        text = pa.table(texts)

        def write_text(tmp: Path) -> None:
            import pyarrow.parquet as pq

            pq.write_table(text, tmp, compression="zstd", use_dictionary=False, row_group_size=GROUP_ROWS)

        return _save(trace, Path(path), source, write_text, None)


def _args_rel(trace: Trace, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Where each event's args object starts, from its text's start (-1: none)."""
    at = trace._raw.args_offsets() if isinstance(trace._raw, RawEvents) else None
    if at is None:
        return np.full(len(start), -1, np.int64)
    return np.where(at >= 0, at - np.asarray(start, np.int64), -1).astype(np.int64)


def _save(trace: Trace, path: Path, source: dict[str, Any] | None, write_text: Callable[[Path], None],
          text_source: dict[str, Any] | None) -> Path:  # fmt: skip
    ev = trace.events
    columns: dict[str, pa.Array] = {}
    categories: dict[str, list[Any]] = {}
    for col in schema.CATEGORY_COLUMNS:
        cat = ev[col].array
        columns[col] = pa.array(np.asarray(cat.codes, dtype=np.int32))
        categories[col] = list(cat.categories)
    for col in schema.INT_COLUMNS:
        columns[col] = pa.array(ev[col].to_numpy(dtype=np.int64))
    mode = 0o600 if source is None else _mode_of(source["path"])
    table = pa.table(columns)
    import pyarrow.parquet as pq  # only when writing: keeps `import aonkit` light

    # The data files are written under temporary names first; only the renames and the small files
    # happen under the folder lock, so writers of different caches in one folder overlap their slow part.
    staged = staged_write(path, lambda tmp: pq.write_table(table, tmp, compression="none", use_dictionary=False),
                          mode, sync=False)  # fmt: skip
    staged_text = None
    try:
        staged_text = staged_write(text_path(path), write_text, mode, sync=False)
        data_check, text_check = _check(staged), _check(staged_text)
        with dir_lock(path.parent):  # one writer at a time per folder: data and sidecar from the same one
            os.replace(staged, path)
            os.replace(staged_text, text_path(path))
            samples = samples_path(path)
            if trace.samples is not None:
                atomic_write(samples, lambda tmp: trace.samples.to_parquet(tmp, index=False), mode, sync=False)  # type: ignore[union-attr]
            side = {
                "format": FORMAT,
                "version": VERSION,
                "n_events": len(ev),
                "start_ns": schema.first_ts(ev["ts_ns"].to_numpy()),  # a job is checked from sidecars
                "data": data_check,
                "text": text_check,
                "text_source": text_source,
                "samples": _check(samples) if trace.samples is not None else None,
                "source": source,
                "categories": categories,
                "meta": trace.meta.to_dict(),
                "metadata": trace.metadata,
                "warnings": trace.warnings,
            }
            side["check"] = crc32_buffer(json.dumps(side).encode())  # of the rest: a flipped category name is caught
            text = json.dumps(side)
            atomic_write(sidecar_path(path), lambda tmp: tmp.write_text(text, encoding="utf-8"), mode, sync=False)
            if trace.samples is None:
                samples.unlink(missing_ok=True)
    finally:
        staged.unlink(missing_ok=True)
        if staged_text is not None:
            staged_text.unlink(missing_ok=True)
    return path


def _check(path: Path) -> dict[str, int]:
    size, crc = crc32_file(path)
    return {"bytes": size, "crc32": crc}


def _source_of(trace: Trace) -> dict[str, Any] | None:
    p = trace.meta.path
    if not p or not os.path.isfile(p) or str(p).endswith(".parquet"):
        return None
    return fingerprint(p)


def _mode_of(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o666
    except OSError:
        return 0o600


def read_sidecar(path: str | Path) -> dict[str, Any]:
    """The sidecar of cache ``path``, checked for format and version; :class:`~aonkit.TraceFormatError` otherwise."""
    side_file = sidecar_path(path)
    try:
        side = json.loads(side_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TraceFormatError(f"the cache's sidecar {side_file.name} is missing", path=str(path)) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TraceFormatError(f"unreadable cache sidecar ({type(exc).__name__}: {exc})", path=str(side_file)) from None
    if not isinstance(side, dict) or side.get("format") != FORMAT:
        raise TraceFormatError("not an aonkit trace cache sidecar", path=str(side_file))
    if side.get("version") not in READABLE:
        raise CacheVersionError(
            f"cache format version {side.get('version')!r}, this aonkit reads {READABLE}: re-create the cache",
            path=str(side_file),
        )
    check = side.pop("check", None)
    if check != crc32_buffer(json.dumps(side).encode()):
        raise TraceFormatError("the sidecar's own CRC-32 does not match (edited or corrupt); re-create the cache",
                               path=str(side_file))
    return side


def same_source(src: str | Path, side: dict[str, Any]) -> bool:
    """True when source file ``src`` still has the size and mtime the sidecar ``side`` recorded."""
    rec = side.get("source")
    return isinstance(rec, dict) and same_version(src, rec)


def guess_source(cache: str | Path) -> Path | None:
    """A file beside ``cache`` whose default cache name is ``cache``'s (for a cache whose sidecar is unusable)."""
    cache = Path(cache)
    try:
        names = sorted(p for p in cache.parent.iterdir() if p != cache and not p.name.endswith(".parquet")
                       and not is_cache_part(p) and cache_path_for(p).name == cache.name)
    except OSError:
        return None
    return next((p for p in names if p.is_file()), None)


def source_file(side: dict[str, Any], cache: str | Path) -> Path | None:
    """Where the cache's source is now: beside the cache under its recorded name, else its recorded path."""
    rec = side.get("source")
    if not isinstance(rec, dict):
        return None
    for cand in (Path(cache).parent / str(rec.get("name", "")), Path(str(rec.get("path", "")))):
        if cand.name and cand != Path(cache) and cand.is_file():
            return cand
    return None


def is_fresh(cache: str | Path, source: str | Path) -> bool:
    """True when ``cache`` is intact (sizes and checksums match its sidecar) and made from ``source`` as it is now."""
    from ._cache_read import check_files

    try:
        side = read_sidecar(cache)
        check_files(Path(cache), side)
    except TraceFormatError:
        return False
    src = source_file(side, cache)
    return src is not None and src.resolve() == Path(source).resolve() and same_source(src, side)


def load_trace(path: str | Path) -> Trace:
    """Read a trace written by :func:`save_trace`, after checking every file against the sidecar."""
    from ._cache_read import read_checked

    return read_checked(Path(path), read_sidecar(path))
