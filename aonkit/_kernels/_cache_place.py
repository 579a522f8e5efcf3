"""Where aonkit's kernels keep Numba's cache when none of Numba's own places can be written.

Numba keeps a cached kernel beside its source (``__pycache__``), else in the user's cache folder
(``~/.cache/numba``), or where ``NUMBA_CACHE_DIR`` says. An install the user cannot write (a site-wide
environment, a container image) used by an account whose home cannot be written either (a service account, a
container run under an arbitrary uid) has none of them, and Numba then refuses to define a cached function at
all: importing a kernel module raised ``RuntimeError: cannot cache function ...: no locator available``.

aonkit's kernels then keep their cache in ``<temp dir>/aonkit-numba-<uid>``, made 0700, and only when it is a
directory (not a link) of the user's own that no one else may write: Numba's cache files are pickles, and one
planted there by another user would run as this one. Without even that, the kernels are compiled in each
process (:func:`aonkit._kernels._jit` turns the cache off and says so on stderr).
"""

from __future__ import annotations

import os
import stat
import tempfile


def private_root() -> str | None:
    """``<temp dir>/aonkit-numba-<uid>``, made if needed, when it is safe to keep compiled code in; else None."""
    path = os.path.join(tempfile.gettempdir(), f"aonkit-numba-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None  # a link, another user's, or writable by others: what is in it cannot be trusted
    return path


def private_locator(base: type, mixin: type) -> type:
    """A Numba cache locator class (built on Numba's ``base`` and source-file ``mixin``) into :func:`private_root`."""

    class PrivateLocator(mixin, base):  # type: ignore[valid-type, misc]
        """Numba's cache of one kernel file in :func:`private_root` (as ``NUMBA_CACHE_DIR`` would place it)."""

        def __init__(self, py_func, py_file: str, root: str) -> None:  # noqa: ANN001 - Numba's interface
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(root, self.get_suitable_cache_subpath(py_file))

        def get_cache_path(self) -> str:
            return self._cache_path

        @classmethod
        def from_function(cls, py_func, py_file: str):  # noqa: ANN001, ANN206 - Numba's interface
            root = private_root()
            if root is None or not os.path.exists(py_file):
                return None
            self = cls(py_func, py_file, root)
            try:
                self.ensure_cache_path()
            except OSError:
                return None
            return self

    return PrivateLocator
