"""Numba's on-disk cache entries of aonkit's kernels go stale when any kernel module changes, not only their own.

Numba checks a cached kernel against its own source file only. A kernel's
compiled code also holds its callees from other files (inlined, or linked into
its library), so after an edit of ``json_lex.py`` (or an upgrade that changes
it) a caller in ``trace_scan.py`` would keep running the old lexer from the
cache. For the kernels in this folder the cache's source stamp also holds a
digest of every module here, so any change recompiles them all. Other
functions, and Numba versions whose cache internals differ, are left as they
are (the guard is then off, and ``__pycache__`` may be cleared by hand).
"""

from __future__ import annotations

import functools
import hashlib
import os

from . import _cache_place

HERE = os.path.dirname(os.path.abspath(__file__))


@functools.cache
def _digest(stamps: tuple) -> bytes:
    h = hashlib.sha256()
    for name, _, _ in stamps:
        with open(os.path.join(HERE, name), "rb") as fh:
            h.update(name.encode() + b"\0" + fh.read() + b"\0")
    return h.digest()


def kernels_digest() -> bytes:
    """sha256 over the names and contents of this folder's modules (re-read when one's mtime or size changes)."""
    stamps = []
    for name in sorted(os.listdir(HERE)):
        if os.path.splitext(name)[1] == ".py":
            st = os.stat(os.path.join(HERE, name))
            stamps.append((name, st.st_mtime_ns, st.st_size))
    return _digest(tuple(stamps))


def install() -> bool:
    """Put the package-wide stamp in front of Numba's cache locators; False when Numba's internals differ."""
    try:
        from numba.core import caching

        impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # the name differs between versions
        classes = impl._locator_classes
        base = caching._CacheLocator
        last = _cache_place.private_locator(base, caching._SourceFileBackedLocatorMixin)
        last.get_suitable_cache_subpath  # noqa: B018 - Numba's, or this Numba's internals differ
    except (ImportError, AttributeError):
        return False
    if not isinstance(classes, list):
        return False
    if any(getattr(c, "_aonkit", False) for c in classes):
        return True

    class KernelsLocator(base):
        """The locator Numba would choose, with this folder's digest added to the source stamp."""

        _aonkit = True

        def __init__(self, inner: object) -> None:
            self._inner = inner

        def ensure_cache_path(self) -> None:
            self._inner.ensure_cache_path()

        def get_cache_path(self) -> str:
            return self._inner.get_cache_path()

        def get_source_stamp(self) -> object:
            return (self._inner.get_source_stamp(), kernels_digest())

        def get_disambiguator(self) -> str:
            return self._inner.get_disambiguator()

        @classmethod
        def from_function(cls, py_func, py_file):  # noqa: ANN001, ANN206 - Numba's interface
            if os.path.dirname(os.path.abspath(py_file)) != HERE:
                return None
            for other in (*classes, last):  # the last: a private folder when Numba has no place (_cache_place)
                if other is not cls:
                    inner = other.from_function(py_func, py_file)
                    if inner is not None:
                        return cls(inner)
            return None

    classes.insert(0, KernelsLocator)
    global _LOCATOR
    _LOCATOR = KernelsLocator
    return True


_LOCATOR: type | None = None


def cache_place(py_func) -> str | None:  # noqa: ANN001 - a Python function of a module in this folder
    """The folder Numba would keep ``py_func``'s compiled code in; None when there is none (nor a private one).

    Also "" when this Numba's internals differ (:func:`install` returned False): Numba then decides alone.
    """
    if _LOCATOR is None:
        return ""
    found = _LOCATOR.from_function(py_func, py_func.__code__.co_filename)
    return None if found is None else found.get_cache_path()
