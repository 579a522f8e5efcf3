"""Readers: files in, traces out. ``load`` picks the reader for a path."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Union

from ..errors import TraceFormatError
from ..trace import Trace
from ..traceset import TraceSet

PathLike = Union[str, "os.PathLike[str]"]
_TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz", ".parquet", ".sqlite")


def _read_one(path: Path, salvage: bool, max_decompressed_bytes: int | None, threads: int | None = None) -> Trace:
    name = path.name.lower()
    if name.endswith(".parquet"):
        from ..cache import load_trace

        return load_trace(path)
    if name.endswith((".nsys-rep", ".qdrep")):
        from .nsys_rep import read_nsys_rep

        return read_nsys_rep(path)
    if name.endswith((".sqlite", ".sqlite3", ".db")) or _is_sqlite(path):
        from .nsys_sqlite import read_nsys_sqlite

        return read_nsys_sqlite(path)
    from .chrome_trace import read_chrome_trace

    return read_chrome_trace(path, salvage=salvage, max_decompressed_bytes=max_decompressed_bytes, threads=threads)


def _is_sqlite(path: Path) -> bool:
    from .nsys_db import SQLITE_MAGIC

    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def _trace_files(directory: Path) -> list[Path]:
    files = sorted(
        p
        for p in directory.iterdir()
        if p.is_file()
        and p.name.lower().endswith(_TRACE_SUFFIXES)
        and not p.name.endswith((".meta.json", ".samples.parquet"))
    )
    if not files:
        raise TraceFormatError(
            "no trace files (*.json, *.json.gz, *.sqlite, *.parquet) in the directory", path=str(directory)
        )
    return files


def load(
    path: PathLike | list[PathLike] | tuple[PathLike, ...],
    *,
    salvage: bool = False,
    max_decompressed_bytes: int | None = None,
    workers: int | None = None,
    threads: int | None = None,
) -> Trace | TraceSet:
    """Load a trace file, a directory of traces or a list of files.

    Parameters
    ----------
    path : path-like or list of path-like
        A Kineto/Chrome-trace ``.json`` / ``.json.gz`` file (or a bare JSON
        array), an Nsight Systems ``.sqlite`` export (or ``.nsys-rep``, exported
        with ``nsys`` when it is on PATH), an aonkit ``.parquet`` cache, a
        directory, or a list of files.
    salvage : bool
        Keep the complete events of a truncated file (see ``trace.warnings``)
        instead of raising :class:`~aonkit.TraceFormatError`.
    max_decompressed_bytes : int, optional
        Cap on the size of decompressed gzip input (decompression-bomb guard).
    workers : int, optional
        Threads used to read several files (the parser releases the GIL).
    threads : int, optional
        Threads used to scan one large file (default: one per core, up to 8,
        for files of 16 MB and more). The result does not depend on it.

    Returns
    -------
    Trace or TraceSet
        A :class:`~aonkit.Trace` for one file; a :class:`~aonkit.TraceSet`
        keyed by rank for a directory or a list.
    """
    if isinstance(path, (list, tuple)):
        files = [Path(p) for p in path]
    else:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"no such trace file or directory: {p}")
        if not p.is_dir():
            return _read_one(p, salvage, max_decompressed_bytes, threads)
        files = _trace_files(p)
    n = workers or min(len(files), os.cpu_count() or 1, 8)
    if n <= 1 or len(files) == 1:
        traces = [_read_one(f, salvage, max_decompressed_bytes) for f in files]
    else:
        with ThreadPoolExecutor(n) as pool:
            traces = list(pool.map(lambda f: _read_one(f, salvage, max_decompressed_bytes), files))
    return TraceSet.from_traces(traces)
