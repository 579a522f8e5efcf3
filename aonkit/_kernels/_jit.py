"""The one place where Numba's decorator flags are chosen.

``AONKIT_JIT_CACHE=0`` turns the on-disk compilation cache off (it is on by
default, so a new process does not pay compilation again).
"""

from __future__ import annotations

import os

import numba

JIT_CACHE = os.environ.get("AONKIT_JIT_CACHE", "1") != "0"

njit = numba.njit(cache=JIT_CACHE, nogil=True, boundscheck=False, error_model="numpy")
