"""Large arrays back from local worker processes through shared-memory files, not the result pipe.

A process pool sends each result back pickled through one pipe, which the
parent reads alone: a rank's dependency graph (16 MB for 185,000 events)
is copied four times on the way, into fresh memory of the parent each
time, and 64 of them took longer to arrive than to build. Here a worker
writes each large array of its result to a file of a private folder in
``/dev/shm`` (memory, not disk; made by the parent, owner-only) and sends
its name; the parent maps the file copy-on-write (a writable array, whose
pages are shared with the file until written) and unlinks it at once, so
nothing stays in the folder, which the parent removes after the call.
Results without such arrays, machines without ``/dev/shm``, and arrays
that do not fit in it go the usual way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

MIN_BYTES = 1 << 20
"""Arrays from this size on travel as files."""
_SHM = "/dev/shm"  # noqa: S108 - a private folder made in it with mkdtemp (mode 0700)


@dataclasses.dataclass(frozen=True)
class Shipped:
    """An array a worker wrote to ``path``: its dtype and shape."""

    path: str
    dtype: str
    shape: tuple[int, ...]


@contextlib.contextmanager
def folder() -> Any:
    """A private folder in ``/dev/shm`` for one call's results (None where there is none); removed after."""
    path = None
    if os.path.isdir(_SHM) and os.access(_SHM, os.W_OK):
        try:
            path = tempfile.mkdtemp(prefix="aonkit-", dir=_SHM)
        except OSError:
            path = None
    try:
        yield path
    finally:
        # after a failed call a worker may still be writing a chunk's results: try again briefly
        for wait in (0.0, 0.05, 0.2, 1.0):
            if path is None or not os.path.exists(path):
                break
            time.sleep(wait)
            shutil.rmtree(path, ignore_errors=True)


def call_packed(func: Callable[..., Any], where: str, item: Any, **kw: Any) -> Any:
    """Worker: ``func(item, **kw)`` with its large arrays written to files in ``where``."""
    return pack(func(item, **kw), where)


def pack(value: Any, where: str) -> Any:
    """``value`` with its large arrays written to new files in ``where``, each replaced by its :class:`Shipped`.

    Plain ndarrays of at least :data:`MIN_BYTES` (no objects), in tuples, lists, dicts and dataclasses.
    """
    if isinstance(value, np.ndarray):
        if type(value) is not np.ndarray or value.nbytes < max(MIN_BYTES, 1) or value.dtype.hasobject:
            return value
        path = None
        try:
            fd, path = tempfile.mkstemp(dir=where)
            with os.fdopen(fd, "wb") as f:
                np.ascontiguousarray(value).tofile(f)
        except OSError:  # /dev/shm full (it holds at most half the memory by default): this one takes the pipe
            if path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            return value
        return Shipped(path, value.dtype.str, value.shape)
    return _walk(value, lambda v: pack(v, where))


def unpack(value: Any) -> Any:
    """``value`` with each :class:`Shipped` replaced by its array, mapped copy-on-write; the file unlinked."""
    if isinstance(value, Shipped):
        mapped = np.memmap(value.path, dtype=np.dtype(value.dtype), mode="c", shape=value.shape)
        os.unlink(value.path)
        return np.asarray(mapped)  # a plain ndarray over the mapping (which it keeps alive)
    return _walk(value, unpack)


def _walk(value: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(fn(v) for v in value)
    if isinstance(value, list):
        return [fn(v) for v in value]
    if type(value) is dict:
        return {k: fn(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and not isinstance(value, Shipped):
        fields = dataclasses.fields(value)
        if not all(f.init for f in fields):  # replace() would reset the others: left as it is
            return value
        old = {f.name: getattr(value, f.name) for f in fields}
        new = {k: fn(v) for k, v in old.items()}
        return dataclasses.replace(value, **new) if any(new[k] is not old[k] for k in old) else value
    return value
