"""Small helpers that turn HTA-semantics frames into the arrays the Numba kernels take."""

from __future__ import annotations

import numpy as np
import pandas as pd


def rank_columns(df: pd.DataFrame, *cols: str) -> list[np.ndarray]:
    """Contiguous int64 arrays of the frame's columns, for the kernels."""
    return [np.ascontiguousarray(df[c].to_numpy(), dtype=np.int64) for c in cols]


def name_codes(col: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """(codes, categories) of a name column: a categorical's own (-1: missing), else factorized."""
    arr = col.array
    if isinstance(arr, pd.Categorical):
        return np.ascontiguousarray(arr.codes), pd.Index(arr.categories)
    codes, cats = pd.factorize(col.to_numpy(), use_na_sentinel=True)
    return np.ascontiguousarray(codes), pd.Index(cats)


def name_flags(col: pd.Series, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(codes, flags): ``flags[codes[i]]`` tells whether row i's name is one of ``names``.

    Codes are :func:`name_codes`'; code -1 (missing) reads the trailing False.
    """
    codes, cats = name_codes(col)
    return codes, np.append(cats.isin(names), False)
