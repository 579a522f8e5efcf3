"""Small helpers that turn HTA-semantics frames into the arrays the Numba kernels take."""

from __future__ import annotations

import numpy as np
import pandas as pd


def rank_columns(df: pd.DataFrame, *cols: str) -> list[np.ndarray]:
    """Contiguous int64 arrays of the frame's columns, for the kernels."""
    return [np.ascontiguousarray(df[c].to_numpy(), dtype=np.int64) for c in cols]


def name_flags(col: pd.Series, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(codes, flags): ``flags[codes[i]]`` tells whether row i's name is one of ``names``.

    A categorical column gives its own codes (-1, missing, reads the trailing
    False); another is factorized first.
    """
    arr = col.array
    if isinstance(arr, pd.Categorical):
        codes, cats = np.asarray(arr.codes), pd.Index(arr.categories)
    else:
        codes, cats = pd.factorize(col.to_numpy(), use_na_sentinel=True)
        cats = pd.Index(cats)
    return np.ascontiguousarray(codes), np.append(cats.isin(names), False)
