"""Arrays in ordinary pages (aonkit._fresh): zeroed, writable, the asked size and type, either side of 4 MB."""

from __future__ import annotations

import mmap
import multiprocessing
import sys
import time

import numpy as np
import pytest

from aonkit._fresh import Arena, fresh, fresh_arange


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


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the arena is Linux's (madvise flags)")


def _filled(arena: Arena, ahead: int) -> None:
    """Run ``filling`` until the arena is written ``ahead`` (10 s at most: a few ms of work here)."""
    with arena.filling():
        deadline = time.monotonic() + 10
        while arena.written < ahead and time.monotonic() < deadline:
            time.sleep(0.001)


@linux_only
def test_an_arena_writes_ahead_and_hands_out_zeroed_aligned_arrays_then_falls_back() -> None:
    arena = Arena.create(4 << 20, 6 << 20)
    assert arena is not None and arena.written == 0
    _filled(arena, 4 << 20)
    assert arena.written == 4 << 20  # what was asked ahead, no more
    a, b = arena.take(1001, np.int8), arena.take(200_000, np.int64)
    for x, dt in ((a, np.int8), (b, np.int64)):
        assert x.dtype == dt and x.flags.writeable and not x.any() and x.ctypes.data % 64 == 0
    assert b.ctypes.data >= a.ctypes.data + a.nbytes  # no overlap
    a[:], b[:] = 1, 2
    assert (a == 1).all() and (b == 2).all()
    assert arena.used == 1024 + 200_000 * 8
    big = arena.take(700_000, np.int64)  # more than is left: new pages, not the arena's
    assert big.shape == (700_000,) and not big.any() and arena.used == 1024 + 200_000 * 8
    arena.trim()  # the pages written ahead beyond what was taken go back
    assert arena.written == -(-arena.used // mmap.PAGESIZE) * mmap.PAGESIZE
    assert (a == 1).all() and (b == 2).all()  # taken arrays keep their data


@linux_only
def test_an_array_given_back_reads_zero_in_its_whole_pages() -> None:
    arena = Arena.create(0, 1 << 20)
    assert arena is not None
    x = arena.take(100_000, np.int64)  # the first array starts the arena: page-aligned
    x[:] = 5
    arena.give_back(x)
    whole = x.nbytes // mmap.PAGESIZE * mmap.PAGESIZE // 8
    assert 0 < whole < len(x) and not x[:whole].any()  # fresh zero pages again
    assert (x[whole:] == 5).all()  # the last, partly used page is kept


_SEEN: np.ndarray | None = None  # what a forked worker reads of its parent's memory


def _sum_seen() -> int:
    return int(_SEEN.sum())  # type: ignore[union-attr]


@linux_only
def test_a_fork_sees_nothing_of_the_arena_before_its_first_array_and_its_data_after() -> None:
    global _SEEN
    arena = Arena.create(1 << 20, 2 << 20)
    assert arena is not None
    _filled(arena, 1 << 20)
    ctx = multiprocessing.get_context("fork")
    _SEEN = np.frombuffer(arena._map, np.uint8, count=1 << 20)
    _SEEN[::4096] = 1  # (an arena holds zeros until its first array: this shows what a fork would see)
    try:
        with ctx.Pool(1) as pool:
            assert pool.apply(_sum_seen) == 0  # wiped on fork: the child neither shares nor copies the pages
        _SEEN[:] = 0
        _SEEN = arena.take(1000, np.int64)
        _SEEN[:] = 3
        with ctx.Pool(1) as pool:
            assert pool.apply(_sum_seen) == 3000  # an arena holding data is forked as any memory
    finally:
        _SEEN = None


def test_no_arena_off_linux_or_for_nothing() -> None:
    assert Arena.create(1 << 20, 0) is None
    if not sys.platform.startswith("linux"):
        assert Arena.create(1 << 20, 1 << 20) is None
