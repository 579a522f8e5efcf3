"""Which files of a directory (or list) are traces, one file per trace: a cache stands in for its source.

A Parquet cache (:mod:`aonkit.cache`) and the file it was made from are one
trace. The cache is read when it is fresh (the source still has the size and
mtime its sidecar records); otherwise the source is read and the stale cache
left alone, with a warning. Never both. Likewise an Nsight Systems report
(``run.nsys-rep``) and its export beside it (``run.sqlite``) are one trace.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..cache import CacheVersionError, cache_path_for, is_cache_part, read_sidecar, same_source, source_file
from ..errors import TraceFormatError
from .registry import directory_suffixes, reader_for

CACHE_SUFFIXES = (".parquet",)
"""Files read as aonkit caches (through :mod:`.cached`, not the reader registry)."""


def trace_suffixes() -> tuple[str, ...]:
    """Name endings of the files a directory scan takes as traces: caches and every registered reader's."""
    return (*CACHE_SUFFIXES, *directory_suffixes())


Pick = tuple[Path, list[str]]
"""A file to read and the notes (warnings) that go with the trace read from it."""


def directory_files(directory: Path) -> tuple[list[Path], list[str]]:
    """Candidate trace files of ``directory`` (sorted by name) and warnings about entries skipped."""
    notes: list[str] = []
    out: list[Path] = []
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        raise TraceFormatError(f"cannot list the directory ({exc.strerror or exc})", path=str(directory)) from None
    suffixes = trace_suffixes()
    for e in entries:
        if not e.name.lower().endswith(suffixes) or is_cache_part(e.name) or e.name.startswith("."):
            continue
        try:
            mode = os.stat(e.path).st_mode  # follows links; a loop or dangling link raises
        except OSError as exc:
            notes.append(f"skipped {e.name}: {exc.strerror or exc} (a broken or looping link?)")
            continue
        if stat.S_ISREG(mode):
            out.append(Path(e.path))
        else:
            notes.append(f"skipped {e.name}: not a regular file")
    if not out:
        raise TraceFormatError(
            "no trace files (*.json, *.json.gz, *.sqlite, *.parquet) in the directory", path=str(directory)
        )
    return out, notes


def pick(files: list[Path]) -> list[Pick]:
    """One file per trace: each cache paired with its source among ``files``, the fresh one kept."""
    resolved = {f.resolve(): f for f in files}
    drop: set[Path] = set()
    notes: dict[Path, list[str]] = {f: [] for f in files}
    for f in files:
        if not f.name.lower().endswith(CACHE_SUFFIXES):
            continue
        src, why = _source_among(f, resolved)
        if src is None:
            continue
        if why == "fresh":
            drop.add(src)
        else:
            drop.add(f)
            if why != "outdated":  # another aonkit's cache format: read the source (and cache it anew) quietly
                notes[src].append(f"ignored the cache {f.name}: {why}; read the source instead")
    drop |= _reports_with_exports(files, notes)
    return [(f, notes[f]) for f in files if f not in drop]


def _reports_with_exports(files: list[Path], notes: dict[Path, list[str]]) -> set[Path]:
    """An Nsight Systems report and its SQLite export beside it (same stem) are one trace: the files to leave out.

    The export stands for the report when it is not older (the rule of
    :func:`aonkit.sources.nsys.rep.read_nsys_rep`); an older one is left out
    with a note, and the report is exported again.
    """
    kinds: dict[tuple[Path, str], dict[str, list[Path]]] = {}
    for f in files:
        try:
            kind = reader_for(f).name
        except TraceFormatError:
            continue
        if kind in ("nsys-rep", "nsys-sqlite"):
            kinds.setdefault((f.parent, f.stem), {}).setdefault(kind, []).append(f)
    drop: set[Path] = set()
    for group in kinds.values():
        reports, exports = group.get("nsys-rep", []), group.get("nsys-sqlite", [])
        if len(reports) != 1 or not exports:
            continue
        from .nsys.rep import export_is_current

        rep = reports[0]
        for exp in exports:
            if export_is_current(exp, rep):
                drop.add(rep)
            else:
                drop.add(exp)
                notes[rep].append(f"ignored {exp.name}: older than its report {rep.name}, which is exported again")
    return drop


def _source_among(cache: Path, resolved: dict[Path, Path]) -> tuple[Path | None, str]:
    """The cache's source when it is among the files, and "fresh", "outdated" (another cache format) or why not used."""
    try:
        side = read_sidecar(cache)
    except TraceFormatError as exc:
        guess = [f for f in resolved.values() if f != cache and cache_path_for(f).name == cache.name]
        why = "outdated" if isinstance(exc, CacheVersionError) else f"its sidecar is unusable ({exc.reason})"
        return (guess[0], why) if guess else (None, "")
    src = source_file(side, cache)
    if src is None or src.resolve() not in resolved:
        return None, ""
    if not same_source(src, side):
        return resolved[src.resolve()], "it is stale (the source changed after it was written)"
    return resolved[src.resolve()], "fresh"
