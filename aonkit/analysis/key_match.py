"""Joins of int64 keys by value: the Numba hash joins, or numpy's sorted search until they are compiled.

:func:`aonkit._kernels.keys.first_match` and ``match_counts`` join in O(n)
through a direct table or a hash table (0.3-0.5 ms on 200,000 rows here)
but cost about 1.5 s to compile on a new machine; until they are compiled a
stable sort and binary searches stand in (:mod:`.standin`), with the same
results. Every caller passes C-contiguous writable arrays
(:func:`~aonkit._kernels.inputs.owned`), so one specialization serves all.
"""

from __future__ import annotations

import numpy as np

__all__ = ["first_match", "match_counts", "numpy_launch_table", "sorted_first_match", "sorted_match_counts"]


def _sorted(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")  # equal keys stay in position order: the first comes first
    return order, keys[order]


def sorted_first_match(keys: np.ndarray, values: np.ndarray, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`first_match` by a stable sort of ``keys`` and a binary search per probe."""
    out = np.zeros(len(probe), values.dtype)
    if not len(keys) or not len(probe):
        return out, np.zeros(len(probe), np.bool_)
    order, sk = _sorted(keys)
    at = np.minimum(np.searchsorted(sk, probe), len(sk) - 1)
    found = sk[at] == probe
    out[found] = values[order[at[found]]]
    return out, found


def sorted_match_counts(keys: np.ndarray, probe: np.ndarray) -> np.ndarray:
    """:func:`match_counts` by a sort of ``keys`` and two binary searches per probe."""
    sk = np.sort(keys)
    return (np.searchsorted(sk, probe, "right") - np.searchsorted(sk, probe, "left")).astype(np.int64)


def first_match(keys: np.ndarray, values: np.ndarray, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each ``probe`` value: ``values`` at the first position of ``keys`` holding it, and whether any does.

    Parameters
    ----------
    keys, values, probe : numpy.ndarray
        int64; ``values`` as long as ``keys`` (at most ``2**31 - 1`` of them).

    Returns
    -------
    matched : numpy.ndarray
        ``values``' dtype; 0 where unmatched.
    found : numpy.ndarray
        bool.
    """
    from .._kernels.inputs import owned
    from .._kernels.keys import first_match as kernel
    from .standin import kernel_or_standin

    if len(keys) >= 2**31:
        raise ValueError("first_match: at most 2**31 - 1 keys")
    return kernel_or_standin(kernel, sorted_first_match, owned(keys, np.int64), owned(values, np.int64),
                             owned(probe, np.int64))  # fmt: skip


def match_counts(keys: np.ndarray, probe: np.ndarray) -> np.ndarray:
    """For each ``probe`` value, how many entries of ``keys`` (int64) equal it."""
    from .._kernels.inputs import owned
    from .._kernels.keys import match_counts as kernel
    from .standin import kernel_or_standin

    return kernel_or_standin(kernel, sorted_match_counts, owned(keys, np.int64), owned(probe, np.int64))


def numpy_launch_table(rank: int, stream: np.ndarray, ts: np.ndarray, dur: np.ndarray, corr: np.ndarray,
                       codes: np.ndarray, is_api: np.ndarray) -> np.ndarray:  # fmt: skip
    """:func:`aonkit._kernels.joins.launch_table` in numpy: its stand-in until it is compiled (1.5-2 s here).

    The inner join by correlation of CPU rows and GPU rows whose correlation
    some API call (``is_api[codes]``; code -1 reads the last flag) has, pairs
    in CPU row order, then GPU row order, as pandas' merge; rows (rank,
    correlation, CPU duration, GPU duration, launch delay), shape (5, pairs).
    """
    gpu_side = stream != -1
    api = ~gpu_side & is_api[codes]
    wanted = np.isin(corr, np.unique(corr[api]))
    cpu = np.flatnonzero(~gpu_side & wanted)
    gpu = np.flatnonzero(gpu_side & wanted)
    order, g_corr = _sorted(corr[gpu])  # by correlation, each in row order
    gpu = gpu[order]
    lo = np.searchsorted(g_corr, corr[cpu], side="left")
    n = np.searchsorted(g_corr, corr[cpu], side="right") - lo
    starts = np.cumsum(n) - n
    c = np.repeat(cpu, n)
    g = gpu[np.repeat(lo - starts, n) + np.arange(int(n.sum()))]
    out = np.empty((5, len(c)), np.int64)
    out[0] = rank
    out[1], out[2], out[3] = corr[c], dur[c], dur[g]
    out[4] = np.maximum(ts[g] - (ts[c] + dur[c]), 0)
    return out
