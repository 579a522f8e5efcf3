"""A cache whose event text stays in its uncompressed JSON source: the same answers, checked chunk by chunk."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import aonkit
from aonkit import _cache_source
from aonkit._filecheck import crc32_buffer
from aonkit.cache import _check, read_sidecar, sidecar_path, text_path

from .conftest import SAMPLE_TRACES, shared_trace_files

KEYS = ("correlation", "External id", "stream", "Input Dims", "no such key")


def _unzipped(src: Path, tmp_path: Path) -> Path:
    out = tmp_path / src.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(src.read_bytes()) if src.name.endswith(".gz") else src.read_bytes())
    return out


def _same_text(c: aonkit.Trace, t: aonkit.Trace) -> None:
    assert c.equals(t)
    for key in KEYS:
        assert c.arg_values(key) == t.arg_values(key)
    for i in range(0, len(t), max(1, len(t) // 40)):
        assert c.event_json(i) == t.event_json(i)


@pytest.mark.parametrize("src", shared_trace_files(), ids=lambda p: p.name)
def test_every_shared_trace_reads_the_same_through_its_source(src: Path, tmp_path: Path) -> None:
    plain = _unzipped(src, tmp_path)
    try:
        t = aonkit.load(plain)
    except aonkit.TraceFormatError:
        pytest.skip("not a loadable trace (a broken file kept on purpose)")
    cache = t.save(tmp_path / "c.aon.parquet", source_text=True)
    side = read_sidecar(cache)
    assert side["text_source"]["bytes"] == plain.stat().st_size
    assert text_path(cache).stat().st_size < max(4096, plain.stat().st_size // 4)  # spans, not the text
    c = aonkit.load(cache)
    rows = np.random.default_rng(0).choice(len(t), min(len(t), 6), replace=False) if len(t) else np.zeros(0, int)
    for key in KEYS:  # a few events first: only their chunks are read
        assert c.arg_values(key, rows) == t.arg_values(key, rows)
    assert c.equals(t) and c.arg_values("correlation") == t.arg_values("correlation")
    for mine, theirs in zip(c._raw.spans(), t._raw.spans()):  # every event's text: the same bytes, same spans
        assert np.array_equal(mine, theirs)
    if t._raw.args_offsets() is not None:
        assert np.array_equal(c._raw.args_offsets(), t._raw.args_offsets())


def test_gzip_or_default_saves_keep_the_text_in_the_cache(tmp_path: Path) -> None:
    gz = SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz"
    t = aonkit.load(gz)
    a = t.save(tmp_path / "a.aon.parquet", source_text=True)  # a gzip source: no spans to refer to
    plain = aonkit.load(_unzipped(gz, tmp_path))
    b = plain.save(tmp_path / "b.aon.parquet")  # the default: self-contained
    for cache in (a, b):
        assert read_sidecar(cache)["text_source"] is None
        _same_text(aonkit.load(cache), t)


@pytest.fixture
def by_ref(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[aonkit.Trace, Path, Path]:
    """The sample trace as plain JSON and its cache by reference, in chunks of 4 KiB and span groups of 64 events."""
    monkeypatch.setattr(_cache_source, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(_cache_source, "GROUP_ROWS", 64)
    src = _unzipped(SAMPLE_TRACES / "gpu_synthetic_rank0.json.gz", tmp_path)
    t = aonkit.load(src)
    cache = t.save(tmp_path / "c.aon.parquet", source_text=True)
    assert read_sidecar(cache)["text_source"]["chunk_bytes"] == 4096
    return t, src, cache


def _flip(path: Path, at: int) -> None:
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    data[at] ^= 0x20
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime: only the checksums can tell


def test_a_few_events_check_only_their_chunks_and_a_changed_chunk_is_refused(by_ref) -> None:
    t, src, cache = by_ref
    size = src.stat().st_size
    _flip(src, size - 100)  # in the last chunk
    c = aonkit.load(cache)
    rows = np.array([3, 40, 41, 500])
    assert c.arg_values("correlation", rows) == t.arg_values("correlation", rows)
    assert c.event_json(7) == t.event_json(7)
    checked = np.flatnonzero(c._raw._checked)
    assert 1 <= len(checked) <= 6 and checked.max() < size // 4096 - 1
    assert c._raw._spans is None and sorted(c._raw._groups) == [0, 7]  # the spans of rows 3..41 and 500 only
    with pytest.raises(aonkit.TraceFormatError, match=r"source has changed .*bytes \d+\.\.\d+ differ") as err:
        c.arg_values("correlation")  # every event: every chunk
    assert err.value.path == str(src)
    _flip(src, 10)  # in a chunk already read: the copy checked then is what look-ups see, not the file now
    assert c.event_json(7) == t.event_json(7)


def test_a_missing_or_resized_source_is_named(by_ref) -> None:
    t, src, cache = by_ref
    moved = src.with_name("elsewhere.json")
    src.rename(moved)
    c = aonkit.load(cache)  # the events table needs no source
    assert c.equals(t)
    with pytest.raises(aonkit.TraceFormatError, match="keeps its event text in its source, which is missing"):
        c.event_json(0)
    moved.rename(src)
    c = aonkit.load(cache)  # loaded while the source is as it was, then cut (a load now would read the source)
    src.write_bytes(src.read_bytes()[:-10])
    with pytest.raises(aonkit.TraceFormatError, match="which has changed") as err:
        c.arg_values("stream", [0])
    assert err.value.path == str(src)


def _resign(cache: Path, drop: tuple[str, ...] = (), **changes: object) -> None:
    side = json.loads(sidecar_path(cache).read_text())
    for key in ("check", *drop):
        side.pop(key)
    side.update(changes)
    side["check"] = crc32_buffer(json.dumps(side).encode())
    sidecar_path(cache).write_text(json.dumps(side))


def test_spans_that_do_not_fit_the_source_are_refused(by_ref) -> None:
    """A spans file with consistent checksums but offsets past the source (a crafted or buggy writer)."""
    t, src, cache = by_ref
    table = pq.read_table(text_path(cache))
    ends = table.column("end").to_numpy().copy()
    ends[5] = src.stat().st_size + 1
    spans = _cache_source.spans_table(table.column("start").to_numpy(), ends, table.column("args_rel").to_numpy())
    _cache_source.write_spans(spans, text_path(cache))
    _resign(cache, text=_check(text_path(cache)))
    with pytest.raises(aonkit.TraceFormatError, match="do not fit its source"):
        aonkit.load(cache).event_json(0)
    _resign(cache, text_source={"bytes": 1})
    with pytest.raises(aonkit.TraceFormatError, match="record of the text's source is malformed"):
        aonkit.load(cache)


def test_a_version_3_cache_still_reads(tmp_path: Path) -> None:
    t = aonkit.load(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz")
    cache = t.save(tmp_path / "c.aon.parquet")
    _resign(cache, drop=("text_source",), version=3)  # what version 3 wrote: no such key
    assert read_sidecar(cache)["version"] == 3
    _same_text(aonkit.load(cache), t)


def test_a_jobs_caches_keep_the_text_in_the_sources(tmp_path: Path) -> None:
    for k in (0, 1):
        _unzipped(SAMPLE_TRACES / f"gpu_synthetic_rank{k}.json.gz", tmp_path)
    eager = aonkit.load(tmp_path)
    with aonkit.load(tmp_path, lazy=True) as job:
        for rank in job.ranks:
            job[rank]  # parsed, its cache written
    caches = sorted(tmp_path.rglob("*.aon.parquet"))
    assert len(caches) == 2 and all(read_sidecar(c)["text_source"] is not None for c in caches)
    with aonkit.load(tmp_path, lazy=True) as again:  # from the caches, the text from the sources
        for rank in again.ranks:
            _same_text(again[rank], eager[rank])


def test_aonkit_cache_of_a_plain_json_keeps_spans_and_a_salvaged_cut_too(tmp_path: Path) -> None:
    from aonkit.cache import cache_path_for
    from aonkit.cli import main

    plain = _unzipped(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz", tmp_path)
    assert main(["cache", str(plain)]) == 0
    cache = cache_path_for(plain)
    assert read_sidecar(cache)["text_source"]["bytes"] == plain.stat().st_size
    _same_text(aonkit.load(cache), aonkit.load(plain))
    cut = tmp_path / "cut.json"  # a salvaged file: its text is still the file's bytes
    text = json.dumps({"traceEvents": [{"ph": "X", "ts": i, "args": {"Comms Id": 2**64 - 1}} for i in range(9)]})
    cut.write_text(text[: len(text) // 2])
    with pytest.warns(aonkit.AonkitWarning):
        s = aonkit.load(cut, salvage=True)
    back = aonkit.load(s.save(tmp_path / "cut.aon.parquet", source_text=True))
    assert read_sidecar(tmp_path / "cut.aon.parquet")["text_source"] is not None
    assert back.equals(s) and back.event_args(0)["Comms Id"] == 2**64 - 1
    assert [back.event_json(i) for i in range(len(s))] == [s.event_json(i) for i in range(len(s))]


def test_a_source_changed_since_its_read_keeps_the_text_in_the_cache(tmp_path: Path) -> None:
    plain = _unzipped(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz", tmp_path)
    t = aonkit.load(plain)
    st = plain.stat()
    os.utime(plain, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # written again after the read
    cache = t.save(tmp_path / "c.aon.parquet", source_text=True)
    assert read_sidecar(cache)["text_source"] is None
    _same_text(aonkit.load(cache), t)
    gz = aonkit.load(SAMPLE_TRACES / "cpu_mlp.pt.trace.json.gz")  # its text is not the file's bytes
    assert read_sidecar(gz.save(tmp_path / "g.aon.parquet", source_text=True))["text_source"] is None
