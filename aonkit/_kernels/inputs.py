"""The one array type a kernel input is compiled for (plain numpy: importing this loads no Numba)."""

from __future__ import annotations

import numpy as np


def frozen(a: object, dtype: object = None) -> np.ndarray:
    """``a`` as a C-contiguous, read-only array (a view; a copy only to change the dtype or layout).

    Numba compiles a kernel once per argument type, and a read-only array is
    another type: pandas hands out read-only arrays from some columns (copy on
    write, Arrow-backed data) and writable ones from others, so the same
    kernel was compiled twice, and a trace whose arrays came the other way
    than in ``aonkit warmup`` compiled again on first use. Pure inputs pass
    through here: one type, whatever pandas chose, at no copy.
    """
    v = np.ascontiguousarray(a, dtype=dtype)
    if v.flags.writeable:
        v = v.view()
        v.flags.writeable = False
    return v


def owned(a: object, dtype: object = None) -> np.ndarray:
    """``a`` as a C-contiguous, writable array, for a kernel that only reads it.

    For kernels that other kernels call too (``keys.first_match``,
    ``keys.compact``): arrays a kernel makes are writable, so a call from
    Python with read-only arrays would compile a second specialization of the
    kernel and of everything it calls. ``a`` itself when it is writable; a
    writable view when the memory underneath is (pandas' copy-on-write hands
    out read-only views of writable columns: a copy of each cost 0.2 ms per
    million rows); else a copy. The kernels these go to write nothing into
    their inputs.
    """
    v = np.ascontiguousarray(a, dtype=dtype)
    if v.flags.writeable:
        return v
    w = v.view()
    try:
        w.flags.writeable = True
    except ValueError:  # memory that is read-only (Arrow buffers, a read-only mapping): a copy
        return v.copy()
    return w
