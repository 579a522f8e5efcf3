"""Large arrays back from pool workers as shared-memory files (aonkit._shipping), through real processes."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import numba
import numpy as np
import pytest

from aonkit import _shipping
from aonkit.lazyjob import new_pool, run_each

pytestmark = pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm here: results take the pipe")


@dataclasses.dataclass(eq=False)
class Part:
    big: np.ndarray
    small: np.ndarray
    label: str


def make(n: int) -> tuple:
    """A result of the shapes the workers send: arrays large and small, nested, of several dtypes."""
    rng = np.random.default_rng(n)
    grid = rng.integers(0, 9, (800, 400)).astype(np.int32)
    return (Part(np.arange(n * 200_000, dtype=np.int64), np.arange(3), f"part {n}"),
            {"flags": rng.random(2_000_000) < 0.5, "grid": grid, "strided": np.arange(600_000)[::2]},
            [np.empty(0, np.float64), np.linspace(0, 1, 300_000)], "text", n)  # fmt: skip


def _shm_folders() -> set[Path]:
    return set(Path("/dev/shm").glob("aonkit-*"))


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def test_pack_writes_large_arrays_and_unpack_maps_them_back_writable() -> None:
    value = make(2)
    with _shipping.folder() as where:
        assert where is not None and stat.S_IMODE(os.stat(where).st_mode) == 0o700  # owner only
        packed = _shipping.pack(value, where)
        assert isinstance(packed[0].big, _shipping.Shipped) and isinstance(packed[0].small, np.ndarray)
        assert isinstance(packed[1]["flags"], _shipping.Shipped) and isinstance(packed[2][0], np.ndarray)
        assert len(os.listdir(where)) == 5
        back = _shipping.unpack(packed)
        assert os.listdir(where) == []  # unlinked as soon as mapped
    assert _same(back, value)
    arr = back[0].big
    assert type(arr) is np.ndarray and arr.flags.writeable and arr.flags.c_contiguous
    assert numba.typeof(arr) == numba.typeof(value[0].big)  # the kernels see the type they were compiled for
    arr[0] = -5  # copy-on-write: this process's own page
    assert arr[0] == -5


def test_pool_results_arrive_equal_and_leave_nothing_behind() -> None:
    before = _shm_folders()
    pool = new_pool(4, 2)
    if pool is None:
        pytest.skip("one core: no pool")
    with pool:
        got = run_each(make, [1, 2, 3, 4], pool, None)
    assert all(_same(g, make(n)) for g, n in zip(got, [1, 2, 3, 4]))
    assert _shm_folders() == before


def _fails(n: int) -> tuple:
    if n == 3:
        raise ValueError("rank 3 is broken")
    return make(n)


def test_a_failing_worker_raises_and_the_folder_goes() -> None:
    before = _shm_folders()
    pool = new_pool(4, 2)
    if pool is None:
        pytest.skip("one core: no pool")
    with pool, pytest.raises(ValueError, match="rank 3 is broken"):
        run_each(_fails, [1, 2, 3, 4], pool, None)
    assert _shm_folders() == before


def test_an_array_that_cannot_be_written_takes_the_pipe(tmp_path: Path) -> None:
    value = make(1)
    packed = _shipping.pack(value, str(tmp_path / "missing"))  # no such folder: as when /dev/shm is full
    assert _same(packed, value) and packed[0].big is value[0].big


@dataclasses.dataclass
class WithDerived:
    data: np.ndarray
    derived: int = dataclasses.field(default=0, init=False)


def test_a_dataclass_with_fields_outside_init_is_sent_whole(tmp_path: Path) -> None:
    value = WithDerived(np.arange(300_000))
    value.derived = 7
    assert _shipping.pack(value, str(tmp_path)) is value and not list(tmp_path.iterdir())
