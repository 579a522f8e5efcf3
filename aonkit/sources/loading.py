"""``load`` and its variants: a path (file, directory, list, bundle, cache) in, traces out.

Each file is read by the reader :mod:`.registry` picks for it (the built-in
readers are registered by :mod:`aonkit.sources` itself).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Union

from .._filecheck import fingerprint, same_version
from ..errors import JobError, TraceFormatError, warn_user
from ..trace import Trace
from ..traceset import TraceSet, rank_from_name
from .bundle import is_bundle, read_bundle
from .cached import read_cache
from .discover import CACHE_SUFFIXES, directory_files, pick
from .registry import reader_for
from .traced_job import attach_rank_samples, attach_traced_job, is_traced_job

PathLike = Union[str, "os.PathLike[str]"]


def _read_one(path: Path, salvage: bool, max_decompressed_bytes: int | None, threads: int | None = None) -> Trace:
    """Read one file (a cache falls back to its source when unusable or stale); OS errors name the file."""
    try:
        if path.name.lower().endswith(CACHE_SUFFIXES):
            trace, why = read_cache(path, lambda src: _read_one(src, salvage, max_decompressed_bytes, threads))
            if why:
                _note(trace, why)
            else:
                _raise(trace.warnings)
            return trace
        before = fingerprint(path)
        trace = _read_source(path, salvage, max_decompressed_bytes, threads)
        _raise(trace.warnings)
        if not same_version(path, before):
            _note(trace, f"{path.name} changed while it was read; read it again when its writer is done")
        trace.source = before
        return trace
    except OSError as exc:
        raise TraceFormatError(f"cannot read the file ({exc.strerror or exc})", path=str(path)) from None


def _read_source(path: Path, salvage: bool, max_decompressed_bytes: int | None, threads: int | None) -> Trace:
    """Read ``path`` with the reader the registry picks, passing the options that reader takes."""
    reader = reader_for(path)
    given = {"salvage": salvage, "max_decompressed_bytes": max_decompressed_bytes, "threads": threads}
    return reader.read(path, **{k: v for k, v in given.items() if k in reader.options})


def _raise(texts: list[str]) -> None:
    """Say each of a reader's warnings as an :class:`~aonkit.AonkitWarning` too (they are in ``trace.warnings``)."""
    for text in texts:
        warn_user(text)


def _note(trace: Trace, text: str) -> None:
    trace.warnings.append(text)
    warn_user(text)


