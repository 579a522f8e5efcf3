"""pandas' ``describe()`` and grouped statistics of integers: the Numba kernels, or pandas' own calls.

A per-group ``describe()`` through pandas costs a Series and a groupby per
group; the same eight numbers come from five numpy calls on the run itself.
The operations are pandas' own (``nanops.nanmean``, ``nanvar``, ``nanmin``,
``nanmax`` and ``quantile``, no bottleneck), on the values as the float64
Series HTA builds (its idle gaps lead with a NaN slot; its queue lengths are
integers, whose sums are exact in any order), so every float is the one
pandas gives, bit for bit, whatever the CPU.
"""

from __future__ import annotations

import numpy as np

__all__ = ["STATS", "describe", "describe_run", "group_stats", "pandas_group_stats"]

STATS = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")
_Q = np.array([25.0, 50.0, 75.0])  # pandas passes its quantiles times 100 to np.percentile


def describe_run(vals: np.ndarray, skip_first: bool = False) -> np.ndarray:
    """count, mean, std, min, 25%, 50%, 75%, max of ``vals`` as pandas' ``describe()`` gives them.

    Parameters
    ----------
    vals : numpy.ndarray
        One-dimensional integer (or float) values.
    skip_first : bool
        ``vals[0]`` stands for a NaN (a missing value): left out of the count,
        the extremes and the quantiles, and summed as 0 (as pandas sums NaN).

    Returns
    -------
    numpy.ndarray
        Eight float64 values; NaN where pandas gives NaN (no values; the std of one).
    """
    out = np.full(8, np.nan)
    v = np.array(vals, dtype=np.float64)  # a copy: the NaN slot is zeroed for the sums
    valid = v[1:] if skip_first else v
    count = valid.shape[0]
    out[0] = count
    if count == 0:
        return out
    if skip_first:
        v[0] = 0.0
    mean = v.sum() / count  # numpy's pairwise sum over every slot, as nanmean
    out[1] = mean
    if count > 1:
        sqr = (mean - v) ** 2  # nanvar's two-pass formula; the NaN slot's square is zeroed
        if skip_first:
            sqr[0] = 0.0
        out[2] = np.sqrt(sqr.sum() / (count - 1))
    out[3] = valid.min()
    out[7] = valid.max()
    out[4:7] = np.percentile(valid, _Q)
    return out


def describe(vals: np.ndarray, skip_first: bool = False) -> np.ndarray:
    """:func:`describe_run` by the Numba kernel (:func:`aonkit._kernels.describe.describe`) once it is compiled.

    The kernel selects the quartiles in one pass (0.4 ms on 185,000 values
    here; the numpy way 6 ms, most of it in ``np.partition``) but costs about 3.5 s to compile; until it is
    compiled the numpy way stands in (:mod:`.standin`). Both equal pandas bit for bit.
    """
    from .._kernels.describe import describe as kernel
    from .standin import kernel_or_standin

    return kernel_or_standin(kernel, describe_run, np.ascontiguousarray(vals, dtype=np.int64), skip_first)


def pandas_group_stats(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`aonkit._kernels.describe.group_stats` by pandas' own groupby (what the kernel reproduces).

    Returns (group keys in order of first appearance, count, sum, min, max,
    mean, sample std (NaN for one value)).
    """
    import pandas as pd

    agg = pd.Series(values).groupby(keys, sort=False).agg(["count", "sum", "min", "max", "mean", "std"])
    cols = [agg[c].to_numpy() for c in ("count", "sum", "min", "max")]
    return (agg.index.to_numpy().astype(np.int64), *(c.astype(np.int64) for c in cols),
            agg["mean"].to_numpy(np.float64), agg["std"].to_numpy(np.float64))  # fmt: skip


def group_stats(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Pandas' ``groupby(keys, sort=False)[values].agg(count, sum, min, max, mean, std)`` of int64 arrays.

    One Numba pass (:func:`aonkit._kernels.describe.group_stats`: 0.3 ms on 60,000
    values in 3,000 groups here, pandas 4.6 ms) once it is compiled (about 1.5 s on a new machine);
    pandas itself until then (:mod:`.standin`). Returns (group keys in order of
    first appearance, count, sum, min, max, mean, std).
    """
    from .._kernels.describe import group_stats as kernel
    from .._kernels.inputs import owned
    from .standin import kernel_or_standin

    return kernel_or_standin(kernel, pandas_group_stats, owned(keys, np.int64), owned(values, np.int64))
