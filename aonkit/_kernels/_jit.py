"""The one place where Numba's decorator flags are chosen.

``AONKIT_JIT_CACHE=0`` turns the on-disk compilation cache off (it is on by
default, so a new process does not pay compilation again). It is also off, with a
line on stderr, when no folder can hold it (:mod:`._cache_place`).
"""

from __future__ import annotations

import os
import sys

import numba

from . import _notice, _stamp

_notice.install()  # a line on stderr while a first compilation takes long
_stamp.install()  # a cached kernel goes stale when any kernel module changes (callees are compiled into callers)


def _probe() -> None:
    """A function of this folder, to ask where Numba would cache its kernels."""


JIT_CACHE = os.environ.get("AONKIT_JIT_CACHE", "1") != "0"
if JIT_CACHE and _stamp.cache_place(_probe) is None:
    JIT_CACHE = False
    sys.stderr.write("aonkit: Numba's cache has no folder this user may write (the install, ~/.cache and the temp "
                     "directory's aonkit-numba-<uid> were tried): kernels are compiled in each process; set "
                     "NUMBA_CACHE_DIR to a folder of yours to keep them\n")

njit = numba.njit(cache=JIT_CACHE, nogil=True, boundscheck=False, error_model="numpy")

# The smallest, hottest lexing helpers are inlined into their callers at Numba-IR
# level (per-token call overhead otherwise dominates the scan). Inlining more of
# them measured ~30% faster but multiplied compile time by 6 (26 s -> 170 s).
# Numba's own cache check does not follow inlined (or linked) callees into other files;
# _stamp adds a digest of every kernel module to each kernel's cache stamp.
njit_inline = numba.njit(cache=JIT_CACHE, nogil=True, boundscheck=False, error_model="numpy", inline="always")

# Helpers that allocate nothing are compiled without Numba's runtime (NRT): every
# call to a helper with NRT increfs and decrefs each array argument with an atomic
# instruction, which perf showed to be 35% of the scan.
njit_leaf = numba.njit(cache=JIT_CACHE, nogil=True, boundscheck=False, error_model="numpy", _nrt=False)

# Hot helpers with many array arguments, inlined at Numba-IR level into their (NRT-free) callers: a call passes each
# array as its whole struct (pointer, shape, strides...), 50 and more words for a helper of a dozen arrays.
njit_leaf_inline = numba.njit(cache=JIT_CACHE, nogil=True, boundscheck=False, error_model="numpy", _nrt=False,
                              inline="always")
