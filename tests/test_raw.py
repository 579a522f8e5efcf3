"""The scanner's unchecked loads (aonkit._kernels.raw) against plain Python indexing."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from aonkit._kernels.raw import byte_at, word_at


@njit(cache=False)
def _loads(buf, positions):
    words = np.empty(positions.shape[0], np.uint64)
    bytes_ = np.empty(positions.shape[0], np.uint8)
    for k in range(positions.shape[0]):
        words[k] = word_at(buf, positions[k])
        bytes_[k] = byte_at(buf, positions[k])
    return words, bytes_


@pytest.mark.parametrize("writeable", [True, False])
def test_loads_match_python_indexing(writeable: bool) -> None:
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, 1000, dtype=np.uint8)
    buf = data.copy()
    buf.flags.writeable = writeable
    positions = np.concatenate([np.arange(16), rng.integers(0, 1000 - 8, 200), [1000 - 8]]).astype(np.int64)
    words, bytes_ = _loads(buf, positions)
    raw = data.tobytes()
    assert words.tolist() == [int.from_bytes(raw[p : p + 8], "little") for p in positions]
    assert bytes_.tolist() == [raw[p] for p in positions]


def test_strided_arrays_are_refused_at_compile_time() -> None:
    buf = np.arange(64, dtype=np.uint8)[::2]
    with pytest.raises(Exception, match="contiguous 1-D uint8"):
        _loads(buf, np.zeros(1, np.int64))