def load(
    path: PathLike | list[PathLike] | tuple[PathLike, ...],
    *,
    salvage: bool = False,
    max_decompressed_bytes: int | None = None,
    workers: int | None = None,
    threads: int | None = None,
    on_conflict: str = "error",
    separate: bool = False,
    lazy: bool = False,
    cache_dir: PathLike | None = None,
    write_caches: bool = True,
) -> Trace | TraceSet | dict[str, Trace]:
    """Load a trace file, a job's directory of traces or a list of files.

    Parameters
    ----------
    path : path-like or list of path-like
        A Kineto/Chrome-trace ``.json`` / ``.json.gz`` file (or a bare JSON
        array), an Nsight Systems ``.sqlite`` export (or ``.nsys-rep``, exported
        with ``nsys`` when it is on PATH), an aonkit ``.parquet`` cache, a
        profile bundle folder (``aonkit.profile``, ``%%aon_profile``: one
        trace with its samples), a directory, or a list of files. A job
        folder of ``aonkit trace --all-ranks`` or ``--job`` also gives each
        rank its samples and the job its step lags and notes
        (:mod:`aonkit.sources.traced_job`; a lazy job's ranks get theirs when read).
    salvage : bool
        Keep the complete events of a truncated file (see ``trace.warnings``)
        instead of raising :class:`~aonkit.TraceFormatError`.
    max_decompressed_bytes : int, optional
        Cap on the size of decompressed gzip input (decompression-bomb guard;
        default: see :func:`aonkit.sources._io.default_cap`).
    workers : int, optional
        Threads used to read several files (the parser releases the GIL).
    threads : int, optional
        Threads used to scan one large file (default: one per core, up to 8,
        for files of 16 MB and more). The result does not depend on it.
    on_conflict : {"error", "newest", "file-order"}
        For a directory or list: what to do when two files claim one rank or
        some name none (see :meth:`aonkit.TraceSet.from_traces`).
    separate : bool
        For a directory or list: return each file's trace on its own, keyed by
        file name, without treating them as one job.
    lazy : bool
        For a directory or list: return a :class:`~aonkit.lazyset.LazyTraceSet`
        that holds no rank until asked; ranks without a fresh cache are parsed
        once, in ``workers`` processes, and cached (see :func:`aonkit.open_job`).
    cache_dir : path-like, optional
        With ``lazy``: where the caches go (default: beside the traces when
        their folder is writable, else a per-user cache folder).
    write_caches : bool
        With ``lazy``: ``False`` writes no cache (each rank is parsed again
        when read; fresh caches are still used).

    Returns
    -------
    Trace, TraceSet or dict of str to Trace
        A :class:`~aonkit.Trace` for one file; a :class:`~aonkit.TraceSet`
        keyed by rank for a directory or a list (one job); with ``separate``,
        a dict keyed by file name.

    Raises
    ------
    TraceFormatError
        A file is unreadable, malformed or holds no events (the message names it).
    JobError
        The files of a directory or list are not one job (different runs, two
        files for one rank): the message names them and says what to pass.

    Notes
    -----
    A file's reader is chosen by :func:`aonkit.sources.registry.reader_for`:
    by suffix, then by its first bytes; a file no reader claims is read as
    Chrome-trace JSON. :func:`aonkit.sources.registry.register` adds formats.

    In a directory, an aonkit cache (``*.aon.parquet``) stands in for its
    source: the cache is read when fresh, else the source, never both. A
    cache that fails its checksum falls back to its source with a warning.
    """
    if lazy and not separate and (isinstance(path, (list, tuple)) or (Path(path).is_dir() and not is_bundle(path))):
        from ..lazyset import open_job

        return open_job(path if isinstance(path, (list, tuple)) else Path(path), processes=workers,
                        cache_dir=cache_dir, salvage=salvage, on_conflict=on_conflict,
                        write_caches=write_caches)  # fmt: skip
    where = None
    notes: list[str] = []
    if isinstance(path, (list, tuple)):
        files = [Path(p) for p in path]
        for f in files:
            if not f.is_file():
                raise FileNotFoundError(f"no such trace file: {f}")
    else:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"no such trace file or directory: {p}")
        if not p.is_dir() or is_bundle(p):  # a file, or a profile bundle (one trace with its samples)
            one = (read_bundle(p, lambda f: _read_one(f, salvage, max_decompressed_bytes, threads)) if p.is_dir()
                   else _read_one(p, salvage, max_decompressed_bytes, threads))
            return {p.name: one} if separate else one
        where = p
        files, notes = directory_files(p)
    picks = pick(files)
    n = workers or min(len(picks), os.cpu_count() or 1, 8)
    read = lambda f: _read_one(f, salvage, max_decompressed_bytes, threads if len(picks) == 1 else None)  # noqa: E731
    if n <= 1 or len(picks) == 1:
        traces = [read(f) for f, _ in picks]
    else:
        with ThreadPoolExecutor(n) as pool:
            traces = list(pool.map(read, [f for f, _ in picks]))
    for (_, extra), t in zip(picks, traces):
        for text in extra:
            _note(t, text)
    for text in notes:
        _note(traces[0], text)
    if separate:
        if where is not None and is_traced_job(where):  # each rank's samples, by the rank in its file's name
            named = {rank_from_name(f.name): t for (f, _), t in zip(picks, traces)}
            attach_rank_samples({r: t for r, t in named.items() if r is not None}, where)
        return {(f.name if where is not None else str(f)): t for (f, _), t in zip(picks, traces)}
    try:
        job = TraceSet.from_traces(traces, on_conflict)
    except JobError as exc:
        label = str(where) if where is not None else f"{len(files)} files"
        raise JobError(f"{label}: {exc}") from None
    return attach_traced_job(job, where) if where is not None and is_traced_job(where) else job


def _no_separate(name: str, options: dict[str, Any]) -> None:
    if "separate" in options:
        raise TypeError(f"{name} does not take separate=; load_each returns each file on its own")


