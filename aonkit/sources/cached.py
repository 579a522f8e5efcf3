"""Reading an aonkit cache for :func:`aonkit.load`: checked, retried across a writer's renames, else its source."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..cache import cache_path_for, guess_source, read_sidecar, same_source, sidecar_path, source_file
from ..errors import TraceFormatError
from ..trace import Trace


def read_cache(path: Path, read_source: Callable[[Path], Trace]) -> tuple[Trace, str | None]:
    """A verified cache, or ``read_source(source)`` when the cache is unusable or stale, with the note why."""
    try:
        side, trace = _read_settled(path)
    except TraceFormatError as exc:
        try:
            side = read_sidecar(path)
        except TraceFormatError:
            side = None
        src = _fallback_source(side, path)
        if src is None:
            raise
        return read_source(src), f"the cache {path.name} is unusable ({exc.reason}); read its source {src.name} instead"
    src = source_file(side, path)
    if src is not None and not same_source(src, side):
        return read_source(src), (f"the cache {path.name} is stale (its source {src.name} changed after it was "
                                  "written); read the source instead")
    return trace, None


def _stamp(path: Path) -> tuple:
    """(inode, size, mtime) of a cache's data and sidecar: what a writer's rename changes."""
    out = []
    for p in (path, sidecar_path(path)):
        try:
            st = os.stat(p)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def _read_settled(path: Path, tries: int = 3) -> tuple[dict, Trace]:
    """Sidecar and checked trace; a failure caught while a writer was renaming files in is retried."""
    from .._cache_read import read_checked  # pyarrow.parquet only when a cache is read: keeps `import aonkit` light

    for attempt in range(tries):
        before = _stamp(path)
        try:
            side = read_sidecar(path)
            return side, read_checked(path, side)
        except TraceFormatError:
            if attempt == tries - 1 or _stamp(path) == before:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _fallback_source(side: dict | None, cache: Path) -> Path | None:
    """The source to read for an unusable cache; one its sidecar names is trusted only if the names agree.

    A sidecar beside bad data may itself be foreign (copied from another cache), so its source is used
    only when that source's default cache name is this cache's; else a source beside it with that name.
    """
    src = source_file(side, cache) if side is not None else None
    if src is not None and cache_path_for(src).name == cache.name:
        return src
    return guess_source(cache)
