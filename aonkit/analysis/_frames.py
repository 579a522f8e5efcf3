"""Small helpers that turn HTA-semantics frames into the arrays the Numba kernels take."""

from __future__ import annotations

import numpy as np
import pandas as pd


def rank_columns(df: pd.DataFrame, *cols: str) -> list[np.ndarray]:
    """Contiguous int64 arrays of the frame's columns, for the kernels."""
    return [np.ascontiguousarray(df[c].to_numpy(), dtype=np.int64) for c in cols]


def name_in(col: pd.Series, names: tuple[str, ...]) -> np.ndarray:
    """Per row, whether the name is one of ``names`` (tested once per category of a categorical)."""
    arr = col.array
    if isinstance(arr, pd.Categorical):
        flags = np.append(pd.Index(arr.categories).isin(names), False)
        return flags[np.asarray(arr.codes)]
    return col.isin(names).to_numpy(dtype=bool)