def load_trace(path: PathLike, **options: Any) -> Trace:
    """One trace file as a :class:`~aonkit.Trace` (options as :func:`load`); a directory or list is a TypeError.

    Parameters
    ----------
    path : str or path-like
        A trace file in any format :func:`load` reads, or a profile bundle folder (one trace with its samples).
    **options
        Keywords of :func:`load`. For one file only ``salvage``, ``max_decompressed_bytes`` and ``threads``
        have an effect; ``separate=True`` is not supported (the result is then a dict, and an assertion
        fails).

    Returns
    -------
    Trace
        The file's trace; each of the reader's warnings is also issued as an :class:`~aonkit.AonkitWarning`.

    Raises
    ------
    TypeError
        ``path`` is a list or tuple, or a directory that is not a profile bundle.
    FileNotFoundError
        ``path`` does not exist.
    TraceFormatError
        The file is unreadable, malformed or holds no events (the message names it).
    """
    if isinstance(path, (list, tuple)) or (Path(path).is_dir() and not is_bundle(path)):
        raise TypeError(f"load_trace reads one file; {path!r} is a directory or list: use load_job or load_each")
    _no_separate("load_trace", options)
    out = load(path, **options)
    assert isinstance(out, Trace)
    return out


def load_job(path: PathLike | list[PathLike] | tuple[PathLike, ...], **options: Any) -> TraceSet:
    """A job's directory, list of files, or one file as a :class:`~aonkit.TraceSet` keyed by rank.

    Options as :func:`load` (``on_conflict`` included). One file gives a job of
    one rank: its own, or 0 when it names none.

    Parameters
    ----------
    path : str, path-like, or list or tuple of them
        A directory of one job's traces, a list of trace files, or one trace file or profile bundle folder.
    **options
        Keywords of :func:`load`: ``salvage``, ``max_decompressed_bytes``, ``workers``, ``threads``,
        ``on_conflict``, ``lazy``, ``cache_dir``, ``write_caches``. For one file they go to
        :func:`load_trace` (``on_conflict``, ``lazy``, ``cache_dir`` and ``write_caches`` then have no
        effect); ``separate=True`` is not supported (an assertion fails).

    Returns
    -------
    TraceSet
        Keyed by rank (``distributedInfo.rank``, else a rank in the file name; see
        :meth:`aonkit.TraceSet.from_traces`); with ``lazy`` and a directory or list, a
        :class:`~aonkit.lazyset.LazyTraceSet`.

    Raises
    ------
    FileNotFoundError
        ``path``, or a file of the list, does not exist.
    TraceFormatError
        A file is unreadable, malformed or holds no events, or the directory holds no trace file (the message
        names it).
    JobError
        The files are not one job (different runs, two files for one rank, with ``on_conflict="error"``).
    ValueError
        ``on_conflict`` is not ``"error"``, ``"newest"`` or ``"file-order"`` (for a directory or list).
    """
    _no_separate("load_job", options)
    if not isinstance(path, (list, tuple)) and (not Path(path).is_dir() or is_bundle(path)):
        return TraceSet.from_traces([load_trace(path, **options)])
    out = load(path, **options)
    assert isinstance(out, TraceSet)
    return out


def load_each(path: PathLike | list[PathLike] | tuple[PathLike, ...], **options: Any) -> dict[str, Trace]:
    """Every trace of a directory, list or one file on its own, keyed by file name (no job rules).

    Parameters
    ----------
    path : str, path-like, or list or tuple of them
        A directory of traces, a list of trace files, or one trace file or profile bundle folder.
    **options
        Keywords of :func:`load` other than ``separate`` (passing it is a TypeError): ``salvage``,
        ``max_decompressed_bytes``, ``workers`` and ``threads`` have an effect; ``on_conflict``, ``lazy``,
        ``cache_dir`` and ``write_caches`` have none.

    Returns
    -------
    dict of str to Trace
        One entry per file read, in file order (a directory's: by name). For a directory or one file the key
        is the file's name; for a list, the path as given (``str`` of it). A fresh aonkit cache among the files
        is read in place of its source, under its own name or path.

    Raises
    ------
    FileNotFoundError
        ``path``, or a file of the list, does not exist.
    TraceFormatError
        A file is unreadable, malformed or holds no events, or the directory holds no trace file (the message
        names it).
    """
    out = load(path, separate=True, **options)
    assert isinstance(out, dict)
    return out
