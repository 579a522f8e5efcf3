"""Event JSON text for nsys rows, built column-wise with Arrow string kernels.

An nsys export has no per-event JSON, but ``Trace.event_json``/``event_args``,
``arg_values``/``arg_numbers`` and the Parquet cache all read event text. This
module writes, for every row of a table, a Kineto-shaped object such as::

    {"ph":"X","cat":"kernel","name":"sm90_xmma...","pid":0,"tid":7,
     "ts":1733877926758135.011,"dur":20.672,"args":{"grid":[132,1,1],...}}

without a Python object per row: integers are cast to text and pieces joined
by ``pyarrow.compute``; strings are JSON-escaped once per distinct value and
gathered by code. The text is made only when first asked for (see
``RawEvents``'s loader), so loading an export stays at SQLite's speed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Piece = str | pa.Array


def _lit(text: str) -> pa.Scalar:
    return pa.scalar(text, pa.large_string())


def _int_text(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(np.asarray(values, dtype=np.int64)), pa.large_string())


def us_text(ns: np.ndarray) -> pa.Array:
    """Nanoseconds as exact decimal microseconds (``"1234.005"``)."""
    ns = np.asarray(ns, dtype=np.int64)
    whole = _int_text(np.floor_divide(ns, 1000))
    frac = pc.utf8_lpad(_int_text(np.mod(ns, 1000)), width=3, padding="0")
    return pc.binary_join_element_wise(whole, _lit("."), frac, _lit(""))


def string_text(codes: np.ndarray, dictionary: Sequence[str]) -> pa.Array:
    """JSON string literals of ``dictionary[codes]``, escaped once per distinct value."""
    escaped = pa.array([json.dumps(s) for s in dictionary], pa.large_string())
    return escaped.take(pa.array(np.asarray(codes, dtype=np.int64)))


class JsonRows:
    """Accumulates ``"key":value`` members and joins them into one object text per row.

    Parameters
    ----------
    n : int
        Number of rows.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self._pieces: list[Piece] = []

    def _key(self, key: str) -> None:
        self._pieces.append(("," if self._pieces else "") + json.dumps(key) + ":")

    def const(self, key: str, value: object) -> JsonRows:
        """A member with the same JSON value on every row."""
        self._key(key)
        self._pieces.append(json.dumps(value))
        return self

    def ints(self, key: str, values: np.ndarray) -> JsonRows:
        """An integer member."""
        self._key(key)
        self._pieces.append(_int_text(values))
        return self

    def floats(self, key: str, values: np.ndarray) -> JsonRows:
        """A float member (non-finite values are written as 0)."""
        v = np.asarray(values, dtype=np.float64)
        self._key(key)
        self._pieces.append(pc.cast(pa.array(np.where(np.isfinite(v), v, 0.0)), pa.large_string()))
        return self

    def strings(self, key: str, codes: np.ndarray, dictionary: Sequence[str]) -> JsonRows:
        """A string member: ``dictionary[codes]``."""
        self._key(key)
        self._pieces.append(string_text(codes, dictionary))
        return self

    def raw(self, key: str, text: Piece) -> JsonRows:
        """A member whose JSON text is already made (a nested object or array)."""
        self._key(key)
        self._pieces.append(text)
        return self

    def members(self, codes: np.ndarray, texts: Sequence[str]) -> JsonRows:
        """Extra members given as JSON text without braces (``'"a": 1, "b": 2'``; "" for none), by code.

        Must follow at least one keyed member.
        """
        self._pieces.append(pa.array([("," + t) if t else "" for t in texts], pa.large_string())
                            .take(pa.array(np.asarray(codes, dtype=np.int64))))
        return self

    def int_list(self, key: str, *columns: np.ndarray) -> JsonRows:
        """An array member ``[a, b, ...]`` of integer columns."""
        self._key(key)
        self._pieces.append("[")
        for i, col in enumerate(columns):
            if i:
                self._pieces.append(",")
            self._pieces.append(_int_text(col))
        self._pieces.append("]")
        return self

    def build(self) -> pa.Array:
        """The object texts, one per row."""
        pieces: list[Piece] = ["{", *self._pieces, "}"]
        if not any(isinstance(p, pa.Array) for p in pieces):
            return pa.array(["".join(p for p in pieces if isinstance(p, str))] * self.n, pa.large_string())
        arrays = [p if isinstance(p, pa.Array) else _lit(p) for p in pieces]
        return pc.binary_join_element_wise(*arrays, _lit(""))


def spans_of(texts: list[pa.Array]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes, start offsets, end offsets) of concatenated texts, as ``RawEvents`` wants them."""
    arr = pa.concat_arrays([t.cast(pa.large_string()) for t in texts]) if texts else pa.array([], pa.large_string())
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    return data, offsets[:-1].copy(), offsets[1:].copy()
