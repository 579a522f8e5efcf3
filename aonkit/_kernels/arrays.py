"""Element copies written as loops.

A slice assignment between arrays (``a[i:j] = b``) makes Numba compile its
shape-mismatch error path, which formats the shapes into a message: about
2 s of compilation per dimensionality, paid by the first kernel of a process
that needs it (``bench/coldstart.py``). Kernels copy with :func:`copy_to`
where the shapes are equal by construction.
"""

from __future__ import annotations

from ._jit import njit


@njit
def copy_to(dst, src):
    """``dst[i] = src[i]`` for every ``i`` of the 1-D ``src`` (``dst`` at least as long)."""
    for i in range(src.shape[0]):
        dst[i] = src[i]
