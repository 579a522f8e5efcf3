"""A cache's event text read in row groups: a look-up over a few events decodes only theirs, with the same answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import aonkit
from aonkit import _cache_text
from aonkit.cache import text_path

from .conftest import SAMPLE_TRACES


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[aonkit.Trace, Path]:
    """The sample trace and its cache, written with row groups of 64 events (many groups on a small trace)."""
    monkeypatch.setattr(_cache_text, "GROUP_ROWS", 64)
    t = aonkit.load(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz")
    return t, t.save(tmp_path / "c.aon.parquet")


def test_the_text_file_is_in_row_groups(pair: tuple[aonkit.Trace, Path]) -> None:
    t, cache = pair
    meta = pq.ParquetFile(text_path(cache)).metadata
    assert meta.num_row_groups == -(-len(t) // 64) and meta.num_rows == len(t)
    assert pq.ParquetFile(cache).metadata.num_row_groups == 1  # the event columns read without a copy


def test_few_rows_decode_only_their_groups(pair: tuple[aonkit.Trace, Path]) -> None:
    t, cache = pair
    c = aonkit.load(cache)
    rng = np.random.default_rng(0)
    kernels = t.kernels.index.to_numpy()
    rows = rng.choice(kernels, 5, replace=False)  # scattered, unsorted
    rows = np.r_[rows, rows[:2]]  # and repeated
    for key in ("correlation", "stream", "grid", "no such key"):
        assert c.arg_values(key, rows) == t.arg_values(key, rows)
    assert np.array_equal(c.arg_ints_of(["correlation", "device"], rows)["device"], t.arg_ints("device", rows))
    assert c._raw._buf is None  # the whole text was never read
    groups = len(np.unique(rows // 64))
    assert c._raw._decoded == groups  # read once, kept for the next look-ups of these events
    other = np.setdiff1d(np.arange(0, len(t), 640), rows)[:3]  # elsewhere: their groups are read
    assert c.arg_values("correlation", other) == t.arg_values("correlation", other)
    assert groups < c._raw._decoded <= groups + 3
    for i in rows[:3]:
        assert c.event_bytes(int(i)) == t.event_bytes(int(i)) and c.event_json(int(i)) == t.event_json(int(i))
    assert c._raw._buf is None


def test_many_rows_or_many_reads_take_the_whole_text(pair: tuple[aonkit.Trace, Path]) -> None:
    t, cache = pair
    n_groups = -(-len(t) // 64)
    c = aonkit.load(cache)
    every = np.arange(0, len(t), 3)  # every group
    assert c.arg_values("correlation", every) == t.arg_values("correlation", every)
    assert c._raw._buf is not None and c._raw._decoded == 0
    c = aonkit.load(cache)
    for k in [*range(n_groups), 0]:  # one group at a time until they add up to the file: then the whole once
        row = np.array([64 * k])
        assert c.arg_values("name", row) == t.arg_values("name", row)
    assert c._raw._buf is not None and c._raw._decoded <= n_groups
    buf, start, end = c._raw.spans()
    assert [buf[s:e].tobytes() for s, e in zip(start[:50], end[:50])] == [t.event_bytes(i) for i in range(50)]


def test_rows_out_of_range_are_an_index_error(pair: tuple[aonkit.Trace, Path]) -> None:
    """Before the check, a row past the end sent the look-up kernel outside its arrays (a crash)."""
    t, cache = pair
    for trace in (t, aonkit.load(cache)):
        for rows in ([3, len(t) + 5], [len(t)], [-1]):
            with pytest.raises(IndexError, match="outside this trace's"):
                trace.arg_values("correlation", np.array(rows))
        assert trace.arg_values("correlation", np.array([], np.int64)) == []


def _save_both(big: str, small: str, out: str) -> None:
    """In a worker process: a large trace's cache, then a small one's (into the blob the first one left)."""
    aonkit.load(big).save(Path(out) / "big.aon.parquet")
    aonkit.load(small).save(Path(out) / "small.aon.parquet")


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="a forked worker process")
def test_a_worker_reusing_its_text_blob_writes_the_same_cache(tmp_path: Path) -> None:
    """Worker processes gather each cache's text into the buffer of the one before: the same files come out."""
    import multiprocessing

    from aonkit import cache

    big, small = SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz", SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz"
    proc = multiprocessing.get_context("fork").Process(target=_save_both, args=(str(big), str(small), str(tmp_path)))
    proc.start()
    proc.join(120)
    assert proc.exitcode == 0
    assert not cache._SCRATCH  # this process (not a worker) keeps no blob
    here = aonkit.load(small).save(tmp_path / "here.aon.parquet")
    assert not cache._SCRATCH
    worker = tmp_path / "small.aon.parquet"
    assert pq.read_table(text_path(worker)).equals(pq.read_table(text_path(here)))
    assert text_path(worker).read_bytes() == text_path(here).read_bytes()
    assert aonkit.load(worker).equals(aonkit.load(small))
