"""Arrays in ordinary pages (aonkit._fresh): zeroed, writable, the asked size and type, either side of 4 MB."""

from __future__ import annotations

import numpy as np
import pytest

from aonkit._fresh import fresh, fresh_arange


@pytest.mark.parametrize("n", [0, 1, 1000, (4 << 20) // 8, (4 << 20) // 8 + 3, 3_000_001])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_fresh_is_a_zeroed_writable_array(n: int, dtype: type) -> None:
    a = fresh(n, dtype)
    assert a.shape == (n,) and a.dtype == dtype and a.flags.writeable and a.flags.c_contiguous
    assert not a.any()
    a[:] = 7
    assert (a == 7).all()


@pytest.mark.parametrize("n", [0, 5, (1 << 20) - 1, 1 << 20, 2_500_001])
def test_fresh_arange_is_arange(n: int) -> None:
    a = fresh_arange(n)
    assert a.dtype == np.int64 and np.array_equal(a, np.arange(n, dtype=np.int64))
