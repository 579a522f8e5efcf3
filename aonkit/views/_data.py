"""DataFrame to ColumnDataSource without the index column bokeh would add."""

from __future__ import annotations

from typing import Any

import pandas as pd
from bokeh.models import ColumnDataSource


def _column(col: pd.Series) -> Any:
    if not len(col):  # an empty float array is not a valid colour/text column in BokehJS ("invalid color array")
        return []
    numeric = pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)
    return col.to_numpy() if numeric else col.tolist()


def frame_source(df: pd.DataFrame, name: str) -> ColumnDataSource:
    """A source holding ``df``'s columns (numbers as arrays, text and lists as lists), named ``name``."""
    return ColumnDataSource(data={str(c): _column(df[c]) for c in df.columns}, name=name)
