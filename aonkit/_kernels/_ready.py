"""Whether a kernel call would compile: compiled in this process, or found in Numba's on-disk cache.

Used to choose a path that needs no compilation while a kernel is not ready
(:mod:`aonkit.sources.first_run`). Finding a kernel in the cache loads it
into its dispatcher then, as its first call would.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.core.compiler_lock import global_compiler_lock

_READY: set[tuple] = set()  # calls found ready: (kernel, argument fingerprints)
_OWNDATA = 0x4  # the one flag bit of an array that its Numba type does not depend on


def _fingerprint(a: object) -> object:
    """What Numba's type of ``a`` depends on, cheaper to get than ``numba.typeof`` for an array (0.2 against 6 us)."""
    if type(a) is np.ndarray:
        return a.dtype, a.ndim, a.flags.num & ~_OWNDATA
    return numba.typeof(a)


def is_ready(dispatcher: object, *args: object) -> bool:
    """True when ``dispatcher(*args)`` would not compile.

    Parameters
    ----------
    dispatcher : numba.core.registry.CPUDispatcher
        A jitted kernel.
    *args
        Arguments of the types a real call passes (their values do not matter).

    Returns
    -------
    bool
        Also True when Numba's internals are not the ones this was written
        for: then the caller behaves as if the kernel were compiled (it compiles
        on the call, as without this check).
    """
    key = (dispatcher, *(_fingerprint(a) for a in args))
    if key in _READY:  # an analysis checks several kernels per call: this keeps the check to about 1 us
        return True
    try:
        sig = tuple(numba.typeof(a) for a in args)
        if sig in dispatcher.overloads:
            _READY.add(key)
            return True
        with global_compiler_lock:
            cres = dispatcher._cache.load_overload(sig, dispatcher.targetctx)
            if cres is None:
                return False
            dispatcher.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
            dispatcher.add_overload(cres)
        _READY.add(key)
        return True
    except Exception:  # noqa: BLE001 - another Numba version: no opinion, compile as usual
        return True


def compile_now(dispatcher: object, *args: object) -> None:
    """Compile ``dispatcher`` for the types of ``args`` (or load it from the cache) without calling it."""
    dispatcher.compile(tuple(numba.typeof(a) for a in args))
