"""Which reader reads a file: a small registry of trace formats.

Each format is a :class:`Reader`: the file suffixes it claims, a sniff of the
file's first bytes and ``read(path, **options) -> Trace``.
:func:`aonkit.load` asks :func:`reader_for` for a path and calls that reader's
``read``; a directory scan (:mod:`aonkit.sources.discover`) lists the files
whose suffix a reader claims (:func:`directory_suffixes`).

How a reader is chosen:

1. By suffix: the reader with the longest suffix the file name ends with
   (case-insensitive); on a tie, the one registered last.
2. By content: the first :data:`HEAD_BYTES` bytes of the file go to each
   reader's ``sniff``, the one registered last first.
3. Else the fallback reader (registered with ``fallback=True``): the
   Chrome-trace/Kineto JSON reader, since users pass ``.txt`` or suffix-less
   JSON. Without a fallback, a :class:`~aonkit.TraceFormatError` names the file.

An aonkit Parquet cache (``.parquet``) is not a reader here: :func:`aonkit.load`
reads it before asking the registry, with its integrity checks and its
fallback to the source (:mod:`aonkit.sources.cached`).

A new format is one module with a ``read`` function plus one call::

    from aonkit.sources.registry import Reader, register

    register(Reader("myformat", (".myf",), lambda head: head.startswith(b"MYF1"), read_myformat))

The built-in readers are registered in :mod:`aonkit.sources` with :func:`lazy`
``read`` functions, so ``import aonkit`` imports no parser (nor Numba) before
a file is read.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TraceFormatError

if TYPE_CHECKING:
    from ..trace import Trace

HEAD_BYTES = 512
"""How many leading bytes of a file a ``sniff`` sees (fewer when the file is shorter)."""

LOAD_OPTIONS = ("salvage", "max_decompressed_bytes", "threads")
"""The reading options of :func:`aonkit.load` a reader may accept (see :attr:`Reader.options`)."""


@dataclass(frozen=True)
class Reader:
    """One trace format: which files it claims and how it reads them.

    Attributes
    ----------
    name : str
        Short unique name (``"chrome"``, ``"nsys-sqlite"``...). Registering
        another reader of the same name replaces it.
    suffixes : tuple of str
        File name endings it claims, with the dot (``".json.gz"``); compared
        case-insensitively.
    sniff : callable or None
        ``sniff(head: bytes) -> bool``: True when the file's first bytes (at
        most :data:`HEAD_BYTES`, never empty) are this format. Used for files
        whose suffix no reader claims. None: never claims by content.
    read : callable
        ``read(path: Path, **options) -> Trace``. Raises
        :class:`~aonkit.TraceFormatError` (naming the file) for a bad file.
    options : tuple of str
        Which of :data:`LOAD_OPTIONS` ``read`` accepts; only those are passed.
    directory_suffixes : tuple of str or None
        Suffixes that mark this format's files when a directory is scanned;
        None: ``suffixes``. Narrower for generic endings (``.db``), which
        :func:`aonkit.load` reads when named but does not pick up from a
        directory.
    """

    name: str
    suffixes: tuple[str, ...]
    sniff: Callable[[bytes], bool] | None
    read: Callable[..., Trace]
    options: tuple[str, ...] = ()
    directory_suffixes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for attr in ("suffixes", "directory_suffixes", "options"):
            value = getattr(self, attr)
            if value is None:
                continue
            value = (value,) if isinstance(value, str) else tuple(value)
            if attr != "options":
                if not all(isinstance(s, str) and len(s) > 1 and s.startswith(".") for s in value):
                    raise ValueError(f"reader {self.name!r}: {attr} must be like '.json' (got {value!r})")
                value = tuple(s.lower() for s in value)
            elif unknown := set(value) - set(LOAD_OPTIONS):
                raise ValueError(f"reader {self.name!r}: unknown options {sorted(unknown)}; known: {LOAD_OPTIONS}")
            object.__setattr__(self, attr, value)

    def listed_suffixes(self) -> tuple[str, ...]:
        """The suffixes that mark this format's files in a directory."""
        return self.suffixes if self.directory_suffixes is None else self.directory_suffixes


_lock = threading.Lock()
_readers: list[Reader] = []  # registration order: later ones win ties
_fallback: str | None = None


def register(reader: Reader, *, fallback: bool = False) -> Reader:
    """Add ``reader`` (replacing any reader of the same name); return it.

    Parameters
    ----------
    reader : Reader
        The format to add. It takes precedence over the readers registered
        before it on equal suffixes and in sniffing.
    fallback : bool
        Make it the reader of files that no reader claims (one at a time).
    """
    global _fallback
    with _lock:
        _readers[:] = [r for r in _readers if r.name != reader.name] + [reader]
        if fallback:
            _fallback = reader.name
    return reader


def unregister(name: str) -> Reader | None:
    """Remove the reader called ``name`` (and its fallback role); return it, or None when there was none."""
    global _fallback
    with _lock:
        found = next((r for r in _readers if r.name == name), None)
        _readers[:] = [r for r in _readers if r.name != name]
        if _fallback == name:
            _fallback = None
    return found


def readers() -> tuple[Reader, ...]:
    """The registered readers, in registration order."""
    with _lock:
        return tuple(_readers)


def fallback() -> Reader | None:
    """The reader of files that no reader claims (None when there is none)."""
    with _lock:
        return next((r for r in _readers if r.name == _fallback), None)


def head(path: str | os.PathLike[str], n: int = HEAD_BYTES) -> bytes:
    """The first ``n`` bytes of ``path``; empty when it cannot be read (the reader will say why)."""
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def reader_for(path: str | os.PathLike[str]) -> Reader:
    """The reader of ``path``: by suffix, else by its first bytes, else the fallback.

    Raises
    ------
    TraceFormatError
        When no reader claims the file and there is no fallback (the message names the file).
    """
    all_readers = readers()
    name = Path(path).name.lower()
    best: Reader | None = None
    longest = 0
    for r in all_readers:
        for s in r.suffixes:
            if len(s) >= longest and name.endswith(s):
                best, longest = r, len(s)
    if best is not None:
        return best
    first = head(path)
    if first:
        for r in reversed(all_readers):
            if r.sniff is not None and r.sniff(first):
                return r
    last = fallback()
    if last is not None:
        return last
    known = ", ".join(f"*{s}" for r in all_readers for s in r.suffixes) or "none registered"
    raise TraceFormatError(f"no reader for this file: its name ends in no known suffix ({known}) and its first "
                           "bytes match no known format", path=str(path))


def directory_suffixes() -> tuple[str, ...]:
    """Suffixes of the files a directory scan treats as traces (each reader's :meth:`Reader.listed_suffixes`)."""
    return tuple(dict.fromkeys(s for r in readers() for s in r.listed_suffixes()))


def lazy(module: str, function: str) -> Callable[..., Trace]:
    """A ``read`` that imports ``module`` on its first call and calls ``module.function(path, **options)``.

    Keeps a reader's parser (and Numba) unimported until a file of its format is read.
    """

    def read(path: Path, **options: Any) -> Trace:
        return getattr(importlib.import_module(module), function)(path, **options)

    read.__name__ = read.__qualname__ = function
    read.__doc__ = f"``{module}.{function}``, imported on first use."
    return read

