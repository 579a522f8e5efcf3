"""File integrity helpers: checksums, source fingerprints and atomic writes.

Used by the Parquet cache (:mod:`aonkit.cache`) so that a cache is either the
exact bytes its writer produced, for the exact source it names, or refused.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:  # ISA-L's crc32 runs at about 27 GB/s here, zlib's at about 6.5 GB/s; same values
    from isal.isal_zlib import crc32 as _crc32
except ImportError:  # pragma: no cover - isal is a dependency
    _crc32 = zlib.crc32


def crc32_file(path: str | os.PathLike[str]) -> tuple[int, int]:
    """(size in bytes, CRC-32) of the file's current contents."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return 0, 0
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return size, _crc32(mm)


def crc32_buffer(buf: object) -> int:
    """CRC-32 of a bytes-like object (bytes, memoryview, ``pyarrow.Buffer``)."""
    return _crc32(memoryview(buf)) if len(memoryview(buf)) else 0  # type: ignore[arg-type]


def fingerprint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What identifies a source file's version cheaply: name, absolute path, size and mtime (ns)."""
    st = os.stat(path)
    return {"name": Path(path).name, "path": str(Path(path).resolve()), "bytes": st.st_size,
            "mtime_ns": st.st_mtime_ns}


def same_version(path: str | os.PathLike[str], recorded: dict[str, Any]) -> bool:
    """True when ``path`` still has the size and mtime recorded by :func:`fingerprint`."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_size == recorded.get("bytes") and st.st_mtime_ns == recorded.get("mtime_ns")


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], None], mode: int = 0o600,
                 sync: bool = True) -> None:  # fmt: skip
    """Call ``write(tmp)`` on a fresh temporary file beside ``path``, fsync it, then rename it over ``path``.

    A reader sees the old file or the new one, never a half-written one; two
    writers each rename a complete file (the last one wins). The temporary file
    is removed when ``write`` fails. ``mode``: permission bits of the result
    (default owner-only: a trace can hold secrets). ``sync=False`` skips the fsync: for files whose reader
    checks a recorded size and checksum and can make them again (a cache), where a crash may lose the file
    but never passes a torn one off as whole.
    """
    tmp = staged_write(path, write, mode, sync)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def staged_write(path: str | os.PathLike[str], write: Callable[[Path], None], mode: int = 0o600,
                 sync: bool = True) -> Path:  # fmt: skip
    """The first half of :func:`atomic_write`: a complete (synced unless not ``sync``) temporary file, not renamed.

    The caller renames it over ``path`` with ``os.replace`` (or removes it), so
    a slow write can happen before a lock is taken and only the rename inside it.
    """
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        if sync:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


@contextmanager
def dir_lock(directory: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``directory`` (POSIX ``flock``; nothing elsewhere).

    Two processes saving caches into one folder take turns, so a cache and its
    sidecar always come from the same writer. Readers need no lock: they check
    the checksums.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: atomic renames and checksums still hold
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def writable_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether aonkit may write in ``folder``: writable to us, and not marked read-only (root may write anywhere)."""
    try:
        return os.access(folder, os.W_OK) and bool(os.stat(folder).st_mode & 0o222)
    except OSError:
        return False


def user_cache_dir(for_folder: str | os.PathLike[str]) -> Path:
    """The per-user folder for what aonkit derives from files in read-only ``for_folder`` (caches, nsys exports).

    ``$AONKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/aonkit/traces``, else
    ``~/.cache/aonkit/traces``; one sub-folder per source folder, named by a hash
    of its path. Not created here (callers create it owner-only).
    """
    import hashlib

    root = os.environ.get("AONKIT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "aonkit", "traces")
    return Path(root) / hashlib.sha256(str(Path(for_folder).resolve()).encode()).hexdigest()[:16]
